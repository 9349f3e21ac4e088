"""``pywebbench export --format reference -o reference/runs``: each run as a reference
record, ``<run id>.json``, a few KB: what the published table pools, with the host facts
(:mod:`pywebbench.reference.record`, docs/reference-table.md)."""

from __future__ import annotations

from pywebbench.export.base import ExportError, ExportOptions
from pywebbench.reference.record import RecordError, records_of
from pywebbench.store.db import Store


def write(store: Store, options: ExportOptions) -> dict[str, str]:
    """The exporter of the registry (:data:`pywebbench.export.EXPORTERS`): file name ->
    record, one per run; every record is built before any is written."""
    study = store.load_study(options.runs)
    try:
        return records_of(study, [r.id for r in study.runs])
    except RecordError as exc:
        raise ExportError(str(exc)) from None
