"""Loading with a traffic mix (docs/mix.md): its endpoints, the request the fault phase aims
at, and each endpoint requested once and checked before a study loads it.

The mix itself, its entries and its file, is :mod:`pywebbench.catalogue.mix`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pywebbench.catalogue.mix import MixEntry
from pywebbench.load.spec import LoadSpec


def endpoint_entries(entries: Sequence[MixEntry]) -> dict[str, list[MixEntry]]:
    """The entries of each endpoint (its name), in first-seen order."""
    out: dict[str, list[MixEntry]] = {}
    for e in entries:
        out.setdefault(e.name, []).append(e)
    return out


def fault_entry(entries: Sequence[MixEntry]) -> MixEntry | None:
    """The request of a mix the fault phase aims at (``run --faults``, docs/faults.md): its
    fault clients send their requests to this entry's path, and the server's recovery is
    checked by a GET of it answering 2xx. The heaviest GET entry that expects a 2xx (the
    first of equal weights; an entry expecting nothing named takes any status); None when
    the mix has none."""
    best: MixEntry | None = None
    for e in entries:
        answers_2xx = not e.expect_status or any(200 <= s < 300 for s in e.expect_status)
        if e.method == "GET" and answers_2xx and (best is None or e.weight > best.weight):
            best = e
    return best


@dataclass(frozen=True)
class EndpointCheck:
    """One endpoint of a mix requested once: its name, the request sent (its first entry's
    method and path) and what was wrong (None: it answered a status the entry expects)."""

    name: str
    method: str
    path: str
    problem: str | None = None

    @property
    def ok(self) -> bool:
        """It answered as its entry expects."""
        return self.problem is None

    @property
    def label(self) -> str:
        """``endpoint "GET /items/{id}" (GET /items/1)``."""
        return f"endpoint {json.dumps(self.name, ensure_ascii=False)} ({self.method} {self.path})"


def check_endpoints(spec: LoadSpec) -> list[EndpointCheck]:
    """Request each endpoint of ``spec``'s mix once (its first entry, one connection, the
    spec's protocol and target) and check the status against the entry's expectation.

    Returns:
        One check per endpoint, in the mix's order.
    """
    from pywebbench.load.agent import run_load

    checks = []
    for name, entries in endpoint_entries(spec.mix).items():
        entry = entries[0]
        probe = spec.replace(
            mix=[entry], max_requests=1, connections=1, threads=1, duration_s=None,
            rate=None, rate_phases=[], warmup_s=0.0, pipeline=1, streams=1, keepalive=True,
            fresh_share=0.0, requests_per_connection=0, queue_limit=None, faults=[],
            start_at_unix_ns=None,
        )  # fmt: skip
        r = run_load(probe)
        expect = list(entry.expect_status) or list(spec.expect_status)
        problem: str | None = None
        if r.requests == 1 and r.errors == 0:
            pass
        elif r.requests == 1:
            got = ", ".join(r.status_counts)
            problem = f"status {got}, expected {' or '.join(map(str, expect))}"
        else:
            problem = next((f"{k}: {e.example}" for k, e in r.error_classes.items()), None)
            problem = problem or "no response"
        checks.append(EndpointCheck(name, entry.method, entry.path, problem))
    return checks


def verify_endpoints(spec: LoadSpec) -> list[str]:
    """Each endpoint of ``spec``'s mix requested once and checked (:func:`check_endpoints`).

    Returns:
        One line per endpoint that failed, naming it (empty: all passed).
    """
    return [f"{c.label}: {c.problem}" for c in check_endpoints(spec) if not c.ok]
