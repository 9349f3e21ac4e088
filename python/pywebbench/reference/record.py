"""A reference record: one run, reduced to what pooling reads and the host facts that move
ratios between machines, a few KB of JSON kept in the repository under ``reference/runs/``
(docs/reference-table.md). A study's full JSON export is megabytes; this keeps, for each
interleaved group, each stack's ratio to the group's reference with its 95% interval, its
req/s, processes and the group's rounds.

The format (``"format": "pywebbench-reference-run"``, :data:`VERSION`)::

    {"format": "pywebbench-reference-run", "version": 1,
     "run": {"id", "created_at", "finished_at", "profile", "seed", "design",
             "pywebbench_version", "commit": {"revision", "dirty"} | null},
     "host": {"machine", "cpu_model", "cpu_count", "cpu_cache_bytes", "kernel", "os",
              "governor", "memory_bytes", "pypy_gc"},
     "not_pooled": 0,
     "groups": [{"interpreter", "interpreter_version", "workload", "load_point",
                 "reference", "df", "rounds",
                 "cells": {"<stack key>": {"ratio", "low", "high", "rps", "rps_low",
                                           "rps_high", "processes"}}}]}

``machine`` is the hostname's SHA-256 (its first 12 hex digits), never the name itself;
with ``cpu_model`` and ``cpu_cache_bytes`` it tells machines apart (:func:`machine_key`).
``not_pooled`` counts the run's measured cells without group figures (cells measured one
after another). A reader refuses a newer version than it knows, and any
record that lacks what pooling needs (:class:`RecordError`, one line naming the file).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pywebbench.analysis.group import GEOMETRIC_MEAN
from pywebbench.analysis.pooling import RunEstimate, reference_estimate
from pywebbench.reference.estimates import host_label
from pywebbench.store.model import Study

FORMAT = "pywebbench-reference-run"
#: The format's version: a reader refuses a newer one.
VERSION = 1
#: The cell fields a record keeps from a group's figures (``flags["group"]``).
CELL_FIELDS = ("ratio", "low", "high", "rps", "rps_low", "rps_high", "processes")


class RecordError(ValueError):
    """A run that cannot be recorded, or a record that cannot be read (one line)."""


def machine_id(hostname: str) -> str:
    """A hostname in a record without naming it (the first 12 hex digits of its SHA-256)."""
    return hashlib.sha256(hostname.encode()).hexdigest()[:12]


def machine_key(machine: str, cpu_model: str, caches: Any) -> str:
    """What tells two records' machines apart: the hostname's :func:`machine_id` with the
    CPU and caches the machine reported. A hostname alone does not: VMs and containers
    share names such as ``vm`` or ``localhost`` (an Intel Xeon and an AMD EPYC VM were both
    ``vm``). The same name on the same CPU kind stays one machine."""
    if not machine:
        return ""
    return machine_id(f"{machine}|{cpu_model}|{caches}")


def record_of(study: Study, run_id: str) -> dict[str, Any]:
    """The reference record of stored run ``run_id`` of ``study``; RecordError when it did
    not complete or has no interleaved group figures (nothing to pool)."""
    run = next((r for r in study.runs if r.id == run_id), None)
    if run is None:
        raise RecordError(f"run {run_id} is not in the study read")
    if run.status != "completed":
        raise RecordError(
            f"run {run_id} is {run.status}: only a completed run goes into the reference table"
        )
    stacks = {s.id: s for s in study.stacks if s.run_id == run_id}
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    not_pooled = 0
    for cell in study.cells:
        if cell.run_id != run_id:
            continue
        flags = cell.flags.get("group")
        stack = stacks.get(cell.stack_id)
        if not isinstance(flags, dict) or stack is None:
            not_pooled += cell.status == "ok"
            continue
        where = (stack.interpreter, cell.workload, cell.load_point)
        group = groups.setdefault(
            where,
            {
                "interpreter": stack.interpreter,
                "interpreter_version": stack.interpreter_version,
                "workload": cell.workload,
                "load_point": cell.load_point,
                "reference": str(flags.get("reference") or GEOMETRIC_MEAN),
                "df": int(flags.get("df") or 0),
                "rounds": int(flags.get("rounds") or 0),
                "cells": {},
            },
        )
        cell_doc: dict[str, Any] = {k: flags.get(k) for k in CELL_FIELDS}
        for k in ("rps", "rps_low", "rps_high"):  # shown, not pooled: to 0.1 req/s
            value = cell_doc[k]
            if isinstance(value, float) and math.isfinite(value):
                cell_doc[k] = round(value, 1)
        group["cells"][stack.key] = cell_doc
    if not groups:
        raise RecordError(
            f"run {run_id} has no interleaved group figures: the reference table pools the "
            "ratios of an interleaved study (the quick study's design)"
        )
    host = run.host
    config = run.config
    load: dict[str, Any] = config.get("load") or {}
    if not isinstance(load, dict):
        load = {}
    return {
        "format": FORMAT,
        "version": VERSION,
        "run": {
            "id": run.id,
            "created_at": run.created_at,
            "finished_at": run.finished_at,
            "profile": run.profile,
            "seed": load.get("seed"),
            "design": load.get("design"),
            "pywebbench_version": run.pywebbench_version,
            "commit": host.get("pywebbench_git"),
        },
        "host": {
            "machine": machine_id(run.hostname),
            "cpu_model": run.cpu_model,
            "cpu_count": run.cpu_count,
            "cpu_cache_bytes": host.get("cpu_cache_bytes"),
            "kernel": run.kernel,
            "os": run.os,
            "governor": run.governor,
            "memory_bytes": run.memory_bytes,
            "pypy_gc": host.get("pypy_gc"),
        },
        "not_pooled": not_pooled,
        "groups": [groups[k] for k in sorted(groups)],
    }


def dumps(record: Mapping[str, Any]) -> str:
    """A record as its file holds it: one line per cell, so that a diff reads."""

    def out(value: Any, indent: int) -> str:
        if isinstance(value, dict) and any(isinstance(v, dict | list) for v in value.values()):
            pad = " " * (indent + 1)
            items = [f"{pad}{json.dumps(k)}: {out(v, indent + 1)}" for k, v in value.items()]
            return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
        if isinstance(value, list) and any(isinstance(v, dict | list) for v in value):
            pad = " " * (indent + 1)
            items = [pad + out(v, indent + 1) for v in value]
            return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
        return json.dumps(value)

    return out(record, 0) + "\n"


@dataclass(frozen=True)
class Record:
    """A record read back (:func:`read_record`), with what the table says of its run."""

    path: Path | None
    doc: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.doc["run"]["id"])

    @property
    def created_at(self) -> str:
        return str(self.doc["run"]["created_at"])

    @property
    def machine(self) -> str:
        """What tells the run's machine apart (:func:`machine_key`)."""
        host = self.doc["host"]
        return machine_key(
            str(host.get("machine") or ""),
            str(host.get("cpu_model") or ""),
            host.get("cpu_cache_bytes"),
        )

    @property
    def host(self) -> str:
        """The host label pooling uses (the CPU model), as for a stored run."""
        return host_label(str(self.doc["host"].get("cpu_model") or ""), self.machine)

    def estimates(self) -> list[RunEstimate]:
        """The run's ratios to each group's reference, as pooling reads them: the same
        estimates :func:`pywebbench.reference.estimates.study_estimates` reads from the
        stored run."""
        out = []
        for group in self.doc["groups"]:
            cells = group["cells"]
            for stack, cell in cells.items():
                flags = {
                    "reference": group["reference"],
                    "df": group["df"],
                    **cell,
                    "vs": {other: None for other in cells if other != stack},
                }
                est = reference_estimate(
                    self.run_id,
                    self.host,
                    stack,
                    group["workload"],
                    group["load_point"],
                    flags,
                )
                if est is not None:
                    out.append(est)
        return out


def check_record(doc: Any, where: str) -> dict[str, Any]:
    """``doc`` if it is a record this version reads; RecordError naming ``where`` and what
    is wrong otherwise."""

    def bad(why: str) -> RecordError:
        return RecordError(f"{where}: {why}")

    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise bad(f'not a reference record (no "format": "{FORMAT}")')
    version = doc.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise bad('"version" is not a whole number')
    if version > VERSION:
        raise bad(f"format version {version} is newer than this pywebbench reads ({VERSION})")
    run, host, groups = doc.get("run"), doc.get("host"), doc.get("groups")
    if not isinstance(run, dict) or not isinstance(run.get("id"), str) or not run["id"]:
        raise bad('"run.id" is missing')
    if not isinstance(run.get("created_at"), str):
        raise bad('"run.created_at" is missing')
    if not isinstance(host, dict):
        raise bad('"host" is missing')
    if not isinstance(groups, list) or not groups:
        raise bad('"groups" is missing or empty')
    for i, group in enumerate(groups):
        if not isinstance(group, dict):
            raise bad(f"groups[{i}] is not an object")
        for name in ("workload", "load_point", "reference"):
            if not isinstance(group.get(name), str):
                raise bad(f"groups[{i}].{name} is missing")
        if not isinstance(group.get("df"), int) or not isinstance(group.get("cells"), dict):
            raise bad(f"groups[{i}] lacks df or cells")
        for stack, cell in group["cells"].items():
            ratio = cell.get("ratio") if isinstance(cell, dict) else None
            if not isinstance(ratio, int | float) or not (ratio > 0 and math.isfinite(ratio)):
                raise bad(f"groups[{i}].cells[{stack}] has no positive ratio")
    return doc


def read_record(path: Path) -> Record:
    """The record in file ``path``; RecordError (one line, naming the file) when it cannot
    be read."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise RecordError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RecordError(f"{path}: not JSON ({exc})") from None
    return Record(path, check_record(doc, str(path)))


def read_folder(folder: Path) -> list[Record]:
    """Every record (``*.json``) in ``folder``, oldest run first; none when the folder does
    not exist. RecordError for a bad file or two records of one run."""
    if not folder.is_dir():
        return []
    records = [read_record(p) for p in sorted(folder.glob("*.json"))]
    seen: dict[str, Path | None] = {}
    for r in records:
        if r.run_id in seen:
            raise RecordError(f"{r.path}: run {r.run_id} is recorded twice (also {seen[r.run_id]})")
        seen[r.run_id] = r.path
    return sorted(records, key=lambda r: (r.created_at, r.run_id))


def file_name(run_id: str) -> str:
    """The record's file name in the folder."""
    return f"{run_id}.json"


def records_of(study: Study, run_ids: Iterable[str]) -> dict[str, str]:
    """File name -> text of the record of each run (all built before any is written)."""
    return {file_name(r): dumps(record_of(study, r)) for r in run_ids}
