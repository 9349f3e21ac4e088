"""What the four gunicorn adapters share: the command line and the pins."""

from __future__ import annotations

from typing import ClassVar

from pywebbench.catalogue.base import LaunchCommand, LaunchContext
from pywebbench.catalogue.servers._base import (
    KEEPALIVE_S,
    BaseAdapter,
    backlog,
    listen_address,
)

GUNICORN_PINS: dict[str, tuple[str, ...]] = {
    "modern": ("gunicorn==27.0.1",),
    "py39": ("gunicorn==23.0.0",),
}
#: Seconds a worker gets to finish its requests after SIGTERM (below the stop timeout).
GRACEFUL_TIMEOUT_S = 3


class GunicornBase(BaseAdapter):
    """gunicorn's arbiter with one worker class. Access log off (gunicorn's default),
    errors to stderr at warning level, keep-alive 5 s, backlog 2048, TCP_NODELAY on the
    listening socket (gunicorn sets it; accepted connections inherit it)."""

    worker_class: ClassVar[str]
    max_requests_flag = "--max-requests"
    unix_bind = "--bind unix:PATH"

    def max_requests_args(self, ctx: LaunchContext) -> list[str]:
        """``--max-requests N`` with no jitter: every worker recycles after exactly N
        requests, so the cost per request is the same in every replicate."""
        args = super().max_requests_args(ctx)
        return [*args, "--max-requests-jitter", "0"] if args else []

    def gunicorn_args(self, ctx: LaunchContext) -> list[str]:
        """Worker-class specific arguments (threads, connections...)."""
        return []

    def command(self, ctx: LaunchContext) -> LaunchCommand:
        argv = [
            str(ctx.bin / "gunicorn"),
            "--bind",
            listen_address(ctx),
            "--workers",
            str(ctx.workers),
            "--worker-class",
            self.worker_class,
            *self.gunicorn_args(ctx),
            *self.max_requests_args(ctx),
            "--backlog",
            str(backlog()),
            "--keep-alive",
            str(KEEPALIVE_S),
            "--graceful-timeout",
            str(GRACEFUL_TIMEOUT_S),
            "--log-level",
            "warning",
            "--error-logfile",
            "-",
        ]
        if ctx.interpreter.generation == "modern":
            # gunicorn >= 24 opens a control socket in the working directory by default.
            argv.append("--no-control-socket")
        argv.append(ctx.app)
        return LaunchCommand(argv)
