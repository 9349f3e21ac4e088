"""A latency service-level objective: ``p99=50ms`` (docs/slo.md).

:func:`parse_slo` turns the text of ``--slo`` / ``load.slo`` into an :class:`Slo`: a
percentile (``p50`` .. ``p99.99``) and a target latency (``us``, ``ms`` or ``s``). The
percentile also fixes how many samples a load window needs for it to mean something:
:attr:`Slo.min_samples`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: Samples beyond the percentile a window needs: 100 tail samples, so a p99 rests on
#: 10,000 requests and a p99.9 on 100,000 (docs/slo.md).
TAIL_SAMPLES = 100

_SLO = re.compile(r"^p(\d{1,2}(?:\.\d{1,3})?)=(\d+(?:\.\d*)?|\.\d+)(us|ms|s)$")
_UNIT_US = {"us": 1.0, "ms": 1_000.0, "s": 1_000_000.0}


class SloError(ValueError):
    """The text is not an SLO; the message says what is expected."""


@dataclass(frozen=True)
class Slo:
    """A percentile of the (coordinated-omission corrected) latency and its target."""

    percentile: float  # 99.0 for p99
    target_us: float

    @property
    def quantile(self) -> float:
        """The percentile as a fraction (0.99)."""
        return self.percentile / 100.0

    @property
    def label(self) -> str:
        """``p99``, ``p99.9``."""
        return f"p{self.percentile:g}"

    @property
    def min_samples(self) -> int:
        """Requests a window needs so :data:`TAIL_SAMPLES` of them lie beyond the percentile."""
        return math.ceil(round(TAIL_SAMPLES / (1.0 - self.quantile), 6))

    @property
    def target_text(self) -> str:
        """The target in the handiest unit: ``50ms``, ``1.5s``, ``800us``."""
        us = self.target_us
        if us >= 1_000_000:
            return f"{us / 1_000_000:g}s"
        if us >= 1_000:
            return f"{us / 1_000:g}ms"
        return f"{us:g}us"

    def __str__(self) -> str:
        return f"{self.label}={self.target_text}"


def parse_slo(text: str) -> Slo:
    """``"p99=50ms"`` -> :class:`Slo`. Raises :class:`SloError` naming what is expected."""
    match = _SLO.match(text.strip().lower())
    if match is None:
        raise SloError(
            f"{text!r} is not an SLO: expected pNN=<latency><us|ms|s>, e.g. p99=50ms or p99.9=1s"
        )
    percentile = float(match.group(1))
    if not 0 < percentile < 100:
        raise SloError(f"{text!r}: the percentile must be above p0 and below p100")
    target_us = float(match.group(2)) * _UNIT_US[match.group(3)]
    if target_us <= 0:
        raise SloError(f"{text!r}: the latency target must be > 0")
    return Slo(percentile, target_us)
