"""One robustness measurement of a running server: clean, then under a fault mix, then a check
that it still answers normally."""

from __future__ import annotations

import dataclasses
import http.client
import time
from collections.abc import Callable, Sequence
from typing import Any

from pywebbench.faults.mix import FaultSpec
from pywebbench.faults.score import Robustness, measure_of, robustness
from pywebbench.faults.session import FaultReport, FaultSession, target_of

__all__ = ["RobustnessRun", "answered_normally", "measure_robustness"]


def answered_normally(
    url: str, *, grace_s: float = 5.0, timeout_s: float = 2.0
) -> tuple[bool, float | None]:
    """GETs ``url`` on fresh connections until a 2xx arrives or ``grace_s`` passes.

    Returns (answered, seconds until the first 2xx). Servers get a grace period because
    workers held by slow clients are released only as those connections close.
    """
    connect, host, path = target_of(url)
    hostname, _, port = connect.rpartition(":")
    hostname = hostname.strip("[]")
    t0 = time.monotonic()
    while True:
        conn = http.client.HTTPConnection(hostname, int(port), timeout=timeout_s)
        try:
            conn.request("GET", path, headers={"Host": host, "Connection": "close"})
            resp = conn.getresponse()
            resp.read()
            if 200 <= resp.status < 300:
                return True, time.monotonic() - t0
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()
        if time.monotonic() - t0 + 0.25 > grace_s:
            return False, None
        time.sleep(0.25)


@dataclasses.dataclass
class RobustnessRun:
    """A clean run, a run under faults, what the fault clients saw, and the verdict."""

    clean: Any
    faulted: Any
    report: FaultReport
    robustness: Robustness
    #: Seconds from the end of the fault phase to the first normal answer.
    recovery_s: float | None


def measure_robustness(
    url: str,
    specs: Sequence[FaultSpec],
    run_load: Callable[[], Any],
    *,
    alive: Callable[[], bool] | None = None,
    clean_result: Any = None,
    settle_s: float = 1.0,
    grace_s: float = 5.0,
) -> RobustnessRun:
    """Measures one running server clean and under the fault mix ``specs``.

    ``run_load()`` runs the good clients once and returns a ``LoadResult`` (or its dict); it
    is called for the clean run (unless ``clean_result`` is given) and again with the fault
    clients running, after ``settle_s`` so held connections are in place. ``alive()`` says
    whether the server process still runs (default: judged by the answer afterwards).
    """
    clean = clean_result if clean_result is not None else run_load()
    with FaultSession(url, specs) as session:
        time.sleep(settle_s)
        faulted = run_load()
    report = session.report
    assert report is not None
    answered, recovery = answered_normally(url, grace_s=grace_s)
    survived = alive() if alive is not None else answered
    rob = robustness(
        measure_of(clean),
        measure_of(faulted),
        report,
        survived=survived,
        answered_after=answered,
    )
    return RobustnessRun(clean, faulted, report, rob, recovery)
