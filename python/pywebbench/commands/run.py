"""``pywebbench run``: run a whole study (the matrix), store every number, write the report."""

from __future__ import annotations

import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape

from pywebbench.commands._options import study_options
from pywebbench.help_screen import OneScreen
from pywebbench.study.config import (
    DEFAULT_RESULTS_DIR,
    ConfigError,
    StudyConfig,
    check,
    load_toml,
    resolve,
    stored,
)
from pywebbench.study.options import flag_of, given, overrides

if TYPE_CHECKING:
    from pywebbench.catalogue.base import Interpreter
    from pywebbench.study.matrix import Matrix

DEFAULT_CONFIG = "pywebbench.toml"
EXIT_CONFIG = 2
EXIT_INTERRUPTED = 130
# The keys --resume takes besides the run's stored configuration.
_RESUMABLE = ("results_dir", "report")
# The load agents' fields (pywebbench.load.ray_agents errors) -> the study keys that set them.
_AGENT_KEYS = {
    "agents": "load.load_agents",
    "ray_address": "load.ray_address",
    "connections": "load.connections",
}


@click.command(
    "run",
    cls=OneScreen,
    common=(
        "--profile",
        "--config",
        "--python",
        "--server",
        "--framework",
        "--workload",
        "--connections",
        "--duration",
        "--app",
        "--path",
        "--resume",
        "--dry-run",
    ),
    examples="""
    pywebbench run                                   # the quick study (~15 min), then a report
    pywebbench run --server granian-wsgi,gunicorn-gthread --framework flask \\
                   --workload hello,json -c 1,16,64 -d 5
    pywebbench run --app myapp:app --requirements requirements.txt --path / --path /api
    pywebbench run --app myapp:app --project v1/ --project v2/  # two versions of your app
    pywebbench run --profile versions --python 3.12,3.13,3.13t,pypy3.9  # docs/interpreters.md
    pywebbench run --resume                          # continue the interrupted run
    """,
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help=f"Study file (default: ./{DEFAULT_CONFIG} if present). Reference: docs/config.md.",
)
@study_options
@click.option(
    "--resume",
    is_flag=False,
    flag_value="latest",
    default=None,
    metavar="[RUN_ID]",
    help="Continue an interrupted run (default: the latest); nothing is measured twice.",
)
@click.option(
    "--runs",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Run the study N times, each stored as its own run with fresh server processes and "
    "its own rotation seed (--seed S: S, S+1, ...; else random); each report pools the runs "
    "so far (docs/pooling.md).",
)
@click.option("--dry-run", is_flag=True, help="Print the matrix and exit.")
def command(**options: Any) -> None:
    """Run a study: interpreters x servers x frameworks x workloads x load points.
    The stacks of a group (one workload and load point, every interpreter) start together pinned to
    the server cores, are verified, and are loaded in slices of the same rounds until warm and
    narrow (interleaved, the default); every figure is stored in RESULTS_DIR/pywebbench.sqlite,
    and the run ends with an HTML and a Markdown report. Ctrl-C keeps what was measured:
    `pywebbench run --resume` continues.

    \b
    Each group: provision (cached) -> start --replicates server processes of every stack ->
    verify -> slices, every process once a round, until each is warm and the ratios are
    within --ci-target (or --group-budget) -> stop. Cells a group cannot hold (--faults,
    --slo, --syscalls, --flamegraph, ...) take the per-cell path, and run
    says which and why; so does every cell with --design sequential (the
    version study's design): provision -> start the server -> verify -> warm-up iterations ->
    measured iterations -> stop, each replicate a fresh server.
    Every iteration is stored at once; failures are recorded with their phase and the matrix
    carries on. Ctrl-C stops within seconds.

    \b
    Each option but --config, --resume, --runs and --dry-run is also a key of pywebbench.toml
    (docs/config.md lists every key and its flag); flags override the file, which
    overrides the profile.

    \b
    More examples:
      # your app under a traffic mix, with figures per endpoint (docs/mix.md)
      pywebbench run --app myapp:app --mix mix.toml --server gunicorn-gthread,granian-wsgi
      # the highest rate meeting a latency SLO (docs/slo.md)
      pywebbench run --server gunicorn-sync --framework raw-wsgi --workload hello --slo p99=20ms
      # a port and a unix socket, side by side
      pywebbench run --server gunicorn-gthread,uwsgi --bind tcp,unix
      pywebbench run --config pywebbench.toml --profile standard
      # the quick study 3 times, each run its own processes and seed, pooled (docs/pooling.md)
      pywebbench run --runs 3
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
    from pywebbench.store import DEFAULT_FILENAME, Store, StoreError
    from pywebbench.study.matrix import expand, keep_mix, resumed_mix_note

    run_id: str | None = None
    study = overrides(options)  # validated here: an error names the flag
    profile = study.pop("profile", None)
    if options["resume"] and options["runs"] > 1:
        raise ConfigError("--resume continues one run; --runs starts new ones: drop one")
    if options["resume"]:
        extra = [o.flag.name for o in given(options) if o.flag and o.path not in _RESUMABLE]
        if extra or options["config_path"]:
            raise ConfigError(
                "--resume continues a run with its own stored configuration; drop the other "
                "study options (" + ", ".join(extra or ["--config"]) + ")"
            )
        results_dir = Path(study.get("results_dir", DEFAULT_RESULTS_DIR))
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
        config = stored(run.config)
        config.results_dir = str(results_dir)
        if study.get("report") is False:
            config.report = False
        run_id = run.id
        console.print(f"resuming run {run.id} ({run.status})")
        note = resumed_mix_note(config)
        if note is not None:
            console.print(f"  [yellow]mix[/] {escape(note)}")
    else:
        path = options["config_path"]
        if path is None and Path(DEFAULT_CONFIG).exists():
            path = Path(DEFAULT_CONFIG)
        data = load_toml(path) if path is not None else {}
        config = resolve(data, study, profile=profile, source=str(path or DEFAULT_CONFIG))
        keep_mix(config)  # the mix's requests as of now, stored with the run for --resume
    check(config)
    from pywebbench.run.executor import check_executor

    check_executor(config.load)
    if config.load.syscalls:
        _check_tracing()
    if config.load.instructions:
        _check_valgrind()
    matrix = expand(config, _interpreters(config))
    if not options["dry_run"]:  # the bring-up of a user's app: its interface
        matrix = _app_interfaces_detected(matrix)
    if not matrix.cells:
        reasons = "; ".join(f"{n}: {r}" for n, r in (matrix.unavailable + matrix.skipped)[:5])
        raise ConfigError(
            "the selection has no runnable cell" + (f" ({reasons})" if reasons else "")
        )
    console.print(
        f"[bold]{len(matrix.cells)} cells[/] ({len(matrix.variants)} stacks on "
        f"{', '.join(i.name for i in matrix.interpreters)}); {_load_plan(config, matrix)}"
    )
    for reason, count in _per_cell_reasons(config, matrix):
        console.print(f"  [yellow]per-cell path[/] {count} cell(s): {escape(reason)}")
    for name, reason in matrix.unavailable:
        console.print(f"  [yellow]unavailable[/] {name}: {reason}")
    for name, reason in matrix.skipped:
        console.print(f"  [yellow]skipped[/] {name}: {reason}")
    for app in matrix.apps:
        if not app.interface:  # --dry-run: nothing is imported
            console.print(
                f"  [yellow]interface[/] {app.name}: detected when the run starts (or give "
                "--interface); planned here on WSGI and ASGI servers"
            )
    if not options["dry_run"]:
        from pywebbench.analysis.steady import preload_in_background

        # over the pre-flight sample and the servers' start; a replicate waits for it
        preload_in_background()
    _preflight(config, console, pypy=[i.path for i in matrix.interpreters if i.is_pypy])
    if config.load.instructions:
        from pywebbench.run.instructions import cannot_count

        for why in {cannot_count(i.is_pypy) for i in matrix.interpreters} - {None}:
            console.print(f"  [yellow]--instructions[/]: {why}")
    if options["dry_run"]:
        for cell in matrix.cells:
            console.print(f"  {cell.label}")
        if options["runs"] > 1:
            console.print(f"{options['runs']} runs of these cells, one after another")
        return 0
    if options["runs"] == 1:
        return _execute(config, matrix, console, run_id)[0]
    return _repeat(config, matrix, console, options["runs"])


def run_seeds(seed: int | None, runs: int) -> list[int]:
    """The rotation seed of each of ``runs`` runs (``run --runs``): ``seed``, ``seed + 1``,
    ... when the study sets one, else a random one each (stored with the run's config)."""
    import secrets

    if seed is None:
        return [secrets.randbelow(2**32) for _ in range(runs)]
    return [(seed + i) % 2**32 for i in range(runs)]


def _repeat(config: StudyConfig, matrix: Matrix, console: Console, runs: int) -> int:
    """``run --runs N``: the study N times, one after another, each its own run with fresh
    server processes and its own rotation seed; each report pools the runs so far
    (docs/pooling.md). Stops at an interrupted run."""
    done: list[str] = []
    code = 0
    for i, seed in enumerate(run_seeds(config.load.seed, runs)):
        console.print(f"[bold]run {i + 1} of {runs}[/] (rotation seed {seed})")
        one = config.model_copy(deep=True)
        one.load.seed = seed
        status, run_id = _execute(one, matrix, console, None, earlier=done)
        done.append(run_id)
        if status == EXIT_INTERRUPTED:
            return status
        code = max(code, status)
    console.print(
        f"{runs} runs of the study: {', '.join(done)}"
        + ("; the last report pools them (docs/pooling.md)" if config.report else "")
    )
    return code


def _interpreters(config: StudyConfig) -> list[Interpreter]:
    """The study's interpreters, resolved before it is planned: probed, and a requested
    CPython version installed when none here matches (``--dry-run`` too); ConfigError (one
    line, exit 2) naming ``matrix.interpreters``/``--python`` when one cannot be had."""
    from pywebbench.catalogue.interpreters import InterpreterError, select
    from pywebbench.provision.pythons import install_request

    try:
        return select(config.matrix.interpreters, install=install_request)
    except InterpreterError as exc:
        raise ConfigError(f"matrix.interpreters: {exc}") from None


def _app_interfaces_detected(matrix: Matrix) -> Matrix:
    """The matrix with its user's app's interface detected (its requirements provisioned, the
    app imported) and the cells of servers that cannot serve it skipped; ConfigError (one
    line, exit 2) when the app cannot be imported or its interface told."""
    from pywebbench.bringup import with_interfaces_detected

    try:
        return with_interfaces_detected(matrix)
    except ValueError as exc:
        raise ConfigError(f"app: {exc}") from None


def _preflight(config: StudyConfig, console: Console, *, pypy: list[str]) -> None:
    """Warn about what will disturb the study (``pywebbench preflight``; ``pypy``: the PyPy
    interpreters the study measures, whose collectors are asked too); never blocks."""
    from pywebbench.run.preflight import study_preflight

    for finding in study_preflight(config.cpus.server, config.cpus.generator, pypy=pypy):
        console.print(f"  [yellow]pre-flight[/] {finding.line()}", highlight=False)


def _check_valgrind() -> None:
    """--instructions: valgrind installed and running, before anything runs."""
    from pywebbench.run.instructions import InstructionsError, preflight

    try:
        preflight()
    except InstructionsError as exc:
        raise ConfigError(str(exc)) from None


def _per_cell_reasons(config: StudyConfig, matrix: Matrix) -> list[tuple[str, int]]:
    """In an interleaved study, why cells take the per-cell path instead of a group, and how
    many for each reason (docs/steady-state.md#the-interleaved-study); none in a sequential
    study, whose every cell takes it by choice."""
    from pywebbench.run.interleaved import why_not_interleaved

    if config.load.design != "interleaved":
        return []
    counts: dict[str, int] = {}
    for cell in matrix.cells:
        why = why_not_interleaved(cell, config.load)
        if why is not None:
            counts[why] = counts.get(why, 0) + 1
    return sorted(counts.items())


def _load_plan(config: StudyConfig, matrix: Matrix) -> str:
    """How the cells will be loaded and how long the load windows take, in a phrase."""
    from pywebbench.run.interleaved import (
        GroupOptions,
        interleaved_groups,
        least_load_s,
        why_not_interleaved,
    )

    load = config.load
    together = [c for c in matrix.cells if why_not_interleaved(c, load) is None]
    alone = [c for c in matrix.cells if why_not_interleaved(c, load) is not None]
    parts = []
    if together:
        groups = interleaved_groups(together)
        n = len(groups)
        budgets = [
            load.jit_group_budget_s
            if any(c.variant.stack.interpreter.is_pypy for c in g)
            else load.group_budget_s
            for g in groups
        ]
        most = sum(budgets)
        options = GroupOptions.of(load)
        each = f"{options.processes} server processes a stack"
        jit = any(c.variant.stack.interpreter.is_pypy for c in together)
        if jit and options.processes_for(True) != options.processes:
            each += f", {options.processes_for(True)} on PyPy"
        # a group plans its least rounds whatever its budget: with many processes (or
        # PyPy's slots) those alone can outlast it
        least = sum(
            max(least_load_s(g, load), budget) for g, budget in zip(groups, budgets, strict=True)
        )
        parts.append(
            f"{n} interleaved group{'s' if n > 1 else ''} ({each}), {most / 60:.1f} min of "
            "load budgeted"
            + (
                f"; the rounds they plan at least come to {least / 60:.1f} min or more "
                "(fewer when their intervals narrow sooner or processes leave)"
                if least > most
                else ""
            )
        )
    if alone:
        of = [load.replicates_for(c.variant.stack.interpreter.is_pypy) for c in alone]
        k = sorted({n * load.iterations_per_replicate for n in of})
        per_cell = str(k[0]) if len(k) == 1 else f"{k[0]}-{k[-1]}"
        reps = sum(of)
        least, most = (reps * w / 60 for w in load.window_s())
        if load.slo:  # each replicate's knee search may take up to its budget (docs/slo.md)
            most += reps * load.slo_budget_s / 60
        span = f"~{least:.1f} min" if least == most else f"{least:.1f}-{most:.1f} min"
        parts.append(
            f"{len(alone)} cells of {per_cell} iterations each, one after another: load "
            f"windows alone take {span}"
        )
    return "; ".join(parts)


def _check_tracing() -> None:
    """--syscalls: strace installed and allowed to attach, before anything runs."""
    from pywebbench.run.syscalls import SyscallsError, preflight

    try:
        preflight()
    except SyscallsError as exc:
        raise ConfigError(str(exc)) from None


def named_by_flag(exc: Exception) -> str:
    """An error of the store or the load agents, its field named by run's flag."""
    field = getattr(exc, "field", None)
    if field is None:
        return str(exc)
    return f"{flag_of(_AGENT_KEYS.get(field, field))}: {getattr(exc, 'why', exc)}"


def _as_keyboard_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _execute(
    config: StudyConfig,
    matrix: Any,
    console: Console,
    run_id: str | None,
    *,
    earlier: Sequence[str] = (),
) -> tuple[int, str]:
    """Run the study (continue ``run_id``); its exit status and run id. The report covers
    the ``earlier`` runs of a ``--runs`` too, pooled."""
    from pywebbench.load.ray_agents import AgentsError, RayUnavailable
    from pywebbench.report import generate
    from pywebbench.run.console import LiveDisplay, summary_tables
    from pywebbench.run.executor import open_executor
    from pywebbench.run.ray_load import study_agent
    from pywebbench.run.runner import run_study
    from pywebbench.run.schedule import done_keys
    from pywebbench.store import DEFAULT_FILENAME, RunLocked, Store

    results_dir = Path(config.results_dir)
    store_path = results_dir / DEFAULT_FILENAME
    load = config.load
    # SIGTERM/SIGHUP end the study like Ctrl-C: servers stopped, run marked interrupted.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _as_keyboard_interrupt)
    executor = open_executor(load)  # ray: joined (or started) before anything is written
    with executor, Store(store_path) as store:
        done = done_keys(store.cells(run_id)) if run_id else set()
        total = sum(
            load.replicates_for(c.variant.stack.interpreter.is_pypy) * load.iterations_per_replicate
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
            raise ConfigError(named_by_flag(exc)) from None
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
        return EXIT_INTERRUPTED, outcome.run_id
    if config.report:
        paths = generate(store_path, [*earlier, outcome.run_id], results_dir / "reports")
        console.print(f"report: {paths.html}\nsummary: {paths.markdown}")
    from pywebbench.reference.check import latest_run_lines

    for line in latest_run_lines(study):  # against docs/reference-table.md
        console.print(escape(line))
    if outcome.cells_ok == 0:
        return 1, outcome.run_id
    return 0, outcome.run_id
