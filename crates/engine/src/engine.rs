//! Starting, watching, stopping and collecting a run.

use crate::dial::Target;
use crate::result::{self, LoadResult, RunInfo, Tally};
use crate::spec::{LoadSpec, Plan};
use crate::sys;
use crate::worker::{Shared, ThreadOut, ThreadPlan, ThreadProgress, Worker};
use serde::{Deserialize, Serialize};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A live snapshot of a run, for progress bars.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Progress {
    /// Seconds since the run started (warm-up included).
    pub elapsed_s: f64,
    /// "warmup", "measure" or "done".
    pub phase: String,
    pub warmup_s: f64,
    /// Planned measured duration (None when bounded by max_requests only).
    pub duration_s: Option<f64>,
    pub max_requests: Option<u64>,
    /// Completed responses in the measured phase so far.
    pub requests: u64,
    pub errors: u64,
    pub timeouts: u64,
    pub warmup_requests: u64,
}

/// A run in progress. Dropping it stops the run and waits for its threads.
pub struct RunningLoad {
    plan: Arc<Plan>,
    shared: Arc<Shared>,
    handles: Vec<JoinHandle<ThreadOut>>,
    nofile: u64,
    started: Instant,
    /// Fault clients beside the load (docs/faults.md), stopped in `join`.
    faults: Option<crate::faults::FaultSession>,
    /// Stopped by `finish_early`: the caller had enough, the result is complete.
    enough: AtomicBool,
    /// Unix nanoseconds at which the threads were started (after any `start_at_unix_ns`).
    launched_at_unix_ns: u64,
}

/// The longest wait for a spec's `start_at_unix_ns` (the wait cannot be interrupted).
const MAX_START_WAIT_NS: u64 = 60_000_000_000;

/// Wall-clock time in Unix nanoseconds.
fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Wait until the wall-clock instant `at` (Unix ns): sleep until just before it, then spin,
/// so the start is late by microseconds, not by a timer's slack. An instant already past
/// returns at once.
fn wait_until_unix_ns(at: u64) {
    loop {
        let now = unix_now_ns();
        if now >= at {
            return;
        }
        let left = at - now;
        if left > 1_000_000 {
            std::thread::sleep(Duration::from_nanos(left - 500_000));
        } else {
            std::hint::spin_loop();
        }
    }
}

fn split(total: u64, parts: usize, i: usize) -> u64 {
    let base = total / parts as u64;
    base + u64::from((i as u64) < total % parts as u64)
}

fn cpu_count() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// Open loop: the offered rate of each measured second (the whole run's rate curve, its mean
/// over each second; over the measured part of the last one). `start_s`: when the measured
/// phase began, in seconds since the run started; at least `seconds` entries.
fn offered_per_second(spec: &LoadSpec, start_s: f64, measured_s: f64, seconds: usize) -> Vec<f64> {
    let curve = spec.rate_curve(1.0);
    let n = seconds.max(measured_s.ceil() as usize);
    (0..n)
        .map(|t| {
            let a = start_s + t as f64;
            let b = start_s + (t as f64 + 1.0).min(measured_s.max(t as f64));
            curve.mean_rate(a, b)
        })
        .collect()
}

/// Why a run could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartError {
    /// The spec is invalid; the message starts with the field name.
    Invalid(String),
    /// The system refused (file-descriptor limit, threads, poller).
    System(String),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Invalid(m) | StartError::System(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StartError {}

/// Validate the spec, raise the open-file limit, and start the generator threads.
pub fn start(spec: &LoadSpec) -> Result<RunningLoad, StartError> {
    let mut plan = spec.plan().map_err(StartError::Invalid)?;
    plan.uring = crate::uring::resolve(spec.io).map_err(StartError::Invalid)?;
    let ncpu = cpu_count();
    if let Some(&c) = spec.cpus.iter().find(|&&c| c >= ncpu) {
        return Err(StartError::Invalid(format!(
            "cpus: CPU {c} does not exist (this machine has CPUs 0-{})",
            ncpu - 1
        )));
    }
    // More connections than file descriptors is a property of the spec on this machine: an
    // up-front error naming the limit, not thousands of failed connects.
    let nofile = sys::ensure_nofile(spec.fds_needed()).map_err(|e| {
        StartError::Invalid(format!("connections: {} connections {e}", spec.connections))
    })?;
    if let Some(at) = spec.start_at_unix_ns {
        if at > unix_now_ns() + MAX_START_WAIT_NS {
            return Err(StartError::Invalid(
                "start_at_unix_ns: more than 60 s in the future".into(),
            ));
        }
        wait_until_unix_ns(at);
    }
    let launched_at_unix_ns = unix_now_ns();
    let threads = spec.threads as usize;
    let shared = Arc::new(Shared {
        stop: Default::default(),
        progress: (0..threads).map(|_| ThreadProgress::default()).collect(),
        t0: sys::now_ns(),
    });
    let plan = Arc::new(plan);
    let mut workers = Vec::with_capacity(threads);
    for i in 0..threads {
        let conns = split(spec.connections as u64, threads, i) as usize;
        let tp = ThreadPlan {
            id: i,
            connections: conns,
            cpu: if spec.cpus.is_empty() {
                None
            } else {
                Some(spec.cpus[i % spec.cpus.len()])
            },
            budget: spec.max_requests.map(|m| split(m, threads, i)),
            slices: None,
        };
        let w = Worker::new(plan.clone(), shared.clone(), tp).map_err(|e| {
            let what = if plan.uring.is_some() {
                "io_uring"
            } else {
                "epoll"
            };
            StartError::System(format!("cannot create the {what} event loop: {e}"))
        })?;
        workers.push(w);
    }
    let mut handles = Vec::with_capacity(threads);
    for (i, w) in workers.into_iter().enumerate() {
        let h = std::thread::Builder::new()
            .name(format!("pwb-load-{i}"))
            .spawn(move || w.run())
            .map_err(|e| StartError::System(format!("cannot start generator thread: {e}")))?;
        handles.push(h);
    }
    // Fault clients (docs/faults.md): from the start of the warm-up until `join`.
    let run_ns = plan.warmup_ns + plan.duration_ns;
    let max = Duration::from_nanos(if plan.duration_ns > 0 {
        run_ns
    } else {
        3_600_000_000_000
    }) + Duration::from_secs(60);
    let faults = match &plan.target {
        Target::Tcp { addr, .. } => {
            crate::faults::start_beside(&plan.spec.url, *addr, &plan.spec.faults, max)
                .map_err(StartError::System)?
        }
        Target::Unix(_) => None, // refused by validation when faults are asked for
    };
    Ok(RunningLoad {
        plan,
        shared,
        handles,
        nofile,
        started: Instant::now(),
        faults,
        enough: AtomicBool::new(false),
        launched_at_unix_ns,
    })
}

/// Run to completion (blocking).
pub fn run(spec: &LoadSpec) -> Result<LoadResult, StartError> {
    Ok(start(spec)?.join(false))
}

impl RunningLoad {
    /// Ask every thread to stop (they notice within ~50 ms).
    pub fn stop(&self) {
        self.shared.stop.store(true, Relaxed);
    }

    /// Stop now because the caller has what it needs (e.g. a warm-up reached its steady
    /// state): the result covers the time actually run and is not marked interrupted.
    pub fn finish_early(&self) {
        self.enough.store(true, Relaxed);
        self.stop();
    }

    /// True when every thread has finished.
    pub fn is_finished(&self) -> bool {
        self.handles.iter().all(|h| h.is_finished())
    }

    /// Wait up to `d` for the run to finish; true if it did.
    pub fn wait_timeout(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        loop {
            if self.is_finished() {
                return true;
            }
            let now = Instant::now();
            if now >= until {
                return false;
            }
            std::thread::sleep((until - now).min(Duration::from_millis(5)));
        }
    }

    /// A snapshot of the live counters.
    pub fn progress(&self) -> Progress {
        let mut p = Progress {
            elapsed_s: self.started.elapsed().as_secs_f64(),
            phase: String::new(),
            warmup_s: self.plan.spec.warmup_s,
            duration_s: self.plan.spec.planned_duration_s(),
            max_requests: self.plan.spec.max_requests,
            requests: 0,
            errors: 0,
            timeouts: 0,
            warmup_requests: 0,
        };
        let mut min_phase = 2;
        for tp in &self.shared.progress {
            let phase = tp.phase.load(Relaxed);
            min_phase = min_phase.min(phase);
            p.warmup_requests += tp.warmup_requests.load(Relaxed);
            if phase >= 1 || self.plan.warmup_ns == 0 {
                p.requests += tp.requests.load(Relaxed);
                p.errors += tp.errors.load(Relaxed);
                p.timeouts += tp.timeouts.load(Relaxed);
            } else {
                p.warmup_requests += tp.requests.load(Relaxed);
            }
        }
        let min_phase = if self.plan.warmup_ns == 0 {
            min_phase.max(1)
        } else {
            min_phase
        };
        p.phase = match min_phase {
            0 => "warmup",
            1 => "measure",
            _ => "done",
        }
        .into();
        p
    }

    /// Wait for the threads and build the result. `interrupted` marks a run stopped early.
    pub fn join(mut self, interrupted: bool) -> LoadResult {
        let outs: Vec<ThreadOut> = self
            .handles
            .drain(..)
            .map(|h| h.join().expect("generator thread panicked"))
            .collect();
        let mut total = Tally::new();
        let mut warm_total: Option<Tally> = None;
        let mut threads = Vec::new();
        let mut warnings = Vec::new();
        let t0 = self.shared.t0;
        let measure_start = outs.iter().map(|o| o.measure_start).min().unwrap_or(t0);
        let finished = outs.iter().map(|o| o.finished_at).max().unwrap_or(t0);
        for o in &outs {
            total.merge(&o.tally);
            if let Some(w) = &o.warm {
                warm_total.get_or_insert_with(Tally::new).merge(w);
            }
            threads.push(o.stats.clone());
            warnings.extend(o.warnings.iter().cloned());
        }
        let warm_s = (measure_start.saturating_sub(t0)) as f64 / 1e9;
        let warmup = if self.plan.warmup_ns > 0 {
            Some(warm_total.unwrap_or_default().warmup_stats(warm_s))
        } else {
            None
        };
        let measured_s = finished.saturating_sub(measure_start) as f64 / 1e9;
        if self.plan.mode == crate::spec::Mode::Open {
            total.offered_per_second = offered_per_second(
                &self.plan.spec,
                measure_start.saturating_sub(t0) as f64 / 1e9,
                measured_s,
                total.per_second.len(),
            );
            if let Some(last) = total.offered_per_second.len().checked_sub(1) {
                total.second(last); // every measured second is in the series
            }
        }
        let now_unix = sys::unix_time_s();
        let started_at = now_unix - (sys::now_ns().saturating_sub(measure_start)) as f64 / 1e9;
        let stopped_early = self.shared.stop.load(Relaxed) && !self.enough.load(Relaxed);
        let mut r = result::assemble(
            &total,
            RunInfo {
                spec: self.plan.spec.clone(),
                mode: self.plan.mode,
                io: if self.plan.uring.is_some() {
                    "uring"
                } else {
                    "epoll"
                }
                .into(),
                interrupted: interrupted || stopped_early,
                started_at,
                duration_s: measured_s,
                threads,
                warmup,
                nofile_limit: self.nofile,
                queue_limit: self.plan.queue_limit,
                source_addresses: self
                    .plan
                    .target
                    .sources()
                    .iter()
                    .map(|ip| ip.to_string())
                    .collect(),
            },
        );
        r.warnings.extend(warnings);
        r.faults = self.faults.take().map(|mut f| f.stop());
        r.launched_at_unix_ns = Some(self.launched_at_unix_ns);
        r
    }
}

impl Drop for RunningLoad {
    fn drop(&mut self) {
        self.stop();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}
