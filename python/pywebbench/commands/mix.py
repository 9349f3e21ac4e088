"""``pywebbench mix``: traffic mixes for ``pywebbench load --mix`` (docs/mix.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from pywebbench.catalogue.mix import mix_to_json, mix_to_toml
from pywebbench.help_screen import OneScreen, ScreenGroup
from pywebbench.load.access_log import AccessLogError, LogMix, Rule, read_log_file

FROM_LOG_EXAMPLES = """
pywebbench mix from-log /var/log/nginx/access.log -o mix.toml
pywebbench mix from-log gunicorn-access.log -o mix.toml --rule '/users/[^/]+=/users/{name}'
pywebbench mix from-log access.log -o mix.json --include-unsafe --variants 5
pywebbench load http://127.0.0.1:8000 --mix mix.toml -c 64 -d 30s      # then load with it
"""

FROM_LOG_EPILOG = """\b
What is dropped, and why (each is counted in the output):
  POST, PUT, PATCH, DELETE   they change state and their bodies are not in access logs
                             (--include-unsafe keeps them: add a body per entry)
  other methods              CONNECT, TRACE, PROPFIND...: not what a mix sends
  malformed request lines    scanners' garbage, TLS bytes on a cleartext port
  absolute URLs, '*'         proxy requests: not a path of this app
  status 499                 nginx: the client left before the answer

\b
Exit status: 0 when the mix was written, 2 on bad input (a log with no readable line or
nothing replayable, a bad --rule).
"""


@click.group(
    name="mix",
    cls=ScreenGroup,
    examples="""
    pywebbench mix from-log /var/log/nginx/access.log -o mix.toml
    pywebbench load http://127.0.0.1:8000 --mix mix.toml -c 64 -d 30s
    """,
)
def command() -> None:
    """Traffic mixes: weighted requests for ``pywebbench load URL --mix FILE`` (docs/mix.md)."""


def _rule(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[Rule]:
    try:
        return [Rule.parse(v) for v in value]
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def summary_lines(mix: LogMix, source: Path) -> list[str]:
    """The table of endpoints and what was read, skipped and dropped."""
    width = max(8, *(len(ep.name) for ep in mix.endpoints))
    lines = [f"  {'Endpoint':<{width}}  {'share':>7}  {'requests':>9}  {'kept':>4}  expect"]
    by_name: dict[str, list[str]] = {}
    for e in mix.entries:
        by_name.setdefault(e.name, []).append(",".join(map(str, e.expect_status)))
    for ep in mix.endpoints:
        expects = sorted(set(by_name[ep.name]))
        lines.append(
            f"  {ep.name:<{width}}  {100 * ep.count / mix.replayable:>6.2f}%  {ep.count:>9,}  "
            f"{len(by_name[ep.name]):>4}  {' '.join(expects)}"
        )
    lines.append("")
    read = f"{source}: {mix.lines:,} lines ({mix.format}), {mix.readable:,} readable"
    if mix.skipped:
        read += f", {mix.skipped:,} skipped (the first unreadable is line {mix.first_skipped})"
    lines.append(read)
    dropped = sum(mix.dropped.values())
    lines.append(
        f"{mix.replayable:,} requests replayable over {len(mix.endpoints)} endpoints; "
        f"{dropped:,} dropped" + (":" if dropped else "")
    )
    for reason, n in mix.dropped.most_common():
        lines.append(f"  {n:>9,}  {reason}")
    return lines


@command.command(name="from-log", epilog=FROM_LOG_EPILOG, cls=OneScreen, examples=FROM_LOG_EXAMPLES)
@click.argument("access_log", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the mix: TOML, or JSON when the name ends in .json.",
)
@click.option(
    "--rule",
    "rules",
    multiple=True,
    callback=_rule,
    metavar="REGEX=NAME",
    help="Group paths that REGEX matches whole as the endpoint NAME, before the built-in "
    "rules (digits -> {id}, UUID -> {uuid}, hex of 16+ -> {hash}); repeatable, first match "
    "wins. Example: --rule '/users/[^/]+=/users/{name}'.",
)
@click.option(
    "--include-unsafe",
    is_flag=True,
    help="Keep POST, PUT, PATCH and DELETE requests (dropped by default: they change state "
    "and their bodies are not in the log; give each such entry a body in the mix).",
)
@click.option(
    "--variants",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Concrete requests (path with query) kept per endpoint, the most common ones, "
    "weighted by their counts.",
)
def from_log(
    access_log: Path, output: Path, rules: list[Rule], include_unsafe: bool, variants: int
) -> None:
    """Make a mix from ACCESS_LOG (nginx "combined" or gunicorn's default access-log format,
    detected per file): endpoints with their share of the requests as weights, each with its
    most common concrete requests, 4xx kept with their status as the expected one. Prints
    the table and writes the mix to -o."""
    try:
        mix = read_log_file(
            access_log, rules=rules, include_unsafe=include_unsafe, variants=variants
        )
    except AccessLogError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    for line in summary_lines(mix, access_log):
        click.echo(line)
    header = (
        f"Made by pywebbench mix from-log from {access_log.name}: {mix.replayable:,} "
        f"replayable requests over {len(mix.endpoints)} endpoints ({mix.format} format).\n"
        "Weights are each endpoint's share of those requests, in percent.\n"
        "Run it with: pywebbench load http://HOST:PORT --mix " + output.name
    )
    if output.suffix.lower() == ".json":
        text = mix_to_json(mix.entries)
    else:
        text = mix_to_toml(mix.entries, header=header)
    try:
        output.write_text(text)
    except OSError as e:
        click.echo(f"error: cannot write {output}: {e.strerror or e}", err=True)
        sys.exit(1)
    click.echo(f"wrote {output}: {len(mix.entries)} requests over {len(mix.endpoints)} endpoints")
