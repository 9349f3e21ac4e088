"""Where the time goes (``run --flamegraph``, docs/flamegraphs.md), on real stacks:

- the cpu workload (recursive fib) on gunicorn-sync: the worker's CPU is inside fib, the
  breakdown gives it to the app, and the report draws the flame graph (headless Chromium);
- granian (a Rust server): its own threads run no Python, py-spy cannot see them, and the
  breakdown accounts for them as *native, unsampled*;
- ``compare`` of cpu n=20 against n=22: fib is the function that grew, by fib's call-count
  ratio, and the CPU per request tracks the inverse throughput ratio.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pwbtest import command, planned
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.compare.cells import cell_figures
from pywebbench.compare.match import Pair
from pywebbench.compare.verdict import compare_pair
from pywebbench.export.csv import export_csv
from pywebbench.meter.breakdown import (
    breakdown,
    cpu_at_one_speed,
    growth,
    probed,
    split_thread,
    stack_seconds,
    tree_cpu_per_request,
    waiting,
)
from pywebbench.meter.core_speed import study_scaling
from pywebbench.meter.flame import FlameWindow
from pywebbench.report import generate
from pywebbench.report.flame import flame_points
from pywebbench.run.runner import run_study
from pywebbench.store import Store
from pywebbench.study.config import resolve
from report_browser import open_report, screenshot

CPYTHON = default_interpreters()[0].name
# fib(n) makes F(n+1)*2-1 calls: fib(22) / fib(20) = 57,313 / 21,891 = 2.618
FIB_CALLS = {20: 21_891, 22: 57_313, 25: 242_785}


def _study(
    store: Path,
    server: str,
    workload: str,
    n: int | None,
    replicates: int,
    python: str = CPYTHON,
    window_s: float = 1.0,
) -> str:
    config = resolve(
        {
            "matrix": {
                "interpreters": [python],
                "servers": [server],
                "frameworks": ["raw-wsgi"],
                "workloads": [workload],
                **({"workload_params": {"cpu": {"n": n}}} if n is not None else {}),
            },
            "load": {
                "connections": [4],
                "duration_s": 1.0,
                "warmup": "fixed",
                "warmup_duration_s": 0.5,
                "replicates": replicates,
                "max_replicates": replicates,
                "flamegraph": True,
                "flamegraph_duration_s": window_s,
                # tests of function: no re-measures when the other pytest worker is on the
                # cores (tests/pwbtest.py's _quiet_guard)
                "interference_max": 2.0,
            },
            "report": False,
        }
    )
    with Store(store) as st:
        outcome = run_study(config, planned(config), st, results_dir=store.parent)
    assert outcome.status == "completed", outcome
    return outcome.run_id


def _windows(store: Path, run_id: str) -> list[FlameWindow]:
    with Store(store, create=False) as st:
        study = st.load_study([run_id])
    docs = [r.flame for r in study.replicates]
    assert docs and all("error" not in d for d in docs), docs
    windows = [FlameWindow.from_dict(d) for d in docs]
    # the core's speed over each window, probed beside it (compare puts CPU times at one speed)
    assert all(w.core_rate and w.core_rate > 0 for w in windows), [w.core_rate for w in windows]
    return windows


@pytest.fixture(scope="module")
def studies(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("flame")
    store = root / "pywebbench.sqlite"
    return {
        "store": store,
        # 4 s: ~380 samples of the worker at 100 Hz, see the fib share's test
        "fib25": _study(store, "gunicorn-sync", "cpu", 25, 1, window_s=4.0),
        "granian": _study(store, "granian-wsgi", "hello", None, 1, window_s=2.0),
        "pypy": _study(store, "gunicorn-sync", "cpu", 25, 1, python="pypy3.9", window_s=2.0),
        # 3 replicates a side: Welch's t on 2 has one degree of freedom (an interval of +-12 sd);
        # 1-s windows: fib's count of calls is what compare reads from them (its test)
        "fib20": _study(store, "gunicorn-sync", "cpu", 20, 3),
        "fib22": _study(store, "gunicorn-sync", "cpu", 22, 3),
    }


def _worker(window: FlameWindow) -> FlameWindow:
    """``window`` with the worker's stacks only (nested under the master's process frame)."""
    worker = {s: n for s, n in window.stacks.items() if s.count("process ") >= 2}
    assert worker, "no stack of the worker was sampled"
    return FlameWindow(**{**window.to_dict(), "stacks": worker})


def _share_in(window: FlameWindow, function: str) -> float:
    """Of ``window``'s sampled CPU, the share inside ``function``."""
    inside = total = 0.0
    for frames, secs in stack_seconds(window):
        total += secs
        if any(f.startswith(f"{function} (") for f in frames):
            inside += secs
    return inside / total


def test_the_cpu_workload_is_inside_fib_and_the_report_draws_it(
    studies: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    """The shares are proportions of samples, each thread's CPU shared among its stacks by
    their samples (meter/breakdown.py): steal stops the sampler and fib alike and biases no
    proportion, and the core's speed scales every stack of a thread alike. So each level is
    a binomial question on the worker's samples, n >= 100 of the 4-s window's ~400 at 100 Hz
    (asserted: losing 3/4 of them takes py-spy held for 3/4 of the window, where 50% steal
    in slices of milliseconds holds it for at most half; a run read 402). P(Bin(100, p) <
    level) at the levels below is under 1e-8: far below 1 in 10,000."""
    [window] = _windows(studies["store"], studies["fib25"])
    worker = _worker(window)
    assert worker.samples >= 100, worker.samples
    # The time is inside fib. How much of it (at least 90%, the acceptance) is an accuracy:
    # quiet runs of benchmarks/flame_check.py read 92.8-97.2%, the benchmark checks it.
    # Here 75%: P(Bin(100, 0.928) < 75) = 6.9e-9.
    assert _share_in(worker, "fib") >= 0.75, _share_in(worker, "fib")
    # fib is the catalogue app's (inside/apps/pwb_common.py): the app's share of the tree is
    # the worker's share of the tree's CPU (98.6% and 99.2% in two runs: the arbiter used
    # 0.01-0.03 s of the window; at least 97% while the worker gets a quarter of a core)
    # times the worker's samples with an app frame at their leaf (94% and 93%, the rest
    # interpreter and libc frames under fib, as --native shows them). 70% needs that
    # fraction under 73%: P(Bin(100, 0.93) < 73) = 1.5e-10.
    b = breakdown([window])
    assert b.shares["app"] >= 0.70, b
    assert sum(b.shares.values()) == pytest.approx(1.0)
    paths = generate(studies["store"], [studies["fib25"]], tmp_path)
    md = paths.markdown.read_text()
    assert "## Where the time goes" in md and "gunicorn-sync" in md
    page, events = open_report(browser, paths.html)
    try:
        page.click("a[href='#flame']")
        plot = page.locator("#flame .plot.flame-graph").first
        plot.wait_for(state="attached")
        page.wait_for_function(
            "document.querySelector('#flame .plot.flame-graph .main-svg') !== null",
            timeout=20_000,
        )
        labels = page.evaluate(
            "Array.from(document.querySelectorAll('#flame .flame-graph text.slicetext'))"
            ".map(t => t.textContent)"
        )
        screenshot(page, "flame-fib25")
    finally:
        page.close()
    assert any("fib" in label for label in labels), labels[:20]
    assert not events.page_errors and not events.console_errors and not events.requests


def test_a_rust_servers_own_threads_are_native_unsampled(studies: dict[str, Any]) -> None:
    """granian's Rust threads have CPU and no sample: the breakdown gives exactly their CPU to
    *native, unsampled* (checked against the window's per-thread CPU). Its level, over 20%,
    is a ratio of CPU seconds of threads serving the same requests on the same pinned core:
    steal and the core's speed move them alike; two runs read 73.4% and 73.5%, 3.7x over the
    bound (a factor the host's worst, 2.9x, does not reach even on one thread alone). The
    app's share is a proportion of the samples of the Python thread (1 of 135 and 1 of 166
    in two runs): over half the tree needs over half of them in the app,
    P(Bin(20, 0.05) >= 10) = 1.1e-8 with at least 20 samples (asserted; 2 s at 100 Hz) and a
    true 5% (over five times the runs')."""
    [window] = _windows(studies["store"], studies["granian"])
    b = breakdown([window])
    sampled = {split_thread(stack)[0] for stack in window.stacks}
    rust_s = sum(cpu for tid, cpu in window.thread_cpu_s.items() if tid not in sampled)
    total_s = sum(secs for _, secs in stack_seconds(window)) + rust_s
    assert rust_s > 0 and b.shares["native, unsampled"] == pytest.approx(rust_s / total_s)
    assert b.shares["native, unsampled"] > 0.2, b
    working = [n for stack, n in window.stacks.items() if not waiting(stack.split(";")[-1])]
    assert sum(working) >= 20, window.stacks
    outside_app = 1.0 - b.shares["app"]
    assert outside_app > 0.5, b  # hello does next to nothing in the app
    with Store(studies["store"], create=False) as store:
        rows = list(
            csv.DictReader(io.StringIO(export_csv(store, [studies["granian"]], "breakdown")))
        )
    [row] = rows
    assert row["stack"].endswith("granian-wsgi/raw-wsgi") and row["workload"] == "hello"
    assert float(row["native, unsampled"]) == pytest.approx(b.shares["native, unsampled"])


def test_pypy_is_sampled_by_vmprof_from_inside_the_server(studies: dict[str, Any]) -> None:
    """vmprof, switched on in the worker by the start-up hook's signal: the time is the app's
    (fib, or the app function the JIT inlined it into), read from vmprof's own call tree.
    The app's share is a proportion of vmprof's samples of the one worker thread. vmprof's
    signal runs on the process's CPU time (ITIMER_PROF), so steal thins the samples only by
    the CPU the worker loses: two runs took 353 and 326, and fewer than the 100 asserted
    needs under a third of their CPU in the window. The runs read 79.6% and 83.1%; under
    half with a true 70% (a margin for the JIT compiling differently from run to run) has
    P(Bin(100, 0.70) < 50) = 9.0e-6, under 1 in 10,000."""
    [window] = _windows(studies["store"], studies["pypy"])
    assert window.sampler == "vmprof (PyPy)" and window.samples >= 100, window.samples
    b = breakdown([window])
    assert b.shares["app"] >= 0.5, b
    assert any("pwb_common.py" in s or "pwb_raw_wsgi.py" in s for s in window.stacks)


def test_compare_names_fib_as_what_grew(studies: dict[str, Any]) -> None:
    proc = command(
        ["compare", studies["fib20"], studies["fib22"], "--format", "json"]
        + ["--store", str(studies["store"])],
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    [cell] = json.loads(proc.stdout)["cells"]
    # (the differential is a count of work: it holds whatever the verdict on a busy machine)
    grown = cell["grown"]
    assert grown and grown[0]["function"] == "fib", grown
    ratio = grown[0]["new_s"] / grown[0]["base_s"]
    expected = FIB_CALLS[22] / FIB_CALLS[20]
    # CPU time per unit of work moves with the core's speed, which this VM's host changes
    # between levels up to 1.45x apart for seconds at a time (docs/interference.md#core-speed).
    # compare puts both sides at one core speed; with that, benchmarks/flame_check.py read
    # 3 rounds of 4 within 10% on a quiet machine (+1.6% to +10.7%): that accuracy is the
    # benchmark's. Here the bound is a factor of 2 either way: even with the correction
    # wholly wrong and the sides at the two levels, 2.618 x 1.45 = 3.8 and / 1.45 = 1.8 lie
    # inside it (stolen time is in no task's CPU time and moves neither side). It still tells
    # fib's 2.6x from no growth (1x) and from a doubled count (6.9x).
    assert expected / 2 <= ratio <= expected * 2, (ratio, expected)
    base_cpu, new_cpu = cell["cpu_per_request_s"]
    # The tree's CPU per request grows by about fib's calls: less for the request's own
    # handling (a connection accepted and closed per request on gunicorn-sync), which does not
    # grow (a quiet-machine run measured 2.79x); the core's two levels bound it as above.
    assert 1.2 <= new_cpu / base_cpu <= 2 * expected, (new_cpu, base_cpu)
    # CPU per request is read in the iterations req/s come from, at the same core speed, so
    # that on each side CPU per request times req/s is the share of a core the server used.
    # Read from the sampled windows (py-spy attached) it was not: a quiet suite run read 2.50x
    # CPU per request against 1.51x inverse throughput. Checked exactly, on the figures: the
    # product of the two medians is not the median share (the medians may come from different
    # iterations: a run read them 10.3% apart), but each iteration's product is.
    with Store(studies["store"], create=False) as st:
        base, new = st.load_study([studies["fib20"]]), st.load_study([studies["fib22"]])
    speed = study_scaling(base, new)
    for study, cpu_s, rps in (
        (base, base_cpu, cell["rps"]["base_median"]),
        (new, new_cpu, cell["rps"]["new_median"]),
    ):
        measured = [i for i in study.iterations if i.kind == "measured" and not i.interrupted]
        costed = [i for i in measured if i.cpu_s is not None and i.requests > 0]
        assert len(costed) == len(measured) > 0, study.iterations
        cpus, rpss = speed.cpu_per_request(costed), speed.rps(costed)
        assert cpu_s == pytest.approx(statistics.median(cpus), rel=1e-9)
        assert rps == pytest.approx(statistics.median(rpss), rel=1e-9)
        for it, c, r in zip(costed, cpus, rpss, strict=True):
            assert c * r == pytest.approx(float(it.cpu_s or 0) / it.requests * it.rps, rel=1e-9)
    html = command(
        ["compare", studies["fib20"], studies["fib22"], "--format", "html"]
        + ["--store", str(studies["store"])],
        timeout=120,
    )
    assert html.returncode == 0, html.stderr
    if cell["verdict"] == "slower":  # the flame graph of the change, for a significant one
        assert 'id="flame-diff"' in html.stdout and "fib" in html.stdout


def _on_a_slower_core(window: FlameWindow, slowdown: float) -> FlameWindow:
    """``window`` as if its core had done ``1/slowdown`` of the work per CPU-second: the
    same samples, ``slowdown`` times the CPU time, the probe's rate ``1/slowdown``."""
    assert window.core_rate
    return FlameWindow(
        **{
            **window.to_dict(),
            "thread_cpu_s": {t: c * slowdown for t, c in window.thread_cpu_s.items()},
            "tree_cpu_s": window.tree_cpu_s * slowdown,
            "tree_system_s": window.tree_system_s * slowdown,
            "core_rate": window.core_rate / slowdown,
        }
    )


def test_cpu_times_are_put_at_one_core_speed() -> None:
    work = FlameWindow(
        stacks={"thread (1): main;fib (app.py:3)": 100},
        thread_cpu_s={"1": 1.0},
        rate_hz=100,
        duration_s=1.0,
        requests=100,
        tree_cpu_s=1.0,
        tree_system_s=0.1,
        sampler="test",
        core_rate=1000.0,
    )
    slow = _on_a_slower_core(work, 1.45)  # the VM's two core speeds, docs/interference.md
    raw = growth([work], [slow])
    assert raw[0].function == "fib" and raw[0].ratio == pytest.approx(1.45)
    fast_s, slow_s = cpu_at_one_speed([work, slow], reference=1000.0)
    assert growth([fast_s], [slow_s])[0].ratio == pytest.approx(1.0)
    assert tree_cpu_per_request([slow_s]) == pytest.approx(tree_cpu_per_request([fast_s]))
    assert tree_cpu_per_request([fast_s]) == pytest.approx(0.01)  # at the reference: as is
    # with the elasticity req/s are scaled with (CPython cpu: 1.25, docs/interference.md)
    _, slow_e = cpu_at_one_speed([work, slow], reference=1000.0, elasticity=1.25)
    assert slow_e.tree_cpu_s == pytest.approx(1.45 * (1 / 1.45) ** 1.25)
    # all or nothing: callers scale only when every window has its rate
    unprobed = FlameWindow(**{**slow.to_dict(), "core_rate": None})
    assert probed([work, slow]) and not probed([work, unprobed]) and not probed([])


def test_compare_reads_both_sides_at_one_core_speed(studies: dict[str, Any]) -> None:
    """The same cell compared with itself, its NEW side as if sampled on a core 1.45x slower:
    raw CPU times would say everything grew 1.45x; at one speed nothing did."""
    with Store(studies["store"], create=False) as st:
        study = st.load_study([studies["fib20"]])
    [cell] = cell_figures(study, study_scaling(study))
    assert cell.speed_reference, "the study's req/s were put at one core speed"
    # elasticity 1: a slowdown of CPU time by exactly the core's is undone exactly
    cell = replace(cell, elasticity=1.0)
    slower = [_on_a_slower_core(w, 1.45) for w in cell.flames]
    out = compare_pair(Pair(base=cell, new=replace(cell, flames=slower)))
    assert out.cpu_at_one_speed and out.flames is not None
    assert out.flames[1][0].tree_cpu_s != slower[0].tree_cpu_s  # what the diff graph draws
    base_cpu, new_cpu = (tree_cpu_per_request(side) for side in out.flames)
    assert base_cpu and new_cpu and new_cpu / base_cpu == pytest.approx(1.0, rel=1e-6)
    assert out.grown and all(g.ratio == pytest.approx(1.0, rel=1e-6) for g in out.grown if g.ratio)


def test_the_report_puts_windows_at_the_core_speed_of_its_req_s(studies: dict[str, Any]) -> None:
    with Store(studies["store"], create=False) as st:
        study = st.load_study([studies["fib20"]])
    speed = study_scaling(study)
    assert speed.reference
    [raw] = flame_points(study)
    [scaled] = flame_points(study, speed)
    [cell] = study.cells
    beta = speed.elasticity_of(cell.id)
    for r, s in zip(raw.windows, scaled.windows, strict=True):
        assert r.core_rate
        assert s.tree_cpu_s == pytest.approx(r.tree_cpu_s * (r.core_rate / speed.reference) ** beta)
