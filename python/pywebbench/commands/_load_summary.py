"""The text summary ``pywebbench load`` prints of a result (wrk-style, but with censored
timeouts, error classes, the open loop's schedule and the generator's self-check). For a
WebSocket run the requests are messages (their echoes) and the handshakes get a line."""

from __future__ import annotations

from typing import Any

from pywebbench import formatting as fmt
from pywebbench.load import LoadResult
from pywebbench.load.rate_phases import describe, phase_lines


def _lat_line(label: str, s: Any) -> str:
    if s.count == 0:
        return f"  {label:<13} (no samples)"
    return (
        f"  {label:<13} p50 {fmt.latency_us(s.p50):>9}  p90 {fmt.latency_us(s.p90):>9}  "
        f"p99 {fmt.latency_us(s.p99):>9}  p99.9 {fmt.latency_us(s.p999):>9}  "
        f"max {fmt.latency_us(s.max):>9}  "
        f"(mean {fmt.latency_us(s.mean)}, stdev {fmt.latency_us(s.stdev)})"
    )


def render_summary(r: LoadResult) -> str:
    """The text report of a result (what ``pywebbench load`` prints)."""
    sp = r.spec
    if r.mode == "open" and sp.rate_phases:
        model = f"open loop, {describe(sp.rate_phases)}, {sp.arrival}"
    elif r.mode == "open":
        model = f"open loop, {fmt.rate(sp.rate or 0)} req/s {sp.arrival}"
    elif r.mode == "connection_per_request":
        model = "connection per request"
    else:
        model = "closed loop" + (f", pipeline {sp.pipeline}" if sp.pipeline > 1 else "")
    ws = sp.protocol == "ws"
    if sp.protocol == "h2c":
        model += f"; h2c, {sp.streams} stream{'s' if sp.streams > 1 else ''} per connection"
    if ws:
        model = (
            model.replace("req/s", "msg/s")
            .replace("connection per request", "connection per message")
            .replace("pipeline", "messages in flight")
        )
        model += f"; WebSocket echo of {sp.message_bytes:,}-byte messages"
    unit = "msg" if ws else "req"
    what = "" if ws else sp.method + " "
    if sp.mix:
        what = f"a mix of {len(sp.mix)} requests over {len(r.endpoints)} endpoints at "
    lines = [
        f"pywebbench load {what}{sp.url} (io: {r.io})",
        f"  {model}; {sp.connections} connections, {sp.threads} thread(s), "
        f"{r.duration_s:.2f} s measured"
        + (f" after {sp.warmup_s:g} s warm-up" if sp.warmup_s else ""),
    ]
    if r.interrupted:
        lines.append("  INTERRUPTED: partial results")
    if ws:
        mismatched = r.error_classes.get("ws_echo_mismatch")
        intact = r.requests - (mismatched.count if mismatched else 0)
        lines.append(
            f"  {'Messages':<13} {r.requests:,} echoed in {r.duration_s:.2f} s = "
            f"{fmt.rate(r.rps)} msg/s   ({intact:,} intact)"
        )
    else:
        lines.append(
            f"  {'Requests':<13} {r.requests:,} in {r.duration_s:.2f} s = {fmt.rate(r.rps)} req/s"
            f"   ({r.ok_requests:,} 2xx)"
        )
    d = r.duration_s or 1.0
    lines.append(
        f"  {'Transfer':<13} in {fmt.size(r.bytes_in)} ({fmt.size(r.bytes_in / d)}/s), "
        f"out {fmt.size(r.bytes_out)}"
    )
    if r.mode == "open":
        lines.append(
            _lat_line("Latency", r.latency.summary) + "  <- corrected (from intended send)"
        )
        if r.service_time is not None:
            lines.append(
                _lat_line("Service time", r.service_time.summary) + "  <- from actual write"
            )
        if r.schedule_lag is not None:
            lag = r.schedule_lag.summary
            lines.append(
                f"  {'Schedule lag':<13} p50 {fmt.latency_us(lag.p50)}  "
                f"p99 {fmt.latency_us(lag.p99)}  max {fmt.latency_us(lag.max)}"
            )
        if r.open_loop is not None:
            ol = r.open_loop
            lines.append(
                f"  {'Rate':<13} offered {fmt.rate(ol.offered_rate)}/s, "
                f"achieved {fmt.rate(ol.achieved_rate)}/s; "
                f"{ol.queued:,} sends waited for a connection (deepest queue {ol.queue_max:,}, "
                f"limit {ol.queue_limit:,}); {ol.unsent_at_end:,} unsent at the end"
            )
        lines.extend(phase_lines(r))
    else:
        lines.append(_lat_line("Round trip" if ws else "Latency", r.latency.summary))
    if r.timeouts:
        lines.append(
            f"  {'Timeouts':<13} {r.timeouts:,} (>= {sp.timeout_s:g} s, kept in the percentiles)"
        )
    if r.websocket is not None:
        shakes = r.websocket
        hs = shakes.handshake_time.summary
        times = (
            f"; upgrade to 101 p50 {fmt.latency_us(hs.p50)}, p99 {fmt.latency_us(hs.p99)}"
            if hs.count
            else ""
        )
        lines.append(
            f"  {'Handshakes':<13} {shakes.handshakes:,} = {shakes.handshake_rate:,.1f}/s "
            f"(connections opened per second){times}"
        )
    else:
        status = "  ".join(f"{k}: {v:,}" for k, v in sorted(r.status_counts.items())) or "none"
        lines.append(f"  {'Status':<13} {status}")
    if r.error_classes:
        lines.append(f"  {'Errors':<13} {r.errors:,}")
        for name, e in sorted(r.error_classes.items(), key=lambda kv: -kv[1].count):
            lines.append(f"    {name:<22} {e.count:>9,}  e.g. {e.example}")
    else:
        lines.append(f"  {'Errors':<13} none")
    c = r.connections
    rpc = c.requests_per_connection
    lines.append(
        f"  {'Connections':<13} {c.targeted:,} targeted, {c.established:,} established, "
        f"{c.reopened:,} reopened; {'messages' if ws else 'requests'} per connection "
        f"p50 {rpc.p50:,} (max {rpc.max:,})"
        + (f"; from {', '.join(c.source_addresses)}" if c.source_addresses else "")
    )
    g = r.generator
    busy = ", ".join(fmt.percent(t.busy) for t in g.threads)
    extra = ""
    spin = sum(t.spin_s for t in g.threads)
    if spin > 0:
        extra += f"; {spin * 1e3:.0f} ms spinning for send times"
    delays = [t.run_delay_s for t in g.threads if t.run_delay_s is not None]
    if delays:
        extra += f"; waited {sum(delays) * 1e3:.1f} ms for a CPU"
    lines.append(
        f"  {'Generator':<13} {g.cpu_us_per_request:.2f} CPU-us/{'message' if ws else 'request'}; "
        f"{g.cpu_s:.2f} CPU-s; thread busy {busy}{extra}"
    )
    if r.warmup is not None:
        w = r.warmup
        lines.append(
            f"  {'Warm-up':<13} {w.requests:,} {'messages' if ws else 'requests'} "
            f"({fmt.rate(w.rps)} {unit}/s), {w.errors:,} errors, "
            f"p50 {fmt.latency_us(w.p50_us)}, p99 {fmt.latency_us(w.p99_us)} "
            "(not in the figures above)"
        )
    if g.generator_bound:
        lines.append("")
        lines.append("  !!! GENERATOR-BOUND: the load generator may have been the bottleneck !!!")
    for warning in r.warnings:
        lines.append(f"  warning: {warning}")
    if r.endpoints:
        lines.append("")
        lines.extend(endpoint_lines(r))
    return "\n".join(lines)


def endpoint_lines(r: LoadResult) -> list[str]:
    """A mix: one row per endpoint (docs/mix.md): its weight's share of the mix, its share of
    the requests completed, requests/s, errors, and latency p50, p99, p99.9."""
    width = max(8, *(len(e.name) for e in r.endpoints))
    head = (
        f"  {'Endpoint':<{width}}  {'weight':>7}  {'sent':>7}  {'req/s':>9}  {'errors':>7}  "
        f"{'p50':>9}  {'p99':>9}  {'p99.9':>9}"
    )
    rows = [head]
    total = max(r.requests, 1)
    for e in r.endpoints:
        s = e.latency.summary
        rps = e.requests / r.duration_s if r.duration_s > 0 else 0.0
        lat = (
            f"{fmt.latency_us(s.p50):>9}  {fmt.latency_us(s.p99):>9}  {fmt.latency_us(s.p999):>9}"
            if s.count
            else f"{fmt.MISSING:>9}  {fmt.MISSING:>9}  {fmt.MISSING:>9}"
        )
        rows.append(
            f"  {e.name:<{width}}  {fmt.percent(e.weight_share):>7}  "
            f"{fmt.percent(e.requests / total):>7}  {fmt.rate(rps):>9}  {e.errors:>7,}  {lat}"
        )
    return rows


def succeeded(r: LoadResult) -> int:
    """Requests that count as a success (see the exit status in ``--help``)."""
    if r.spec.protocol == "ws":
        mismatched = r.error_classes.get("ws_echo_mismatch")
        return r.requests - (mismatched.count if mismatched else 0)
    checked = r.spec.mix and all(e.expect_status for e in r.spec.mix)
    if r.spec.expect_status or r.spec.expect_body is not None or checked:
        failed = r.error_classes.get("check_failed")
        return r.requests - (failed.count if failed else 0)
    return sum(n for code, n in r.status_counts.items() if code[0] in "23")


# ---- command ---------------------------------------------------------------------------------
