"""Study configuration: profiles, TOML validation naming the key, CLI exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pywebbench.study.config import PROFILES, ConfigError, json_schema, load_toml, resolve

PYWEBBENCH = [str(Path(sys.executable).parent / "pywebbench")]


def test_profiles_resolve() -> None:
    for name in PROFILES:
        cfg = resolve(profile=name)
        assert cfg.profile == name
    quick = resolve()
    assert quick.profile == "quick"
    assert len(quick.matrix.servers) >= 4 and len(quick.matrix.frameworks) >= 3
    assert quick.matrix.workloads == ["hello", "cpu"]  # a stack's overhead, then compute
    # a fresh server for every replicate of every cell: what a PyPy server served first
    # decides where its JIT settles (docs/steady-state.md#no-order-effects)
    assert quick.load.server_scope == "cell"
    assert quick.workers_threads("gunicorn-gthread") == [(1, 4)]
    assert quick.workers_threads("granian-wsgi") == [(1, 1)]


def test_a_given_replicates_count_goes_for_every_interpreter_unless_pypys_is_given() -> None:
    """The quick profile starts 4 processes a CPython stack and 3 a PyPy one; a file or a flag
    that gives ``replicates`` alone gives that count to PyPy's stacks too (``--replicates 1``
    is one process a stack), and ``jit_replicates`` given above it still counts."""
    quick = resolve().load
    assert (quick.replicates_for(False), quick.replicates_for(True)) == (4, 3)
    versions = resolve(profile="versions").load
    assert (versions.replicates_for(False), versions.replicates_for(True)) == (3, 2)
    one = resolve(None, {"load": {"replicates": 1}}).load
    assert (one.replicates_for(False), one.replicates_for(True)) == (1, 1)
    both = resolve({"load": {"replicates": 2, "jit_replicates": 5}}).load
    assert (both.replicates_for(False), both.replicates_for(True)) == (2, 5)
    flag = resolve({"load": {"replicates": 2, "jit_replicates": 5}}, {"load": {"replicates": 6}})
    assert (flag.load.replicates_for(False), flag.load.replicates_for(True)) == (6, 6)
    jit = resolve(None, {"load": {"jit_replicates": 4}}).load
    assert (jit.replicates_for(False), jit.replicates_for(True)) == (4, 4)


def test_file_then_overrides() -> None:
    cfg = resolve(
        {"load": {"duration_s": 7, "connections": [1, 16]}, "matrix": {"servers": ["a"]}},
        {"load": {"connections": [64]}},
    )
    assert cfg.load.duration_s == 7
    assert cfg.load.connections == [64]
    assert cfg.matrix.servers == ["a"]
    assert cfg.load.warmup_cap_s == 15  # from the quick profile (the model says 20)
    # a study reads what wrk reads: epoll unless asked (docs/measurements.md, issue 63)
    assert cfg.load.io == "epoll"
    assert resolve({"load": {"io": "uring"}}, {}).load.io == "uring"


def test_a_jit_interpreter_warms_up_to_its_own_cap() -> None:
    """PyPy's JIT keeps raising a ramp past CPython's cap: its warm-up has its own, and the
    deep mode's series length overrides both."""
    from pywebbench.run.measure import steady_rule

    cfg = resolve({}, {})
    assert (cfg.load.warmup_cap_s, cfg.load.jit_warmup_cap_s) == (15, 30)  # quick
    assert steady_rule(cfg).cap_s == 15 and steady_rule(cfg).min_requests == 0
    assert steady_rule(cfg, jit=True).cap_s == 30
    assert steady_rule(cfg, jit=True).min_requests == cfg.load.jit_min_requests
    assert cfg.load.window_s()[1] == 30 + cfg.load.duration_s  # the ETA's most
    deep = resolve({"load": {"warmup": "deep", "deep_s": 60}}, {})
    assert steady_rule(deep, jit=True).cap_s == steady_rule(deep).cap_s == 60


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"load": {"concurency": [1]}}, "load.concurency: unknown key"),
        ({"load": {"connections": [0]}}, "load.connections"),
        ({"load": {"concurrency": [64]}}, "now called 'connections'"),
        ({"load": {"duration_s": "long"}}, "load.duration_s"),
        ({"matrix": {"server_settings": {"x": {"workers": [0]}}}}, "server_settings.x.workers"),
        ({"app": {"app": "nocolon"}}, "app.app"),
        ({"bogus": 1}, "bogus: unknown key"),
        ({"cpus": {"server": [0], "generator": [0]}}, "disjoint"),
        ({"load": {"model": "open"}}, "load.rates"),
    ],
)
def test_errors_name_the_key(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        resolve(data)


def test_bad_toml_file(tmp_path: Path) -> None:
    bad = tmp_path / "pywebbench.toml"
    bad.write_text("[load\nx=")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_toml(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_toml(tmp_path / "missing.toml")


def test_schema_in_docs_is_current() -> None:
    doc = Path(__file__).parents[2] / "docs" / "pywebbench.schema.json"
    assert json.loads(doc.read_text()) == json_schema(), (
        "regenerate: python -m pywebbench.study.config --schema > docs/pywebbench.schema.json"
    )


def test_cli_unknown_key_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "pywebbench.toml").write_text("[load]\nduraton_s = 3\n")
    proc = subprocess.run(
        [*PYWEBBENCH, "run", "--results-dir", str(tmp_path / "res")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert "load.duraton_s: unknown key" in proc.stderr
    assert not (tmp_path / "res").exists()
    proc = subprocess.run(
        [*PYWEBBENCH, "run", "-c", "many", "--results-dir", str(tmp_path / "res")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--connections 'many'" in proc.stderr


def test_a_run_stored_before_the_design_key_resumes_in_sequence() -> None:
    """Interleaved is the default of a new study; a run stored before ``load.design`` was
    written was measured in sequence, and ``--resume`` goes on so."""
    from pywebbench.study.config import stored

    old = resolve().model_dump(mode="json")
    del old["load"]["design"]
    assert stored(old).load.design == "sequential"
    assert "design" not in old["load"]  # the stored document is left as it was
    now = resolve(profile="standard").model_dump(mode="json")
    assert stored(now).load.design == "interleaved"
