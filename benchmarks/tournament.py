"""The quick study as a tournament, measured: wall time, interval widths, ties, agreement.

    python benchmarks/tournament.py --runs 2                   # two quick studies back to back
    python benchmarks/tournament.py --runs 1 --neighbour       # beside the steady neighbour
    python benchmarks/tournament.py --stores A.sqlite B.sqlite # two stored runs
    python benchmarks/tournament.py --runs 1 --seed 1          # another rotation (--seed)

Each run is ``pywebbench run`` with the quick profile's defaults (interleaved groups: every
stack of a workload, every interpreter, up at once, server on core 0, load on core 1) into a
results directory of its own, report included. ``--neighbour`` runs a process pinned to the
server core that spins 30 ms of every 100 ms (benchmarks/neighbour.py) for the whole run.

Prints, per run: its wall time; per interpreter the median and worst 95% CI half-width of the
stacks' ratios to their group's reference; the ratios between interpreters of one server and
framework, with their half-widths; ties (rows the report shows tied with the row
above) out of neighbour pairs. Between consecutive runs: pairs of stacks (same group) ranked
apart in one and the other way round in the other (significantly, or merely by the point
estimate), and the share of cells whose ratio lies within the other run's interval.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pywebbench.store import DEFAULT_FILENAME, Store

NEIGHBOUR = Path(__file__).with_name("neighbour.py")
PWB = Path(__file__).resolve().parents[1] / "pwb"
RUN_TIMEOUT_S = 3600  # a quick study that takes longer than this has failed its purpose

#: Group label -> stack key -> the cell's group figures.
Groups = dict[str, dict[str, dict[str, Any]]]


def interpreter_of(stack: str) -> str:
    """A stack key's interpreter (``pypy3.9/gunicorn-gthread/flask@w1t4`` -> ``pypy3.9``)."""
    return stack.split("/", 1)[0]


def across_interpreters(stacks: dict[str, dict[str, Any]]) -> list[tuple[str, float, float]]:
    """Each stack measured on two interpreters in one group: (its server/framework, the
    ratio of the later interpreter over the earlier, the interval's half-width), from the
    group's own pair ratios (``vs``)."""
    out = []
    by_rest: dict[str, list[str]] = {}
    for key in stacks:
        by_rest.setdefault(key.split("/", 1)[1], []).append(key)
    for rest, keys in sorted(by_rest.items()):
        for x, y in itertools.combinations(sorted(keys), 2):
            ratio, low, high = stacks[y]["vs"][x]
            width = math.nan if low is None else max(high / ratio - 1.0, 1.0 - low / ratio)
            out.append((f"{rest}: {interpreter_of(y)}/{interpreter_of(x)}", ratio, width))
    return out


def groups_of(store_path: Path) -> Groups:
    """Every interleaved group of the store's latest run: its cells' ``flags["group"]``."""
    with Store(store_path, create=False) as store:
        study = store.load_study()
    names = {s.id: s.key for s in study.stacks}
    out: Groups = {}
    for cell in study.cells:
        g = cell.flags.get("group")
        if cell.status == "ok" and isinstance(g, dict):
            out.setdefault(g["group"], {})[names[cell.stack_id]] = g
    return out


def half_width(g: dict[str, Any]) -> float:
    """The ratio interval's larger side relative to the ratio (NaN without one)."""
    if g.get("low") is None or g.get("high") is None:
        return math.nan
    r = g["ratio"]
    return max(g["high"] / r - 1.0, 1.0 - g["low"] / r)


def summary(groups: Groups) -> None:
    """Widths per interpreter and ties per group."""
    widths: dict[str, list[float]] = {}
    tied = pairs = 0
    across: list[tuple[str, float, float]] = []
    for label, stacks in sorted(groups.items()):
        for key, g in stacks.items():
            widths.setdefault(interpreter_of(key), []).append(half_width(g))
        across += [(f"{label}: {name}", r, w) for name, r, w in across_interpreters(stacks)]
        order = sorted(stacks, key=lambda s: -stacks[s]["rps"])
        for above, below in itertools.pairwise(order):
            ratio, low, high = stacks[above]["vs"][below]
            pairs += 1
            tied += low is None or high is None or low <= 1.0 <= high
    for interpreter, ws in sorted(widths.items()):
        known = [w for w in ws if math.isfinite(w)]
        if known:
            print(
                f"  {interpreter}: CI half-width median +-{statistics.median(known):.1%}, "
                f"worst +-{max(known):.1%} over {len(known)} cells"
            )
    print(f"  ties: {tied} of {pairs} neighbour pairs")
    if across:
        known = [w for _, _, w in across if math.isfinite(w)]
        print(
            f"  across interpreters, same server and framework, same rounds: {len(across)} "
            f"ratios, CI half-width median +-{statistics.median(known):.1%}, worst "
            f"+-{max(known):.1%}"
        )
        for name, ratio, width in across:
            print(f"    {name}: {ratio:.3f} +-{width:.1%}")


def expected_inside(stacks: int, processes: int, trials: int = 4000, seed: int = 0) -> float:
    """The share of cells whose ratio lies inside the other run's interval when nothing
    changed between two runs and both intervals are exactly what the study computes (t over
    the process effects, pooled over the group's stacks, ratios to the geometric mean):
    simulated with normal process effects. About 0.85-0.87 for the quick study's groups,
    below 0.95 because the other run's ratio carries its own error too."""
    import numpy as np
    from scipy import stats

    if stacks < 2 or processes < 2:
        return math.nan
    rng = np.random.default_rng(seed)
    df = stacks * (processes - 1)
    t = stats.t.ppf(0.975, df)
    weight = ((1 - 1 / stacks) ** 2 + (stacks - 1) / stacks**2) / processes
    inside = 0
    for _ in range(trials):
        runs = []
        for _run in range(2):
            effects = rng.normal(size=(stacks, processes))
            levels = effects.mean(axis=1)
            variance = ((effects - levels[:, None]) ** 2).sum() / df
            runs.append((levels - levels.mean(), t * math.sqrt(variance * weight)))
        (da, _), (db, hb) = runs
        inside += int(np.sum(np.abs(da - db) <= hb))
    return inside / (trials * stacks)


def agreement(a: Groups, b: Groups) -> None:
    """Rank reversals and ratios inside the other run's interval (with what honest
    intervals would give: :func:`expected_inside`)."""
    reversed_sig = reversed_point = compared = 0
    inside = cells = 0
    expected = 0.0
    # per interpreter: the log ratio of the two runs' ratios of each cell, and its variance
    # if both intervals are honest
    moved: dict[str, list[float]] = {}
    predicted: dict[str, list[float]] = {}
    for label in sorted(set(a) & set(b)):
        sa, sb = a[label], b[label]
        common = sorted(set(sa) & set(sb))
        for x, y in itertools.combinations(common, 2):
            ra, la, ha = sa[x]["vs"][y]
            rb, lb, hb = sb[x]["vs"][y]
            compared += 1
            if (ra - 1.0) * (rb - 1.0) < 0:
                reversed_point += 1
                apart_a = la is not None and (la > 1.0 or ha < 1.0)
                apart_b = lb is not None and (lb > 1.0 or hb < 1.0)
                reversed_sig += apart_a and apart_b
        for s in common:
            low, high = sb[s].get("low"), sb[s].get("high")
            if low is None or high is None:
                continue
            cells += 1
            inside += low <= sa[s]["ratio"] <= high
            expected += expected_inside(sb[s]["stacks"], sb[s]["processes"])
            if sa[s].get("low") is not None:
                interpreter = interpreter_of(s)
                moved.setdefault(interpreter, []).append(math.log(sb[s]["ratio"] / sa[s]["ratio"]))
                # each run's standard error from its interval (t at its degrees of freedom)
                from scipy import stats

                se = [
                    math.log(g["high"] / g["low"]) / 2 / stats.t.ppf(0.975, max(1, g["df"]))
                    for g in (sa[s], sb[s])
                ]
                predicted.setdefault(interpreter, []).append(se[0] ** 2 + se[1] ** 2)
    print(
        f"  pairs ranked apart in both runs, in opposite orders: {reversed_sig} of {compared}"
        f" ({reversed_point} differ in the point estimate only)"
    )
    if cells:
        print(
            f"  ratios inside the other run's CI: {inside} of {cells} ({inside / cells:.0%}; "
            f"two runs of an unchanged study with honest intervals: {expected:.1f} of {cells},"
            f" {expected / cells:.0%})"
        )
    for interpreter in sorted(moved):
        ds, vs = moved[interpreter], predicted[interpreter]
        # each move over what the two intervals predict for it: about N(0, 1) when honest
        rms = math.sqrt(statistics.fmean(d * d / v for d, v in zip(ds, vs, strict=True)))
        # the spread a run-to-run term would add to each run's ratio to bring them there
        extra = math.sqrt(
            max(0.0, statistics.fmean(d * d - v for d, v in zip(ds, vs, strict=True)) / 2)
        )
        print(
            f"  {interpreter}: ratios moved {rms:.2f}x what their intervals predict (RMS; "
            f"honest: about 1), as if each run's ratio had a further {extra:.1%} standard deviation"
        )


def run_quick(results: Path, neighbour: bool, seed: int | None = None) -> float:
    """One ``./pwb run`` into ``results`` (beside the neighbour; with its rotations moved by
    ``--seed``); its wall time."""
    spinner = None
    if neighbour:
        spinner = subprocess.Popen(
            [sys.executable, str(NEIGHBOUR), "--cpu", "0", "--on", "30ms", "--off", "70ms",
             "--for", f"{RUN_TIMEOUT_S}s"],
            start_new_session=True,
        )  # fmt: skip
    t0 = time.monotonic()
    try:
        done = subprocess.run(
            [str(PWB), "run", "--results-dir", str(results)]
            + ([] if seed is None else ["--seed", str(seed)]),
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    finally:
        if spinner is not None:
            os.killpg(spinner.pid, signal.SIGTERM)
            spinner.wait(timeout=30)
    wall = time.monotonic() - t0
    (results / "out.txt").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"./pwb run failed ({done.returncode}); see {results / 'out.txt'}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2, help="quick studies to run back to back")
    ap.add_argument("--neighbour", action="store_true", help="beside the steady neighbour")
    ap.add_argument("--stores", nargs="+", type=Path, help="analyse stored runs instead")
    ap.add_argument("--seed", type=int, help="the runs' rotation seed (run --seed)")
    ap.add_argument("--keep", type=Path, help="keep the results here (default: a temp dir)")
    args = ap.parse_args()
    stores: list[Path] = list(args.stores or [])
    if not stores:
        root = args.keep or Path(tempfile.mkdtemp(prefix="pwb-tournament-"))
        for i in range(args.runs):
            results = root / f"run-{i + 1}"
            results.mkdir(parents=True, exist_ok=True)
            wall = run_quick(results, args.neighbour, args.seed)
            print(f"run {i + 1}: {wall:,.0f} s of wall time ({results})", flush=True)
            stores.append(results / DEFAULT_FILENAME)
        if args.keep is None:
            print(f"(results kept in {root}; remove with: rm -r {root})")
    found = [groups_of(s) for s in stores]
    for i, groups in enumerate(found):
        print(f"run {i + 1}: {stores[i]}")
        summary(groups)
    for i in range(1, len(found)):
        print(f"runs {i} and {i + 1}:")
        agreement(found[i - 1], found[i])


if __name__ == "__main__":
    main()
