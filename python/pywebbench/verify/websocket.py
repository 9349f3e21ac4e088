"""Verify a WebSocket workload (ws-echo): does the server upgrade the connection and echo
each message back intact?

:func:`verify_ws` opens one connection to the workload's route (``websockets``' synchronous
client), sends :data:`MESSAGES` binary messages of the workload's ``size`` and checks each
echo byte for byte, as the load engine does for every message it times.
"""

from __future__ import annotations

import hashlib

from websockets.exceptions import InvalidStatus, WebSocketException
from websockets.sync.client import connect

from pywebbench.bind import parse_base_url
from pywebbench.catalogue.workloads import Workload

__all__ = ["MESSAGES", "message", "verify_ws"]

#: Messages sent per check, over one connection.
MESSAGES = 2


def message(size: int, i: int) -> bytes:
    """The ``i``-th verification message of ``size`` bytes (deterministic, not constant)."""
    block = hashlib.sha256(f"pywebbench-ws-{i}".encode()).digest()
    return (block * (size // len(block) + 1))[:size]


def verify_ws(
    base_url: str, workload: Workload, *, timeout_s: float = 10.0, **params: object
) -> tuple[list[str], list[str]]:
    """(problems, warnings) of ``workload`` on the server at ``base_url`` (``http://host:port``:
    the upgrade goes to ``ws://host:port`` + the workload's path)."""
    resolved = workload.resolve(**params)
    path = workload.request(**resolved).path
    target = parse_base_url(base_url)
    if target.unix_socket is not None:
        return [f"GET {path} (WebSocket): WebSocket cells listen on TCP, not {base_url}"], []
    label = f"GET {path} (WebSocket)"
    url = f"ws://{target.host_header}{target.prefix}{path}"
    problems: list[str] = []
    try:
        with connect(
            url, open_timeout=timeout_s, close_timeout=timeout_s, max_size=None, compression=None
        ) as ws:
            for i in range(MESSAGES):
                sent = message(resolved["size"], i)
                ws.send(sent)
                echo = ws.recv(timeout=timeout_s)
                if echo != sent:
                    got = len(echo) if isinstance(echo, bytes) else f"text of {len(echo)} chars"
                    problems.append(
                        f"{label}: message {i + 1} of {len(sent)} bytes came back different ({got})"
                    )
                    break
    except InvalidStatus as exc:
        status = exc.response.status_code
        problems.append(f"{label}: the upgrade was answered with status {status}, not 101")
    except (OSError, TimeoutError, WebSocketException) as exc:
        problems.append(f"{label}: {type(exc).__name__}: {exc}")
    return problems, []
