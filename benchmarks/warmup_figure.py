"""Draw the warm-up curves of a stored run as an SVG (docs/steady-state.md's figure).

    python benchmarks/warmup_figure.py STORE OUT.svg [--workload hello] [--server S]
                                       [--framework F] [--title TEXT]

One line per cell and replicate: requests/s per 0.25 s bucket since the warm-up began, with a
dot where the steady-state rule placed the steady start, colour by interpreter (PyPy orange,
CPython blue). Plain SVG, no dependencies, so the figure in the docs can be regenerated from
any store.
"""

from __future__ import annotations

import argparse
import html
from pathlib import Path

from pywebbench.store import Store

W, H, PAD = 720, 360, 48
COLOURS = {"pypy": "#e8710a", "cpython": "#1967d2"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--workload", default="hello")
    parser.add_argument("--server", help="only this server's cells")
    parser.add_argument("--framework", help="only this framework's cells")
    parser.add_argument("--title", default="Warm-up until steady: requests/s since warm-up began")
    args = parser.parse_args()
    with Store(args.store, create=False) as store:
        study = store.load_study()
    stacks = {s.id: s for s in study.stacks}
    lines = []
    for cell in study.cells:
        if cell.workload != args.workload or cell.id is None:
            continue
        stack = stacks[cell.stack_id]
        if args.server and stack.server != args.server:
            continue
        if args.framework and stack.framework != args.framework:
            continue
        for rep in study.replicates_of(cell.id):
            if rep.warmup_curve:
                lines.append((stack, rep))
    if not lines:
        raise SystemExit(f"no warm-up curves of workload {args.workload!r} in {args.store}")
    t_max = max(t for _, rep in lines for t, _ in rep.warmup_curve)
    y_max = max(y for _, rep in lines for _, y in rep.warmup_curve) * 1.05

    def x(t: float) -> float:
        return PAD + (W - 2 * PAD) * t / t_max

    def y(v: float) -> float:
        return H - PAD - (H - 2 * PAD) * v / y_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{W}" height="{H}" fill="white"/>',
        f'<text x="{PAD}" y="24" font-size="14">{html.escape(args.title)}</text>',
        f'<line x1="{PAD}" y1="{H - PAD}" x2="{W - PAD}" y2="{H - PAD}" stroke="#444"/>',
        f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{H - PAD}" stroke="#444"/>',
        f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">seconds since warm-up began'
        f" (0.25 s buckets)</text>",
    ]
    for t in range(int(t_max) + 1):
        parts.append(f'<text x="{x(t):.1f}" y="{H - PAD + 16}" text-anchor="middle">{t}</text>')
    for k in range(5):
        v = y_max * k / 4
        parts.append(f'<text x="{PAD - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:,.0f}</text>')
    legend: dict[str, str] = {}
    for stack, rep in lines:
        impl = stack.interpreter_impl.lower()
        colour = COLOURS.get(impl, "#555")
        legend[f"{stack.interpreter} / {stack.server} / {stack.framework}"] = colour
        points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in rep.warmup_curve)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                     f'points="{points}"/>')  # fmt: skip
        if rep.steady_start_s is not None:
            at = min(rep.warmup_curve, key=lambda p: abs(p[0] - rep.steady_start_s - 0.25))
            parts.append(f'<circle cx="{x(at[0]):.1f}" cy="{y(at[1]):.1f}" r="4" '
                         f'fill="{colour}"/>')  # fmt: skip
    for i, (label, colour) in enumerate(legend.items()):
        parts.append(f'<text x="{W - PAD}" y="{PAD + 16 * i}" text-anchor="end" '
                     f'fill="{colour}">{html.escape(label)}</text>')  # fmt: skip
    parts.append(f'<text x="{W - PAD}" y="{PAD + 16 * len(legend)}" text-anchor="end">'
                 "dot: steady start found by the rule</text>")  # fmt: skip
    parts.append("</svg>")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(parts) + "\n")
    print(f"wrote {args.out} ({len(lines)} curves)")


if __name__ == "__main__":
    main()
