"""pywebbench workloads in Bottle (WSGI): ``pwb_bottle:app``. Runs inside a stack venv."""

import functools

import bottle

import pwb_common as c

app = bottle.Bottle()
# Bodies above MEMFILE_MAX are spooled to a temporary file; keep uploads in memory.
bottle.BaseRequest.MEMFILE_MAX = 256 * 1024 * 1024


def _guard(handler):
    @functools.wraps(handler)
    def wrapper(*args, **kwargs):
        try:
            return handler(*args, **kwargs)
        except c.BadParameter as exc:
            return bottle.HTTPResponse(str(exc), status=400, headers={"Content-Type": c.TEXT})
        except c.ServiceNotConfigured as exc:
            return bottle.HTTPResponse(str(exc), status=503, headers={"Content-Type": c.TEXT})

    return wrapper


def _respond(body, ctype):
    bottle.response.content_type = ctype
    return body


@app.get("/hello")
def hello():
    return _respond(c.HELLO, c.TEXT)


@app.get("/json")
def json_():
    return c.MESSAGE  # Bottle's JSON plugin serialises dicts as application/json


@app.get("/cpu")
@_guard
def cpu():
    return _respond(c.cpu_body(c.cpu_n(bottle.request.query.get("n"))), c.TEXT)


@app.get("/environ")
def environ():
    return _respond(c.render_environ("WSGI environ", bottle.request.environ), c.HTML)


@app.get("/redis")
@_guard
def redis_():
    return _respond(c.redis_page(), c.HTML)


@app.get("/fortunes")
@_guard
def fortunes():
    return _respond(c.fortunes_page(), c.HTML)


@app.get("/io")
@_guard
def io():
    ms = c.io_ms(bottle.request.query.get("ms"))
    c.io_sleep(ms)
    return _respond(c.io_body(ms), c.TEXT)


@app.post("/upload")
def upload():
    return c.upload_result(bottle.request.body.read())


application = app
