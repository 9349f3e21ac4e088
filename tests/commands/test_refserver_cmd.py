"""`pywebbench refserver`'s flags are the engine's config: one flag per Rust field, each with
the Rust default (no server is started)."""

from __future__ import annotations

import dataclasses
import json

import click
from click.testing import CliRunner
from pywebbench import _engine
from pywebbench.commands.refserver import command, flag_of
from pywebbench.refserver import RefServerConfig, engine_defaults

# Fields whose flag has no fixed default: the thread count follows --cpus, and no --cpus
# means no pinning.
DERIVED = {"threads": None, "cpus": None}
COMMAND_ONLY = {"config_json", "quiet", "help"}


def _options() -> dict[str, click.Option]:
    return {
        str(p.name): p
        for p in command.params
        if isinstance(p, click.Option) and p.name not in COMMAND_ONLY
    }


def test_one_flag_per_engine_field_with_the_engines_default() -> None:
    rust = json.loads(_engine.refserver_config_defaults())
    assert engine_defaults() == rust
    options = _options()
    assert set(options) == set(rust) == {f.name for f in dataclasses.fields(RefServerConfig)}
    for name, option in options.items():
        assert flag_of(name) in option.opts
        expected = DERIVED[name] if name in DERIVED else rust[name]
        assert option.default == expected, name


def test_help_shows_the_engines_defaults() -> None:
    text = CliRunner().invoke(command, ["--help-all"], terminal_width=100).output
    rust = engine_defaults()
    assert f"default: {rust['header_timeout_ms']};" in text
    assert f"default: {rust['backlog']};" in text


def test_a_refused_value_names_the_flag() -> None:
    res = CliRunner().invoke(command, ["--stall-ms", "10"])
    assert res.exit_code == 2
    assert "--stall-every-s" in res.output
