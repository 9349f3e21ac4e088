"""One word per idea across the commands: where results are, what a warm-up flag means, and
help texts that say what the code does (CliRunner, no servers)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pywebbench.cli import cli

# Commands that read the results store: all take the directory and the file alike.
READERS = ("report", "compare", "runs", "export", "history", "capacity")


def _flags(name: str) -> set[str]:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    return {opt for p in command.params for opt in p.opts}


@pytest.mark.parametrize("name", READERS)
def test_every_store_reader_takes_results_dir_and_store(name: str) -> None:
    assert {"--results-dir", "--store"} <= _flags(name)


def test_run_writes_into_results_dir() -> None:
    assert "--results-dir" in _flags("run")


def test_report_names_the_flag_that_points_at_no_store(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["report", "--results-dir", str(tmp_path / "none")])
    assert res.exit_code == 2 and "--results-dir" in res.output
    res = CliRunner().invoke(cli, ["report", "--store", str(tmp_path / "none.sqlite")])
    assert res.exit_code == 2 and "--store" in res.output


def test_warmup_duration_is_seconds_in_load_and_run() -> None:
    assert "--warmup-duration" in _flags("load") and "--warmup-duration" in _flags("run")
    run_help = CliRunner().invoke(cli, ["run", "--help-all"]).output
    assert "--warmup [steady|fixed|deep]" in run_help
    load_help = CliRunner().invoke(cli, ["load", "--help-all"], terminal_width=100).output
    assert "deprecated" in load_help


def test_compare_help_names_the_interval_method() -> None:
    text = CliRunner().invoke(cli, ["compare", "--help-all"], terminal_width=100).output
    assert "Welch's t" in " ".join(text.split())
