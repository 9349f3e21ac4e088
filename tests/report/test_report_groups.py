"""A ranking never shows an interval between stacks of different groups (issue 64 item 4).

Two stacks of one interleaved group are compared within the same rounds: their gap carries
the group's own interval. Two stacks of different groups, or a group's stack beside one
measured on its own (the per-cell path of an interleaved study), were measured minutes
apart: the report, the Markdown summary and the console give their ratio alone, say that
they are in different groups, and never call them tied. The study is real
(tests/report/report_study.py: reference servers on loopback); its cells' group figures are
stored as ``run/interleaved.py`` stores them, in two groups, and one cell as the per-cell
path's.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pywebbench.analysis.ties import ACROSS_GROUPS
from pywebbench.report import ReportPaths, generate
from pywebbench.store import Store
from report_study import FakeStack, StudyPlan, record_study, store_groups

GROUP_A = "cpython3.11 | hello @ c4"
GROUP_B = "cpython3.12 | hello @ c4"
REASON = "--slo: the knee search needs a server of its own"

PLAN = StudyPlan(
    stacks=[
        FakeStack("cpython3.11", "refserver", "fast", delay_ms=0.0),
        FakeStack("cpython3.11", "refserver", "mid", delay_ms=0.3),
        FakeStack("cpython3.11", "refserver", "slow", delay_ms=0.8),
        FakeStack("cpython3.11", "refserver", "lone", delay_ms=2.0, flags={"per_cell": REASON}),
    ],
    loads={"hello": [4]},
    replicates=2,
    warmup=1,
    measured=2,
    duration_s=0.2,
)
#: Each stack's group (None: measured on its own): fast and mid share group A's rounds.
GROUPS = {"fast": GROUP_A, "mid": GROUP_A, "slow": GROUP_B, "lone": None}
SPANS = {
    GROUP_A: ["2026-12-06T10:00:00Z", "2026-12-06T10:04:00Z"],
    GROUP_B: ["2026-12-06T10:09:00Z", "2026-12-06T10:13:00Z"],
}


def _as_groups(store_path: Path, run_id: str) -> None:
    """Store the group figures of ``GROUPS`` (:func:`report_study.store_groups`)."""
    store_groups(
        store_path,
        run_id,
        lambda _, stack: GROUPS[stack.framework],
        processes=PLAN.replicates,
        spans=SPANS,
    )


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, ReportPaths]:
    root = tmp_path_factory.mktemp("groups")
    path = root / "groups.sqlite"
    run_id = record_study(path, PLAN)
    _as_groups(path, run_id)
    return path, run_id, generate(path, [run_id], root / "report")


#: An interval as every surface writes it: "[0.987, 1.013]".
INTERVAL = re.compile(r"\[\d+\.\d+, \d+\.\d+\]")


def _markdown_gaps(md: str) -> dict[str, str]:
    """The ranking's "Gap above" cell of each stack, by framework, from the Markdown."""
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    at, stack = header.index("Gap above"), header.index("Stack")
    out = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != len(header):
            break  # the ranking ends where another table begins
        framework = cells[stack].split("·")[-1].strip()
        out[framework] = cells[at]
    return out


def test_a_gap_between_groups_has_no_interval_in_the_markdown(
    study: tuple[Path, str, ReportPaths],
) -> None:
    md = study[2].markdown.read_text(encoding="utf-8")
    gaps = _markdown_gaps(md)
    assert set(gaps) == {"fast", "mid", "slow", "lone"}, gaps
    assert INTERVAL.search(gaps["mid"]), gaps  # fast and mid: one group's rounds
    for across in ("slow", "lone"):  # group A above group B; a lone cell below group B
        assert not INTERVAL.search(gaps[across]), gaps
        assert ACROSS_GROUPS in gaps[across], gaps
    assert not re.search(r"\| =\d", md)  # no tie across groups
    assert "measured in 2 interleaved groups" in md and "minutes apart" in md
    assert f"per-cell path: {REASON}" in md  # the lone cell is marked, with why


def test_a_gap_between_groups_has_no_interval_in_the_html(
    study: tuple[Path, str, ReportPaths],
) -> None:
    html = study[2].html.read_text(encoding="utf-8")
    for match in re.finditer(r"([\d.]+×) \[CI n/a: ([^\]]+)\]", html):
        assert match.group(2) == ACROSS_GROUPS, match.group(0)
    assert "CI n/a: different groups" in html
    assert "Different groups: these rows were measured in 2 interleaved groups" in html


def test_a_gap_between_groups_has_no_interval_in_the_console(
    study: tuple[Path, str, ReportPaths],
) -> None:
    from pywebbench.run.console import summary_rows, summary_tables
    from rich.console import Console

    with Store(study[0], create=False) as store:
        loaded = store.load_study([study[1]])
    (rows,) = summary_rows(loaded).values()
    by = {r["stack"].split("/")[-1]: r for r in rows}
    assert by["mid"]["vs_above"].low is not None  # within group A
    for across in ("slow", "lone"):
        vs: Any = by[across]["vs_above"]
        assert (vs.low, vs.high, vs.why, vs.tie) == (None, None, ACROSS_GROUPS, False)
        assert not by[across]["tied"]
    console = Console(width=1000, record=True)
    for table in summary_tables(loaded):
        console.print(table)
    text = console.export_text()
    assert "no tie or gap interval is given between them" in text
    assert f"per-cell path: {REASON}" in text


def test_an_open_loop_group_shows_each_stacks_latency_lowest_p99_first() -> None:
    """An open-loop group's line (``flags["group"]["latency"]``, run/interleaved.py): every
    stack at the same offered rate, its p50 and p99 with their intervals over processes,
    lowest p99 first, its achieved req/s and the share of sends left unsent."""
    from types import SimpleNamespace

    from pywebbench.report.tables import group_notes

    def row(label: str, p50: float, p99: float, unsent: int) -> Any:
        g = {
            "group": "hello @ r1000", "span": SPANS[GROUP_A], "stacks": 2, "processes": 3,
            "rounds": 30, "df": 4, "rps": 999.6,
            "latency": {
                "rate": 1000.0, "p50_us": p50, "p50_low": 0.98 * p50, "p50_high": 1.02 * p50,
                "p99_us": p99, "p99_low": 0.97 * p99, "p99_high": 1.03 * p99,
                "offered": 20_000, "unsent": unsent,
            },
        }  # fmt: skip
        return SimpleNamespace(stack=SimpleNamespace(label=label), point=SimpleNamespace(group=g))

    ranking = SimpleNamespace(ranked=[row("slow", 4000, 9000, 0), row("fast", 1000, 3000, 50)])
    (note,) = group_notes(ranking)  # type: ignore[arg-type]
    text = note.ratios
    assert text.startswith("Open loop at 1000 req/s offered")
    assert text.index("fast") < text.index("slow")  # lowest p99 first
    assert "fast p50 1.000 ms [0.980, 1.020], p99 3.000 ms [2.910, 3.090], 1,000 req/s" in text
    assert "0.25% unsent" in text and "slow" in text and "Ratio to" not in text
