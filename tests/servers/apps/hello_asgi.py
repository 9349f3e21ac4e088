"""Minimal ASGI app for the server-adapter tests (Python 3.9+, no dependencies)."""


async def app(scope, receive, send):
    """GET /hello -> Hello, World!; anything else -> 404. Handles lifespan."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    if scope["path"] == "/hello":
        body, status = b"Hello, World!", 200
    else:
        body, status = b"not found", 404
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
