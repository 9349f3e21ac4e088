"""The ``[matrix]``, ``[cpus]``, ``[timeouts]`` and ``[app]`` tables of ``pywebbench.toml``.

Part of the study model (:mod:`pywebbench.study.config` has ``[load]`` and the whole); each key
is declared once, with its mark (:mod:`pywebbench.study.declare`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pywebbench.study.declare import FileOnly, Flag, Stored, one_or_list
from pywebbench.study.flag_texts import PYTHON_HELP, SERVER_OPTION_HELP, parse_server_options

_PHASE_BOUND = FileOnly("a bound of one phase of a cell; the default fits every built-in stack")


class Table(BaseModel):
    """A table of ``pywebbench.toml``: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ServerSettings(Table):
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


class MatrixConfig(Table):
    """What to run: the product of these lists, pairing servers and frameworks by interface."""

    interpreters: Annotated[list[str], Flag("--python", help=PYTHON_HELP)] = Field(
        default_factory=list,
        description="Interpreter names (cpython3.11, pypy3.9), versions (3.13, 3.13t: installed "
        "when missing, docs/interpreters.md), 3.13t@gil1 (PYTHON_GIL), paths, or 'all' (one "
        "per language version found). Empty: the running CPython plus pypy3 when installed.",
    )
    servers: Annotated[
        list[str], Flag("--server", help="Servers (comma list, globs): granian-*.")
    ] = Field(default_factory=list, description="Server adapter names.")
    frameworks: Annotated[
        list[str], Flag("--framework", help="Frameworks (comma list, globs).")
    ] = Field(default_factory=list, description="Framework names (ignored when [app] is given).")
    workloads: Annotated[list[str], Flag("--workload", help="Workloads: hello,json,cpu,...")] = (
        Field(default_factory=list, description="Workload names.")
    )
    workers: Annotated[
        list[int],
        Flag("--workers", help="Worker processes sweep: 1,2.", also={"server_settings": {}}),
    ] = Field(default=[1], min_length=1, description="Default worker counts.")
    threads: Annotated[
        list[int],
        Flag("--threads", help="Threads per worker sweep: 1,4.", also={"server_settings": {}}),
    ] = Field(default=[1], min_length=1, description="Default thread counts.")
    server_settings: Annotated[
        dict[str, ServerSettings],
        FileOnly("a table per server; --workers and --threads replace it"),
    ] = Field(
        default_factory=dict,
        description="Per-server worker/thread lists overriding the defaults, by server name.",
    )
    server_options: Annotated[
        dict[str, dict[str, int]],
        Flag("--server-option", help=SERVER_OPTION_HELP, parse=parse_server_options),
    ] = Field(
        default_factory=dict,
        description="Server settings by server name, e.g. {waitress = {connection_limit = "
        "100}}; each server lists the ones it takes (docs/servers.md).",
    )
    workload_params: Annotated[dict[str, dict[str, int]], FileOnly("a table per workload")] = Field(
        default_factory=dict,
        description="Parameters per workload, e.g. {cpu = {n = 20}, io = {ms = 10}}.",
    )
    worker_max_requests: Annotated[
        list[int],
        Flag(
            "--worker-max-requests",
            help="Worker recycling sweep: 0,1000,100 (0 = never; servers that support it).",
        ),
    ] = Field(
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


class CpuConfig(Table):
    """Core pinning. Server and generator cores must be disjoint."""

    server: Annotated[list[int], Flag("--server-cpus", help="Cores for servers (default 0).")] = (
        Field(default_factory=list, description="Server cores (default: [0]).")
    )
    generator: Annotated[
        list[int], Flag("--generator-cpus", help="Cores for the load generator.")
    ] = Field(default_factory=list, description="Load generator cores (default: the other cores).")


class TimeoutConfig(Table):
    """Upper bounds of each phase of a cell."""

    provision_s: Annotated[float, _PHASE_BOUND] = Field(
        1200.0, gt=0, description="Building one virtualenv."
    )
    start_s: Annotated[float, _PHASE_BOUND] = Field(
        60.0, gt=0, description="Server start until it answers."
    )
    verify_s: Annotated[float, _PHASE_BOUND] = Field(
        30.0, gt=0, description="Verification requests."
    )
    stop_s: Annotated[float, _PHASE_BOUND] = Field(
        15.0, gt=0, description="Stopping the server process group."
    )


class AppConfig(Table):
    """Bring your own app instead of the built-in frameworks."""

    app: Annotated[
        str, Flag("--app", help="Your app instead of the frameworks: module:callable.")
    ] = Field(description='"module:callable" of your WSGI or ASGI application.')
    interface: Annotated[
        Literal["wsgi", "asgi"] | None, Flag("--interface", help="Your app's interface.")
    ] = Field(None, description="Declared interface; detected inside the stack venv when omitted.")
    requirements: Annotated[
        str | None, Flag("--requirements", help="requirements.txt of your app.")
    ] = Field(None, description="requirements.txt to install.")
    project: Annotated[
        str | list[str] | None,
        Flag(
            "--project",
            help="Directory of your app (put on PYTHONPATH). Repeatable: each directory is its "
            "own stack, named app-MODULE.CALLABLE@DIRNAME (versions or twins of one app).",
            split=False,
            parse=one_or_list,
        ),
    ] = Field(
        None,
        description="Project directory (put on PYTHONPATH; installed if it has a pyproject), or "
        "a list of them: each is its own stack, named after the directory "
        "(`app-MODULE.CALLABLE@DIRNAME`), with the same paths, mix and requirements.",
    )
    paths: Annotated[
        list[str], Flag("--path", help="Path of your app to load (repeatable).", split=False)
    ] = Field(default=["/"], min_length=1, description="Paths to load.")
    mix: Annotated[
        str | None,
        Flag(
            "--mix",
            help="A traffic mix for your app instead of --path (TOML or JSON, docs/mix.md): "
            "each request drawn from its weighted entries, each endpoint verified first; read "
            "once as the run starts and kept with it (--resume uses the same requests).",
        ),
    ] = Field(
        None,
        description="A traffic mix file (docs/mix.md) loaded instead of `paths`; "
        "figures per endpoint in the store and the report. Read once as the run starts: "
        "its requests are kept with the run (`mix_entries`).",
    )
    mix_entries: Annotated[
        list[dict[str, Any]] | None,
        Stored("written by `run` when a study starts; refused in a study file"),
    ] = Field(
        None,
        description="The requests of `mix` as `run` read them when the study started (each "
        "entry in the engine's layout, a body as `body_b64`), kept with the run: `--resume` "
        "measures the cells still to do with these, not with the file as it is by then. "
        "Unset in runs stored before it was kept (`--resume` reads the file again).",
    )
    expect_status: Annotated[
        int | None, Flag("--expect-status", help="Status your app must answer.")
    ] = Field(None, description="Expected status (default: any 2xx).")
    expect_body: Annotated[
        str | None, Flag("--expect-body", help="A substring the body of your app must contain.")
    ] = Field(None, description="A substring the body must contain.")

    @field_validator("app")
    @classmethod
    def _app(cls, v: str) -> str:
        module, _, attr = v.partition(":")
        if not module or not attr:
            raise ValueError('must look like "module:callable"')
        return v

    @field_validator("project")
    @classmethod
    def _project(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list) and not v:
            raise ValueError("give at least one directory, or leave the key out")
        return v

    @field_validator("mix_entries")
    @classmethod
    def _mix_entries(cls, v: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if v is None:
            return v
        from pywebbench.catalogue.mix import MixEntry

        if not v:
            raise ValueError("a mix has at least one request")
        for i, entry in enumerate(v):
            try:
                MixEntry.model_validate(entry)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ValueError(f"request {i + 1}: {where}: {first['msg']}") from None
        return v

    @model_validator(mode="after")
    def _entries_of_a_mix(self) -> AppConfig:
        if self.mix_entries is not None and self.mix is None:
            raise ValueError("mix_entries are the requests of app.mix, which is not given")
        return self

    @property
    def projects(self) -> list[str]:
        """The project directories, as given: none, one, or several (each its own stack)."""
        if self.project is None:
            return []
        return [self.project] if isinstance(self.project, str) else list(self.project)

    @field_validator("paths")
    @classmethod
    def _paths(cls, v: list[str]) -> list[str]:
        for p in v:
            if not p.startswith("/"):
                raise ValueError(f"path {p!r} must start with /")
        return v
