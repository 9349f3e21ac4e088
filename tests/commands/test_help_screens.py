"""``--help`` fits a screen and teaches by example; ``--help-all`` documents every option
(issue 66). Each example the help shows parses as written (CliRunner, nothing runs)."""

from __future__ import annotations

import re
import shlex

import click
import pytest
from click.testing import CliRunner
from pywebbench.cli import cli

PROGRAM = "pywebbench"
SCREEN_LINES = 40
COLUMNS = 100


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group``, the group itself first."""
    out = [path]
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            out += _commands(command, (*path, name))
        elif command is not None:
            out.append((*path, name))
    return out


COMMANDS = _commands(cli)


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        found = command.get_command(click.Context(command), name)
        assert found is not None, path
        command = found
    return command


def _help(path: tuple[str, ...], flag: str) -> str:
    result = CliRunner().invoke(
        cli,
        [*path, flag],
        prog_name=PROGRAM,
        terminal_width=COLUMNS,
        env={"COLUMNS": str(COLUMNS)},
    )
    assert result.exit_code == 0, result.output
    return result.output


def example_lines(text: str) -> list[str]:
    """The ``pywebbench ...`` lines of the help's example blocks (a heading ending in
    "xamples:" up to a blank line), continuations joined."""
    lines: list[str] = []
    in_block = False
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("xamples:"):
            in_block = True
            continue
        if not line:
            in_block = False
            continue
        if not in_block:
            continue
        if pending:
            line = f"{pending} {line}"
        elif not line.startswith(PROGRAM + " "):
            continue
        if line.endswith("\\"):
            pending = line[:-1].rstrip()
            continue
        lines.append(line)
        pending = ""
    return lines


def _parse(line: str) -> None:
    """Parse ``line`` with the command it names, as written, without running it."""
    words = shlex.split(line, comments=True)[1:]
    command: click.Command = cli
    ctx = click.Context(cli, info_name=PROGRAM)
    while isinstance(command, click.Group):
        name = words.pop(0)
        found = command.get_command(ctx, name)
        assert found is not None, f"no command {name!r}: {line}"
        command = found
        if isinstance(command, click.Group):
            ctx = click.Context(command, info_name=name, parent=ctx)
    try:
        with command.make_context(command.name, words, parent=ctx):
            pass
    except click.exceptions.Exit as exc:  # an example of --help: parsed, then it exits
        assert exc.exit_code == 0, line
    except click.MissingParameter:
        raise
    except click.BadParameter as exc:
        # a file the example names (--body-file data.json) need not exist here
        if exc.param is None or not isinstance(exc.param.type, click.Path):
            raise


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or PROGRAM)
def test_help_fits_a_screen_and_shows_examples_that_parse(path: tuple[str, ...]) -> None:
    text = _help(path, "--help")
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= SCREEN_LINES, f"{len(lines)} lines:\n{text}"
    examples = example_lines(text)
    assert examples, f"no example line starting with {PROGRAM!r}:\n{text}"
    for line in [*examples, *example_lines(_help(path, "--help-all"))]:
        _parse(line)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or PROGRAM)
def test_help_all_documents_every_option(path: tuple[str, ...]) -> None:
    text = _help(path, "--help-all")
    command = _command(path)
    for param in command.params:
        if isinstance(param, click.Option) and not param.hidden:
            for flag in param.opts + param.secondary_opts:
                assert re.search(rf"(^|[\s,/]){re.escape(flag)}\b", text), f"{flag} missing"
    assert "--help-all" in text


def test_a_long_command_says_where_the_other_options_are() -> None:
    text = _help(("run",), "--help")
    assert "--help-all" in text.split("Options")[1].splitlines()[0]
    assert "--group-budget" not in text and "--group-budget" in _help(("run",), "--help-all")
