"""The results store: SQLite in WAL mode, every write committed at once.

Each method that writes commits before it returns, so a crash of pywebbench (or a Ctrl-C)
loses at most the iteration in flight, and the file stays readable by any SQLite client.
The schema is in :mod:`pywebbench.store.schema` and docs/store-schema.md.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pywebbench.meter.sampler import Sample
from pywebbench.store.ab_rows import AbComparison
from pywebbench.store.knee_rows import Knee, KneeProbe
from pywebbench.store.model import (
    TABLE_CLASSES,
    Cell,
    Failure,
    Iteration,
    LoadAgentRow,
    Replicate,
    Run,
    StackRow,
    Study,
)
from pywebbench.store.schema import DDL, MIGRATIONS, SCHEMA_VERSION

T = TypeVar("T")

DEFAULT_FILENAME = "pywebbench.sqlite"


class StoreError(Exception):
    """The store cannot be opened or a request names something it does not hold."""


def utcnow() -> str:
    """Current time as an ISO 8601 UTC string with milliseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    """A sortable, unique run id: ``YYYYMMDD-HHMMSS-xxxx`` (UTC)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def _run_script(db: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated statements inside the caller's transaction (no executescript,
    which would commit)."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def _columns(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def _bool_columns(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if "bool" in str(f.type)}


def _from_row(cls: type[T], row: sqlite3.Row) -> T:
    data = dict(row)
    for name in _bool_columns(cls):
        if data.get(name) is not None:
            data[name] = bool(data[name])
    return cls(**data)


class Store:
    """A pywebbench results store at ``path`` (a SQLite file, created when missing).

    ``Store(path, create=False)`` refuses to create a new file (for readers such as
    ``pywebbench runs`` and the reports). Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike[str], *, create: bool = True) -> None:
        self.path = Path(path)
        if not self.path.exists():
            if not create:
                raise StoreError(f"no results store at {self.path}")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                str(self.path), isolation_level=None, timeout=30, check_same_thread=False
            )
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} is not a readable pywebbench store: {exc}") from exc

    # -- lifecycle -------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path} has schema version {version}, newer than this pywebbench "
                f"understands ({SCHEMA_VERSION}); upgrade pywebbench"
            )
        if version == 0:
            tables = self._db.execute(
                "SELECT count(*) FROM sqlite_master WHERE type='table'"
            ).fetchone()[0]
            if tables:
                raise StoreError(f"{self.path} is an SQLite file but not a pywebbench store")
            with self.transaction():
                _run_script(self._db, DDL)
                self._db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                    (str(SCHEMA_VERSION),),
                )
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            return
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self.transaction():
                _run_script(self._db, MIGRATIONS[target])
                self._db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(target),)
                )
                self._db.execute(f"PRAGMA user_version = {target}")

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        """Close the connection (the WAL is checkpointed by SQLite)."""
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run several statements atomically; committed on exit, rolled back on error."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        else:
            self._db.execute("COMMIT")

    # -- writing ---------------------------------------------------------------------------

    def _insert(self, table: str, obj: object, *, keep_id: bool = False) -> int:
        cols = [c for c in _columns(type(obj)) if keep_id or c != "id" or table in ("runs",)]
        values = [getattr(obj, c) for c in cols]
        sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
        cur = self._db.execute(sql, values)
        return int(cur.lastrowid or 0)

    def _update(self, table: str, key: str, key_value: object, changes: dict[str, Any]) -> None:
        if not changes:
            return
        # Only the table's own column names ever reach the SQL text: the names come from the
        # row class, never from the caller's keywords.
        columns = [c for c in _columns(TABLE_CLASSES[table]) if c in changes and c != key]
        unknown = set(changes) - set(columns)
        if unknown:
            raise StoreError(f"unknown {table} column(s): {', '.join(sorted(unknown))}")
        sets = ", ".join(f"{c} = ?" for c in columns)
        self._db.execute(
            f"UPDATE {table} SET {sets} WHERE {key} = ?",
            [*(changes[c] for c in columns), key_value],
        )

    def create_run(self, run: Run) -> str:
        """Insert a new run row; returns its id."""
        self._insert("runs", run)
        return run.id

    def update_run(self, run_id: str, **changes: Any) -> None:
        """Change columns of a run (``status``, ``finished_at``...)."""
        self._update("runs", "id", run_id, changes)

    def add_stack(self, stack: StackRow) -> int:
        """Insert a stack (or return the id of the one with the same run and key)."""
        row = self._db.execute(
            "SELECT id FROM stacks WHERE run_id = ? AND key = ?", (stack.run_id, stack.key)
        ).fetchone()
        if row:
            return int(row[0])
        return self._insert("stacks", stack)

    def update_stack(self, stack_id: int, **changes: Any) -> None:
        """Change columns of a stack (``packages_json``, ``settings_json``, ``provision_s``...)."""
        self._update("stacks", "id", stack_id, changes)

    def add_cell(self, cell: Cell) -> int:
        """Insert a cell (or return the id of the one with the same run and key)."""
        row = self._db.execute(
            "SELECT id FROM cells WHERE run_id = ? AND key = ?", (cell.run_id, cell.key)
        ).fetchone()
        if row:
            return int(row[0])
        return self._insert("cells", cell)

    def update_cell(self, cell_id: int, **changes: Any) -> None:
        """Change columns of a cell (``status``, ``failure_phase``, ``flags_json``...)."""
        self._update("cells", "id", cell_id, changes)

    def add_replicate(self, rep: Replicate) -> int:
        """Insert a replicate (one fresh server process of a cell)."""
        return self._insert("replicates", rep)

    def update_replicate(self, replicate_id: int, **changes: Any) -> None:
        self._update("replicates", "id", replicate_id, changes)

    def add_iteration(self, it: Iteration, samples: Sequence[Sample] = ()) -> int:
        """Insert one iteration and its resource samples in one committed transaction.

        ``samples[i].iteration_id`` is filled in here.
        """
        with self.transaction():
            iteration_id = self._insert("iterations", it)
            if samples:
                cols = [c for c in _columns(Sample)]
                rows = [
                    [iteration_id if c == "iteration_id" else getattr(s, c) for c in cols]
                    for s in samples
                ]
                self._db.executemany(
                    f"INSERT INTO samples ({', '.join(cols)}) "
                    f"VALUES ({', '.join('?' * len(cols))})",
                    rows,
                )
        it.id = iteration_id
        return iteration_id

    def add_load_agents(self, rows: Sequence[LoadAgentRow]) -> None:
        """Insert the per-agent rows of one iteration in one committed transaction."""
        with self.transaction():
            for row in rows:
                row.id = self._insert("load_agents", row)

    def load_agents(self, iteration_id: int) -> list[LoadAgentRow]:
        """The per-agent rows of an iteration (none when one generator loaded it)."""
        return self._select(
            LoadAgentRow,
            "SELECT * FROM load_agents WHERE iteration_id = ? ORDER BY agent",
            [iteration_id],
        )

    def add_failure(self, failure: Failure) -> int:
        """Record a failure (one line reason, phase, optional detail such as a log tail)."""
        return self._insert("failures", failure)

    def add_knee_probe(self, probe: KneeProbe) -> int:
        """Record one probe of a knee search (docs/slo.md)."""
        return self._insert("knee_probes", probe)

    def add_knee(self, knee: Knee) -> int:
        """Record how a replicate's knee search ended (once it ended by itself)."""
        return self._insert("knees", knee)

    # -- reading ---------------------------------------------------------------------------

    def add_ab_comparison(self, row: AbComparison) -> int:
        """Record the paired ratio of an A/B run (docs/ab.md)."""
        return self._insert("ab_comparisons", row)

    def _select(self, cls: type[T], sql: str, params: Iterable[object] = ()) -> list[T]:
        return [_from_row(cls, r) for r in self._db.execute(sql, list(params))]

    def runs(self) -> list[Run]:
        """All runs, oldest first."""
        return self._select(Run, "SELECT * FROM runs ORDER BY created_at, id")

    def run(self, run_id: str) -> Run:
        """The run with this id, or the unique run whose id starts with it."""
        rows = self._select(Run, "SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            rows = self._select(
                Run, "SELECT * FROM runs WHERE id LIKE ? ORDER BY id", (run_id + "%",)
            )
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise StoreError(f"no run {run_id!r} in {self.path}")
        raise StoreError(f"run id {run_id!r} is ambiguous: {', '.join(r.id for r in rows)}")

    def latest_run(self) -> Run | None:
        """The newest run, or None for an empty store."""
        rows = self._select(Run, "SELECT * FROM runs ORDER BY created_at DESC, id DESC LIMIT 1")
        return rows[0] if rows else None

    def stacks(self, run_id: str) -> list[StackRow]:
        return self._select(StackRow, "SELECT * FROM stacks WHERE run_id = ? ORDER BY id", [run_id])

    def cells(self, run_id: str) -> list[Cell]:
        return self._select(
            Cell, "SELECT * FROM cells WHERE run_id = ? ORDER BY ordinal, id", [run_id]
        )

    def replicates(self, cell_id: int) -> list[Replicate]:
        return self._select(
            Replicate, "SELECT * FROM replicates WHERE cell_id = ? ORDER BY replicate", [cell_id]
        )

    def iterations(self, cell_id: int) -> list[Iteration]:
        return self._select(
            Iteration,
            "SELECT * FROM iterations WHERE cell_id = ? ORDER BY replicate, kind DESC, idx",
            [cell_id],
        )

    def samples(self, iteration_id: int) -> list[Sample]:
        return self._select(
            Sample, "SELECT * FROM samples WHERE iteration_id = ? ORDER BY t_s", [iteration_id]
        )

    def failures(self, run_id: str) -> list[Failure]:
        return self._select(
            Failure, "SELECT * FROM failures WHERE run_id = ? ORDER BY id", [run_id]
        )

    def resolve_run_ids(self, run_ids: Sequence[str] = ()) -> list[str]:
        """Full ids for the given ids or prefixes; the latest run when none are given."""
        if run_ids:
            return [self.run(r).id for r in run_ids]
        latest = self.latest_run()
        if latest is None:
            raise StoreError(f"{self.path} holds no runs yet")
        return [latest.id]

    def load_study(self, run_ids: Sequence[str] = ()) -> Study:
        """Every row of the given runs (default: the latest run) as typed dataclasses."""
        ids = self.resolve_run_ids(run_ids)
        marks = ", ".join("?" * len(ids))
        cells_sql = f"SELECT id FROM cells WHERE run_id IN ({marks})"
        its_sql = f"SELECT id FROM iterations WHERE cell_id IN ({cells_sql})"
        return Study(
            runs=self._select(Run, f"SELECT * FROM runs WHERE id IN ({marks}) ORDER BY id", ids),
            stacks=self._select(
                StackRow, f"SELECT * FROM stacks WHERE run_id IN ({marks}) ORDER BY id", ids
            ),
            cells=self._select(
                Cell,
                f"SELECT * FROM cells WHERE run_id IN ({marks}) ORDER BY run_id, ordinal",
                ids,
            ),
            replicates=self._select(
                Replicate,
                f"SELECT * FROM replicates WHERE cell_id IN ({cells_sql}) ORDER BY id",
                ids,
            ),
            iterations=self._select(
                Iteration,
                f"SELECT * FROM iterations WHERE cell_id IN ({cells_sql}) ORDER BY id",
                ids,
            ),
            samples=self._select(
                Sample,
                f"SELECT * FROM samples WHERE iteration_id IN ({its_sql}) "
                "ORDER BY iteration_id, t_s",
                ids,
            ),
            failures=self._select(
                Failure, f"SELECT * FROM failures WHERE run_id IN ({marks}) ORDER BY id", ids
            ),
            knee_probes=self._select(
                KneeProbe,
                f"SELECT * FROM knee_probes WHERE cell_id IN ({cells_sql}) ORDER BY id",
                ids,
            ),
            knees=self._select(
                Knee, f"SELECT * FROM knees WHERE cell_id IN ({cells_sql}) ORDER BY id", ids
            ),
            load_agents=self._select(
                LoadAgentRow,
                f"SELECT * FROM load_agents WHERE iteration_id IN ({its_sql}) ORDER BY id",
                ids,
            ),
            ab_comparisons=self._select(
                AbComparison,
                f"SELECT * FROM ab_comparisons WHERE run_id IN ({marks}) ORDER BY id",
                ids,
            ),
        )

    def import_study(self, study: Study) -> list[str]:
        """Insert every row of ``study`` (e.g. read back from a JSON export).

        Integer ids are re-assigned and references remapped, so a study can be merged into a
        store that already holds other runs. Runs whose id already exists are refused.
        """
        with self.transaction():
            for run in study.runs:
                if self._db.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
                    raise StoreError(f"run {run.id} is already in {self.path}")
                self._insert("runs", run)
            stack_ids: dict[int | None, int] = {}
            cell_ids: dict[int | None, int] = {}
            for s in study.stacks:
                stack_ids[s.id] = self._insert("stacks", dataclasses.replace(s, id=None))
            for c in study.cells:
                new = dataclasses.replace(c, id=None, stack_id=stack_ids[c.stack_id])
                cell_ids[c.id] = self._insert("cells", new)
            for r in study.replicates:
                self._insert(
                    "replicates", dataclasses.replace(r, id=None, cell_id=cell_ids[r.cell_id])
                )
            it_ids: dict[int | None, int] = {}
            for it in study.iterations:
                new_it = dataclasses.replace(it, id=None, cell_id=cell_ids[it.cell_id])
                it_ids[it.id] = self._insert("iterations", new_it)
            for smp in study.samples:
                self._insert(
                    "samples", dataclasses.replace(smp, iteration_id=it_ids[smp.iteration_id])
                )
            for f in study.failures:
                self._insert(
                    "failures",
                    dataclasses.replace(
                        f,
                        id=None,
                        stack_id=stack_ids.get(f.stack_id),
                        cell_id=cell_ids.get(f.cell_id),
                    ),
                )
            for agent in study.load_agents:
                self._insert(
                    "load_agents",
                    dataclasses.replace(agent, id=None, iteration_id=it_ids[agent.iteration_id]),
                )
            for table in ("knee_probes", "knees"):
                for row in getattr(study, table):
                    new_row = dataclasses.replace(row, id=None, cell_id=cell_ids[row.cell_id])
                    self._insert(table, new_row)
            for ab in study.ab_comparisons:
                self._insert(
                    "ab_comparisons",
                    dataclasses.replace(
                        ab,
                        id=None,
                        base_cell_id=cell_ids[ab.base_cell_id],
                        change_cell_id=cell_ids[ab.change_cell_id],
                    ),
                )
        return [r.id for r in study.runs]


def study_to_dict(study: Study) -> dict[str, Any]:
    """A JSON-ready document of a study: one list of row objects per table."""
    doc: dict[str, Any] = {"format": "pywebbench-study", "schema_version": SCHEMA_VERSION}
    for table in TABLE_CLASSES:
        doc[table] = [dataclasses.asdict(row) for row in getattr(study, table)]
    return doc


def study_from_dict(doc: dict[str, Any]) -> Study:
    """The inverse of :func:`study_to_dict` (unknown columns are an error)."""
    if doc.get("format") != "pywebbench-study":
        raise StoreError("not a pywebbench study export (missing format: pywebbench-study)")
    kwargs: dict[str, list[Any]] = {}
    for table, cls in TABLE_CLASSES.items():
        kwargs[table] = [cls(**row) for row in doc.get(table, [])]
    return Study(**kwargs)


def dumps_study(study: Study) -> str:
    return json.dumps(study_to_dict(study), indent=1, sort_keys=False)
