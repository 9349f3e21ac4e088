"""`LoadSpec`: what the load engine should do, checked by the engine's own rules.

Field meanings: docs/load-engine.md. Python keeps no copy of the limits: every spec built here
goes through ``_engine.spec_validate`` (the Rust ``LoadSpec::validate``) and holds the document
the engine normalised, defaults filled in. The same document travels as JSON to the engine
(and, later, to remote load agents).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_serializer,
    model_serializer,
    model_validator,
)

from pywebbench import _engine
from pywebbench.bind import parse_base_url
from pywebbench.catalogue.mix import MixEntry

if TYPE_CHECKING:
    from pywebbench.catalogue.workloads import HttpRequest

#: The engine's load models (``Mode`` in crates/engine/src/spec.rs).
LoadMode = Literal["closed", "connection_per_request", "open"]


class RatePhase(BaseModel):
    """One open-loop rate phase: a linear ramp from ``rate`` to ``end_rate``
    over ``duration_s``, or a step at ``rate`` when ``end_rate`` is None (requests/s).
    Parse the command line's forms with :func:`pywebbench.load.rate_phases.parse_rate`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rate: float
    end_rate: float | None = None
    duration_s: float

    @property
    def last_rate(self) -> float:
        """Requests/s at the end of the phase."""
        return self.rate if self.end_rate is None else self.end_rate


def _to_engine(fields: dict[str, Any]) -> str:
    """The fields as the engine's JSON spec: a ``bytes`` body travels as ``body_b64``."""
    doc = dict(fields)
    for key in ("rate_phases", "rate_profile"):  # rate_profile: the former name
        phases = doc.get(key)
        if isinstance(phases, list | tuple):
            doc[key] = [p.model_dump() if isinstance(p, RatePhase) else p for p in phases]
    mix = doc.get("mix")
    if isinstance(mix, list | tuple):
        doc["mix"] = [m.model_dump(mode="json") if isinstance(m, MixEntry) else m for m in mix]
    body = doc.pop("body", None)
    if isinstance(body, bytes | bytearray | memoryview):
        if body and doc.get("body_b64"):
            raise ValueError("body_b64: give the body either as body or as body_b64, not both")
        if body:
            doc["body_b64"] = base64.b64encode(bytes(body)).decode("ascii")
    elif body is not None:
        doc["body"] = body  # text, or a wrong type the engine names
    for name, value in doc.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise ValueError(f"{name}: {value!r} is not a JSON value") from None
    return json.dumps(doc)


def _from_engine(doc: dict[str, Any]) -> dict[str, Any]:
    """The engine's normalised spec as field values: the body as bytes."""
    text = doc.pop("body", "")
    b64 = doc.pop("body_b64", "")  # the engine checked it is base64
    doc["body"] = base64.b64decode(b64.strip()) if b64 else text.encode()
    return doc


def _first_error(e: ValidationError) -> str:
    """One line naming the field, from a pydantic error (the engine's message when it has one)."""
    err = e.errors()[0]
    cause = err.get("ctx", {}).get("error")
    if isinstance(cause, ValueError):
        return str(cause)
    where = ".".join(str(p) for p in err["loc"]) or "load spec"
    return f"{where}: {err['msg']}"


class LoadSpec(BaseModel):
    """A load run: target, load model, bounds, checks (immutable; see :meth:`replace`).

    Load model: ``rate`` (or ``rate_phases``: ramps and steps) set = open loop (constant or
    Poisson arrivals over a pool of ``connections``); else ``keepalive=False`` = a new
    connection per request; else closed loop (``connections`` keep-alive connections,
    ``pipeline`` requests in flight on each).
    Bounded by ``duration_s`` and/or ``max_requests`` (10 s when neither is given, or the
    rate phases' length).

    ``body`` is sent byte for byte; ``str`` is accepted and encoded as UTF-8, ``None`` means no
    body. The defaults below are the engine's (a test keeps them equal).

    Raises:
        ValueError: one line naming the field, e.g. ``"connections: must be >= 1"``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    method: str = "GET"
    headers: list[tuple[str, str]] = []
    body: bytes = b""
    connections: int = 64
    threads: int = 1
    duration_s: float | None = None
    max_requests: int | None = None
    warmup_s: float = 0.0
    timeout_s: float = 5.0
    connect_timeout_s: float | None = None
    keepalive: bool = True
    #: Closed loop: share (0..1) of the connections that reconnect for every request.
    fresh_share: float = 0.0
    pipeline: int = 1
    #: Close each keep-alive connection after this many responses and open another
    #: (httperf's ``--num-calls``), HTTP/1.1, h2c and ws (echoes); 0: never.
    requests_per_connection: int = 0
    #: ``http1``, ``h2c`` (HTTP/2 over cleartext TCP with prior knowledge; docs/http2.md) or
    #: ``ws`` (WebSocket, a ``ws://`` URL: each request is one message's echo;
    #: docs/websocket.md).
    protocol: Literal["http1", "h2c", "ws"] = "http1"
    #: h2c: concurrent streams (requests in flight) per connection.
    streams: int = 1
    #: ws: the size of each message (generated bytes; the echo must match them).
    message_bytes: int = 64
    rate: float | None = None
    #: Open loop with a changing rate: ramps and steps (empty: none; ``rate`` is the
    #: constant case, and at most one of the two is set).
    rate_phases: list[RatePhase] = []
    arrival: str = "constant"
    seed: int = 1
    queue_limit: int | None = None
    cpus: list[int] = []
    expect_status: list[int] = []
    expect_body: str | None = None
    #: I/O backend: ``auto`` (io_uring where the kernel supports it, else epoll), ``epoll``
    #: or ``uring`` (docs/load-engine.md, "I/O backends").
    io: Literal["auto", "epoll", "uring"] = "auto"
    #: Fault clients run beside the load (docs/faults.md), as the engine normalised them.
    faults: list[dict[str, Any]] = []
    #: Wall-clock instant (Unix ns) at which the engine starts the run, waiting for it;
    #: several load agents given the same instant start together. None: at once.
    start_at_unix_ns: int | None = None
    #: Local IP addresses the TCP connections are spread over (empty: automatic).
    source_addresses: list[str] = []
    #: Connect to this unix-domain socket (the url gives the path and Host header).
    unix_socket: str | None = None
    #: A traffic mix (docs/mix.md): each request is drawn, seeded by ``seed``, from these
    #: weighted entries; the URL then gives only scheme, host and port. Empty: no mix.
    mix: list[MixEntry] = []

    if not TYPE_CHECKING:  # type checkers see pydantic's typed keyword constructor

        def __init__(self, **fields: Any) -> None:
            try:
                super().__init__(**fields)
            except ValidationError as e:
                raise ValueError(_first_error(e)) from None

    @model_validator(mode="before")
    @classmethod
    def _validated_by_engine(cls, data: Any) -> Any:
        if isinstance(data, LoadSpec):
            return data
        if not isinstance(data, dict):
            raise ValueError("load spec: expected a mapping of fields")
        return _from_engine(json.loads(_engine.spec_validate(_to_engine(data))))

    @field_serializer("body")
    def _body_as_base64(self, body: bytes) -> str:
        return base64.b64encode(body).decode("ascii")

    @model_serializer(mode="wrap")
    def _engine_layout(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        doc: dict[str, Any] = handler(self)
        body_b64 = doc.pop("body")
        if body_b64:
            doc["body_b64"] = body_b64
        for name in ("faults", "source_addresses"):
            if not doc[name]:
                del doc[name]  # as the engine writes it
        if doc["unix_socket"] is None:
            del doc["unix_socket"]
        if self.start_at_unix_ns is None:
            del doc["start_at_unix_ns"]
        if not self.rate_phases:
            del doc["rate_phases"]
        if not self.mix:
            del doc["mix"]
        for name in ("fresh_share", "requests_per_connection"):
            if not doc[name]:
                del doc[name]  # as the engine writes it
        if self.message_bytes == LoadSpec.model_fields["message_bytes"].default:
            del doc["message_bytes"]  # as the engine writes it
        return doc

    @property
    def mode(self) -> LoadMode:
        """The load model (the engine's ``LoadSpec::mode``)."""
        if self.rate is not None or self.rate_phases:
            return "open"
        return "closed" if self.keepalive else "connection_per_request"

    def replace(self, **changes: Any) -> LoadSpec:
        """A copy with ``changes`` applied, validated again."""
        return LoadSpec(**{**dict(self), **changes})

    def to_dict(self) -> dict[str, Any]:
        """The spec as the engine's JSON document (the body as ``body_b64``, when there is one)."""
        return self.model_dump(mode="json")

    def to_json(self) -> str:
        """The spec as JSON text."""
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> LoadSpec:
        """Build from a JSON document (``body_b64``, or ``body`` as text); unknown keys are an
        error naming the key."""
        return cls(**doc)

    @classmethod
    def from_json(cls, text: str) -> LoadSpec:
        """Build from JSON text."""
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("load spec: expected a JSON object")
        return cls.from_dict(doc)


def spec_for_request(
    base_url: str,
    request: HttpRequest,
    *,
    connections: int,
    duration_s: float,
    timeout_s: float,
    cpus: Sequence[int],
    rate: float | None = None,
    keepalive: bool = True,
    io: Literal["auto", "epoll", "uring"] = "auto",
    protocol: Literal["http1", "h2c", "ws"] = "http1",
    streams: int = 1,
    requests_per_connection: int = 0,
    message_bytes: int | None = None,
) -> LoadSpec:
    """The spec that repeats a workload's ``request`` against the server at ``base_url``
    (one iteration of a study cell; one generator thread). ``keepalive`` False opens a new
    connection per request; ``io`` is the engine's I/O backend; ``protocol`` "h2c" speaks
    HTTP/2 with ``streams`` requests in flight per connection; ``requests_per_connection``
    closes each connection after that many (0: never); ``protocol`` "ws" upgrades each
    connection to WebSocket at ``ws://`` + the URL's host and path and echoes messages of
    ``message_bytes`` (TCP only). A ``unix:/path/to.sock:``
    base URL (a server on a unix socket, :mod:`pywebbench.bind`) becomes ``unix_socket``."""
    url, unix_socket = base_url.rstrip("/") + request.path, None
    if base_url.startswith("unix:"):  # the request path may hold ":/": keep it in the url
        target = parse_base_url(base_url)
        url = f"http://{target.host_header}{target.prefix}{request.path}"
        unix_socket = target.unix_socket
    ws: dict[str, Any] = {}
    if protocol == "ws":
        if unix_socket is not None:
            raise ValueError(f"base_url {base_url!r}: WebSocket cells listen on TCP")
        url = "ws://" + url.split("://", 1)[1]
        ws = {"message_bytes": message_bytes} if message_bytes is not None else {}
    return LoadSpec(
        url=url,
        unix_socket=unix_socket,
        method=request.method,
        headers=[(name, value) for name, value in request.headers],
        body=bytes(request.body),
        connections=connections,
        threads=1,
        duration_s=duration_s,
        timeout_s=timeout_s,
        cpus=list(cpus),
        rate=rate,
        keepalive=keepalive,
        io=io,
        protocol=protocol,
        streams=streams,
        requests_per_connection=requests_per_connection,
        **ws,
    )
