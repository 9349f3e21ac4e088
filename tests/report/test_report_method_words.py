"""The words under a ranking name the method that produced its figures (issue 66).

A study measures a workload in one of two designs: sequential replicates (each stack's
fresh server processes one after another; req/s the median of the replicates' figures,
intervals over replicates, Welch's t between stacks) or an interleaved group (every stack's
processes up together, loaded in slices of the same rounds; req/s and every interval from
one fit over the slices, with intervals over the server processes). The report of each
design is rendered from a real stored study (tests/report/report_study.py); the interleaved
one is the same study with its cells' group figures stored as ``run/interleaved.py`` stores
them. A footnote, a column's help, the ranking chart's axis or the console's caption that
names the other design's method fails the test.
"""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from pywebbench.report import ReportPaths, generate
from pywebbench.store import Store
from report_study import FakeStack, StudyPlan, record_study, store_groups

PLAN = StudyPlan(
    stacks=[
        FakeStack("cpython3.11", "refserver", "fast", delay_ms=0.0),
        FakeStack("cpython3.11", "refserver", "slow", delay_ms=0.5),
    ],
    loads={"hello": [4]},
    replicates=2,
    warmup=1,
    measured=2,
    duration_s=0.2,
)

#: Phrases that name how a design's figures were made; each may appear only in a report of
#: that design.
METHOD_WORDS: dict[str, list[str]] = {
    "sequential": [
        "median of the replicates' figures",
        "over replicates (Student's t",
        "over the replicates (Student's t",
        "Welch's t",
        "bootstrap from 10",
        "median of replicates",
    ],
    "interleaved": [
        "Interleaved group",
        "fit over the slices",
        "slices of the same",
        "average round",
        "group fit",
    ],
}


def _as_group(store_path: Path, run_id: str) -> None:
    """Every cell of the study in one interleaved group (:func:`report_study.store_groups`)."""
    store_groups(
        store_path,
        run_id,
        lambda cell, _: f"cpython3.11 | {cell.workload} @ {cell.load_point}",
        processes=PLAN.replicates,
    )


@pytest.fixture(scope="module")
def designs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str, ReportPaths]]:
    """The study stored once, copied, and the copy's cells turned into one interleaved group;
    the report of each."""
    root = tmp_path_factory.mktemp("method-words")
    sequential = root / "sequential.sqlite"
    run_id = record_study(sequential, PLAN)
    interleaved = root / "interleaved.sqlite"
    shutil.copyfile(sequential, interleaved)
    _as_group(interleaved, run_id)
    return {
        name: (path, run_id, generate(path, [run_id], root / name))
        for name, path in (("sequential", sequential), ("interleaved", interleaved))
    }


class _RankingWords(HTMLParser):
    """The words a reader of the HTML report's rankings reads: the text and the help
    (``title``) in every card that holds a ranking table (the table, its footnotes)."""

    def __init__(self) -> None:
        super().__init__()
        self.divs = 0  # open <div>s
        self.card: tuple[int, list[str], list[bool]] | None = None  # depth, words, ranking?
        self.words: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if tag == "div":
            self.divs += 1
            if self.card is None and "card" in classes:
                self.card = (self.divs, [], [False])
        if self.card is not None:
            if tag == "table" and "ranking" in classes:
                self.card[2][0] = True
            if a.get("title"):
                self.card[1].append(str(a["title"]))

    def handle_endtag(self, tag: str) -> None:
        if tag != "div":
            return
        if self.card is not None and self.card[0] == self.divs:
            if self.card[2][0]:
                self.words += self.card[1]
            self.card = None
        self.divs -= 1

    def handle_data(self, data: str) -> None:
        if self.card is not None:
            self.card[1].append(data)


def _html_ranking_words(html_path: Path) -> str:
    text = html_path.read_text(encoding="utf-8")
    parser = _RankingWords()
    parser.feed(text)
    words = " ".join(parser.words)
    assert "Req/s" in words, "no ranking card found in the HTML report"
    return re.sub(r"\s+", " ", words)


def _markdown_words(md_path: Path) -> str:
    """Everything in the Markdown summary but its table rows (figures, not words)."""
    lines = md_path.read_text(encoding="utf-8").splitlines()
    return " ".join(line for line in lines if not line.startswith("|"))


def _console_words(store_path: Path, run_id: str) -> str:
    from pywebbench.run.console import summary_tables
    from rich.console import Console

    with Store(store_path, create=False) as store:
        study = store.load_study([run_id])
    console = Console(width=1000, record=True)
    for table in summary_tables(study):
        console.print(table)
    return re.sub(r"\s+", " ", console.export_text())


def _misnamed(design: str, words: str) -> list[str]:
    """The other design's method phrases found in ``words``."""
    return [p for other, ps in METHOD_WORDS.items() if other != design for p in ps if p in words]


#: What a reader reads, by where: the Markdown summary, the HTML ranking cards, the console.
SURFACES = {
    "markdown": lambda store, run_id, paths: _markdown_words(paths.markdown),
    "html": lambda store, run_id, paths: _html_ranking_words(paths.html),
    "console": lambda store, run_id, paths: _console_words(store, run_id),
}


@pytest.mark.parametrize("surface", sorted(SURFACES))
@pytest.mark.parametrize("design", ["sequential", "interleaved"])
def test_the_words_name_the_design_that_made_the_figures(
    designs: dict[str, Any], design: str, surface: str
) -> None:
    words = SURFACES[surface](*designs[design])
    assert _misnamed(design, words) == [], words
    assert any(p in words for p in METHOD_WORDS[design]) or surface == "console", words


def test_the_consoles_title_calls_a_group_fit_no_median(designs: dict[str, Any]) -> None:
    for design in ("sequential", "interleaved"):
        words = _console_words(*designs[design][:2])
        title = re.search(r"hello(?: @ \S+)?: ranked by requests/s \(([^)]*)\)", words)
        assert title is not None, words
        grouped = design == "interleaved"  # its req/s is a level at the average round
        assert ("median" in title.group(1)) is not grouped, title.group(0)


def _chart_axes(html_path: Path) -> list[str]:
    """The requests/s axis titles of the HTML report's ranking charts."""
    text = html_path.read_text(encoding="utf-8")
    return re.findall(r'"text":\s*"(requests/s \([^"]*\))"', text)


@pytest.mark.parametrize("design", ["sequential", "interleaved"])
def test_the_ranking_charts_axis_names_the_design(designs: dict[str, Any], design: str) -> None:
    axes = _chart_axes(designs[design][2].html)
    assert axes, "no ranking chart axis found in the HTML report"
    for axis in axes:
        assert _misnamed(design, axis) == [], axis
        assert any(p in axis for p in METHOD_WORDS[design]), axis


def test_a_groups_stack_is_generator_bound_by_its_flag_not_one_slice(
    designs: dict[str, tuple[Path, str, ReportPaths]], tmp_path: Path
) -> None:
    """In a group, one generator-bound slice does not flag the stack (the runner's verdict
    over its slices, ``run/rows.py``, is the cell's flag); the flag does."""
    import sqlite3

    path, run_id, _ = designs["interleaved"]
    copy = tmp_path / "bound.sqlite"
    shutil.copyfile(path, copy)
    with sqlite3.connect(copy) as db:
        (cell_id,) = db.execute("SELECT min(id) FROM cells").fetchone()
        db.execute(
            "UPDATE iterations SET generator_bound = 1 WHERE id = (SELECT min(id) FROM "
            "iterations WHERE cell_id = ? AND kind = 'measured')",
            (cell_id,),
        )
    one_slice = generate(copy, [run_id], tmp_path / "one").markdown.read_text()
    assert "generator-bound" not in one_slice
    with Store(copy, create=False) as store:
        (cell,) = [c for c in store.load_study([run_id]).cells if c.id == cell_id]
        flags = json.loads(cell.flags_json or "{}")
        flags["generator_bound"] = True
        store.update_cell(cell_id, flags_json=json.dumps(flags))
    flagged = generate(copy, [run_id], tmp_path / "flagged").markdown.read_text()
    assert "generator-bound" in flagged
