"""Every server of the catalogue through `pywebbench run`, not only through `verify`.

Both commands bring stacks up through the same pipeline (pywebbench.bringup); this test keeps
it that way: a server that verify accepts must also measure in run. One short cell per
server, on the running CPython, with the framework of the server's interface.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pwbtest import pwb
from pywebbench.catalogue.frameworks import FRAMEWORKS
from pywebbench.catalogue.interpreters import default_interpreters
from pywebbench.catalogue.servers import ADAPTERS
from pywebbench.store import Store


def _framework_of(interface: str) -> str:
    """raw-wsgi / raw-asgi, or the one native framework that shares a native server's
    interface."""
    if interface in ("wsgi", "asgi"):
        return f"raw-{interface}"
    (name,) = [f.name for f in FRAMEWORKS.values() if f.interface == interface]
    return name


#: The catalogue's servers in three studies (each under a minute on 2 cores; one study of
#: all 23 took 56-79 s, issue 52).
CHUNKS = 3


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_every_server_measures_in_run(chunk: int, tmp_path: Path, census: str) -> None:
    cpython = default_interpreters()[0].name
    mine = {name: a for i, (name, a) in enumerate(sorted(ADAPTERS.items())) if i % CHUNKS == chunk}
    frameworks = sorted({_framework_of(a.interface) for a in mine.values()})
    results = tmp_path / "res"
    proc = pwb(
        "run",
        "--python",
        cpython,
        "--server",
        ",".join(mine),
        "--framework",
        ",".join(frameworks),
        "--workload",
        "hello",
        "-c",
        "16",
        "-d",
        "0.5",
        "--warmup",
        "fixed",
        "--max-replicates",
        "1",
        "--warmup-duration",
        "0.3",
        "--replicates",
        "1",
        "--server-scope",
        "cell",
        "--no-report",
        results=results,
        timeout=280,  # within pytest's own 300 s (pyproject.toml)
    )
    with Store(results / "pywebbench.sqlite", create=False) as store:
        study = store.load_study()
    servers = {s.id: s.server for s in study.stacks}
    by_server = {servers[c.stack_id]: c for c in study.cells}
    assert set(by_server) == set(mine), proc.stdout[-3000:] + proc.stderr[-3000:]
    failed = {
        name: f"{c.failure_phase}: {c.failure_reason}"
        for name, c in by_server.items()
        if c.status != "ok"
    }
    assert not failed, failed
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
