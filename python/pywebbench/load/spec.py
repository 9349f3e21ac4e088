"""`LoadSpec`: what the load engine should do (validated before anything runs).

Field meanings are documented in docs/load-engine.md; the same document travels as JSON to
the Rust engine (and, later, to remote load agents).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

_TOKEN_CHARS = set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ENGINE_HEADERS = {"content-length", "transfer-encoding", "connection"}
ARRIVALS = ("constant", "poisson")


def _is_token(s: str) -> bool:
    return bool(s) and all(c in _TOKEN_CHARS for c in s)


@dataclass
class LoadSpec:
    """A load run: target, load model, bounds, checks.

    Load model: ``rate`` set = open loop (constant or Poisson arrivals over a pool of
    ``connections``); else ``keepalive=False`` = a new connection per request; else closed
    loop (``connections`` keep-alive connections, ``pipeline`` requests in flight on each).
    Bounded by ``duration_s`` and/or ``max_requests`` (10 s when neither is given).

    Raises:
        ValueError: naming the field, e.g. ``"connections: must be >= 1"``.
    """

    url: str
    method: str = "GET"
    headers: list[tuple[str, str]] = field(default_factory=list)
    #: Request body, sent byte for byte. ``str`` is encoded as UTF-8 and ``None`` means no
    #: body; after construction it is always ``bytes``. JSON carries it as ``body_b64``.
    body: bytes | str | None = b""
    connections: int = 64
    threads: int = 1
    duration_s: float | None = None
    max_requests: int | None = None
    warmup_s: float = 0.0
    timeout_s: float = 5.0
    connect_timeout_s: float | None = None
    keepalive: bool = True
    pipeline: int = 1
    rate: float | None = None
    arrival: str = "constant"
    seed: int = 1
    queue_limit: int | None = None
    cpus: list[int] = field(default_factory=list)
    expect_status: list[int] = field(default_factory=list)
    expect_body: str | None = None
    #: Fault clients run beside the load (docs/faults.md); passed to the engine as is.
    faults: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.body is None:
            self.body = b""
        elif isinstance(self.body, str):
            self.body = self.body.encode("utf-8")
        elif isinstance(self.body, bytes | bytearray | memoryview):
            self.body = bytes(self.body)
        else:
            raise ValueError(f"body: must be bytes or str, got {type(self.body).__name__}")
        self.headers = [(str(k), str(v)) for k, v in self.headers]
        self.cpus = [int(c) for c in self.cpus]
        self.expect_status = [int(s) for s in self.expect_status]
        self.validate()

    @property
    def mode(self) -> str:
        """``"open"``, ``"connection_per_request"`` or ``"closed"``."""
        if self.rate is not None:
            return "open"
        return "closed" if self.keepalive else "connection_per_request"

    def validate(self) -> None:
        """Check every field; raise ValueError naming the first bad one."""

        def bad(name: str, msg: str) -> ValueError:
            return ValueError(f"{name}: {msg}")

        def pos_int(name: str, v: Any, hi: int) -> None:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= hi:
                raise bad(name, f"must be an integer between 1 and {hi}, got {v!r}")

        def pos_num(name: str, v: Any, hi: float, allow_zero: bool = False) -> None:
            ok = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            if not ok or v < 0 or (v == 0 and not allow_zero) or v > hi:
                low = ">= 0" if allow_zero else "> 0"
                raise bad(name, f"must be a number {low} and <= {hi:g}, got {v!r}")

        parts = urlsplit(self.url) if isinstance(self.url, str) else None
        if parts is None or parts.scheme != "http" or not parts.hostname:
            hint = (
                " (https is not supported)" if parts is not None and parts.scheme == "https" else ""
            )
            raise bad("url", f"must look like http://HOST[:PORT]/PATH, got {self.url!r}{hint}")
        try:
            port = parts.port
        except ValueError as e:
            raise bad("url", f"bad port in {self.url!r}") from e
        if port == 0:
            raise bad("url", "port 0 is not a valid target")
        if not _is_token(self.method):
            raise bad("method", f"{self.method!r} is not a valid HTTP method")
        for name, value in self.headers:
            if not _is_token(name):
                raise bad("headers", f"{name!r} is not a valid header name")
            if "\r" in value or "\n" in value:
                raise bad("headers", f"value of {name!r} contains a line break")
            if name.lower() in _ENGINE_HEADERS:
                raise bad("headers", f"{name} is set by the engine; do not pass it")
        pos_int("connections", self.connections, 1_000_000)
        pos_int("threads", self.threads, 1024)
        if self.threads > self.connections:
            raise bad("threads", f"{self.threads} threads need at least as many connections")
        pos_int("pipeline", self.pipeline, 1024)
        if self.pipeline > 1 and self.mode != "closed":
            raise bad("pipeline", "pipelining needs a closed loop with keep-alive (no rate)")
        if self.duration_s is not None:
            pos_num("duration_s", self.duration_s, 86400)
        if self.max_requests is not None:
            pos_int("max_requests", self.max_requests, 2**62)
        pos_num("warmup_s", self.warmup_s, 3600, allow_zero=True)
        pos_num("timeout_s", self.timeout_s, 3600)
        if self.connect_timeout_s is not None:
            pos_num("connect_timeout_s", self.connect_timeout_s, 3600)
        if self.rate is not None:
            pos_num("rate", self.rate, 10_000_000)
        if self.arrival not in ARRIVALS:
            raise bad("arrival", f"must be one of {', '.join(ARRIVALS)}, got {self.arrival!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**64:
            raise bad("seed", "must be an integer between 0 and 2**64-1")
        if self.queue_limit is not None:
            if self.rate is None:
                raise bad("queue_limit", "only applies to open loop (set rate)")
            pos_int("queue_limit", self.queue_limit, 2**40)
        for c in self.cpus:
            if c < 0 or c >= 1024:
                raise bad("cpus", f"CPU {c} is out of range")
        for s in self.expect_status:
            if not 100 <= s <= 999:
                raise bad("expect_status", f"{s} is not an HTTP status code")
        if not isinstance(self.keepalive, bool):
            raise bad("keepalive", "must be true or false")

    def to_dict(self) -> dict[str, Any]:
        """The spec as the engine's JSON document (a plain dict).

        The body travels as ``body_b64`` (base64), present only when there is a body.
        """
        d = dataclasses.asdict(self)
        d["headers"] = [list(h) for h in self.headers]
        del d["body"]
        if self.body:
            d["body_b64"] = base64.b64encode(self.body_bytes).decode("ascii")
        if not self.faults:
            del d["faults"]  # as the engine writes it
        return d

    def to_json(self) -> str:
        """The spec as JSON text."""
        return json.dumps(self.to_dict())

    @property
    def body_bytes(self) -> bytes:
        """The body as bytes (``body`` is normalised to bytes on construction)."""
        body = self.body
        return body.encode("utf-8") if isinstance(body, str) else bytes(body or b"")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadSpec:
        """Build from a dict (as found in a result document); unknown keys are an error.

        The body may be given as ``body_b64`` (base64, any bytes) or as ``body`` (text, the
        older form), not both.
        """
        names = {f.name for f in dataclasses.fields(cls)} | {"body_b64"}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"{unknown[0]}: unknown load spec field")
        kw = dict(d)
        kw["headers"] = [tuple(h) for h in kw.get("headers", [])]
        b64 = kw.pop("body_b64", None)
        if b64:
            if kw.get("body"):
                raise ValueError("body_b64: give the body either as body or as body_b64, not both")
            if not isinstance(b64, str):
                raise ValueError("body_b64: must be a base64 string")
            try:
                kw["body"] = base64.b64decode(b64, validate=True)
            except (binascii.Error, ValueError) as e:
                raise ValueError(f"body_b64: not valid base64: {e}") from None
        return cls(**kw)

    @classmethod
    def from_json(cls, text: str) -> LoadSpec:
        """Build from JSON text."""
        return cls.from_dict(json.loads(text))
