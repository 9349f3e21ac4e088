"""Acceptance of ``--instructions`` (docs/instructions.md, issue 24), on real servers.

    python benchmarks/instructions.py                 # all three parts below
    python benchmarks/instructions.py --part repeat   # or detect, quick
    python benchmarks/instructions.py --part quick --quick-store S.sqlite --svg OUT.svg

1. **repeat**: one cell (gunicorn-sync, raw-wsgi, hello, CPython 3.11) counted on ``--counts``
   (10) fresh server processes; prints the counts and max/min (target: at most 1.001).
2. **detect**: one run of a WSGI app (written to a temporary directory) with three paths,
   counted ``--counts`` times each on fresh servers, the three cells alternating round by
   round: ``/hello/a`` (the baseline), ``/hello/b`` (the same code: unchanged) and
   ``/hello/x``, which adds a fixed amount of work per request: ``--extra-loops`` (19)
   iterations of an empty Python ``for`` loop in a function (~114 instructions each on
   CPython 3.11 measured, so ~2,170: +0.46% of the app's ~474,800 per request). Each count
   of ``b`` and ``x`` is judged against the median of ``a`` by the gate's rule
   ``instructions>0.25%``: the target is ``x`` caught 10/10 and ``b`` 0/10.
   ``pywebbench compare`` is not used here: it pairs cells of two runs, these are three
   cells of one.
3. **quick**: ``pywebbench run --profile quick --python cpython3.11 --instructions`` (or a
   stored run of it, ``--quick-store``): every cell must have a count; the extra study time
   is the sum of the counted servers' lifetimes (start, batches, stop), target at most 3
   minutes. Also prints, per cell, instructions per request against the timed server CPU
   per request, with their Pearson and Spearman correlations (scipy.stats), and draws them
   as an SVG (``--svg``).

Timing figures depend on the machine's load: run on a quiet one, or say how loaded it was.
"""

from __future__ import annotations

import argparse
import html
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pywebbench.store import DEFAULT_FILENAME, Store, Study
from scipy import stats

# the pywebbench beside this interpreter (the venv's), whatever PATH says
PYWEBBENCH = shutil.which("pywebbench") or str(Path(sys.executable).parent / "pywebbench")
#: The gate's threshold the detection part applies to each count.
THRESHOLD = 0.0025
#: The timed part of each replicate is not what these runs are for: keep it short.
SHORT_TIMED = ["-c", "1", "-d", "0.5", "--warmup", "fixed", "--warmup-duration", "0.5"]

VARIANT_APP = '''"""benchmarks/instructions.py: the raw-wsgi hello answer, plus a fixed amount
of extra work on paths ending in "x" ({loops} iterations of an empty for loop)."""


def _work(n):
    for _ in range(n):
        pass


def app(environ, start_response):
    _work({loops} if environ["PATH_INFO"][-1] == "x" else 0)
    body = b"Hello, World!"
    start_response(
        "200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))]
    )
    return [body]
'''


def run(argv: list[str], results: Path, config: str) -> Study:
    """``pywebbench run`` into ``results`` with the TOML ``config``; its stored study."""
    results.mkdir(parents=True, exist_ok=True)
    toml = results / "study.toml"
    toml.write_text(config)
    cmd = [PYWEBBENCH, "run", "--config", str(toml), "--no-report", *argv]
    print("$", " ".join(cmd), flush=True)
    started = time.monotonic()
    subprocess.run(cmd, check=True, cwd=results, stdout=subprocess.DEVNULL)
    print(f"  took {time.monotonic() - started:.0f} s", flush=True)
    return load(results / "pywebbench-results" / DEFAULT_FILENAME)


def load(store_path: Path) -> Study:
    with Store(store_path, create=False) as store:
        return store.load_study()


def counts_by_cell(study: Study) -> dict[str, list[float]]:
    """Cell label -> its instructions per request, one per counted replicate (in order)."""
    out: dict[str, list[float]] = {}
    for cell in study.cells:
        reps = sorted(
            (r for r in study.replicates if r.cell_id == cell.id and r.instructions_json),
            key=lambda r: r.replicate,
        )
        for rep in reps:
            doc = rep.instructions
            if "error" in doc:
                raise SystemExit(f"{cell.key} replicate {rep.replicate}: {doc['error']}")
            out.setdefault(cell.key, []).append(float(doc["per_request"]))
    return out


def config(counts: int, extra: str = "") -> str:
    return (
        f"[load]\ninstructions = true\ninstructions_replicates = {counts}\n"
        f'server_scope = "cell"\n{extra}'
    )


def part_repeat(work: Path, counts: int) -> bool:
    study = run(
        [
            "--server", "gunicorn-sync", "--framework", "raw-wsgi", "--workload", "hello",
            "--python", "cpython3.11", "--replicates", str(counts), *SHORT_TIMED,
        ],
        work / "repeat",
        config(counts),
    )  # fmt: skip
    ((key, values),) = counts_by_cell(study).items()
    spread = max(values) / min(values)
    print(f"repeat: {key}: {len(values)} fresh servers")
    print("  instructions/request: " + ", ".join(f"{v:,.1f}" for v in values))
    print(f"  max/min = {spread:.6f} (target <= 1.001): {'PASS' if spread <= 1.001 else 'FAIL'}")
    return spread <= 1.001 and len(values) == counts


def part_detect(work: Path, counts: int, loops: int) -> bool:
    project = work / "detect-app"
    project.mkdir(parents=True, exist_ok=True)
    (project / "pwb_instr_variant.py").write_text(VARIANT_APP.format(loops=loops))
    extra = (
        f'[app]\napp = "pwb_instr_variant:app"\ninterface = "wsgi"\nproject = "{project}"\n'
        'paths = ["/hello/a", "/hello/b", "/hello/x"]\n'
    )
    study = run(
        ["--server", "gunicorn-sync", "--python", "cpython3.11", "--replicates", str(counts),
         *SHORT_TIMED],
        work / "detect",
        config(counts, extra),
    )  # fmt: skip
    found = counts_by_cell(study)

    def of(suffix: str) -> list[float]:
        return next(v for k, v in found.items() if f"/hello/{suffix}" in k)

    base = statistics.median(of("a"))
    ok = True
    print(f"detect: baseline /hello/a median {base:,.1f} instructions/request")
    for suffix, want in (("b", 0), ("x", counts)):
        values = of(suffix)
        changes = [v / base - 1 for v in values]
        caught = sum(c > THRESHOLD for c in changes)
        verdict = "PASS" if caught == want and len(values) == counts else "FAIL"
        ok = ok and verdict == "PASS"
        print(
            f"  /hello/{suffix}: caught {caught}/{len(values)} by instructions>"
            f"{THRESHOLD * 100:g}% (target {want}/{counts}): {verdict}; changes "
            + ", ".join(f"{c * 100:+.3f}%" for c in changes)
        )
    return ok


def cpu_us_per_request(study: Study, cell_id: int) -> float | None:
    """The timed server CPU per request of a cell's measured iterations, in microseconds."""
    its = [i for i in study.iterations if i.cell_id == cell_id and i.kind == "measured"]
    cpu = sum((i.cpu_user_s or 0.0) + (i.cpu_sys_s or 0.0) for i in its)
    requests = sum(i.requests for i in its)
    return cpu / requests * 1e6 if requests and cpu else None


def part_quick(work: Path, store: Path | None, svg: Path | None) -> bool:
    if store is not None:
        study = load(store)
    else:
        study = run(
            ["--profile", "quick", "--python", "cpython3.11", "--instructions"],
            work / "quick",
            "",
        )
    names = {s.id: s.key for s in study.stacks}
    points: list[tuple[str, float, float]] = []
    extra_s = 0.0
    missing = []
    for cell in study.cells:
        docs = [r.instructions for r in study.replicates if r.cell_id == cell.id]
        counted = [d for d in docs if "per_request" in d]
        extra_s += sum(float(d.get("study_s", 0.0)) for d in docs)
        cpu = cpu_us_per_request(study, cell.id) if cell.id is not None else None
        if not counted or cpu is None:
            missing.append(cell.key)
            continue
        per = statistics.median(float(d["per_request"]) for d in counted)
        points.append((f"{names[cell.stack_id]} {cell.workload}", per, cpu))
    print(f"quick: {len(points)} of {len(study.cells)} cells counted; missing: {missing or 'none'}")
    print(f"  extra study time (counted servers' lifetimes): {extra_s:.0f} s (target <= 180 s)")
    print(f"  {'cell':58} {'instructions/req':>16} {'CPU us/req':>11} {'instr/CPU us':>12}")
    for label, per, cpu in sorted(points, key=lambda p: p[1]):
        print(f"  {label:58} {per:16,.0f} {cpu:11,.1f} {per / cpu:12,.0f}")
    if len(points) >= 3:
        x = [math.log(p[2]) for p in points]
        y = [math.log(p[1]) for p in points]
        pearson = stats.pearsonr(x, y)
        spearman = stats.spearmanr([p[2] for p in points], [p[1] for p in points])
        print(
            f"  correlation: Pearson r of the logs {pearson.statistic:.3f} "
            f"(p {pearson.pvalue:.2g}), Spearman rho {spearman.statistic:.3f} "
            f"(p {spearman.pvalue:.2g}), n = {len(points)}"
        )
        for workload in sorted({p[0].rsplit(" ", 1)[1] for p in points}):
            mine = [p for p in points if p[0].endswith(" " + workload)]
            if len(mine) >= 3:
                rho = stats.spearmanr([p[2] for p in mine], [p[1] for p in mine]).statistic
                print(f"  within {workload}: Spearman rho {rho:.3f}, n = {len(mine)}")
        if svg is not None:
            svg.write_text(scatter(points, pearson.statistic, spearman.statistic))
            print(f"  figure: {svg}")
    return not missing and extra_s <= 180


W, H, PAD = 720, 420, 64


def scatter(points: list[tuple[str, float, float]], r: float, rho: float) -> str:
    """A log-log SVG of instructions per request (y) against CPU time per request (x)."""
    xs = [math.log10(p[2]) for p in points]
    ys = [math.log10(p[1]) for p in points]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    y0, y1 = math.floor(min(ys)), math.ceil(max(ys))

    def px(x: float) -> float:
        return PAD + (x - x0) / (x1 - x0) * (W - 2 * PAD)

    def py(y: float) -> float:
        return H - PAD - (y - y0) / (y1 - y0) * (H - 2 * PAD)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        'font-family="sans-serif" font-size="11">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{W / 2}" y="18" text-anchor="middle" font-size="13">Instructions per '
        f"request (valgrind) against server CPU time per request (timed), quick profile, "
        f"CPython 3.11</text>",
        f'<text x="{W / 2}" y="34" text-anchor="middle">Pearson r (logs) {r:.2f}, '
        f"Spearman rho {rho:.2f}, {len(points)} cells</text>",
    ]
    for e in range(x0, x1 + 1):
        out.append(f'<line x1="{px(e)}" x2="{px(e)}" y1="{PAD}" y2="{H - PAD}" stroke="#ddd"/>')
        out.append(f'<text x="{px(e)}" y="{H - PAD + 16}" text-anchor="middle">{10**e:g}</text>')
    for e in range(y0, y1 + 1):
        out.append(f'<line x1="{PAD}" x2="{W - PAD}" y1="{py(e)}" y2="{py(e)}" stroke="#ddd"/>')
        out.append(f'<text x="{PAD - 6}" y="{py(e) + 4}" text-anchor="end">{10**e:.0e}</text>')
    out.append(
        f'<text x="{W / 2}" y="{H - 18}" text-anchor="middle">server CPU µs per request '
        "(measured iterations, user + system)</text>"
    )
    out.append(
        f'<text x="16" y="{H / 2}" text-anchor="middle" transform="rotate(-90 16 {H / 2})">'
        "instructions per request</text>"
    )
    for (label, _, _), x, y in zip(points, xs, ys, strict=True):
        colour = "#e8710a" if label.endswith("cpu") else "#1967d2"
        out.append(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="4" fill="{colour}">'
            f"<title>{html.escape(label)}</title></circle>"
        )
    out.append(
        f'<text x="{W - PAD}" y="{PAD + 12}" text-anchor="end" fill="#1967d2">hello</text>'
        f'<text x="{W - PAD}" y="{PAD + 26}" text-anchor="end" fill="#e8710a">cpu</text>'
    )
    return "\n".join([*out, "</svg>"]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["all", "repeat", "detect", "quick"], default="all")
    parser.add_argument("--counts", type=int, default=10, help="fresh servers per cell")
    parser.add_argument("--extra-loops", type=int, default=19, help="detect: the extra work")
    parser.add_argument("--quick-store", type=Path, help="quick: a stored run instead")
    parser.add_argument("--svg", type=Path, help="quick: write the figure here")
    parser.add_argument("--work", type=Path, help="keep the runs here (default: a temp dir)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="pwb-instructions-"))
    print(f"runs in {work}", flush=True)
    ok = True
    if args.part in ("all", "repeat"):
        ok = part_repeat(work, args.counts) and ok
    if args.part in ("all", "detect"):
        ok = part_detect(work, args.counts, args.extra_loops) and ok
    if args.part in ("all", "quick"):
        ok = part_quick(work, args.quick_store, args.svg) and ok
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
