"""``pywebbench load --agents N [--ray ADDRESS]``: the load run by N Ray actors at once, and
the per-agent lines of its report (docs/scale-out.md)."""

from __future__ import annotations

from pywebbench.load.agent import ProgressFn
from pywebbench.load.ray_agents import DistributedLoad, run_distributed
from pywebbench.load.result import LoadResult
from pywebbench.load.spec import LoadSpec


class AgentsFailed(RuntimeError):
    """No agent produced a result (the message names each agent, its node and why)."""


class DistributedRunner:
    """Runs a spec from ``agents`` Ray actors (see :func:`run_distributed`) and keeps the
    per-agent outcome of the last run in ``last``."""

    def __init__(self, agents: int, address: str | None) -> None:
        self.agents = agents
        self.address = address
        self.last: DistributedLoad | None = None

    def __call__(self, spec: LoadSpec, progress: ProgressFn | None = None) -> LoadResult:
        """The merged result of the agents that finished.

        Raises:
            AgentsFailed: no agent finished.
        """
        self.last = run_distributed(spec, self.agents, address=self.address, progress=progress)
        if self.last.merged is None:
            raise AgentsFailed(self.last.failure_message() or "no agent returned a result")
        return self.last.merged


def render_agents(load: DistributedLoad) -> str:
    """One line per agent: node, cores, requests, rate, start lateness, self-check."""
    lines = [f"  {'Agents':<13} {len(load.agents)}, start skew {_skew(load)}"]
    for a in load.agents:
        where = f"{a.place.name} on {a.place.node} cpus {','.join(map(str, a.spec.cpus))}"
        r = a.result
        if r is None:
            lines.append(f"    {where}: FAILED: {a.failure}")
            continue
        late = a.start_lateness_us
        lag = a.schedule_lag_p99_us
        lines.append(
            f"    {where}: {r.requests:,} requests, {r.rps:,.0f} req/s, "
            f"started {late if late is not None else 0:,.0f} us after the agreed instant"
            + (f", schedule lag p99 {lag:,.0f} us" if lag is not None else "")
            + (", GENERATOR-BOUND" if r.generator_bound else "")
        )
    return "\n".join(lines)


def _skew(load: DistributedLoad) -> str:
    skew = load.start_skew_ms
    return "unknown" if skew is None else f"{skew:.3f} ms"
