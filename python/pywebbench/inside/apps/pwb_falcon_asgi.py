"""pywebbench workloads in Falcon's ASGI app: ``pwb_falcon_asgi:app``. Runs inside a stack venv."""

import falcon
import falcon.asgi

import pwb_common as c


def _set(resp, body, ctype):
    resp.content_type = ctype
    resp.data = body


class Hello:
    async def on_get(self, req, resp):
        _set(resp, c.HELLO, c.TEXT)


class Json:
    async def on_get(self, req, resp):
        resp.media = c.MESSAGE


class Cpu:
    async def on_get(self, req, resp):
        _set(resp, c.cpu_body(c.cpu_n(req.get_param("n"))), c.TEXT)


class Environ:
    async def on_get(self, req, resp):
        _set(resp, c.render_environ("ASGI scope", req.scope), c.HTML)


class Redis:
    async def on_get(self, req, resp):
        _set(resp, await c.redis_page_async(), c.HTML)


class Fortunes:
    async def on_get(self, req, resp):
        _set(resp, await c.fortunes_page_async(), c.HTML)


class Io:
    async def on_get(self, req, resp):
        ms = c.io_ms(req.get_param("ms"))
        await c.io_sleep_async(ms)
        _set(resp, c.io_body(ms), c.TEXT)


class Upload:
    async def on_post(self, req, resp):
        resp.media = c.upload_result(await req.stream.read())


def _error(status):
    async def handler(req, resp, exc, params):
        resp.status = status
        _set(resp, str(exc).encode(), c.TEXT)

    return handler


app = falcon.asgi.App()
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
