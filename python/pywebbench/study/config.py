"""The study configuration: ``pywebbench.toml``, built-in profiles, CLI overrides.

The model is pydantic with unknown keys forbidden, so a typo is an error naming the key path
(``load.concurency``) rather than a silently ignored setting. The JSON Schema in
docs/pywebbench.schema.json is generated from :class:`StudyConfig` (``python -m
pywebbench.study.config --schema``); docs/config.md documents every key.

Each key is declared once, here (``[load]`` and the top level) or in :mod:`pywebbench.study.tables`
(``[matrix]``, ``[cpus]``, ``[timeouts]``, ``[app]``): its field's type, default, bounds and
description, and a mark (:mod:`pywebbench.study.declare`) that gives its ``pywebbench run`` flag
or says why it has none. The flags, the overrides they make, and docs/config.md's table of keys
are all read from these fields (:mod:`pywebbench.study.options`).

Resolution order: the profile (``quick`` unless the file or ``--profile`` says otherwise),
then the TOML file, then CLI options. The resolved config is stored with the run, and
``--resume`` rebuilds the matrix from it.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from pywebbench.study.declare import FileOnly, Flag
from pywebbench.study.flag_texts import (
    BIND_HELP,
    CI_TARGET_HELP,
    DESIGN_HELP,
    EXECUTOR_HELP,
    FAULTS_HELP,
    PROFILE_HELP,
    PROTOCOL_HELP,
    RAY_HELP,
    SERVER_SCOPE_HELP,
    SLO_HELP,
    WARMUP_HELP,
    parse_constant_rates,
)
from pywebbench.study.profiles import PROFILE_DATA, PROFILES
from pywebbench.study.tables import AppConfig, CpuConfig, MatrixConfig, Table, TimeoutConfig

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

DEFAULT_RESULTS_DIR = "pywebbench-results"


# Keys set in the file only, for the same reason.
_STEADY_TUNING = FileOnly("a tuning of the steady-state rule (docs/steady-state.md)")
_KNEE_TUNING = FileOnly("a tuning of the knee search (docs/slo.md)")


class ConfigError(ValueError):
    """A configuration problem; the message names the key path (or the CLI flag)."""


class LoadConfig(Table):
    """How hard and how long each cell is loaded."""

    model: Annotated[Literal["closed", "open"], FileOnly("--rate sets it to open")] = Field(
        "closed", description="closed: N connections, one request in flight each; open: rates."
    )
    connections: Annotated[
        list[int],
        Flag("--connections", "-c", help="Connections sweep: 1,16,64 (one load point each)."),
    ] = Field(
        default=[64], min_length=1, description="Connections (closed loop sweep; open-loop pool)."
    )
    rates: Annotated[
        list[float],
        Flag(
            "--rate",
            help="Open loop: target requests/s sweep: 1000,5000.",
            parse=parse_constant_rates,
            also={"model": "open"},
        ),
    ] = Field(
        default_factory=list, description="Open loop: target requests/s, one load point each."
    )
    duration_s: Annotated[
        float, Flag("--duration", "-d", help="Seconds per measured iteration.")
    ] = Field(3.0, gt=0, le=3600, description="Measured iteration length.")
    warmup: Annotated[Literal["steady", "fixed", "deep"], Flag("--warmup", help=WARMUP_HELP)] = (
        Field(
            "steady",
            description="steady: warm up until the throughput is steady (or warmup_cap_s), per "
            "replicate and workload (docs/steady-state.md); fixed: warmup_iterations x "
            "warmup_duration_s; deep: Barrett's method, a long in-process series of deep_s per "
            "replicate, each classified (flat, warm-up, slowdown, no steady state).",
        )
    )
    deep_s: Annotated[
        float, Flag("--deep-s", help="deep: seconds of each replicate's series (default 120).")
    ] = Field(
        120.0,
        gt=0,
        le=3600,
        description="deep: the length of each replicate's warm-up series (it never stops early).",
    )
    warmup_cap_s: Annotated[
        float,
        Flag(
            "--warmup-cap",
            help="steady: longest warm-up in seconds (then: judged with the measured "
            "iterations; not_steady unless they show it had settled).",
        ),
    ] = Field(
        20.0,
        gt=0,
        le=3600,
        description="steady: the longest warm-up; a replicate that reaches it is judged again "
        "with its measured iterations, and its cell flagged not_steady unless they show it had "
        "settled.",
    )
    jit_warmup_cap_s: Annotated[
        float,
        Flag(
            "--jit-warmup-cap",
            help="steady: longest warm-up in seconds on a JIT interpreter (PyPy), whose JIT "
            "keeps tuning a path for 10-30 s (then: judged as --warmup-cap says).",
        ),
    ] = Field(
        40.0,
        gt=0,
        le=3600,
        description="steady: the longest warm-up on a JIT interpreter (PyPy); its JIT keeps "
        "raising throughput for 10-30 s after the first compile (docs/steady-state.md).",
    )
    steady_window_s: Annotated[float, _STEADY_TUNING] = Field(
        2.0, gt=0, le=600, description="steady: the trailing window judged for trend and spread."
    )
    jit_min_requests: Annotated[int, _STEADY_TUNING] = Field(
        10_000,
        ge=0,
        le=10_000_000,
        description="steady, on a JIT interpreter (PyPy): requests served before a warm-up "
        "may be judged steady (a JIT stays at interpreter speed until it compiles the path).",
    )
    warmup_duration_s: Annotated[
        float, Flag("--warmup-duration", help="fixed: seconds per warm-up iteration.")
    ] = Field(2.0, gt=0, le=3600, description="fixed: warm-up iteration length.")
    warmup_iterations: Annotated[
        int, Flag("--warmup-iterations", help="fixed: warm-up iterations per replicate.")
    ] = Field(1, ge=0, le=100, description="fixed: warm-up iterations per replicate.")
    iterations: Annotated[int, Flag("--iterations")] = Field(
        1, ge=1, le=100, description="Measured iterations per replicate."
    )
    replicates: Annotated[
        int,
        Flag(
            "--replicates",
            help="Server processes per cell: fresh ones one after another (sequential), or "
            "kept up together in its group (interleaved, at least 2).",
        ),
    ] = Field(
        3,
        ge=1,
        le=100,
        description="Server processes per cell: fresh ones one after the other (sequential), "
        "or kept up together and loaded in turn in the cell's group (interleaved: at least 2; "
        "the intervals are over them).",
    )
    jit_replicates: Annotated[
        int | None,
        Flag(
            "--jit-replicates",
            help="Server processes per cell on a JIT interpreter (PyPy) (default: "
            "--replicates). Its own count: in a group each PyPy process costs a longer slice "
            "and a JIT warm-up, and the intervals of each interpreter are over its own "
            "processes.",
        ),
    ] = Field(
        None,
        ge=1,
        le=100,
        description="Server processes per cell on a JIT interpreter (PyPy); unset: replicates. "
        "In an interleaved group each interpreter's intervals are over its own processes, and "
        "a PyPy process costs a longer slice and its own JIT warm-up, so a study can spend its "
        "processes where its question is (docs/steady-state.md#the-interleaved-study).",
    )
    ci_target: Annotated[float | None, Flag("--ci-target", help=CI_TARGET_HELP)] = Field(
        None,
        gt=0,
        le=10,
        description="Replicate budget: cells whose median req/s has a 95% CI half-width above "
        "this fraction of the median (0.05 = +-5%) get more replicates, up to max_replicates "
        "(a CI from 2 replicates is wide: Student's t, docs/steady-state.md).",
    )
    max_replicates: Annotated[
        int,
        Flag(
            "--max-replicates",
            help="Most replicates per cell: more than --replicates when the replicates settle "
            "at levels over 1.25x apart (inconsistent) or with --ci-target.",
        ),
    ] = Field(
        5,
        ge=1,
        le=100,
        description="Replicate budget: the most replicates a cell gets, when its replicates "
        "settle at different levels (pywebbench.analysis.modes) or its CI is wider than ci_target.",
    )
    timeout_s: Annotated[float, Flag("--timeout", help="Per-request timeout (s).")] = Field(
        5.0, gt=0, le=600, description="Per-request timeout of the engine."
    )
    io: Annotated[
        Literal["auto", "epoll", "uring"],
        Flag(
            "--io",
            help="The engine's I/O backend (default epoll: a study reads what wrk reads; auto: "
            "io_uring where supported).",
        ),
    ] = Field(
        "epoll",
        description="The engine's I/O backend: epoll (a study's default: its slices read what "
        "a continuous wrk reads), uring, or auto (io_uring where the kernel supports it, else "
        "epoll; `pywebbench load`'s default). io_uring reads some servers 20-30% higher than "
        "wrk does (docs/measurements.md).",
    )
    pause_s: Annotated[float, FileOnly("rarely needed")] = Field(
        0.0, ge=0, le=60, description="Pause between iterations."
    )
    interference_max: Annotated[
        float,
        Flag(
            "--interference-max",
            help="Share of one core other processes may take from the study's cores during a "
            "measured iteration before it is measured again (0.05 = 5%; docs/interference.md).",
        ),
    ] = Field(
        0.05,
        ge=0,
        le=1024,
        description="Interference guard: the share of one core other processes (and steal) "
        "may take from the pinned cores over a measured iteration before it is interfered "
        "and measured again (0.05 = 5%; docs/interference.md). At or above the number of "
        "study cores it never trips: the guard is off, the figures are still stored.",
    )
    interference_retries: Annotated[
        int,
        Flag(
            "--interference-retries",
            help="Times an interfered iteration is measured again before it is stored flagged "
            "'interfered' (2).",
        ),
    ] = Field(
        2,
        ge=0,
        le=20,
        description="Interference guard: how many times an interfered measured iteration is "
        "measured again; one still interfered after them is stored flagged (the cell reads "
        "'interfered').",
    )
    core_speed: Annotated[
        bool,
        Flag(
            "--no-core-speed",
            help="Do not probe the server's core speed; compare raw req/s "
            "(docs/interference.md#core-speed).",
        ),
    ] = Field(
        True,
        description="Probe the server's cores during each iteration (1-2% of a core) and "
        "judge req/s at one core speed: intervals, rankings and compare scale each "
        "iteration's req/s to the median core rate, as far as the req/s of its group of "
        "cells (interpreter, workload) follow the probe (none below 8 measured iterations), "
        "because a VM's host changes how much work a CPU-second does "
        "(docs/interference.md#core-speed). Raw figures stay stored.",
    )
    design: Annotated[Literal["interleaved", "sequential"], Flag("--design", help=DESIGN_HELP)] = (
        Field(
            "interleaved",
            description="interleaved (the default of every profile): a group's stacks (one "
            "workload and load point, every interpreter) all up at once and loaded in "
            "slices of the same rounds; figures are ratios to the group's reference with CIs "
            "over server processes (docs/steady-state.md#the-interleaved-study). sequential: a "
            "fresh server per replicate of each cell, the replicates spread over the study in "
            "rounds. Cells an interleaved group cannot hold (faults, knee, per-cell windows, "
            "load agents) take the sequential path either way; run says which and why, and the "
            "report marks them. A connection mode (close, N per connection), a unix bind, an "
            "open loop's rate and h2c are load points, each its own group, as is a WebSocket "
            "workload (an open loop's figures are each stack's p50 and p99 with CIs over "
            "server processes).",
        )
    )
    group_budget_s: Annotated[
        float,
        Flag(
            "--group-budget",
            help="interleaved: most seconds of load per group, warm-up included (150; PyPy: "
            "--jit-group-budget); a group stops earlier once every process is warm and every "
            "gap of the ranking within --ci-target (default 0.03).",
        ),
    ] = Field(
        150.0,
        gt=0,
        le=36000,
        description="interleaved: the most seconds of load one group takes, warm-up "
        "included; it stops earlier once every process is warm, has 8 measured rounds, and "
        "every gap of the ranking and every stack's ratio to the reference has its CI within "
        "ci_target (0.03 when unset).",
    )
    jit_group_budget_s: Annotated[
        float,
        Flag(
            "--jit-group-budget",
            help="interleaved: most seconds of load per group on a JIT interpreter (PyPy), "
            "whose processes each need 10-15 s of load of their own to warm up (300).",
        ),
    ] = Field(
        300.0,
        gt=0,
        le=36000,
        description="interleaved: group_budget_s for a group on a JIT interpreter (PyPy): "
        "every process of the group needs its own JIT warm-up (10-15 s of load each on the "
        "quick study's Flask stacks), and the group shares one core among them "
        "(docs/steady-state.md#the-interleaved-study).",
    )
    slice_s: Annotated[
        float | None,
        Flag(
            "--slice",
            help="interleaved: seconds of load in each process's slice of a round (default: "
            "sized by a probe, 0.25-2 s, at least 0.5 s on PyPy).",
        ),
    ] = Field(
        None,
        ge=0.1,
        le=10,
        description="interleaved: the length of a slice, seconds; unset: two response times "
        "of the group's slowest stack as probed, within 0.25-2 s (at least 0.5 s on a JIT "
        "interpreter, whose collector pauses would empty a shorter one). A group plans at "
        "least 20 rounds whatever its budget (docs/steady-state.md#the-interleaved-study).",
    )
    memory_budget_mib: Annotated[
        int | None,
        Flag(
            "--memory-budget",
            help="interleaved: MiB one server process may hold; one over it is stopped "
            "(default: 75% of the machine's memory over the group's processes, a PyPy "
            "process six shares).",
        ),
    ] = Field(
        None,
        ge=16,
        description="interleaved: the most memory (MiB, RSS of the process tree) one server "
        "process may hold; one that passes it is stopped with its memory curve (marked leak, "
        "or memory share when it was below its collector's floor: PyPy's), and the group goes "
        "on without it. Unset: 75% of the machine's memory shared by the "
        "group's processes.",
    )
    reference: Annotated[
        str | None,
        Flag(
            "--reference",
            help="interleaved: the stack each group's ratios are to, as its key "
            "(cpython3.11/gunicorn-gthread/flask); default: the geometric mean of the group.",
        ),
    ] = Field(
        None,
        description="interleaved: the stack (its key) every ratio of its group is to; "
        "unset, or not in a group: the geometric mean of the group's stacks.",
    )
    seed: Annotated[
        int | None,
        Flag(
            "--seed",
            help="interleaved: seed of the rotation (the order of the processes in each "
            "round); default: one per group, the same on every run of the study.",
        ),
    ] = Field(
        None,
        ge=0,
        le=2**32 - 1,
        description="interleaved: seed of each group's rotation, mixed with the group's "
        "label so that groups differ; unset: the label alone (every run of the study "
        "rotates alike). A different seed must not move a ratio beyond its interval "
        "(benchmarks/tournament.py --seeds).",
    )
    server_scope: Annotated[
        Literal["cell", "stack"], Flag("--server-scope", help=SERVER_SCOPE_HELP)
    ] = Field(
        "cell",
        description="cell: a fresh server process for every replicate of every cell; stack: "
        "one fresh server per replicate serves all the stack's cells in turn (fewer starts).",
    )
    connection_mode: Annotated[
        list[Literal["keepalive", "close"] | int],
        Flag(
            "--connection-mode",
            help="Connection sweep: keepalive,close,100 (close: a new connection per request; "
            "N: a new connection after every N requests, as httperf's --num-calls).",
        ),
    ] = Field(
        default=["keepalive"],
        min_length=1,
        description="Connection mode sweep: keepalive (connections reused), close (a new "
        "connection per request, as ab without -k) and/or a number N (each connection closed "
        "after N requests and opened again, as httperf's --num-calls; HTTP/1.1 and h2c).",
    )
    bind: Annotated[list[Literal["tcp", "unix"]], Flag("--bind", help=BIND_HELP)] = Field(
        default=["tcp"],
        min_length=1,
        description="Bind sweep: where the server under test listens, tcp (a loopback port) "
        "and/or unix (a unix-domain socket, as behind nginx), on servers that can "
        "(docs/config.md#bind).",
    )
    protocol: Annotated[list[Literal["http1", "h2c"]], Flag("--protocol", help=PROTOCOL_HELP)] = (
        Field(
            default=["http1"],
            min_length=1,
            description="Protocol sweep: http1 (HTTP/1.1) and/or h2c (HTTP/2 over cleartext "
            "TCP with prior knowledge), on servers that serve it (docs/http2.md#in-a-study).",
        )
    )
    streams: Annotated[
        int,
        Flag("--streams", help="h2c: concurrent streams (requests in flight) per connection."),
    ] = Field(
        1,
        ge=1,
        le=1024,
        description="h2c cells: requests in flight per connection (as h2load's -m); HTTP/1.1 "
        "cells keep one.",
    )
    syscalls: Annotated[
        bool,
        Flag(
            "--syscalls",
            help="Trace the server with strace -f -c after each replicate: syscalls per request.",
        ),
    ] = Field(
        False,
        description="After each replicate's measured iterations, trace the server tree with "
        "strace -f -c in a separate, unmeasured window (docs/syscalls.md).",
    )
    syscalls_duration_s: Annotated[
        float, Flag("--syscalls-duration", help="syscalls: seconds of the traced window.")
    ] = Field(2.0, gt=0, le=600, description="syscalls: length of the traced load window.")
    flamegraph: Annotated[
        bool,
        Flag(
            "--flamegraph",
            help="Sample the server with py-spy after each replicate: flame graphs, where "
            "the time goes.",
        ),
    ] = Field(
        False,
        description="After each replicate's measured iterations, sample the server tree's "
        "stacks with py-spy in a separate, unmeasured window: flame graphs and where the time "
        "goes (docs/flamegraphs.md): py-spy on CPython, vmprof on PyPy.",
    )
    flamegraph_duration_s: Annotated[
        float, Flag("--flamegraph-duration", help="flamegraph: seconds of the sampled window.")
    ] = Field(3.0, gt=0, le=600, description="flamegraph: length of the sampled load window.")
    instructions: Annotated[
        bool,
        Flag(
            "--instructions",
            help="Count instructions per request under valgrind, on a separate server per cell "
            "(docs/instructions.md).",
        ),
    ] = Field(
        False,
        description="Count the instructions per request of each cell's server tree under "
        "valgrind, on a separate server, apart from the timed figures (docs/instructions.md).",
    )
    instructions_requests: Annotated[
        int,
        Flag(
            "--instructions-requests",
            help="instructions: the most requests of the counted batch (default 100).",
        ),
    ] = Field(
        100,
        ge=1,
        le=1_000_000,
        description="instructions: the most requests of the counted batch (heavy requests "
        "get fewer: enough for 50 million instructions, at least 10).",
    )
    instructions_warmup_requests: Annotated[
        int, FileOnly("a tuning of the count's warm-up; the default suits every workload")
    ] = Field(50, ge=1, le=1_000_000, description="instructions: requests of the warm-up batch.")
    instructions_replicates: Annotated[
        int, FileOnly("counts agree to 0.03-0.4% between fresh servers: 1 is usually enough")
    ] = Field(
        1,
        ge=1,
        le=100,
        description="instructions: count in this many replicates of each cell (the first "
        "ones); counts agree to 0.03-0.4% between fresh servers, so 1 is usually enough.",
    )
    faults: Annotated[str | None, Flag("--faults", help=FAULTS_HELP)] = Field(
        None,
        description=(
            "Fault mix (docs/faults.md), e.g. 'default' or 'slowloris=50,churn=100/s': each "
            "replicate is measured again under it and the cell gets a robustness score. "
            "'slowloris=10,100,500' sweeps the attack size; 'fresh=20%' and 'lead=1s' set "
            "the good clients' arriving connections and the attack's head start."
        ),
    )
    slo: Annotated[str | None, Flag("--slo", help=SLO_HELP)] = Field(
        None,
        description="Latency SLO, e.g. 'p99=50ms' (docs/slo.md): after its measured "
        "iterations each replicate searches the highest open-loop rate that meets it (the knee).",
    )
    slo_budget_s: Annotated[
        float, Flag("--slo-budget", help="Longest knee search per replicate, in seconds (120).")
    ] = Field(120.0, gt=0, le=86_400, description="slo: the longest knee search, per replicate.")
    slo_tolerance: Annotated[float, _KNEE_TUNING] = Field(
        0.05, gt=0, lt=1, description="slo: bisect until the bracket is this narrow (relative)."
    )
    slo_warmup_s: Annotated[float, _KNEE_TUNING] = Field(
        1.0, ge=0, le=600, description="slo: warm-up at each probe's rate before it is measured."
    )
    slo_repeats: Annotated[
        int,
        Flag(
            "--slo-repeats",
            help="Probes per rate of a knee search (3): a rate passes when all of them meet "
            "the SLO.",
        ),
    ] = Field(
        3,
        ge=1,
        le=10,
        description="slo: probes per rate, by design; a rate passes when all of them meet the "
        "SLO, and an edge whose probes disagree is reported as a range (docs/slo.md).",
    )
    load_agents: Annotated[
        int,
        Flag(
            "--load-agents",
            help="Load each iteration from N agents (Ray actors; docs/scale-out.md).",
        ),
    ] = Field(
        1,
        ge=1,
        le=1024,
        description="Load agents per iteration (Ray actors, docs/scale-out.md); connections "
        "and rate are split between them. More than 1 needs Ray.",
    )
    ray_address: Annotated[str | None, Flag("--ray", help=RAY_HELP)] = Field(
        None,
        description="Ray cluster (HOST:PORT) for the load agents or the ray executor; none: a "
        "local Ray is started for the run and stopped after.",
    )
    executor: Annotated[Literal["local", "ray"], Flag("--executor", help=EXECUTOR_HELP)] = Field(
        "local",
        description="Where cells run: local (one after another on this host) or ray "
        "(independent cells, or whole stacks with server_scope = stack, in parallel on the "
        "nodes of a Ray cluster; docs/scale-out.md).",
    )

    @property
    def warmups(self) -> int:
        """Warm-up iterations per replicate: one adaptive one, or the fixed number."""
        return self.warmup_iterations if self.warmup == "fixed" else 1

    def replicates_for(self, jit: bool) -> int:
        """Server processes per cell: ``jit_replicates`` on a JIT interpreter (``jit``),
        when set, else ``replicates``."""
        return self.jit_replicates if jit and self.jit_replicates is not None else self.replicates

    @property
    def iterations_per_replicate(self) -> int:
        return self.warmups + self.iterations

    def window_s(self) -> tuple[float, float]:
        """Load seconds per replicate: (least, most); steady warm-ups are between their
        window and their cap. A syscalls window (``syscalls``) and a sampled window
        (``flamegraph``) count too."""
        measured = self.iterations * self.duration_s
        measured += self.syscalls_duration_s if self.syscalls else 0.0
        measured += self.flamegraph_duration_s if self.flamegraph else 0.0
        if self.warmup == "deep":
            return self.deep_s + measured, self.deep_s + measured
        if self.warmup == "steady":
            cap = max(self.warmup_cap_s, self.jit_warmup_cap_s)  # the most: a JIT's
            return self.steady_window_s + measured, cap + measured
        fixed = self.warmup_iterations * self.warmup_duration_s + measured
        return fixed, fixed

    @field_validator("faults")
    @classmethod
    def _faults(cls, v: str | None) -> str | None:
        if v is not None:
            from pywebbench.faults.plan import parse_plan

            parse_plan(v)  # FaultMixError (a ValueError) names the bad item
        return v

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: str | None) -> str | None:
        if v is not None:
            from pywebbench.study.slo import parse_slo

            parse_slo(v)  # SloError (a ValueError) says what is expected
        return v

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "concurrency" in data:
            raise ValueError("'concurrency' is now called 'connections' (as -c is in the CLI)")
        return data

    @field_validator("connections")
    @classmethod
    def _connections(cls, v: list[int]) -> list[int]:
        if any(x < 1 or x > 100_000 for x in v):
            raise ValueError("every value must be 1..100000")
        return v

    @field_validator("rates")
    @classmethod
    def _rates(cls, v: list[float]) -> list[float]:
        if any(x <= 0 for x in v):
            raise ValueError("every rate must be > 0")
        return v

    @field_validator("connection_mode")
    @classmethod
    def _requests_per_connection(cls, v: list[str | int]) -> list[str | int]:
        if any(isinstance(x, int) and x < 1 for x in v):
            raise ValueError("a number of requests per connection must be >= 1")
        return v

    @field_validator("connection_mode", "bind", "protocol")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))


class StudyConfig(Table):
    """A whole study. Every key is optional; the profile fills in the rest."""

    profile: Annotated[
        Literal["quick", "standard", "full", "versions"] | None,
        Flag("--profile", help=PROFILE_HELP),
    ] = Field(None, description="Built-in profile this study starts from (default quick).")
    results_dir: Annotated[
        str,
        Flag(
            "--results-dir",
            help=f"Where the store, reports and logs go (default ./{DEFAULT_RESULTS_DIR}).",
        ),
    ] = Field(DEFAULT_RESULTS_DIR, description="Store, reports and server logs go here.")
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    cpus: CpuConfig = Field(default_factory=CpuConfig)
    timeouts: TimeoutConfig = Field(default_factory=TimeoutConfig)
    app: AppConfig | None = None
    report: Annotated[bool, Flag("--no-report", help="Skip the HTML/Markdown report.")] = Field(
        True, description="Write the HTML/Markdown report at the end."
    )

    def workers_threads(self, server: str) -> list[tuple[int, int]]:
        """The (workers, threads) variants to run ``server`` with."""
        s = self.matrix.server_settings.get(server)
        workers = s.workers if s else self.matrix.workers
        threads = s.threads if s else self.matrix.threads
        return [(w, t) for w in workers for t in threads]


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "server_settings":
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def format_validation_error(exc: ValidationError, source: str) -> str:
    """One line per problem, each naming the key path: ``load.connections[0]: ...``."""
    lines = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        lines.append(f"{source}: {path or '(top level)'}: {msg}")
    return "\n".join(lines)


def load_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file, with errors that name the file."""
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"--config {path}: no such file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def resolve(
    file_data: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    *,
    profile: str | None = None,
    source: str = "pywebbench.toml",
) -> StudyConfig:
    """Profile + file + CLI overrides -> a validated :class:`StudyConfig`.

    ``overrides`` is a nested dict in the same shape as the file (built from CLI flags).
    The file is validated on its own first, so its errors name its keys.
    """
    file_data = file_data or {}
    overrides = overrides or {}
    if isinstance(file_data.get("app"), dict) and "mix_entries" in file_data["app"]:
        raise ConfigError(
            f"{source}: app.mix_entries: written by `run` when a study starts (the requests "
            "of app.mix, kept for --resume); give app.mix"
        )
    try:
        StudyConfig.model_validate(file_data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from None
    chosen = profile or file_data.get("profile") or "quick"
    if chosen not in PROFILES:
        raise ConfigError(f"--profile {chosen}: unknown profile; choose from {', '.join(PROFILES)}")
    data = _merge(PROFILE_DATA[chosen], file_data)
    data = _merge(data, overrides)
    data["profile"] = chosen
    data["load"]["jit_replicates"] = _jit_replicates([PROFILE_DATA[chosen], file_data, overrides])
    app = data.get("app")
    if isinstance(app, dict) and app.get("mix") is not None and "paths" in app:
        raise ConfigError(
            "--mix and --path (app.mix, app.paths): the mix gives every path; give one"
        )
    try:
        config = StudyConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "options")) from None
    check(config)
    return config


def _jit_replicates(layers: Sequence[Mapping[str, Any]]) -> int | None:
    """``load.jit_replicates`` from the profile, file and flags (``layers``, lowest first):
    the layer that gives ``replicates`` last gives every interpreter that count unless it
    gives ``jit_replicates`` too (``--replicates 1`` on the quick profile starts one process
    a stack, PyPy's too); one that gives ``jit_replicates`` alone sets it."""
    found: int | None = None
    for layer in layers:
        load = layer.get("load")
        if not isinstance(load, Mapping):
            continue
        if "replicates" in load or "jit_replicates" in load:
            found = load.get("jit_replicates")
    return found


#: Defaults a stored run's configuration lacks the key of, as they were when it was stored:
#: a run stored before ``load.design`` was written with every run measured in sequence.
_STORED_DEFAULTS: dict[str, dict[str, Any]] = {"load": {"design": "sequential"}}


def stored(config: dict[str, Any]) -> StudyConfig:
    """A run's stored configuration (``--resume``) as a :class:`StudyConfig`: a key it lacks
    takes the default of when it was stored (:data:`_STORED_DEFAULTS`), not today's, so an
    interrupted run goes on in the design it started in."""
    data = copy.deepcopy(config)
    for table, defaults in _STORED_DEFAULTS.items():
        section = data.setdefault(table, {})
        if isinstance(section, dict):
            for key, value in defaults.items():
                section.setdefault(key, value)
    return StudyConfig.model_validate(data)


def check(config: StudyConfig) -> None:
    """Cross-field rules pydantic cannot express per field."""
    overlap = set(config.cpus.server) & set(config.cpus.generator)
    if overlap:
        raise ConfigError(
            f"cpus.server and cpus.generator must be disjoint; both have {sorted(overlap)}"
        )
    if config.load.model == "open" and not config.load.rates:
        raise ConfigError("load.rates: open loop needs at least one rate")
    if config.load.faults and "unix" in config.load.bind:
        raise ConfigError(
            "--faults with --bind unix (load.faults, load.bind): fault clients need a TCP "
            "target; measure the unix cells in a run without --faults"
        )
    if config.load.streams > 1 and "h2c" not in config.load.protocol:
        raise ConfigError(
            "--streams (load.streams): concurrent streams are for h2c cells; add "
            "--protocol h2c (HTTP/1.1 cells keep one request in flight per connection)"
        )
    if config.load.faults and "ws-echo" in config.matrix.workloads:
        raise ConfigError(
            "--faults with --workload ws-echo (load.faults, matrix.workloads): the fault "
            "phase's good clients speak HTTP; measure ws-echo in a run without --faults"
        )
    if config.load.faults and "h2c" in config.load.protocol:
        raise ConfigError(
            "--faults with --protocol h2c (load.faults, load.protocol): the fault clients "
            "speak HTTP/1.1; measure the h2c cells in a run without --faults"
        )


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``pywebbench.toml`` (docs/pywebbench.schema.json)."""
    schema = StudyConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "pywebbench.toml"
    return schema


if __name__ == "__main__":  # pragma: no cover - docs generator
    if sys.argv[1:] == ["--schema"]:
        print(json.dumps(json_schema(), indent=2))
    else:
        print("usage: python -m pywebbench.study.config --schema", file=sys.stderr)
        sys.exit(2)
