"""A fault study's plan: the mix, an optional intensity sweep, and how the good clients arrive.

``--faults`` text (docs/faults.md) is a mix (:mod:`pywebbench.faults.mix`) plus, optionally:

- an **intensity sweep**: bare sizes after one held kind, ``slowloris=10,100,500,1000``: one
  measurement per size (at most 8, increasing), each on a server not attacked before;
- ``fresh=20%`` (or ``fresh=0.2``): the share of the good clients' connections that open a
  new connection for every request, like browsers arriving (default 20 %; ``fresh=0``: all
  keep-alive);
- ``lead=1s``: how long the attack runs before the good clients start (default 1 s), so
  arriving clients meet a running attack.
"""

from __future__ import annotations

import dataclasses
import re

from pywebbench.faults.mix import ALIASES, KINDS, FaultMixError, FaultSpec, format_mix, parse_mix

__all__ = [
    "DEFAULT_FRESH_SHARE",
    "DEFAULT_LEAD_S",
    "MAX_SWEEP_SIZES",
    "FaultPlan",
    "parse_plan",
]

#: Share of the good clients' connections that reconnect for every request.
DEFAULT_FRESH_SHARE = 0.2
#: Seconds the attack runs before the good clients start.
DEFAULT_LEAD_S = 1.0
#: Most sizes one sweep may measure (each is a fresh server and two load runs).
MAX_SWEEP_SIZES = 8
MAX_LEAD_S = 30.0


@dataclasses.dataclass(frozen=True)
class FaultPlan:
    """What a fault phase runs: one mix per sweep size (one mix without a sweep)."""

    text: str
    specs: list[FaultSpec]
    #: The swept held kind and its sizes (connections), or None and [].
    kind: str | None = None
    sizes: list[int] = dataclasses.field(default_factory=list)
    fresh_share: float = DEFAULT_FRESH_SHARE
    lead_s: float = DEFAULT_LEAD_S

    @property
    def is_sweep(self) -> bool:
        """True when the plan measures more than one attack size."""
        return self.kind is not None

    def points(self) -> list[tuple[int | None, list[FaultSpec]]]:
        """(size, specs) per measurement: the swept kind at each size; (None, specs) once."""
        if self.kind is None:
            return [(None, list(self.specs))]
        out: list[tuple[int | None, list[FaultSpec]]] = []
        for size in self.sizes:
            specs = [
                dataclasses.replace(s, connections=size) if s.kind == self.kind else s
                for s in self.specs
            ]
            out.append((size, specs))
        return out

    def mix_at(self, specs: list[FaultSpec]) -> str:
        """The mix text of one point (for the stored result and the report)."""
        return format_mix(specs)


_NUMBER = re.compile(r"^\d+$")
_SHARE = re.compile(r"^(\d+(?:\.\d+)?)(%)?$")
_SECONDS = re.compile(r"^(\d+(?:\.\d+)?)(ms|s)?$")


def _share(item: str, value: str) -> float:
    m = _SHARE.match(value)
    if not m:
        raise FaultMixError(f"{item!r}: fresh must be a share such as 20% or 0.2")
    share = float(m.group(1)) / (100.0 if m.group(2) else 1.0)
    if not 0.0 <= share <= 1.0:
        raise FaultMixError(f"{item!r}: fresh must be between 0% and 100%")
    return share


def _lead(item: str, value: str) -> float:
    m = _SECONDS.match(value)
    if not m:
        raise FaultMixError(f"{item!r}: lead must be a duration such as 1s or 500ms")
    lead = float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0)
    if lead > MAX_LEAD_S:
        raise FaultMixError(f"{item!r}: lead must be at most {MAX_LEAD_S:g} s")
    return lead


def parse_plan(text: str) -> FaultPlan:
    """Parses ``--faults`` text: a mix, sweep sizes, ``fresh=`` and ``lead=``.

    Raises FaultMixError naming the bad item.
    """
    if not text or not text.strip():
        raise FaultMixError("empty fault mix; use e.g. 'default' or 'slowloris=50'")
    items: list[str] = []
    kind: str | None = None
    sizes: list[int] = []
    fresh, lead = DEFAULT_FRESH_SHARE, DEFAULT_LEAD_S
    for raw in text.split(","):
        item = raw.strip()
        key, _, value = item.partition("=")
        if key == "fresh":
            fresh = _share(item, value)
        elif key == "lead":
            lead = _lead(item, value)
        elif _NUMBER.match(item):
            kind = _sweep_size(item, items, kind, sizes)
        else:
            items.append(item)
    if not items:
        raise FaultMixError(f"{text!r}: no fault kind in the mix")
    specs = parse_mix(",".join(items))
    if kind is not None and sizes != sorted(set(sizes)):
        raise FaultMixError(f"{kind} sweep {sizes}: sizes must increase")
    if len(sizes) > MAX_SWEEP_SIZES:
        raise FaultMixError(f"{kind} sweep: at most {MAX_SWEEP_SIZES} sizes")
    for size in sizes:
        FaultSpec(kind or "", connections=size)  # bounds: 1..4096 connections
    return FaultPlan(text, specs, kind, sizes, fresh, lead)


def _sweep_size(item: str, items: list[str], kind: str | None, sizes: list[int]) -> str:
    """Adds the bare size ``item`` to the sweep of the item before it; returns the kind."""
    prev = items[-1] if items else ""
    head = prev.split(":", 1)[0]
    prev_kind, _, amount = head.partition("=")
    prev_kind = ALIASES.get(prev_kind.strip(), prev_kind.strip())
    info = KINDS.get(prev_kind)
    if info is None or not info.held or not _NUMBER.match(amount.strip()):
        raise FaultMixError(
            f"{item!r}: a bare number continues an intensity sweep of a held kind "
            "(e.g. slowloris=10,100,500); it must follow KIND=CONNECTIONS"
        )
    if kind is not None and kind != prev_kind:
        raise FaultMixError(f"{item!r}: one kind per sweep ({kind} already sweeps)")
    if not sizes:
        sizes.append(int(amount))
    sizes.append(int(item))
    return prev_kind
