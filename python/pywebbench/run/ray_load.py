"""The study's load agent when ``load_agents`` > 1: every iteration loaded by N Ray actors at
once (docs/scale-out.md), their per-agent results kept in the store.

:class:`RayStudyAgent` is a :class:`~pywebbench.load.LoadAgent`: the runner talks to it as to
the local one. It keeps one Ray session and one set of agent actors for the whole study (Ray
and actors are slow to start), and replaces the set after an agent was lost.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, ExitStack, nullcontext
from types import ModuleType
from typing import Any

from pywebbench.load.agent import LoadAgent, ProgressFn
from pywebbench.load.ray_agents import (
    AgentOutcome,
    AgentPool,
    DistributedLoad,
    assign_cpus,
    ray_session,
    split_spec,
)
from pywebbench.load.result import LoadResult
from pywebbench.load.sliced import SlicedProgressFn, SlicedResult, SlicePlan, run_sliced
from pywebbench.load.spec import LoadSpec
from pywebbench.store import StoreWriter
from pywebbench.store.model import LoadAgentRow


class AgentsLost(RuntimeError):
    """No agent of an iteration returned a result (the message names each, its node, why)."""


class RayStudyAgent:
    """Loads each iteration from ``agents`` Ray actors (on the cluster at ``address``, or on a
    local Ray started for the study). Use as a context manager."""

    name = "ray"

    def __init__(self, agents: int, address: str | None) -> None:
        self.agents = agents
        self.address = address
        self.last: DistributedLoad | None = None
        self._stack = ExitStack()
        self._ray: ModuleType | None = None
        self._pool: AgentPool | None = None
        self._per_agent = 1

    def __enter__(self) -> RayStudyAgent:
        self._ray = self._stack.enter_context(
            ray_session(self.address, local_cpus=self.agents * self._per_agent)
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_pool()
        self._stack.close()

    def _close_pool(self) -> None:
        if self._pool is not None:
            self._pool.__exit__()
            self._pool = None

    def _pool_for(self, spec: LoadSpec) -> AgentPool:
        """The agent actors, started on first use and again after one was lost."""
        per = max(1, spec.threads)
        lost = self.last is not None and bool(self.last.failures)
        if self._pool is not None and (lost or per != self._per_agent):
            self._close_pool()
        if self._pool is None:
            if self._ray is None:
                raise RuntimeError("RayStudyAgent is used outside its with-block")
            self._per_agent = per
            self._pool = AgentPool(self._ray, self.agents, cpus_per_agent=per).__enter__()
        return self._pool

    def run(self, spec: LoadSpec, progress: ProgressFn | None = None) -> LoadResult:
        """The merged result of the agents that finished (see :meth:`lost`).

        Raises:
            AgentsLost: no agent finished.
        """
        pool = self._pool_for(spec)
        specs = split_spec(spec, self.agents)
        cores = assign_cpus(pool.places, self._per_agent, spec.cpus)
        self.last = pool.run(
            [s.replace(cpus=c) for s, c in zip(specs, cores, strict=True)], progress
        )
        if self.last.merged is None:
            raise AgentsLost(self.last.failure_message() or "no agent returned a result")
        return self.last.merged

    def run_sliced(
        self, plan: SlicePlan, progress: SlicedProgressFn | None = None, *, interval_s: float
    ) -> SlicedResult:
        """Run ``plan`` in this process, not on the agents: a sliced run is one engine's,
        whose slices of the targets follow each other (an interleaved group's load)."""
        return run_sliced(plan, progress, interval_s=interval_s)

    def lost(self) -> str | None:
        """Which agents of the last run failed, on which node and why (None: none)."""
        return self.last.failure_message() if self.last is not None else None

    def iteration_stored(self, store: StoreWriter, iteration_id: int) -> None:
        """Keep the last run's per-agent results with the iteration just stored."""
        if self.last is not None:
            store.add_load_agents([agent_row(iteration_id, a) for a in self.last.agents])


def agent_row(iteration_id: int, agent: AgentOutcome) -> LoadAgentRow:
    """The store row of one agent's part of an iteration."""
    doc = agent.to_dict()
    cpus, result = doc.pop("cpus"), doc.pop("result")
    return LoadAgentRow(
        id=None,
        iteration_id=iteration_id,
        cpus_json=json.dumps(cpus),
        result_json=json.dumps(result) if result is not None else None,
        **doc,
    )


def study_agent(load_agents: int, ray_address: str | None) -> AbstractContextManager[Any]:
    """The study's load agent: a :class:`RayStudyAgent` for more than one agent, else None
    (the runner's own local agent; ``ray_address`` alone is the ray executor's)."""
    if load_agents > 1:
        return RayStudyAgent(load_agents, ray_address)
    none: AbstractContextManager[LoadAgent | None] = nullcontext(None)
    return none
