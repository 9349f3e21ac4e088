"""Load from several agents at once: Ray actors spread over a cluster's nodes, all starting at
one agreed wall-clock instant, their results merged exactly (docs/scale-out.md).

The pipeline of one distributed load:

1. :func:`split_spec` shares connections, rate and request budget between the agents;
2. a placement group with the SPREAD strategy reserves one bundle of CPUs per agent, one per
   node as far as the cluster allows, and an :class:`_AgentActor` is started in each bundle;
3. each agent is pinned to its own cores of its node (:func:`assign_cpus`);
4. every agent's spec carries the same ``start_at_unix_ns``: each engine waits for that
   instant itself, and reports when it actually started (``launched_at_unix_ns``);
5. the results are merged by the engine (histograms merged, counts and per-second series
   summed on a common time base, error classes unioned) into a :class:`DistributedLoad`
   that keeps every agent's own result, its node, and the start skew.

Ray is imported only inside these functions: the single-machine path needs no Ray.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pywebbench.load.agent import LoadProgress, ProgressFn, run_load
from pywebbench.load.result import LoadResult
from pywebbench.load.spec import LoadSpec

#: The start instant lies this far beyond the time a round trip to every agent took.
START_MARGIN_S = 0.25
#: Round trips allowed for the start instant to reach every agent.
START_ROUND_TRIPS = 4
#: How long to wait for the placement group and the agents to come up.
PLACEMENT_TIMEOUT_S = 120.0
#: How long after its planned end a run's results may take to come back.
RESULT_GRACE_S = 30.0
#: After Ctrl-C or a stop, how long the agents get to hand back their partial results.
STOP_GRACE_S = 10.0
#: Start skew above which a distributed result carries a warning (the bound on one host).
SKEW_WARN_MS = 5.0
#: How often the driver polls the agents' live progress.
POLL_S = 0.25


class RayUnavailable(RuntimeError):
    """Ray is needed for this command and is not installed, or cannot start or be joined.

    ``field`` names the setting at fault (``agents``, ``ray_address``), or is None; the
    message is ``"<field>: <why>"``, and a command names its own flag for the field.
    """

    def __init__(self, why: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {why}" if field else why)
        self.field = field
        self.why = why


class AgentsError(ValueError):
    """The agents cannot be started as asked: ``field`` (``agents``, or a
    :class:`~pywebbench.load.LoadSpec` field) and ``why``; the message is ``"<field>: <why>"``."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field}: {why}")
        self.field = field
        self.why = why


def import_ray() -> ModuleType:
    """The ``ray`` module, or :class:`RayUnavailable` with a one-line fix."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "Ray is not installed; install it with: pip install 'pywebbench[ray]'"
        ) from None
    return ray


def local_ray_env() -> None:
    """Settings for the Ray processes started from here (they inherit the environment).

    - Longer than Ray's defaults to come up: on a busy machine a node's agents can take more
      than 15 s.
    - Workers at nice 0, not Ray's default 15: a server or load generator started from a
      worker inherits its niceness and would lose its core to any nice-0 process (Ray's own
      daemons among them), which the local executor's runs do not (see
      :func:`measuring_priority`).
    """
    os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
    os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
    os.environ.setdefault("RAY_worker_niceness", "0")


def measuring_priority() -> None:
    """Put this Ray worker back at nice 0 before it measures, or stop with the fix.

    Ray starts its workers at nice 15 (``RAY_worker_niceness``); measured at 15 against
    nice-0 neighbours, a stack loses throughput that the local executor's runs keep (a
    2-node local cluster measured granian 5-9% lower that way). Root may lower the value;
    anyone else needs the cluster started with ``RAY_worker_niceness=0``.
    """
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if current <= 0:
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, 0)
    except PermissionError:
        raise RuntimeError(
            f"this Ray worker runs at nice {current} and may not lower it: start Ray on "
            "every node with RAY_worker_niceness=0 (docs/scale-out.md)"
        ) from None


#: Ray's switch that makes a node use the loopback address (meant for laptops; any OS).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def loopback_only() -> None:
    """Make the Ray started from this process (and its children, which inherit the
    environment) bind and talk on 127.0.0.1 only, not on the host's network address: a
    one-machine instance needs nothing else. Takes effect only before ``ray`` is imported."""
    os.environ[LOOPBACK_ENV] = "0"


@contextmanager
def ray_session(address: str | None = None, *, local_cpus: int = 0) -> Iterator[ModuleType]:
    """Ray, connected for the duration of the block.

    ``address`` (``HOST:6379``): join that running cluster and disconnect after. None: use the
    Ray this process is already connected to, else start a local Ray instance (with at least
    ``local_cpus`` logical CPUs, on 127.0.0.1 only) and stop it after, leaving no process
    behind.
    """
    if address is None and "ray" not in sys.modules:
        loopback_only()
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    import logging

    # A raylet gives its agents 15 s to come up, then dies: on a busy machine the first local
    # start can miss that (cold caches); the second one usually makes it.
    attempts = 2 if address is None else 1
    # ray.init makes SIGTERM exit the process at once: keep the caller's handler (a run
    # treats SIGTERM like Ctrl-C and stores what it measured).
    on_sigterm = signal.getsignal(signal.SIGTERM)
    for attempt in range(attempts):
        try:
            if address is None:
                local_ray_env()
                ray.init(
                    address="local",  # a new instance, whatever RAY_ADDRESS says
                    num_cpus=max(os.cpu_count() or 1, local_cpus),
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                )
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            if on_sigterm is not None:
                signal.signal(signal.SIGTERM, on_sigterm)
            break
        except Exception as e:  # Ray raises bare Exception when a node does not come up
            ray.shutdown()  # whatever did start
            if attempt + 1 < attempts:
                continue
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        if address:
            raise RayUnavailable(
                f"cannot join the Ray cluster at {address}: {first}", "ray_address"
            ) from None
        raise RayUnavailable(f"cannot start a local Ray: {first}", "agents") from None
    try:
        yield ray
    finally:
        ray.shutdown()


def _share(total: int, parts: int, i: int) -> int:
    """Part ``i`` of ``total`` split as evenly as possible into ``parts``."""
    return total // parts + (1 if i < total % parts else 0)


def split_spec(spec: LoadSpec, agents: int) -> list[LoadSpec]:
    """The spec of each of ``agents`` agents: connections and request budget shared out, the
    rate split in proportion to connections, each agent with its own arrival seed.

    Raises:
        AgentsError: fewer connections (or requests) than agents.
    """
    if agents < 1:
        raise AgentsError("agents", "must be >= 1")
    if spec.connections < agents:
        raise AgentsError(
            "connections",
            f"{agents} agents need at least {agents} connections (got {spec.connections})",
        )
    if spec.max_requests is not None and spec.max_requests < agents:
        raise AgentsError("max_requests", f"{agents} agents need at least {agents} requests")
    specs = []
    for i in range(agents):
        conns = _share(spec.connections, agents, i)
        changes: dict[str, Any] = {
            "connections": conns,
            "threads": min(spec.threads, conns),
            "seed": spec.seed + i,
        }
        if spec.rate is not None:
            changes["rate"] = spec.rate * conns / spec.connections
        if spec.max_requests is not None:
            changes["max_requests"] = _share(spec.max_requests, agents, i)
        specs.append(spec.replace(**changes))
    return specs


@dataclass(frozen=True)
class AgentPlace:
    """Where one agent runs: its Ray node, host, and the CPUs its process may use there."""

    name: str
    node_id: str
    host: str
    ip: str
    pid: int
    node_cpus: list[int]
    cpu_model: str

    @property
    def node(self) -> str:
        """The node as people read it: ``host (ip)``."""
        return f"{self.host} ({self.ip})"


def assign_cpus(
    places: Sequence[AgentPlace], per_agent: int, pool: Sequence[int]
) -> list[list[int]]:
    """Each agent's cores: agents on one node take consecutive, distinct cores of ``pool``
    (or of the node's own CPUs when ``pool`` is empty), wrapping round when there are more
    agents than cores."""
    seen: dict[str, int] = {}
    out = []
    for place in places:
        cores = list(pool) or place.node_cpus or [0]
        k = seen.get(place.node_id, 0)
        seen[place.node_id] = k + 1
        out.append([cores[(k * per_agent + j) % len(cores)] for j in range(per_agent)])
    return out


@dataclass(frozen=True)
class AgentOutcome:
    """One agent's part of a distributed load: where it ran, what it ran, what it measured
    (None when it failed) and why it failed."""

    place: AgentPlace
    spec: LoadSpec
    result: LoadResult | None
    failure: str | None = None

    @property
    def start_lateness_us(self) -> float | None:
        """How long after its agreed instant the agent's engine actually started."""
        if self.result is None or self.result.launched_at_unix_ns is None:
            return None
        return (self.result.launched_at_unix_ns - (self.spec.start_at_unix_ns or 0)) / 1e3

    @property
    def schedule_lag_p99_us(self) -> float | None:
        """Open loop: the 99th percentile of how late this agent dispatched its sends."""
        lag = self.result.schedule_lag if self.result is not None else None
        return float(lag.summary.p99) if lag is not None else None


@dataclass(frozen=True)
class DistributedLoad:
    """The outcome of a load run by several agents at once."""

    agents: list[AgentOutcome]
    #: The engine's merge of every agent that finished (None when none did).
    merged: LoadResult | None
    interrupted: bool = False

    @property
    def failures(self) -> list[AgentOutcome]:
        """The agents that produced no result."""
        return [a for a in self.agents if a.result is None]

    @property
    def start_skew_ms(self) -> float | None:
        """Spread of the agents' actual starts around their agreed instants (ms)."""
        late = [a.start_lateness_us for a in self.agents if a.start_lateness_us is not None]
        return (max(late) - min(late)) / 1e3 if late else None

    @property
    def generator_bound(self) -> bool:
        """True when any agent's generator may have limited the result."""
        return any(a.result.generator_bound for a in self.agents if a.result is not None)

    def failure_message(self) -> str | None:
        """One line naming each failed agent, its node and the reason; None when all finished."""
        if not self.failures:
            return None
        return "; ".join(f"{a.place.name} on {a.place.node}: {a.failure}" for a in self.failures)


class _AgentActor:
    """One load agent, run as a Ray actor: its share of the load on the local engine.

    Threaded (``max_concurrency=2``) so that ``snapshot`` and ``stop`` are served while
    ``run`` is busy.
    """

    def __init__(self) -> None:
        measuring_priority()
        self._stop = threading.Event()
        self._enough = threading.Event()
        self._last: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        """Where this agent runs (node, host, pid, CPUs and CPU model)."""
        import ray

        model = ""
        try:
            with open("/proc/cpuinfo") as f:
                model = next((ln.split(":", 1)[1].strip() for ln in f if "model name" in ln), "")
        except OSError:
            pass
        return {
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),  # type: ignore[no-untyped-call]
            "pid": os.getpid(),
            "node_cpus": sorted(os.sched_getaffinity(0)),
            "cpu_model": model,
        }

    def run(self, spec_json: str) -> str:
        """Run the spec (which carries the agreed start instant); the result as JSON."""

        def progress(snapshot: LoadProgress) -> bool:
            self._last = snapshot.model_dump()
            if self._stop.is_set():
                raise KeyboardInterrupt  # the engine returns the partial result, interrupted
            return self._enough.is_set()

        return run_load(LoadSpec.from_json(spec_json), progress, interval_s=POLL_S).to_json()

    def snapshot(self) -> dict[str, Any] | None:
        """The latest live progress of ``run``."""
        return self._last

    def stop(self, enough: bool = False) -> None:
        """End ``run`` early: ``enough`` keeps the result complete, else it is interrupted."""
        (self._enough if enough else self._stop).set()


def sum_progress(snapshots: Sequence[dict[str, Any]]) -> LoadProgress:
    """The agents' live progress as one: counts and rates summed, the least advanced phase."""
    order = ["warmup", "measure", "done"]
    first = snapshots[0]
    return LoadProgress(
        elapsed_s=max(s["elapsed_s"] for s in snapshots),
        phase=min((s["phase"] for s in snapshots), key=order.index),
        warmup_s=first["warmup_s"],
        duration_s=first["duration_s"],
        max_requests=first["max_requests"],
        **{
            k: sum(s[k] for s in snapshots)
            for k in ("requests", "errors", "timeouts", "warmup_requests", "rps")
        },
    )


def _ray_error_reason(error: BaseException) -> str:
    """One line saying why an agent failed, from a Ray exception."""
    text = str(error).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    name = type(error).__name__
    if "ActorDied" in name or "ActorError" in name or "died" in text.lower():
        cause = next((ln for ln in lines if "reason" in ln.lower() or "exit" in ln.lower()), "")
        return f"agent process died ({cause or name})"
    return lines[-1] if lines else name


class AgentPool:
    """``count`` agent actors placed by a SPREAD placement group, each pinned to its cores.

    Use as a context manager: on exit every actor is killed and the placement group removed,
    so no agent process outlives the run.
    """

    def __init__(self, ray: ModuleType, count: int, *, cpus_per_agent: int = 1) -> None:
        self.ray = ray
        self.count = count
        self.cpus_per_agent = cpus_per_agent
        self.actors: list[Any] = []
        self.places: list[AgentPlace] = []
        self._group: Any = None

    def __enter__(self) -> AgentPool:
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        ray, per = self.ray, self.cpus_per_agent
        have = float(ray.cluster_resources().get("CPU", 0))
        if have < self.count * per:
            raise AgentsError(
                "agents",
                f"{self.count} agents of {per} CPU each need {self.count * per} CPUs; "
                f"the Ray cluster has {have:g}",
            )
        try:
            self._group = placement_group([{"CPU": per}] * self.count, strategy="SPREAD")
            ray.get(self._group.ready(), timeout=PLACEMENT_TIMEOUT_S)
            actor_class = ray.remote(_AgentActor)
            for i in range(self.count):
                where = PlacementGroupSchedulingStrategy(
                    placement_group=self._group, placement_group_bundle_index=i
                )
                self.actors.append(
                    actor_class.options(
                        num_cpus=per, max_concurrency=2, scheduling_strategy=where
                    ).remote()
                )
            found = ray.get([a.describe.remote() for a in self.actors], timeout=PLACEMENT_TIMEOUT_S)
        except BaseException:
            self.__exit__()
            raise
        self.places = [AgentPlace(name=f"agent-{i}", **d) for i, d in enumerate(found)]
        return self

    def __exit__(self, *exc: object) -> None:
        from ray.util.placement_group import remove_placement_group

        for actor in self.actors:
            try:
                self.ray.kill(actor, no_restart=True)
            except Exception:  # already gone
                pass
        if self._group is not None:
            remove_placement_group(self._group)
        self.actors, self._group = [], None

    def round_trip_s(self) -> float:
        """Wall time of one call to every agent (to choose the start instant)."""
        t0 = time.monotonic()
        self.ray.get([a.snapshot.remote() for a in self.actors], timeout=PLACEMENT_TIMEOUT_S)
        return time.monotonic() - t0

    def run(self, specs: Sequence[LoadSpec], progress: ProgressFn | None = None) -> DistributedLoad:
        """Run ``specs[i]`` on agent i, all starting at one instant; wait, merge, report.

        An agent that dies is recorded with its node and reason; the others' results are
        kept. Ctrl-C stops every agent and keeps what they measured (``interrupted``).
        """
        ahead_s = max(START_MARGIN_S, START_ROUND_TRIPS * self.round_trip_s())
        start_at = time.time_ns() + int(min(ahead_s, 50.0) * 1e9)  # the engine waits <= 60 s
        specs = [s.replace(start_at_unix_ns=start_at) for s in specs]
        refs = [a.run.remote(s.to_json()) for a, s in zip(self.actors, specs, strict=True)]
        first = specs[0]
        planned_s = first.warmup_s + (first.duration_s or 24 * 3600.0)
        deadline = time.monotonic() + (start_at - time.time_ns()) / 1e9 + planned_s
        outcome: dict[int, tuple[LoadResult | None, str | None]] = {}
        interrupted = False
        try:
            self._collect(refs, outcome, deadline + RESULT_GRACE_S, progress)
        except KeyboardInterrupt:
            interrupted = True
            self.stop(enough=False)
            self._collect(refs, outcome, time.monotonic() + STOP_GRACE_S, None)
        for i in range(len(refs)):
            outcome.setdefault(i, (None, "no result before the deadline"))
        agents = [
            AgentOutcome(place=p, spec=s, result=outcome[i][0], failure=outcome[i][1])
            for i, (p, s) in enumerate(zip(self.places, specs, strict=True))
        ]
        return finish(agents, interrupted=interrupted)

    def stop(self, *, enough: bool) -> None:
        """Ask every agent to end its run (see :meth:`_AgentActor.stop`)."""
        for actor in self.actors:
            actor.stop.remote(enough)

    def _collect(
        self,
        refs: list[Any],
        outcome: dict[int, tuple[LoadResult | None, str | None]],
        deadline: float,
        progress: ProgressFn | None,
    ) -> None:
        """Wait for the runs' results until ``deadline``, relaying live progress."""
        ray = self.ray
        index = {ref: i for i, ref in enumerate(refs)}
        pending = [r for r in refs if index[r] not in outcome]
        while pending and time.monotonic() < deadline:
            done, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL_S)
            for ref in done:
                try:
                    outcome[index[ref]] = (LoadResult.from_json(ray.get(ref)), None)
                except Exception as e:  # RayActorError, RayTaskError: the agent failed
                    outcome[index[ref]] = (None, _ray_error_reason(e))
            if progress is not None and pending:
                self._relay(progress, [i for r, i in index.items() if r in pending])

    def _relay(self, progress: ProgressFn, live: list[int]) -> None:
        """Hand the summed progress of the live agents to ``progress``; True stops them."""
        snaps = []
        for i in live:
            try:
                snap = self.ray.get(self.actors[i].snapshot.remote(), timeout=POLL_S * 4)
            except Exception:  # a dying agent: its run's result will say why
                continue
            if snap is not None:
                snaps.append(snap)
        if snaps and progress(sum_progress(snaps)):
            self.stop(enough=True)


def finish(agents: list[AgentOutcome], *, interrupted: bool = False) -> DistributedLoad:
    """Merge the agents that finished, and add the skew and any failure to its warnings."""
    done = [a.result for a in agents if a.result is not None]
    merged = LoadResult.merge(done) if done else None
    load = DistributedLoad(agents=agents, merged=merged, interrupted=interrupted)
    if merged is not None:
        notes = list(merged.warnings)
        skew = load.start_skew_ms
        if skew is not None:
            notes.append(f"start skew between {len(done)} agents: {skew:.3f} ms")
            if skew > SKEW_WARN_MS:
                notes.append(f"start skew {skew:.1f} ms is above {SKEW_WARN_MS:g} ms")
        failed = load.failure_message()
        if failed:
            notes.append(f"agents failed, their share is missing: {failed}")
        update: dict[str, Any] = {"warnings": notes}
        if load.generator_bound and not merged.generator_bound:  # any agent's limit is the run's
            notes.append("generator-bound: at least one agent was (see its result)")
            update["generator"] = merged.generator.model_copy(update={"generator_bound": True})
        if interrupted:
            update["interrupted"] = True
        load = DistributedLoad(
            agents=agents, merged=merged.model_copy(update=update), interrupted=interrupted
        )
    return load


def run_distributed(
    spec: LoadSpec,
    agents: int,
    *,
    address: str | None = None,
    progress: ProgressFn | None = None,
    on_ready: Callable[[list[AgentPlace]], None] | None = None,
) -> DistributedLoad:
    """Run ``spec`` from ``agents`` Ray actors at once (on the cluster at ``address``, or on
    a local Ray started for this run) and merge their results.

    Each agent gets ``spec.threads`` CPUs and is pinned to distinct cores of its node (of
    ``spec.cpus`` when given). ``on_ready`` is told where the agents landed before they start.

    Raises:
        RayUnavailable: Ray is not installed.
        AgentsError: the agents cannot be placed, or the spec cannot be split.
    """
    specs = split_spec(spec, agents)
    per = max(1, spec.threads)
    with (
        ray_session(address, local_cpus=agents * per) as ray,
        AgentPool(ray, agents, cpus_per_agent=per) as pool,
    ):
        cores = assign_cpus(pool.places, per, spec.cpus)
        specs = [s.replace(cpus=c) for s, c in zip(specs, cores, strict=True)]
        if on_ready is not None:
            on_ready(pool.places)
        return pool.run(specs, progress)
