"""pywebbench workloads as a raw WSGI callable (no framework): ``pwb_raw_wsgi:app``.

Runs inside a stack venv (Python 3.9+/PyPy); imports only pwb_common and the stdlib.
"""

import json
from urllib.parse import parse_qs

import pwb_common as c


def _query(environ, name):
    values = parse_qs(environ.get("QUERY_STRING", "")).get(name)
    return values[0] if values else None


def _read_body(environ):
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    stream = environ["wsgi.input"]
    if length > 0:
        return stream.read(length)
    if environ.get("HTTP_TRANSFER_ENCODING", "").lower() == "chunked" or environ.get(
        "wsgi.input_terminated"
    ):
        return stream.read()
    return b""


def _handle(environ):
    path = environ.get("PATH_INFO", "")
    method = environ.get("REQUEST_METHOD", "GET")
    if path == "/hello":
        return "200 OK", c.TEXT, c.HELLO
    if path == "/json":
        return "200 OK", c.JSON, json.dumps(c.MESSAGE).encode()
    if path == "/cpu":
        return "200 OK", c.TEXT, c.cpu_body(c.cpu_n(_query(environ, "n")))
    if path == "/environ":
        return "200 OK", c.HTML, c.render_environ("WSGI environ", environ)
    if path == "/redis":
        return "200 OK", c.HTML, c.redis_page()
    if path == "/fortunes":
        return "200 OK", c.HTML, c.fortunes_page()
    if path == "/io":
        ms = c.io_ms(_query(environ, "ms"))
        c.io_sleep(ms)
        return "200 OK", c.TEXT, c.io_body(ms)
    if path == "/upload":
        if method != "POST":
            return "405 Method Not Allowed", c.TEXT, b"POST only"
        return "200 OK", c.JSON, json.dumps(c.upload_result(_read_body(environ))).encode()
    return "404 Not Found", c.TEXT, b"not found"


def app(environ, start_response):
    try:
        status, ctype, body = _handle(environ)
    except c.BadParameter as exc:
        status, ctype, body = "400 Bad Request", c.TEXT, str(exc).encode()
    except c.ServiceNotConfigured as exc:
        status, ctype, body = "503 Service Unavailable", c.TEXT, str(exc).encode()
    start_response(status, [("Content-Type", ctype), ("Content-Length", str(len(body)))])
    return [body]


application = app
