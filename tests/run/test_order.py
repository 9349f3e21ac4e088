"""No order effects (issue: under server_scope=stack the first workload a PyPy server served
was measured colder than the next: hello 4,324 req/s, then json 10,983).

Each workload warms up until steady on its own and the order rotates across replicates, so
running the workloads as ``hello,json`` or as ``json,hello`` must give the same figures: for
every cell steady in both runs, the 99% CI of the ratio of the two runs' medians (the
interval `pywebbench compare` uses, built on replicates) contains 1.

(Asking that one run's median lie inside the other's 95% CI would fail about one time in
five for two runs of identical servers with three replicates each: a point is noisier than
an interval. The ratio's interval accounts for the noise of both runs.)
"""

from __future__ import annotations

from pathlib import Path

from pwbtest import pwb
from pywebbench.catalogue.interpreters import discover
from pywebbench.compare.ratio import ratio_of_medians
from pywebbench.store import Store

Replicates = list[list[float]]


def _cells(results: Path) -> dict[str, tuple[Replicates, bool]]:
    """workload -> (measured req/s by replicate, steady)."""
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    out = {}
    for cell in study.cells:
        assert cell.id is not None and cell.status == "ok", (cell.key, cell.failure_reason)
        by_rep: dict[int, list[float]] = {}
        for it in study.iterations_of(cell.id):
            by_rep.setdefault(it.replicate, []).append(it.rps)
        out[cell.workload] = (list(by_rep.values()), not cell.flags.get("not_steady"))
    return out


def test_swapping_the_workload_order_changes_no_steady_figure(tmp_path: Path, census: str) -> None:
    pypy = [i.name for i in discover() if i.is_pypy]
    assert pypy, "PyPy must be installed (scripts/setup.sh installs Debian's pypy3)"
    runs = {}
    for order in ("hello,json", "json,hello"):
        results = tmp_path / order.replace(",", "-")
        proc = pwb(
            "run", "--python", pypy[0], "--server", "waitress", "--framework", "raw-wsgi",
            "--workload", order, "--server-scope", "stack", "--replicates", "3",
            "--max-replicates", "1", "--iterations", "2", "-d", "2", "-c", "16", "--no-report",
            results=results, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs[order] = _cells(results)
    a, b = runs["hello,json"], runs["json,hello"]
    assert set(a) == set(b) == {"hello", "json"}
    for workload in a:
        (reps_a, steady_a), (reps_b, steady_b) = a[workload], b[workload]
        if not (steady_a and steady_b):
            continue
        ratio = ratio_of_medians(reps_a, reps_b, seed=1, level=0.99)
        assert ratio is not None
        assert ratio.low <= 1.0 <= ratio.high, (workload, ratio, reps_a, reps_b)
