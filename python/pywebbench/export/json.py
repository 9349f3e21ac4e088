"""``pywebbench export --format json``: every table of the runs as one document
(``format: pywebbench-study``, docs/store-schema.md), which imports back into a store; with a
mix, also one row per endpoint per measured iteration under ``endpoints``."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pywebbench.export.base import ExportOptions
from pywebbench.store.db import Store, dumps_study, study_to_dict
from pywebbench.store.endpoints import endpoint_rows


def export_json(store: Store, run_ids: Sequence[str] = ()) -> str:
    """The runs as one JSON document (``format: pywebbench-study``); with a mix, the
    figures of each endpoint per measured iteration under ``endpoints`` too (rows of
    :func:`~pywebbench.store.endpoints.endpoint_rows`; derived from the iterations, so an
    import ignores them)."""
    study = store.load_study(run_ids)
    rows = endpoint_rows(study)
    if not rows:
        return dumps_study(study)
    return json.dumps({**study_to_dict(study), "endpoints": rows}, indent=1, sort_keys=False)


def write(store: Store, options: ExportOptions) -> str:
    """The exporter of the registry (:data:`pywebbench.export.EXPORTERS`)."""
    return export_json(store, options.runs)
