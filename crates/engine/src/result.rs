//! The result document (JSON out), the per-thread tally it is assembled from, and merging
//! of results (several threads, or several load agents).

use crate::errors::{ErrorCounts, ErrorEntry};
use crate::hist::{self, HistData};
use crate::spec::{LoadSpec, Mode};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the result document layout.
pub const RESULT_VERSION: u32 = 1;
/// A thread busy this fraction of wall time or more makes the run generator-bound.
pub const BUSY_LIMIT: f64 = 0.90;
/// Open loop: a p99 schedule lag above this (microseconds) makes the run generator-bound.
pub const LAG_P99_LIMIT_US: u64 = 1_000;
/// Open loop: an achieved rate below this share of the offered rate gets a warning naming the
/// limit (see `shortfall`).
pub const SHORTFALL_LIMIT: f64 = 0.95;

/// One second of the measured phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SecondStats {
    /// Seconds since the start of the measured phase.
    pub t: u32,
    pub completed: u64,
    pub errors: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// Latency histogram of this second (2 significant digits), for re-merging.
    pub hist: String,
}

/// Open-loop figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OpenLoopStats {
    pub arrival: String,
    /// Target rate (requests/s).
    pub offered_rate: f64,
    /// Sends scheduled in the measured phase.
    pub offered: u64,
    /// Completed responses per second.
    pub achieved_rate: f64,
    pub queue_limit: u64,
    /// Scheduled sends that had to wait for a free connection.
    pub queued: u64,
    /// Deepest the queue got.
    pub queue_max: u64,
    /// Scheduled sends still queued when the run stopped (neither sent nor failed).
    pub unsent_at_end: u64,
}

/// Connection figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ConnStats {
    /// Connections asked for (the pool size).
    pub targeted: u64,
    /// Connection attempts made (first connects and reconnects).
    pub attempts: u64,
    /// Connects that succeeded.
    pub established: u64,
    /// Connections opened again after a close, error or timeout.
    pub reopened: u64,
    /// Requests that were written but had no response when the run stopped.
    pub in_flight_at_end: u64,
    /// Pipelined requests written on a connection the server closed before answering them;
    /// they were sent again on the new connection (neither errors nor completions).
    pub pipeline_resent: u64,
    /// Requests per connection (counted when a connection closes and at the end).
    pub requests_per_connection: hist::Summary,
}

/// Warm-up phase summary (kept apart from the measured figures).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct WarmupStats {
    pub duration_s: f64,
    pub requests: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub rps: f64,
    pub p50_us: u64,
    pub p99_us: u64,
}

/// One generator thread's self-check.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ThreadStats {
    /// CPU the thread was pinned to, if any.
    pub cpu: Option<usize>,
    /// CPU seconds used in the measured phase.
    pub cpu_s: f64,
    /// Wall seconds of the measured phase.
    pub wall_s: f64,
    /// (cpu_s - spin_s) / wall_s: the share of the time the thread did work.
    pub busy: f64,
    /// Open loop: CPU seconds spent spinning for exact send times (in `cpu_s`, not in `busy`).
    #[serde(default)]
    pub spin_s: f64,
    /// Seconds the thread was runnable but waited for a CPU (other tasks on its core), from
    /// the kernel's schedstat; null when unknown.
    #[serde(default)]
    pub run_delay_s: Option<f64>,
    pub requests: u64,
    pub connections: u64,
}

/// Generator self-check.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct GeneratorStats {
    pub threads: Vec<ThreadStats>,
    /// CPU seconds of all threads in the measured phase.
    pub cpu_s: f64,
    /// Generator CPU microseconds per completed request.
    pub cpu_us_per_request: f64,
    /// Soft open-file limit the run had.
    pub nofile_limit: u64,
    /// The generator may have limited the result (see `warnings`).
    pub generator_bound: bool,
}

/// Everything a run measured. Field documentation: docs/load-engine.md.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoadResult {
    pub version: u32,
    pub spec: LoadSpec,
    pub mode: Mode,
    pub interrupted: bool,
    /// Unix time at the start of the measured phase.
    pub started_at: f64,
    /// Wall seconds of the measured phase.
    pub duration_s: f64,
    /// Responses completed (any status, including those that failed a check).
    pub requests: u64,
    /// Failed requests and connection attempts, all classes (sum of `error_classes`).
    pub errors: u64,
    /// Requests that hit the timeout (also in `error_classes` as header/body timeout and
    /// recorded as censored values >= timeout in `latency`).
    pub timeouts: u64,
    /// Completed responses per second.
    pub rps: f64,
    pub status_counts: BTreeMap<String, u64>,
    pub error_classes: BTreeMap<String, ErrorEntry>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Closed loop: from the actual write. Open loop: from the intended send time
    /// (coordinated-omission corrected, queue wait included).
    pub latency: HistData,
    /// Open loop only: from the actual write.
    pub service_time: Option<HistData>,
    /// Open loop only: how late sends were dispatched after their intended time.
    pub schedule_lag: Option<HistData>,
    pub open_loop: Option<OpenLoopStats>,
    pub connections: ConnStats,
    pub per_second: Vec<SecondStats>,
    pub warmup: Option<WarmupStats>,
    pub generator: GeneratorStats,
    pub warnings: Vec<String>,
    /// What the fault clients saw, when the spec had `faults` (docs/faults.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<crate::faults::FaultReport>,
}

/// Raw counters and histograms of one phase of one thread (or of a whole result, for merging).
#[derive(Debug, Clone)]
pub struct Tally {
    pub latency: Histogram<u64>,
    pub service: Histogram<u64>,
    pub lag: Histogram<u64>,
    pub per_conn: Histogram<u64>,
    pub requests: u64,
    pub timeouts: u64,
    pub errors: ErrorCounts,
    /// Index = status code (0..=999).
    pub status: Vec<u64>,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub attempts: u64,
    pub established: u64,
    pub reopened: u64,
    pub in_flight_at_end: u64,
    pub pipeline_resent: u64,
    pub offered: u64,
    pub queued: u64,
    pub queue_max: u64,
    pub unsent_at_end: u64,
    /// (completed, errors, latency histogram) per second.
    pub per_second: Vec<(u64, u64, Histogram<u64>)>,
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

fn per_conn_hist() -> Histogram<u64> {
    Histogram::new(2).expect("static sigfig")
}

/// The small histogram used for each second (2 significant digits, grows as needed).
pub fn second_hist() -> Histogram<u64> {
    Histogram::new(2).expect("static sigfig")
}

impl Tally {
    /// Empty tally.
    pub fn new() -> Tally {
        Tally {
            latency: hist::new_hist(),
            service: hist::new_hist(),
            lag: hist::new_hist(),
            per_conn: per_conn_hist(),
            requests: 0,
            timeouts: 0,
            errors: ErrorCounts::default(),
            status: vec![0; 1000],
            bytes_in: 0,
            bytes_out: 0,
            attempts: 0,
            established: 0,
            reopened: 0,
            in_flight_at_end: 0,
            pipeline_resent: 0,
            offered: 0,
            queued: 0,
            queue_max: 0,
            unsent_at_end: 0,
            per_second: Vec::new(),
        }
    }

    /// The per-second slot for second `t` (grows the series; allocation once per second).
    #[inline]
    pub fn second(&mut self, t: usize) -> &mut (u64, u64, Histogram<u64>) {
        while self.per_second.len() <= t {
            self.per_second.push((0, 0, second_hist()));
        }
        &mut self.per_second[t]
    }

    /// Add another tally into this one.
    pub fn merge(&mut self, o: &Tally) {
        hist::add(&mut self.latency, &o.latency);
        hist::add(&mut self.service, &o.service);
        hist::add(&mut self.lag, &o.lag);
        hist::add(&mut self.per_conn, &o.per_conn);
        self.requests += o.requests;
        self.timeouts += o.timeouts;
        self.errors.merge(&o.errors);
        for (a, b) in self.status.iter_mut().zip(&o.status) {
            *a += b;
        }
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.attempts += o.attempts;
        self.established += o.established;
        self.reopened += o.reopened;
        self.in_flight_at_end += o.in_flight_at_end;
        self.pipeline_resent += o.pipeline_resent;
        self.offered += o.offered;
        self.queued += o.queued;
        self.queue_max = self.queue_max.max(o.queue_max);
        self.unsent_at_end += o.unsent_at_end;
        for (t, (c, e, h)) in o.per_second.iter().enumerate() {
            let s = self.second(t);
            s.0 += c;
            s.1 += e;
            hist::add(&mut s.2, h);
        }
    }

    /// Summary of a warm-up phase.
    pub fn warmup_stats(&self, duration_s: f64) -> WarmupStats {
        let q = hist::quantiles(&self.latency, &[0.5, 0.99]);
        WarmupStats {
            duration_s,
            requests: self.requests,
            errors: self.errors.total(),
            timeouts: self.timeouts,
            rps: if duration_s > 0.0 {
                self.requests as f64 / duration_s
            } else {
                0.0
            },
            p50_us: q[0],
            p99_us: q[1],
        }
    }
}

/// Inputs of [`assemble`] besides the tally.
pub struct RunInfo {
    pub spec: LoadSpec,
    pub mode: Mode,
    pub interrupted: bool,
    pub started_at: f64,
    pub duration_s: f64,
    pub threads: Vec<ThreadStats>,
    pub warmup: Option<WarmupStats>,
    pub nofile_limit: u64,
    pub queue_limit: u64,
}

/// Build the result document from a merged tally, and run the generator self-check.
pub fn assemble(t: &Tally, info: RunInfo) -> LoadResult {
    let open = info.mode == Mode::Open;
    let d = info.duration_s;
    let per_sec = |n: u64| if d > 0.0 { n as f64 / d } else { 0.0 };
    let status_counts = t
        .status
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(code, &n)| (code.to_string(), n))
        .collect();
    let per_second = t
        .per_second
        .iter()
        .enumerate()
        .map(|(i, (c, e, h))| {
            let q = hist::quantiles(h, &[0.5, 0.99]);
            SecondStats {
                t: i as u32,
                completed: *c,
                errors: *e,
                p50_us: q[0],
                p99_us: q[1],
                hist: hist::encode(h),
            }
        })
        .collect();
    let cpu_s: f64 = info.threads.iter().map(|x| x.cpu_s).sum();
    let open_loop = open.then(|| OpenLoopStats {
        arrival: serde_json::to_value(info.spec.arrival)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default(),
        offered_rate: info.spec.rate.unwrap_or(0.0),
        offered: t.offered,
        achieved_rate: per_sec(t.requests),
        queue_limit: info.queue_limit,
        queued: t.queued,
        queue_max: t.queue_max,
        unsent_at_end: t.unsent_at_end,
    });
    let mut r = LoadResult {
        version: RESULT_VERSION,
        mode: info.mode,
        interrupted: info.interrupted,
        started_at: info.started_at,
        duration_s: d,
        requests: t.requests,
        errors: t.errors.total(),
        timeouts: t.timeouts,
        rps: per_sec(t.requests),
        status_counts,
        error_classes: t.errors.to_map(),
        bytes_in: t.bytes_in,
        bytes_out: t.bytes_out,
        latency: HistData::from_hist(&t.latency),
        service_time: open.then(|| HistData::from_hist(&t.service)),
        schedule_lag: open.then(|| HistData::from_hist(&t.lag)),
        open_loop,
        connections: ConnStats {
            targeted: info.spec.connections as u64,
            attempts: t.attempts,
            established: t.established,
            reopened: t.reopened,
            in_flight_at_end: t.in_flight_at_end,
            pipeline_resent: t.pipeline_resent,
            requests_per_connection: hist::summary(&t.per_conn),
        },
        per_second,
        warmup: info.warmup,
        generator: GeneratorStats {
            threads: info.threads,
            cpu_s,
            cpu_us_per_request: if t.requests > 0 {
                cpu_s * 1e6 / t.requests as f64
            } else {
                0.0
            },
            nofile_limit: info.nofile_limit,
            generator_bound: false,
        },
        warnings: Vec::new(),
        faults: None,
        spec: info.spec,
    };
    self_check(&mut r);
    r
}

/// Open loop: explain an achieved rate below 95% of the offered one, naming the side that
/// limited it. `generator_late` is the generator-bound verdict of the other rules (a busy
/// thread, or a p99 schedule lag over the limit).
///
/// - Sends waited for a free connection (>= 1% of them queued, any left unsent, or a queue
///   overflow): the server, or the pool, could not keep up.
/// - Otherwise, when the generator was late: the generator was the limit; the run is already
///   generator-bound by the other rules, so the shortfall never goes without that flag.
/// - Otherwise sends went out on time over free connections and responses did not complete
///   within the run (errors, timeouts, still in flight): the server's side again.
pub fn shortfall(r: &LoadResult, ol: &OpenLoopStats, generator_late: bool) -> Option<String> {
    if !(ol.offered_rate > 0.0
        && r.duration_s >= 1.0
        && ol.achieved_rate < SHORTFALL_LIMIT * ol.offered_rate)
    {
        return None;
    }
    let head = format!(
        "open loop: achieved {:.0} requests/s of {:.0} offered ({:.0}%)",
        ol.achieved_rate,
        ol.offered_rate,
        100.0 * ol.achieved_rate / ol.offered_rate
    );
    let overflow = r.error_classes.get("queue_overflow").map_or(0, |e| e.count);
    let waited =
        ol.queued as f64 >= 0.01 * ol.offered.max(1) as f64 || ol.unsent_at_end > 0 || overflow > 0;
    Some(if waited {
        let also = if generator_late {
            "; the generator was also late (see above)"
        } else {
            ""
        };
        format!(
            "{head}: the server (or the connection pool of {}) could not keep up: {} sends \
             waited for a free connection (deepest queue {}), {} overflowed, {} unsent at the \
             end{also}",
            r.connections.targeted, ol.queued, ol.queue_max, overflow, ol.unsent_at_end
        )
    } else if generator_late {
        format!(
            "{head} while connections were free: the generator sent late, so it, not the \
             server, was the limit (generator-bound)"
        )
    } else {
        format!(
            "{head}, sent on time over free connections: responses did not complete ({} \
             errors, {} timeouts, {} in flight at the end): the server could not keep up",
            r.errors, r.timeouts, r.connections.in_flight_at_end
        )
    })
}

/// Flag a generator-bound run and add human-readable warnings.
pub fn self_check(r: &mut LoadResult) {
    let mut bound = false;
    let mut w = Vec::new();
    for (i, th) in r.generator.threads.iter().enumerate() {
        if th.wall_s > 0.2 && th.busy >= BUSY_LIMIT {
            bound = true;
            w.push(format!(
                "generator thread {i} was busy {:.0}% of the time: the load generator, not the \
                 server, may be the limit (use more generator threads or cores)",
                th.busy * 100.0
            ));
        }
    }
    if let (Some(lag), Some(ol)) = (&r.schedule_lag, &r.open_loop) {
        let late = lag.summary.count > 0 && lag.summary.p99 > LAG_P99_LIMIT_US;
        if late {
            bound = true;
            let waited: f64 = r
                .generator
                .threads
                .iter()
                .filter_map(|t| t.run_delay_s)
                .sum();
            let wall: f64 = r.generator.threads.iter().map(|t| t.wall_s).sum();
            let why = if waited > 0.0 && wall > 0.0 {
                format!(
                    " (its threads waited {:.1} ms for a CPU, {:.1}% of the time: other tasks \
                     shared their cores)",
                    waited * 1e3,
                    100.0 * waited / wall
                )
            } else {
                String::new()
            };
            w.push(format!(
                "open loop: p99 schedule lag was {} us (> {} us): the generator could not send on \
                 time{why}, latencies are understated",
                lag.summary.p99, LAG_P99_LIMIT_US
            ));
        }
        if let Some(msg) = shortfall(r, ol, bound) {
            w.push(msg);
        }
    }
    if r.requests == 0 {
        w.push("no response completed".into());
    }
    if r.timeouts > 0 {
        w.push(format!(
            "{} requests timed out (>= {} s); they are in the latency histogram as censored values",
            r.timeouts, r.spec.timeout_s
        ));
    }
    if r.interrupted {
        w.push("interrupted: partial results".into());
    }
    r.generator.generator_bound = bound;
    r.warnings = w;
}

impl LoadResult {
    /// The result's counters and histograms as a tally (for merging).
    pub fn to_tally(&self) -> Result<Tally, String> {
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
        if let Some(ol) = &self.open_loop {
            t.offered = ol.offered;
            t.queued = ol.queued;
            t.queue_max = ol.queue_max;
            t.unsent_at_end = ol.unsent_at_end;
        }
        for s in &self.per_second {
            let h = hist::decode(&s.hist)?;
            let slot = t.second(s.t as usize);
            slot.0 += s.completed;
            slot.1 += s.errors;
            hist::add(&mut slot.2, &h);
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
/// The spec of the first result is kept, with `connections` summed.
pub fn merge(results: &[LoadResult]) -> Result<LoadResult, String> {
    let first = results.first().ok_or("merge: no results")?;
    let mut total = Tally::new();
    let mut threads = Vec::new();
    let mut warm: Option<WarmupStats> = None;
    let mut nofile = u64::MAX;
    let mut spec = first.spec.clone();
    spec.connections = 0;
    for r in results {
        total.merge(&r.to_tally()?);
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
            interrupted: results.iter().any(|r| r.interrupted),
            started_at: results
                .iter()
                .map(|r| r.started_at)
                .fold(f64::INFINITY, f64::min),
            duration_s: results.iter().map(|r| r.duration_s).fold(0.0, f64::max),
            threads,
            warmup: warm,
            nofile_limit: nofile,
            queue_limit: first.open_loop.as_ref().map(|o| o.queue_limit).unwrap_or(0),
            spec,
        },
    );
    if let Some(ol) = merged.open_loop.as_mut() {
        ol.offered_rate = results.iter().filter_map(|r| r.spec.rate).sum();
    }
    merged.spec.rate = merged.open_loop.as_ref().map(|o| o.offered_rate);
    self_check(&mut merged);
    merged
        .warnings
        .push(format!("merged from {} results", results.len()));
    Ok(merged)
}
