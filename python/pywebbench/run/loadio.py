"""The runner's side of the load engine contract: build a LoadSpec, read a LoadResult.

Everything the runner knows about :mod:`pywebbench.load` is in this module, so the rest of
``run/`` deals in plain values. Load goes through a load agent (``LocalAgent`` today), so
nothing here assumes the generator runs on the server's host.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from pywebbench.catalogue.workloads import HttpRequest
from pywebbench.load.result import LoadResult, result_document


class LoadAgent(Protocol):
    """Runs a load spec somewhere and returns the result (``pywebbench.load.LocalAgent``)."""

    def run(self, spec: Any, progress: Callable[[Any], bool | None] | None = None) -> Any: ...


def local_agent() -> LoadAgent:
    """The in-process agent of :mod:`pywebbench.load`."""
    from pywebbench.load import LocalAgent

    return LocalAgent()


def build_spec(
    base_url: str,
    request: HttpRequest,
    *,
    connections: int,
    duration_s: float,
    timeout_s: float,
    cpus: Sequence[int],
    rate: float | None = None,
) -> Any:
    """A :class:`pywebbench.load.LoadSpec` for one iteration of a cell."""
    from pywebbench.load import LoadSpec

    kwargs: dict[str, Any] = {
        "url": base_url.rstrip("/") + request.path,
        "method": request.method,
        "headers": [tuple(h) for h in request.headers],
        "connections": connections,
        "threads": 1,
        "duration_s": duration_s,
        "timeout_s": timeout_s,
        "cpus": list(cpus),
    }
    if request.body:
        kwargs["body"] = bytes(request.body)  # sent byte for byte (base64 in the JSON spec)
    if rate is not None:
        kwargs["rate"] = rate
    return LoadSpec(**kwargs)


def result_dict(result: LoadResult | dict[str, Any]) -> dict[str, Any]:
    """The LoadResult as a JSON-ready dict (what is stored in ``iterations.result_json``)."""
    return result_document(result)


def _num(d: dict[str, Any], *names: str, default: float | None = None) -> Any:
    for name in names:
        node: Any = d
        for part in name.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                node = None
                break
        if node is not None and not isinstance(node, dict | list):
            return node
    return default


def _sum_counts(node: Any) -> int:
    """Total of an error taxonomy: {"class": {"count": n, ...}} or {"class": n}."""
    if isinstance(node, int | float):
        return int(node)
    if isinstance(node, dict):
        if "count" in node and isinstance(node["count"], int | float):
            return int(node["count"])
        return sum(_sum_counts(v) for v in node.values())
    if isinstance(node, list):
        return sum(_sum_counts(v) for v in node)
    return 0


def columns(result: Any) -> dict[str, Any]:
    """The summary columns of the ``iterations`` table from a LoadResult."""
    d = result_dict(result)
    duration = float(_num(d, "duration_s", "elapsed_s", default=0.0) or 0.0)
    requests = int(_num(d, "requests", "completed", "responses", default=0) or 0)
    rps = _num(d, "rps", "requests_per_s")
    if rps is None:
        rps = requests / duration if duration > 0 else 0.0
    errors_node = d.get("errors")
    errors = _sum_counts(errors_node) if errors_node is not None else 0
    errors = int(_num(d, "errors_total", "error_count", default=errors) or 0)
    status = d.get("status_counts") or d.get("statuses") or {}
    non_2xx = _num(d, "non_2xx")
    if non_2xx is None:
        non_2xx = sum(int(v) for k, v in status.items() if not str(k).startswith("2"))
    lat = d.get("latency") or {}
    if isinstance(lat, dict) and "corrected" in lat and isinstance(lat["corrected"], dict):
        lat = lat["corrected"]
    summary = lat.get("summary", lat) if isinstance(lat, dict) else {}
    pct = summary.get("percentiles") or {}

    def p(*keys: str) -> float | None:
        for k in keys:
            if k in summary and summary[k] is not None:
                return float(summary[k])
            if k in pct and pct[k] is not None:
                return float(pct[k])
        return None

    return {
        "duration_s": duration,
        "requests": requests,
        "errors": errors,
        "non_2xx": int(non_2xx),
        "timeouts": int(_num(d, "timeouts", "censored", "errors.timeout.count", default=0) or 0),
        "rps": float(rps),
        "latency_mean_us": p("mean", "mean_us"),
        "latency_p50_us": p("p50", "p50_us", "50", "50.0"),
        "latency_p90_us": p("p90", "p90_us", "90", "90.0"),
        "latency_p99_us": p("p99", "p99_us", "99", "99.0"),
        "latency_p999_us": p("p999", "p99_9", "p999_us", "99.9"),
        "latency_max_us": p("max", "max_us"),
        "bytes_in": _num(d, "bytes_in", "bytes_read"),
        "bytes_out": _num(d, "bytes_out", "bytes_written"),
        "generator_cpu_s": _num(d, "generator.cpu_s", "generator_cpu_s"),
        "generator_bound": bool(
            _num(d, "generator.generator_bound", "generator_bound", default=False)
        ),
        "interrupted": bool(d.get("interrupted", False)),
    }


def stalled_tail_s(result: Any) -> float:
    """Seconds at the end of the run's per-second series with no completed response.

    A server that answers for a while and then hangs shows up here even though the
    iteration as a whole has requests. The last, partial second is not counted.
    """
    d = result_dict(result)
    series = d.get("per_second") or []
    duration = float(d.get("duration_s") or 0.0)
    full = [s for s in series if float(s.get("t", 0)) + 1 <= duration + 1e-6]
    stalled = 0
    for sec in reversed(full):
        if int(sec.get("completed", 0)) > 0:
            break
        stalled += 1
    return float(stalled)


class LiveRate:
    """Requests/s over the last progress interval, from cumulative progress snapshots.

    Snapshots (JSON text, dicts or objects) carry ``elapsed_s`` and ``requests`` (measured
    phase) or ``warmup_requests``; a snapshot that already has ``rps`` is used as is.
    """

    def __init__(self) -> None:
        self._last: tuple[float, int] | None = None

    def update(self, snapshot: Any) -> float | None:
        if isinstance(snapshot, str):
            try:
                snapshot = json.loads(snapshot)
            except ValueError:
                return None
        if not isinstance(snapshot, dict):
            snapshot = {k: getattr(snapshot, k) for k in dir(snapshot) if not k.startswith("_")}
        direct = _num(snapshot, "rps", "interval_rps")
        if isinstance(direct, int | float) and not math.isnan(direct):
            return float(direct)
        elapsed = _num(snapshot, "elapsed_s")
        done = _num(snapshot, "requests", default=0) or 0
        done += _num(snapshot, "warmup_requests", default=0) or 0
        if not isinstance(elapsed, int | float):
            return None
        last, self._last = self._last, (float(elapsed), int(done))
        if last is None or elapsed <= last[0]:
            return None
        return max(0.0, (done - last[1]) / (elapsed - last[0]))
