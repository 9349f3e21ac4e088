"""``pywebbench preflight``: what on this machine will disturb a study, one line each."""

from __future__ import annotations

import click

from pywebbench.commands._common import fail
from pywebbench.help_screen import OneScreen


def _cores(flag: str, values: tuple[str, ...]) -> list[int]:
    out = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                out.append(int(part))
            except ValueError:
                fail(f"{flag}: {part.strip()!r} is not a core number")
    return out


@click.command(
    "preflight",
    cls=OneScreen,
    examples="""
    pywebbench preflight
    pywebbench preflight --server-cpus 2 --generator-cpus 3 --sample 2
    """,
)
@click.option("--server-cpus", multiple=True, help="Cores for servers (default: the first).")
@click.option("--generator-cpus", multiple=True, help="Cores for the load generator.")
@click.option(
    "--sample",
    "sample_s",
    type=float,
    default=0.5,
    show_default=True,
    help="Seconds to watch other processes' CPU use.",
)
def command(server_cpus: tuple[str, ...], generator_cpus: tuple[str, ...], sample_s: float) -> None:
    """List what will disturb a study on these cores, with what to do; never blocks.

    \b
    Checks: other busy processes that may run on the study's cores, SMT siblings outside
    the study, CPU frequency scaling, swap in use, address-space layout randomisation.
    `pywebbench run` prints the same lines before it starts. What a study does about
    interference while it runs (re-measures, the `interfered` flag): docs/interference.md.

    \b
    Exit status: 0 (warnings are not errors), 2 = bad input.
    """
    from pywebbench.run.host import split_cpus
    from pywebbench.run.preflight import preflight

    if not 0.0 < sample_s <= 60.0:
        fail(f"--sample: {sample_s} is not between 0 and 60 seconds")
    try:
        server, generator = split_cpus(
            _cores("--server-cpus", server_cpus), _cores("--generator-cpus", generator_cpus)
        )
    except ValueError as exc:
        fail(f"--server-cpus/--generator-cpus: {exc}")
    findings = preflight(server + generator, sample_s=sample_s)
    click.echo(f"pre-flight of server cores {server}, generator cores {generator}:")
    for f in findings:
        click.echo(f"  warning: {f.line()}")
    if not findings:
        click.echo("  nothing found that will disturb the study")
