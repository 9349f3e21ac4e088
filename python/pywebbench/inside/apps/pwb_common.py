"""Shared helpers for the pywebbench framework apps (runs INSIDE a stack's virtualenv).

Must import on Python 3.9 (PyPy) with only the standard library; the redis and PostgreSQL
clients (``redis``, ``pg8000``, ``psycopg``) are imported lazily, so a hello-only run needs
neither the services nor their configuration. Never imports pywebbench.

Services come from the environment:
- ``PWB_REDIS_URL``: ``redis://127.0.0.1:PORT/0``
- ``PWB_DATABASE_URL``: ``postgresql://user@127.0.0.1:PORT/db`` or ``sqlite:////abs/path.db``
- ``PWB_DB_POOL``: connections per event loop for async PostgreSQL access (default 8)
- ``PWB_RUNTIME_DIR``: where each server process that imports an app writes ``<pid>.json``,
  its GIL state (:func:`gil_enabled`), read back by the orchestrator per replicate

PostgreSQL clients: pg8000 (pure Python) for synchronous code on every interpreter; psycopg 3's
async client for async code where it works (CPython), else pg8000 in the loop's thread pool.

Every framework renders the same bytes for hello, cpu, io, redis and fortunes through these
helpers; json and upload go through each framework's own JSON serialiser (verified by schema).
"""

from __future__ import annotations

import asyncio
import hashlib
import html
import json
import os
import sys
import threading
import time
import weakref

HELLO = b"Hello, World!"
MESSAGE = {"message": "Hello, World!"}
TEXT = "text/plain; charset=utf-8"
HTML = "text/html; charset=utf-8"
JSON = "application/json"

CPU_DEFAULT_N = 20
CPU_MAX_N = 32
IO_DEFAULT_MS = 10
IO_MAX_MS = 10000

REDIS_COUNTER_KEY = "pwb:clicks"
REDIS_VALUE_KEY = "pwb:value"

FORTUNE_SQL = "SELECT id, message FROM fortune"
ADDITIONAL_FORTUNE = (0, "Additional fortune added at request time.")

ENVIRON_MIN_BYTES = 5 * 1024


class ServiceNotConfigured(RuntimeError):
    """A workload needs a service whose URL is not in the environment."""


class BadParameter(ValueError):
    """A query parameter is missing its bounds or is not an integer (answer 400)."""


# ---------------------------------------------------------------- parameters, cpu, io, upload


def int_param(raw, default, lo, hi, name):
    """Parse an integer query parameter; ``raw`` None/"" gives ``default``."""
    if raw is None or raw == "":
        return default
    if isinstance(raw, (list, tuple)):
        raw = raw[0] if raw else ""
    if isinstance(raw, bytes):
        raw = raw.decode("latin-1")
    try:
        value = int(raw)
    except ValueError:
        raise BadParameter("%s must be an integer, got %r" % (name, raw)) from None
    if value < lo or value > hi:
        raise BadParameter("%s must be between %d and %d, got %d" % (name, lo, hi, value))
    return value


def cpu_n(raw):
    return int_param(raw, CPU_DEFAULT_N, 0, CPU_MAX_N, "n")


def io_ms(raw):
    return int_param(raw, IO_DEFAULT_MS, 0, IO_MAX_MS, "ms")


def fib(n):
    """Recursive Fibonacci: the cpu workload (deliberately naive)."""
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def cpu_body(n):
    return str(fib(n)).encode("ascii")


def io_body(ms):
    return ("slept %d ms" % ms).encode("ascii")


def io_sleep(ms):
    """Blocking sleep for the io workload in synchronous (WSGI) frameworks."""
    time.sleep(ms / 1000.0)


async def io_sleep_async(ms):
    """Non-blocking sleep for the io workload in asynchronous frameworks."""
    await asyncio.sleep(ms / 1000.0)


def upload_result(body):
    """``{"length": L, "sha256": hex}`` of an uploaded body (a dict: the framework serialises)."""
    return {"length": len(body), "sha256": hashlib.sha256(body).hexdigest()}


# ---------------------------------------------------------------- environ


_ENVIRON_STYLE = """
body { font-family: 'Lucida Grande', 'Lucida Sans Unicode', Geneva, Verdana, sans-serif;
       background-color: white; color: #000; font-size: 15px; text-align: center; }
div.box { text-align: left; width: 45em; margin: auto; padding: 50px 0; background-color: white; }
h1, h2 { font-family: 'Ubuntu', 'Lucida Grande', 'Lucida Sans Unicode', Geneva, Verdana,
         sans-serif; font-weight: normal; }
h1 { margin: 0 0 30px 0; } h2 { font-size: 1.4em; margin: 1em 0 0.5em 0; }
table { width: 100%; border-collapse: collapse; border: 1px solid #AFC5C9 }
table th { background-color: #AFC1C4; color: white; font-size: 0.72em;
           font-weight: normal; width: 18em; vertical-align: top; padding: 0.5em 0 0.1em 0.5em; }
table td { border: 1px solid #AFC5C9; padding: 0.1em 0 0.1em 0.5em; }
code { font-family: 'Consolas', 'Monaco', 'Bitstream Vera Sans Mono', monospace;
       font-size: 0.7em; }
ul li { line-height: 1.5em; }
ul.path { font-size: 0.7em; margin: 0 -30px; padding: 8px 30px; list-style: none;
          background: #E8EFF0; }
ul.path li { line-height: 1.6em; }
li.virtual { color: #999; text-decoration: underline; }
li.exp { background: white; }
"""

_ENVIRON_ABOUT = (
    "This page is the environ workload of pywebbench, modelled on Werkzeug's test "
    "application: it lists every key of the request's WSGI environ (or ASGI scope, or the "
    "native framework's request attributes) and the interpreter's module search path, "
    "escaped and rendered into one HTML document per request. It measures how a stack "
    "builds, walks and renders a realistic per-request mapping."
)


def _short(value, limit=400):
    if isinstance(value, bytes):
        text = value.decode("latin-1")
    elif isinstance(value, str):
        text = value
    else:
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def render_environ(kind, mapping):
    """The environ page: every item of ``mapping`` (WSGI environ, ASGI scope...) as HTML.

    ``kind`` names what is listed ("WSGI environ", "ASGI scope", "tornado request").
    Pads with an HTML comment to at least ``ENVIRON_MIN_BYTES`` so pages are 5-8 KB.
    """
    esc = html.escape
    rows = []
    for key in sorted(mapping, key=str):
        value = esc(_short(mapping[key]))
        rows.append("<tr><th>%s</th><td><code>%s</code></td></tr>" % (esc(str(key)), value))
    paths = "".join("<li>%s</li>" % esc(p) for p in sys.path if p)
    parts = [
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>pywebbench environ</title>",
        "<style type=\"text/css\">%s</style></head>\n<body><div class=\"box\">" % _ENVIRON_STYLE,
        "<h1>pywebbench environ</h1><p>%s</p>" % esc(_ENVIRON_ABOUT),
        "<h2>Interpreter</h2><p><code>%s</code></p>" % esc(sys.version.replace("\n", " ")),
        "<h2>%s</h2><table>%s</table>" % (esc(kind), "".join(rows)),
        "<h2>Module search path</h2><ul class=\"path\">%s</ul>" % paths,
        "</div></body></html>\n",
    ]
    page = "\n".join(parts)
    size = len(page.encode("utf-8"))
    if size < ENVIRON_MIN_BYTES:
        pad = ENVIRON_MIN_BYTES - size - len("<!--  -->\n")
        page += "<!-- %s -->\n" % ("." * max(pad, 0))
    return page.encode("utf-8")


# ---------------------------------------------------------------- redis


def _redis_url():
    url = os.environ.get("PWB_REDIS_URL")
    if not url:
        raise ServiceNotConfigured("PWB_REDIS_URL is not set (the redis workload needs redis)")
    return url


def render_redis(count, value):
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if value is None:
        raise RuntimeError("redis key %r is not set: the service was not seeded" % REDIS_VALUE_KEY)
    page = (
        "<!DOCTYPE html><html><head><title>Redis</title></head><body>"
        "<p>clicks: %d</p><p>value: %s</p></body></html>" % (int(count), html.escape(value))
    )
    return page.encode("utf-8")


_redis_sync = None
_redis_lock = threading.Lock()


def redis_page():
    """INCR the counter and GET the value with the synchronous client (thread-safe pool)."""
    global _redis_sync
    client = _redis_sync
    if client is None:
        with _redis_lock:
            if _redis_sync is None:
                import redis

                _redis_sync = redis.Redis.from_url(_redis_url())
            client = _redis_sync
    count = client.incr(REDIS_COUNTER_KEY)
    value = client.get(REDIS_VALUE_KEY)
    return render_redis(count, value)


_redis_async = weakref.WeakKeyDictionary()


async def redis_page_async():
    """INCR and GET with ``redis.asyncio`` (one client and pool per event loop)."""
    loop = asyncio.get_running_loop()
    client = _redis_async.get(loop)
    if client is None:
        import redis.asyncio

        client = redis.asyncio.Redis.from_url(_redis_url())
        _redis_async[loop] = client
    count = await client.incr(REDIS_COUNTER_KEY)
    value = await client.get(REDIS_VALUE_KEY)
    return render_redis(count, value)


# ---------------------------------------------------------------- fortunes


def _db_url():
    url = os.environ.get("PWB_DATABASE_URL")
    if not url:
        raise ServiceNotConfigured(
            "PWB_DATABASE_URL is not set (the fortunes workload needs PostgreSQL or SQLite)"
        )
    return url


def render_fortunes(rows):
    """TechEmpower's fortunes page: rows + the additional one, sorted by message, escaped."""
    rows = [(int(r[0]), r[1]) for r in rows]
    rows.append(ADDITIONAL_FORTUNE)
    rows.sort(key=lambda r: r[1])
    parts = [
        "<!DOCTYPE html><html><head><title>Fortunes</title></head><body>"
        "<table><tr><th>id</th><th>message</th></tr>"
    ]
    esc = html.escape
    for ident, message in rows:
        parts.append("<tr><td>%d</td><td>%s</td></tr>" % (ident, esc(message)))
    parts.append("</table></body></html>")
    return "".join(parts).encode("utf-8")


_local = threading.local()


def _sqlite_path(url):
    # sqlite:////abs/path.db -> /abs/path.db
    return url[len("sqlite:///") :]


def _connect_sync(url):
    if url.startswith("sqlite:"):
        import sqlite3

        return sqlite3.connect(_sqlite_path(url), check_same_thread=False)
    from urllib.parse import unquote, urlsplit

    import pg8000.native

    parts = urlsplit(url)
    return pg8000.native.Connection(
        user=unquote(parts.username or "postgres"),
        password=unquote(parts.password) if parts.password else None,
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 5432,
        database=parts.path.lstrip("/") or None,
    )


def fortune_rows():
    """The fortune rows with a synchronous client: pg8000 (pure Python) or sqlite3.

    One connection per thread (greenlet, under gevent/eventlet monkey-patching).
    """
    url = _db_url()
    conn = getattr(_local, "db", None)
    if conn is None:
        conn = _connect_sync(url)
        _local.db = conn
    try:
        if url.startswith("sqlite:"):
            return conn.execute(FORTUNE_SQL).fetchall()
        return conn.run(FORTUNE_SQL)
    except Exception:
        _local.db = None
        try:
            conn.close()
        except Exception:
            pass
        raise


def fortunes_page():
    return render_fortunes(fortune_rows())


class _AsyncPool:
    """A tiny pool of psycopg AsyncConnections bound to one event loop.

    At most ``size`` connections; a broken connection returns its slot as ``None`` so the
    next user opens a fresh one.
    """

    def __init__(self, url, size):
        self.url = url
        self.size = max(1, size)
        self.created = 0
        self.queue = asyncio.Queue()

    async def _connect(self):
        import psycopg

        return await psycopg.AsyncConnection.connect(self.url, autocommit=True)

    async def get(self):
        if self.queue.empty() and self.created < self.size:
            self.created += 1
            conn = None
        else:
            conn = await self.queue.get()
        if conn is None:
            try:
                conn = await self._connect()
            except Exception:
                self.queue.put_nowait(None)
                raise
        return conn

    def put(self, conn):
        self.queue.put_nowait(conn)


_async_pools = weakref.WeakKeyDictionary()


def async_pg_driver():
    """How async apps reach PostgreSQL: ``"psycopg"`` (async client) or ``"pg8000-thread"``.

    psycopg 3's async client is used where it is installed (CPython); on PyPy its ctypes libpq
    binding fails, so the sync pg8000 client runs in the event loop's thread pool instead.
    ``PWB_PG_ASYNC_DRIVER`` forces one of the two.
    """
    forced = os.environ.get("PWB_PG_ASYNC_DRIVER")
    if forced in ("psycopg", "pg8000-thread"):
        return forced
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "pg8000-thread"
    return "psycopg"


async def fortune_rows_async():
    """The fortune rows from async code: psycopg async, pg8000 in a thread, or sqlite3.

    SQLite (the fallback) is read with a short blocking call: the stdlib has no async driver.
    """
    url = _db_url()
    if url.startswith("sqlite:"):
        return fortune_rows()
    loop = asyncio.get_running_loop()
    if async_pg_driver() == "pg8000-thread":
        return await loop.run_in_executor(None, fortune_rows)
    pool = _async_pools.get(loop)
    if pool is None:
        pool = _AsyncPool(url, int(os.environ.get("PWB_DB_POOL", "8")))
        _async_pools[loop] = pool
    conn = await pool.get()
    try:
        cur = await conn.execute(FORTUNE_SQL)
        return await cur.fetchall()
    except Exception:
        try:
            await conn.close()
        except Exception:
            pass
        conn = None
        raise
    finally:
        pool.put(conn)


async def fortunes_page_async():
    return render_fortunes(await fortune_rows_async())


# ---------------------------------------------------------------- native servers' command line


def native_args(argv=None, description="pywebbench native app"):
    """Parse ``--host H --port P --workers W --threads T`` for the native app modules."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind")
    parser.add_argument("--port", type=int, required=True, help="TCP port to listen on")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (>= 1)")
    parser.add_argument("--threads", type=int, default=1, help="threads per worker (>= 1)")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be >= 1")
    if args.threads < 1:
        parser.error("--threads must be >= 1")
    if args.host not in ("127.0.0.1", "::1", "localhost") and not args.host.startswith("127."):
        parser.error("--host must be a loopback address, got %r" % args.host)
    return args


async def echo_websocket(websocket):
    """ws-echo on a Starlette WebSocket (starlette, and fastapi, whose WebSocket it is):
    accept, then send every message back as it came (bytes or text) until the client goes."""
    await websocket.accept()
    while True:
        message = await websocket.receive()
        if message["type"] != "websocket.receive":
            return  # websocket.disconnect
        if message.get("bytes") is not None:
            await websocket.send_bytes(message["bytes"])
        else:
            await websocket.send_text(message.get("text") or "")


def fork_workers(workers):
    """Fork ``workers - 1`` children after the listening socket exists; returns True in a child.

    Children share the parent's process group, so stopping the group stops them all; each
    child exits when its parent dies (checked by the caller's server loop via ``os.getppid``).
    """
    for _ in range(workers - 1):
        pid = os.fork()
        if pid == 0:
            return True
    return False


# ---------------------------------------------------------------- runtime facts (the GIL)

RUNTIME_CHECK_S = 1.0


def gil_enabled():
    """Whether this process runs with the GIL: ``sys._is_gil_enabled()`` on CPython 3.13+ (a
    free-threaded build may run with it on: ``PYTHON_GIL=1``, or a C extension without
    free-threading support imported); always True before 3.13 and on PyPy."""
    probe = getattr(sys, "_is_gil_enabled", None)
    return bool(probe()) if probe is not None else True


def _write_runtime(path, state):
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(json.dumps({"pid": os.getpid(), "gil_enabled": state}))
        os.replace(tmp, path)
    except OSError:
        pass  # a missing report only leaves the replicate's GIL state unknown


def _report_runtime(directory):
    """Write this process's GIL state now, then, while it is off, again each second if it
    changes (an extension imported at the first request can turn it on for good)."""
    path = os.path.join(directory, "%d.json" % os.getpid())
    state = gil_enabled()
    _write_runtime(path, state)
    while not state:
        time.sleep(RUNTIME_CHECK_S)
        state = gil_enabled()
        if state:
            _write_runtime(path, state)


def start_runtime_report():
    """Report the GIL state of this process (and of processes forked from it) into
    ``PWB_RUNTIME_DIR`` if set; a daemon thread only on a free-threaded build."""
    directory = os.environ.get("PWB_RUNTIME_DIR")
    if not directory or not os.path.isdir(directory):
        return
    if gil_enabled():
        _report_runtime(directory)  # it cannot turn off again: one write
        return
    threading.Thread(target=_report_runtime, args=(directory,), daemon=True).start()


start_runtime_report()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=start_runtime_report)
