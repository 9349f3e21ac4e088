"""Where a server under test listens (its *bind*): TCP on loopback, or a unix-domain socket.

The usual production layout puts a reverse proxy in front of gunicorn or uWSGI on a unix
socket; ``pywebbench run --bind tcp,unix`` measures both. A server bound to a unix socket is
addressed with the load engine's URL form ``unix:/path/to.sock:/request-path``
(docs/load-engine.md): its base URL is ``unix:/path/to.sock:``, and a request path is appended
to it as to ``http://host:port``, so the readiness probe, verification and the load specs
(:func:`pywebbench.load.spec.spec_for_request`, which moves the socket to the spec's
``unix_socket``) all take the one string. :func:`http_connection` opens an ``http.client``
connection to either form. Each server's socket lives in its own private temporary directory
(:func:`new_socket_dir`), removed when the server stops.
"""

from __future__ import annotations

import http.client
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pywebbench.catalogue.base import ServerAdapter

Bind = Literal["tcp", "unix"]
BINDS: tuple[Bind, ...] = ("tcp", "unix")
#: A unix socket's path must fit ``sun_path``: 108 bytes on Linux, its final NUL included.
SUN_PATH_MAX = 107
#: The socket's name inside its private directory.
SOCKET_NAME = "server.sock"
#: The Host header of requests over a unix socket (the engine sends the same).
UNIX_HOST = "localhost"

_UNIX = "unix:"


def can_bind_unix(adapter: ServerAdapter) -> bool:
    """True when the catalogue says ``adapter`` can listen on a unix socket (``unix_bind``)."""
    return getattr(adapter, "unix_bind", None) is not None


def cannot_bind_unix(adapter: ServerAdapter) -> str:
    """The one-line reason a unix cell of ``adapter`` is skipped or refused."""
    return f"{adapter.name} cannot bind a unix socket (docs/servers.md lists those that can)"


def unix_base_url(path: str | os.PathLike[str]) -> str:
    """The base URL of a server on the unix socket ``path``: ``unix:/path/to.sock:``."""
    return f"{_UNIX}{os.fspath(path)}:"


@dataclass(frozen=True)
class Target:
    """A base URL taken apart: TCP host and port, or a unix socket; and a path prefix."""

    host: str
    port: int
    unix_socket: str | None = None
    prefix: str = ""

    @property
    def host_header(self) -> str:
        """The Host header requests to this target carry."""
        if self.unix_socket is not None:
            return UNIX_HOST
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_base_url(base_url: str) -> Target:
    """``http://host:port[/prefix]`` or ``unix:/path/to.sock:[/prefix]`` -> a :class:`Target`.

    The socket's path ends at the last ``:/`` (as the engine reads it); ValueError naming the
    URL for anything else.
    """
    if base_url.startswith(_UNIX):
        rest = base_url[len(_UNIX) :]
        cut = rest.rfind(":/")
        path, prefix = (rest[:cut], rest[cut + 1 :]) if cut >= 0 else (rest.rstrip(":"), "")
        if not path:
            raise ValueError(f"base_url {base_url!r}: expected unix:/path/to.sock:")
        return Target(UNIX_HOST, 80, path, prefix.rstrip("/"))
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        raise ValueError(
            f"base_url must be http://host:port or unix:/path/to.sock:, got {base_url!r}"
        )
    return Target(parts.hostname, parts.port or 80, None, parts.path.rstrip("/"))


class UnixHTTPConnection(http.client.HTTPConnection):
    """``http.client`` over a unix-domain socket (the Host header is :data:`UNIX_HOST`)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__(UNIX_HOST, timeout=timeout)
        self.unix_socket = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.unix_socket)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def http_connection(target: Target, timeout: float) -> http.client.HTTPConnection:
    """An unopened HTTP/1.1 connection to ``target`` (it connects on first use, or on
    ``connect()``)."""
    if target.unix_socket is not None:
        return UnixHTTPConnection(target.unix_socket, timeout)
    return http.client.HTTPConnection(target.host, target.port, timeout=timeout)


def new_socket_dir() -> Path:
    """A new private directory (mode 0700) for one server's unix socket.

    In the system's temporary directory, or in /tmp when that path is too long for the socket
    to fit ``sun_path``. The caller removes it (``shutil.rmtree``) once the server stopped.
    """
    base = tempfile.gettempdir()
    longest = Path(base, "pwb-" + "x" * 8, SOCKET_NAME)  # mkdtemp adds 8 characters
    if len(os.fsencode(longest)) > SUN_PATH_MAX:
        base = "/tmp"
    return Path(tempfile.mkdtemp(prefix="pwb-", dir=base))
