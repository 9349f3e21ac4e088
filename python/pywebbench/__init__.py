"""pywebbench: the benchmark suite for Python web stacks.

The package follows the pipeline of a study: ``catalogue`` (what can run) -> ``provision``
(virtualenvs, services) -> ``launch`` (pinned server processes) -> ``verify`` (response rules)
-> ``load`` (the Rust engine) -> ``meter`` (process-tree sampling) -> ``store`` (SQLite)
-> ``report`` (HTML, Markdown). ``run`` drives the pipeline over a matrix.
"""

__version__ = "0.1.0"
