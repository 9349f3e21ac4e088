"""A fake load agent and a fake bring-up, so a whole study runs in a second without a server.

:class:`FakeAgent` answers every load spec with a synthetic but valid
:class:`~pywebbench.load.result.LoadResult` (its throughput a pure function of how many loads
it ran before, its latency a function of the offered rate, so the knee search has a knee) and
calls the progress callback as the engine does (every 0.25 s of simulated time, stopping when
the callback says so). :func:`fake_bench` builds fakes of what a study touches the world
with, as :class:`~pywebbench.run.seams.Seams` (provisioning, services, server
start/verify/stop, metering, the syscalls tracer, the stack sampler of ``--flamegraph``, the
fault clients), which a test hands to the runner through ``FakeBench.executor()``.
Every call that matters is written to one :class:`Timeline`, in order.
"""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pywebbench import bringup
from pywebbench.bringup import BringUp, StackFailure
from pywebbench.load import LoadProgress, LoadSpec
from pywebbench.load.histogram import Histogram
from pywebbench.load.result import HistData, LoadResult
from pywebbench.load.sliced import SlicedResult, SlicePlan, SliceProgress, SliceStats, TargetStats
from pywebbench.meter import MeterSummary
from pywebbench.meter.interference import Interference
from pywebbench.meter.sampler import TreeSnapshot
from pywebbench.provision.venv import ProvisionedEnv
from pywebbench.run.events import Events
from pywebbench.run.executor import LocalExecutor
from pywebbench.run.seams import Seams
from pywebbench.store import Phase, Sample

#: Open-loop rates above this are past the fake server's knee (its p50 jumps to 500 ms).
KNEE_RPS = 1500.0
#: The progress interval of the fake engine, as the real one's.
TICK_S = 0.25


@dataclass
class Timeline:
    """What a study did, in order: loads (their specs), server starts and stops."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def add(self, entry: str, **what: Any) -> None:
        self.entries.append({"entry": entry, **what})


def _summary(values_us: list[int]) -> dict[str, Any]:
    return Histogram.from_values(values_us).summary().model_dump()


def synthetic_result(
    spec: LoadSpec, number: int, progress: Callable[[LoadProgress], Any] | None
) -> LoadResult:
    """The result of load ``number`` (0, 1, ...) of ``spec``: a rate that varies from load
    to load by a fixed pattern, flat within a load; progress ticks until the callback asks
    to stop (as a steady warm-up or a knee probe does) or the duration ends."""
    duration = float(spec.duration_s or 10.0) + float(spec.warmup_s)
    rps = 1000.0 * (1.0 + 0.07 * ((number * 7) % 5))
    t, stopped_at = 0.0, duration
    while progress is not None and t < duration:
        t = min(duration, t + TICK_S)
        stop = progress(
            LoadProgress(
                elapsed_s=round(t, 3),
                phase="measure",
                warmup_s=0.0,
                duration_s=spec.duration_s,
                max_requests=None,
                requests=int(rps * t),
                errors=0,
                timeouts=0,
                warmup_requests=0,
                rps=rps,
            )
        )
        if stop:
            stopped_at = t
            break
    seconds = max(1, int(stopped_at + 1e-6))
    requests = int(rps * stopped_at)
    p50 = 500_000 if (spec.rate or 0.0) > KNEE_RPS else 2_000 + 10 * (number % 5)
    latency = Histogram.from_values([p50] * 90 + [p50 * 2] * 9 + [p50 * 4])
    per_second = [
        {
            "t": s,
            "completed": int(rps),
            "errors": 0,
            "p50_us": p50,
            "p99_us": p50 * 2,
            "hist": latency.encoded,
            "offered_rate": spec.rate,
        }
        for s in range(seconds)
    ]
    open_loop = (
        {
            "arrival": spec.arrival,
            "offered_rate": spec.rate,
            "offered": requests,
            "achieved_rate": min(rps, spec.rate),
            "queue_limit": 0,
            "queued": 0,
            "queue_max": 0,
            "unsent_at_end": 0,
        }
        if spec.rate
        else None
    )
    doc = {
        "version": 1,
        "spec": spec.to_dict(),
        "mode": spec.mode,
        "io": "epoll" if spec.io == "epoll" else "uring",
        "interrupted": False,
        "started_at": 1_700_000_000.0,
        "duration_s": stopped_at,
        "requests": requests,
        "errors": 0,
        "timeouts": 0,
        "rps": rps,
        "status_counts": {"200": requests},
        "error_classes": {},
        "bytes_in": requests * 100,
        "bytes_out": requests * 50,
        "latency": {"hist": latency.encoded, "summary": latency.summary().model_dump()},
        "service_time": None,
        "schedule_lag": None,
        "open_loop": open_loop,
        "connections": {
            "targeted": spec.connections,
            "attempts": spec.connections,
            "established": spec.connections,
            "reopened": 0,
            "in_flight_at_end": 0,
            "pipeline_resent": 0,
            "requests_per_connection": _summary([max(1, requests // spec.connections)]),
        },
        "per_second": per_second,
        "warmup": None,
        "generator": {
            "threads": [],
            "cpu_s": 0.1,
            "cpu_us_per_request": 1.0,
            "nofile_limit": 1024,
            "generator_bound": False,
        },
        "warnings": [],
    }
    return LoadResult.model_validate(doc)


@dataclass
class SlicedModel:
    """What a synthetic sliced run serves: target ``t`` in round ``r`` serves
    ``levels[t]`` requests/s times the host's speed in that round (shared by every target of
    the round: up to ``host`` either way, as a noisy machine's) times its own noise (up to
    ``noise`` either way), seeded; a target in ``warming`` climbs from 60% of its level to
    all of it over that many rounds (a JIT compiling). With ``by_url``, a target's level is
    that of its URL's first key found in it (a process's own, whatever its place among the
    run's targets: a further leg of a group, with processes added, numbers them anew).

    An open loop (the plan's ``load.rate``) serves that rate: its ``levels`` are each
    target's median latency (us), divided by the host's speed and the climb's share, and
    each slice holds ``samples`` seeded latencies (log-normal, ``spread`` its sigma: p99
    about 3.2x p50 at 0.5) in its histogram."""

    levels: Sequence[float]
    host: float = 0.3
    noise: float = 0.01
    warming: dict[int, int] = field(default_factory=dict)
    seed: int = 0
    by_url: dict[str, float] = field(default_factory=dict)
    samples: int = 1000
    spread: float = 0.5

    def rps(self, target: int, rnd: int, host: float, jitter: float, url: str = "") -> float:
        climb = self.warming.get(target, 0)
        share = 0.6 + 0.4 * min(1.0, rnd / climb) if climb else 1.0
        level = next((v for k, v in self.by_url.items() if k in url), None)
        if level is None:
            assert target < len(self.levels), (
                f"no level for target {target} ({url}): a process the group added? give by_url"
            )
            level = self.levels[target]
        return level * host * share * jitter


def synthetic_sliced(
    plan: SlicePlan, model: SlicedModel, progress: Callable[[SliceProgress], Any] | None
) -> SlicedResult:
    """A sliced run of ``plan`` as :class:`SlicedModel` serves it: every target once a
    round in a seeded random order, ``progress`` called after each round (True stops the
    run there, as the engine's "enough")."""
    rng = random.Random(model.seed)
    order = random.Random(plan.seed)
    n = len(plan.targets)
    slices: list[SliceStats] = []
    clock = 1_000_000.0 + sum(plan.warmup_s_of(t) for t in range(n))
    touched = [t for t in range(n) if plan.warmup_s_of(t) > 0]
    before = touched[-1] if touched else None  # the target the next settle drains
    stopped = False
    for rnd in range(plan.rounds):
        host = 1.0 + rng.uniform(-model.host, model.host)
        targets = list(range(n))
        order.shuffle(targets)
        for target in targets:
            jitter = 1.0 + rng.uniform(-model.noise, model.noise)
            clock += plan.settle_s_after(before)
            before = target
            slice_s = plan.slice_s_of(target)
            rate = plan.load.rate
            if rate is None:
                rps = model.rps(target, rnd, host, jitter, plan.targets[target])
                slices.append(
                    SliceStats(
                        index=len(slices), round=rnd, target=target,
                        requests=int(rps * slice_s), errors=0, timeouts=0,
                        duration_s=slice_s, rps=rps, started_at=clock,
                        ended_at=clock + slice_s, p50_us=1000, p99_us=5000,
                    )
                )  # fmt: skip
            else:  # latency: a slower host, a climbing process are slower to answer
                median = model.rps(target, rnd, 1.0 / host, 1.0 / jitter, plan.targets[target])
                climb = model.warming.get(target, 0)
                if climb:  # (rps() scaled by the share: latency divides by it)
                    median /= (0.6 + 0.4 * min(1.0, rnd / climb)) ** 2
                values = [
                    max(1, int(median * math.exp(rng.gauss(0.0, model.spread))))
                    for _ in range(model.samples)
                ]
                hist = Histogram.from_values(values)
                p50, p99 = hist.quantiles([0.5, 0.99])
                summary = hist.summary()
                slices.append(
                    SliceStats(
                        index=len(slices), round=rnd, target=target,
                        requests=int(rate * slice_s), errors=0, timeouts=0,
                        offered=int(rate * slice_s), unsent=0,
                        duration_s=slice_s, rps=rate, started_at=clock,
                        ended_at=clock + slice_s, p50_us=int(p50), p99_us=int(p99),
                        latency=HistData(hist=hist.encoded, summary=summary),
                    )
                )  # fmt: skip
            clock += slice_s
        if progress is not None and progress(
            SliceProgress(elapsed_s=clock, planned_s=plan.planned_s(), slices=list(slices))
        ):
            stopped = True
            break
    mine = {t: [s for s in slices if s.target == t] for t in range(n)}
    return SlicedResult(
        version=1, spec={}, interrupted=False, stopped_early=stopped, elapsed_s=clock,
        slices=slices, threads=[], warnings=[],
        targets=[
            TargetStats(
                url=url, requests=sum(s.requests for s in mine[t]), errors=0,
                error_classes={}, attempts=0, established=0, reopened=0,
            )
            for t, url in enumerate(plan.targets)
        ],
    )  # fmt: skip


@dataclass
class FakeAgent:
    """A load agent that never touches the network; it logs each spec to ``timeline``. Its
    sliced runs are :func:`synthetic_sliced` ones of ``sliced``."""

    timeline: Timeline
    name: str = "fake"
    loads: int = 0
    sliced: SlicedModel | None = None
    #: The requests/s a plain load of a URL serves, by a part of the URL (its port); other
    #: URLs: :func:`synthetic_result`'s pattern.
    rates: dict[str, float] = field(default_factory=dict)

    def run(self, spec: LoadSpec, progress: Any = None) -> LoadResult:
        self.timeline.add("load", spec=json.loads(spec.to_json()))
        result = synthetic_result(spec, self.loads, progress)
        self.loads += 1
        rps = next((v for k, v in self.rates.items() if k in spec.url), None)
        return result if rps is None else result.model_copy(update={"rps": rps})

    def run_sliced(
        self,
        plan: SlicePlan,
        progress: Callable[[SliceProgress], Any] | None = None,
        *,
        interval_s: float,
    ) -> SlicedResult:
        n = len(plan.targets)
        self.timeline.add(
            "sliced",
            targets=list(plan.targets),
            unix_sockets=[plan.unix_socket_of(t) for t in range(n)],
            load_unix_socket=plan.load.unix_socket,
            rounds=plan.rounds,
            slice_s=[plan.slice_s_of(t) for t in range(len(plan.targets))],
            touch_s=[plan.warmup_s_of(t) for t in range(len(plan.targets))],
            settle_s=[plan.settle_s_after(t) for t in range(len(plan.targets))],
        )
        assert self.sliced is not None, "a sliced run needs a SlicedModel"
        return synthetic_sliced(plan, self.sliced, progress)


class FakeGroup:
    """The process group of a fake server: this test process, never exited."""

    def poll(self) -> int | None:
        return None


@dataclass
class FakeServer:
    """A started server as the runner sees it (its pid is this test process's)."""

    name: str
    bind: str
    settings: dict[str, Any]
    log_path: Path
    pid: int = field(default_factory=os.getpid)
    cold_start_s: float = 0.5
    group: FakeGroup = field(default_factory=FakeGroup)

    @property
    def base_url(self) -> str:
        return "unix:/fake/pwb.sock:" if self.bind == "unix" else "http://127.0.0.1:9"

    def alive(self) -> bool:
        return True

    def gil_enabled(self) -> bool | None:
        return True  # what every CPython before 3.13t reports


def idle_tree(pid: int) -> TreeSnapshot:
    """A started server's process tree read once: one process, the same memory every time
    (the real reading scans /proc for the tree's children)."""
    return TreeSnapshot(
        at=0.0, processes=1, cpu_user_s=0.1, cpu_sys_s=0.05, rss_bytes=40_000_000,
        uss_bytes=30_000_000, pss_bytes=32_000_000, threads=3, fds=10, ctx_voluntary=1,
        ctx_involuntary=1, pids=frozenset({pid}),
    )  # fmt: skip


def no_cpu_s(pids: Sequence[int]) -> float:
    """The CPU seconds of the fake servers' trees: none."""
    return 0.0


class FixedProbe:
    """The sampled window's core-speed probe: one fixed reading (stored as the window's
    ``core_rate``)."""

    RATE = 1_000_000.0

    def __init__(self, cpus: Sequence[int]) -> None:
        self.cpus = list(cpus)

    def start(self) -> FixedProbe:
        return self

    def stop(self) -> float:
        return self.RATE


class FakeSampler:
    """The server's metering, the same figures every iteration."""

    probe = None  # no core-speed probe

    def __init__(self, pid: int, **_: Any) -> None:
        self.pid = pid

    def start(self) -> FakeSampler:
        return self

    def stop(self) -> MeterSummary:
        samples = [
            Sample(0, t / 4, t / 40, t / 80, 50_000_000, 40_000_000, None, 3, 10, 1)
            for t in range(1, 9)
        ]
        return MeterSummary(
            samples=samples,
            cpu_user_s=0.2,
            cpu_sys_s=0.1,
            rss_peak_bytes=50_000_000,
            rss_end_bytes=50_000_000,
            threads_peak=3,
            processes_peak=1,
            processes_end=1,
        )


class QuietWindow:
    """The fault phase's interference window on a machine with no neighbour: nothing taken,
    whatever the host does (the real one reads /proc/stat)."""

    def __init__(self, cpus: Sequence[int], server_cpus: Sequence[int]) -> None:
        self.cpus = list(cpus)

    def close(self, server_cpu_s: float | None) -> Interference:
        return Interference(window_s=1.0, others_cpu_s=0.0, steal_s=0.0)


def _robustness_run(url: str, specs: Any, run_load: Callable[[], Any], **kw: Any) -> Any:
    """The fault clients' measurement, without fault clients: the good load clean (unless
    given) and again, and a verdict from the two."""
    from pywebbench.faults import measure_of

    clean = kw.get("clean_result") or run_load()
    faulted = run_load()
    c, f = measure_of(clean), measure_of(faulted)
    retained = round(100.0 * f.rps / c.rps, 3)
    verdict = {
        "retained_pct": retained,
        "p99_clean_ms": (c.p99_us or 0) / 1000,
        "p99_faulted_ms": (f.p99_us or 0) / 1000,
        "good_errors": 0,
        "good_error_rate": 0.0,
        "survived": True,
        "answered_after": True,
        "malformed": {},
        "malformed_accepted": [],
        "score": retained,
    }
    return SimpleNamespace(
        clean=clean,
        faulted=faulted,
        report=SimpleNamespace(to_dict=lambda: {"kinds": len(specs)}),
        robustness=SimpleNamespace(to_dict=lambda: verdict),
        recovery_s=0.5,
    )


class FakeServices(bringup.Services):
    """The services a study's workloads need, running nowhere: their locations only."""

    def __enter__(self) -> FakeServices:
        urls = {"redis": ("PWB_REDIS_URL", "redis://127.0.0.1:9/0")}
        urls["postgres"] = ("PWB_DATABASE_URL", "postgresql://pwb@127.0.0.1:9/pwb")
        self.env = dict(urls[name] for name in self.names)
        return self


@dataclass
class FakeBench:
    """The world of a study, faked (:class:`~pywebbench.run.seams.Seams` of fakes), and the
    :class:`Timeline` its bring-up writes to; :meth:`executor` runs a study in it."""

    timeline: Timeline
    seams: Seams

    def executor(self) -> LocalExecutor:
        """A local executor whose host bench reaches only this fake world."""
        return LocalExecutor(self.seams)


def fake_bench(
    fail_start: tuple[str, ...] = (),
    *,
    services: Callable[[Sequence[str], Path], bringup.Services] = FakeServices,
    fault_clients: Callable[..., Any] = _robustness_run,
) -> FakeBench:
    """The world of a study, faked: provisioning, server start/verify/stop, metering (the
    servers' process trees too), the syscalls tracer, the stack sampler (``--flamegraph``)
    and the fault clients. Servers whose name is in ``fail_start`` fail to start;
    ``services`` and ``fault_clients`` replace the fake services and fault clients."""
    timeline = Timeline()

    def provision(stack: Any, *, progress: Any = None, **_: Any) -> ProvisionedEnv:
        timeline.add("provision", stack=stack.name)
        return ProvisionedEnv(
            venv=Path("/fake/venv"),
            python=Path("/fake/venv/bin/python"),
            packages={stack.server.name: "1.0"},
            key=stack.env_key(),
            cached=True,
            seconds=0.0,
        )

    def start(stack: Any, env: Any, options: bringup.LaunchOptions, ready: str) -> FakeServer:
        timeline.add(
            "start",
            stack=stack.name,
            ready=ready,
            cpus=list(options.cpus),
            workers=options.workers,
            threads=options.threads,
            max_requests=options.max_requests,
            server_options=dict(options.server_options),
            bind=options.bind,
            app_env=sorted(options.app_env),
        )
        if stack.server.name in fail_start:
            raise StackFailure(Phase.START, f"{stack.server.name} did not start (fake)")
        settings = {"workers": options.workers, "threads": options.threads}
        return FakeServer(stack.name, options.bind, settings, options.log_dir / "fake.log")

    def stop(server: FakeServer) -> float:
        timeline.add("stop", stack=server.name)
        return 0.0

    def check(server: Any, stack: Any, workload: Any, params: Any = None, **_: Any) -> Any:
        return bringup.Check(workload.name)

    def traced(pids: Any, load: Callable[[], tuple[int, float]]) -> dict[str, Any]:
        requests, seconds = load()
        return {"requests": requests, "seconds": seconds, "fake": True}

    def sampled(pid: int, pids: Any, load: Callable[[], tuple[int, float]], **_: Any) -> Any:
        requests, seconds = load()
        return {"requests": requests, "seconds": seconds, "fake": "flame"}

    seams = Seams(
        bringup=BringUp(
            provision=provision, services=services, start=start, check=check, stop=stop
        ),
        sampler=FakeSampler,
        tree_snapshot=idle_tree,
        trees_cpu_s=no_cpu_s,
        core_speed_probe=FixedProbe,
        syscalls_tracer=traced,
        stack_sampler=sampled,
        fault_clients=fault_clients,
        interference_window=QuietWindow,
    )
    return FakeBench(timeline, seams)


def recording_events(timeline: Timeline) -> Events:
    """Events that log what the display would show (not live req/s) to ``timeline``."""
    return Events(
        phase=lambda text: timeline.add("phase", text=text),
        cell_start=lambda cell, n: timeline.add("cell_start", cell=cell.label, iterations=n),
        iteration_start=lambda cell, kind: timeline.add("iteration", cell=cell.label, kind=kind),
        cell_done=lambda cell, status, why: timeline.add(
            "cell_done", cell=cell.label, status=str(status), why=why
        ),
        knee=lambda cell, text: timeline.add("knee", cell=cell.label, text=text),
    )
