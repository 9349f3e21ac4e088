"""The published reference table (issue 65, docs/reference-table.md): each run kept in the
repository as a compact record (:mod:`~pywebbench.reference.record`), their ratios pooled
into the table (:mod:`~pywebbench.reference.table`), and a user's run held against it
(:mod:`~pywebbench.reference.check`). :mod:`~pywebbench.reference.estimates` reads the same
per-run estimates out of a store's runs, so a record and the run it came from pool alike.
"""
