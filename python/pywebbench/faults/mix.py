"""Fault mixes: which misbehaving clients run beside the measured load, and how many.

A mix is written as a comma-separated list (the ``--faults`` option)::

    default                                   a named mix (see NAMED_MIXES)
    slowloris=50,reset-mid-response=10/s      kinds with amounts
    default,churn=200/s                       a named mix plus (or overriding) kinds
    slow-headers=8:interval=500ms:path=/json  parameters after the amount, ':'-separated

Amounts: held kinds (``slow-headers``, ``slow-body``, ``slow-reader``, ``idle``,
``ws-no-read``) take a number of connections kept open (``=50``); event kinds take a rate
(``=10/s``) or a count of attempts made one after another (``=3``). Parameters: ``interval``
(``500ms``, ``2s``), ``path``, ``timeout`` (``2s``), ``depth`` (pipelined requests), ``read``
(bytes per read).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

__all__ = [
    "DEFAULT_MIX",
    "KINDS",
    "NAMED_MIXES",
    "FaultKindInfo",
    "FaultMixError",
    "FaultSpec",
    "format_mix",
    "parse_mix",
]


class FaultMixError(ValueError):
    """A fault mix that cannot be parsed; the message names the bad part."""


@dataclasses.dataclass(frozen=True)
class FaultKindInfo:
    """What a fault kind is: held (connections) or an event (rate/count), malformed or not."""

    name: str
    held: bool
    malformed: bool
    description: str


def _k(name: str, held: bool, malformed: bool, description: str) -> FaultKindInfo:
    return FaultKindInfo(name, held, malformed, description)


#: Every kind the engine's fault clients know (kept in sync with ``_engine.faults_kinds()``,
#: checked by the tests).
KINDS: dict[str, FaultKindInfo] = {
    k.name: k
    for k in [
        _k("slow-headers", True, False, "slowloris: a header line every interval (2 s)"),
        _k("slow-body", True, False, "POST announcing 1 MiB, trickled one byte per interval (1 s)"),
        _k("slow-reader", True, False, "pipelines 32 requests, reads 64 bytes per 100 ms"),
        _k("idle", True, False, "keep-alive connection that never sends"),
        _k("reset-mid-request", False, False, "half a request head, then a reset (SO_LINGER 0)"),
        _k("reset-mid-response", False, False, "8 pipelined requests, reset at the first byte"),
        _k("half-close", False, False, "a whole request, then shutdown(write)"),
        _k("churn", False, False, "connect, one Connection: close request, close"),
        _k("bad-request-line", False, True, "request line with four parts"),
        _k("oversized-headers", False, True, "one 128 KiB header"),
        _k("invalid-header-bytes", False, True, "control bytes in a header name and value"),
        _k("cl-te-conflict", False, True, "Content-Length and chunked Transfer-Encoding disagree"),
        _k("malformed-chunked", False, True, "chunk size that is not hexadecimal"),
        _k("smuggle", False, True, "CL.TE smuggling: a hidden second request in the body"),
        _k(
            "ws-no-read",
            True,
            False,
            "WebSocket upgrade, then a 16 KiB message per 100 ms, never reading (give path)",
        ),
    ]
}

ALIASES = {"slowloris": "slow-headers", "reset": "reset-mid-response"}

#: The default mix: a little of every HTTP kind, sized so a server with a handful of workers
#: notices the slow clients, while the event kinds stay far below the good traffic. Not
#: ``ws-no-read``: it needs a WebSocket path (``ws-no-read=4:path=/ws``), which a workload's
#: HTTP path is not.
DEFAULT_MIX = (
    "slow-headers=8,slow-body=4,slow-reader=4,idle=16,"
    "reset-mid-request=5/s,reset-mid-response=5/s,half-close=5/s,churn=50/s,"
    "bad-request-line=1/s,oversized-headers=1/s,invalid-header-bytes=1/s,"
    "cl-te-conflict=1/s,malformed-chunked=1/s,smuggle=1/s"
)

NAMED_MIXES: dict[str, str] = {
    "default": DEFAULT_MIX,
    "slowloris": "slow-headers=64",
    "slow": "slow-headers=16,slow-body=8,slow-reader=8",
    "disconnects": "reset-mid-request=20/s,reset-mid-response=20/s,half-close=20/s,churn=200/s",
    "malformed": (
        "bad-request-line=2/s,oversized-headers=2/s,invalid-header-bytes=2/s,"
        "cl-te-conflict=2/s,malformed-chunked=2/s,smuggle=2/s"
    ),
}


@dataclasses.dataclass(frozen=True)
class FaultSpec:
    """One fault kind and its amount; the engine's ``FaultSpec`` (see docs/faults.md)."""

    kind: str
    connections: int | None = None
    rate: float | None = None
    count: int | None = None
    interval_ms: int | None = None
    path: str | None = None
    timeout_ms: int | None = None
    depth: int | None = None
    read_bytes: int | None = None

    def __post_init__(self) -> None:
        info = KINDS.get(self.kind)
        if info is None:
            raise FaultMixError(f"unknown fault kind {self.kind!r}; known: {', '.join(KINDS)}")
        amounts = [a for a in (self.connections, self.rate, self.count) if a is not None]
        if len(amounts) != 1:
            raise FaultMixError(f"fault {self.kind}: give exactly one of connections, rate, count")
        if info.held and self.connections is None:
            raise FaultMixError(
                f"fault {self.kind}: holds connections, so its amount is a number of "
                f"connections (e.g. {self.kind}=50), not a rate or count"
            )
        if not info.held and self.connections is not None:
            raise FaultMixError(
                f"fault {self.kind}: is an event, so its amount is a rate (e.g. "
                f"{self.kind}=10/s) or a count (e.g. {self.kind}=3)"
            )
        if self.connections is not None and not 1 <= self.connections <= 4096:
            raise FaultMixError(f"fault {self.kind}: connections must be 1..4096")
        if self.rate is not None and not 0 < self.rate <= 20000:
            raise FaultMixError(f"fault {self.kind}: rate must be in (0, 20000] per second")
        if self.count is not None and self.count < 1:
            raise FaultMixError(f"fault {self.kind}: count must be at least 1")
        if self.path is not None and (
            not self.path.startswith("/") or re.search(r"[\x00-\x20\x7f]", self.path)
        ):
            raise FaultMixError(f"fault {self.kind}: path must start with / and have no spaces")

    @property
    def info(self) -> FaultKindInfo:
        """The kind's description."""
        return KINDS[self.kind]

    def to_dict(self) -> dict[str, Any]:
        """The engine's JSON form (fields that are None left out)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    def to_text(self) -> str:
        """This spec in mix syntax (``parse_mix(spec.to_text())`` gives it back)."""
        if self.connections is not None:
            amount = str(self.connections)
        elif self.rate is not None:
            amount = f"{self.rate:g}/s"
        else:
            amount = str(self.count)
        parts = [f"{self.kind}={amount}"]
        if self.interval_ms is not None:
            parts.append(f"interval={self.interval_ms}ms")
        if self.timeout_ms is not None:
            parts.append(f"timeout={self.timeout_ms}ms")
        if self.path is not None:
            parts.append(f"path={self.path}")
        if self.depth is not None:
            parts.append(f"depth={self.depth}")
        if self.read_bytes is not None:
            parts.append(f"read={self.read_bytes}")
        return ":".join(parts)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s)?$")


def _ms(item: str, key: str, value: str) -> int:
    m = _DURATION.match(value)
    if not m:
        raise FaultMixError(
            f"{item!r}: {key} must be a duration such as 500ms or 2s, got {value!r}"
        )
    n = float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
    if n < 1:
        raise FaultMixError(f"{item!r}: {key} must be at least 1 ms")
    return int(n)


def _int(item: str, key: str, value: str, lo: int, hi: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise FaultMixError(f"{item!r}: {key} must be an integer, got {value!r}") from None
    if not lo <= n <= hi:
        raise FaultMixError(f"{item!r}: {key} must be {lo}..{hi}, got {n}")
    return n


def _parse_item(item: str) -> FaultSpec:
    head, *params = item.split(":")
    if "=" not in head:
        raise FaultMixError(
            f"{item!r}: expected KIND=AMOUNT (e.g. slowloris=50 or churn=100/s) or a named "
            f"mix ({', '.join(NAMED_MIXES)})"
        )
    kind, amount = (s.strip() for s in head.split("=", 1))
    kind = ALIASES.get(kind, kind)
    if kind not in KINDS:
        raise FaultMixError(f"{item!r}: unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
    fields: dict[str, Any] = {}
    m = re.match(r"^(\d+(?:\.\d+)?)(/s)?$", amount)
    if not m:
        raise FaultMixError(
            f"{item!r}: amount must be a number (connections or count) or a rate such as "
            f"10/s, got {amount!r}"
        )
    if m.group(2):
        fields["rate"] = float(m.group(1))
        if KINDS[kind].held:
            raise FaultMixError(
                f"{item!r}: {kind} holds connections; give a number of connections, e.g. {kind}=50"
            )
    else:
        if "." in m.group(1):
            raise FaultMixError(f"{item!r}: a connection count or attempt count is an integer")
        fields["connections" if KINDS[kind].held else "count"] = int(m.group(1))
    for p in params:
        if "=" not in p:
            raise FaultMixError(f"{item!r}: parameter {p!r} must be key=value")
        key, value = (s.strip() for s in p.split("=", 1))
        if key == "interval":
            fields["interval_ms"] = _ms(item, key, value)
        elif key == "timeout":
            fields["timeout_ms"] = _ms(item, key, value)
        elif key == "path":
            fields["path"] = value
        elif key == "depth":
            fields["depth"] = _int(item, key, value, 1, 1024)
        elif key == "read":
            fields["read_bytes"] = _int(item, key, value, 1, 65536)
        else:
            raise FaultMixError(
                f"{item!r}: unknown parameter {key!r}; known: interval, timeout, path, depth, read"
            )
    try:
        return FaultSpec(kind=kind, **fields)
    except FaultMixError as e:
        raise FaultMixError(f"{item!r}: {e}") from None


def parse_mix(text: str) -> list[FaultSpec]:
    """Parses a ``--faults`` mix into specs (one per kind; a later item overrides an earlier one).

    Raises FaultMixError naming the bad item.
    """
    if not text or not text.strip():
        raise FaultMixError("empty fault mix; use e.g. 'default' or 'slowloris=50'")
    out: dict[str, FaultSpec] = {}
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise FaultMixError(f"empty item in fault mix {text!r} (two commas in a row?)")
        if item in NAMED_MIXES:
            for spec in parse_mix(NAMED_MIXES[item]):
                out[spec.kind] = spec
            continue
        spec = _parse_item(item)
        out[spec.kind] = spec
    return list(out.values())


def format_mix(specs: list[FaultSpec]) -> str:
    """The mix syntax of a list of specs."""
    return ",".join(s.to_text() for s in specs)
