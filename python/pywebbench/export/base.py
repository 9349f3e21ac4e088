"""What every export format shares: the options of ``pywebbench export``, the exporter's
shape, its error, and the names and groupings of cells the per-cell formats use."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pywebbench.files import write_atomic
from pywebbench.store.db import Store
from pywebbench.store.model import Cell, Iteration, StackRow, Study


class ExportError(ValueError):
    """The runs cannot be written in the asked format (e.g. two runs in one pyperf file)."""


@dataclass(frozen=True)
class ExportOptions:
    """What ``pywebbench export`` asks of a format: the runs (id prefixes; none: the latest),
    the CSV table and the pyperf metric (each format reads the ones it has)."""

    runs: Sequence[str] = ()
    table: str = "flat"
    metric: str = "rps"


#: One document's text, or (a format written into a directory) file name -> text.
ExportOutput = str | dict[str, str]


@dataclass(frozen=True)
class Exporter:
    """One format of ``pywebbench export``: ``write`` reads the store and gives the output;
    ``directory`` says it is files into the ``-o`` directory, not one document."""

    name: str
    write: Callable[[Store, ExportOptions], ExportOutput]
    directory: bool = False
    #: What the files in the directory are, for the error without ``-o``.
    files: str = ""


def cell_name(stack: StackRow, cell: Cell) -> str:
    """The name of a cell in exports: ``<stack key> <workload>@<load point>``."""
    return f"{stack.key} {cell.workload}@{cell.load_point}"


def run_date(iso: str) -> str:
    """A stored ISO timestamp as ``YYYY-MM-DD HH:MM:SS``."""
    return iso[:19].replace("T", " ")


def iterations_by_replicate(study: Study, cell: Cell) -> dict[int, list[Iteration]]:
    """The cell's iterations that were not interrupted, every kind, by replicate."""
    assert cell.id is not None
    groups: dict[int, list[Iteration]] = {}
    for it in study.iterations_of(cell.id, kind=None):
        if not it.interrupted:
            groups.setdefault(it.replicate, []).append(it)
    return groups


def write_files(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write ``files`` into ``directory`` (created), each through a temporary file and a
    rename; returns the paths in order."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in files.items():
        path = directory / name
        write_atomic(path, text)
        out.append(path)
    return out
