"""The analysis layer: statistics and rules as pure functions on plain data.

Nothing here starts a process, loads a server or touches the store (one helper,
:func:`pywebbench.analysis.steady.preload_in_background`, imports scipy and ruptures on a
thread so that a command's first rule does not wait for them); ``run``, ``ab``, ``compare``
and ``report`` import from here, never the other way round
(``tests/structure/test_imports.py``).

- :mod:`~pywebbench.analysis.stats`: medians and their intervals;
- :mod:`~pywebbench.analysis.warmup`: when a process has stopped warming up, one rule for a
  lone process and for a process of a group;
- :mod:`~pywebbench.analysis.steady`: changepoints and slopes, drift, leak;
- :mod:`~pywebbench.analysis.warmup_class`: Barrett's classes of warm-up curves;
- :mod:`~pywebbench.analysis.modes`: whether replicates settled at one level;
- :mod:`~pywebbench.analysis.ratio`: ratios of medians with their intervals, plain ratios;
- :mod:`~pywebbench.analysis.group`: the figures of an interleaved group (every stack's
  level from slices of the same rounds, ratios with intervals over server processes);
- :mod:`~pywebbench.analysis.estimate`: ``ab``'s estimate, a group of two;
- :mod:`~pywebbench.analysis.ties`: when neighbours in a ranking tie;
- :mod:`~pywebbench.analysis.elasticity`: how far a figure follows the core's speed;
- :mod:`~pywebbench.analysis.pooling`: the runs of a study pooled (random effects: tau, the
  HKSJ interval, the prediction interval for one more run).
"""
