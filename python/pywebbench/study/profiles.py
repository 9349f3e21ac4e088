"""The built-in study profiles (``--profile``, ``profile = ...``): quick, standard, full.

Each is a partial ``pywebbench.toml`` that the file and the CLI options override
(:func:`pywebbench.study.config.resolve`); docs/config.md describes them.
"""

from __future__ import annotations

import copy
from typing import Any

PROFILES = ("quick", "standard", "full", "versions")

_WSGI_SERVERS = ["gunicorn-gthread", "granian-wsgi"]
_ASGI_SERVERS = ["uvicorn-h11", "granian-asgi"]

PROFILE_DATA: dict[str, dict[str, Any]] = {
    # The README's main job: 13-14 minutes on the project's 2-core VMs (759-765 s on an
    # Intel Xeon, 828 s on an AMD EPYC, 2026-12-07: docs/measurements.md), two groups of
    # CPython's and PyPy's stacks.
    "quick": {
        "matrix": {
            "servers": _WSGI_SERVERS + _ASGI_SERVERS,
            "frameworks": ["raw-wsgi", "flask", "starlette"],
            # json left out: it ranked the stacks as hello did, and its 12 cells took ~4 of
            # the ~14 minutes the study took with it (docs/steady-state.md)
            "workloads": ["hello", "cpu"],
            "server_settings": {"gunicorn-gthread": {"workers": [1], "threads": [4]}},
        },
        "load": {
            "connections": [64],
            "duration_s": 3.0,
            "warmup": "steady",
            "warmup_cap_s": 15.0,
            # PyPy's JIT kept raising a ramp past 15 s in 16 of 38 replicates
            # (docs/steady-state.md#the-jit-cap)
            "jit_warmup_cap_s": 30.0,
            "iterations": 1,
            # server processes a stack, where the variance lives (Kalibera & Jones): a
            # group's intervals are over its processes, each interpreter's over its own.
            # CPython's sit 1-2% apart, and a 4th process a stack narrows their intervals by
            # about 1.2x (t over 18 degrees of freedom, not 12) for 6 more processes of a
            # fraction of a second a round. A PyPy process costs a 0.75-s slot a round and
            # its own JIT warm-up: 3 (a 95% t interval from 2 spans +-9 standard deviations,
            # from 3 +-2.5: docs/steady-state.md)
            "replicates": 4,
            "jit_replicates": 3,
            # a fresh server for every replicate of every cell: what a PyPy server served
            # first decides where its JIT settles (fib cpu at ~2,850 req/s met first, ~6,200
            # after hello: docs/steady-state.md#no-order-effects), so no cell may follow another
            "server_scope": "cell",
            # every stack of a group (a workload, CPython's and PyPy's stacks) up at once,
            # loaded in slices of the same rounds: the host's drift cancels within a round
            # (docs/steady-state.md#the-interleaved-study)
            "design": "interleaved",
            # CPython's stacks alone reach +-3% within ~100 s of load; PyPy's processes each
            # need 10-15 s of load of their own before the JIT has settled (2026-12-03), so a
            # group with PyPy in it has the JIT's budget
            "group_budget_s": 120.0,
            "jit_group_budget_s": 300.0,
        },
    },
    # About half an hour: more servers and frameworks, a connections sweep, longer windows.
    # Interleaved (load.design's default): one group per workload and load point, every
    # interpreter in it, so 16 and 64 connections are two groups of each workload.
    "standard": {
        "matrix": {
            "servers": [
                "gunicorn-sync",
                "gunicorn-gthread",
                "waitress",
                "granian-wsgi",
                "uvicorn-uvloop",
                "uvicorn-h11",
                "hypercorn",
                "granian-asgi",
            ],
            "frameworks": ["raw-wsgi", "flask", "django", "raw-asgi", "starlette", "fastapi"],
            "workloads": ["hello", "json", "cpu", "io"],
            "server_settings": {
                "gunicorn-gthread": {"workers": [1], "threads": [4]},
                "waitress": {"workers": [1], "threads": [4]},
            },
        },
        "load": {
            "connections": [16, 64],
            "duration_s": 3.0,
            "warmup_duration_s": 2.0,
            "warmup_iterations": 1,
            "iterations": 1,
            "replicates": 2,
        },
    },
    # Hours: every server, framework and workload of the catalogue, a wide sweep; interleaved
    # (the default), one group per interpreter, workload and load point.
    "full": {
        "matrix": {
            "servers": [],  # empty = all
            "frameworks": [],
            "workloads": [],
            "server_settings": {
                "gunicorn-gthread": {"workers": [1], "threads": [4, 16]},
                "waitress": {"workers": [1], "threads": [4, 16]},
            },
        },
        "load": {
            "connections": [1, 16, 64, 256],
            "duration_s": 10.0,
            "warmup_duration_s": 5.0,
            "warmup_iterations": 2,
            "iterations": 2,
            "replicates": 3,
        },
    },
    # The version study (docs/interpreters.md): every interpreter found (or --python), two
    # representative WSGI stacks, a light and a CPU-bound workload, the quick profile's load;
    # the report draws them by interpreter, their ratios with intervals from the same rounds.
    "versions": {
        "matrix": {
            "interpreters": ["all"],
            "servers": _WSGI_SERVERS,
            "frameworks": ["raw-wsgi", "flask"],
            "workloads": ["hello", "cpu"],
            "server_settings": {"gunicorn-gthread": {"workers": [1], "threads": [4]}},
        },
        "load": {},  # the quick profile's (below)
    },
}
PROFILE_DATA["versions"]["load"] = copy.deepcopy(PROFILE_DATA["quick"]["load"])
# The study's question is the CPython versions: 3 processes a CPython stack (+-2.1% median
# on 2026-12-07; leaving one out of each read +-2.3-3.0%), 2 a PyPy stack, whose slots took
# 45% of each round with 3 (its cells then read wider: +-4.2-9.9% with one of 3 left out).
PROFILE_DATA["versions"]["load"].update(replicates=3, jit_replicates=2)
# Interleaved, as every profile: every interpreter shares one group per workload
# (run/interleaved.py, group_key), so the interpreters' ratios come from the same rounds.
# With 4 interpreters (3.11, 3.13, 3.13t, PyPy) a group holds 44 processes and the study took
# 11 minutes here (649-662 s), its CPython cells at +-1.6-2.2% (median; docs/measurements.md); with
# "all" (7 interpreters here) about twice the processes a group, each round twice as long.
