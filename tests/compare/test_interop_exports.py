"""pyperf and HdrHistogram exports of real runs, read back by those projects' own code."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from compare_study import STACK, StoredRuns, pwb
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader
from pywebbench.load.histogram import Histogram
from pywebbench.store import Store


def pyperf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyperf", *args], capture_output=True, text=True, timeout=60
    )


def nearest_rank(hist: HdrHistogram, q: float) -> int:
    """The value at quantile ``q`` by the load engine's rule (the smallest recorded value
    with at least ceil(q x count) values at or below it), from ``hdrh``'s decoded buckets.

    ``hdrh``'s own ``get_value_at_percentile`` rounds the rank to the nearest count
    instead, which can pick the neighbouring bucket in a small histogram; the buckets,
    which this compares, are what must survive the round trip.
    """
    rank = max(1, math.ceil(q * hist.get_total_count() - 1e-9))
    seen = 0
    for bucket in hist.get_recorded_iterator():
        seen += bucket.count_at_value_iterated_to
        if seen >= rank:
            return int(bucket.value_iterated_to)
    return 0


def test_pyperf_reads_the_export_and_agrees_in_direction(
    stored_runs: StoredRuns, tmp_path: Path
) -> None:
    files = {}
    for name in ("a1", "slow"):
        path = tmp_path / f"{name}.json"
        proc = pwb(
            "export",
            getattr(stored_runs, name),
            "--format",
            "pyperf",
            "-o",
            str(path),
            "--store",
            str(stored_runs.store),
        )
        assert proc.returncode == 0, proc.stderr
        files[name] = str(path)
    doc = json.loads(Path(files["a1"]).read_text())
    bench = doc["benchmarks"][0]
    assert bench["metadata"]["name"] == f"{STACK} cpu@c8" and bench["metadata"]["unit"] == "second"
    assert len(bench["runs"]) == 3 and all(len(r["values"]) == 2 for r in bench["runs"])

    stats = pyperf("stats", files["a1"])
    assert stats.returncode == 0, stats.stderr
    assert "Number of run with values: 3" in stats.stdout
    cmp = pyperf("compare_to", files["a1"], files["slow"])
    assert cmp.returncode == 0, cmp.stderr
    ours = pwb(
        "compare",
        stored_runs.a1,
        stored_runs.slow,
        "--format",
        "json",
        "--store",
        str(stored_runs.store),
    )
    assert json.loads(ours.stdout)["cells"][0]["verdict"] == "slower"
    # pyperf: higher seconds per request = fewer requests/s = "slower".
    assert "x slower" in cmp.stdout and "faster" not in cmp.stdout, cmp.stdout

    proc = pwb(
        "export",
        stored_runs.a1,
        stored_runs.a2,
        "--format",
        "pyperf",
        "--store",
        str(stored_runs.store),
    )
    assert proc.returncode == 2 and "one run per file" in proc.stderr


def test_hlog_round_trip_gives_the_same_percentiles(
    stored_runs: StoredRuns, tmp_path: Path
) -> None:
    out = tmp_path / "hlog"
    proc = pwb(
        "export",
        stored_runs.slow,
        "--format",
        "hdr",
        "-o",
        str(out),
        "--store",
        str(stored_runs.store),
    )
    assert proc.returncode == 0, proc.stderr
    (log,) = sorted(out.glob("*.hlog"))
    assert log.name.startswith(stored_runs.slow)
    with Store(stored_runs.store, create=False) as store:
        study = store.load_study([stored_runs.slow])
    stored = [i.latency_histogram() for i in study.iterations if i.kind == "measured"]
    assert len(stored) == 3 and all(stored)  # one measured iteration in each of 3 replicates

    reader = HistogramLogReader(str(log), HdrHistogram(1, 3_600_000_000, 3))
    intervals = []
    while (h := reader.get_next_interval_histogram()) is not None:
        intervals.append(h)
    reader.close()
    assert len(intervals) == len(stored)
    merged_theirs = HdrHistogram(1, 3_600_000_000, 3)
    for h in intervals:
        merged_theirs.add(h)
    merged_ours = Histogram.merge_all([h for h in stored if h])
    summary = merged_ours.summary()
    assert merged_theirs.get_total_count() == summary.count > 0
    assert merged_theirs.get_max_value() == summary.max
    assert merged_theirs.get_min_value() == summary.min
    quantiles = [0.5, 0.9, 0.99, 0.999, 1.0]
    assert [nearest_rank(merged_theirs, q) for q in quantiles] == [
        int(v) for v in merged_ours.quantiles(quantiles)
    ]
    # Each interval too: one interval per measured iteration, in order.
    for h, enc in zip(intervals, stored, strict=True):
        ours = Histogram(enc or "")
        assert h.get_total_count() == ours.count
        assert nearest_rank(h, 0.99) == int(ours.quantile(0.99))
    first = [ln for ln in log.read_text().splitlines() if not ln.startswith(("#", '"'))][0]
    assert float(first.split(",")[2]) > 0


def test_hdr_needs_an_output_directory(stored_runs: StoredRuns) -> None:
    proc = pwb("export", "--format", "hdr", "--store", str(stored_runs.store))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--output" in proc.stderr
