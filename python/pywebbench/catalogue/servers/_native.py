"""Native servers: the framework's own server, started by its app module (a file of the app
directory, ``pywebbench/inside/apps`` for the built-in ones:
``pwb_native_<name>.py --host H --port P --workers W --threads T``)."""

from __future__ import annotations

from pathlib import Path

from pywebbench.catalogue.base import LaunchCommand, LaunchContext
from pywebbench.catalogue.servers._base import BaseAdapter


class NativeBase(BaseAdapter):
    """A server that is its framework: the app module is the program."""

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        module = ctx.app.split(":", 1)[0]
        script = Path(ctx.app_dir) / (module.replace(".", "/") + ".py")
        prog = [str(script)] if script.is_file() else ["-m", module]
        return LaunchCommand(
            [
                str(ctx.python),
                *prog,
                "--host",
                ctx.host,
                "--port",
                str(ctx.port),
                "--workers",
                str(ctx.workers),
                "--threads",
                str(ctx.threads),
            ]
        )
