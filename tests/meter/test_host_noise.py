"""benchmarks/host_noise.py: the host's own speed noise, the floor under a group's slices
(docs/measurements.md, "Where the slices' noise comes from")."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import ModuleType

import pytest


def _script() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "host_noise.py"
    spec = importlib.util.spec_from_file_location("host_noise", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_spread_falls_with_longer_windows_only_for_noise_that_averages_out() -> None:
    host = _script()
    # a rate that alternates window by window averages out over two windows ...
    flicker = [90.0, 110.0] * 20
    assert host.spread(flicker) == pytest.approx(0.1013, abs=1e-3)
    assert host.spread(flicker, 2) == 0.0
    # ... one that steps every 8 windows does not, until the windows hold a step each
    steps = ([90.0] * 8 + [110.0] * 8) * 4
    assert host.spread(steps, 4) == pytest.approx(host.spread(steps), rel=0.05)
    assert math.isnan(host.spread([1.0, 2.0, 3.0], 2))
    s = host.summary("json", steps, 0.25)
    assert s["sd_longer"] == {
        "0.5s": pytest.approx(0.1016, abs=1e-3),
        "1s": pytest.approx(0.1033, abs=1e-3),
        "2s": pytest.approx(0.1069, abs=1e-3),
    }
    assert s["lowest"] == 0.9 and s["windows"] == 64
    assert "lowest window 0.9x the mean" in host.describe(s)
    assert host.correlation(steps, [2 * r for r in steps]) == pytest.approx(1.0)


def test_the_loops_run_pinned_and_give_their_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """A short run on this host: both loops on core 0, the json loop on both cores at once."""
    host = _script()
    host.main(["--seconds", "1", "--window", "0.25", "--json"])
    figures = json.loads(capsys.readouterr().out)
    for kind in ("tiny", "json"):
        assert figures[kind]["windows"] >= 4 and figures[kind]["lowest"] > 0
        assert 0 <= figures[kind]["sd"] < 1
    assert -1 <= figures["json_both_cores"]["correlation"] <= 1
    with pytest.raises(SystemExit) as bad:
        host.main(["--seconds", "1", "--window", "0.5"])
    assert bad.value.code == 2
