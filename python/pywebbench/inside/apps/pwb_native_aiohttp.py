"""pywebbench workloads as a native aiohttp application and server.

Run: ``python pwb_native_aiohttp.py --host 127.0.0.1 --port P --workers W --threads T``.
Workers: one listening socket, bound before ``W - 1`` forks; every process serves it.
Threads are accepted for a uniform command line but unused (all handlers are coroutines).
Access logging is off. Runs inside a stack venv (Python 3.9+/PyPy).
"""

import os
import signal
import socket
import sys

from aiohttp import web

import pwb_common as c


def _text(body, ctype="text/plain"):
    return web.Response(body=body, content_type=ctype, charset="utf-8")


async def hello(request):
    return _text(c.HELLO)


async def json_(request):
    return web.json_response(c.MESSAGE)


async def cpu(request):
    return _text(c.cpu_body(c.cpu_n(request.query.get("n"))))


async def environ(request):
    mapping = {
        "method": request.method,
        "path": request.path,
        "path_qs": request.path_qs,
        "query_string": request.query_string,
        "version": request.version,
        "scheme": request.scheme,
        "host": request.host,
        "remote": request.remote,
        "secure": request.secure,
        "forwarded": request.forwarded,
        "keep_alive": request.keep_alive,
        "content_type": request.content_type,
        "charset": request.charset,
        "content_length": request.content_length,
        "cookies": dict(request.cookies),
        "match_info": dict(request.match_info),
        "transport": repr(request.transport),
        "app": repr(request.app),
    }
    for name, value in request.headers.items():
        mapping["header " + name] = value
    return _text(c.render_environ("aiohttp request", mapping), "text/html")


async def redis_(request):
    return _text(await c.redis_page_async(), "text/html")


async def fortunes(request):
    return _text(await c.fortunes_page_async(), "text/html")


async def io(request):
    ms = c.io_ms(request.query.get("ms"))
    await c.io_sleep_async(ms)
    return _text(c.io_body(ms))


async def upload(request):
    return web.json_response(c.upload_result(await request.read()))


@web.middleware
async def errors(request, handler):
    try:
        return await handler(request)
    except c.BadParameter as exc:
        return web.Response(text=str(exc), status=400, content_type="text/plain")
    except c.ServiceNotConfigured as exc:
        return web.Response(text=str(exc), status=503, content_type="text/plain")


def make_app():
    app = web.Application(middlewares=[errors], client_max_size=2**30)
    app.router.add_get("/hello", hello)
    app.router.add_get("/json", json_)
    app.router.add_get("/cpu", cpu)
    app.router.add_get("/environ", environ)
    app.router.add_get("/redis", redis_)
    app.router.add_get("/fortunes", fortunes)
    app.router.add_get("/io", io)
    app.router.add_post("/upload", upload)
    return app


def main(argv=None):
    args = c.native_args(argv, "pywebbench workloads on aiohttp's own HTTP server")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(1024)
    sock.set_inheritable(True)
    if c.fork_workers(args.workers):
        # a child: die with the parent (the server is stopped through its process group anyway)
        try:
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except Exception:
            pass
    web.run_app(
        make_app(), sock=sock, backlog=1024, access_log=None, print=None, handle_signals=True
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
