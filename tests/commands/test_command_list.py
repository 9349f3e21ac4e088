"""``pywebbench``'s command list holds commands only: every module listed under
:mod:`pywebbench.commands` defines a click command, and the helpers are not listed."""

from __future__ import annotations

import click
from pywebbench.cli import cli


def test_every_listed_command_is_a_command() -> None:
    ctx = click.Context(cli)
    names = cli.list_commands(ctx)
    assert {"load", "run", "report", "refserver"} <= set(names)
    for name in names:
        assert isinstance(cli.get_command(ctx, name), click.Command), name
    assert not {"load-summary", "load-agents", "common"} & set(names)
