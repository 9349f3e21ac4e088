"""Is the server under test still serving? The judgement after each load iteration.

A server that died, answered nothing, or stopped answering for a good part of the window
cannot be measured any further: its cell fails in the phase of that iteration, with the
reason and the server's log tail.
"""

from __future__ import annotations

from pywebbench.bringup import StackFailure
from pywebbench.store import IterationKind, Phase

#: A silence at the end of the window this long (and at least 1 s) means "stopped answering".
STALLED_FRACTION = 0.3


def judge_iteration(
    kind: IterationKind | str,
    *,
    duration_s: float,
    requests: int,
    errors: int,
    timeouts: int,
    stalled_tail_s: float,
    alive: bool,
    exit_code: int | None,
    log_tail: str | None,
) -> StackFailure | None:
    """The failure an iteration's figures reveal, or None when the server kept serving."""
    phase = Phase.WARMUP if str(kind) == IterationKind.WARMUP else Phase.MEASURE
    if not alive:
        how = f" (exit status {exit_code})" if exit_code is not None else ""
        return StackFailure(phase, f"server process exited during load{how}", log_tail)
    if requests and stalled_tail_s < max(1.0, STALLED_FRACTION * duration_s):
        return None
    if requests:
        return StackFailure(
            phase,
            f"server stopped responding: no response in the last {stalled_tail_s:g} s "
            f"of the {duration_s:g} s iteration ({timeouts} timeouts)",
            log_tail,
        )
    what = "no responses"
    if timeouts or errors:
        what += f" ({errors} errors, {timeouts} timeouts)"
    return StackFailure(
        phase,
        f"{what} within {duration_s:g} s: the server hangs or refuses connections",
        log_tail,
    )
