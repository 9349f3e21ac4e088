"""Verify one workload of a running stack: does it answer it correctly?

:func:`verify` sends a workload's request (the same :class:`HttpRequest` the load engine
repeats) twice over one keep-alive connection and applies the TechEmpower-style rules of
:mod:`pywebbench.verify.rules`: status, Content-Type, framing, Date and Server headers, then
the exact body or its schema. Standard library only (``http.client``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from http.client import HTTPException

from pywebbench.catalogue.workloads import Workload
from pywebbench.verify.httpclient import Client, Response
from pywebbench.verify.rules import BODY_RULES, CONTENT_TYPES, Findings, check_common

__all__ = ["VerifyReport", "verify"]

REQUESTS_PER_CHECK = 2


@dataclass
class VerifyReport:
    """The outcome of verifying one workload: ``ok`` when there is no problem."""

    workload: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list, repr=False)
    params: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        """One line: PASS/FAIL, the workload and the first problems."""
        if self.ok:
            extra = f" ({len(self.warnings)} warning(s))" if self.warnings else ""
            return f"PASS {self.workload}{extra}"
        return f"FAIL {self.workload}: " + "; ".join(self.problems[:3])


def verify(
    base_url: str,
    workload: Workload,
    *,
    expect_server_header: bool = True,
    expect_date_header: bool = True,
    timeout_s: float = 10.0,
    protocol: str = "http1",
    **params: object,
) -> VerifyReport:
    """Check the server at ``base_url`` (``http://host:port``, or ``unix:/path/to.sock:``)
    on ``workload``.

    ``params`` override the workload's defaults (e.g. ``n=25`` for cpu); a bad parameter
    raises ValueError. ``expect_server_header``: the adapter's ``sends_server_header``
    (a missing Server header is a warning only when expected). ``expect_date_header``:
    False for servers known to send no Date header (then a warning, else a problem).
    ``protocol`` "h2c": the requests go over HTTP/2 with prior knowledge; a server that
    answers in HTTP/1.1 fails with that reason.
    """
    resolved = workload.resolve(**params)
    request = workload.request(**resolved)
    report = VerifyReport(workload.name, params=resolved)
    rule = BODY_RULES.get(workload.name)
    if rule is None:
        raise ValueError(f"no verification rule for workload {workload.name!r}")
    label = f"{request.method} {request.path}"
    with Client(base_url, timeout_s=timeout_s, protocol=protocol) as client:
        for i in range(REQUESTS_PER_CHECK):
            try:
                report.responses.append(client.send(request))
            except (OSError, HTTPException) as exc:
                what = "first" if i == 0 else "second (same connection)"
                report.problems.append(
                    f"{label}: {what} request failed: {type(exc).__name__}: {exc}"
                )
                break
    for resp in report.responses:
        f = Findings(label)
        check_common(
            resp,
            CONTENT_TYPES[workload.name],
            f,
            expect_server_header=expect_server_header,
            expect_date_header=expect_date_header,
            want_charset=workload.name in ("fortunes", "environ", "redis"),
        )
        _merge(report, f)
    if report.responses and all(r.status == 200 for r in report.responses):
        f = Findings(label)
        rule(report.responses, resolved, f)
        _merge(report, f)
    return report


def _merge(report: VerifyReport, f: Findings) -> None:
    for p in f.problems:
        if p not in report.problems:
            report.problems.append(p)
    for w in f.warnings:
        if w not in report.warnings:
            report.warnings.append(w)
