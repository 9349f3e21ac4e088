"""Read the parts of a stored LoadResult document the report needs.

The store keeps each iteration's whole engine result (``Iteration.result_json``, fields in
docs/load-engine.md): the latency histogram is ``latency.hist`` (HdrHistogram V2+DEFLATE,
base64) and the per-second series is ``per_second`` (``t`` = seconds since the measured phase
started, ``completed`` responses in that second).
"""

from __future__ import annotations

from typing import Any

from pywebbench.store.model import Iteration


def _result(it: Iteration) -> dict[str, Any]:
    try:
        doc = it.result
    except ValueError:  # a corrupt document must not break the whole report
        return {}
    return doc if isinstance(doc, dict) else {}


def iteration_histogram(it: Iteration) -> str | None:
    """The serialised latency histogram of an iteration, or None when none is stored."""
    return it.latency_histogram()


def per_second_rps(it: Iteration) -> tuple[list[float], list[float]]:
    """(second marks, completed responses per second) of an iteration's measured phase.

    Each second's count is placed at the middle of its second. A last, partial second (the
    window rarely ends on a whole second) is scaled to a rate over its real length.
    """
    rows = _result(it).get("per_second")
    if not isinstance(rows, list):
        return [], []
    ts: list[float] = []
    rps: list[float] = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        t, completed = row.get("t"), row.get("completed")
        if not isinstance(t, int | float) or not isinstance(completed, int | float):
            continue
        length = 1.0
        if it.duration_s and t + 1 > it.duration_s:
            length = max(it.duration_s - t, 0.0)
            if length < 0.1:  # a sliver of a second says nothing about the rate
                continue
        ts.append(t + length / 2)
        rps.append(completed / length)
    return ts, rps
