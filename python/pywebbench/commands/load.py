"""``pywebbench load URL``: a wrk-style load test of any HTTP/1.1, h2c or WebSocket server, with a
truthful report."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from pywebbench.catalogue.mix import MixEntry, MixFileError, load_mix
from pywebbench.commands._load_summary import render_summary, succeeded
from pywebbench.help_screen import OneScreen
from pywebbench.load import (
    LoadProgress,
    LoadResult,
    LoadSpec,
    ProgressFn,
    RatePhase,
    parse_rate,
    run_load,
)
from pywebbench.load.mix import verify_endpoints

if TYPE_CHECKING:
    from pywebbench.commands._load_agents import DistributedRunner

EPILOG = """\b
Load models:
  closed loop (default)   -c keep-alive connections, one request in flight each
                          (--pipeline N: N in flight, each timed from its own send)
  --no-keepalive          a new connection for every request (latency includes connect)
  --rate R                open loop: R requests/s (--arrival constant|poisson) over a pool
                          of -c connections; latency is measured from the intended send time
                          (coordinated omission corrected) and from the actual write
  --rate A:B:30s          open loop, a linear ramp from A to B requests/s over 30 s
  --rate A,B,C@10s        open loop, steps: 10 s at A, then at B, then at C requests/s
                          (after a ramp or steps the last rate holds; -d defaults to their
                          length; the summary shows offered vs achieved per phase)
  --protocol h2c          HTTP/2 over cleartext TCP (prior knowledge, no TLS): the same
                          loops, --streams N requests in flight per connection (as h2load's
                          -m); a server that answers HTTP/1.1 is an h2_not_spoken error
  --mix mix.toml          a traffic mix: each request drawn (seeded by --seed) from the
                          file's weighted [[request]] entries; URL gives scheme, host and
                          port; each endpoint is requested once and checked first, and the
                          summary adds a table per endpoint (docs/mix.md; make one from an
                          access log with: pywebbench mix from-log access.log -o mix.toml)
  ws://HOST:PORT/PATH     WebSocket (the URL selects --protocol ws): each request is one
                          --message-bytes message echoed back, checked byte for byte; the
                          same loops (--rate: messages/s; --no-keepalive: handshake, one
                          echo, close per connection); docs/websocket.md

\b
More examples:
  pywebbench load http://127.0.0.1:8080/ -c 64 -d 30s --warmup-duration 5s --cpus 1 \\
      --json out.json
  pywebbench load http://127.0.0.1:8080/ --rate 1000,5000,10000@10s --arrival poisson
  pywebbench load http://127.0.0.1:8080/hello --expect-status 200 --expect-body 'Hello, World!'
  pywebbench load http://127.0.0.1:8000 --mix mix.toml -c 64 -d 30s --json out.json

\b
Exit status: 0 when at least one request succeeded (2xx/3xx, or passed --expect-*; with
WebSocket, an intact echo), 1 when none did, 2 on bad input, 130 when interrupted by Ctrl-C
(the partial result is still printed and written).
"""

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

# LoadSpec fields with no flag of their own, and why (tests/load/test_cli.py checks the list).
NOT_FLAGS = {
    "fresh_share": "a fault mix's share of fresh connections: pywebbench run --faults",
    "faults": "fault clients: pywebbench run --faults",
    "start_at_unix_ns": "set by the load agents so that they start together",
}


class SpecOption(click.Option):
    """An option of ``load`` that sets ``fields`` of the :class:`LoadSpec` (or of the load
    agents): errors that name one of those fields are reported with this option's flag."""

    def __init__(self, *args: Any, fields: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields = fields


def spec_default(field: str) -> Any:
    """The :class:`LoadSpec` default of ``field``: the one source of the flags' defaults."""
    return LoadSpec.model_fields[field].default


class Seconds(click.ParamType):  # type: ignore[type-arg]  # generic in newer click only
    """A duration: ``10``, ``10s``, ``500ms``, ``1.5m``, ``1h``."""

    name = "DURATION"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, int | float):
            return float(value)
        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h)?\s*", str(value))
        if not m:
            self.fail(f"expected a duration like 10, 10s, 500ms, 1m; got {value!r}", param, ctx)
        return float(m.group(1)) * _UNITS[m.group(2) or "s"]


def parse_cpus(value: str) -> list[int]:
    """``"1"``, ``"0,2"``, ``"0-3"`` -> CPU numbers."""
    out: list[int] = []
    for part in value.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-", 1))
            if hi < lo:
                raise ValueError(part)
            out.extend(range(lo, hi + 1))
        else:
            out.append(int(part))
    return out


def _cpus_cb(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int]:
    if not value:
        return []
    try:
        return parse_cpus(value)
    except ValueError:
        raise click.BadParameter(f"expected CPUs like 1, 0,2 or 0-3; got {value!r}") from None


def _headers_cb(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> list[tuple[str, str]]:
    out = []
    for h in value:
        name, sep, v = h.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"expected 'Name: value', got {h!r}")
        out.append((name.strip(), v.strip()))
    return out


def _addresses_cb(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str]:
    return [a.strip() for a in value.split(",") if a.strip()] if value else []


def _rate_cb(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> float | list[RatePhase] | None:
    if value is None:
        return None
    try:
        return parse_rate(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _status_cb(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> list[int]:
    out = []
    for item in value:
        for s in item.split(","):
            if not s.strip().isdigit():
                raise click.BadParameter(f"expected status codes like 200 or 200,204; got {item!r}")
            out.append(int(s))
    return out


# ---- formatting ------------------------------------------------------------------------------


@click.command(
    name="load",
    epilog=EPILOG,
    cls=OneScreen,
    common=(
        "--connections",
        "--duration",
        "--rate",
        "--method",
        "--header",
        "--protocol",
        "--mix",
        "--expect-status",
        "--cpus",
        "--json",
    ),
    examples="""
    pywebbench load http://127.0.0.1:8080/ -c 64 -d 10
    pywebbench load http://127.0.0.1:8080/ --rate 5000 --arrival poisson -c 256 -d 1m
    pywebbench load http://127.0.0.1:8080/ --rate 1000:20000:30s -c 256 --cpus 1  # a ramp
    pywebbench load http://127.0.0.1:8080/upload -m POST --body-file data.json \\
        -H 'Content-Type: application/json'
    pywebbench load http://127.0.0.1:8080/ --protocol h2c --streams 10 -c 16 -d 10
    pywebbench load ws://127.0.0.1:8000/ws --message-bytes 4096 -c 16 -d 5
    """,
)
@click.argument("url")
@click.option(
    "-c",
    "--connections",
    cls=SpecOption,
    fields=("connections",),
    type=int,
    default=spec_default("connections"),
    show_default=True,
    help="Connections (closed loop) or pool size (open loop).",
)
@click.option(
    "-t",
    "--threads",
    cls=SpecOption,
    fields=("threads",),
    type=int,
    default=spec_default("threads"),
    show_default=True,
    help="Generator threads (connections are split between them).",
)
@click.option(
    "-d",
    "--duration",
    cls=SpecOption,
    fields=("duration_s",),
    type=Seconds(),
    default=None,
    help="Measured duration: 10, 10s, 500ms, 1m.  [default: 10s]",
)
@click.option(
    "-n",
    "--max-requests",
    cls=SpecOption,
    fields=("max_requests",),
    type=int,
    default=None,
    help="Stop after this many requests (with or without --duration).",
)
@click.option(
    "--warmup-duration",
    "--warmup",
    "warmup",
    cls=SpecOption,
    fields=("warmup_s",),
    type=Seconds(),
    default=spec_default("warmup_s"),
    show_default=True,
    help="Load before measuring, reported apart (as run's --warmup-duration; the old "
    "spelling --warmup is deprecated: in run it is steady|fixed).",
)
@click.option(
    "-m",
    "--method",
    cls=SpecOption,
    fields=("method",),
    default=spec_default("method"),
    show_default=True,
    help="Request method.",
)
@click.option(
    "-H",
    "--header",
    "headers",
    cls=SpecOption,
    fields=("headers",),
    multiple=True,
    callback=_headers_cb,
    help="'Name: value', repeatable.",
)
@click.option("--body", cls=SpecOption, fields=("body",), default=None, help="Request body (text).")
@click.option(
    "--body-file",
    cls=SpecOption,
    fields=("body_b64",),
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Request body from a file, sent byte for byte (binary is fine).",
)
@click.option(
    "--timeout",
    cls=SpecOption,
    fields=("timeout_s",),
    type=Seconds(),
    default=spec_default("timeout_s"),
    show_default=True,
    help="Response timeout; slower responses count as timeouts (censored, >= timeout).",
)
@click.option(
    "--connect-timeout",
    cls=SpecOption,
    fields=("connect_timeout_s",),
    type=Seconds(),
    default=None,
    help="Connect timeout.  [default: --timeout]",
)
@click.option(
    "--pipeline",
    cls=SpecOption,
    fields=("pipeline",),
    type=int,
    default=spec_default("pipeline"),
    show_default=True,
    help="HTTP/1.1 pipelining depth (closed loop).",
)
@click.option(
    "--protocol",
    cls=SpecOption,
    fields=("protocol",),
    type=click.Choice(["http1", "h2c", "ws"]),
    default=None,
    help="http1 = HTTP/1.1; h2c = HTTP/2 over cleartext TCP with prior knowledge (no "
    "Upgrade, no TLS; docs/http2.md); ws = WebSocket (docs/websocket.md).  "
    "[default: ws for a ws:// URL, else http1]",
)
@click.option(
    "--streams",
    cls=SpecOption,
    fields=("streams",),
    type=int,
    default=spec_default("streams"),
    show_default=True,
    help="h2c: concurrent streams (requests in flight) per connection, as h2load's -m; "
    "capped by the server's SETTINGS_MAX_CONCURRENT_STREAMS.",
)
@click.option(
    "--requests-per-connection",
    cls=SpecOption,
    fields=("requests_per_connection",),
    type=click.IntRange(min=0),
    default=spec_default("requests_per_connection"),
    show_default=True,
    metavar="N",
    help="Close each keep-alive connection after N responses (WebSocket: echoes) and open a "
    "new one, as httperf's --num-calls (HTTP/1.1, h2c and WebSocket); 0: never.",
)
@click.option(
    "--message-bytes",
    cls=SpecOption,
    fields=("message_bytes",),
    type=int,
    default=spec_default("message_bytes"),
    show_default=True,
    help="WebSocket: bytes per message (binary; the echo is checked byte for byte).",
)
@click.option(
    "--no-keepalive",
    cls=SpecOption,
    fields=("keepalive",),
    is_flag=True,
    help="A new connection for every request.",
)
@click.option(
    "--rate",
    cls=SpecOption,
    fields=("rate", "rate_phases"),
    callback=_rate_cb,
    default=None,
    help="Open loop: requests/s (5000), a ramp (1000:20000:30s) or steps (1000,5000@10s).",
)
@click.option(
    "--arrival",
    cls=SpecOption,
    fields=("arrival",),
    type=click.Choice(["constant", "poisson"]),
    default=spec_default("arrival"),
    show_default=True,
    help="Open loop: spacing of sends.",
)
@click.option(
    "--seed",
    cls=SpecOption,
    fields=("seed",),
    type=int,
    default=spec_default("seed"),
    show_default=True,
    help="Seed of Poisson arrivals and of a mix's draws.",
)
@click.option(
    "--queue-limit",
    cls=SpecOption,
    fields=("queue_limit",),
    type=int,
    default=None,
    help="Open loop: sends allowed to wait for a free connection; beyond it they "
    "count as queue_overflow errors.  [default: rate x timeout, at least 1000]",
)
@click.option(
    "--cpus",
    cls=SpecOption,
    fields=("cpus",),
    callback=_cpus_cb,
    default=None,
    help="Pin generator threads: thread i on CPU i mod len, e.g. 1 or 0-1.",
)
@click.option(
    "--expect-status",
    cls=SpecOption,
    fields=("expect_status",),
    multiple=True,
    callback=_status_cb,
    help="Allowed status codes (repeatable or comma-separated); others are check_failed.",
)
@click.option(
    "--expect-body",
    cls=SpecOption,
    fields=("expect_body",),
    default=None,
    help="Expected response body (exact).",
)
@click.option(
    "--io",
    cls=SpecOption,
    fields=("io",),
    type=click.Choice(["auto", "epoll", "uring"]),
    default=spec_default("io"),
    show_default=True,
    help="I/O backend: auto = io_uring where the kernel supports it, else epoll.",
)
@click.option(
    "--unix-socket",
    cls=SpecOption,
    fields=("unix_socket",),
    default=None,
    metavar="PATH",
    help="Connect to this unix-domain socket; URL gives the path and Host header "
    "(as curl). The URL form unix:PATH:/request-path does the same.",
)
@click.option(
    "--source-addresses",
    cls=SpecOption,
    fields=("source_addresses",),
    callback=_addresses_cb,
    default=None,
    metavar="IP,IP,...",
    help="Spread the connections over these local addresses.  [default: on a loopback "
    "target, one 127.0.0.x per 10,000 connections]",
)
@click.option(
    "--mix",
    "mix_file",
    cls=SpecOption,
    fields=("mix",),
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="A traffic mix (TOML or JSON, docs/mix.md): weighted [[request]] entries, one drawn "
    "per request; URL then gives scheme, host and port. Each endpoint is requested once and "
    "its status checked before the run. Example: --mix mix.toml (from an access log: "
    "pywebbench mix from-log access.log -o mix.toml).",
)
@click.option(
    "--json",
    "json_out",
    default=None,
    metavar="FILE|-",
    help="Write the full result JSON to FILE, or to stdout with '-' (with --agents, also "
    "each agent's part: 'agents' and 'start_skew_ms').",
)
@click.option(
    "--agents",
    cls=SpecOption,
    fields=("agents",),
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Load agents (Ray actors, one per node where the cluster has several); "
    "connections and rate are split between them. More than 1 needs Ray.",
)
@click.option(
    "--ray",
    "ray_address",
    cls=SpecOption,
    fields=("ray_address",),
    default=None,
    metavar="HOST:PORT",
    help="Run the agents on this Ray cluster.  [default: a local Ray started for the run]",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def command(
    url: str,
    connections: int,
    threads: int,
    duration: float | None,
    max_requests: int | None,
    warmup: float,
    method: str,
    headers: list[tuple[str, str]],
    body: str | None,
    body_file: Path | None,
    timeout: float,
    connect_timeout: float | None,
    pipeline: int,
    protocol: str | None,
    streams: int,
    requests_per_connection: int,
    message_bytes: int,
    no_keepalive: bool,
    rate: float | list[RatePhase] | None,
    arrival: str,
    seed: int,
    queue_limit: int | None,
    cpus: list[int],
    expect_status: list[int],
    expect_body: str | None,
    io: str,
    unix_socket: str | None,
    source_addresses: list[str],
    mix_file: Path | None,
    json_out: str | None,
    agents: int,
    ray_address: str | None,
    quiet: bool,
) -> None:
    """Load-test an HTTP/1.1 (or h2c, or WebSocket) server at URL: throughput, latency and
    errors. Like wrk, but the latency percentiles keep timeouts (as censored values), errors are
    classified (connect_refused, reset_mid_body, malformed_headers, ...), the open loop
    (--rate) corrects coordinated omission, and the generator checks itself (CPU per request,
    a loud warning when it was the bottleneck).
    """
    if body is not None and body_file is not None:
        raise click.UsageError("--body and --body-file: give only one")
    payload = body.encode() if body is not None else b""
    if body_file is not None:
        try:
            payload = body_file.read_bytes()
        except OSError as e:
            raise click.BadParameter(
                f"cannot read {body_file}: {e}", param_hint="--body-file"
            ) from e
    mix: list[MixEntry] = []
    if mix_file is not None:
        try:
            mix = load_mix(mix_file)
        except MixFileError as e:
            click.echo(f"error: --mix: {e}", err=True)
            sys.exit(2)
        target = urlsplit(url) if url.startswith("http://") else None
        if target is not None and (target.path not in ("", "/") or target.query):
            raise click.UsageError(
                f"URL: with --mix every path comes from the mix; give scheme, host and port "
                f"only (this URL has {target.path + ('?' + target.query if target.query else '')})"
            )
    if protocol is None:  # the URL's scheme decides: one rule (docs/websocket.md)
        protocol = "ws" if url.startswith(("ws://", "wss://")) else "http1"
    phases = rate if isinstance(rate, list) else []
    if duration is None and max_requests is None:
        duration = sum(p.duration_s for p in phases) if phases else 10.0
    try:
        spec = LoadSpec(
            url=url, method=method, headers=headers, body=payload,
            connections=connections, threads=threads, duration_s=duration,
            max_requests=max_requests, warmup_s=warmup, timeout_s=timeout,
            connect_timeout_s=connect_timeout, keepalive=not no_keepalive, pipeline=pipeline,
            protocol=protocol, streams=streams, requests_per_connection=requests_per_connection,
            message_bytes=message_bytes,
            rate=None if phases else rate, rate_phases=phases, arrival=arrival, seed=seed,
            queue_limit=queue_limit, cpus=cpus,
            expect_status=expect_status, expect_body=expect_body, io=io,
            unix_socket=unix_socket, source_addresses=source_addresses, mix=mix,
        )  # fmt: skip
    except ValueError as e:
        raise _usage(e) from None

    to_stdout = json_out == "-"
    out = Console(stderr=to_stdout, highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False)
    show_bar = not quiet and err.is_terminal
    runner: Callable[[LoadSpec, ProgressFn | None], LoadResult] = run_load
    distributed: DistributedRunner | None = None
    if agents > 1 or ray_address is not None:
        from pywebbench.commands._load_agents import DistributedRunner

        runner = distributed = DistributedRunner(agents, ray_address)
    try:
        problems = verify_endpoints(spec) if spec.mix else []
    except ValueError as e:
        raise _usage(e) from None
    except OSError as e:
        err.print(f"[red]error:[/red] {escape(_named(e))}", soft_wrap=True)
        sys.exit(1)
    if problems:
        for line in problems:
            err.print(f"[red]error:[/red] verification: {escape(line)}", soft_wrap=True)
        sys.exit(1)
    try:
        result = _run(spec, err if show_bar else None, runner)
    except ValueError as e:
        raise _usage(e) from None
    except (OSError, RuntimeError) as e:  # RuntimeError: Ray missing, or every agent failed
        err.print(f"[red]error:[/red] {escape(_named(e))}", soft_wrap=True)
        sys.exit(1)
    out.print(render_summary(result), markup=False)
    shares = distributed.last if distributed is not None else None
    if shares is not None:
        from pywebbench.commands._load_agents import render_agents

        out.print(render_agents(shares), markup=False)
    if json_out:
        doc = result.to_dict()
        if shares is not None:
            doc |= shares.agents_document()
        text = json.dumps(doc, indent=1)
        if to_stdout:
            click.echo(text)
        else:
            try:
                Path(json_out).write_text(text + "\n")
            except OSError as e:
                err.print(f"[red]error:[/red] cannot write --json {json_out}: {e}")
                sys.exit(1)
    failed = shares.failure_message() if shares is not None else None
    if failed:
        err.print(f"[red]error:[/red] agents failed: {escape(failed)}", soft_wrap=True)
        sys.exit(1)
    if result.interrupted:
        sys.exit(130)
    if succeeded(result) == 0:
        err.print(f"[red]error:[/red] {escape(_why_none(result))}", soft_wrap=True)
        sys.exit(1)


#: Error classes that say why no request could succeed at all, in order of precedence: the
#: one line printed when none did.
_FATAL_CLASSES = ("h2_not_spoken", "ws_handshake_rejected", "ws_protocol_error", "ws_closed")


def _why_none(result: LoadResult) -> str:
    """One line on why no request succeeded."""
    for name in _FATAL_CLASSES:
        e = result.error_classes.get(name)
        if e is not None:
            return f"{name}: {e.example}" if name.startswith("ws_") else e.example
    return "no request succeeded"


def flag_of(field: str) -> str | None:
    """The flag of ``load`` that sets ``field`` of the spec or of the load agents
    (``duration_s`` -> ``--duration``), from the options' own declarations."""
    if field == "url":
        return "URL"
    for param in command.params:
        if isinstance(param, SpecOption) and field in param.fields:
            return next(o for o in param.opts if o.startswith("--"))
    return None


def _named(e: Exception) -> str:
    """``e``'s message, the field it starts with (``"field: why"``) named by its flag."""
    field, sep, rest = str(e).partition(":")
    flag = flag_of(field) if sep else None
    return f"{flag}: {rest.strip()}" if flag else str(e)


def _usage(e: ValueError) -> click.UsageError:
    return click.UsageError(_named(e))


def _run(
    spec: LoadSpec,
    console: Console | None,
    runner: Callable[[LoadSpec, ProgressFn | None], LoadResult] = run_load,
) -> LoadResult:
    if console is None:
        return runner(spec, None)
    total = spec.duration_s if spec.duration_s is not None else None
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn(
            "{task.fields[rps]:>12} req/s  {task.fields[done]:>12} done  {task.fields[errs]}"
        ),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(
            "warm-up" if spec.warmup_s else "load",
            total=total or spec.max_requests,
            rps="",
            done="",
            errs="",
        )

        def on_progress(p: LoadProgress) -> None:
            measured = p.elapsed_s - p.warmup_s
            if p.phase == "warmup":
                completed = p.elapsed_s / p.warmup_s * (total or 1) if p.warmup_s else 0
                desc = "warm-up"
            else:
                completed = measured if total else p.requests
                desc = "load"
            errs = f"[red]{p.errors:,} errors[/red]" if p.errors else ""
            bar.update(
                task,
                completed=completed,
                description=desc,
                rps=f"{p.rps:,.0f}",
                done=f"{p.requests + p.warmup_requests:,}",
                errs=errs,
            )

        return runner(spec, on_progress)
