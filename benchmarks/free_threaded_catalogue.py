"""Which servers and frameworks install and serve on a free-threaded CPython, and with the GIL
off or back on: the evidence behind the catalogue's declarations (docs/interpreters.md).

    python benchmarks/free_threaded_catalogue.py                 # on 3.13t (built if missing)
    python benchmarks/free_threaded_catalogue.py --python 3.14t --keep /tmp/ft

Every server is tried with the thinnest app of its interface (raw-wsgi, raw-asgi, or its own
native framework); every WSGI framework on gunicorn-gthread and every ASGI framework on
uvicorn-h11 (pure-Python servers, so a failure is the framework's). Each stack is one
``pywebbench run`` replicate of ``hello``: provisioned into its own venv, started, verified,
loaded for half a second. Servers and frameworks the catalogue already declares unavailable
there are listed with the declared reason and not tried (``--try-declared`` tries them too).

Printed: one row per stack with its outcome (served, or the phase it failed in and the first
line of why) and whether its app processes ran with the GIL (``sys._is_gil_enabled()``, stored
per replicate). Source builds make the first run take minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from pywebbench.catalogue import interpreters
from pywebbench.catalogue.base import ASGI, WSGI
from pywebbench.catalogue.frameworks import frameworks
from pywebbench.catalogue.servers import adapters

PYWEBBENCH = shutil.which("pywebbench") or str(Path(sys.executable).parent / "pywebbench")
SHORT = ["--workload", "hello", "--replicates", "1", "--max-replicates", "1", "-d", "0.5",
         "-c", "8", "--warmup", "fixed", "--warmup-duration", "0.3", "--no-report",
         "--no-core-speed"]  # fmt: skip
THIN = {WSGI: "raw-wsgi", ASGI: "raw-asgi"}
PURE_SERVER = {WSGI: "gunicorn-gthread", ASGI: "uvicorn-h11"}


def plan(python: str, try_declared: bool) -> tuple[list[tuple[str, str]], list[list[str]]]:
    """(server, framework) pairs to try, and the rows of those declared unavailable."""
    interp = interpreters.find(python)
    servers, fws = adapters(), frameworks()
    pairs: list[tuple[str, str]] = []
    declared: list[list[str]] = []
    for name, server in sorted(servers.items()):
        fw = THIN.get(server.interface) or next(
            f for f, x in fws.items() if x.interface == server.interface
        )
        why = server.unavailable(interp) or fws[fw].unavailable(interp)
        if why and not try_declared:
            declared.append([f"{name}/{fw}", "declared unavailable", why, ""])
        else:
            pairs.append((name, fw))
    for name, fw in sorted(fws.items()):
        if fw.interface not in PURE_SERVER or name in THIN.values():
            continue
        why = fw.unavailable(interp)
        if why and not try_declared:
            declared.append(
                [f"{PURE_SERVER[fw.interface]}/{name}", "declared unavailable", why, ""]
            )
        else:
            pairs.append((PURE_SERVER[fw.interface], name))
    return pairs, declared


def run(python: str, server: str, framework: str, results: Path) -> list[str]:
    """One replicate of ``server/framework``: its row."""
    out = results / f"{server}-{framework}"
    done = subprocess.run(
        [PYWEBBENCH, "run", "--python", python, "--server", server, "--framework", framework,
         *SHORT, "--results-dir", str(out)],
        capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    label = f"{server}/{framework}"
    db = out / "pywebbench.sqlite"
    if not db.exists():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return [label, f"refused (exit {done.returncode})", last[:200], ""]
    con = sqlite3.connect(db)
    cell = con.execute("SELECT id, status, failure_phase, failure_reason FROM cells").fetchone()
    failure = con.execute("SELECT phase, reason FROM failures").fetchone()
    if cell is None:  # failed before any cell: provisioning
        phase, reason = failure if failure else ("?", done.stderr.strip()[-200:])
        return [label, f"failed: {phase}", str(reason).splitlines()[0][:200], ""]
    gil = con.execute("SELECT gil_enabled FROM replicates WHERE cell_id = ?", (cell[0],)).fetchone()
    gil_text = {None: "", 0: "off", 1: "on"}[gil[0] if gil else None]
    if cell[1] == "ok":
        return [label, "served", "", gil_text]
    return [label, f"failed: {cell[2]}", str(cell[3] or "").splitlines()[0][:200], gil_text]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default="3.13t", help="a free-threaded build (default 3.13t)")
    ap.add_argument("--only", help="comma list of server/framework pairs to try")
    ap.add_argument("--try-declared", action="store_true", help="try declared-unavailable too")
    ap.add_argument("--keep", type=Path, help="keep the results here (default: a temp dir)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    a = ap.parse_args()
    results = a.keep or Path(tempfile.mkdtemp(prefix="pwb-ft-"))
    results.mkdir(parents=True, exist_ok=True)
    pairs, rows = plan(a.python, a.try_declared)
    if a.only:
        wanted = {tuple(p.split("/", 1)) for p in a.only.split(",")}
        pairs = [p for p in pairs if p in wanted]
    for i, (server, framework) in enumerate(pairs, 1):
        row = run(a.python, server, framework, results)
        print(f"[{i}/{len(pairs)}] {' | '.join(row)}", flush=True)
        rows.append(row)
    print()
    print(f"{'stack':34} {'outcome':22} {'GIL as run':10} why")
    for stack, outcome, why, gil in sorted(rows):
        print(f"{stack:34} {outcome:22} {gil:10} {why}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    if not a.keep:
        shutil.rmtree(results, ignore_errors=True)


if __name__ == "__main__":
    main()
