"""Type stub of ``pywebbench._engine``, the compiled binding of the Rust crates (crates/pyext).

Everything crosses the boundary as JSON text or plain values. The typed Python faces are
:mod:`pywebbench.load` (specs, results, histograms), :mod:`pywebbench.faults` (fault clients)
and :mod:`pywebbench.refserver` (the reference server); use those rather than this module.
"""

from collections.abc import Callable, Sequence
from typing import NoReturn, final

__version__: str

# -- load engine (engine_bindings.rs) -------------------------------------------------------

def spec_validate(spec_json: str) -> str:
    """Parse and validate a load spec (JSON) with the engine's own rules, without running it
    (the host is not resolved). Returns the spec with every default filled in (JSON).

    Raises:
        ValueError: one line naming the field, e.g. ``"connections: must be >= 1"``.
    """

def run_load(
    spec_json: str,
    progress: Callable[[str], object] | None = None,
    interval_s: float = 0.25,
) -> str:
    """Run a load spec (JSON) and return the result document (JSON).

    The engine runs on its own threads with the GIL released; every ``interval_s`` seconds
    ``progress`` gets a snapshot (JSON). On KeyboardInterrupt the engine stops within ~50 ms
    and the partial result comes back with ``"interrupted": true``; any other exception
    raised by ``progress`` stops the engine and is re-raised. The spec's ``io`` (``auto``,
    ``epoll``, ``uring``) picks the I/O backend; the result's ``io`` names the one that ran.
    The spec's ``protocol`` (``http1``, ``h2c`` or ``ws``) is spoken on every connection;
    with ``ws`` (a ``ws://`` URL) each request is one ``message_bytes`` message's echo and
    the result has a ``websocket`` section (handshakes; docs/websocket.md). With a ``mix``
    each request is drawn from the mix's weighted entries and the result has ``endpoints``
    (per-endpoint requests, errors and latency histograms; docs/mix.md).

    Raises:
        ValueError: the spec is invalid (the message names the field), or ``io: uring`` was
            asked for on a kernel without the io_uring features the engine needs.
        OSError: the system refused, e.g. not enough file descriptors.
    """

def run_sliced(
    spec_json: str,
    progress: Callable[[str], object] | None = None,
    interval_s: float = 0.25,
) -> str:
    """Run an interleaved sliced plan (JSON) and return its result (JSON): several targets
    loaded in turn, in slices, on connections kept open (docs/load-engine.md). Waiting,
    signals and ``progress`` as in :func:`run_load`; the snapshot lists the complete slices;
    ``True`` from ``progress`` ends the run early with a complete result.

    Raises:
        ValueError: the plan is invalid (the message names the field).
        OSError: the system refused.
    """

def merge_results(items: Sequence[str]) -> str:
    """Merge result documents (JSON) of runs made at the same time by several load agents.

    Raises:
        ValueError: an item is not a result document, or there is none.
    """

def error_classes() -> list[str]:
    """The stable error class names, in the engine's order."""

def hist_merge(items: Sequence[str]) -> str:
    """Merge encoded HdrHistograms (V2+DEFLATE, base64) into one (empty for no items)."""

def hist_quantiles(encoded: str, quantiles: Sequence[float]) -> list[float]:
    """Values (microseconds) at the given quantiles (0..1) of an encoded histogram."""

def hist_summary(encoded: str) -> dict[str, float]:
    """Summary of an encoded histogram, keyed ``count``, ``min``, ``max``, ``mean``, ``stdev``,
    ``p50``, ``p90``, ``p99``, ``p999``, ``p9999`` (microseconds, except the count; ints but
    ``mean`` and ``stdev``); ``pywebbench.load.HistSummary`` is its typed form."""

def hist_spectrum(encoded: str, ticks_per_half_distance: int = 5) -> list[tuple[int, float, int]]:
    """Percentile spectrum: ``(value_us, quantile, count_since_last)`` rows, denser towards
    the tail; empty for an empty histogram."""

def hist_from_values(values: Sequence[int]) -> str:
    """Record values (microseconds) into a fresh histogram and return it encoded."""

# -- fault clients (faults_bindings.rs) -----------------------------------------------------

@final
class FaultRun:
    """Fault clients running beside a load run (made by :func:`faults_start`)."""

    def running(self) -> bool:
        """True while the fault clients run."""

    def stop(self) -> str:
        """Stop the fault clients (within ~100 ms, GIL released) and return the report as
        JSON; a second call returns the report of an empty run."""

def faults_start(spec_json: str) -> FaultRun:
    """Start fault clients from a JSON document (``target``, ``host``, ``path``,
    ``max_duration_s``, ``faults``; docs/faults.md).

    Raises:
        ValueError: naming the bad field.
    """

def faults_kinds() -> list[tuple[str, bool, bool]]:
    """Every fault kind as ``(name, held, malformed)``."""

# -- reference server (refserver_bindings.rs) -----------------------------------------------

def refserver_serve(config_json: str, ready: Callable[[int], object] | None = None) -> NoReturn:
    """Run the reference server in this process until a signal handler raises; ``ready(port)``
    is called once the port accepts connections.

    Raises:
        ValueError: a bad config (naming the field).
        OSError: the bind failed.
        RuntimeError: an event-loop thread stopped unexpectedly.
    """

def refserver_config_defaults() -> str:
    """The default config as JSON (every field, with its default value)."""

def refserver_modes() -> list[str]:
    """Names of the misbehaviour modes, in a stable order."""

def refserver_validate(config_json: str) -> None:
    """Validate a JSON config.

    Raises:
        ValueError: naming the bad field.
    """
