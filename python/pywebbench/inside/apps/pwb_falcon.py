"""pywebbench workloads in Falcon (WSGI): ``pwb_falcon:app``. Runs inside a stack venv."""

import falcon

import pwb_common as c


def _set(resp, body, ctype):
    resp.content_type = ctype
    resp.data = body


class Hello:
    def on_get(self, req, resp):
        _set(resp, c.HELLO, c.TEXT)


class Json:
    def on_get(self, req, resp):
        resp.media = c.MESSAGE


class Cpu:
    def on_get(self, req, resp):
        _set(resp, c.cpu_body(c.cpu_n(req.get_param("n"))), c.TEXT)


class Environ:
    def on_get(self, req, resp):
        _set(resp, c.render_environ("WSGI environ", req.env), c.HTML)


class Redis:
    def on_get(self, req, resp):
        _set(resp, c.redis_page(), c.HTML)


class Fortunes:
    def on_get(self, req, resp):
        _set(resp, c.fortunes_page(), c.HTML)


class Io:
    def on_get(self, req, resp):
        ms = c.io_ms(req.get_param("ms"))
        c.io_sleep(ms)
        _set(resp, c.io_body(ms), c.TEXT)


class Upload:
    def on_post(self, req, resp):
        resp.media = c.upload_result(req.bounded_stream.read())


def _error(status):
    def handler(req, resp, exc, params):
        resp.status = status
        _set(resp, str(exc).encode(), c.TEXT)

    return handler


app = falcon.App()
for _route, _resource in (
    ("/hello", Hello()),
    ("/json", Json()),
    ("/cpu", Cpu()),
    ("/environ", Environ()),
    ("/redis", Redis()),
    ("/fortunes", Fortunes()),
    ("/io", Io()),
    ("/upload", Upload()),
):
    app.add_route(_route, _resource)
app.add_error_handler(c.BadParameter, _error(falcon.HTTP_400))
app.add_error_handler(c.ServiceNotConfigured, _error(falcon.HTTP_503))
application = app
