"""A WebSocket echo app for tests/load/test_ws.py (ASGI, served by hypercorn with wsproto):
``/ws`` echoes every message, byte for byte; ``/corrupt`` echoes it with its last byte
changed (a server the engine's echo check must catch); any other path answers the upgrade
with 404 (the ASGI WebSocket denial response), as a wrong URL would. Plain HTTP requests get
404 too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]


async def app(
    scope: Scope,
    receive: Callable[[], Awaitable[Message]],
    send: Callable[[Message], Awaitable[None]],
) -> None:
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": 404, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    msg = await receive()  # websocket.connect
    if scope["path"] not in ("/ws", "/corrupt"):
        headers = [(b"content-type", b"text/plain"), (b"content-length", b"9")]
        await send({"type": "websocket.http.response.start", "status": 404, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": b"not found"})
        return
    await send({"type": "websocket.accept"})
    while True:
        msg = await receive()
        if msg["type"] == "websocket.disconnect":
            return
        data = msg.get("bytes")
        if data is not None:
            if scope["path"] == "/corrupt" and data:
                data = data[:-1] + bytes([data[-1] ^ 0xFF])
            await send({"type": "websocket.send", "bytes": data})
        else:
            await send({"type": "websocket.send", "text": msg.get("text") or ""})
