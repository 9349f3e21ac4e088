//! Interleaved slices: one run that loads several targets (variants) in turn, in short
//! slices (docs/load-engine.md, "Interleaved slices"; docs/ab.md).
//!
//! Each target gets its own generator threads and connection pool. The slice plan is fixed
//! when the run starts: a warm-up window per target, then `rounds` rounds in which every
//! target gets one slice, in a seeded random order within the round. Every thread knows the
//! whole plan, so the switch costs no message between threads: a thread issues requests only
//! inside its target's windows. Keep-alive connections are opened once and sit idle outside
//! the windows; with a connection per request (`keepalive` false) or a few requests per
//! connection (`requests_per_connection`) a connection closed outside a window is opened
//! again when the next one opens, never during another target's. A target is a URL, and
//! may be reached over a unix socket of its own (`unix_socket_by_target`, as a load's
//! `unix_socket`). Slices speak the load's protocol: HTTP/1.1, h2c (streams opened only
//! inside the windows, connections kept between them) or WebSocket (`ws://` targets, each
//! connection upgraded once, messages sent only inside the windows). A window is
//! `settle_s` of load that is not counted (the previous target's in-flight requests drain
//! meanwhile), then the target's slice length that is
//! (`slice_s`, or its own in `slice_s_by_target`: a PyPy process needs longer slices than a
//! CPython one, its collector's pauses would empty short ones). At the end of a
//! window each thread adds its slice's counts to a shared board (one lock per slice per
//! thread, none per request).
//!
//! An open loop (`load.rate`, constant or Poisson arrivals) offers every target the same
//! rate: in each of a target's windows its arrivals start at the window's load start and
//! stop at its end, latency runs from each send's intended time, and what was due but not
//! sent by the end is dropped and counted in the slice (`unsent`), never carried into
//! another target's window (worker/sliced.rs). Its slices come with their latency
//! histograms in progress snapshots too (each slice's once), so a caller can judge
//! percentiles over a process's merged slices while the run goes on.

use crate::engine::StartError;
use crate::hist::{self, HistData};
use crate::result::{
    endpoint_stats, generator_limited, EndpointStats, EndpointTally, Tally, ThreadStats,
};
use crate::spec::LoadSpec;
use crate::sys;
use crate::worker::{
    Rng, Shared, SliceSink, ThreadOut, ThreadPlan, ThreadProgress, ThreadSpent, Window, Worker,
};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Version of the sliced result document.
pub const SLICED_VERSION: u32 = 1;
/// The most slices one run may plan.
const MAX_SLICES: u64 = 100_000;

/// What to run: the load shape (`load`: connections and threads per target, pinning,
/// request, timeouts, checks; its `url` and `duration_s` are unused) and the slice plan.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SlicedSpec {
    pub load: LoadSpec,
    /// One URL per target (variant), at least two, all different (with their unix sockets).
    pub targets: Vec<String>,
    /// Each target's unix socket, one per target in `targets`' order ("" for a target over
    /// TCP); empty: every target over TCP (or the `unix:PATH:/request-path` URL form). The
    /// URL still gives the path and the Host header, as a load's `unix_socket` (which slices
    /// refuse: it would send every target to one socket).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unix_socket_by_target: Vec<String>,
    /// Counted seconds of each slice (unused when `slice_s_by_target` is given, but still
    /// checked).
    pub slice_s: f64,
    /// Counted seconds of each target's slices, one per target, in `targets`' order; empty:
    /// `slice_s` for every target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slice_s_by_target: Vec<f64>,
    /// Each target's first touch (its warm-up window, alone, before the first round), one
    /// per target; empty: `load.warmup_s` for every target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmup_s_by_target: Vec<f64>,
    /// Uncounted seconds of load at the start of each slice, while the previous target's
    /// requests in flight drain.
    #[serde(default = "default_settle")]
    pub settle_s: f64,
    /// The settle that follows each target's slices (and its first touch), one per target:
    /// the next window's uncounted start is sized by the target whose requests drain in it
    /// (a slow stack needs a longer one than a fast one); empty: `settle_s` after every
    /// target. The first window after no touch at all starts with `settle_s`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub settle_s_by_target: Vec<f64>,
    /// Rounds planned; the caller may stop earlier (`RunningSlices::finish_early`).
    pub rounds: u32,
    /// Seed of the order within rounds.
    #[serde(default)]
    pub seed: u64,
}

fn default_settle() -> f64 {
    0.2
}

impl SlicedSpec {
    /// Parse from JSON (one line naming the field on error).
    pub fn from_json(s: &str) -> Result<SlicedSpec, String> {
        serde_json::from_str(s).map_err(|e| format!("sliced spec: {e}"))
    }

    /// Check the plan; the message starts with the field name.
    pub fn validate(&self) -> Result<(), String> {
        let n = self.targets.len();
        if n < 2 {
            return Err("targets: at least two are needed".into());
        }
        if !self.unix_socket_by_target.is_empty() && self.unix_socket_by_target.len() != n {
            return Err(format!(
                "unix_socket_by_target: {} values for {n} targets",
                self.unix_socket_by_target.len()
            ));
        }
        for (i, t) in self.targets.iter().enumerate() {
            let socket = self.unix_socket_of(i);
            if (0..i).any(|j| self.targets[j] == *t && self.unix_socket_of(j) == socket) {
                return Err(match socket {
                    Some(path) => format!("targets: {t} on unix socket {path} is given twice"),
                    None => format!("targets: {t} is given twice"),
                });
            }
        }
        if !(self.slice_s.is_finite() && self.slice_s >= 0.05) {
            return Err("slice_s: must be >= 0.05".into());
        }
        check_by_target("slice_s_by_target", &self.slice_s_by_target, n, 0.05)?;
        check_by_target("warmup_s_by_target", &self.warmup_s_by_target, n, 0.0)?;
        if self.warmup_s_by_target.is_empty()
            && !(self.load.warmup_s.is_finite() && self.load.warmup_s >= 0.0)
        {
            return Err("load.warmup_s: must be >= 0".into());
        }
        if !(self.settle_s.is_finite() && self.settle_s >= 0.0) {
            return Err("settle_s: must be >= 0".into());
        }
        check_by_target("settle_s_by_target", &self.settle_s_by_target, n, 0.0)?;
        if self.rounds == 0 {
            return Err("rounds: must be >= 1".into());
        }
        if self.rounds as u64 * n as u64 > MAX_SLICES {
            return Err(format!("rounds: at most {MAX_SLICES} slices in all"));
        }
        let l = &self.load;
        if !l.rate_phases.is_empty() {
            return Err(
                "load.rate_phases: slices take a constant rate (each window starts its \
                 arrivals afresh)"
                    .into(),
            );
        }
        if l.fresh_share > 0.0 {
            return Err("load.fresh_share: not available with slices".into());
        }
        if l.unix_socket.is_some() {
            return Err(
                "load.unix_socket: give each target's socket in unix_socket_by_target".into(),
            );
        }
        if l.max_requests.is_some() {
            return Err("load.max_requests: slices are bounded by the plan".into());
        }
        if !l.faults.is_empty() {
            return Err("load.faults: not available with slices".into());
        }
        Ok(())
    }

    /// The unix socket target `t` is reached over (None: TCP, or its URL names one).
    pub fn unix_socket_of(&self, t: usize) -> Option<&str> {
        self.unix_socket_by_target
            .get(t)
            .map(String::as_str)
            .filter(|p| !p.is_empty())
    }

    /// Counted seconds of target `t`'s slices.
    pub fn slice_s_of(&self, t: usize) -> f64 {
        self.slice_s_by_target
            .get(t)
            .copied()
            .unwrap_or(self.slice_s)
    }

    /// Seconds of target `t`'s first touch (its warm-up window).
    pub fn warmup_s_of(&self, t: usize) -> f64 {
        self.warmup_s_by_target
            .get(t)
            .copied()
            .unwrap_or(self.load.warmup_s)
    }

    /// The settle at the start of the window after one of target `t`'s (None: after no
    /// window at all).
    pub fn settle_s_after(&self, t: Option<usize>) -> f64 {
        t.and_then(|t| self.settle_s_by_target.get(t).copied())
            .unwrap_or(self.settle_s)
    }

    /// The last target with a first touch: the one the first round's first settle drains.
    fn last_touched(&self) -> Option<usize> {
        (0..self.targets.len())
            .rev()
            .find(|&t| self.warmup_s_of(t) > 0.0)
    }

    /// Seconds the whole plan lasts (warm-up windows included): every target's first touch,
    /// then `rounds` times one settle and one slice of every target (pywebbench.load.sliced's
    /// `SlicePlan.planned_s` sums alike). With settles of their own per target, each
    /// window's settle is the one of the target before it, in the rounds' order.
    pub fn planned_s(&self) -> f64 {
        let n = self.targets.len();
        let touches: f64 = (0..n).map(|t| self.warmup_s_of(t)).sum();
        if self.settle_s_by_target.is_empty() {
            let round: f64 = (0..n).map(|t| self.settle_s + self.slice_s_of(t)).sum();
            return touches + self.rounds as f64 * round;
        }
        let mut before = self.last_touched();
        let mut total = touches;
        for t in self.order().into_iter().flatten() {
            total += self.settle_s_after(before) + self.slice_s_of(t);
            before = Some(t);
        }
        total
    }

    /// The order of the targets in each round (seeded shuffles).
    pub fn order(&self) -> Vec<Vec<usize>> {
        let mut rng = Rng(self.seed ^ 0x5EED_AB00_0000_0001);
        (0..self.rounds)
            .map(|_| {
                let mut o: Vec<usize> = (0..self.targets.len()).collect();
                for i in (1..o.len()).rev() {
                    let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                    o.swap(i, j);
                }
                o
            })
            .collect()
    }

    /// Each target's windows for a run that started at `t0`, and the board's slices
    /// (target, round) in time order.
    pub fn windows(&self, t0: u64) -> (Vec<Vec<Window>>, Vec<(usize, u32)>) {
        let ns = |s: f64| (s * 1e9).round() as u64;
        let n = self.targets.len();
        let mut per: Vec<Vec<Window>> = vec![Vec::new(); n];
        let mut at = t0;
        // The first touches one after another, each ending at its sum from t0 (no rounding
        // carried from one to the next); a target without one has no warm-up window.
        let mut touched = 0.0;
        for (t, w) in per.iter_mut().enumerate() {
            let warm = self.warmup_s_of(t);
            if warm > 0.0 {
                touched += warm;
                let end = t0 + ns(touched);
                w.push(Window {
                    slice: None,
                    load_start: at,
                    count_start: end,
                    end,
                });
                at = end;
            }
        }
        let mut board = Vec::new();
        let mut before = self.last_touched();
        for (r, order) in self.order().into_iter().enumerate() {
            for t in order {
                let settle = self.settle_s_after(before);
                let step = ns(settle + self.slice_s_of(t));
                per[t].push(Window {
                    slice: Some(board.len()),
                    load_start: at,
                    count_start: at + ns(settle),
                    end: at + step,
                });
                board.push((t, r as u32));
                at += step;
                before = Some(t);
            }
        }
        (per, board)
    }
}

/// A per-target list: empty, or one finite value >= `least` per target.
fn check_by_target(field: &str, values: &[f64], targets: usize, least: f64) -> Result<(), String> {
    if values.is_empty() {
        return Ok(());
    }
    if values.len() != targets {
        return Err(format!(
            "{field}: {} values for {targets} targets",
            values.len()
        ));
    }
    match values.iter().position(|v| !(v.is_finite() && *v >= least)) {
        Some(t) => Err(format!(
            "{field}: {} for target {t}: each must be >= {least}",
            values[t]
        )),
        None => Ok(()),
    }
}

/// The counts of one slice, summed over its target's threads.
struct SliceAcc {
    target: usize,
    round: u32,
    requests: u64,
    errors: u64,
    timeouts: u64,
    /// Open loop: sends due in the counted part, and sends dropped unsent at the end.
    offered: u64,
    unsent: u64,
    latency: Histogram<u64>,
    /// A mix: each endpoint's counters (empty without a mix).
    endpoints: Vec<EndpointTally>,
    /// Threads that reported it so far.
    parts: u32,
    /// The generator threads' CPU time and CPU wait over their counted parts (the wait
    /// None when a thread's kernel did not say).
    cpu_ns: u64,
    wait_ns: Option<u64>,
    started_ns: u64,
    ended_ns: u64,
}

/// Where threads put their finished slices (one lock per slice per thread).
pub struct SliceBoard {
    slices: Mutex<Vec<SliceAcc>>,
    threads_per_target: u32,
    /// The load shape: a mix's endpoint names and weights.
    load: LoadSpec,
    /// An open loop: progress snapshots carry each slice's histogram (its percentiles over a
    /// process's merged slices are what a caller judges).
    open: bool,
}

impl SliceSink for SliceBoard {
    /// Add one thread's part of slice `index`.
    fn add(&self, index: usize, tally: &Tally, started_ns: u64, ended_ns: u64, spent: ThreadSpent) {
        let mut b = self.slices.lock().unwrap_or_else(|e| e.into_inner());
        let s = &mut b[index];
        s.cpu_ns += spent.cpu_ns;
        s.wait_ns = match (s.parts, s.wait_ns, spent.wait_ns) {
            (0, _, w) => w,
            (_, Some(a), Some(w)) => Some(a + w),
            _ => None,
        };
        s.requests += tally.requests;
        s.errors += tally.errors.total();
        s.timeouts += tally.timeouts;
        s.offered += tally.offered;
        s.unsent += tally.unsent_at_end;
        hist::add(&mut s.latency, &tally.latency);
        if s.endpoints.len() < tally.endpoints.len() {
            s.endpoints
                .resize_with(tally.endpoints.len(), EndpointTally::default);
        }
        for (a, b) in s.endpoints.iter_mut().zip(&tally.endpoints) {
            a.merge(b);
        }
        s.started_ns = if s.parts == 0 {
            started_ns
        } else {
            s.started_ns.min(started_ns)
        };
        s.ended_ns = s.ended_ns.max(ended_ns);
        s.parts += 1;
    }
}

impl SliceBoard {
    /// The slices every thread of their target has reported, in time order, each with its
    /// latency histogram and, with a mix, its endpoints' figures (the result's).
    fn complete(&self) -> Vec<SliceStats> {
        let b = self.slices.lock().unwrap_or_else(|e| e.into_inner());
        let clock = UnixClock::now();
        b.iter()
            .enumerate()
            .filter(|(_, s)| s.parts == self.threads_per_target)
            .map(|(i, s)| self.stats(i, s, &clock, true))
            .collect()
    }

    /// The complete slices not in `reported` yet (then marked there), without histograms
    /// but an open loop's: a progress snapshot. Each slice is summarised once, not at every
    /// snapshot (encoding every slice's histogram ten times a second, under the board's
    /// lock, cost the orchestrator's core more than the engine's own work in a long group).
    fn newly_complete(&self, reported: &mut Vec<bool>) -> Vec<SliceStats> {
        let b = self.slices.lock().unwrap_or_else(|e| e.into_inner());
        reported.resize(b.len(), false);
        let clock = UnixClock::now();
        let mut out = Vec::new();
        for (i, s) in b.iter().enumerate() {
            if !reported[i] && s.parts == self.threads_per_target {
                reported[i] = true;
                out.push(self.stats(i, s, &clock, self.open));
            }
        }
        out
    }

    /// One complete slice's figures (with its histogram and endpoints: `full`).
    fn stats(&self, i: usize, s: &SliceAcc, clock: &UnixClock, full: bool) -> SliceStats {
        let d = s.ended_ns.saturating_sub(s.started_ns) as f64 / 1e9;
        let cpu_s = s.cpu_ns as f64 / 1e9;
        let wait_s = s.wait_ns.map(|ns| ns as f64 / 1e9);
        let (p50_us, p99_us, latency) = if full {
            let h = HistData::from_hist(&s.latency);
            (h.summary.p50, h.summary.p99, Some(h))
        } else {
            let q = hist::quantiles(&s.latency, &[0.5, 0.99]);
            (q[0], q[1], None)
        };
        SliceStats {
            index: i,
            round: s.round,
            target: s.target,
            requests: s.requests,
            errors: s.errors,
            timeouts: s.timeouts,
            offered: s.offered,
            unsent: s.unsent,
            duration_s: d,
            rps: if d > 0.0 { s.requests as f64 / d } else { 0.0 },
            started_at: clock.unix(s.started_ns),
            ended_at: clock.unix(s.ended_ns),
            p50_us,
            p99_us,
            generator_cpu_s: cpu_s,
            generator_wait_s: wait_s,
            generator_bound: generator_limited(cpu_s, wait_s, d, self.threads_per_target),
            latency,
            endpoints: if full {
                endpoint_stats(&s.endpoints, &self.load)
            } else {
                Vec::new()
            },
        }
    }
}

/// The monotonic clock read against Unix time once, to put a slice's instants in Unix time.
struct UnixClock {
    mono: u64,
    unix: f64,
}

impl UnixClock {
    fn now() -> UnixClock {
        UnixClock {
            mono: sys::now_ns(),
            unix: sys::unix_time_s(),
        }
    }

    fn unix(&self, ns: u64) -> f64 {
        self.unix - self.mono.saturating_sub(ns) as f64 / 1e9
    }
}

/// One slice of one target in the result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SliceStats {
    /// Position in the run (time order).
    pub index: usize,
    pub round: u32,
    /// Index into the spec's `targets`.
    pub target: usize,
    pub requests: u64,
    pub errors: u64,
    pub timeouts: u64,
    /// Open loop: sends due in the counted part (at the target's rate), and sends of the
    /// window dropped at its end without being sent (queued, or waiting for a connection);
    /// 0 in a closed loop.
    #[serde(default)]
    pub offered: u64,
    #[serde(default)]
    pub unsent: u64,
    /// Counted wall seconds (first thread's start to last thread's end).
    pub duration_s: f64,
    pub rps: f64,
    /// Unix times of the counted part.
    pub started_at: f64,
    pub ended_at: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    /// CPU seconds the target's generator threads spent over their counted parts, summed:
    /// over `duration_s` times the threads, their busy share.
    #[serde(default)]
    pub generator_cpu_s: f64,
    /// Seconds those threads were runnable but waited for a CPU (other tasks on the
    /// generator's cores), summed; null when the kernel does not say.
    #[serde(default)]
    pub generator_wait_s: Option<f64>,
    /// The generator limited this slice: its threads were busy `BUSY_LIMIT` of the slice or
    /// more, or waited for a CPU `WAIT_LIMIT` of it or more (the figure may be low).
    #[serde(default)]
    pub generator_bound: bool,
    /// The slice's latency histogram (absent from progress snapshots but an open loop's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<HistData>,
    /// A mix: the figures of each endpoint in this slice, as a run's `endpoints` (absent
    /// without a mix and from progress snapshots).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<EndpointStats>,
}

/// Whole-run figures of one target.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TargetStats {
    pub url: String,
    /// The unix socket it was reached over (absent: TCP, or its URL names one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unix_socket: Option<String>,
    /// Responses over the run (settle parts and warm-up included).
    pub requests: u64,
    pub errors: u64,
    pub error_classes: BTreeMap<String, crate::errors::ErrorEntry>,
    pub attempts: u64,
    pub established: u64,
    pub reopened: u64,
}

/// Everything a sliced run measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SlicedResult {
    pub version: u32,
    pub spec: SlicedSpec,
    /// Stopped by a signal (the last, unfinished slices are absent).
    pub interrupted: bool,
    /// Stopped by the caller before the planned rounds ended ("enough").
    pub stopped_early: bool,
    pub elapsed_s: f64,
    pub slices: Vec<SliceStats>,
    pub targets: Vec<TargetStats>,
    pub threads: Vec<ThreadStats>,
    pub warnings: Vec<String>,
}

impl SlicedResult {
    /// JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("result serialises")
    }
}

/// A live snapshot: the slices completed since the previous snapshot (no histograms).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SlicedProgress {
    pub elapsed_s: f64,
    pub planned_s: f64,
    /// Each complete slice appears in one snapshot only.
    pub new_slices: Vec<SliceStats>,
}

/// A sliced run in progress. Dropping it stops the run and waits for its threads.
pub struct RunningSlices {
    spec: SlicedSpec,
    shared: Arc<Shared>,
    board: Arc<SliceBoard>,
    handles: Vec<JoinHandle<ThreadOut>>,
    started: Instant,
    enough: AtomicBool,
    /// Which slices a progress snapshot has already given.
    reported: Mutex<Vec<bool>>,
}

/// Validate the spec and start every target's threads.
pub fn start(spec: &SlicedSpec) -> Result<RunningSlices, StartError> {
    spec.validate().map_err(StartError::Invalid)?;
    let uring = crate::uring::resolve(spec.load.io).map_err(StartError::Invalid)?;
    let n = spec.targets.len();
    let threads = spec.load.threads.max(1) as usize;
    let mut plans = Vec::with_capacity(n);
    for (t, url) in spec.targets.iter().enumerate() {
        let mut l = spec.load.clone();
        l.url = url.clone();
        l.unix_socket = spec.unix_socket_of(t).map(String::from);
        l.warmup_s = 0.0;
        l.duration_s = Some(spec.planned_s() + 1.0);
        let mut p = l.plan().map_err(|e| {
            let on = l
                .unix_socket
                .as_ref()
                .map(|s| format!(" (unix socket {s})"));
            StartError::Invalid(format!("targets: {url}{}: {e}", on.unwrap_or_default()))
        })?;
        p.uring = uring;
        plans.push(Arc::new(p));
    }
    sys::ensure_nofile(spec.load.fds_needed() * n as u64).map_err(|e| {
        StartError::Invalid(format!(
            "connections: {} connections per target {e}",
            spec.load.connections
        ))
    })?;
    let shared = Arc::new(Shared {
        stop: Default::default(),
        progress: (0..threads * n)
            .map(|_| ThreadProgress::default())
            .collect(),
        t0: sys::now_ns(),
    });
    let (windows, board_plan) = spec.windows(shared.t0);
    let board = Arc::new(SliceBoard {
        slices: Mutex::new(
            board_plan
                .iter()
                .map(|&(target, round)| SliceAcc {
                    target,
                    round,
                    requests: 0,
                    errors: 0,
                    timeouts: 0,
                    offered: 0,
                    unsent: 0,
                    latency: hist::new_hist(),
                    endpoints: Vec::new(),
                    parts: 0,
                    cpu_ns: 0,
                    wait_ns: None,
                    started_ns: 0,
                    ended_ns: 0,
                })
                .collect(),
        ),
        threads_per_target: threads as u32,
        load: spec.load.clone(),
        open: spec.load.rate.is_some(),
    });
    let mut workers = Vec::with_capacity(threads * n);
    for (t, plan) in plans.iter().enumerate() {
        for k in 0..threads {
            let id = t * threads + k;
            let tp = ThreadPlan {
                id,
                connections: split(spec.load.connections as usize, threads, k),
                cpu: if spec.load.cpus.is_empty() {
                    None
                } else {
                    Some(spec.load.cpus[k % spec.load.cpus.len()])
                },
                budget: None,
                slices: Some((windows[t].clone(), board.clone() as Arc<dyn SliceSink>)),
            };
            let w = Worker::new(plan.clone(), shared.clone(), tp)
                .map_err(|e| StartError::System(format!("cannot create the event loop: {e}")))?;
            workers.push(w);
        }
    }
    let mut handles = Vec::with_capacity(workers.len());
    for (i, w) in workers.into_iter().enumerate() {
        let h = std::thread::Builder::new()
            .name(format!("pwb-slice-{i}"))
            .spawn(move || w.run())
            .map_err(|e| StartError::System(format!("cannot start generator thread: {e}")))?;
        handles.push(h);
    }
    Ok(RunningSlices {
        spec: spec.clone(),
        shared,
        board,
        handles,
        started: Instant::now(),
        enough: AtomicBool::new(false),
        reported: Mutex::new(Vec::new()),
    })
}

fn split(total: usize, parts: usize, i: usize) -> usize {
    total / parts + usize::from(i < total % parts)
}

/// Run a sliced plan to completion (blocking).
pub fn run(spec: &SlicedSpec) -> Result<SlicedResult, StartError> {
    let r = start(spec)?;
    r.wait_timeout(Duration::from_secs_f64(spec.planned_s() + 60.0));
    Ok(r.join(false))
}

impl RunningSlices {
    /// Ask every thread to stop (they notice within ~50 ms).
    pub fn stop(&self) {
        self.shared.stop.store(true, Relaxed);
    }

    /// Stop now because the caller knows enough (e.g. a narrow CI): not an interruption.
    pub fn finish_early(&self) {
        self.enough.store(true, Relaxed);
        self.stop();
    }

    /// Wait up to `d` for the run to finish; true if it did.
    pub fn wait_timeout(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        loop {
            if self.handles.iter().all(|h| h.is_finished()) {
                return true;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(5)));
        }
    }

    /// A snapshot: the slices completed since the previous one (each slice is in exactly
    /// one snapshot; the caller keeps them).
    pub fn progress(&self) -> SlicedProgress {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        SlicedProgress {
            elapsed_s: self.started.elapsed().as_secs_f64(),
            planned_s: self.spec.planned_s(),
            new_slices: self.board.newly_complete(&mut reported),
        }
    }

    /// Wait for the threads and build the result.
    pub fn join(mut self, interrupted: bool) -> SlicedResult {
        let outs: Vec<ThreadOut> = self
            .handles
            .drain(..)
            .map(|h| h.join().expect("generator thread panicked"))
            .collect();
        let threads = self.spec.load.threads.max(1) as usize;
        let mut warnings = Vec::new();
        let mut targets = Vec::new();
        for (t, url) in self.spec.targets.iter().enumerate() {
            let mut total = Tally::new();
            for o in &outs[t * threads..(t + 1) * threads] {
                total.merge(&o.tally);
                warnings.extend(o.warnings.iter().cloned());
            }
            targets.push(TargetStats {
                url: url.clone(),
                unix_socket: self.spec.unix_socket_of(t).map(String::from),
                requests: total.requests,
                errors: total.errors.total(),
                error_classes: total.errors.to_map(),
                attempts: total.attempts,
                established: total.established,
                reopened: total.reopened,
            });
        }
        let stopped = self.shared.stop.load(Relaxed);
        SlicedResult {
            version: SLICED_VERSION,
            spec: self.spec.clone(),
            interrupted: interrupted || (stopped && !self.enough.load(Relaxed)),
            stopped_early: self.enough.load(Relaxed),
            elapsed_s: self.started.elapsed().as_secs_f64(),
            slices: self.board.complete(),
            targets,
            threads: outs.iter().map(|o| o.stats.clone()).collect(),
            warnings,
        }
    }
}

impl Drop for RunningSlices {
    fn drop(&mut self) {
        self.stop();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rounds: u32) -> SlicedSpec {
        SlicedSpec {
            load: LoadSpec {
                warmup_s: 0.5,
                ..Default::default()
            },
            targets: vec!["http://127.0.0.1:1/".into(), "http://127.0.0.1:2/".into()],
            unix_socket_by_target: Vec::new(),
            slice_s: 1.0,
            slice_s_by_target: Vec::new(),
            warmup_s_by_target: Vec::new(),
            settle_s: 0.25,
            settle_s_by_target: Vec::new(),
            rounds,
            seed: 7,
        }
    }

    /// Three targets of their own slice lengths and first touches (a PyPy one among
    /// CPython ones: longer slices, a longer touch; one with no touch at all).
    fn spec_by_target(rounds: u32) -> SlicedSpec {
        let mut s = spec(rounds);
        s.targets.push("http://127.0.0.1:3/".into());
        s.slice_s_by_target = vec![0.25, 0.5, 0.3];
        s.warmup_s_by_target = vec![0.5, 3.0, 0.0];
        s
    }

    impl SlicedSpec {
        fn to_json_for_test(&self) -> String {
            serde_json::to_string(self).unwrap()
        }
    }

    #[test]
    fn windows_tile_the_plan_one_target_at_a_time() {
        let s = spec(10);
        let (per, board) = s.windows(1_000);
        assert_eq!(board.len(), 20);
        for w in &per {
            assert_eq!(w.len(), 11, "one warm-up window and one per round");
        }
        let mut all: Vec<Window> = per.iter().flatten().copied().collect();
        all.sort_by_key(|w| w.load_start);
        assert_eq!(all[0].load_start, 1_000);
        for pair in all.windows(2) {
            assert_eq!(pair[0].end, pair[1].load_start, "no gap, no overlap");
        }
        let last = all.last().unwrap().end;
        assert_eq!(last - 1_000, (s.planned_s() * 1e9).round() as u64);
        for (i, &(t, r)) in board.iter().enumerate() {
            let w = per[t].iter().find(|w| w.slice == Some(i)).unwrap();
            assert_eq!(w.count_start - w.load_start, 250_000_000);
            assert_eq!(w.end - w.count_start, 1_000_000_000);
            assert_eq!(r as usize, i / 2, "each round has one slice per target");
        }
    }

    #[test]
    fn windows_follow_each_targets_own_slice_and_first_touch() {
        let s = spec_by_target(8);
        s.validate().unwrap();
        let t0 = 1_000;
        let (per, board) = s.windows(t0);
        assert_eq!(board.len(), 24);
        // The first touches one after another, in target order, each its own length; the
        // target without one has no warm-up window.
        let warm: Vec<Vec<Window>> = per
            .iter()
            .map(|w| w.iter().filter(|w| w.slice.is_none()).copied().collect())
            .collect();
        let s_ns = |s: f64| (s * 1e9).round() as u64;
        assert_eq!(
            warm[0],
            [Window {
                slice: None,
                load_start: t0,
                count_start: t0 + s_ns(0.5),
                end: t0 + s_ns(0.5)
            }]
        );
        assert_eq!(warm[1].len(), 1);
        assert_eq!(warm[1][0].load_start, t0 + s_ns(0.5));
        assert_eq!(warm[1][0].end, t0 + s_ns(3.5));
        assert!(warm[2].is_empty());
        // Every slice: the common settle, then its target's own counted seconds.
        for (i, &(t, _)) in board.iter().enumerate() {
            let w = per[t].iter().find(|w| w.slice == Some(i)).unwrap();
            assert_eq!(w.count_start - w.load_start, 250_000_000);
            let counted = (w.end - w.count_start) as i64;
            let want = s_ns(s.slice_s_by_target[t]) as i64;
            assert!(
                (counted - want).abs() <= 1,
                "slice {i} of target {t}: {counted} ns"
            );
        }
        // One target at a time, no gap, and the plan ends when planned_s says.
        let mut all: Vec<Window> = per.iter().flatten().copied().collect();
        all.sort_by_key(|w| w.load_start);
        assert_eq!(all.len(), 2 + 24);
        assert_eq!(all[0].load_start, t0);
        assert_eq!(
            all[2].load_start,
            t0 + s_ns(3.5),
            "the rounds follow the touches"
        );
        for pair in all.windows(2) {
            assert_eq!(pair[0].end, pair[1].load_start, "no gap, no overlap");
        }
        let planned = 3.5 + 8.0 * (3.0 * 0.25 + 0.25 + 0.5 + 0.3);
        assert!((s.planned_s() - planned).abs() < 1e-9, "{}", s.planned_s());
        let last = all.last().unwrap().end - t0;
        assert!(last.abs_diff(s_ns(planned)) <= 24, "{last} ns");
    }

    #[test]
    fn each_settle_is_sized_by_the_target_before_it() {
        let mut s = spec_by_target(6);
        s.settle_s = 0.5; // only before a first window that follows no touch
        s.settle_s_by_target = vec![0.05, 0.2, 0.1];
        s.validate().unwrap();
        let t0 = 1_000;
        let (per, board) = s.windows(t0);
        let s_ns = |s: f64| (s * 1e9).round() as u64;
        let mut before = Some(1); // the last target with a first touch
        for (i, &(t, _)) in board.iter().enumerate() {
            let w = per[t].iter().find(|w| w.slice == Some(i)).unwrap();
            let want = s_ns(s.settle_s_by_target[before.unwrap()]);
            assert_eq!(w.count_start - w.load_start, want, "slice {i}");
            before = Some(t);
        }
        let mut all: Vec<Window> = per.iter().flatten().copied().collect();
        all.sort_by_key(|w| w.load_start);
        for pair in all.windows(2) {
            assert_eq!(pair[0].end, pair[1].load_start, "no gap, no overlap");
        }
        let last = all.last().unwrap().end - t0;
        assert!(last.abs_diff(s_ns(s.planned_s())) <= 24, "{last} ns");
        let common = 3.5 + 6.0 * (0.25 + 0.5 + 0.3) + 18.0 * 0.05;
        assert!(
            s.planned_s() > common,
            "longer than with the shortest settle"
        );
        let mut bad = s.clone();
        bad.settle_s_by_target = vec![0.1, -0.1, 0.1];
        let e = bad.validate().unwrap_err();
        assert!(e.starts_with("settle_s_by_target: "), "{e}");
        bad.settle_s_by_target = vec![0.1];
        assert_eq!(
            bad.validate().unwrap_err(),
            "settle_s_by_target: 1 values for 3 targets"
        );
    }

    #[test]
    fn per_target_lengths_of_one_value_plan_as_the_common_ones() {
        let common = spec(5);
        let mut by = spec(5);
        by.slice_s = 0.05; // checked, unused
        by.slice_s_by_target = vec![1.0, 1.0];
        by.load.warmup_s = 9.0; // unused
        by.warmup_s_by_target = vec![0.5, 0.5];
        assert_eq!(by.windows(7), common.windows(7));
        assert_eq!(by.planned_s(), common.planned_s());
    }

    #[test]
    fn per_target_lengths_in_json() {
        let base = r#"{"load": {"url": "http://x/"}, "targets": ["http://a/", "http://b/"],
                       "slice_s": 0.25, "rounds": 2"#;
        let s = SlicedSpec::from_json(&format!("{base}}}")).unwrap();
        assert!(s.slice_s_by_target.is_empty() && s.warmup_s_by_target.is_empty());
        assert!(
            !s.to_json_for_test().contains("_by_target"),
            "absent when empty"
        );
        let s = SlicedSpec::from_json(&format!(
            r#"{base}, "slice_s_by_target": [0.25, 0.5], "warmup_s_by_target": [0.5, 3]}}"#
        ))
        .unwrap();
        assert_eq!(s.slice_s_by_target, [0.25, 0.5]);
        assert_eq!(s.warmup_s_by_target, [0.5, 3.0]);
        assert_eq!(SlicedSpec::from_json(&s.to_json_for_test()).unwrap(), s);
    }

    #[test]
    fn per_target_lengths_are_checked() {
        let err = |f: &dyn Fn(&mut SlicedSpec)| {
            let mut s = spec(3);
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert_eq!(
            err(&|s| s.slice_s_by_target = vec![0.25, 0.5, 0.5]),
            "slice_s_by_target: 3 values for 2 targets"
        );
        assert_eq!(
            err(&|s| s.slice_s_by_target = vec![0.25]),
            "slice_s_by_target: 1 values for 2 targets"
        );
        for bad in [0.04, 0.0, -1.0, f64::NAN, f64::INFINITY] {
            let e = err(&|s| s.slice_s_by_target = vec![0.25, bad]);
            assert!(
                e.starts_with("slice_s_by_target: ") && e.contains("for target 1"),
                "{e}"
            );
        }
        assert_eq!(
            err(&|s| s.warmup_s_by_target = vec![3.0]),
            "warmup_s_by_target: 1 values for 2 targets"
        );
        for bad in [-0.5, f64::NAN, f64::INFINITY] {
            let e = err(&|s| s.warmup_s_by_target = vec![bad, 0.5]);
            assert!(
                e.starts_with("warmup_s_by_target: ") && e.contains("for target 0"),
                "{e}"
            );
        }
        // slice_s is still checked when unused; load.warmup_s only when used.
        let e = err(&|s| {
            s.slice_s_by_target = vec![0.25, 0.5];
            s.slice_s = 0.0;
        });
        assert!(e.starts_with("slice_s:"), "{e}");
        assert!(err(&|s| s.load.warmup_s = -1.0).starts_with("load.warmup_s:"));
        let mut s = spec(3);
        s.load.warmup_s = -1.0;
        s.warmup_s_by_target = vec![0.0, 3.0];
        s.slice_s_by_target = vec![0.05, 0.5];
        s.validate().unwrap();
        for e in [
            err(&|s| s.slice_s_by_target = vec![0.25, 0.5, 0.5]),
            err(&|s| s.warmup_s_by_target = vec![f64::NAN, 0.5]),
        ] {
            assert!(!e.contains('\n'), "one line: {e}");
        }
    }

    #[test]
    fn order_is_seeded_and_mixes_within_rounds() {
        let s = spec(200);
        let o = s.order();
        assert_eq!(o, s.order());
        let first_is_zero = o.iter().filter(|r| r[0] == 0).count();
        assert!((60..=140).contains(&first_is_zero), "{first_is_zero}");
        for r in &o {
            let mut r = r.clone();
            r.sort();
            assert_eq!(r, vec![0, 1]);
        }
    }

    #[test]
    fn validation_names_the_field() {
        let mut s = spec(3);
        s.targets[1] = s.targets[0].clone();
        assert!(s.validate().unwrap_err().starts_with("targets:"));
        let mut s = spec(3);
        s.load.rate_phases = serde_json::from_str(r#"[{"rate": 50, "duration_s": 1}]"#).unwrap();
        assert!(s.validate().unwrap_err().starts_with("load.rate_phases:"));
        let mut s = spec(0);
        assert!(s.validate().unwrap_err().starts_with("rounds:"));
        s.rounds = 1;
        s.slice_s = 0.0;
        assert!(s.validate().unwrap_err().starts_with("slice_s:"));
        let mut s = spec(1);
        s.load.fresh_share = 0.5;
        assert!(s.validate().unwrap_err().starts_with("load.fresh_share:"));
        let mut s = spec(1);
        s.load.unix_socket = Some("/run/a.sock".into());
        assert!(s.validate().unwrap_err().starts_with("load.unix_socket:"));
    }

    #[test]
    fn new_connections_are_a_load_slices_take() {
        // a connection per request, and a new connection every N requests
        let mut s = spec(2);
        s.load.keepalive = false;
        s.validate().unwrap();
        let mut s = spec(2);
        s.load.requests_per_connection = 10;
        s.validate().unwrap();
    }

    #[test]
    fn an_open_loop_is_a_load_slices_take() {
        // a constant rate, constant or Poisson arrivals (rate phases are refused: each
        // window starts its arrivals afresh)
        let mut s = spec(2);
        s.load.rate = Some(100.0);
        s.validate().unwrap();
        s.load.arrival = crate::spec::Arrival::Poisson;
        s.validate().unwrap();
        s.load.keepalive = false;
        s.validate().unwrap();
    }

    #[test]
    fn each_target_may_have_its_own_unix_socket() {
        let mut s = spec(2);
        s.targets = vec!["http://localhost/hello".into(); 2];
        // one URL twice over TCP is one target twice
        assert_eq!(
            s.validate().unwrap_err(),
            "targets: http://localhost/hello is given twice"
        );
        s.unix_socket_by_target = vec!["/run/a.sock".into(), "/run/b.sock".into()];
        s.validate().unwrap();
        assert_eq!(s.unix_socket_of(0), Some("/run/a.sock"));
        assert_eq!(s.unix_socket_of(1), Some("/run/b.sock"));
        // "" is a target over TCP, beside one on a socket
        s.unix_socket_by_target[0] = String::new();
        s.validate().unwrap();
        assert_eq!(s.unix_socket_of(0), None);
        s.unix_socket_by_target = vec!["/run/a.sock".into(); 2];
        assert_eq!(
            s.validate().unwrap_err(),
            "targets: http://localhost/hello on unix socket /run/a.sock is given twice"
        );
        s.unix_socket_by_target = vec!["/run/a.sock".into()];
        assert_eq!(
            s.validate().unwrap_err(),
            "unix_socket_by_target: 1 values for 2 targets"
        );
        // absent from the JSON when empty, read back when given
        let mut s = spec(2);
        assert!(!s.to_json_for_test().contains("unix_socket_by_target"));
        s.unix_socket_by_target = vec!["/run/a.sock".into(), String::new()];
        assert_eq!(SlicedSpec::from_json(&s.to_json_for_test()).unwrap(), s);
        assert_eq!(spec(2).unix_socket_of(0), None);
    }
}
