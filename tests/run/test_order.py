"""No order effects (issue: under server_scope=stack the first workload a PyPy server served
was measured colder than the next). Each workload warms up until steady on its own, and the
order rotates across replicates; so swapping the order leaves every steady cell's figure
inside the other run's CI."""

from __future__ import annotations

from pathlib import Path

from pwbtest import pwb
from pywebbench.catalogue.interpreters import discover
from pywebbench.stats import summarize
from pywebbench.store import Store


def _figures(results: Path) -> dict[str, tuple[float, float, float, bool]]:
    """workload -> (median, CI low, CI high, steady) over the measured iterations."""
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    out = {}
    for cell in study.cells:
        assert cell.id is not None and cell.status == "ok", (cell.key, cell.failure_reason)
        s = summarize([i.rps for i in study.iterations_of(cell.id)])
        out[cell.workload] = (s.median, s.ci_low, s.ci_high, not cell.flags.get("not_steady"))
    return out


def test_swapping_the_workload_order_changes_no_steady_figure(tmp_path: Path, census: str) -> None:
    pypy = [i.name for i in discover() if i.is_pypy]
    assert pypy, "PyPy must be installed (scripts/setup.sh installs Debian's pypy3)"
    runs = {}
    for order in ("hello,json", "json,hello"):
        results = tmp_path / order.replace(",", "-")
        proc = pwb(
            "run", "--python", pypy[0], "--server", "gunicorn-sync", "--framework", "raw-wsgi",
            "--workload", order, "--server-scope", "stack", "--replicates", "3",
            "--max-replicates", "1", "--iterations", "2", "-d", "2", "-c", "16", "--no-report",
            results=results, timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        runs[order] = _figures(results)
    a, b = runs["hello,json"], runs["json,hello"]
    assert set(a) == set(b) == {"hello", "json"}
    for workload in a:
        (ma, la, ha, steady_a), (mb, lb, hb, steady_b) = a[workload], b[workload]
        if steady_a and steady_b:
            assert lb <= ma <= hb and la <= mb <= ha, (workload, a[workload], b[workload])
