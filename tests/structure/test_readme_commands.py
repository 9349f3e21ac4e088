"""Every command the README shows works as shown (issue 66).

The README's ``sh`` blocks are extracted; ``./pwb run`` and ``./scripts/test.sh`` set up the
machine and run for minutes, so they are checked to exist and be executable. Each
``pywebbench`` line is parsed by the command it names exactly as written (every option must
exist and take the values given) without running it: a study or a load test is not safe to
run inside the suite. Each named command's ``--help`` then runs, and its ``--help-all``
documents every option the line uses.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pywebbench.cli import cli

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def shell_lines() -> list[str]:
    """The command lines of the README's ``sh`` blocks, continuations joined, comments kept
    out."""
    text = README.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                lines.append(" ".join(shlex.quote(w) for w in words))
    return lines


def test_the_readme_shows_the_two_commands_as_they_are() -> None:
    lines = shell_lines()
    assert "./pwb run" in lines and "./scripts/test.sh" in lines
    for script in ("pwb", "scripts/test.sh"):
        assert os.access(ROOT / script, os.X_OK), script
    assert len(README.read_text(encoding="utf-8")) <= 8000


@pytest.mark.parametrize("line", [x for x in shell_lines() if x.startswith("pywebbench ")])
def test_each_pywebbench_line_parses_and_its_help_runs(line: str) -> None:
    words = shlex.split(line)[1:]
    ctx = click.Context(cli)
    name = words[0]
    command = cli.get_command(ctx, name)
    assert command is not None, f"no command {name!r}: {line}"
    # Parses every option and its values as the README writes them. A value the command
    # rejects for this machine (a path a user has, such as --project ~/src/myproject) is
    # fine; an unknown option, a missing value or an extra argument is not.
    try:
        with command.make_context(name, list(words[1:]), parent=ctx):
            pass
    except click.BadParameter:
        pass
    result = CliRunner().invoke(cli, [name, "--help"])
    assert result.exit_code == 0, result.output
    every = CliRunner().invoke(cli, [name, "--help-all"])
    assert every.exit_code == 0, every.output
    for option in (w.split("=")[0] for w in words[1:] if w.startswith("-")):
        assert option in every.output, f"{option} not in `pywebbench {name} --help-all`"
