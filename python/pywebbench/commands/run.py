"""``pywebbench run``: run a whole study (the matrix), store every number, write the report."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

import click
from rich.console import Console

from pywebbench.run.config import (
    DEFAULT_RESULTS_DIR,
    PROFILES,
    ConfigError,
    StudyConfig,
    check,
    load_toml,
    resolve,
)

DEFAULT_CONFIG = "pywebbench.toml"
EXIT_CONFIG = 2
EXIT_INTERRUPTED = 130


def _csv(values: tuple[str, ...]) -> list[str]:
    return [p.strip() for v in values for p in v.split(",") if p.strip()]


def _numbers(flag: str, values: tuple[str, ...], kind: type) -> list[Any]:
    out = []
    for p in _csv(values):
        try:
            out.append(kind(p))
        except ValueError:
            raise ConfigError(f"{flag} {p!r}: not a number") from None
    return out


def _server_options(values: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """``--server-option waitress.connection_limit=100`` -> {"waitress": {...: 100}}."""
    out: dict[str, dict[str, int]] = {}
    for text in values:
        head, _, value = text.partition("=")
        server, _, name = head.partition(".")
        if not (server and name and value.strip().isdigit()):
            raise ConfigError(
                f"--server-option {text!r}: expected SERVER.SETTING=NUMBER, e.g. "
                "waitress.connection_limit=100"
            )
        out.setdefault(server.strip(), {})[name.strip()] = int(value)
    return out


def _overrides(options: dict[str, Any]) -> dict[str, Any]:
    """CLI options -> a nested dict shaped like pywebbench.toml."""
    matrix: dict[str, Any] = {}
    load: dict[str, Any] = {}
    for key, flag in [
        ("interpreters", "python"),
        ("servers", "server"),
        ("frameworks", "framework"),
        ("workloads", "workload"),
    ]:
        if options[flag]:
            matrix[key] = _csv(options[flag])
    if options["workers"]:
        matrix["workers"] = _numbers("--workers", options["workers"], int)
        matrix["server_settings"] = {}
    if options["threads"]:
        matrix["threads"] = _numbers("--threads", options["threads"], int)
        matrix["server_settings"] = {}
    if options["server_option"]:
        matrix["server_options"] = _server_options(options["server_option"])
    if options["connections"]:
        load["connections"] = _numbers("--connections", options["connections"], int)
    if options["worker_max_requests"]:
        matrix["worker_max_requests"] = _numbers(
            "--worker-max-requests", options["worker_max_requests"], int
        )
    if options["connection_mode"]:
        load["connection_mode"] = _csv(options["connection_mode"])
    if options["bind"]:
        load["bind"] = _csv(options["bind"])
    if options["syscalls"]:
        load["syscalls"] = True
    if options["rate"]:
        if any(":" in v or "@" in v for v in options["rate"]):
            # A load point is one rate (stored, compared and warmed up to a steady state).
            raise ConfigError(
                "--rate: run sweeps constant rates (one load point each); for a ramp or "
                "steps use pywebbench load --rate"
            )
        load["rates"] = _numbers("--rate", options["rate"], float)
        load["model"] = "open"
    for key, flag in [
        ("duration_s", "duration"),
        ("warmup", "warmup"),
        ("warmup_cap_s", "warmup_cap"),
        ("deep_s", "deep_s"),
        ("ci_target", "ci_target"),
        ("max_replicates", "max_replicates"),
        ("warmup_duration_s", "warmup_duration"),
        ("warmup_iterations", "warmup_iterations"),
        ("iterations", "iterations"),
        ("replicates", "replicates"),
        ("timeout_s", "timeout"),
        ("server_scope", "server_scope"),
        ("faults", "faults"),
        ("slo_budget_s", "slo_budget"),
        ("load_agents", "load_agents"),
        ("ray_address", "ray"),
        ("executor", "executor"),
        ("syscalls_duration_s", "syscalls_duration"),
        ("io", "io"),
    ]:
        if options[flag] is not None:
            load[key] = options[flag]
    if options["slo"] is not None:
        from pywebbench.run.slo import SloError, parse_slo

        try:
            parse_slo(options["slo"])
        except SloError as exc:
            raise ConfigError(f"--slo: {exc}") from None
        load["slo"] = options["slo"]
    out: dict[str, Any] = {}
    if matrix:
        out["matrix"] = matrix
    if load:
        out["load"] = load
    cpus: dict[str, Any] = {}
    if options["server_cpus"]:
        cpus["server"] = _numbers("--server-cpus", options["server_cpus"], int)
    if options["generator_cpus"]:
        cpus["generator"] = _numbers("--generator-cpus", options["generator_cpus"], int)
    if cpus:
        out["cpus"] = cpus
    if options["results_dir"]:
        out["results_dir"] = options["results_dir"]
    if options["no_report"]:
        out["report"] = False
    if options["app"]:
        app: dict[str, Any] = {"app": options["app"]}
        for key in ("interface", "requirements", "project", "expect_status", "expect_body"):
            if options[key] is not None:
                app[key] = options[key]
        if options["path"]:
            app["paths"] = list(options["path"])
        out["app"] = app
    elif any(options[k] for k in ("interface", "requirements", "project", "path")):
        raise ConfigError("--interface/--requirements/--project/--path need --app")
    return out


@click.command("run")
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Study file (default: ./{DEFAULT_CONFIG} if present). Reference: docs/config.md.",
)
@click.option(
    "--profile",
    type=click.Choice(PROFILES),
    help="Built-in study to start from: quick (default, 10-11 min), standard (~30 min), "
    "full (hours).",
)
@click.option("--python", multiple=True, help="Interpreters: cpython3.11,pypy3.9 or paths.")
@click.option("--server", multiple=True, help="Servers (comma list, globs): granian-*.")
@click.option("--framework", multiple=True, help="Frameworks (comma list, globs).")
@click.option("--workload", multiple=True, help="Workloads: hello,json,cpu,...")
@click.option(
    "--connections", "-c", multiple=True, help="Connections sweep: 1,16,64 (one load point each)."
)
@click.option("--rate", multiple=True, help="Open loop: target requests/s sweep: 1000,5000.")
@click.option("--duration", "-d", type=float, help="Seconds per measured iteration.")
@click.option(
    "--warmup",
    type=click.Choice(["steady", "fixed", "deep"]),
    help="steady (default): warm up until throughput is steady, or --warmup-cap; fixed: "
    "--warmup-iterations x --warmup-duration; deep: Barrett's method, a --deep-s long series "
    "per replicate (it never stops early), then a table of each replicate's class: flat, "
    "warm-up, slowdown, no steady state (docs/steady-state.md).",
)
@click.option(
    "--deep-s", type=float, help="deep: seconds of each replicate's series (default 120)."
)
@click.option(
    "--warmup-cap", type=float, help="steady: longest warm-up in seconds (then: not_steady)."
)
@click.option("--warmup-duration", type=float, help="fixed: seconds per warm-up iteration.")
@click.option("--warmup-iterations", type=int, help="fixed: warm-up iterations per replicate.")
@click.option("--iterations", type=int, help="Measured iterations per replicate.")
@click.option("--replicates", type=int, help="Fresh server processes per cell.")
@click.option(
    "--ci-target",
    type=float,
    help="More replicates for cells whose 95%% CI half-width exceeds this fraction of the "
    "median (0.05 = +-5%%), up to --max-replicates.",
)
@click.option(
    "--max-replicates",
    type=int,
    help="Most replicates per cell: more than --replicates when the replicates settle at "
    "levels over 1.25x apart (inconsistent) or with --ci-target.",
)
@click.option("--timeout", type=float, help="Per-request timeout (s).")
@click.option(
    "--io",
    type=click.Choice(["auto", "epoll", "uring"]),
    help="The engine's I/O backend (auto: io_uring where supported, else epoll).",
)
@click.option(
    "--faults",
    help="Also measure every cell under this fault mix and score its robustness: 'default', "
    "'slowloris=50,reset-mid-response=10/s', ...; 'slowloris=10,100,500' sweeps the attack "
    "size and names the breaking point; 'fresh=20%', 'lead=1s' (docs/faults.md).",
)
@click.option(
    "--slo",
    help="Latency SLO, e.g. p99=50ms: each replicate also searches the highest open-loop "
    "rate that meets it, the knee (docs/slo.md).",
)
@click.option(
    "--slo-budget", type=float, help="Longest knee search per replicate, in seconds (120)."
)
@click.option(
    "--server-scope",
    type=click.Choice(["cell", "stack"]),
    help="cell: a fresh server for every replicate of every cell; stack: one fresh server "
    "per replicate serves all of a stack's workloads in turn (fewer starts, less overhead).",
)
@click.option(
    "--connection-mode",
    multiple=True,
    help="Connection sweep: keepalive,close (close: a new connection per request).",
)
@click.option(
    "--bind",
    multiple=True,
    help="Where the server listens, a sweep: tcp (default: a loopback port) and/or unix (a "
    "unix-domain socket, as behind nginx): --bind tcp,unix measures both side by side. "
    "Servers that cannot bind one are skipped (pywebbench stacks --json: unix_bind).",
)
@click.option(
    "--worker-max-requests",
    multiple=True,
    help="Worker recycling sweep: 0,1000,100 (0 = never; servers that support it).",
)
@click.option(
    "--syscalls",
    is_flag=True,
    help="Trace the server with strace -f -c after each replicate: syscalls per request.",
)
@click.option("--syscalls-duration", type=float, help="syscalls: seconds of the traced window.")
@click.option(
    "--server-option",
    multiple=True,
    help="A server setting, SERVER.SETTING=NUMBER (repeatable), e.g. "
    "waitress.connection_limit=100 (docs/servers.md lists them).",
)
@click.option("--workers", multiple=True, help="Worker processes sweep: 1,2.")
@click.option("--threads", multiple=True, help="Threads per worker sweep: 1,4.")
@click.option(
    "--load-agents",
    type=int,
    help="Load each iteration from N agents (Ray actors; docs/scale-out.md).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    help="Where cells run: local (default), or ray: independent cells (whole stacks with "
    "--server-scope stack) in parallel on the nodes of a Ray cluster (docs/scale-out.md).",
)
@click.option(
    "--ray",
    help="Ray cluster HOST:PORT for --executor ray or --load-agents (default: a local Ray, "
    "started for the run and stopped after).",
)
@click.option("--server-cpus", multiple=True, help="Cores for servers (default 0).")
@click.option("--generator-cpus", multiple=True, help="Cores for the load generator.")
@click.option("--app", help="Your app instead of the frameworks: module:callable.")
@click.option("--interface", type=click.Choice(["wsgi", "asgi"]), help="Your app's interface.")
@click.option("--requirements", help="requirements.txt of your app.")
@click.option("--project", help="Directory of your app (put on PYTHONPATH).")
@click.option("--path", multiple=True, help="Path of your app to load (repeatable).")
@click.option("--expect-status", type=int, help="Status your app must answer.")
@click.option("--expect-body", help="A substring the body of your app must contain.")
@click.option(
    "--results-dir",
    help=f"Where the store, reports and logs go (default ./{DEFAULT_RESULTS_DIR}).",
)
@click.option("--no-report", is_flag=True, help="Skip the HTML/Markdown report.")
@click.option(
    "--resume",
    is_flag=False,
    flag_value="latest",
    default=None,
    metavar="[RUN_ID]",
    help="Continue an interrupted run (default: the latest); nothing is measured twice.",
)
@click.option("--dry-run", is_flag=True, help="Print the matrix and exit.")
def command(**options: Any) -> None:
    """Run a study: interpreters x servers x frameworks x workloads x load points.

    \b
    Each cell: provision (cached) -> start the server pinned to its cores -> verify ->
    warm-up iterations -> measured iterations -> stop; each replicate is a fresh server.
    Every iteration is stored at once in RESULTS_DIR/pywebbench.sqlite; failures are
    recorded with their phase and the matrix carries on. Ctrl-C stops within seconds and
    keeps everything measured: continue with `pywebbench run --resume`.

    \b
    Examples:
      pywebbench run                                  the quick profile (10-11 min)
      pywebbench run --server granian-wsgi,gunicorn-gthread --framework flask \\
                     --workload hello,json -c 1,16,64 -d 5
      pywebbench run --app myapp:app --requirements requirements.txt --path / --path /api
      pywebbench run --server gunicorn-sync --framework raw-wsgi --workload hello \\
                     --slo p99=20ms                   the highest rate meeting the SLO
      pywebbench run --server gunicorn-gthread,uwsgi --bind tcp,unix
                                                      a port and a unix socket, side by side
      pywebbench run --config pywebbench.toml --profile standard
      pywebbench run --resume
    """
    console = Console(highlight=False, log_path=False)
    if not console.is_terminal:  # logs and pipes: wide enough for the summary tables
        console = Console(highlight=False, width=160, log_path=False)
    try:
        code = _main(options, console)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(EXIT_CONFIG)
    sys.exit(code)


def _main(options: dict[str, Any], console: Console) -> int:
    from pywebbench.run.matrix import expand
    from pywebbench.store import DEFAULT_FILENAME, Store, StoreError

    run_id: str | None = None
    if options["resume"]:
        extra = set(_overrides(options)) - {"results_dir", "report"}
        if extra or options["config_path"] or options["profile"]:
            raise ConfigError(
                "--resume continues a run with its own stored configuration; drop the other "
                "study options (" + ", ".join(sorted(extra) or ["--config/--profile"]) + ")"
            )
        results_dir = Path(options["results_dir"] or DEFAULT_RESULTS_DIR)
        store_path = results_dir / DEFAULT_FILENAME
        try:
            with Store(store_path, create=False) as store:
                run = (
                    store.latest_run()
                    if options["resume"] == "latest"
                    else store.run(options["resume"])
                )
        except StoreError as exc:
            raise ConfigError(f"--resume: {exc}") from None
        if run is None:
            raise ConfigError(f"--resume: {store_path} holds no runs")
        if run.status == "completed":
            console.print(f"run {run.id} is already complete; nothing to resume.")
            return 0
        config = StudyConfig.model_validate(run.config)
        config.results_dir = str(results_dir)
        if options["no_report"]:
            config.report = False
        run_id = run.id
        console.print(f"resuming run {run.id} ({run.status})")
    else:
        path = options["config_path"]
        if path is None and Path(DEFAULT_CONFIG).exists():
            path = Path(DEFAULT_CONFIG)
        data = load_toml(path) if path is not None else {}
        config = resolve(
            data,
            _overrides(options),
            profile=options["profile"],
            source=str(path or DEFAULT_CONFIG),
        )
    check(config)
    from pywebbench.run.executor import check_executor

    check_executor(config.load)
    if config.load.syscalls:
        _check_tracing()
    matrix = expand(config)
    if not matrix.cells:
        reasons = "; ".join(f"{n}: {r}" for n, r in (matrix.unavailable + matrix.skipped)[:5])
        raise ConfigError(
            "the selection has no runnable cell" + (f" ({reasons})" if reasons else "")
        )
    load = config.load
    per_cell = load.replicates * load.iterations_per_replicate
    least, most = (len(matrix.cells) * load.replicates * w / 60 for w in load.window_s())
    if load.slo:  # each replicate's knee search may take up to its budget (docs/slo.md)
        most += len(matrix.cells) * load.replicates * load.slo_budget_s / 60
    span = f"~{least:.1f} min" if least == most else f"{least:.1f}-{most:.1f} min"
    console.print(
        f"[bold]{len(matrix.cells)} cells[/] ({len(matrix.variants)} stacks on "
        f"{', '.join(i.name for i in matrix.interpreters)}), {per_cell} iterations each; "
        f"load windows alone take {span}"
    )
    for name, reason in matrix.unavailable:
        console.print(f"  [yellow]unavailable[/] {name}: {reason}")
    for name, reason in matrix.skipped:
        console.print(f"  [yellow]skipped[/] {name}: {reason}")
    if options["dry_run"]:
        for cell in matrix.cells:
            console.print(f"  {cell.label}")
        return 0
    return _execute(config, matrix, console, run_id)


def _check_tracing() -> None:
    """--syscalls: strace installed and allowed to attach, before anything runs."""
    from pywebbench.run.syscalls import SyscallsError, preflight

    try:
        preflight()
    except SyscallsError as exc:
        raise ConfigError(str(exc)) from None


def _as_keyboard_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _execute(config: StudyConfig, matrix: Any, console: Console, run_id: str | None) -> int:
    from pywebbench.load.ray_agents import AgentsError, RayUnavailable
    from pywebbench.report import generate
    from pywebbench.run.console import LiveDisplay, summary_tables
    from pywebbench.run.executor import open_executor
    from pywebbench.run.ray_load import study_agent
    from pywebbench.run.runner import run_study
    from pywebbench.store import DEFAULT_FILENAME, RunLocked, Store

    results_dir = Path(config.results_dir)
    store_path = results_dir / DEFAULT_FILENAME
    load = config.load
    # SIGTERM/SIGHUP end the study like Ctrl-C: servers stopped, run marked interrupted.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _as_keyboard_interrupt)
    executor = open_executor(load)  # ray: joined (or started) before anything is written
    with executor, Store(store_path) as store:
        done = (
            {c.key for c in store.cells(run_id) if c.status in ("ok", "failed")}
            if run_id
            else set()
        )
        total = sum(
            load.replicates * load.iterations_per_replicate
            for c in matrix.cells
            if c.key not in done
        )
        try:
            with (
                study_agent(load.load_agents, load.ray_address) as agent,
                LiveDisplay(console, total) as live,
            ):
                outcome = run_study(
                    config,
                    matrix,
                    store,
                    results_dir=results_dir,
                    agent=agent,
                    events=live.events(),
                    run_id=run_id,
                    executor=executor,
                )
        except (RunLocked, RayUnavailable, AgentsError) as exc:
            # the load agents' errors name `load`'s flag; here it is spelled --load-agents
            raise ConfigError(str(exc).replace("--agents:", "--load-agents:", 1)) from None
        study = store.load_study([outcome.run_id])
    for table in summary_tables(study):
        console.print(table)
    if load.warmup == "deep":
        from pywebbench.run.classes import class_table

        console.print(class_table(study))
    console.print(
        f"run {outcome.run_id}: {outcome.status}; cells ok {outcome.cells_ok}, "
        f"failed {outcome.cells_failed}"
        + (f", already done {outcome.cells_skipped}" if outcome.cells_skipped else "")
        + f"; wall {outcome.wall_s:.0f} s, load windows {outcome.measured_s:.0f} s"
    )
    console.print(f"store: {store_path}")
    if outcome.status == "interrupted":
        console.print(
            f"[yellow]interrupted[/]: every completed iteration is stored. Continue with:\n"
            f"  pywebbench run --resume {outcome.run_id}"
            + (f" --results-dir {results_dir}" if str(results_dir) != DEFAULT_RESULTS_DIR else "")
        )
        return EXIT_INTERRUPTED
    if config.report:
        paths = generate(store_path, [outcome.run_id], results_dir / "reports")
        console.print(f"report: {paths.html}\nsummary: {paths.markdown}")
    if outcome.cells_ok == 0:
        return 1
    return 0
