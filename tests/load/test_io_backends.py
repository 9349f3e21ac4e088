"""The io_uring and epoll backends are interchangeable: same counts against every misbehaviour
of the reference server, all three load models on each, and the backend is chosen and named."""

from __future__ import annotations

import pytest
from pywebbench import _engine
from pywebbench.load import LoadResult, LoadSpec, run_load

#: Modes that end each request by the timeout: fewer requests keep the test short.
SLOW_MODES = {"huge-body", "drip", "no-response"}


def _outcome(r: LoadResult) -> tuple[int, dict[str, int], dict[str, int]]:
    """What must be identical across backends: requests, status counts, errors per class."""
    return (
        r.requests,
        dict(r.status_counts),
        {name: entry.count for name, entry in r.error_classes.items()},
    )


@pytest.mark.parametrize("mode", _engine.refserver_modes())
def test_backends_give_identical_counts_for_every_refserver_mode(refserver, mode: str) -> None:
    budget = 3 if mode in SLOW_MODES else 40
    outcomes = {}
    for io in ("epoll", "uring"):
        spec = LoadSpec(
            url=f"{refserver.url}/misbehave/{mode}",
            connections=1,
            max_requests=budget,
            # the slow modes end by the timeout; the others get 5 s, so that a stalled
            # response cannot become a timeout on one backend and not the other
            timeout_s=0.2 if mode in SLOW_MODES else 5.0,
            duration_s=5.0,
            io=io,
        )
        r = run_load(spec)
        assert r.io == io
        assert r.requests + r.errors >= budget, (io, _outcome(r))
        outcomes[io] = _outcome(r)
    assert outcomes["epoll"] == outcomes["uring"], outcomes


@pytest.mark.parametrize(
    "model",
    [
        {"pipeline": 8},
        {"keepalive": False},
        {"rate": 2000.0, "duration_s": 1.0},
    ],
    ids=["closed-pipelined", "connection-per-request", "open-loop"],
)
def test_every_load_model_runs_on_io_uring(refserver, model: dict[str, object]) -> None:
    bounds: dict[str, object] = {} if "rate" in model else {"max_requests": 2000}
    r = run_load(
        LoadSpec(url=f"{refserver.url}/", connections=4, io="uring", **bounds, **model)  # type: ignore[arg-type]
    )
    assert r.io == "uring"
    assert r.errors == 0, r.error_classes
    if "rate" in model:
        ol = r.open_loop
        assert ol is not None and ol.offered == 2000  # 1 s at 2,000/s, each send offered
        # Each one offered is answered, or in flight or unsent when the second ends; half of
        # them unfinished needs the server or the generator held for the last half second,
        # where the host steals in slices of milliseconds (tests/load/test_rate_phases.py)
        unfinished = r.connections.in_flight_at_end + ol.unsent_at_end
        assert r.requests + unfinished == ol.offered and unfinished <= 2000 * 0.5
        assert sum(s.completed for s in r.per_second) == r.requests
    else:
        assert r.requests == 2000
        assert r.latency.summary.count == 2000


def test_auto_picks_io_uring_where_the_kernel_has_it(refserver) -> None:
    r = run_load(LoadSpec(url=f"{refserver.url}/", connections=2, max_requests=10))
    forced = run_load(LoadSpec(url=f"{refserver.url}/", connections=2, max_requests=10, io="uring"))
    # This kernel passes the probe (the forced run above would have raised otherwise).
    assert forced.io == "uring" and r.io == "uring"


def test_an_unknown_backend_names_the_field() -> None:
    with pytest.raises(ValueError, match="^io: "):
        LoadSpec(url="http://127.0.0.1:1/", io="kqueue")  # type: ignore[arg-type]
