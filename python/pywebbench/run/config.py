"""The study configuration: ``pywebbench.toml``, built-in profiles, CLI overrides.

The model is pydantic with unknown keys forbidden, so a typo is an error naming the key path
(``load.concurency``) rather than a silently ignored setting. The JSON Schema in
docs/pywebbench.schema.json is generated from :class:`StudyConfig` (``python -m
pywebbench.run.config --schema``); docs/config.md documents every key.

Resolution order: the profile (``quick`` unless the file or ``--profile`` says otherwise),
then the TOML file, then CLI options. The resolved config is stored with the run, and
``--resume`` rebuilds the matrix from it.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PROFILES = ("quick", "standard", "full")
DEFAULT_RESULTS_DIR = "pywebbench-results"


class ConfigError(ValueError):
    """A configuration problem; the message names the key path (or the CLI flag)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ServerSettings(_Model):
    """Worker/thread settings for one server; each combination is its own stack variant."""

    workers: list[int] = Field(default=[1], min_length=1, description="Worker processes.")
    threads: list[int] = Field(
        default=[1], min_length=1, description="Threads per worker (threaded servers)."
    )

    @field_validator("workers", "threads")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        if any(x < 1 for x in v):
            raise ValueError("every value must be >= 1")
        return v


class MatrixConfig(_Model):
    """What to run: the product of these lists, pairing servers and frameworks by interface."""

    interpreters: list[str] = Field(
        default_factory=list,
        description="Interpreter names (cpython3.11, pypy3.9), versions (3.13, pypy) or "
        "paths. Empty: the running CPython plus pypy3 when installed.",
    )
    servers: list[str] = Field(default_factory=list, description="Server adapter names.")
    frameworks: list[str] = Field(
        default_factory=list, description="Framework names (ignored when [app] is given)."
    )
    workloads: list[str] = Field(default_factory=list, description="Workload names.")
    workers: list[int] = Field(default=[1], min_length=1, description="Default worker counts.")
    threads: list[int] = Field(default=[1], min_length=1, description="Default thread counts.")
    server_settings: dict[str, ServerSettings] = Field(
        default_factory=dict,
        description="Per-server worker/thread lists overriding the defaults, by server name.",
    )
    server_options: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Server settings by server name, e.g. {waitress = {connection_limit = "
        "100}}; each server lists the ones it takes (docs/servers.md).",
    )
    workload_params: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="Parameters per workload, e.g. {cpu = {n = 20}, io = {ms = 10}}.",
    )
    worker_max_requests: list[int] = Field(
        default=[0],
        min_length=1,
        description="Worker recycling sweep: a worker is replaced after this many requests "
        "(0 = never), on servers that support it (docs/config.md#worker-recycling).",
    )

    @field_validator("worker_max_requests")
    @classmethod
    def _max_requests(cls, v: list[int]) -> list[int]:
        if any(x < 0 or x > 100_000_000 for x in v):
            raise ValueError("every value must be 0..100000000 (0 = never recycle)")
        return list(dict.fromkeys(v))


class LoadConfig(_Model):
    """How hard and how long each cell is loaded."""

    model: Literal["closed", "open"] = Field(
        "closed", description="closed: N connections, one request in flight each; open: rates."
    )
    connections: list[int] = Field(
        default=[64], min_length=1, description="Connections (closed loop sweep; open-loop pool)."
    )
    rates: list[float] = Field(
        default_factory=list, description="Open loop: target requests/s, one load point each."
    )
    duration_s: float = Field(3.0, gt=0, le=3600, description="Measured iteration length.")
    warmup: Literal["steady", "fixed", "deep"] = Field(
        "steady",
        description="steady: warm up until the throughput is steady (or warmup_cap_s), per "
        "replicate and workload (docs/steady-state.md); fixed: warmup_iterations x "
        "warmup_duration_s; deep: Barrett's method, a long in-process series of deep_s per "
        "replicate, each classified (flat, warm-up, slowdown, no steady state).",
    )
    deep_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="deep: the length of each replicate's warm-up series (it never stops early).",
    )
    warmup_cap_s: float = Field(
        20.0,
        gt=0,
        le=3600,
        description="steady: the longest warm-up; a cell that reaches it is flagged not_steady.",
    )
    steady_window_s: float = Field(
        2.0, gt=0, le=600, description="steady: the trailing window judged for trend and spread."
    )
    jit_min_requests: int = Field(
        10_000,
        ge=0,
        le=10_000_000,
        description="steady, on a JIT interpreter (PyPy): requests served before a warm-up "
        "may be judged steady (a JIT stays at interpreter speed until it compiles the path).",
    )
    warmup_duration_s: float = Field(
        2.0, gt=0, le=3600, description="fixed: warm-up iteration length."
    )
    warmup_iterations: int = Field(
        1, ge=0, le=100, description="fixed: warm-up iterations per replicate."
    )
    iterations: int = Field(1, ge=1, le=100, description="Measured iterations per replicate.")
    replicates: int = Field(
        3, ge=1, le=100, description="Fresh server processes per cell (one after the other)."
    )
    ci_target: float | None = Field(
        None,
        gt=0,
        le=10,
        description="Replicate budget: cells whose median req/s has a 95% CI half-width above "
        "this fraction of the median (0.05 = +-5%) get more replicates, up to max_replicates "
        "(a CI from 2 replicates is wide: Student's t, docs/steady-state.md).",
    )
    max_replicates: int = Field(
        5,
        ge=1,
        le=100,
        description="Replicate budget: the most replicates a cell gets, when its replicates "
        "settle at different levels (pywebbench.modes) or its CI is wider than ci_target.",
    )
    timeout_s: float = Field(5.0, gt=0, le=600, description="Per-request timeout of the engine.")
    io: Literal["auto", "epoll", "uring"] = Field(
        "auto",
        description="The engine's I/O backend: auto = io_uring where the kernel supports it, "
        "else epoll.",
    )
    pause_s: float = Field(0.0, ge=0, le=60, description="Pause between iterations.")
    server_scope: Literal["cell", "stack"] = Field(
        "cell",
        description="cell: a fresh server process for every replicate of every cell; stack: "
        "one fresh server per replicate serves all the stack's cells in turn (fewer starts).",
    )
    connection_mode: list[Literal["keepalive", "close"]] = Field(
        default=["keepalive"],
        min_length=1,
        description="Connection mode sweep: keepalive (connections reused) and/or close "
        "(a new connection per request, as ab without -k).",
    )
    bind: list[Literal["tcp", "unix"]] = Field(
        default=["tcp"],
        min_length=1,
        description="Bind sweep: where the server under test listens, tcp (a loopback port) "
        "and/or unix (a unix-domain socket, as behind nginx), on servers that can "
        "(docs/config.md#bind).",
    )
    syscalls: bool = Field(
        False,
        description="After each replicate's measured iterations, trace the server tree with "
        "strace -f -c in a separate, unmeasured window (docs/syscalls.md).",
    )
    syscalls_duration_s: float = Field(
        2.0, gt=0, le=600, description="syscalls: length of the traced load window."
    )
    faults: str | None = Field(
        None,
        description=(
            "Fault mix (docs/faults.md), e.g. 'default' or 'slowloris=50,churn=100/s': each "
            "replicate is measured again under it and the cell gets a robustness score. "
            "'slowloris=10,100,500' sweeps the attack size; 'fresh=20%' and 'lead=1s' set "
            "the good clients' arriving connections and the attack's head start."
        ),
    )
    slo: str | None = Field(
        None,
        description="Latency SLO, e.g. 'p99=50ms' (docs/slo.md): after its measured "
        "iterations each replicate searches the highest open-loop rate that meets it (the knee).",
    )
    slo_budget_s: float = Field(
        120.0, gt=0, le=86_400, description="slo: the longest knee search, per replicate."
    )
    slo_tolerance: float = Field(
        0.05, gt=0, lt=1, description="slo: bisect until the bracket is this narrow (relative)."
    )
    slo_warmup_s: float = Field(
        1.0, ge=0, le=600, description="slo: warm-up at each probe's rate before it is measured."
    )
    load_agents: int = Field(
        1,
        ge=1,
        le=1024,
        description="Load agents per iteration (Ray actors, docs/scale-out.md); connections "
        "and rate are split between them. More than 1 needs Ray.",
    )
    ray_address: str | None = Field(
        None,
        description="Ray cluster (HOST:PORT) for the load agents or the ray executor; none: a "
        "local Ray is started for the run and stopped after.",
    )
    executor: Literal["local", "ray"] = Field(
        "local",
        description="Where cells run: local (one after another on this host) or ray "
        "(independent cells, or whole stacks with server_scope = stack, in parallel on the "
        "nodes of a Ray cluster; docs/scale-out.md).",
    )

    @property
    def warmups(self) -> int:
        """Warm-up iterations per replicate: one adaptive one, or the fixed number."""
        return self.warmup_iterations if self.warmup == "fixed" else 1

    @property
    def iterations_per_replicate(self) -> int:
        return self.warmups + self.iterations

    def window_s(self) -> tuple[float, float]:
        """Load seconds per replicate: (least, most); steady warm-ups are between their
        window and their cap. A syscalls window (``syscalls``) counts too."""
        measured = self.iterations * self.duration_s
        measured += self.syscalls_duration_s if self.syscalls else 0.0
        if self.warmup == "steady":
            return self.steady_window_s + measured, self.warmup_cap_s + measured
        if self.warmup == "deep":
            return self.deep_s + measured, self.deep_s + measured
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
            from pywebbench.run.slo import parse_slo

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

    @field_validator("connection_mode", "bind")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        return list(dict.fromkeys(v))


class CpuConfig(_Model):
    """Core pinning. Server and generator cores must be disjoint."""

    server: list[int] = Field(default_factory=list, description="Server cores (default: [0]).")
    generator: list[int] = Field(
        default_factory=list, description="Load generator cores (default: the other cores)."
    )


class TimeoutConfig(_Model):
    """Upper bounds of each phase of a cell."""

    provision_s: float = Field(1200.0, gt=0, description="Building one virtualenv.")
    start_s: float = Field(60.0, gt=0, description="Server start until it answers.")
    verify_s: float = Field(30.0, gt=0, description="Verification requests.")
    stop_s: float = Field(15.0, gt=0, description="Stopping the server process group.")


class AppConfig(_Model):
    """Bring your own app instead of the built-in frameworks."""

    app: str = Field(description='"module:callable" of your WSGI or ASGI application.')
    interface: Literal["wsgi", "asgi"] | None = Field(
        None, description="Declared interface; detected inside the stack venv when omitted."
    )
    requirements: str | None = Field(None, description="requirements.txt to install.")
    project: str | None = Field(
        None, description="Project directory (put on PYTHONPATH; installed if it has a pyproject)."
    )
    paths: list[str] = Field(default=["/"], min_length=1, description="Paths to load.")
    expect_status: int | None = Field(None, description="Expected status (default: any 2xx).")
    expect_body: str | None = Field(None, description="A substring the body must contain.")

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str:
        module, _, attr = v.partition(":")
        if not module or not attr:
            raise ValueError('must look like "module:callable"')
        return v

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        for p in v:
            if not p.startswith("/"):
                raise ValueError(f"path {p!r} must start with /")
        return v


class StudyConfig(_Model):
    """A whole study. Every key is optional; the profile fills in the rest."""

    profile: Literal["quick", "standard", "full"] | None = Field(
        None, description="Built-in profile this study starts from (default quick)."
    )
    results_dir: str = Field(
        DEFAULT_RESULTS_DIR, description="Store, reports and server logs go here."
    )
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    cpus: CpuConfig = Field(default_factory=CpuConfig)
    timeouts: TimeoutConfig = Field(default_factory=TimeoutConfig)
    app: AppConfig | None = None
    report: bool = Field(True, description="Write the HTML/Markdown report at the end.")

    def workers_threads(self, server: str) -> list[tuple[int, int]]:
        """The (workers, threads) variants to run ``server`` with."""
        s = self.matrix.server_settings.get(server)
        workers = s.workers if s else self.matrix.workers
        threads = s.threads if s else self.matrix.threads
        return [(w, t) for w in workers for t in threads]


# --- profiles -------------------------------------------------------------------------------

_WSGI_SERVERS = ["gunicorn-gthread", "granian-wsgi"]
_ASGI_SERVERS = ["uvicorn-h11", "granian-asgi"]

PROFILE_DATA: dict[str, dict[str, Any]] = {
    # The README's main job: about 10 minutes on a 2-core machine, provisioning included.
    "quick": {
        "matrix": {
            "servers": _WSGI_SERVERS + _ASGI_SERVERS,
            "frameworks": ["raw-wsgi", "flask", "starlette"],
            # json left out: it ranked the stacks as hello did, and its 12 cells took ~4 of
            # the ~14 minutes the study took with it (docs/steady-state.md)
            "workloads": ["hello", "cpu"],
            "server_settings": {"gunicorn-gthread": {"workers": [1], "threads": [4]}},
        },
        "load": {
            "connections": [64],
            "duration_s": 3.0,
            "warmup": "steady",
            "warmup_cap_s": 15.0,
            "iterations": 1,
            # 3: a 95% t interval from 2 replicates spans +-9 standard deviations, from 3
            # +-2.5 (docs/steady-state.md); the replicate budget has no room left in 10-11 min
            "replicates": 3,
            # one server per stack replicate serves its workloads: fewer cold starts,
            # which keeps the wall time near the sum of the load windows (runner_overhead.py)
            "server_scope": "stack",
        },
    },
    # About half an hour: more servers and frameworks, a connections sweep, longer windows.
    "standard": {
        "matrix": {
            "servers": [
                "gunicorn-sync",
                "gunicorn-gthread",
                "waitress",
                "granian-wsgi",
                "uvicorn-uvloop",
                "uvicorn-h11",
                "hypercorn",
                "granian-asgi",
            ],
            "frameworks": ["raw-wsgi", "flask", "django", "raw-asgi", "starlette", "fastapi"],
            "workloads": ["hello", "json", "cpu", "io"],
            "server_settings": {
                "gunicorn-gthread": {"workers": [1], "threads": [4]},
                "waitress": {"workers": [1], "threads": [4]},
            },
        },
        "load": {
            "connections": [16, 64],
            "duration_s": 3.0,
            "warmup_duration_s": 2.0,
            "warmup_iterations": 1,
            "iterations": 1,
            "replicates": 2,
        },
    },
    # Hours: every server, framework and workload of the catalogue, a wide sweep.
    "full": {
        "matrix": {
            "servers": [],  # empty = all
            "frameworks": [],
            "workloads": [],
            "server_settings": {
                "gunicorn-gthread": {"workers": [1], "threads": [4, 16]},
                "waitress": {"workers": [1], "threads": [4, 16]},
            },
        },
        "load": {
            "connections": [1, 16, 64, 256],
            "duration_s": 10.0,
            "warmup_duration_s": 5.0,
            "warmup_iterations": 2,
            "iterations": 2,
            "replicates": 3,
        },
    },
}


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
    try:
        config = StudyConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, "options")) from None
    check(config)
    return config


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
        print("usage: python -m pywebbench.run.config --schema", file=sys.stderr)
        sys.exit(2)
