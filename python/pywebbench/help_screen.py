"""Help that fits a screen and teaches by example; every option on demand (issue 66).

``--help`` prints the first paragraph of a command's description, its most used options
(``common``; every option when the command names none) and its examples, as ``hyperfine
--help`` and ``oha --help`` do. ``--help-all`` prints all of it: every paragraph, every option,
the epilog and the examples. Commands take it with ``@click.command(..., cls=OneScreen,
common=(...), examples=...)``; the ``pywebbench`` group mixes in the same behaviour.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import click

#: ``ctx.meta`` key set while ``--help-all`` prints.
_ALL = "pywebbench.help_all"


def _print_all(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    ctx.meta[_ALL] = True
    click.echo(ctx.get_help(), color=ctx.color)
    ctx.exit()


class ScreenHelp(click.Command):
    """The ``--help`` / ``--help-all`` behaviour of a command; a group takes it as a mixin
    (``class G(ScreenHelp, click.Group)``).

    ``common``: the flags ``--help`` lists, most used first (None: every option).
    ``examples``: command lines, one a line (``# comment`` after one is fine), shown under
    "Examples:" by both forms; each must parse (tests/commands/test_help_screens.py).
    """

    def __init__(
        self,
        *args: Any,
        common: Sequence[str] | None = None,
        examples: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.common = tuple(common) if common is not None else None
        self.examples = inspect.cleandoc(examples) if examples else ""
        self._help_all = click.Option(
            ["--help-all"],
            is_flag=True,
            expose_value=False,
            is_eager=True,
            callback=_print_all,
            help="Show every option and the full description, and exit.",
        )
        if self.common is not None:
            known = {opt for p in self.params for opt in p.opts}
            unknown = [flag for flag in self.common if flag not in known]
            if unknown:
                raise ValueError(f"common options that {self.name} does not have: {unknown}")

    # -- what click calls ---------------------------------------------------------------------

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return [*super().get_params(ctx), self._help_all]

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self.format_usage(ctx, formatter)
        self.format_help_text(ctx, formatter)
        self.format_arguments(ctx, formatter)
        self.format_options(ctx, formatter)
        if ctx.meta.get(_ALL):
            self.format_epilog(ctx, formatter)
        self._format_examples(formatter)

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if ctx.meta.get(_ALL) or not self.help:
            super().format_help_text(ctx, formatter)
            return
        first = inspect.cleandoc(self.help).partition("\f")[0].split("\n\n")[0]
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(first)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        if ctx.meta.get(_ALL) or self.common is None:
            super().format_options(ctx, formatter)
            return
        params = {opt: p for p in self.get_params(ctx) for opt in p.opts}
        shown = [params[flag] for flag in self.common]
        shown += [p for p in (self.get_help_option(ctx), self._help_all) if p is not None]
        options = [
            p
            for p in dict.fromkeys(params.values())
            if isinstance(p, click.Option) and not p.hidden
        ]
        records = [r for p in dict.fromkeys(shown) if (r := p.get_help_record(ctx)) is not None]
        heading = f"Options (the most used {len(self.common)} of {len(options)}; all: --help-all)"
        with formatter.section(heading):
            formatter.write_dl(records)

    def _format_examples(self, formatter: click.HelpFormatter) -> None:
        if not self.examples:
            return
        with formatter.section("Examples"):
            for line in self.examples.splitlines():
                formatter.write(f"{'':>{formatter.current_indent}}{line}\n" if line else "\n")


class OneScreen(ScreenHelp):
    """A command whose ``--help`` fits a screen; ``--help-all`` shows every option."""


class ScreenGroup(ScreenHelp, click.Group):
    """A group whose ``--help`` fits a screen and shows examples."""
