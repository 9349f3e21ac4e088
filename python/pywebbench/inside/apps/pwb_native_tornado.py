"""pywebbench workloads as a native tornado application and server.

Run: ``python pwb_native_tornado.py --host 127.0.0.1 --port P --workers W --threads T``.
Workers: the listening socket is bound first, then ``tornado.process.fork_processes``.
Threads are accepted for a uniform command line but unused: every handler is a coroutine on
the IOLoop (asyncio.sleep for io, redis.asyncio and psycopg's async client for services).
Runs inside a stack venv (Python 3.9+/PyPy).
"""

import asyncio
import sys

import tornado.httpserver
import tornado.netutil
import tornado.process
import tornado.web

import pwb_common as c


class Base(tornado.web.RequestHandler):
    def send(self, body, ctype):
        self.set_header("Content-Type", ctype)
        self.finish(body)

    def write_error(self, status_code, **kwargs):
        exc = kwargs.get("exc_info", (None, None, None))[1]
        self.set_header("Content-Type", c.TEXT)
        self.finish(str(exc) if exc is not None else self._reason)

    def _handle_request_exception(self, e):
        if isinstance(e, c.BadParameter):
            self.set_status(400)
            self.send(str(e).encode(), c.TEXT)
        elif isinstance(e, c.ServiceNotConfigured):
            self.set_status(503)
            self.send(str(e).encode(), c.TEXT)
        else:
            super()._handle_request_exception(e)


class Hello(Base):
    def get(self):
        self.send(c.HELLO, c.TEXT)


class Json(Base):
    def get(self):
        self.finish(c.MESSAGE)  # tornado serialises dicts as application/json


class Cpu(Base):
    def get(self):
        self.send(c.cpu_body(c.cpu_n(self.get_query_argument("n", None))), c.TEXT)


class Environ(Base):
    def get(self):
        r = self.request
        mapping = {
            "method": r.method,
            "uri": r.uri,
            "path": r.path,
            "query": r.query,
            "version": r.version,
            "protocol": r.protocol,
            "host": r.host,
            "host_name": r.host_name,
            "remote_ip": r.remote_ip,
            "arguments": r.arguments,
            "body_arguments": r.body_arguments,
            "files": r.files,
            "cookies": dict(r.cookies),
            "start_time": r._start_time,
            "connection": repr(r.connection),
            "server_connection": repr(r.server_connection),
            "settings": self.application.settings,
        }
        for name, value in r.headers.get_all():
            mapping["header " + name] = value
        self.send(c.render_environ("tornado request", mapping), c.HTML)


class Redis(Base):
    async def get(self):
        self.send(await c.redis_page_async(), c.HTML)


class Fortunes(Base):
    async def get(self):
        self.send(await c.fortunes_page_async(), c.HTML)


class Io(Base):
    async def get(self):
        ms = c.io_ms(self.get_query_argument("ms", None))
        await c.io_sleep_async(ms)
        self.send(c.io_body(ms), c.TEXT)


class Upload(Base):
    def post(self):
        self.finish(c.upload_result(self.request.body))


def make_app():
    return tornado.web.Application(
        [
            (r"/hello", Hello),
            (r"/json", Json),
            (r"/cpu", Cpu),
            (r"/environ", Environ),
            (r"/redis", Redis),
            (r"/fortunes", Fortunes),
            (r"/io", Io),
            (r"/upload", Upload),
        ],
        log_function=lambda handler: None,  # access logging off
    )


def main(argv=None):
    args = c.native_args(argv, "pywebbench workloads on tornado's own HTTP server")
    sockets = tornado.netutil.bind_sockets(args.port, address=args.host, backlog=1024)
    if args.workers > 1:
        tornado.process.fork_processes(args.workers, max_restarts=0)

    async def serve():
        server = tornado.httpserver.HTTPServer(make_app(), max_body_size=2**30)
        server.add_sockets(sockets)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    sys.exit(main())
