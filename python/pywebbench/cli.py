"""Command-line entry point: ``pywebbench <command>``.

Each command lives in its own module under :mod:`pywebbench.commands` and exposes a
``click`` command named ``command``; this module only assembles them.
"""

from __future__ import annotations

import importlib
import pkgutil

import click

from pywebbench import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="pywebbench")
def cli() -> None:
    """Benchmark Python web stacks: interpreters x servers x frameworks x workloads.

    \b
    Quick start:
      pywebbench run                    the built-in quick study, ending with a report
      pywebbench load URL -c 64 -d 10   a wrk-style load test of any HTTP/1.1 server
      pywebbench stacks                 what can run on this machine, and why not
    """


def _register_commands() -> None:
    import pywebbench.commands as pkg

    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        command = getattr(module, "command", None)
        if isinstance(command, click.Command):
            cli.add_command(command)


_register_commands()


def main() -> None:
    """Console-script entry point."""
    cli()
