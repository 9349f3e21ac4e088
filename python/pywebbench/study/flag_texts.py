"""The ``pywebbench run`` flags' help texts too long for their field's line in
:mod:`pywebbench.study.config`, and the parsers of the flags whose value is not a plain list."""

from __future__ import annotations

from pywebbench.study.declare import comma_list

PROFILE_HELP = (
    "Built-in study to start from: quick (default, ~15 min), standard (~30 min), full "
    "(hours), versions (every interpreter found, by version: docs/interpreters.md)."
)
PYTHON_HELP = (
    "Interpreters: cpython3.11,pypy3.9, versions (3.14, 3.13t: installed when missing), "
    "3.13t@gil0/@gil1 (PYTHON_GIL of a free-threaded build), paths, or all."
)
WARMUP_HELP = (
    "steady (default): warm up until throughput is steady, or --warmup-cap (--jit-warmup-cap "
    "on PyPy); fixed: --warmup-iterations x --warmup-duration; deep: Barrett's method, a "
    "--deep-s long series per replicate (it never stops early), then a table of each "
    "replicate's class: flat, warm-up, slowdown, no steady state (docs/steady-state.md)."
)
CI_TARGET_HELP = (
    "More replicates for cells whose 95% CI half-width exceeds this fraction of the "
    "median (0.05 = +-5%), up to --max-replicates."
)
FAULTS_HELP = (
    "Also measure every cell under this fault mix and score its robustness: 'default', "
    "'slowloris=50,reset-mid-response=10/s', ...; 'slowloris=10,100,500' sweeps the attack "
    "size and names the breaking point; 'fresh=20%', 'lead=1s' (docs/faults.md)."
)
SLO_HELP = (
    "Latency SLO, e.g. p99=50ms: each replicate also searches the highest open-loop "
    "rate that meets it, the knee (docs/slo.md)."
)
SERVER_SCOPE_HELP = (
    "cell: a fresh server for every replicate of every cell; stack: one fresh server "
    "per replicate serves all of a stack's workloads in turn (fewer starts, less overhead)."
)
DESIGN_HELP = (
    "interleaved (the default of every profile): the stacks of a group (one workload and "
    "load point, every interpreter) are all up at once, --replicates server processes each,"
    " and one engine run loads them in short slices, every process once a round in a random"
    " order; figures are ratios to the group's reference with CIs over the processes (an "
    "open loop's: each stack's p50 and p99 at the same rate). sequential: a fresh server "
    "per replicate of each cell, one after another. --faults, --slo, --syscalls, "
    "--flamegraph, --warmup fixed/deep and --server-scope stack always take the sequential "
    "path (run says which; the report marks them); --connection-mode close/N, unix binds, "
    "--rate, h2c and WebSocket cells are groups of their own (a group is one load point and "
    "one protocol); --instructions counts after a group, on fresh servers."
)
BIND_HELP = (
    "Where the server listens, a sweep: tcp (default: a loopback port) and/or unix (a "
    "unix-domain socket, as behind nginx): --bind tcp,unix measures both side by side. "
    "Servers that cannot bind one are skipped (pywebbench stacks --json: unix_bind)."
)
PROTOCOL_HELP = (
    "What the cells speak, a sweep: http1 (default: HTTP/1.1) and/or h2c (HTTP/2 over "
    "cleartext TCP with prior knowledge, --streams in flight per connection): --protocol "
    "http1,h2c measures both side by side. Servers that cannot serve h2c are skipped "
    "(pywebbench stacks --json: h2c)."
)
SERVER_OPTION_HELP = (
    "A server setting, SERVER.SETTING=NUMBER (repeatable), e.g. "
    "waitress.connection_limit=100 (docs/servers.md lists them)."
)
EXECUTOR_HELP = (
    "Where cells run: local (default), or ray: independent cells (whole stacks with "
    "--server-scope stack) in parallel on the nodes of a Ray cluster (docs/scale-out.md)."
)
RAY_HELP = (
    "Ray cluster HOST:PORT for --executor ray or --load-agents (default: a local Ray, "
    "started for the run and stopped after)."
)


def parse_server_options(values: tuple[str, ...]) -> dict[str, dict[str, int]]:
    """``--server-option waitress.connection_limit=100`` -> {"waitress": {...: 100}}."""
    out: dict[str, dict[str, int]] = {}
    for text in values:
        head, _, value = text.partition("=")
        server, _, name = head.partition(".")
        if not (server and name and value.strip().isdigit()):
            raise ValueError(
                f"{text!r}: expected SERVER.SETTING=NUMBER, e.g. waitress.connection_limit=100"
            )
        out.setdefault(server.strip(), {})[name.strip()] = int(value)
    return out


def parse_constant_rates(values: tuple[str, ...]) -> list[float]:
    """``--rate 1000,5000`` -> [1000.0, 5000.0]; a ramp or steps is refused."""
    if any(":" in v or "@" in v for v in values):
        # A load point is one rate (stored, compared and warmed up to a steady state).
        raise ValueError(
            "run sweeps constant rates (one load point each); for a ramp or "
            "steps use pywebbench load --rate"
        )
    out = []
    for text in comma_list(values):
        try:
            out.append(float(text))
        except ValueError:
            raise ValueError(f"{text!r}: not a number") from None
    return out
