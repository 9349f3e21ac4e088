//! A result document back to a tally, JSON in and out, and merging of results that ran at
//! the same time.

use super::{assemble, self_check, EndpointTally, LoadResult, RunInfo, Tally, WarmupStats};
use crate::errors::{ErrorClass, ErrorCounts};
use crate::hist;

impl LoadResult {
    /// The result's counters and histograms as a tally (for merging).
    pub fn to_tally(&self) -> Result<Tally, String> {
        self.to_tally_shifted(0)
    }

    /// As `to_tally`, with the per-second series moved `shift_s` seconds later (onto the time
    /// base of a result that started earlier).
    pub fn to_tally_shifted(&self, shift_s: usize) -> Result<Tally, String> {
        let mut t = Tally::new();
        t.latency = self.latency.decode()?;
        if let Some(h) = &self.service_time {
            t.service = h.decode()?;
        }
        if let Some(h) = &self.schedule_lag {
            t.lag = h.decode()?;
        }
        t.requests = self.requests;
        t.timeouts = self.timeouts;
        t.errors = ErrorCounts::from_map(&self.error_classes)?;
        for (k, v) in &self.status_counts {
            let code: usize = k
                .parse()
                .map_err(|_| format!("status_counts: bad code {k:?}"))?;
            if code >= t.status.len() {
                return Err(format!("status_counts: bad code {k:?}"));
            }
            t.status[code] += v;
        }
        t.bytes_in = self.bytes_in;
        t.bytes_out = self.bytes_out;
        let c = &self.connections;
        t.attempts = c.attempts;
        t.established = c.established;
        t.reopened = c.reopened;
        t.in_flight_at_end = c.in_flight_at_end;
        t.pipeline_resent = c.pipeline_resent;
        // Requests per connection survives only as a summary: re-record its quantiles.
        let s = &c.requests_per_connection;
        if s.count > 0 {
            let _ = t.per_conn.record_n(s.p50.max(1), s.count);
        }
        if let Some(w) = &self.websocket {
            t.ws_handshakes = w.handshakes;
            t.handshake = w.handshake_time.decode()?;
        }
        if let Some(ol) = &self.open_loop {
            t.offered = ol.offered;
            t.queued = ol.queued;
            t.queue_max = ol.queue_max;
            t.unsent_at_end = ol.unsent_at_end;
        }
        for e in &self.endpoints {
            let mut x = EndpointTally {
                requests: e.requests,
                timeouts: e.timeouts,
                latency: e.latency.decode()?,
                ..EndpointTally::default()
            };
            for (k, n) in &e.error_classes {
                let c = ErrorClass::from_name(k)
                    .ok_or_else(|| format!("endpoints: unknown error class {k:?}"))?;
                x.errors[c as usize] += n;
            }
            for (k, n) in &e.status_counts {
                let code: u16 = k
                    .parse()
                    .map_err(|_| format!("endpoints: bad status code {k:?}"))?;
                x.status(code, *n);
            }
            t.endpoints.push(x);
        }
        for s in &self.per_second {
            let h = hist::decode(&s.hist)?;
            let slot = t.second(s.t as usize + shift_s);
            slot.0 += s.completed;
            slot.1 += s.errors;
            hist::add(&mut slot.2, &h);
            if let Some(r) = s.offered_rate {
                let i = s.t as usize;
                if t.offered_per_second.len() <= i {
                    t.offered_per_second.resize(i + 1, 0.0);
                }
                t.offered_per_second[i] += r;
            }
        }
        Ok(t)
    }

    /// Serialise to JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("result is always serialisable")
    }

    /// Parse from JSON.
    pub fn from_json(s: &str) -> Result<LoadResult, String> {
        serde_json::from_str(s).map_err(|e| format!("not a load result: {e}"))
    }
}

/// Merge results of runs that ran at the same time (several load agents against one
/// server): counts and histograms add up, rates add up, durations take the longest.
/// The spec of the first result is kept, with `connections` summed. Per-second series are
/// summed on the time base of the earliest start (each moved by its start's offset, rounded
/// to whole seconds).
pub fn merge(results: &[LoadResult]) -> Result<LoadResult, String> {
    let first = results.first().ok_or("merge: no results")?;
    let base = results
        .iter()
        .map(|r| r.started_at)
        .fold(f64::INFINITY, f64::min);
    let mut total = Tally::new();
    let mut threads = Vec::new();
    let mut warm: Option<WarmupStats> = None;
    let mut nofile = u64::MAX;
    let mut spec = first.spec.clone();
    spec.connections = 0;
    let mut sources: Vec<String> = Vec::new();
    for r in results {
        for s in &r.connections.source_addresses {
            if !sources.contains(s) {
                sources.push(s.clone());
            }
        }
        let shift_s = (r.started_at - base).max(0.0).round() as usize;
        total.merge(&r.to_tally_shifted(shift_s)?);
        threads.extend(r.generator.threads.iter().cloned());
        nofile = nofile.min(r.generator.nofile_limit);
        spec.connections += r.spec.connections;
        if let Some(w) = &r.warmup {
            let acc = warm.get_or_insert_with(WarmupStats::default);
            acc.duration_s = acc.duration_s.max(w.duration_s);
            acc.requests += w.requests;
            acc.errors += w.errors;
            acc.timeouts += w.timeouts;
            acc.rps += w.rps;
            acc.p50_us = acc.p50_us.max(w.p50_us);
            acc.p99_us = acc.p99_us.max(w.p99_us);
        }
    }
    let mut merged = assemble(
        &total,
        RunInfo {
            mode: first.mode,
            io: if results.iter().all(|r| r.io == first.io) {
                first.io.clone()
            } else {
                "mixed".into()
            },
            interrupted: results.iter().any(|r| r.interrupted),
            started_at: base,
            duration_s: results.iter().map(|r| r.duration_s).fold(0.0, f64::max),
            threads,
            warmup: warm,
            nofile_limit: nofile,
            queue_limit: first.open_loop.as_ref().map(|o| o.queue_limit).unwrap_or(0),
            source_addresses: sources,
            spec,
        },
    );
    if let Some(ol) = merged.open_loop.as_mut() {
        ol.offered_rate = results
            .iter()
            .filter_map(|r| r.open_loop.as_ref().map(|o| o.offered_rate))
            .sum();
    }
    if merged.spec.rate_phases.is_empty() {
        merged.spec.rate = merged.open_loop.as_ref().map(|o| o.offered_rate);
    } else {
        // The agents ran the same rate phases' shape: scale the first one's to the total.
        let first_rate = first.open_loop.as_ref().map_or(0.0, |o| o.offered_rate);
        let total = merged.open_loop.as_ref().map_or(0.0, |o| o.offered_rate);
        let k = if first_rate > 0.0 {
            total / first_rate
        } else {
            1.0
        };
        for p in &mut merged.spec.rate_phases {
            p.rate *= k;
            p.end_rate = p.end_rate.map(|r| r * k);
        }
    }
    merged.launched_at_unix_ns = results.iter().filter_map(|r| r.launched_at_unix_ns).min();
    self_check(&mut merged);
    merged
        .warnings
        .push(format!("merged from {} results", results.len()));
    Ok(merged)
}
