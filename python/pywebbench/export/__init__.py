"""What ``pywebbench export`` writes, one module per format, and their registry (the way
hyperfine's ``src/export/`` has one exporter per format behind one interface).

- :mod:`~pywebbench.export.json`: every table of the runs, imports back into a store;
- :mod:`~pywebbench.export.csv`: one table, by default one row per iteration;
- :mod:`~pywebbench.export.pyperf`: pyperf's JSON, one run, one benchmark per cell;
- :mod:`~pywebbench.export.hdr`: HdrHistogram interval logs, one file per cell;
- :mod:`~pywebbench.export.reference`: a reference record per run, what the published
  table pools (docs/reference-table.md).

Each module's ``write(store, options)`` is its :class:`~pywebbench.export.base.Exporter`;
:data:`EXPORTERS` maps the ``--format`` names to them, in the order ``--help`` lists them.
The report (HTML, Markdown: :mod:`pywebbench.report`) and the layouts of ``compare`` and
``ab`` are those commands' own products and stay with them.
"""

from __future__ import annotations

from pywebbench.export import csv, hdr, json, pyperf, reference
from pywebbench.export.base import Exporter

#: ``--format`` name -> its exporter.
EXPORTERS: dict[str, Exporter] = {
    e.name: e
    for e in (
        Exporter("json", json.write),
        Exporter("csv", csv.write),
        Exporter("pyperf", pyperf.write),
        Exporter("hdr", hdr.write, directory=True, files="one .hlog per cell"),
        Exporter("reference", reference.write, directory=True, files="one record per run"),
    )
}
