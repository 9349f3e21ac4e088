"""The row of an interleaved A/B (docs/ab.md): the paired ratio CHANGE/BASE of one run.

A table of the results store (docs/store-schema.md), written by ``pywebbench ab``. The two
sides are ordinary stacks and cells of the same run, each slice an iteration (``idx`` = the
round); this row holds what only the pairing gives: the ratio, its CI and the verdict.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class AbComparison:
    """The outcome of one A/B run."""

    id: int | None
    run_id: str
    base_cell_id: int
    change_cell_id: int
    ratio: float | None  # CHANGE/BASE of the judged figure (--figure), over the kept rounds
    ci_low: float | None
    ci_high: float | None
    level: float
    ci_width_asked: float  # the stop rule's +- fraction
    verdict: str
    stopped: str  # "ci" | "budget" | "interrupted"
    rounds: int
    rounds_kept: int
    elapsed_s: float
    summary_json: str = "{}"  # the JSON document of `pywebbench ab --format json`
