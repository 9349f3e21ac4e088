"""Verification of a user's own app (bring your own app): one path at a time.

A user's path has no fixed body to compare with, so :func:`check_path` checks what the user
declared (``--expect-status``, ``--expect-body``, else any 2xx) and the framing every response
must have (the rule of :func:`pywebbench.verify.rules.check_framing`); a missing Date header
is a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http.client import HTTPException

from pywebbench.catalogue.byo import UserWorkload
from pywebbench.verify.httpclient import Client
from pywebbench.verify.rules import Findings, check_framing

__all__ = ["PathReport", "check_path"]


@dataclass
class PathReport:
    """The outcome of requesting one path of a user's app (shaped like a VerifyReport)."""

    workload: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    status: int | None = None
    seconds: float = 0.0


def check_path(
    base_url: str, workload: UserWorkload, timeout_s: float = 10.0, protocol: str = "http1"
) -> PathReport:
    """GET the workload's path (over ``protocol``); check status (expected, or any 2xx),
    body substring, framing."""
    request = workload.request()
    label = f"{request.method} {request.path}"
    report = PathReport(workload.name, ok=False)
    try:
        with Client(base_url, timeout_s=timeout_s, protocol=protocol) as client:
            resp = client.send(request)
    except (OSError, HTTPException) as exc:
        report.problems.append(f"{label}: {type(exc).__name__}: {exc}")
        return report
    report.seconds = resp.elapsed_s
    report.status = resp.status
    f = Findings(label)
    if workload.expect_status is not None:
        if resp.status != workload.expect_status:
            f.problem(f"status {resp.status}, expected {workload.expect_status}")
    elif not 200 <= resp.status < 300:
        f.problem(f"status {resp.status}, expected 2xx")
    check_framing(resp, f)
    if resp.header("Date") is None:
        f.warn("no Date header")
    if workload.expect_body is not None:
        text = resp.body.decode("utf-8", "replace")
        if workload.expect_body not in text:
            flat = " ".join(text.split())
            shown = flat[:80] + ("..." if len(flat) > 80 else "")
            f.problem(f"body does not contain {workload.expect_body!r} (got {shown!r})")
    report.problems, report.warnings = f.problems, f.warnings
    report.ok = not report.problems
    return report
