"""The SQLite schema of the results store, versioned. Documented in docs/store-schema.md.

``PRAGMA user_version`` holds :data:`SCHEMA_VERSION`. Changes are additive (new tables, new
nullable columns) and come with a migration in :data:`MIGRATIONS`, so any older store opens.
"""

from __future__ import annotations

SCHEMA_VERSION = 16

_KNEE_TABLES = """CREATE TABLE IF NOT EXISTS knee_probes (
    id                   INTEGER PRIMARY KEY,
    cell_id              INTEGER NOT NULL REFERENCES cells(id),
    replicate            INTEGER NOT NULL,
    idx                  INTEGER NOT NULL,
    phase                TEXT NOT NULL CHECK (phase IN ('bracket', 'bisect')),
    started_at           TEXT NOT NULL,
    rate_offered         REAL NOT NULL,
    rate_achieved        REAL NOT NULL,
    duration_s           REAL NOT NULL,
    requests             INTEGER NOT NULL,
    errors               INTEGER NOT NULL,
    latency_us           REAL NOT NULL,
    latency_p50_us       REAL NOT NULL,
    samples              INTEGER NOT NULL,
    verdict              TEXT NOT NULL CHECK (verdict IN ('pass', 'latency', 'errors', 'rate')),
    schedule_lag_p99_us  REAL,
    UNIQUE (cell_id, replicate, idx)
);

CREATE TABLE IF NOT EXISTS knees (
    id                   INTEGER PRIMARY KEY,
    cell_id              INTEGER NOT NULL REFERENCES cells(id),
    replicate            INTEGER NOT NULL,
    slo                  TEXT NOT NULL,
    percentile           REAL NOT NULL,
    target_us            REAL NOT NULL,
    status               TEXT NOT NULL CHECK (status IN ('found', 'not_met')),
    knee_rps             REAL,
    fail_rps             REAL,
    lowest_rps           REAL NOT NULL,
    ended                TEXT NOT NULL,
    probes               INTEGER NOT NULL,
    search_s             REAL NOT NULL,
    min_samples          INTEGER NOT NULL,
    finished_at          TEXT NOT NULL,
    UNIQUE (cell_id, replicate)
);
"""

DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS runs (
    id                   TEXT PRIMARY KEY,
    created_at           TEXT NOT NULL,
    finished_at          TEXT,
    status               TEXT NOT NULL
                         CHECK (status IN ('running', 'completed', 'interrupted', 'failed')),
    profile              TEXT,
    hostname             TEXT NOT NULL,
    cpu_model            TEXT NOT NULL,
    cpu_count            INTEGER NOT NULL,
    kernel               TEXT NOT NULL,
    governor             TEXT,
    memory_bytes         INTEGER,
    os                   TEXT NOT NULL,
    pywebbench_version   TEXT NOT NULL,
    orchestrator_python  TEXT NOT NULL,
    server_cpus_json     TEXT NOT NULL,
    generator_cpus_json  TEXT NOT NULL,
    config_json          TEXT NOT NULL,
    host_json            TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE IF NOT EXISTS stacks (
    id                   INTEGER PRIMARY KEY,
    run_id               TEXT NOT NULL REFERENCES runs(id),
    key                  TEXT NOT NULL,
    name                 TEXT NOT NULL,
    interpreter          TEXT NOT NULL,
    interpreter_impl     TEXT NOT NULL,
    interpreter_version  TEXT NOT NULL,
    interpreter_build    TEXT NOT NULL,
    interpreter_path     TEXT NOT NULL,
    server               TEXT NOT NULL,
    interface            TEXT NOT NULL,
    framework            TEXT NOT NULL,
    workers              INTEGER NOT NULL,
    threads              INTEGER NOT NULL,
    env_key              TEXT,
    requirements_json    TEXT NOT NULL DEFAULT '[]',
    packages_json        TEXT NOT NULL DEFAULT '{}',
    settings_json        TEXT NOT NULL DEFAULT '{}',
    provision_s          REAL,
    provision_cached     INTEGER,
    worker_max_requests  INTEGER NOT NULL DEFAULT 0,
    interpreter_free_threaded INTEGER NOT NULL DEFAULT 0,
    interpreter_jit      INTEGER NOT NULL DEFAULT 0,
    interpreter_optimizations TEXT NOT NULL DEFAULT '',
    interpreter_gil      TEXT NOT NULL DEFAULT '',
    UNIQUE (run_id, key)
);

CREATE TABLE IF NOT EXISTS cells (
    id                   INTEGER PRIMARY KEY,
    run_id               TEXT NOT NULL REFERENCES runs(id),
    stack_id             INTEGER NOT NULL REFERENCES stacks(id),
    key                  TEXT NOT NULL,
    ordinal              INTEGER NOT NULL,
    workload             TEXT NOT NULL,
    workload_params_json TEXT NOT NULL DEFAULT '{}',
    load_model           TEXT NOT NULL CHECK (load_model IN ('closed', 'open')),
    connections          INTEGER NOT NULL,
    rate                 REAL,
    load_point           TEXT NOT NULL,
    status               TEXT NOT NULL
                         CHECK (status IN ('pending', 'running', 'ok', 'failed', 'interrupted')),
    failure_phase        TEXT,
    failure_reason       TEXT,
    server_cpus_json     TEXT NOT NULL DEFAULT '[]',
    generator_cpus_json  TEXT NOT NULL DEFAULT '[]',
    started_at           TEXT,
    finished_at          TEXT,
    flags_json           TEXT NOT NULL DEFAULT '{}',
    connection_mode      TEXT NOT NULL DEFAULT 'keepalive',
    bind                 TEXT NOT NULL DEFAULT 'tcp',
    protocol             TEXT NOT NULL DEFAULT 'http1',
    UNIQUE (run_id, key)
);

CREATE TABLE IF NOT EXISTS replicates (
    id                   INTEGER PRIMARY KEY,
    cell_id              INTEGER NOT NULL REFERENCES cells(id),
    replicate            INTEGER NOT NULL,
    status               TEXT NOT NULL
                         CHECK (status IN ('running', 'ok', 'failed', 'interrupted')),
    started_at           TEXT NOT NULL,
    pid                  INTEGER,
    cold_start_s         REAL,
    idle_rss_bytes       INTEGER,
    idle_uss_bytes       INTEGER,
    idle_pss_bytes       INTEGER,
    processes            INTEGER,
    log_path             TEXT,
    failure_phase        TEXT,
    failure_reason       TEXT,
    finished_at          TEXT,
    warmup_end           TEXT CHECK (warmup_end IN ('steady', 'cap')),
    warmup_s             REAL,
    steady_start_s       REAL,
    warmup_curve_json    TEXT,
    drift_json           TEXT,
    leak_json            TEXT,
    syscalls_json        TEXT,
    node                 TEXT,
    node_id              TEXT,
    node_cpu_model       TEXT,
    node_cpus            INTEGER,
    flame_json           TEXT,
    instructions_json    TEXT,
    gil_enabled          INTEGER,
    warmup_class TEXT CHECK (warmup_class IN ('flat', 'warm-up', 'slowdown', 'no steady state')),
    measured_curve_json  TEXT,
    UNIQUE (cell_id, replicate)
);

CREATE TABLE IF NOT EXISTS iterations (
    id                   INTEGER PRIMARY KEY,
    cell_id              INTEGER NOT NULL REFERENCES cells(id),
    replicate            INTEGER NOT NULL,
    kind                 TEXT NOT NULL CHECK (kind IN ('warmup', 'measured')),
    idx                  INTEGER NOT NULL,
    started_at           TEXT NOT NULL,
    duration_s           REAL NOT NULL,
    requests             INTEGER NOT NULL,
    errors               INTEGER NOT NULL,
    non_2xx              INTEGER NOT NULL,
    timeouts             INTEGER NOT NULL,
    rps                  REAL NOT NULL,
    latency_mean_us      REAL,
    latency_p50_us       REAL,
    latency_p90_us       REAL,
    latency_p99_us       REAL,
    latency_p999_us      REAL,
    latency_max_us       REAL,
    bytes_in             INTEGER,
    bytes_out            INTEGER,
    generator_cpu_s      REAL,
    generator_bound      INTEGER NOT NULL DEFAULT 0,
    interrupted          INTEGER NOT NULL DEFAULT 0,
    server_alive         INTEGER NOT NULL DEFAULT 1,
    cpu_user_s           REAL,
    cpu_sys_s            REAL,
    requests_per_cpu_s   REAL,
    rss_peak_bytes       INTEGER,
    rss_end_bytes        INTEGER,
    uss_peak_bytes       INTEGER,
    uss_end_bytes        INTEGER,
    pss_peak_bytes       INTEGER,
    pss_end_bytes        INTEGER,
    mem_per_worker_bytes INTEGER,
    threads_peak         INTEGER,
    fds_peak             INTEGER,
    processes_peak       INTEGER,
    ctx_voluntary        INTEGER,
    ctx_involuntary      INTEGER,
    result_json          TEXT NOT NULL,
    processes_seen       INTEGER,
    others_cpu_s         REAL,
    steal_s              REAL,
    interfered           INTEGER NOT NULL DEFAULT 0,
    remeasured_json      TEXT NOT NULL DEFAULT '[]',
    core_rate            REAL,
    UNIQUE (cell_id, replicate, kind, idx)
);

CREATE TABLE IF NOT EXISTS samples (
    iteration_id         INTEGER NOT NULL REFERENCES iterations(id),
    t_s                  REAL NOT NULL,
    cpu_user_s           REAL NOT NULL,
    cpu_sys_s            REAL NOT NULL,
    rss_bytes            INTEGER NOT NULL,
    uss_bytes            INTEGER,
    pss_bytes            INTEGER,
    threads              INTEGER NOT NULL,
    fds                  INTEGER,
    processes            INTEGER NOT NULL,
    ctx_voluntary        INTEGER,
    ctx_involuntary      INTEGER,
    processes_seen       INTEGER
);

CREATE TABLE IF NOT EXISTS failures (
    id                   INTEGER PRIMARY KEY,
    run_id               TEXT NOT NULL REFERENCES runs(id),
    phase                TEXT NOT NULL,
    reason               TEXT NOT NULL,
    at                   TEXT NOT NULL,
    stack_id             INTEGER REFERENCES stacks(id),
    cell_id              INTEGER REFERENCES cells(id),
    replicate            INTEGER,
    detail               TEXT
);

CREATE INDEX IF NOT EXISTS cells_by_run ON cells (run_id, ordinal);
CREATE INDEX IF NOT EXISTS iterations_by_cell ON iterations (cell_id, replicate, kind, idx);
CREATE INDEX IF NOT EXISTS samples_by_iteration ON samples (iteration_id, t_s);
CREATE INDEX IF NOT EXISTS failures_by_run ON failures (run_id);
"""
DDL += _KNEE_TABLES  # the knee tables (version 4), as the migration adds them

# Knees judged on repeated probes (version 9, docs/slo.md): probes per rate, and the highest
# rate whose probes disagreed.
KNEE_FLIPS_DDL = """
ALTER TABLE knees ADD COLUMN flip_rps REAL;
ALTER TABLE knees ADD COLUMN repeats INTEGER NOT NULL DEFAULT 1;
"""
DDL += KNEE_FLIPS_DDL

# Per-agent results of iterations loaded by several agents at once (docs/scale-out.md).
LOAD_AGENTS_DDL = """
CREATE TABLE IF NOT EXISTS load_agents (
    id                   INTEGER PRIMARY KEY,
    iteration_id         INTEGER NOT NULL REFERENCES iterations(id),
    agent                TEXT NOT NULL,
    node                 TEXT NOT NULL,
    node_id              TEXT NOT NULL,
    cpu_model            TEXT,
    cpus_json            TEXT NOT NULL DEFAULT '[]',
    status               TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    failure_reason       TEXT,
    connections          INTEGER NOT NULL,
    rate                 REAL,
    requests             INTEGER,
    rps                  REAL,
    start_lateness_us    REAL,
    schedule_lag_p99_us  REAL,
    generator_cpu_s      REAL,
    generator_bound      INTEGER NOT NULL DEFAULT 0,
    result_json          TEXT,
    UNIQUE (iteration_id, agent)
);
"""
DDL += LOAD_AGENTS_DDL

# Interleaved A/B runs (docs/ab.md): the paired ratio of the run's two cells.
AB_DDL = """
CREATE TABLE IF NOT EXISTS ab_comparisons (
    id                   INTEGER PRIMARY KEY,
    run_id               TEXT NOT NULL REFERENCES runs(id),
    base_cell_id         INTEGER NOT NULL REFERENCES cells(id),
    change_cell_id       INTEGER NOT NULL REFERENCES cells(id),
    ratio                REAL,
    ci_low               REAL,
    ci_high              REAL,
    level                REAL NOT NULL,
    ci_width_asked       REAL NOT NULL,
    verdict              TEXT NOT NULL,
    stopped              TEXT NOT NULL CHECK (stopped IN ('ci', 'budget', 'interrupted')),
    rounds               INTEGER NOT NULL,
    rounds_kept          INTEGER NOT NULL,
    elapsed_s            REAL NOT NULL,
    summary_json         TEXT NOT NULL DEFAULT '{}',
    UNIQUE (run_id)
);
"""
DDL += AB_DDL

# version -> SQL that brings a store from version-1 to version.
MIGRATIONS: dict[int, str] = {
    # One word per idea: a load point's connections are "connections" in the CLI (-c), the
    # study file, the engine and the store alike.
    2: "ALTER TABLE cells RENAME COLUMN concurrency TO connections",
    # Steady state (docs/steady-state.md): how each replicate's warm-up ended, its curve, and
    # the drift and leak tests of its measured iterations.
    3: """
ALTER TABLE replicates ADD COLUMN warmup_end TEXT CHECK (warmup_end IN ('steady', 'cap'));
ALTER TABLE replicates ADD COLUMN warmup_s REAL;
ALTER TABLE replicates ADD COLUMN steady_start_s REAL;
ALTER TABLE replicates ADD COLUMN warmup_curve_json TEXT;
ALTER TABLE replicates ADD COLUMN drift_json TEXT;
ALTER TABLE replicates ADD COLUMN leak_json TEXT
""",
    # The knee under a latency SLO (docs/slo.md): every probe of each search, and its knee.
    4: _KNEE_TABLES,
    # Load agents (docs/scale-out.md): each agent's own result, node, start and self-check
    # for iterations loaded by several agents at once.
    5: LOAD_AGENTS_DDL,
    # Study axes (docs/config.md): a worker recycling setting per stack, a connection mode
    # per cell, the syscalls of a traced window per replicate, and the distinct processes
    # the meter saw per iteration (workers recycled meanwhile).
    6: """
ALTER TABLE stacks ADD COLUMN worker_max_requests INTEGER NOT NULL DEFAULT 0;
ALTER TABLE cells ADD COLUMN connection_mode TEXT NOT NULL DEFAULT 'keepalive';
ALTER TABLE replicates ADD COLUMN syscalls_json TEXT;
ALTER TABLE iterations ADD COLUMN processes_seen INTEGER;
ALTER TABLE samples ADD COLUMN processes_seen INTEGER
""",
    # Where the server under test listened, per cell (docs/config.md#bind): tcp or unix.
    7: "ALTER TABLE cells ADD COLUMN bind TEXT NOT NULL DEFAULT 'tcp'",
    # Parallel cells on Ray (docs/scale-out.md): the node that measured each replicate, and
    # its type (CPU model, cores), so the report can say which node measured which cell.
    8: """
ALTER TABLE replicates ADD COLUMN node TEXT;
ALTER TABLE replicates ADD COLUMN node_id TEXT;
ALTER TABLE replicates ADD COLUMN node_cpu_model TEXT;
ALTER TABLE replicates ADD COLUMN node_cpus INTEGER
""",
    # Where the time goes (docs/flamegraphs.md): the sampled stacks of a window per replicate.
    9: "ALTER TABLE replicates ADD COLUMN flame_json TEXT",
    # Interleaved A/B (docs/ab.md): the paired ratio, CI and verdict of an `ab` run.
    10: AB_DDL,
    # The interference guard (docs/interference.md): the CPU other processes and steal took
    # from an iteration's pinned cores, whether that made it interfered, and the interfered
    # attempts measured again before it. Knees (docs/slo.md): probes per rate by design, and
    # the highest rate whose probes disagreed.
    11: """
ALTER TABLE iterations ADD COLUMN others_cpu_s REAL;
ALTER TABLE iterations ADD COLUMN steal_s REAL;
ALTER TABLE iterations ADD COLUMN interfered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE iterations ADD COLUMN remeasured_json TEXT NOT NULL DEFAULT '[]';
"""
    + KNEE_FLIPS_DDL,
    # Instructions per request (docs/instructions.md): the count of a separate server under
    # valgrind, per replicate.
    12: "ALTER TABLE replicates ADD COLUMN instructions_json TEXT",
    # Interpreters (docs/interpreters.md): what each stack's interpreter is (a free-threaded
    # build, the JIT, PGO/LTO, the PYTHON_GIL it ran with) and whether each replicate's server
    # really ran with the GIL (sys._is_gil_enabled() inside it).
    13: """
ALTER TABLE stacks ADD COLUMN interpreter_free_threaded INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stacks ADD COLUMN interpreter_jit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE stacks ADD COLUMN interpreter_optimizations TEXT NOT NULL DEFAULT '';
ALTER TABLE stacks ADD COLUMN interpreter_gil TEXT NOT NULL DEFAULT '';
ALTER TABLE replicates ADD COLUMN gil_enabled INTEGER
""",
    # Barrett's classes (docs/steady-state.md#classes): each replicate's class from its
    # warm-up curve and its measured series (throughput between progress snapshots).
    14: """
ALTER TABLE replicates ADD COLUMN warmup_class TEXT CHECK (warmup_class IN
    ('flat', 'warm-up', 'slowdown', 'no steady state'));
ALTER TABLE replicates ADD COLUMN measured_curve_json TEXT
""",
    # Core speed (docs/interference.md#core-speed): the probe's median loop rate on the
    # server's cores over each iteration; figures are compared at one core speed.
    15: """
ALTER TABLE iterations ADD COLUMN core_rate REAL
""",
    # What each cell spoke (docs/http2.md#in-a-study): http1 or h2c.
    16: "ALTER TABLE cells ADD COLUMN protocol TEXT NOT NULL DEFAULT 'http1'",
}
