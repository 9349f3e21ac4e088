"""Options declared once: every key of the study model has a `run` flag or says why not, every
flag sets its key, and docs/config.md's table is the model's (milliseconds: no servers)."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal

import click
import pytest
from click.testing import CliRunner
from pywebbench.commands.run import command
from pywebbench.study.config import ConfigError, resolve
from pywebbench.study.options import Option, flag_of, flagged, overrides, study_options
from pywebbench.study.options import with_docs_table as docs_with_table

DOCS = Path(__file__).parents[2] / "docs" / "config.md"
# run's own options, which are not keys of the study: where the study comes from, what to do.
COMMAND_ONLY = {"config_path", "resume", "runs", "dry_run", "help"}
# Values the validators accept for keys whose type alone does not say what is valid.
SAMPLES: dict[str, tuple[str, Any]] = {
    "load.slo": ("p99=50ms", "p99=50ms"),
    "load.faults": ("default", "default"),
    "matrix.server_options": (
        "waitress.connection_limit=100",
        {"waitress": {"connection_limit": 100}},
    ),
    "app.app": ("pkg.mod:app", "pkg.mod:app"),
    "app.paths": ("/api", ["/api"]),
    "app.project": ("x-value", "x-value"),  # given once: a string, as before it took lists
    "load.connection_mode": ("close,100", ["close", 100]),
    "load.memory_budget_mib": ("512", 512),
}


def _sample(option: Option) -> tuple[list[str], Any]:
    """Arguments that give ``option``'s flag a value other than its default, and that value
    as the key holds it."""
    assert option.flag is not None
    flag, kind = option.flag.name, option.item_type
    if option.path in SAMPLES:
        text, value = SAMPLES[option.path]
        return [flag, text], value
    if option.annotation is bool:
        return [flag], not option.default()
    if typing.get_origin(kind) is Literal:
        choices = [str(c) for c in typing.get_args(kind)]
        default = option.default()
        pick = next(c for c in reversed(choices) if c != default and [c] != default)
        return [flag, pick], [pick] if option.repeatable else pick
    if kind is int:
        return [flag, "3"], [3] if option.repeatable else 3
    if kind is float:
        return [flag, "7.5"], [7.5] if option.repeatable else 7.5
    return [flag, "x-value"], ["x-value"] if option.repeatable else "x-value"


def _parsed(args: list[str]) -> dict[str, Any]:
    ctx = command.make_context("run", args)
    return dict(ctx.params)


def _at(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data[part] if isinstance(data, dict) else getattr(data, part)
    return data


def test_every_key_has_a_flag_or_says_why_not() -> None:
    keys = study_options()
    assert len(keys) > 40
    for option in keys:
        assert (option.flag is None) != (option.file_only is None), option.path
        assert option.info.description, f"{option.path}: no description for the docs row"
    names = [o.flag.name for o in flagged() if o.flag] + [
        o.flag.short for o in flagged() if o.flag and o.flag.short
    ]
    assert len(names) == len(set(names)), "a flag declared twice"


def test_every_click_option_of_run_is_a_key_or_the_commands_own() -> None:
    dests = {p.name for p in command.params}
    assert dests - COMMAND_ONLY == {o.dest for o in flagged()}
    for param in command.params:
        if param.name not in COMMAND_ONLY:
            option = next(o for o in flagged() if o.dest == param.name)
            assert option.flag is not None and option.flag.name in param.opts
            assert param.help, option.flag.name


@pytest.mark.parametrize("option", flagged(), ids=lambda o: o.flag.name if o.flag else "")
def test_every_flag_sets_its_key(option: Option) -> None:
    args, expected = _sample(option)
    if option.path.startswith("app.") and option.path != "app.app":
        args += ["--app", "pkg.mod:app"]
    if option.path == "load.load_agents":  # more agents than connections is refused
        args += ["-c", "8"]
    if option.path == "load.streams":  # streams are for h2c cells
        args += ["--protocol", "h2c"]
    over = overrides(_parsed(args))
    assert _at(over, option.path) is not None
    profile = over.pop("profile", None)
    config = resolve({}, over, profile=profile)
    assert _at(config, option.path) == expected
    assert option.flag is not None
    for key, value in option.flag.also.items():
        table = option.path.rpartition(".")[0]
        assert _at(config, f"{table}.{key}") == value


def test_nothing_given_is_no_override() -> None:
    assert overrides(_parsed([])) == {}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-d", "-5"], "--duration: Input should be greater than 0"),
        (["-c", "8,many"], "--connections 'many': not a number"),
        (["--connection-mode", "keepalive,shut"], "--connection-mode 'shut': Input should be"),
        (["--connection-mode", "keepalive,0"], "--connection-mode: a number of requests per"),
        (["--rate", "1000:5000:10s"], "--rate: run sweeps constant rates"),
        (["--server-option", "waitress"], "--server-option 'waitress': expected SERVER."),
        (["--slo", "fast"], "--slo: 'fast' is not an SLO"),
        (["--path", "/x"], "need --app"),
        (["--expect-status", "200"], "need --app"),
    ],
)
def test_bad_values_name_the_flag(args: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        overrides(_parsed(args))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_cli_bad_value_is_one_line_and_exit_2(tmp_path: Path) -> None:
    res = CliRunner().invoke(command, ["--dry-run", "--results-dir", str(tmp_path), "-d", "0"])
    assert res.exit_code == 2
    assert res.output.strip() == "error: --duration: Input should be greater than 0"


def test_flag_of_names_the_declared_flag() -> None:
    assert flag_of("load.load_agents") == "--load-agents"
    assert flag_of("load.duration_s") == "--duration"
    assert flag_of("load.steady_window_s") == "load.steady_window_s"  # file only


def test_help_is_printed_as_written() -> None:
    text = CliRunner().invoke(command, ["--help-all"], terminal_width=100).output
    assert "%%" not in text and "95% CI" in text and "+-5%)" in text
    for option in flagged():
        assert option.flag is not None and option.flag.name in text


def test_docs_table_is_the_model() -> None:
    text = DOCS.read_text()
    assert docs_with_table(text) == text, (
        "regenerate: python -m pywebbench.study.options --docs docs/config.md"
    )
    for option in study_options():
        assert f"| `{option.path}` |" in text


def test_a_switch_and_a_choice_are_click_types() -> None:
    params = {p.name: p for p in command.params}
    assert isinstance(params["load__syscalls"], click.Option) and params["load__syscalls"].is_flag
    assert isinstance(params["load__io"].type, click.Choice)
    assert params["load__connections"].multiple


def test_load_agent_errors_are_named_by_runs_flags() -> None:
    from pywebbench.commands.run import named_by_flag
    from pywebbench.load.ray_agents import AgentsError, RayUnavailable

    assert named_by_flag(AgentsError("agents", "need 4 CPUs")) == "--load-agents: need 4 CPUs"
    assert named_by_flag(AgentsError("connections", "too few")) == "--connections: too few"
    unreachable = RayUnavailable("cannot join the Ray cluster at h:1: refused", "ray_address")
    assert named_by_flag(unreachable) == "--ray: cannot join the Ray cluster at h:1: refused"
    missing = RayUnavailable("Ray is not installed")
    assert named_by_flag(missing) == "Ray is not installed"
