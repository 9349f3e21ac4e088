"""The workloads the framework apps implement, with their requests and reference data.

A :class:`Workload` knows its route, the services it needs and how to build the request for a
given set of parameters. The same :class:`HttpRequest` feeds verification
(:mod:`pywebbench.verify`) and the load spec, so what is verified is what is measured.

Reference data shared by the service seeding (:mod:`pywebbench.provision.services`) and the
verification rules lives here too: the TechEmpower fortune rows and the 2,000-character redis
value. The apps (which run inside stack venvs and never import pywebbench) read both from the
services, never from this module. Routes and bodies are documented in ``docs/workloads.md``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from urllib.parse import urlencode

REDIS = "redis"
POSTGRES = "postgres"

HELLO_BODY = b"Hello, World!"
JSON_MESSAGE = {"message": "Hello, World!"}

# Redis keys the redis workload uses (seeded by the services, read by the apps).
REDIS_COUNTER_KEY = "pwb:clicks"
REDIS_VALUE_KEY = "pwb:value"
REDIS_VALUE_LENGTH = 2000


def _redis_value() -> str:
    unit = "pywebbench-redis-value-0123456789-"
    return (unit * (REDIS_VALUE_LENGTH // len(unit) + 1))[:REDIS_VALUE_LENGTH]


REDIS_VALUE = _redis_value()

# The 12 rows of TechEmpower's fortune table; the apps add ADDITIONAL_FORTUNE at request time.
FORTUNE_ROWS: tuple[tuple[int, str], ...] = (
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"),
    (7, "Any program that runs right is obsolete."),
    (8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"),
)
ADDITIONAL_FORTUNE = (0, "Additional fortune added at request time.")

# Bounds the apps enforce (400 outside them), so one request cannot pin a core for minutes.
CPU_MAX_N = 32
IO_MAX_MS = 10_000
UPLOAD_MAX_KB = 64 * 1024
#: ws-echo: the largest message, in bytes.
WS_MAX_BYTES = 1 << 20
#: ws-echo's route (a WebSocket upgrade of GET).
WS_ECHO_PATH = "/ws-echo"


def fib(n: int) -> int:
    """fib(n) as the cpu workload computes it (iteratively here: this is the reference)."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


def upload_payload(kb: int) -> bytes:
    """The deterministic body of an upload request of ``kb`` KiB."""
    block = hashlib.sha256(b"pywebbench-upload").digest()  # 32 bytes
    size = kb * 1024
    return (block * (size // len(block) + 1))[:size]


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request of a workload: what the verifier sends and the load engine repeats."""

    method: str
    path: str  # path and query string, e.g. "/cpu?n=20"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


@dataclass(frozen=True)
class Workload:
    """A workload: one route, the services it needs, parameter defaults and its request."""

    name: str
    description: str
    services: frozenset[str] = frozenset()
    params: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    #: A WebSocket workload: its request is the upgrade, then messages of ``size`` bytes
    #: echoed back; its cells speak protocol "ws" (docs/websocket.md).
    websocket: bool = False
    _build: Callable[[Mapping[str, int]], HttpRequest] | None = field(
        default=None, repr=False, compare=False
    )

    def resolve(self, **params: object) -> dict[str, int]:
        """The defaults overlaid with ``params``; raises ValueError naming a bad parameter."""
        out = dict(self.params)
        for key, value in params.items():
            if key not in self.params:
                known = ", ".join(sorted(self.params)) or "none"
                raise ValueError(
                    f"workload {self.name!r} has no parameter {key!r} (parameters: {known})"
                )
            try:
                number = int(value)  # type: ignore[call-overload]
            except (TypeError, ValueError):
                raise ValueError(
                    f"workload {self.name!r}: parameter {key!r} must be an integer, got {value!r}"
                ) from None
            lo, hi = _PARAM_BOUNDS.get((self.name, key), (0, None))
            if number < lo or (hi is not None and number > hi):
                bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
                raise ValueError(
                    f"workload {self.name!r}: parameter {key!r} must be {bound}, got {number}"
                )
            out[key] = number
        return out

    def request(self, **params: object) -> HttpRequest:
        """The request for this workload with ``params`` (defaults from :attr:`params`)."""
        resolved = self.resolve(**params)
        if self._build is None:
            raise NotImplementedError(f"workload {self.name!r} builds no request")
        return self._build(resolved)


_PARAM_BOUNDS: dict[tuple[str, str], tuple[int, int | None]] = {
    ("cpu", "n"): (0, CPU_MAX_N),
    ("io", "ms"): (0, IO_MAX_MS),
    ("upload", "kb"): (0, UPLOAD_MAX_KB),
    ("ws-echo", "size"): (1, WS_MAX_BYTES),
}


def _get(path: str) -> Callable[[Mapping[str, int]], HttpRequest]:
    return lambda _params: HttpRequest("GET", path)


def _get_query(path: str) -> Callable[[Mapping[str, int]], HttpRequest]:
    return lambda params: HttpRequest("GET", f"{path}?{urlencode(sorted(params.items()))}")


def _upload(params: Mapping[str, int]) -> HttpRequest:
    body = upload_payload(params["kb"])
    return HttpRequest(
        "POST",
        "/upload",
        (("Content-Type", "application/octet-stream"),),
        body,
    )


def _frozen(d: dict[str, int]) -> Mapping[str, int]:
    return MappingProxyType(d)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("hello", "GET /hello: 'Hello, World!' as text/plain", _build=_get("/hello")),
        Workload(
            "json",
            'GET /json: {"message": "Hello, World!"} as application/json',
            _build=_get("/json"),
        ),
        Workload(
            "cpu",
            "GET /cpu?n=N: recursive fib(N) as text/plain",
            params=_frozen({"n": 20}),
            _build=_get_query("/cpu"),
        ),
        Workload(
            "environ",
            "GET /environ: HTML page listing the WSGI environ / ASGI scope (5-8 KB)",
            _build=_get("/environ"),
        ),
        Workload(
            "redis",
            "GET /redis: INCR a counter and GET a 2,000-character value from redis-server",
            services=frozenset({REDIS}),
            _build=_get("/redis"),
        ),
        Workload(
            "fortunes",
            "GET /fortunes: TechEmpower fortunes from PostgreSQL (SQLite fallback)",
            services=frozenset({POSTGRES}),
            _build=_get("/fortunes"),
        ),
        Workload(
            "io",
            "GET /io?ms=M: wait M ms (async sleep in async frameworks), then text/plain",
            params=_frozen({"ms": 10}),
            _build=_get_query("/io"),
        ),
        Workload(
            "upload",
            "POST /upload with a body of KB KiB: JSON with its length and sha256",
            params=_frozen({"kb": 64}),
            _build=_upload,
        ),
        Workload(
            "ws-echo",
            f"WebSocket {WS_ECHO_PATH}: each binary message of SIZE bytes echoed back "
            "(a request is one message's round trip)",
            params=_frozen({"size": 64}),
            websocket=True,
            _build=_get(WS_ECHO_PATH),
        ),
    )
}

#: The HTTP workloads: what every framework app implements.
HTTP_WORKLOADS: frozenset[str] = frozenset(w.name for w in WORKLOADS.values() if not w.websocket)
#: The WebSocket workloads, for the frameworks that serve them.
WS_WORKLOADS: frozenset[str] = frozenset(w.name for w in WORKLOADS.values() if w.websocket)


def get(name: str) -> Workload:
    """The workload called ``name``; ValueError listing the known ones otherwise."""
    try:
        return WORKLOADS[name]
    except KeyError:
        known = ", ".join(WORKLOADS)
        raise ValueError(f"unknown workload {name!r} (known: {known})") from None
