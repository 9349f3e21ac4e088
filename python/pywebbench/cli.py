"""Command-line entry point: ``pywebbench <command>``.

Each command lives in its own module under :mod:`pywebbench.commands` (module ``load``
defines the command ``load``) and exposes a ``click`` command named ``command``. Modules are
imported only when their command runs, so ``pywebbench load`` starts without importing the
runner, the report renderer and the rest.
"""

from __future__ import annotations

import importlib
import pkgutil

import click

from pywebbench import __version__
from pywebbench.help_screen import ScreenHelp


class CatalogueUsageError(click.ClickException):
    """A bad catalogue (e.g. a ``PYWEBBENCH_PLUGINS`` module): one line, exit status 2."""

    exit_code = 2


class _LazyGroup(ScreenHelp, click.Group):
    """A group whose subcommands are imported on first use (help: :mod:`pywebbench.help_screen`)."""

    def invoke(self, ctx: click.Context) -> object:
        from pywebbench.catalogue.registry import CatalogueError

        try:
            return super().invoke(ctx)
        except CatalogueError as exc:
            raise CatalogueUsageError(str(exc)) from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        import pywebbench.commands as pkg

        return sorted(
            info.name.replace("_", "-")
            for info in pkgutil.iter_modules(pkg.__path__)
            if not info.name.startswith("_")
        )

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.list_commands(ctx):
            return None
        module = importlib.import_module(f"pywebbench.commands.{cmd_name.replace('-', '_')}")
        command = getattr(module, "command", None)
        return command if isinstance(command, click.Command) else None


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    examples="""
    pywebbench run                                     # the quick study (~15 min), then a report
    pywebbench stacks                                  # what can run here, and why not
    pywebbench load http://127.0.0.1:8080/ -c 64 -d 10 # a wrk-style load test of any server
    pywebbench ab --app app:app --path / --base main --change HEAD  # A/B of two revisions
    pywebbench compare --latest 2                      # the newest run against the one before
    pywebbench run --help                              # a command's help; all of it: --help-all
    """,
)
@click.version_option(__version__, prog_name="pywebbench")
def cli() -> None:
    """Benchmark Python web stacks: interpreters x servers x frameworks x workloads.
    Each stack's requests/s, latency and memory, measured on pinned cores with confidence
    intervals, stored and reported; also a load test of any HTTP server, an A/B test of two
    revisions of an app, and comparisons of stored runs.
    """


def main() -> None:
    """Console-script entry point."""
    cli()
