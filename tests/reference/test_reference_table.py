"""The published table (reference/table.py): the records in reference/runs pooled into
docs/reference-table.md, which is generated, never edited: the committed page is what the
committed records give. It says which machines, how many runs, how many hours apart, and
opens with "Provisional" until issue 65's bar is met."""

from __future__ import annotations

from pathlib import Path

import pytest
from pooled_runs import key, study
from pywebbench.reference.record import dumps, read_folder, record_of
from pywebbench.reference.table import (
    BEGIN,
    END,
    PAGE,
    README,
    RECORDS,
    build,
    generate,
    main,
    readme_block,
    render,
    with_readme_block,
)


def _folder(tmp_path: Path, runs: int, **kw: float) -> Path:
    s = study(runs, **kw)  # type: ignore[arg-type]
    for r in s.runs:
        (tmp_path / f"{r.id}.json").write_text(dumps(record_of(s, r.id)))
    return tmp_path


def test_the_committed_page_is_what_the_committed_records_give() -> None:
    assert PAGE.read_text(encoding="utf-8") == generate(RECORDS), (
        "docs/reference-table.md is stale: python -m pywebbench.reference.table"
    )
    assert main(["--check"]) == 0


def test_the_readmes_headline_table_is_what_the_committed_records_give() -> None:
    """The README's table between its markers is the records' (issue 65: the pooled table
    is the README's headline table), one row per stack, one column per workload."""
    text = README.read_text(encoding="utf-8")
    table = build(read_folder(RECORDS))
    block = readme_block(table)
    assert block in text, "README.md's table is stale: python -m pywebbench.reference.table"
    rows = [line for line in block.splitlines() if line.startswith("| ") and "---" not in line]
    stacks = {p.key.stack for p in table.rows}
    assert len(rows) == 1 + len(stacks)  # the header and one row a stack
    assert "prediction interval" in block and "](docs/reference-table.md)" in block


def test_the_readme_block_replaces_only_what_lies_between_its_markers(tmp_path: Path) -> None:
    table = build(read_folder(_folder(tmp_path, 6, hours=3.0)))
    block = readme_block(table)
    assert block.startswith(BEGIN) and block.endswith(END)
    readme = f"# x\n\nbefore\n\n{BEGIN}\nold\n{END}\n\nafter\n"
    new = with_readme_block(readme, block)
    assert new == f"# x\n\nbefore\n\n{block}\n\nafter\n"
    assert with_readme_block(new, block) == new
    assert "| granian-wsgi" not in block  # stacks are written as the README writes them
    assert "| cpython3.11 · granian-wsgi · raw-wsgi | " in block
    with pytest.raises(ValueError, match="no lines"):
        with_readme_block("# no markers\n", block)


def test_with_no_records_the_page_says_there_are_none_yet(tmp_path: Path) -> None:
    text = generate(tmp_path / "missing")
    assert "**No runs recorded yet**" in text and "| workload |" not in text


def test_three_runs_on_one_day_are_provisional_and_say_what_is_short(tmp_path: Path) -> None:
    text = generate(_folder(tmp_path, 3, hours=1.0))
    first = text.splitlines()[2]
    assert first.startswith("**Provisional**: 3 run(s) from 2 machine(s), the first and last "
                            "2.0 hours apart;")  # fmt: skip
    assert "3 run(s), 6 needed" in first and "2.0 hours apart, 8 needed" in first
    assert "machine(s), 2 needed" not in first
    assert "n/a: 3 runs needed" not in text  # 3 runs: a prediction interval each


def test_six_runs_from_two_machines_a_day_apart_meet_the_bar(tmp_path: Path) -> None:
    folder = _folder(tmp_path, 6, hours=3.0)
    text = generate(folder)
    assert text.splitlines()[2].startswith("**Bar met**: 6 run(s) from 2 machine(s), the first "
                                           "and last 15.0 hours apart")  # fmt: skip
    table = build(read_folder(folder))
    assert not table.provisional and len(table.rows) == 6
    rows = [line for line in text.splitlines() if line.startswith("| hello | c64 |")]
    assert [r.split(" | ")[2] for r in rows] == [key("granian-wsgi"), key("waitress"),
                                                 key("gunicorn-sync")]  # fmt: skip
    assert all(r.endswith("| 6 of 6 | 2 |") for r in rows)
    assert "Leave one run out: " in text and "Median half-width of the prediction" in text
    assert "| run0 | " in text and "| 1.0 MiB, 32.0 MiB |" in text and "0123456789" in text


def test_six_runs_from_one_machine_8_hours_apart_are_published_saying_so(
    tmp_path: Path,
) -> None:
    """Issue 65: if all the work happens on one machine, pool runs at least 8 hours apart
    and say so; three runs a day apart on one machine stay provisional."""
    folder = tmp_path / "one"
    folder.mkdir()
    s = study(6, hours=3.0, machines=1)
    for r in s.runs:
        (folder / f"{r.id}.json").write_text(dumps(record_of(s, r.id)))
    table = build(read_folder(folder))
    assert table.one_machine and not table.provisional
    assert table.shortfalls() == ["1 machine(s), 2 needed"]
    first = render(table).splitlines()[2]
    assert first.startswith("**Published from one machine**: 6 run(s) from 1 machine(s), the "
                            "first and last 15.0 hours apart.")  # fmt: skip
    assert "(1 machine, 15 hours apart)" in readme_block(table)
    (tmp_path / "short").mkdir()
    short = build(read_folder(_folder(tmp_path / "short", 3, hours=12.0)))
    assert short.provisional and not short.one_machine


def test_a_run_without_a_stack_keeps_the_table_provisional(tmp_path: Path) -> None:
    table = build(read_folder(_folder(tmp_path, 6, hours=3.0, lacking=2)))
    assert table.shortfalls() == ["6 of 6 cells pooled from fewer than 6 runs or from one machine"]
    assert table.set_apart == 4 and "4 run figures are to another reference" in render(table)


def test_a_bad_record_stops_the_generator_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.json").write_text("[]")
    page = tmp_path / "page.md"
    readme = tmp_path / "README.md"
    readme.write_text(f"# r\n{BEGIN}\n{END}\n")
    out = ["-o", str(page), "--readme", str(readme)]
    assert main(["--records", str(tmp_path), *out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "not a reference record" in err and "\n" not in err
    assert not page.exists()
    assert main(["--records", str(tmp_path / "none"), *out]) == 0
    assert "No runs are recorded yet" in readme.read_text()
    assert main(["--records", str(tmp_path / "none"), *out, "--check"]) == 0
    page.write_text("edited")
    assert main(["--records", str(tmp_path / "none"), *out, "--check"]) == 1
    readme.write_text("# r, no markers\n")
    capsys.readouterr()
    assert main(["--records", str(tmp_path / "none"), *out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {readme}: no lines") and "\n" not in err


def test_a_cell_measured_in_fewer_than_half_the_runs_is_shown_not_held_to_the_bar(
    tmp_path: Path,
) -> None:
    """Granian's PyPy hello stacks are stopped at their memory budget in every quick study on
    the developers' VM; once, one process of three was kept, and that run's cell made the
    whole table provisional. A cell measured in fewer than half the runs is shown, without a
    prediction interval, named, and not held to the bar; one in half of them is."""
    from dataclasses import replace

    table = build(read_folder(_folder(tmp_path, 6, hours=3.0)))
    assert table.shortfalls() == []
    model = table.rows[0]
    once = replace(
        model,
        key=replace(model.key, stack="pypy3.9/granian-wsgi/flask"),
        run_ids=model.run_ids[:1],
        pred_low=None,
        pred_high=None,
    )
    table.rows.append(once)
    assert table.seldom == [once] and table.shortfalls() == [] and not table.provisional
    text = render(table)
    assert "not held to the bar: pypy3.9/granian-wsgi/flask @ " in text.splitlines()[2]
    assert f"{once.ratio:.2f}× (once: no interval)" in readme_block(table)
    table.rows[-1] = replace(once, run_ids=model.run_ids[:3])  # half the runs: held
    assert table.seldom == [] and table.shortfalls() == [
        "1 of 7 cells pooled from fewer than 6 runs or from one machine"
    ]


def test_a_table_from_two_machines_names_its_cells_from_one(tmp_path: Path) -> None:
    """Runs from two machines, one cell measured on one of them only (a stack that fails on
    the other, or pools to another reference there): the page says the table comes from two
    machines and names that cell with its machine, rather than saying all the work ran on
    one machine."""
    from dataclasses import replace

    table = build(read_folder(_folder(tmp_path, 12, hours=3.0)))
    assert table.machines == 2 and table.shortfalls() == []
    model = table.rows[0]
    xeon = [r.run_id for r in table.records if "Xeon" in r.doc["host"]["cpu_model"]]
    table.rows[0] = replace(model, run_ids=tuple(xeon))
    assert table.thin() == [table.rows[0]] and table.one_machine
    first = render(table).splitlines()[2]
    assert first.startswith("**Published, some cells from one machine**: 12 run(s) from 2 "
                            "machine(s)")  # fmt: skip
    assert f"these have one: {model.key.stack} @ {model.key.workload} c64 (Intel Xeon E5)" in first
    assert "all the work so far ran on one" not in first
