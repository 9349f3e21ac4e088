"""``pywebbench ab``: interleaved A/B of two variants of an app or stack, in one command."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from pywebbench.commands._common import fail, store_options
from pywebbench.help_screen import OneScreen

if TYPE_CHECKING:
    from pywebbench.ab.session import AbOutcome
    from pywebbench.compare.gate import Rule, Violation

FORMATS = ("table", "markdown", "json")
#: Most server processes a side (each holds the app's memory on the server cores).
MAX_PROCESSES = 16


@click.command(
    "ab",
    cls=OneScreen,
    common=(
        "--base",
        "--change",
        "--repo",
        "--app",
        "--path",
        "--mix",
        "--server",
        "--fail-if",
        "--ci-width",
        "--format",
    ),
    examples="""
    pywebbench ab --app shop.wsgi:app --path /items --base main --change HEAD \\
        --fail-if 'slower>3%'
    pywebbench ab --app app:app --path / --base ../app-v1 --change ../app-v2
    pywebbench ab --app app:app --mix mix.toml --base ../app-v1 --change ../app-v2
    pywebbench ab --base python=cpython3.11 --change python=/usr/bin/python3.12 --ci-width 0.02
    pywebbench ab --app app:app --path / --base requirements=old.txt --change requirements=new.txt
    """,
)
@click.option(
    "--base",
    required=True,
    metavar="SIDE",
    help="BASE: a project directory, a git revision of --repo, or KEY=VALUE[,KEY=VALUE] with "
    "KEY in python, server, framework, project, requirements.",
)
@click.option("--change", required=True, metavar="SIDE", help="CHANGE, as --base.")
@click.option(
    "--repo",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Git repository whose revisions --base/--change name.",
)
@click.option("--app", help="Your app, module:callable (both sides; the project differs).")
@click.option("--path", help="The path to load (with --app), e.g. /items.")
@click.option(
    "--mix",
    metavar="FILE",
    help="With --app, instead of --path: a traffic mix (TOML or JSON, docs/mix.md), each "
    "endpoint verified first; the result names the endpoint whose latency grew most.",
)
@click.option("--interface", type=click.Choice(["wsgi", "asgi"]), help="With --app.")
@click.option("--requirements", help="requirements.txt for both sides (with --app).")
@click.option("--expect-status", type=int, help="With --app: expected status (default 2xx).")
@click.option("--expect-body", help="With --app: a substring the body must contain.")
@click.option(
    "--python",
    help="Interpreter of both sides unless a side sets its own (default: the running CPython).",
)
@click.option("--server", default="gunicorn-gthread", show_default=True, help="Server.")
@click.option("--framework", default="raw-wsgi", show_default=True, help="Framework (no --app).")
@click.option("--workload", default="cpu", show_default=True, help="Workload (no --app).")
@click.option(
    "--connections", "-c", type=int, default=64, show_default=True, help="Connections per side."
)
@click.option("--timeout", type=float, help="Per-request timeout (s).")
@click.option(
    "--ci-width",
    type=float,
    default=0.01,
    show_default=True,
    help="Stop once the ratio's CI lies within +-this fraction of it (0.01 = +-1%). Where "
    "server processes differ by 1-2% a CI this narrow may need more --processes than the "
    "budget allows; the run then ends at --budget and says how wide it got. The "
    "instructions counting stops by the same width.",
)
@click.option(
    "--budget",
    type=float,
    help="Longest load time in seconds, warm-up included; the run stops there if the CI "
    "is still wider than --ci-width, and says so. Default 180 (more if --processes needs "
    "it); with --figure instructions the least that holds two rounds (63 s with the other "
    "defaults), since the verdict's counts come after the timed run and its time ratio is "
    "only reported beside them.",
)
@click.option(
    "--slice",
    "slice_s",
    type=float,
    help="Counted seconds of each slice (default: sized as a study's interleaved group sizes "
    "it, by a short load of one process a side: two response times of the slower side, "
    "within 0.25-2 s, 0.5 s at least on PyPy). Short slices pair the two sides closer in "
    "time (the host's core-speed steps last about a second): on this kind of machine "
    "0.25-s slices narrowed an A/A's CI from +-3.3% (1-s slices) to +-1.5% in the same "
    "100 s (one process a side).",
)
@click.option(
    "--settle",
    type=float,
    help="Uncounted seconds of load at the start of each slice, while the previous "
    "process's requests drain (default: one response time of the slower side, 0.05-0.5 s).",
)
@click.option(
    "--warmup",
    type=float,
    help="Seconds of load each server process gets alone before the first round, its first "
    "touch (default: 0.5, 3 on PyPy). The warm-up after it is judged per process against "
    "the round, as a study's interleaved group judges it: a process's slices count from the "
    "round its share of the round stopped moving (docs/ab.md#warm-up).",
)
@click.option(
    "--processes",
    type=int,
    default=4,
    show_default=True,
    help="Server processes per side, all up and loaded in every round. Two processes of the "
    "same app differ by 1-2% (memory layout, hash seeds); the CI is over the processes, so "
    "it holds that difference and a gate does not trip on it. 1: the CI is over rounds "
    "only, narrower than the truth (docs/ab.md#server-processes).",
)
@click.option(
    "--level",
    type=float,
    default=0.95,
    show_default=True,
    help="Confidence level of the interval the stop rule, the verdict and the gate use.",
)
@click.option(
    "--min-change",
    type=float,
    default=0.02,
    show_default=True,
    help="Smallest relative change a verdict calls faster or slower.",
)
@click.option(
    "--interference-limit",
    type=float,
    default=0.05,
    show_default=True,
    help="Drop a slice when other processes took more than this share of the server (or "
    "generator) cores beyond their usual share during it, a burst that hit it and not its "
    "round's other slices; its round's pair goes with it (docs/ab.md#interference).",
)
@click.option(
    "--figure",
    type=click.Choice(["rps", "cpu", "instructions"]),
    default="rps",
    show_default=True,
    help="What the verdict and the gate judge: rps = requests/s; cpu = requests per "
    "CPU-second of each side's server (insensitive to CPU other processes take from the "
    "server cores; for CPU-bound servers); instructions = instructions per request counted "
    "under valgrind on up to --processes fresh servers a side (implies --instructions; CPython; "
    "repeats to 0.03-0.4%, blind to what costs time but not instructions: I/O, locks, "
    "caches). The time ratios are always reported; the stop rule judges rps or cpu.",
)
@click.option(
    "--no-core-speed",
    is_flag=True,
    help="Judge the slices as measured. By default a probe on the server cores (2% of a "
    "core, both sides alike) reads each slice's core speed and the slices are judged at one "
    "speed: the host's speed steps between the two slices of a round do not count "
    "(docs/ab.md#core-speed).",
)
@click.option(
    "--instructions",
    is_flag=True,
    help="After the timed run, count each side's instructions per request under valgrind, "
    "on --processes fresh servers a side at most, the sides in turn, stopping once the "
    "interval is within --ci-width (CPython only; 4-10 s a count on an idle machine; "
    "docs/instructions.md). Reported beside the time ratios with an interval over the "
    "counted processes; gate with instructions>1%.",
)
@click.option(
    "--fail-if",
    "fail_if",
    multiple=True,
    metavar="RULE",
    help="Exit 1 when CHANGE is significantly worse: slower>3%, p50>10%, p99>10%, errors>0, "
    "errors>1%, instructions>1% (with --instructions) (repeatable or comma list).",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("-o", "--output", help="Write to this file (default: standard output).")
@click.option("--seed", type=int, default=0, show_default=True, help="Order within rounds.")
@click.option("--server-cpus", help="Server cores of both sides, e.g. 0 (default: first).")
@click.option("--generator-cpus", help="Load generator cores (default: the others).")
@click.option("--no-store", is_flag=True, help="Do not store the run.")
@store_options
def command(**options: Any) -> None:
    """Measure CHANGE against BASE in the same minutes: interleaved slices, paired ratio.
    Two revisions, projects, requirements or interpreters of one app or stack are up at once
    and loaded in turn; the result is the ratio CHANGE/BASE of requests/s with its 95% CI, and
    a verdict: faster, slower or no significant change. --fail-if makes it a CI gate: exit 1
    on a regression.

    \b
    Each side's server processes (--processes) stay up and warm, pinned to the same cores;
    one load engine switches between them in short slices (random order within each round)
    on connections it keeps open. The ratio CHANGE/BASE of requests/s (and of requests per
    server CPU-second, see --figure) comes from the slices paired within rounds, with its
    CI over the server processes; the run stops once the CI is within +-CI_WIDTH or the
    --budget ends, and says which. Method and limits: docs/ab.md.

    \b
    Exit status: 0 = measured (gate passed), 1 = a --fail-if rule tripped, 2 = bad input
    (a missing revision, the same variant twice, a side that fails verification).

    \b
    More examples:
      # a traffic mix: which endpoint got slower
      pywebbench ab --app app:app --mix mix.toml --base ../app-v1 --change ../app-v2
      # judged on instructions per request
      pywebbench ab --app shop.wsgi:app --path /items --base main --change HEAD \\
          --figure instructions --fail-if 'slower>3%'
    """
    from pywebbench.ab.sides import SideError

    try:
        _run(options)
    except SideError as exc:
        fail(str(exc))


def _check_numbers(o: dict[str, Any]) -> None:
    """Refuse numbers out of range (exit 2); settle the default ``--budget``."""
    from pywebbench.ab.session import BUDGET_S, least_budget_s

    if not 0.0 < o["ci_width"] < 1.0:
        fail(f"--ci-width: {o['ci_width']} is not a fraction between 0 and 1 (e.g. 0.01)")
    if not 0.5 <= o["level"] < 1.0:
        fail(f"--level: {o['level']} is not a confidence level between 0.5 and 1 (e.g. 0.95)")
    if not 0.0 <= o["min_change"] < 1.0:
        fail(f"--min-change: {o['min_change']} is not a fraction between 0 and 1 (e.g. 0.02)")
    if o["slice_s"] is not None and not o["slice_s"] >= 0.1:
        fail(f"--slice: {o['slice_s']} s is too short (at least 0.1)")
    if (o["settle"] is not None and not o["settle"] >= 0.0) or (
        o["warmup"] is not None and not o["warmup"] >= 0.0
    ):
        fail("--settle/--warmup: must be >= 0")
    if not 1 <= o["processes"] <= MAX_PROCESSES:
        fail(f"--processes: {o['processes']} is not between 1 and {MAX_PROCESSES}")
    least = least_budget_s(o["processes"], o["warmup"], o["slice_s"], o["settle"])
    if o["budget"] is None:
        # the verdict's figure is counted after the timed run, whose time ratio is only
        # reported beside it: two rounds' worth, not three minutes
        o["budget"] = float(
            math.ceil(least) if o["figure"] == "instructions" else max(BUDGET_S, math.ceil(least))
        )
    if not o["budget"] >= least:
        fail(
            f"--budget: {o['budget']} s leaves no room for two rounds of "
            f"{2 * o['processes']} slices after the warm-up (at least {math.ceil(least)} s)"
        )
    if not 0.0 <= o["interference_limit"] <= 1.0:
        fail(f"--interference-limit: {o['interference_limit']} is not a fraction of a core")
    if o["fmt"] == "table" and o["output"]:
        fail("--output: the table is for the terminal; use --format markdown or json")


def _memory_budget(mib: int | None) -> int | None:
    """Bytes a server process may hold (the config's ``memory_budget_mib``; None: sized from
    the machine's memory)."""
    return mib * 2**20 if mib is not None else None


def _cores(flag: str, text: str | None) -> list[int]:
    if not text:
        return []
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        fail(f"{flag}: {text!r} is not a comma list of core numbers")


def _shared(o: dict[str, Any]) -> dict[str, Any]:
    """The study overrides both sides share."""
    matrix: dict[str, Any] = {"servers": [o["server"]], "frameworks": [o["framework"]]}
    matrix["workloads"] = [o["workload"]]
    if o["python"]:
        matrix["interpreters"] = [o["python"]]
    else:
        from pywebbench.catalogue.interpreters import default_interpreters

        matrix["interpreters"] = [default_interpreters()[0].name]
    load: dict[str, Any] = {"connections": [o["connections"]], "model": "closed"}
    if o["timeout"] is not None:
        load["timeout_s"] = o["timeout"]
    out: dict[str, Any] = {"matrix": matrix, "load": load, "results_dir": o["results_dir"]}
    cpus = {"server": _cores("--server-cpus", o["server_cpus"])}
    cpus["generator"] = _cores("--generator-cpus", o["generator_cpus"])
    out["cpus"] = cpus
    if o["mix"] and o["path"]:
        fail("--mix and --path: the mix gives every path; give one")
    if o["app"]:
        app: dict[str, Any] = {"app": o["app"]}
        if o["mix"]:
            app["mix"] = str(Path(o["mix"]).resolve())  # the same file from both sides
        else:
            app["paths"] = [o["path"] or "/"]
        for key in ("interface", "requirements", "expect_status", "expect_body"):
            if o[key] is not None:
                app[key] = o[key]
        out["app"] = app
    elif any(o[k] for k in ("path", "mix", "interface", "requirements")):
        fail("--path/--mix/--interface/--requirements need --app")
    return out


def _run(o: dict[str, Any]) -> None:
    from contextlib import ExitStack

    from pywebbench.ab.render import to_json, to_markdown, to_table
    from pywebbench.ab.session import AbOptions, run_ab
    from pywebbench.ab.sides import (
        SideError,
        checked_out,
        locate_project,
        parse_side,
        side_overrides,
        side_study,
    )
    from pywebbench.compare.gate import GateSyntaxError, parse_rules
    from pywebbench.compare.verdict import throughput_verdict
    from pywebbench.load import LocalAgent

    _check_numbers(o)
    if o["figure"] == "instructions":
        if o["processes"] < 2:
            fail(
                "--figure instructions: needs --processes 2 or more (its interval is over "
                "the counted server processes)"
            )
        o["instructions"] = True
    try:
        rules = parse_rules(o["fail_if"])
    except GateSyntaxError as exc:
        fail(f"--fail-if: {exc}")
    for rule in rules:
        if rule.metric == "memory":
            fail("--fail-if: memory: ab does not measure memory; compare stored runs for it")
        if rule.metric == "instructions" and not o["instructions"]:
            fail(f"--fail-if: {rule.text}: instructions are counted only with --instructions")
    if o["instructions"]:
        from pywebbench.run.instructions import InstructionsError, preflight

        try:
            preflight()
        except InstructionsError as exc:
            fail(str(exc))
    shared = _shared(o)
    sides = [parse_side("--base", o["base"]), parse_side("--change", o["change"])]
    projects = [
        locate_project(s.flag, s.settings["project"], o["repo"])
        if "project" in s.settings
        else None
        for s in sides
    ]
    others = [{k: v for k, v in s.settings.items() if k != "project"} for s in sides]
    if projects[0] == projects[1] and others[0] == others[1]:
        raise SideError(f"--change: {o['change']!r} is the same variant as --base {o['base']!r}")
    results_dir = Path(o["results_dir"])
    say = (lambda m: click.echo(m, err=True)) if o["fmt"] == "table" or o["output"] else _quiet
    from pywebbench.analysis.steady import preload_in_background

    preload_in_background()  # while the sides' servers start; the session waits for it
    with ExitStack() as stack:
        studies = []
        for side, project in zip(sides, projects, strict=True):
            where = (
                stack.enter_context(checked_out(project, results_dir / "ab-checkouts"))
                if project is not None
                else None
            )
            studies.append(side_study(side, side_overrides(shared, side, where)))
            if o["instructions"]:
                from pywebbench.run.instructions import cannot_count

                why = cannot_count(studies[-1].cell.variant.stack.interpreter.is_pypy)
                if why is not None:
                    fail(f"--instructions: {side.flag}: {why}")
        from pywebbench.run.preflight import study_preflight

        cpus = studies[0].config.cpus
        pypy = [
            s.cell.variant.stack.interpreter.path
            for s in studies
            if s.cell.variant.stack.interpreter.is_pypy
        ]
        for finding in study_preflight(cpus.server, cpus.generator, pypy=pypy):
            # a warning, not progress: printed whatever carries the document
            click.echo(f"pre-flight {finding.line()}", err=True)
        options = AbOptions(
            ci_width=o["ci_width"],
            budget_s=o["budget"],
            slice_s=o["slice_s"],
            settle_s=o["settle"],
            warmup_s=o["warmup"],
            processes=o["processes"],
            memory_budget_bytes=_memory_budget(studies[0].config.load.memory_budget_mib),
            level=o["level"],
            interference_limit=o["interference_limit"],
            figure=o["figure"],
            seed=o["seed"],
            log_dir=results_dir / "logs" / "ab",
            instructions=o["instructions"],
            core_speed=not o["no_core_speed"],
        )
        outcome = run_ab(studies[0], studies[1], options, agent=LocalAgent(), say=say)
    verdict = throughput_verdict(outcome.judged, o["min_change"])
    violations = _violations(rules, outcome)
    if not o["no_store"]:
        from pywebbench.ab.storing import store_outcome

        store_file = Path(o["store_path"]) if o["store_path"] else None
        run_id = store_outcome(outcome, verdict, violations, results_dir, store_file)
        say(f"stored as run {run_id}")
    render = {"table": to_table, "markdown": to_markdown, "json": to_json}[o["fmt"]]
    text = render(outcome, verdict, violations)
    if o["output"]:
        Path(o["output"]).write_text(text, encoding="utf-8")
        click.echo(f"wrote {o['output']}", err=True)
    else:
        sys.stdout.write(text)
    sys.exit(1 if violations else 0)


def _quiet(message: str) -> None:
    """Progress messages are dropped when standard output carries the document."""


def _violations(rules: Sequence[Rule], outcome: AbOutcome) -> list[Violation]:
    """Every ``--fail-if`` rule CHANGE trips against BASE."""
    from pywebbench.ab.render import FIGURE_UNITS, fmt_instructions
    from pywebbench.ab.session import FIGURE_INSTRUCTIONS
    from pywebbench.compare.gate import Violation, estimate_violation, instructions_violation

    label = f"{outcome.change.study.cell.label} vs BASE"
    figure = outcome.options.figure
    out = []
    for rule in rules:
        detail = estimate_violation(
            rule, outcome.judged, outcome.p50, outcome.p99, figure=FIGURE_UNITS[figure]
        )
        if rule.metric == "slower" and figure == FIGURE_INSTRUCTIONS and outcome.judged is None:
            # the gate asked for the counts' verdict and has none: say why, fail
            detail = f"no instructions figure: {fmt_instructions(outcome)}"
        if rule.metric == "instructions":
            span = outcome.instructions_span
            detail = (
                instructions_violation(rule, span)
                if span is not None
                else fmt_instructions(outcome)  # a side was not counted: say why, fail
            )
        if rule.metric == "errors":
            errors, done = outcome.change.errors, outcome.change.requests
            rate = errors / (errors + done) if errors + done else 0.0
            if rule.percent and rate > rule.limit:
                detail = f"error rate {rate * 100:.2f}% ({errors} errors)"
            elif not rule.percent and errors > rule.limit:
                detail = f"{errors} errors in {done + errors} requests"
        if detail is not None:
            out.append(Violation(label, rule.text, detail))
    return out
