"""Running fault clients beside a load run, and what they report.

The fault clients are Rust (``pywebbench_engine::faults``); they run on their own thread,
with the GIL released, so a load run (``pywebbench.load``) can go on meanwhile::

    with FaultSession("127.0.0.1:8000", parse_mix("default"), path="/hello") as faults:
        result = agent.run(spec)
    print(faults.report.findings)
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from pywebbench.faults.mix import KINDS, FaultSpec

__all__ = ["FaultReport", "FaultSession", "Finding", "HeldSummary", "KindReport", "target_of"]


@dataclasses.dataclass(frozen=True)
class HeldSummary:
    """How long the server held the connections of one kind (ms, connect to end)."""

    count: int = 0
    min_ms: float = 0.0
    mean_ms: float = 0.0
    p50_ms: float = 0.0
    p90_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0


@dataclasses.dataclass(frozen=True)
class KindReport:
    """What the fault clients of one kind saw."""

    kind: str
    attempts: int
    skipped: int
    #: outcome -> count: response, closed_by_server, reset_by_server, timed_out, open_at_end,
    #: connect_failed, aborted_by_client.
    outcomes: dict[str, int]
    #: status of the first response on a connection -> count.
    status_counts: dict[int, int]
    extra_responses: int
    held: HeldSummary
    #: malformed kinds: rejected (4xx), server_error (5xx), closed, timed_out, accepted.
    malformed: dict[str, int] | None
    bytes_sent: int
    bytes_received: int
    first_error: str | None
    spec: dict[str, Any] | None

    @classmethod
    def from_dict(cls, name: str, d: dict[str, Any]) -> KindReport:
        """From the engine's JSON."""
        return cls(
            kind=name.split("#", 1)[0],
            attempts=int(d.get("attempts", 0)),
            skipped=int(d.get("skipped", 0)),
            outcomes={str(k): int(v) for k, v in (d.get("outcomes") or {}).items()},
            status_counts={int(k): int(v) for k, v in (d.get("status_counts") or {}).items()},
            extra_responses=int(d.get("extra_responses", 0)),
            held=HeldSummary(**(d.get("held") or {})),
            malformed=(
                {str(k): int(v) for k, v in d["malformed"].items()} if d.get("malformed") else None
            ),
            bytes_sent=int(d.get("bytes_sent", 0)),
            bytes_received=int(d.get("bytes_received", 0)),
            first_error=d.get("first_error"),
            spec=d.get("spec"),
        )

    def classification(self) -> str | None:
        """Malformed kinds: the worst class seen (accepted > server_error > timed_out >
        closed > rejected), or None when nothing was classified."""
        if not self.malformed:
            return None
        for cls in ("accepted", "server_error", "timed_out", "closed", "rejected"):
            if self.malformed.get(cls, 0) > 0:
                return cls
        return None


@dataclasses.dataclass(frozen=True)
class Finding:
    """A malformed request the server accepted, or a smuggled request it answered."""

    kind: str
    what: str
    count: int
    status: int
    request: str
    response: str


@dataclasses.dataclass(frozen=True)
class FaultReport:
    """Everything the fault clients saw in one fault phase."""

    duration_s: float
    kinds: dict[str, KindReport]
    findings: list[Finding]
    stopped: bool

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FaultReport:
        """From the engine's JSON (as stored)."""
        return cls(
            duration_s=float(d.get("duration_s", 0.0)),
            kinds={k: KindReport.from_dict(k, v) for k, v in (d.get("kinds") or {}).items()},
            findings=[Finding(**f) for f in d.get("findings") or []],
            stopped=bool(d.get("stopped", False)),
        )

    @classmethod
    def from_json(cls, text: str) -> FaultReport:
        """From the engine's JSON text."""
        return cls.from_dict(json.loads(text))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (round-trips through :meth:`from_dict`)."""
        d = dataclasses.asdict(self)
        for name, k in d["kinds"].items():
            k.pop("kind", None)
            k["status_counts"] = {str(s): n for s, n in k["status_counts"].items()}
            d["kinds"][name] = k
        return d

    def malformed_summary(self) -> dict[str, str]:
        """Per malformed kind that ran, its worst classification."""
        out = {}
        for name, k in self.kinds.items():
            c = k.classification()
            if c is not None:
                out[name] = c
        return out


def target_of(url: str) -> tuple[str, str, str]:
    """(``host:port`` to connect to, ``Host`` header, path) of an ``http://`` URL."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(f"fault target must be an http:// URL with a host, got {url!r}")
    port = parts.port or 80
    host = parts.hostname
    connect = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return connect, parts.netloc, path


class FaultSession:
    """Fault clients running in the background; a context manager.

    ``target`` is an ``http://host:port/path`` URL or ``host:port``; ``path`` (default: the
    URL's path) is where requests go unless a spec names its own. ``max_duration_s`` bounds the
    session even if nobody stops it.
    """

    def __init__(
        self,
        target: str,
        specs: Sequence[FaultSpec],
        *,
        path: str | None = None,
        max_duration_s: float = 600.0,
    ) -> None:
        if "://" in target:
            connect, host, url_path = target_of(target)
        else:
            connect, host, url_path = target, target, "/"
        self._doc = {
            "target": connect,
            "host": host,
            "path": path or url_path,
            "max_duration_s": max_duration_s,
            "faults": [s.to_dict() for s in specs],
        }
        for s in specs:
            if s.kind not in KINDS:
                raise ValueError(f"unknown fault kind {s.kind!r}")
        self._run: Any = None
        self._started = 0.0
        self.report: FaultReport | None = None

    def start(self) -> FaultSession:
        """Starts the fault clients (raises ValueError for a bad spec)."""
        from pywebbench import _engine

        self._run = _engine.faults_start(json.dumps(self._doc))
        self._started = time.monotonic()
        return self

    @property
    def running(self) -> bool:
        """True while the fault clients run."""
        return bool(self._run is not None and self._run.running())

    def stop(self) -> FaultReport:
        """Stops the fault clients (within ~100 ms) and returns their report."""
        if self.report is not None:
            return self.report
        if self._run is None:
            raise RuntimeError("FaultSession.stop() before start()")
        self.report = FaultReport.from_json(self._run.stop())
        self._run = None
        return self.report

    def __enter__(self) -> FaultSession:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._run is not None:
            self.stop()
