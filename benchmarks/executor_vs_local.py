"""The same small study through the local executor and through ``--executor ray``, cell by cell.

Starts a two-node local Ray cluster (``ray.cluster_utils.Cluster``: two raylets on this
machine, 2 CPUs each), then runs the study alternately with each executor, ``--rounds`` times
each (local, ray, local, ray, ...), every run into its own store. For every cell it prints the
median requests/s of each executor's runs, their ratio, and whether each ray run's median lies
inside the 95% CI of the local run of the same round (and the other way round). Both
executors pin the server to core 0 and the generator to core 1; on one host the ray
executor measures one group at a time (a host-wide lock), so only the path differs.

    python benchmarks/executor_vs_local.py                     # 2 rounds of the default study
    python benchmarks/executor_vs_local.py -r 3 -- --workload hello,json

Options after ``--`` are added to both ``pywebbench run`` command lines.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pywebbench.analysis.stats import Summary, summarize_replicates
from pywebbench.run.rows import replicate_rps
from pywebbench.store import DEFAULT_FILENAME, Store

# the pywebbench beside this interpreter (the venv's), whatever PATH says
PYWEBBENCH = shutil.which("pywebbench") or str(Path(sys.executable).parent / "pywebbench")

STUDY = [
    "--python", "cpython3.11",
    "--server", "gunicorn-sync,granian-wsgi",
    "--framework", "raw-wsgi",
    "--workload", "hello",
    "-c", "16", "-d", "2",
    "--warmup", "fixed", "--warmup-duration", "1",
    "--iterations", "2", "--replicates", "3", "--max-replicates", "3",
    "--no-report",
]  # fmt: skip


def figures(store_path: Path) -> dict[str, Summary]:
    """Cell label -> summary of its replicates' median requests/s (ok cells only)."""
    with Store(store_path, create=False) as store:
        study = store.load_study()
    names = {s.id: s.key for s in study.stacks}
    out: dict[str, Summary] = {}
    for cell in study.cells:
        if cell.status != "ok" or cell.id is None:
            continue
        rps = replicate_rps(study.replicates_of(cell.id), study.iterations_of(cell.id))
        label = f"{names[cell.stack_id]} {cell.workload} {cell.load_point}"
        out[label] = summarize_replicates(rps)
    return out


def run(executor: str, address: str, extra: list[str]) -> tuple[dict[str, Summary], float]:
    results = Path(tempfile.mkdtemp(prefix=f"pwb-exec-{executor}-"))
    argv = [PYWEBBENCH, "run", "--results-dir", str(results), *STUDY, *extra]
    if executor == "ray":
        argv += ["--executor", "ray", "--ray", address]
    started = time.monotonic()
    code = subprocess.run(argv, capture_output=True, text=True)
    took = time.monotonic() - started
    if code.returncode != 0:
        sys.exit(f"{executor} run failed (exit {code.returncode}): {code.stderr.strip()[-400:]}")
    return figures(results / DEFAULT_FILENAME), took


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-r", "--rounds", type=int, default=2, help="runs of each executor (2)")
    ap.add_argument("extra", nargs="*", help="pywebbench run options (after --)")
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    from pywebbench.load.ray_agents import local_ray_env, loopback_only

    loopback_only()  # the cluster and the runs' drivers on 127.0.0.1 only
    local_ray_env()  # its workers at nice 0, as ray_session's local Ray
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster()
    try:
        cluster.add_node(num_cpus=2, include_dashboard=False)
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        print(f"two-node local Ray cluster at {cluster.address}; server on core 0, "
              f"generator on core 1 under both executors", flush=True)  # fmt: skip
        rounds: list[tuple[dict[str, Summary], dict[str, Summary]]] = []
        for i in range(args.rounds):
            local, t_local = run("local", cluster.address, args.extra)
            remote, t_ray = run("ray", cluster.address, args.extra)
            print(f"round {i + 1}: local {t_local:.0f} s, ray {t_ray:.0f} s wall", flush=True)
            rounds.append((local, remote))
    finally:
        ray.shutdown()
        cluster.shutdown()
    labels = sorted(set.intersection(*(set(a) | set(b) for a, b in rounds)))
    missing = [lb for a, b in rounds for lb in set(a) ^ set(b)]
    print(f"cells: {len(labels)}; present under one executor only: {sorted(set(missing)) or 0}")
    inside = total = 0
    for label in labels:
        ratios = []
        for local, remote in rounds:
            a, b = local.get(label), remote.get(label)
            if a is None or b is None:
                continue
            ratios.append(b.median / a.median)
            for x, y in ((a, b), (b, a)):
                total += 1
                inside += int(y.ci_low <= x.median <= y.ci_high)
        meds = [f"{r:.3f}" for r in ratios]
        print(f"{label}: ray/local median requests/s per round {', '.join(meds)}")
    print(f"medians inside the other executor's 95% CI (same round): {inside} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
