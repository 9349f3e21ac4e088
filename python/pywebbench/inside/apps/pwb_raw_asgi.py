"""pywebbench workloads as a raw ASGI 3 application (no framework): ``pwb_raw_asgi:app``.

Async all the way: asyncio.sleep for io, redis.asyncio and psycopg's async client for the
services (sqlite3 stays blocking). Runs inside a stack venv (Python 3.9+/PyPy).
"""

import json
from urllib.parse import parse_qs

import pwb_common as c


def _query(scope, name):
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get(name)
    return values[0] if values else None


async def _read_body(receive):
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _handle(scope, receive):
    path = scope["path"]
    if path == "/hello":
        return 200, c.TEXT, c.HELLO
    if path == "/json":
        return 200, c.JSON, json.dumps(c.MESSAGE).encode()
    if path == "/cpu":
        return 200, c.TEXT, c.cpu_body(c.cpu_n(_query(scope, "n")))
    if path == "/environ":
        return 200, c.HTML, c.render_environ("ASGI scope", scope)
    if path == "/redis":
        return 200, c.HTML, await c.redis_page_async()
    if path == "/fortunes":
        return 200, c.HTML, await c.fortunes_page_async()
    if path == "/io":
        ms = c.io_ms(_query(scope, "ms"))
        await c.io_sleep_async(ms)
        return 200, c.TEXT, c.io_body(ms)
    if path == "/upload":
        if scope["method"] != "POST":
            return 405, c.TEXT, b"POST only"
        body = await _read_body(receive)
        return 200, c.JSON, json.dumps(c.upload_result(body)).encode()
    return 404, c.TEXT, b"not found"


async def _lifespan(receive, send):
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _ws_echo(receive, send):
    """ws-echo: accept, then send every message back as it came (bytes or text)."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    while True:
        message = await receive()
        if message["type"] != "websocket.receive":
            return  # websocket.disconnect
        if message.get("bytes") is not None:
            await send({"type": "websocket.send", "bytes": message["bytes"]})
        else:
            await send({"type": "websocket.send", "text": message.get("text") or ""})


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        await _lifespan(receive, send)
        return
    if scope["type"] == "websocket":
        if scope["path"] == "/ws-echo":
            await _ws_echo(receive, send)
        else:
            await send({"type": "websocket.close", "code": 1008})
        return
    if scope["type"] != "http":
        return
    try:
        status, ctype, body = await _handle(scope, receive)
    except c.BadParameter as exc:
        status, ctype, body = 400, c.TEXT, str(exc).encode()
    except c.ServiceNotConfigured as exc:
        status, ctype, body = 503, c.TEXT, str(exc).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", ctype.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


application = app
