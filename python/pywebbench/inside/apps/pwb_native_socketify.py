"""pywebbench workloads as a native socketify (uWebSockets) application.

Run: ``python pwb_native_socketify.py --host 127.0.0.1 --port P --workers W --threads T``.
Binds the given loopback host only (socketify's ``listen(port)`` would bind 0.0.0.0).
Workers: ``W - 1`` forks before the app is built; every process listens on the same port
(uSockets sets SO_REUSEPORT). Threads are accepted but unused. Services are reached with the
async clients on socketify's asyncio loop. Runs inside a stack venv (Python 3.9+/PyPy).
"""

import json
import os
import signal
import sys
import threading

from socketify import App, AppListenOptions

import pwb_common as c

# launch_common, beside this app's folder, holds the fix of socketify's listen on PyPy
sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "launchers"))
from launch_common import keep_socketify_listen_host  # noqa: E402


def _send(res, body, ctype, status=200):
    res.write_status(status)
    res.write_header("Content-Type", ctype)
    res.end(body)


def _errors(handler):
    async def wrapper(res, req):
        try:
            await handler(res, req)
        except c.BadParameter as exc:
            _send(res, str(exc).encode(), c.TEXT, 400)
        except c.ServiceNotConfigured as exc:
            _send(res, str(exc).encode(), c.TEXT, 503)

    return wrapper


def hello(res, req):
    _send(res, c.HELLO, c.TEXT)


def json_(res, req):
    _send(res, json.dumps(c.MESSAGE).encode(), c.JSON)


def cpu(res, req):
    try:
        n = c.cpu_n(req.get_query("n"))
    except c.BadParameter as exc:
        _send(res, str(exc).encode(), c.TEXT, 400)
        return
    _send(res, c.cpu_body(n), c.TEXT)


def environ(res, req):
    mapping = {
        "method": req.get_method(),
        "url": req.get_url(),
        "full_url": req.get_full_url(),
        "queries": req.get_queries(),
        "remote_address": res.get_remote_address(),
    }
    for name, value in req.get_headers().items():
        mapping["header " + name] = value
    _send(res, c.render_environ("socketify request", mapping), c.HTML)


@_errors
async def redis_(res, req):
    _send(res, await c.redis_page_async(), c.HTML)


@_errors
async def fortunes(res, req):
    _send(res, await c.fortunes_page_async(), c.HTML)


async def io(res, req):
    try:
        ms = c.io_ms(req.get_query("ms"))  # read the request before the first await
    except c.BadParameter as exc:
        _send(res, str(exc).encode(), c.TEXT, 400)
        return
    await c.io_sleep_async(ms)
    _send(res, c.io_body(ms), c.TEXT)


async def upload(res, req):
    data = await res.get_data()
    _send(res, json.dumps(c.upload_result(data.getvalue())).encode(), c.JSON)


def make_app():
    app = App()
    app.get("/hello", hello)
    app.get("/json", json_)
    app.get("/cpu", cpu)
    app.get("/environ", environ)
    app.get("/redis", redis_)
    app.get("/fortunes", fortunes)
    app.get("/io", io)
    app.post("/upload", upload)
    return app


def main(argv=None):
    args = c.native_args(argv, "pywebbench workloads on socketify's own HTTP server")
    c.fork_workers(args.workers)
    keep_socketify_listen_host()
    app = make_app()

    listening = threading.Event()

    def on_listen(config):
        listening.set()

    def watchdog():
        # When the bind fails, socketify raises inside its own listen callback (cffi prints
        # and ignores the error) and keeps running without a socket: exit instead, so the
        # launch fails at once and can be retried on another port.
        if not listening.wait(15):
            sys.stderr.write("socketify: failed to listen on %s:%d\n" % (args.host, args.port))
            sys.stderr.flush()
            os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    app.listen(AppListenOptions(port=args.port, host=args.host), on_listen)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
