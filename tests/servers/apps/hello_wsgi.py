"""Minimal WSGI app for the server-adapter tests (Python 3.9+, no dependencies)."""


def app(environ, start_response):
    """GET /hello -> Hello, World!; anything else -> 404."""
    if environ.get("PATH_INFO") == "/hello":
        body = b"Hello, World!"
        status = "200 OK"
    else:
        body = b"not found"
        status = "404 Not Found"
    start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
