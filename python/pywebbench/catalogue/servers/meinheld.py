"""meinheld (C WSGI server on picoev with greenlets; one thread per process)."""

from __future__ import annotations

from pywebbench.catalogue.base import WSGI, InstallStep, Interpreter, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter, backlog

#: Keep-alive idle timeout set by the launcher (standalone meinheld has keep-alive off).
KEEPALIVE_S = 10


class Meinheld(BaseAdapter):
    name = "meinheld"
    interface = WSGI
    description = "meinheld: picoev event loop, C HTTP parser, greenlets"
    notes = (
        "meinheld 1.0.2 (2020) pins greenlet<0.5, which does not compile on CPython >= 3.10: "
        "on CPython it is installed with --no-deps --no-build-isolation after a modern "
        "greenlet (works). Standalone meinheld logs every request and has keep-alive off: the "
        "launcher turns the access logger off and keep-alive on (10 s). Threads are ignored. "
        "On PyPy (cpyext) memory grows past 1 GB under sustained load."
    )
    pins = {
        "modern": ("greenlet==3.5.6", "setuptools==80.9.0"),
        "py39": ("greenlet==3.2.4", "setuptools==80.9.0"),
        "pypy": ("meinheld==1.0.2",),
    }
    launcher = "launch_meinheld"

    def launcher_options(self, ctx: LaunchContext) -> dict[str, object]:
        return {"--keepalive": KEEPALIVE_S}

    def extra_installs(self, interpreter: Interpreter) -> list[InstallStep]:
        if interpreter.is_pypy:
            return []
        return [InstallStep(("meinheld==1.0.2",), ("--no-deps", "--no-build-isolation"))]

    def unavailable(self, interpreter: Interpreter) -> str | None:
        major, minor = (int(x) for x in interpreter.minor.split(".")[:2])
        if not interpreter.is_pypy and (major, minor) >= (3, 13):
            return (
                "meinheld 1.0.2 compiles on CPython 3.13 but fails to import (undefined symbol "
                "Py_TRASHCAN_SAFE_BEGIN, removed from the C API)"
            )
        return super().unavailable(interpreter)

    def settings(self, ctx: LaunchContext) -> dict[str, object]:
        return self.manifest(
            ctx,
            worker_class="meinheld (pre-forked by the launcher)",
            threads_used=False,
            event_loop="picoev + greenlets",
            http_parser="http-parser (C)",
            keep_alive=f"on, {KEEPALIVE_S} s (meinheld's default is off)",
            backlog=backlog(),
        )


ADAPTER = Meinheld()
