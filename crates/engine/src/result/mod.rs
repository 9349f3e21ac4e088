//! The result document (JSON out) and the per-thread tally it is assembled from. Building
//! the document and the generator self-check live in `assemble.rs`; the tally of a document
//! and merging of results (several threads, or several load agents) in `merge.rs`.

use crate::errors::{ErrorCounts, ErrorEntry};
use crate::hist::{self, HistData};
use crate::spec::{LoadSpec, Mode};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

mod assemble;
mod merge;

pub use assemble::{assemble, endpoint_stats, self_check, shortfall, RunInfo};
pub use merge::merge;

/// Version of the result document layout.
pub const RESULT_VERSION: u32 = 1;
/// A thread busy this fraction of wall time or more makes the run generator-bound.
pub const BUSY_LIMIT: f64 = 0.90;
/// A slice whose generator threads waited for a CPU (runnable, another task on their core)
/// this fraction of its wall time or more, while working or waiting `WAITING_BUSY` of it,
/// was limited by its generator too.
pub const WAIT_LIMIT: f64 = 0.05;
/// See `WAIT_LIMIT`: a generator that is mostly idle (the server is the limit, with the
/// connections' requests queued there) loses nothing to a short wait for its core.
pub const WAITING_BUSY: f64 = 0.5;

/// Whether `threads` generator threads that spent `cpu_s` CPU seconds and waited `wait_s`
/// for a CPU over `wall_s` each were the limit: busy `BUSY_LIMIT` of the time, or waiting
/// `WAIT_LIMIT` of it while busy or waiting `WAITING_BUSY` of it.
pub fn generator_limited(cpu_s: f64, wait_s: Option<f64>, wall_s: f64, threads: u32) -> bool {
    let thread_s = wall_s * threads as f64;
    if thread_s <= 0.0 {
        return false;
    }
    let busy = cpu_s / thread_s;
    let waited = wait_s.map_or(0.0, |w| w / thread_s);
    busy >= BUSY_LIMIT || (waited >= WAIT_LIMIT && busy + waited >= WAITING_BUSY)
}
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
    /// Open loop: the offered rate of this second (requests/s: the rate phases' mean
    /// over the second, or over its measured part for the last one); null otherwise.
    #[serde(default)]
    pub offered_rate: Option<f64>,
}

/// Open-loop figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct OpenLoopStats {
    pub arrival: String,
    /// Target rate (requests/s): the constant rate, or the rate phases' mean over the
    /// measured phase.
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
    /// Local addresses the connections were spread over (empty: the kernel's choice).
    #[serde(default)]
    pub source_addresses: Vec<String>,
}

/// WebSocket figures (protocol ws): the upgrade handshakes of the measured phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WsStats {
    /// Size of each message (bytes).
    pub message_bytes: u32,
    /// Upgrade handshakes completed (101 with the right Sec-WebSocket-Accept).
    pub handshakes: u64,
    /// Handshakes per second: connections opened per second (with keepalive off, each
    /// connection does handshake, one echo, close).
    pub handshake_rate: f64,
    /// From writing the upgrade request to its 101 answer (microseconds; the TCP connect
    /// is not in it).
    pub handshake_time: HistData,
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
    /// The I/O backend that ran ("uring" or "epoll"; "mixed" for a merge of both).
    #[serde(default = "epoll_name")]
    pub io: String,
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
    /// protocol ws only: handshakes (messages are the requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub websocket: Option<WsStats>,
    pub connections: ConnStats,
    pub per_second: Vec<SecondStats>,
    pub warmup: Option<WarmupStats>,
    pub generator: GeneratorStats,
    pub warnings: Vec<String>,
    /// What the fault clients saw, when the spec had `faults` (docs/faults.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub faults: Option<crate::faults::FaultReport>,
    /// Unix nanoseconds at which the engine actually started (warm-up start), after waiting
    /// for the spec's `start_at_unix_ns`; the skew between load agents is measured from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_at_unix_ns: Option<u64>,
    /// A mix: the figures of each endpoint (the mix's entry names, in first-seen order).
    /// Absent without a mix.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointStats>,
}

/// One endpoint of a mix: its requests, errors and latencies in the measured phase.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EndpointStats {
    pub name: String,
    /// Its entries' summed weight.
    pub weight: f64,
    /// Its weight's share of the mix's total weight (0..1).
    pub weight_share: f64,
    /// Responses completed (any status), as the whole run's `requests`.
    pub requests: u64,
    /// Failed requests drawn for this endpoint, by class (`check_failed`: a status it does
    /// not expect). Errors before any request was drawn (a failed connect with nothing
    /// waiting, a queue overflow) are in the whole run's figures only.
    pub errors: u64,
    pub error_classes: BTreeMap<String, u64>,
    /// Requests of this endpoint that hit the timeout (also in its `error_classes`).
    pub timeouts: u64,
    /// Status code -> count.
    pub status_counts: BTreeMap<String, u64>,
    /// Latency as the whole run's (`latency`), this endpoint's requests only: mergeable.
    pub latency: HistData,
}

/// Documents from before the io_uring backend ran on epoll.
fn epoll_name() -> String {
    "epoll".into()
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
    /// WebSocket upgrade handshakes completed, and their times (microseconds).
    pub ws_handshakes: u64,
    pub handshake: Histogram<u64>,
    /// (completed, errors, latency histogram) per second.
    pub per_second: Vec<(u64, u64, Histogram<u64>)>,
    /// Open loop: the offered rate of each second (requests/s), filled in when a run ends.
    pub offered_per_second: Vec<f64>,
    /// A mix: one tally per endpoint (empty without a mix).
    pub endpoints: Vec<EndpointTally>,
}

/// The counters of one endpoint of a mix.
#[derive(Debug, Clone)]
pub struct EndpointTally {
    pub requests: u64,
    pub timeouts: u64,
    pub errors: [u64; crate::errors::N_CLASSES],
    /// The few statuses seen, with counts (linear search: an endpoint answers one or two).
    pub status: Vec<(u16, u64)>,
    pub latency: Histogram<u64>,
}

impl Default for EndpointTally {
    fn default() -> Self {
        EndpointTally {
            requests: 0,
            timeouts: 0,
            errors: [0; crate::errors::N_CLASSES],
            status: Vec::with_capacity(4),
            latency: hist::new_hist(),
        }
    }
}

impl EndpointTally {
    /// Count one response's status.
    #[inline]
    pub fn status(&mut self, code: u16, n: u64) {
        match self.status.iter_mut().find(|(c, _)| *c == code) {
            Some(s) => s.1 += n,
            None => self.status.push((code, n)),
        }
    }

    /// Add another endpoint's counters into this one.
    pub fn merge(&mut self, o: &EndpointTally) {
        self.requests += o.requests;
        self.timeouts += o.timeouts;
        for (a, b) in self.errors.iter_mut().zip(&o.errors) {
            *a += b;
        }
        for &(code, n) in &o.status {
            self.status(code, n);
        }
        hist::add(&mut self.latency, &o.latency);
    }
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
            ws_handshakes: 0,
            handshake: hist::new_hist(),
            per_second: Vec::new(),
            offered_per_second: Vec::new(),
            endpoints: Vec::new(),
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
        self.ws_handshakes += o.ws_handshakes;
        hist::add(&mut self.handshake, &o.handshake);
        for (t, (c, e, h)) in o.per_second.iter().enumerate() {
            let s = self.second(t);
            s.0 += c;
            s.1 += e;
            hist::add(&mut s.2, h);
        }
        let offered = &mut self.offered_per_second;
        if offered.len() < o.offered_per_second.len() {
            offered.resize(o.offered_per_second.len(), 0.0);
        }
        for (a, b) in offered.iter_mut().zip(&o.offered_per_second) {
            *a += b;
        }
        if self.endpoints.len() < o.endpoints.len() {
            self.endpoints
                .resize_with(o.endpoints.len(), EndpointTally::default);
        }
        for (a, b) in self.endpoints.iter_mut().zip(&o.endpoints) {
            a.merge(b);
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

#[cfg(test)]
mod tests {
    use super::generator_limited;

    #[test]
    fn a_generator_is_the_limit_when_busy_or_waiting_for_its_core() {
        // one thread over 0.25 s: 0.23 s of CPU is 92% busy
        assert!(generator_limited(0.23, Some(0.0), 0.25, 1));
        assert!(!generator_limited(0.2, Some(0.0), 0.25, 1));
        // a fast stack's generator before the fix: busy 42%, waiting 22% of the slice
        assert!(generator_limited(0.105, Some(0.055), 0.25, 1));
        // waiting 5% of the slice counts only for a generator with half a slice of work
        assert!(generator_limited(0.115, Some(0.0125), 0.25, 1));
        assert!(!generator_limited(0.115, Some(0.012), 0.25, 1));
        assert!(!generator_limited(0.05, Some(0.0125), 0.25, 1)); // a slow stack's
        assert!(!generator_limited(0.2, None, 0.25, 1));
        // two threads share the slice's wall time
        assert!(!generator_limited(0.4, Some(0.02), 0.25, 2));
        assert!(generator_limited(0.46, Some(0.0), 0.25, 2));
        assert!(!generator_limited(0.0, Some(0.0), 0.0, 1));
    }
}
