"""Interleaved A/B: two variants of a web app measured in the same minutes (docs/ab.md).

Both variants' servers stay up, pinned to the same cores; one engine run loads them in
turn, in short slices on connections kept open (:mod:`pywebbench.load.sliced`); the ratio
CHANGE/BASE of requests/s comes from the slices paired within each round, with its CI, and
the run stops when the CI is as narrow as asked or the time budget ends.
"""
