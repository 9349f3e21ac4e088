"""The analysis layer: statistics and rules as pure functions on plain data.

Nothing here starts a process, loads a server or touches the store; ``run``, ``ab``,
``compare`` and ``report`` import from here, never the other way round.

- :mod:`pywebbench.analysis.group`: the figures of an interleaved group (every stack's level
  from slices of the same rounds, ratios and ties with intervals over server processes),
  and each process's warm-up judged against the round.
"""
