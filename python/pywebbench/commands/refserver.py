"""``pywebbench refserver``: run the reference HTTP/1.1 server in the foreground.

The command is the user's face of :mod:`pywebbench.refserver` (it imports the library, never
the reverse); :class:`~pywebbench.refserver.RefServer` runs it as a child process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from pywebbench.help_screen import OneScreen
from pywebbench.refserver import MODES, RefServerConfig, engine_defaults, serve

EPILOG = """\b
Routes:
  GET /  and  /hello          200 "Hello, World!" (text/plain)
  ?size=N                     body of N bytes (byte i is 'a' + i % 26)
  ?status=N                   answer with status N (200-599)
  ?delay_ms=X                 this request's delay, instead of --delay-ms/--delay-jitter-ms
  ?interval_ms=X              drip / endless-headers pacing, instead of --drip-interval-ms
  POST (any path above)       body read and discarded (Content-Length or chunked);
                              200 with the body length in decimal
  /misbehave/MODE             answer with a misbehaviour (modes below)
  GET /__stats                JSON counters (never delayed nor stalled)
  anything else               404

\b
Modes (--mode for every request, or /misbehave/MODE for one):
  normal                 a valid response
  chunked                a valid Transfer-Encoding: chunked response
  close-mid-response     headers + part of the body, then a clean close
  garbage-status         an invalid status line, then close
  endless-headers        header lines forever (4 KiB per interval)
  huge-body              Content-Length: 10000000000, streamed as fast as read
  drip                   a valid response, one byte per interval
  reset                  RST (SO_LINGER 0) instead of a response
  bad-chunked            chunked response with an invalid chunk size, then close
  no-response            read the request, never answer, keep the socket open
  close-before-response  read the request, clean close before any header

\b
Malformed requests (bad request line, bad header bytes, both Content-Length and
Transfer-Encoding, bad chunked body) get 400 and a close; heads over 16 KiB get 431;
requests whose headers stay incomplete for --header-timeout-ms get 408 and a close.

\b
Misbehaviour on demand:
  curl -i 'http://127.0.0.1:8080/misbehave/drip?interval_ms=50'

\b
The generator ceiling (what this machine's load generator can do at most),
server on core 0, generator on core 1:
  pywebbench refserver --port 8080 --cpus 0 &
  pywebbench load http://127.0.0.1:8080/hello -c 64 -d 10 --cpus 1
  kill %1
(or from Python: `with RefServer(cpus=[0]) as srv: ...` from pywebbench.refserver)
"""


def _cpus(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int]:
    if not value:
        return []
    out: list[int] = []
    try:
        for part in value.split(","):
            part = part.strip()
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                out.extend(range(lo, hi + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise click.BadParameter(
            f"expected CPU numbers like 0 or 0,2 or 0-3, got {value!r}", ctx, param
        ) from None
    return out


_F = TypeVar("_F", bound=Callable[..., Any])


def _default(flag: str) -> Any:
    """The engine's default for ``--some-flag`` (its field ``some_flag``)."""
    return engine_defaults()[flag.removeprefix("--").replace("-", "_")]


def flag_of(field: str) -> str:
    """The flag of config field ``some_flag``: ``--some-flag``."""
    return "--" + field.replace("_", "-")


def _length(flag: str, help_text: str, metavar: str = "MS") -> Callable[[_F], _F]:
    """A ``--...-ms`` (or ``--...-s``) option: a non-negative length of time."""
    return click.option(
        flag,
        type=click.FloatRange(min=0.0),
        default=_default(flag),
        show_default=True,
        metavar=metavar,
        help=help_text,
    )


@click.command(
    "refserver",
    epilog=EPILOG,
    cls=OneScreen,
    common=(
        "--port",
        "--cpus",
        "--threads",
        "--delay-ms",
        "--delay-jitter-ms",
        "--stall-ms",
        "--stall-every-s",
        "--mode",
        "--quiet",
    ),
    examples="""
    pywebbench refserver --port 8080
    pywebbench refserver --port 8080 --cpus 0     # the generator's ceiling: load it from core 1
    pywebbench refserver --port 8080 --delay-ms 1 --delay-jitter-ms 0.5
    pywebbench refserver --port 8080 --stall-ms 500 --stall-every-s 5
    pywebbench refserver --port 8080 --mode drip --drip-interval-ms 50  # every answer drips
    """,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--host",
    default=_default("--host"),
    show_default=True,
    help="Loopback address to bind (127.0.0.0/8 or ::1; anything else is refused).",
)
@click.option(
    "--port",
    "-p",
    type=click.IntRange(0, 65535),
    default=_default("--port"),
    show_default=True,
    help="TCP port; 0 picks a free one (printed on stdout).",
)
@click.option(
    "--threads",
    "-t",
    type=click.IntRange(1, 256),
    default=None,
    help="Event-loop threads (SO_REUSEPORT). Default: one per --cpus entry, else 1.",
)
@click.option(
    "--cpus",
    callback=_cpus,
    default=None,
    metavar="LIST",
    help="Pin the server to these CPUs, e.g. 0 or 0,2 or 0-3.",
)
@_length("--delay-ms", "Fixed delay before every response.")
@_length("--delay-jitter-ms", "Extra random delay, uniform in [0, X), per response.")
@_length(
    "--delay-ramp-s",
    "A warm-up that settles: --delay-ms falls linearly to 0 over S seconds, then stays 0.",
    "S",
)
@_length(
    "--delay-saw-s",
    "A warm-up that never settles: the delay climbs 0 -> --delay-ms over every S seconds.",
    "S",
)
@_length(
    "--service-ms",
    "Serial service time: each thread serves requests one after another, X ms each "
    "(a single-server queue of capacity threads/X per ms; timers, no spinning).",
)
@_length("--stall-ms", "Stall length: the server answers nothing for X ms...")
@_length(
    "--stall-every-s",
    "...every S seconds (responses due during a stall are released after it).",
    "S",
)
@_length("--header-timeout-ms", "408 + close when request headers are incomplete this long.")
@_length("--body-timeout-ms", "408 + close when a request body is incomplete this long.")
@_length("--idle-timeout-ms", "Close keep-alive connections idle this long (0 = never).")
@_length("--write-timeout-ms", "Drop connections that accept none of our output for this long.")
@click.option(
    "--mode",
    type=click.Choice(MODES),
    default=_default("--mode"),
    show_default=True,
    help="How every request is answered (the Modes section of --help-all says how).",
)
@_length("--drip-interval-ms", "Pace of drip (per byte) and endless-headers (per 4 KiB).")
@click.option(
    "--max-connections",
    type=click.IntRange(min=0),
    default=_default("--max-connections"),
    show_default=True,
    help="Refuse connections beyond this many open (0 = no limit but the fd limit).",
)
@click.option(
    "--backlog",
    type=click.IntRange(1, 1 << 20),
    default=_default("--backlog"),
    show_default=True,
    help="listen() backlog.",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=_default("--seed"),
    show_default=True,
    help="Seed of the delay jitter (0 = from the clock).",
)
@click.option("--config-json", hidden=True, default=None, help="Whole config as JSON.")
@click.option("--quiet", "-q", is_flag=True, help="Do not print the 'listening on' line.")
def command(config_json: str | None, quiet: bool, **opts: Any) -> None:
    """Run the reference HTTP/1.1 server (Rust) until Ctrl-C or SIGTERM.
    A fast keep-alive, pipelining server for testing load generators and measuring their
    ceiling, with service delays, periodic stalls and misbehaviour modes. Prints
    `listening on HOST:PORT` once it accepts connections.
    """
    if config_json is not None:
        try:
            config = RefServerConfig.from_json(config_json)
        except (ValueError, TypeError) as e:
            raise click.BadParameter(str(e), param_hint="--config-json") from None
    else:
        config = RefServerConfig(**opts)
    try:
        config.validate()
    except ValueError as e:
        field, _, why = str(e).partition(": ")
        flag = flag_of(field) if why else "config"
        raise click.UsageError(f"{flag}: {why or e}") from None
    try:
        serve(config, quiet=quiet)
    except OSError as e:
        raise click.ClickException(f"refserver: {e}") from None
