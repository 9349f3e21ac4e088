//! One generator thread: an event loop over its share of connections, on one of two I/O
//! backends (docs/load-engine.md, "I/O backends"):
//!
//! - epoll (mio, edge-triggered; epoll.rs): per request one `write` (usually merged with
//!   other requests in the same batch) and one `read`. Sockets are registered once for
//!   READABLE|WRITABLE: with edge-triggered epoll the kernel only signals writability again
//!   after a write hit EAGAIN, so steady-state load causes no extra events.
//! - io_uring (uring.rs): the sends of all connections go in one `io_uring_enter` with the
//!   wait for the next completions; one multishot receive per connection stays armed.
//!
//! Everything else (connection states, scheduling, parsing, counting, timeouts) is shared.
//! No locks, channels, allocations or interest re-registration per request.

mod conn;
mod epoll;
mod h2;
mod schedule;
mod sliced;
mod slot;
pub use sliced::{SliceSink, ThreadSpent, Window};
mod uring;
mod ws;

pub(crate) use self::schedule::Rng;
use self::sliced::SliceTrack;

use self::conn::{CState, Conn};
use self::epoll::EpollIo;
use self::schedule::Arrivals;
use crate::errors::ErrorClass;
use crate::result::{Tally, ThreadStats};
use crate::spec::{Mode, Plan};
use crate::sys;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;

/// Wait before reconnecting after a failed connect.
const BACKOFF_NS: u64 = 10_000_000;
/// Wait before connecting again to a unix socket whose listen backlog was full.
const BACKLOG_RETRY_NS: u64 = 1_000_000;
/// Connections started per turn of the loop while the pool is first opened, so the ones
/// already established get served (and a slow connect phase is seen) meanwhile.
const CONNECT_BATCH: usize = 256;
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
    /// Requests this thread may issue (max_requests share), if bounded.
    pub budget: Option<u64>,
    /// Interleaved slices (slices.rs): this thread's target's windows and the board its
    /// slices go to. None: load all the time.
    pub slices: Option<(Vec<Window>, Arc<dyn SliceSink>)>,
}

/// The I/O backend of a thread.
enum Io {
    Epoll(EpollIo),
    Uring(Box<crate::uring::Ring>),
}

/// When the event loop should wake next (see `Worker::next_wake`).
struct Wake {
    /// Longest wait (ns): the next scan, phase change, end or stop check.
    sleep: u64,
    /// An open-loop send is due so soon that the loop polls without waiting.
    spinning: bool,
    /// Open loop: wake at this time (ns), a lead before the next send time.
    timer_at: Option<u64>,
}

/// One generator thread.
pub struct Worker {
    id: usize,
    plan: Arc<Plan>,
    shared: Arc<Shared>,
    io: Io,
    conns: Vec<Conn>,
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
    /// Close a keep-alive connection after this many responses and open another (the spec's
    /// `requests_per_connection`); 0: never.
    per_conn_limit: u64,
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
    arrivals: Arrivals,
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
    /// Running mean (weight 1/16) of the time from a request's send to its answer: how long
    /// the io_uring backend may hold completions to batch them (`batch_wait`).
    rtt_ns: u64,
    /// A connection closed since the io_uring backend's last wait: its next wait does not hold
    /// completions (see `uring_turn`).
    closed_since_wait: bool,
    /// Connects started (picks each connection's source address in turn).
    dial_seq: usize,
    /// Connections of the initial pool not started yet (indices `pending_connect..`).
    pending_connect: usize,
    /// Interleaved slices: where this thread is in its windows.
    slices: Option<SliceTrack>,
    /// False outside this thread's slice windows: no new request is issued.
    slice_open: bool,
    /// A mix: the seeded generator of the entry draws (this thread's own stream).
    mix_rng: Rng,
}

impl Worker {
    /// Prepare a worker (creates its poller or ring; no connection yet).
    pub fn new(plan: Arc<Plan>, shared: Arc<Shared>, tp: ThreadPlan) -> io::Result<Worker> {
        let open = plan.mode == Mode::Open;
        let io = match plan.uring {
            Some(support) => Io::Uring(Box::new(crate::uring::Ring::new(tp.connections, support)?)),
            None => Io::Epoll(EpollIo::new(open)?),
        };
        let depth = match plan.h2 {
            Some(_) => plan.spec.streams,
            None => plan.spec.pipeline,
        };
        let mut batch = Vec::with_capacity(plan.request.len() * depth as usize);
        for _ in 0..depth {
            batch.extend_from_slice(&plan.request);
        }
        let t0 = shared.t0;
        let warm_end = t0 + plan.warmup_ns;
        let end = warm_end + plan.duration_ns;
        let min_timeout = plan.timeout_ns.min(plan.connect_timeout_ns);
        let scan_every = (min_timeout / 10).clamp(2_000_000, 50_000_000);
        // This thread's share of the offered rate: its share of the connections.
        let share = tp.connections as f64 / plan.spec.connections.max(1) as f64;
        let mut arrivals = Arrivals::new(&plan, tp.id, share, t0);
        let first = if open { arrivals.current() } else { u64::MAX };
        let mut tally = Tally::new();
        let mix_bytes = match &plan.mix {
            Some(m) => {
                tally.endpoints = (0..m.endpoints.len()).map(|_| Default::default()).collect();
                m.max_len * depth as usize
            }
            None => 0,
        };
        let w = Worker {
            id: tp.id,
            conns: (0..tp.connections)
                .map(|_| {
                    let mut c = Conn::new(depth as usize);
                    // A mix: each connection's batch of drawn requests is copied here (the
                    // room for the longest ones reserved now: no allocation per request).
                    c.mix_out = Vec::with_capacity(mix_bytes);
                    if plan.h2.is_some() {
                        c.h2 = Some(Box::new(h2::H2Conn::new(depth as usize)));
                    }
                    c
                })
                .enumerate()
                .map(|(k, mut c)| {
                    if plan.ws.is_some() {
                        let seed = plan.spec.seed ^ ((tp.id as u64) << 32 | k as u64);
                        c.ws = Some(Box::new(ws::WsConn::new(seed)));
                    }
                    c
                })
                .collect(),
            req_len: plan.request.len(),
            batch,
            depth,
            open,
            cpr: plan.mode == Mode::ConnectionPerRequest,
            keepalive: plan.spec.keepalive,
            fresh_conns: (plan.spec.fresh_share * tp.connections as f64).round() as usize,
            per_conn_limit: plan.spec.requests_per_connection,
            tally,
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
            next_arrival: first,
            max_lead_ns: arrivals.max_lead_ns(first),
            arrivals,
            scan_every,
            next_scan: 0,
            cpu: tp.cpu,
            warnings: Vec::new(),
            lead_ns: 20_000,
            spin_ns: 0,
            rtt_ns: 0,
            closed_since_wait: false,
            dial_seq: tp.id,
            pending_connect: 0,
            slice_open: tp.slices.is_none(),
            slices: tp.slices.map(|(w, b)| SliceTrack::new(w, b)),
            mix_rng: Rng(plan.spec.seed
                ^ 0x6D69_7844_7261_7773
                ^ (tp.id as u64).wrapping_mul(0x9FB2_1C65_1E98_DF25)),
            io,
            plan,
            shared,
        };
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
        if let Io::Uring(r) = &self.io {
            if let Err(e) = r.enable() {
                self.warnings
                    .push(format!("thread {}: cannot enable io_uring: {e}", self.id));
                self.shared.stop.store(true, Relaxed);
            }
        }
        let mut now;
        let mut cpu_mark = sys::thread_cpu_ns();
        let mut delay_mark = sys::thread_run_delay_ns();
        if !self.open || self.keepalive {
            self.pending_connect = 0;
        } else {
            self.pending_connect = self.conns.len();
            for i in (0..self.conns.len()).rev() {
                self.make_free(i);
            }
        }
        if self.cpr && self.slices.is_some() {
            // Interleaved slices, a connection per request: no pool opened at the start, each
            // window opens its connections (`slice_refill`).
            self.pending_connect = self.conns.len();
        }
        loop {
            now = sys::now_ns();
            if !self.measuring && now >= self.warm_end {
                let warm = std::mem::take(&mut self.tally);
                self.tally.endpoints = warm.endpoints.iter().map(|_| Default::default()).collect();
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
            self.slice_tick(now);
            if now >= self.end && self.open {
                // Sends scheduled before the end that fell due while the thread was off its
                // core are offered all the same: dispatched now, they end the run in flight
                // or unsent, never missing from `offered`.
                self.dispatch(now);
            }
            if now >= self.end || self.shared.stop.load(Relaxed) || self.done() {
                break;
            }
            if self.pending_connect < self.conns.len() {
                self.connect_some(now);
            }
            if self.open {
                self.dispatch(now);
            }
            if now >= self.next_scan {
                self.scan(now);
                self.next_scan = now + self.scan_every;
            }
            let wake = self.next_wake(now);
            let turned = match self.io {
                Io::Epoll(_) => self.epoll_turn(now, &wake),
                Io::Uring(_) => self.uring_turn(now, &wake),
            };
            if let Err(e) = turned {
                self.warnings.push(format!(
                    "thread {}: waiting for events failed: {e}",
                    self.id
                ));
                break;
            }
            let p = &self.shared.progress[self.id];
            p.requests.store(self.tally.requests, Relaxed);
            p.errors.store(self.tally.errors.total(), Relaxed);
            p.timeouts.store(self.tally.timeouts, Relaxed);
        }
        self.slice_abandon();
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

    /// How long the next wait may last, and whether an open-loop timer is due first.
    fn next_wake(&self, now: u64) -> Wake {
        let mut wake = self.next_scan.min(self.end).min(now + MAX_SLEEP_NS);
        if !self.measuring {
            wake = wake.min(self.warm_end);
        }
        if let Some(t) = &self.slices {
            wake = wake.min(t.next_boundary());
        }
        let mut w = Wake {
            sleep: wake.saturating_sub(now),
            spinning: false,
            timer_at: None,
        };
        if self.pending_connect < self.conns.len() {
            w.sleep = 0; // more of the pool to open: look at events, then connect more
        }
        if self.open && self.next_arrival != u64::MAX {
            // Set the timer `lead` early (its typical wake-up lateness) and spin the rest.
            let lead = self.lead_ns.min(self.max_lead_ns).max(SPIN_NS);
            if self.next_arrival <= now + lead {
                w.sleep = 0;
                w.spinning = true;
            } else if self.next_arrival - lead < wake {
                w.timer_at = Some(self.next_arrival - lead);
            }
        }
        w
    }

    /// After a wait: count spinning as such, and track how late the open-loop timer woke
    /// the thread (`fired_at`: the wait ended by the timer set for that time).
    fn after_wait(&mut self, now: u64, wake: &Wake, idle: bool, fired_at: Option<u64>) {
        if !self.open {
            return;
        }
        let woke = sys::now_ns();
        if wake.spinning && idle && self.measuring {
            self.spin_ns += woke.saturating_sub(now);
        }
        if let Some(at) = fired_at {
            // Up 3 steps when later than the lead, down 1 when not (converges on the 75th
            // percentile).
            if woke.saturating_sub(at) > self.lead_ns {
                self.lead_ns = (self.lead_ns + 3 * LEAD_STEP_NS).min(2 * MAX_LEAD_NS);
            } else {
                self.lead_ns = self.lead_ns.saturating_sub(LEAD_STEP_NS);
            }
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
        self.slice_open && self.budget.is_none_or(|b| self.issued < b)
    }

    /// Start the next batch of the initial pool's connects.
    fn connect_some(&mut self, now: u64) {
        let end = (self.pending_connect + CONNECT_BATCH).min(self.conns.len());
        for i in self.pending_connect..end {
            self.pending_connect = i + 1;
            self.start_connect(i, now);
        }
    }

    /// Keep-alive pools: connections never established by the end of the run are errors
    /// with their cause (still connecting: a connect timeout; never started: the connect
    /// phase itself did not finish), never a silent shortfall.
    fn report_unopened(&mut self, now: u64) {
        if !self.keepalive || !self.measuring {
            return;
        }
        let (mut connecting, mut unstarted) = (0u64, 0u64);
        for c in &self.conns {
            match c.state {
                _ if c.ever_open => {}
                CState::Connecting(_) => connecting += 1,
                CState::Closed if !c.attempted => unstarted += 1,
                _ => {}
            }
        }
        let missing = connecting + unstarted;
        if missing == 0 {
            return;
        }
        let total = self.conns.len();
        let target = self.plan.target.describe();
        let secs = (now.saturating_sub(self.shared.t0)) as f64 / 1e9;
        let timeout = self
            .plan
            .spec
            .connect_timeout_s
            .unwrap_or(self.plan.spec.timeout_s);
        self.record_error(ErrorClass::ConnectTimeout, missing, now, || {
            let why = if unstarted > 0 {
                format!(
                    "the connect phase did not finish ({unstarted} not even started: \
                     connect() was too slow or the thread got too little CPU)"
                )
            } else {
                format!("still connecting (connect timeout {timeout} s)")
            };
            format!(
                "connect to {target}: {missing} of {total} connections never established \
                 in {secs:.1} s, {why}"
            )
        });
    }

    fn finish(&mut self) {
        self.report_unopened(sys::now_ns());
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
        if let Io::Uring(_) = self.io {
            // Before the sockets close: queued submissions name them by number.
            self.uring_drain();
        }
        self.conns.clear();
    }
}
