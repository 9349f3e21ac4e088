"""The cell flags a report shows, in words, with what each one means.

The runner stores them in ``cells.flags_json`` (docs/store-schema.md, docs/steady-state.md).
The console summary, the HTML ranking's notes and the Markdown notes all use these texts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pywebbench import formatting as fmt
from pywebbench.analysis.modes import Consistency, Mode

#: Short note -> what it means (the HTML tooltip, the Markdown and console legend).
FLAG_HELP: dict[str, str] = {
    "not steady (cap)": "a warm-up reached its cap before throughput was steady, and its curve "
    "with the measured iterations shows no steady state either (Barrett's class): the "
    "measured iterations may still include warm-up (docs/steady-state.md)",
    "drift": "throughput trends across the measured iterations (Mann-Kendall p < 0.01 and "
    "more than 5% across the span)",
    "leak": "memory keeps growing with requests once steady: the slope's whole 95% CI lies above "
    "256 KB per 1,000 requests (1 MB on PyPy, whose heap grows for a while after warm-up), "
    "over the measured iterations, and their last half still grows faster than that",
    "uncollected": "memory grew with requests, but stayed below the floor under which PyPy runs "
    "no major collection, as the installed PyPy reported it on this host (its nursery sized "
    "from the cache the CPU reports): nothing was collected yet, so it is not called a leak; "
    "the host's figures are in the report's host facts (docs/interpreters.md#pypys-collector)",
    "memory share": "server processes of its interleaved group were stopped at their share "
    "of this machine's memory (load.memory_budget_mib, else 75% of it shared among the "
    "group's processes, a PyPy process six shares), before their collector's first major "
    "collection: not a leak, the group held more processes than this machine's memory "
    "gives that interpreter's heap; the stack is measured from the processes left, if any "
    "(docs/interpreters.md#pypys-collector)",
    "inconsistent": "the replicates (server processes) settled at different levels, more than "
    "1.25x apart: the modes are shown, not folded into one median (docs/steady-state.md)",
    "classes": "Barrett's class of each replicate: flat, warm-up (settled at its best), "
    "slowdown (settled below an earlier level), no steady state (docs/steady-state.md)",
    "generator-bound": "the load generator's core was saturated: the stack may be faster",
    "errors": "some measured iteration had transport errors",
    "interfered": "other processes took more than load.interference_max of a core from the "
    "pinned cores during a measured iteration, still after its re-measures: the figure is "
    "disturbed (docs/interference.md)",
    "re-measured": "measured iterations that other processes interfered with were measured "
    "again; each attempt's figure replaces the interfered one before it (docs/interference.md)",
    "per-cell path": "measured one cell at a time in an interleaved study (a fresh server per "
    "replicate, one after another), because an interleaved group cannot hold it, for the "
    "reason given: its req/s and 95% CI are over its replicates, measured minutes apart from "
    "the groups, and no interval sets it against a group's stacks "
    "(docs/steady-state.md#the-interleaved-study)",
    "faults interfered": "other processes took more than load.interference_max of a core from "
    "the pinned cores during the fault phase (clean or under attack), still after its "
    "re-measures: the robustness figures are disturbed (docs/faults.md)",
}


def _faults_interfered(stored: object) -> bool:
    """Whether the stored fault phase (``flags.robustness``), or a point of its sweep, stayed
    interfered after its re-measures."""
    if not isinstance(stored, dict):
        return False
    points = (stored.get("curve") or {}).get("points") or []
    return bool(stored.get("interfered")) or any(
        isinstance(p, dict) and p.get("interfered") for p in points
    )


def _leak_note(flags: Mapping[str, Any]) -> str:
    slope = flags.get("leak_bytes_per_1k")
    if isinstance(slope, int | float) and not isinstance(slope, bool) and math.isfinite(slope):
        return f"leak ({fmt.size(slope)}/1k req)"
    return "leak"


def flag_notes(flags: Mapping[str, Any], *, generator_bound: bool = False) -> list[str]:
    """The notes of a cell's stored flags (``generator_bound`` adds that one as well)."""
    notes = []
    if generator_bound or flags.get("generator_bound"):
        notes.append("generator-bound")
    if flags.get("not_steady"):
        notes.append("not steady (cap)")
    if flags.get("drift"):
        notes.append("drift")
    if flags.get("leak"):
        notes.append(_leak_note(flags))
    elif flags.get("uncollected"):
        notes.append("uncollected")
    over = flags.get("over_share")
    if isinstance(over, int) and not isinstance(over, bool) and over > 0:
        notes.append(f"memory share ({over} stopped)")
    if flags.get("interfered"):
        notes.append("interfered")
    remeasured = flags.get("remeasured")
    if isinstance(remeasured, int) and not isinstance(remeasured, bool) and remeasured > 0:
        notes.append(f"re-measured ({remeasured}x)")
    if flags.get("inconsistent"):
        notes.append(_modes_note(flags))
    why = flags.get("per_cell")
    if isinstance(why, str) and why:
        notes.append(f"per-cell path: {why}")
    if _faults_interfered(flags.get("robustness")):
        notes.append("faults interfered")
    classes = flags.get("classes")
    if isinstance(classes, dict) and set(classes) - {"flat", "warm-up"}:
        # only worth a note when some replicate did not settle at its best level
        notes.append("classes (" + ", ".join(f"{n} {c}" for c, n in classes.items()) + ")")
    return notes


def _modes_note(flags: Mapping[str, Any]) -> str:
    found = flags.get("modes")
    if not isinstance(found, list) or not found:
        return "inconsistent"
    return Consistency(tuple(Mode(float(lv), int(n)) for lv, n in found)).describe()


#: What a "tied with #k" note means (not a flag: a property of the ranking).
TIE_HELP = (
    "the 95% CI of the ratio to the stack ranked above contains 1: the difference between "
    "them is not significant (docs/steady-state.md)"
)


def flag_help(note: str) -> str:
    """What a note means: a flag's meaning, the tie's, or empty for other notes."""
    for key, text in FLAG_HELP.items():
        if note == key or note.startswith((key + " (", key + ":")):
            return text
    return TIE_HELP if note.startswith("tied with #") else ""


#: Notes longer than this show as their flag (the text before the first ":") in the HTML
#: ranking, the whole note on demand (issue 66: a failure's reason made a row 130 px tall).
SHORT_NOTE = 28


def short_note(note: str) -> str:
    """The flag a long note shows in the HTML ranking ("failed in verify", "inconsistent");
    a short note, or one without a ":", is shown whole."""
    head, sep, _ = note.partition(":")
    return head if sep and len(note) > SHORT_NOTE else note


def legend(notes: list[str]) -> list[tuple[str, str]]:
    """(flag, meaning) for each distinct flag among ``notes``, in :data:`FLAG_HELP` order."""
    shown = {k for n in notes for k in FLAG_HELP if n == k or n.startswith((k + " (", k + ":"))}
    return [(k, v) for k, v in FLAG_HELP.items() if k in shown]
