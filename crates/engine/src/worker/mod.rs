//! One generator thread: a mio (epoll, edge-triggered) loop over its share of connections.
//!
//! Hot path per request: one `write` (usually merged with other requests in the same batch)
//! and one `read`; no locks, channels, allocations or interest re-registration. Sockets are
//! registered once for READABLE|WRITABLE: with edge-triggered epoll the kernel only signals
//! writability again after a write hit EAGAIN, so steady-state load causes no extra events.

mod conn;
mod schedule;

use self::conn::Conn;
use self::schedule::Rng;
use crate::errors::ErrorClass;
use crate::result::{Tally, ThreadStats};
use crate::spec::{Arrival, Mode, Plan};
use crate::sys;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

const RBUF: usize = 64 * 1024;
const TIMER_TOKEN: Token = Token(usize::MAX - 1);
/// Wait before reconnecting after a failed connect.
const BACKOFF_NS: u64 = 10_000_000;
/// Longest sleep in poll, so a stop request is seen quickly.
const MAX_SLEEP_NS: u64 = 50_000_000;
/// Open loop: an arrival this close is waited for by spinning (`poll` with a zero timeout),
/// not by a timer: a timer wake-up costs more than this.
const SPIN_NS: u64 = 10_000;
/// Open loop: the timer is set this much before a send time at most (see `lead_ns`).
const MAX_LEAD_NS: u64 = 100_000;
/// Step of the running estimate of the timer's wake-up lateness.
const LEAD_STEP_NS: u64 = 1_000;

/// Live counters of one thread, read by the binding thread (Relaxed).
#[repr(align(64))]
#[derive(Default)]
pub struct ThreadProgress {
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub timeouts: AtomicU64,
    pub warmup_requests: AtomicU64,
    /// 0 = warm-up, 1 = measuring, 2 = finished.
    pub phase: AtomicU8,
}

/// State shared by the threads of one run.
pub struct Shared {
    pub stop: AtomicBool,
    pub progress: Vec<ThreadProgress>,
    /// CLOCK_MONOTONIC ns at the start of the run (warm-up start).
    pub t0: u64,
}

/// What a thread hands back.
pub struct ThreadOut {
    pub tally: Tally,
    pub warm: Option<Tally>,
    pub stats: ThreadStats,
    pub measure_start: u64,
    pub finished_at: u64,
    pub warnings: Vec<String>,
}

/// Static description of one thread's share of the run.
pub struct ThreadPlan {
    pub id: usize,
    pub connections: usize,
    pub cpu: Option<usize>,
    /// Open loop: this thread's rate (requests/s).
    pub rate: f64,
    /// Requests this thread may issue (max_requests share), if bounded.
    pub budget: Option<u64>,
}

/// One generator thread.
pub struct Worker {
    id: usize,
    plan: Arc<Plan>,
    shared: Arc<Shared>,
    poll: Poll,
    conns: Vec<Conn>,
    rbuf: Vec<u8>,
    /// The request repeated `pipeline` times: any batch is a prefix of it.
    batch: Vec<u8>,
    req_len: usize,
    depth: u32,
    open: bool,
    cpr: bool,
    keepalive: bool,
    /// Closed loop: connections `0..fresh_conns` close after every response and reconnect
    /// (the spec's `fresh_share` of this thread's connections).
    fresh_conns: usize,
    tally: Tally,
    warm: Option<Tally>,
    measuring: bool,
    measure_start: u64,
    warm_end: u64,
    end: u64,
    budget: Option<u64>,
    issued: u64,
    inflight_total: u64,
    // open loop
    free: Vec<u32>,
    queue: VecDeque<u64>,
    next_arrival: u64,
    interval_ns: f64,
    poisson: bool,
    rng: Rng,
    timer: Option<sys::TimerFd>,
    scan_every: u64,
    next_scan: u64,
    cpu: Option<usize>,
    warnings: Vec<String>,
    /// Open loop: running estimate (about the 75th percentile) of how late the timer wakes
    /// the thread. The timer is set this much early and the rest is spun.
    lead_ns: u64,
    /// Upper bound of the lead: `MAX_LEAD_NS`, and at most a quarter of the send interval so
    /// spinning stays below ~25% of a core at any rate.
    max_lead_ns: u64,
    /// Wall time spent spinning for a send time in the measured phase (CPU, but not work).
    spin_ns: u64,
}

impl Worker {
    /// Prepare a worker (creates its poller; no connection yet).
    pub fn new(plan: Arc<Plan>, shared: Arc<Shared>, tp: ThreadPlan) -> io::Result<Worker> {
        let poll = Poll::new()?;
        let depth = plan.spec.pipeline;
        let mut batch = Vec::with_capacity(plan.request.len() * depth as usize);
        for _ in 0..depth {
            batch.extend_from_slice(&plan.request);
        }
        let open = plan.mode == Mode::Open;
        let t0 = shared.t0;
        let warm_end = t0 + plan.warmup_ns;
        let end = warm_end + plan.duration_ns;
        let min_timeout = plan.timeout_ns.min(plan.connect_timeout_ns);
        let scan_every = (min_timeout / 10).clamp(2_000_000, 50_000_000);
        let mut timer = None;
        if open {
            let t = sys::TimerFd::new()?;
            poll.registry().register(
                &mut SourceFd(&t.raw_fd()),
                TIMER_TOKEN,
                Interest::READABLE,
            )?;
            timer = Some(t);
        }
        let rate = tp.rate.max(1e-9);
        let interval_ns = 1e9 / rate;
        let threads = plan.spec.threads.max(1) as f64;
        // Stagger the threads' constant schedules so their sends interleave.
        let first = t0 + (interval_ns * tp.id as f64 / threads) as u64;
        let seed = plan.spec.seed ^ (tp.id as u64).wrapping_mul(0xA076_1D64_78BD_642F);
        let mut w = Worker {
            id: tp.id,
            conns: (0..tp.connections)
                .map(|_| Conn::new(depth as usize))
                .collect(),
            rbuf: vec![0u8; RBUF],
            req_len: plan.request.len(),
            batch,
            depth,
            open,
            cpr: plan.mode == Mode::ConnectionPerRequest,
            keepalive: plan.spec.keepalive,
            fresh_conns: (plan.spec.fresh_share * tp.connections as f64).round() as usize,
            tally: Tally::new(),
            warm: None,
            measuring: plan.warmup_ns == 0,
            measure_start: warm_end,
            warm_end,
            end,
            budget: tp.budget,
            issued: 0,
            inflight_total: 0,
            free: Vec::with_capacity(tp.connections),
            queue: VecDeque::new(),
            next_arrival: if open { first } else { u64::MAX },
            interval_ns,
            poisson: plan.spec.arrival == Arrival::Poisson,
            rng: Rng(seed),
            timer,
            scan_every,
            next_scan: 0,
            cpu: tp.cpu,
            warnings: Vec::new(),
            lead_ns: 20_000,
            max_lead_ns: ((interval_ns / 4.0) as u64).min(MAX_LEAD_NS),
            spin_ns: 0,
            poll,
            plan,
            shared,
        };
        if w.open && w.poisson {
            w.next_arrival = t0 + w.exp_gap();
        }
        Ok(w)
    }

    #[inline]
    fn record_error(&mut self, class: ErrorClass, n: u64, now: u64, msg: impl FnOnce() -> String) {
        self.tally.errors.add(class, n, msg);
        if self.measuring {
            let t = ((now.saturating_sub(self.measure_start)) / 1_000_000_000) as usize;
            self.tally.second(t).1 += n;
        }
    }

    /// Run until the duration ends, the budget is spent or a stop is requested.
    pub fn run(mut self) -> ThreadOut {
        if let Some(cpu) = self.cpu {
            if let Err(e) = sys::pin_current_thread(cpu) {
                self.warnings
                    .push(format!("thread {}: cannot pin to CPU {cpu}: {e}", self.id));
            }
        }
        if self.open {
            sys::set_timer_slack_ns(1_000);
        }
        let mut events = Events::with_capacity(1024);
        let mut now = sys::now_ns();
        let mut cpu_mark = sys::thread_cpu_ns();
        let mut delay_mark = sys::thread_run_delay_ns();
        if !self.open || self.keepalive {
            for i in 0..self.conns.len() {
                self.start_connect(i, now);
            }
        } else {
            for i in (0..self.conns.len()).rev() {
                self.make_free(i);
            }
        }
        loop {
            now = sys::now_ns();
            if !self.measuring && now >= self.warm_end {
                let warm = std::mem::take(&mut self.tally);
                // Connection counters span the whole run; the rest starts afresh.
                self.tally.attempts = warm.attempts;
                self.tally.established = warm.established;
                self.tally.reopened = warm.reopened;
                self.shared.progress[self.id]
                    .warmup_requests
                    .store(warm.requests, Relaxed);
                self.warm = Some(warm);
                self.measuring = true;
                self.measure_start = now;
                cpu_mark = sys::thread_cpu_ns();
                delay_mark = sys::thread_run_delay_ns();
                self.shared.progress[self.id].phase.store(1, Relaxed);
            }
            if now >= self.end || self.shared.stop.load(Relaxed) || self.done() {
                break;
            }
            if self.open {
                self.dispatch(now);
            }
            if now >= self.next_scan {
                self.scan(now);
                self.next_scan = now + self.scan_every;
            }
            let mut wake = self.next_scan.min(self.end).min(now + MAX_SLEEP_NS);
            if !self.measuring {
                wake = wake.min(self.warm_end);
            }
            let mut sleep = wake.saturating_sub(now);
            let mut spinning = false;
            if self.open && self.next_arrival != u64::MAX {
                // Set the timer `lead` early (its typical wake-up lateness) and spin the rest.
                let lead = self.lead_ns.min(self.max_lead_ns).max(SPIN_NS);
                if self.next_arrival <= now + lead {
                    sleep = 0;
                    spinning = true;
                } else if self.next_arrival - lead < wake {
                    if let Some(t) = self.timer.as_mut() {
                        t.arm_at(self.next_arrival - lead);
                    }
                }
            }
            if let Err(e) = self
                .poll
                .poll(&mut events, Some(Duration::from_nanos(sleep)))
            {
                if e.kind() != io::ErrorKind::Interrupted {
                    self.warnings
                        .push(format!("thread {}: poll failed: {e}", self.id));
                    break;
                }
            }
            if self.open {
                let woke = sys::now_ns();
                if spinning && events.is_empty() && self.measuring {
                    self.spin_ns += woke.saturating_sub(now);
                }
                if let Some(t) = self.timer.as_mut() {
                    if events.iter().any(|ev| ev.token() == TIMER_TOKEN) {
                        // Track the wake-up lateness: up 3 steps when later than the lead,
                        // down 1 when not (converges on the 75th percentile).
                        let late = woke.saturating_sub(t.armed_at());
                        t.fired();
                        if late > self.lead_ns {
                            self.lead_ns = (self.lead_ns + 3 * LEAD_STEP_NS).min(2 * MAX_LEAD_NS);
                        } else {
                            self.lead_ns = self.lead_ns.saturating_sub(LEAD_STEP_NS);
                        }
                    }
                }
            }
            for ev in events.iter() {
                let tok = ev.token();
                if tok == TIMER_TOKEN {
                    continue;
                }
                let now = sys::now_ns();
                self.on_event(tok.0, ev, now);
            }
            let p = &self.shared.progress[self.id];
            p.requests.store(self.tally.requests, Relaxed);
            p.errors.store(self.tally.errors.total(), Relaxed);
            p.timeouts.store(self.tally.timeouts, Relaxed);
        }
        let finished_at = sys::now_ns();
        let cpu_ns = sys::thread_cpu_ns() - cpu_mark;
        let spin_ns = self.spin_ns.min(cpu_ns);
        let run_delay_ns = match (delay_mark, sys::thread_run_delay_ns()) {
            (Some(a), Some(b)) if self.measuring => Some(b.saturating_sub(a)),
            _ => None,
        };
        let n_conns = self.conns.len() as u64;
        self.finish();
        let (cpu_ns, wall_ns) = if self.measuring {
            (cpu_ns, finished_at.saturating_sub(self.measure_start))
        } else {
            (0, 0)
        };
        self.shared.progress[self.id].phase.store(2, Relaxed);
        let stats = ThreadStats {
            cpu: self.cpu,
            cpu_s: cpu_ns as f64 / 1e9,
            wall_s: wall_ns as f64 / 1e9,
            busy: if wall_ns > 0 {
                (cpu_ns - spin_ns) as f64 / wall_ns as f64
            } else {
                0.0
            },
            spin_s: spin_ns as f64 / 1e9,
            run_delay_s: run_delay_ns.map(|ns| ns as f64 / 1e9),
            requests: self.tally.requests,
            connections: n_conns,
        };
        let measure_start = if self.measuring {
            self.measure_start
        } else {
            finished_at
        };
        ThreadOut {
            tally: std::mem::take(&mut self.tally),
            warm: self.warm.take(),
            stats,
            measure_start,
            finished_at,
            warnings: std::mem::take(&mut self.warnings),
        }
    }

    fn done(&self) -> bool {
        match self.budget {
            Some(b) => self.issued >= b && self.inflight_total == 0 && self.queue.is_empty(),
            None => false,
        }
    }

    #[inline]
    fn may_issue(&self) -> bool {
        self.budget.is_none_or(|b| self.issued < b)
    }

    fn finish(&mut self) {
        let mut in_flight = 0u64;
        let mut unsent = self.queue.len() as u64;
        for c in &self.conns {
            in_flight += c.written() as u64;
            unsent += c.unsent as u64;
            if c.reqs > 0 {
                let _ = self.tally.per_conn.record(c.reqs);
            }
        }
        self.tally.in_flight_at_end = in_flight;
        if self.open {
            self.tally.unsent_at_end = unsent;
        }
        self.conns.clear();
    }
}
