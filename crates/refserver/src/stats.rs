//! Counters: one cache-line-aligned block per event-loop thread, written only by its
//! owner (plain relaxed load + store, no locked instructions), summed when `/__stats` asks.

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{json, Map, Value};

use crate::config::Mode;

/// Index of each counter in a thread's block.
#[derive(Debug, Clone, Copy)]
#[repr(usize)]
pub(crate) enum C {
    Requests,
    StatsRequests,
    BadRequests,
    HeadersTooLarge,
    HeaderTimeouts,
    BodyTimeouts,
    IdleTimeouts,
    WriteTimeouts,
    RequestBodies,
    RequestBodyBytes,
    ConnAccepted,
    ConnClosed,
    ConnRejected,
    AcceptErrors,
    BytesRead,
    BytesWritten,
    Status2xx,
    Status3xx,
    Status4xx,
    Status5xx,
    Status1xx,
    DelayedResponses,
    DelayLateNs,
    DelayLateMaxNs,
    /// First of `Mode::ALL.len()` per-mode counters.
    Mode0,
}

const N: usize = C::Mode0 as usize + Mode::ALL.len();

/// One thread's counters.
#[repr(align(128))]
pub(crate) struct ThreadStats {
    c: [AtomicU64; N],
}

impl ThreadStats {
    pub fn new() -> ThreadStats {
        ThreadStats {
            c: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Adds `n` to a counter. Only the owning thread may call this.
    #[inline]
    pub fn add(&self, c: C, n: u64) {
        let a = &self.c[c as usize];
        a.store(a.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Raises a counter to `v` if it is below. Only the owning thread may call this.
    #[inline]
    pub fn max(&self, c: C, v: u64) {
        let a = &self.c[c as usize];
        if v > a.load(Ordering::Relaxed) {
            a.store(v, Ordering::Relaxed);
        }
    }

    #[inline]
    pub fn add_mode(&self, m: Mode) {
        let a = &self.c[C::Mode0 as usize + m.index()];
        a.store(a.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    #[inline]
    pub fn add_status(&self, status: u16) {
        let c = match status {
            100..=199 => C::Status1xx,
            200..=299 => C::Status2xx,
            300..=399 => C::Status3xx,
            400..=499 => C::Status4xx,
            _ => C::Status5xx,
        };
        self.add(c, 1);
    }

    fn get(&self, i: usize) -> u64 {
        self.c[i].load(Ordering::Relaxed)
    }
}

/// Sums the counters of every thread into the `/__stats` JSON document.
pub(crate) fn snapshot(
    threads: &[std::sync::Arc<ThreadStats>],
    extra: Map<String, Value>,
) -> Value {
    let sum = |c: usize| threads.iter().map(|t| t.get(c)).sum::<u64>();
    let g = |c: C| sum(c as usize);
    let mut modes = Map::new();
    for (i, m) in Mode::ALL.iter().enumerate() {
        modes.insert(m.name().to_string(), json!(sum(C::Mode0 as usize + i)));
    }
    let accepted = g(C::ConnAccepted);
    let delayed = g(C::DelayedResponses);
    let late_max = threads
        .iter()
        .map(|t| t.get(C::DelayLateMaxNs as usize))
        .max()
        .unwrap_or(0);
    let closed = g(C::ConnClosed);
    let mut v = json!({
        "requests": g(C::Requests),
        "stats_requests": g(C::StatsRequests),
        "modes": modes,
        "statuses": {
            "1xx": g(C::Status1xx),
            "2xx": g(C::Status2xx),
            "3xx": g(C::Status3xx),
            "4xx": g(C::Status4xx),
            "5xx": g(C::Status5xx),
        },
        "bad_requests": g(C::BadRequests),
        "headers_too_large": g(C::HeadersTooLarge),
        "header_timeouts": g(C::HeaderTimeouts),
        "body_timeouts": g(C::BodyTimeouts),
        "idle_timeouts": g(C::IdleTimeouts),
        "write_timeouts": g(C::WriteTimeouts),
        "request_bodies": g(C::RequestBodies),
        "request_body_bytes": g(C::RequestBodyBytes),
        "connections_accepted": accepted,
        "connections_closed": closed,
        "connections_open": accepted.saturating_sub(closed),
        "connections_rejected": g(C::ConnRejected),
        "accept_errors": g(C::AcceptErrors),
        "bytes_read": g(C::BytesRead),
        "bytes_written": g(C::BytesWritten),
        "delayed_responses": delayed,
        "delay_late_us_mean": if delayed == 0 { 0.0 } else { g(C::DelayLateNs) as f64 / delayed as f64 / 1e3 },
        "delay_late_us_max": late_max as f64 / 1e3,
    });
    if let Value::Object(o) = &mut v {
        o.extend(extra);
    }
    v
}
