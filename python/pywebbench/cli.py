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


class CatalogueUsageError(click.ClickException):
    """A bad catalogue (e.g. a ``PYWEBBENCH_PLUGINS`` module): one line, exit status 2."""

    exit_code = 2


class _LazyGroup(click.Group):
    """A group whose subcommands are imported on first use."""

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
)
@click.version_option(__version__, prog_name="pywebbench")
def cli() -> None:
    """Benchmark Python web stacks: interpreters x servers x frameworks x workloads.

    \b
    Quick start:
      pywebbench run                    the built-in quick study, ending with a report
      pywebbench load URL -c 64 -d 10   a wrk-style load test of any HTTP/1.1 server
      pywebbench stacks                 what can run on this machine, and why not
    """


def main() -> None:
    """Console-script entry point."""
    cli()
