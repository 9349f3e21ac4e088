"""Meter: resource use of a server's whole process tree (master and workers), with psutil.

- :mod:`pywebbench.meter.sampler`: :func:`snapshot` (the tree once, e.g. idle memory) and
  :class:`Sampler` (a background thread sampling it while the load runs), summarized as a
  :class:`MeterSummary`: CPU user/system seconds, RSS and USS/PSS, threads, fds, switches.
"""

from pywebbench.meter.sampler import (
    DEFAULT_INTERVAL_S,
    MeterSummary,
    Sampler,
    TreeSnapshot,
    snapshot,
    summarize,
    tree,
)

__all__ = [
    "DEFAULT_INTERVAL_S",
    "MeterSummary",
    "Sampler",
    "TreeSnapshot",
    "snapshot",
    "summarize",
    "tree",
]
