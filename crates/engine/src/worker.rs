//! One generator thread: a mio (epoll, edge-triggered) loop over its share of connections.
//!
//! Hot path per request: one `write` (usually merged with other requests in the same batch)
//! and one `read`; no locks, channels, allocations or interest re-registration. Sockets are
//! registered once for READABLE|WRITABLE: with edge-triggered epoll the kernel only signals
//! writability again after a write hit EAGAIN, so steady-state load causes no extra events.

use crate::errors::ErrorClass;
use crate::hist;
use crate::http::{Feed, ResponseParser};
use crate::result::{Tally, ThreadStats};
use crate::spec::{Arrival, Mode, Plan};
use crate::sys;
use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::collections::VecDeque;
use std::io::{self, Read, Write};
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

#[derive(Clone, Copy)]
struct Slot {
    /// When the request should have been sent (open loop), connect start (connection per
    /// request) or 0 = same as `sent`.
    intended: u64,
    /// When the write of the request started; 0 = not written yet.
    sent: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CState {
    Closed,
    Backoff(u64),
    Connecting(u64),
    Open,
}

struct Conn {
    stream: Option<TcpStream>,
    state: CState,
    /// Requests issued on this connection: written ones first, then `unsent` ones.
    inflight: VecDeque<Slot>,
    unsent: u32,
    /// Requests in the batch being written, and bytes of it written so far.
    writing: u32,
    woff: usize,
    parser: ResponseParser,
    reqs: u64,
    opened_at: u64,
    attempted: bool,
    in_free: bool,
}

impl Conn {
    fn new(depth: usize) -> Conn {
        Conn {
            stream: None,
            state: CState::Closed,
            inflight: VecDeque::with_capacity(depth),
            unsent: 0,
            writing: 0,
            woff: 0,
            parser: ResponseParser::new(),
            reqs: 0,
            opened_at: 0,
            attempted: false,
            in_free: false,
        }
    }

    #[inline]
    fn written(&self) -> usize {
        self.inflight.len() - self.unsent as usize
    }
}

/// Small, fast, seeded generator (SplitMix64) for Poisson arrivals.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
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

    fn exp_gap(&mut self) -> u64 {
        (-self.rng.unit().ln() * self.interval_ns) as u64
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

    // ---- connections -------------------------------------------------------------------

    fn start_connect(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        self.tally.attempts += 1;
        if c.attempted {
            self.tally.reopened += 1;
        }
        c.attempted = true;
        match TcpStream::connect(self.plan.addr) {
            Ok(mut s) => {
                let _ = s.set_nodelay(true);
                if let Err(e) = self.poll.registry().register(
                    &mut s,
                    Token(i),
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    self.connect_failed(i, &e, now);
                    return;
                }
                let c = &mut self.conns[i];
                c.stream = Some(s);
                c.state = CState::Connecting(now);
                c.opened_at = now;
            }
            Err(e) => self.connect_failed(i, &e, now),
        }
    }

    fn connect_failed(&mut self, i: usize, e: &io::Error, now: u64) {
        let class = ErrorClass::from_connect_error(e);
        let c = &mut self.conns[i];
        c.stream = None;
        c.parser.reset();
        c.writing = 0;
        c.woff = 0;
        // Requests waiting for this connection (open loop, connection per request, pipelined
        // requests to resend) failed with it.
        let waiting = c.inflight.len() as u64;
        self.inflight_total -= waiting;
        c.inflight.clear();
        c.unsent = 0;
        let n = waiting.max(1);
        if waiting == 0 && !self.open && self.budget.is_some() {
            // Count the attempt against the budget so an unreachable server still ends the run.
            self.issued += 1;
        }
        let addr = self.plan.addr;
        self.record_error(class, n, now, || format!("connect to {addr}: {e}"));
        if self.open && !self.keepalive {
            self.conns[i].state = CState::Closed;
            self.make_free(i);
        } else {
            self.conns[i].state = CState::Backoff(now + BACKOFF_NS);
        }
    }

    fn connected(&mut self, i: usize, now: u64) {
        self.conns[i].state = CState::Open;
        self.tally.established += 1;
        if self.open {
            if self.conns[i].inflight.is_empty() {
                self.conn_idle(i, now);
            }
        } else {
            self.fill(i);
        }
        self.flush(i, now);
    }

    /// Close the socket (slots stay, for the caller to deal with).
    fn close_conn(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.reqs > 0 {
            let _ = self.tally.per_conn.record(c.reqs);
        }
        c.stream = None;
        c.state = CState::Closed;
        c.parser.reset();
        c.writing = 0;
        c.woff = 0;
        c.reqs = 0;
    }

    /// After a close: reconnect (keep-alive pools) or hand the connection back to the pool.
    fn reopen(&mut self, i: usize, now: u64) {
        if self.open && !self.keepalive {
            self.make_free(i);
        } else if self.may_issue() || self.conns[i].unsent > 0 || self.open {
            self.start_connect(i, now);
        }
    }

    /// A request failed on connection `i`: count it, drop its written requests, reconnect.
    fn fail(&mut self, i: usize, class: ErrorClass, msg: String, now: u64) {
        let c = &mut self.conns[i];
        let written = c.written();
        let mut drop_n = written;
        if self.open {
            drop_n = c.inflight.len();
            c.unsent = 0;
        }
        c.inflight.drain(..drop_n);
        self.inflight_total -= drop_n as u64;
        self.record_error(class, (drop_n as u64).max(1), now, || msg);
        self.close_conn(i);
        self.reopen(i, now);
    }

    // ---- closed loop ---------------------------------------------------------------------

    /// Closed loop: top the connection up to `pipeline` requests.
    fn fill(&mut self, i: usize) {
        let depth = self.depth as usize;
        while self.conns[i].inflight.len() < depth && self.may_issue() {
            let c = &mut self.conns[i];
            c.inflight.push_back(Slot {
                intended: 0,
                sent: 0,
            });
            c.unsent += 1;
            self.issued += 1;
            self.inflight_total += 1;
        }
    }

    // ---- open loop -----------------------------------------------------------------------

    fn make_free(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.in_free {
            c.in_free = true;
            self.free.push(i as u32);
        }
    }

    fn pop_free(&mut self) -> Option<usize> {
        while let Some(i) = self.free.pop() {
            let i = i as usize;
            let c = &mut self.conns[i];
            c.in_free = false;
            let ready = if self.keepalive {
                c.state == CState::Open
            } else {
                c.state == CState::Closed
            };
            if ready && c.inflight.is_empty() {
                return Some(i);
            }
        }
        None
    }

    /// Open loop: connection `i` has nothing in flight: serve the queue or return to the pool.
    fn conn_idle(&mut self, i: usize, now: u64) {
        if let Some(intended) = self.queue.pop_front() {
            self.assign(i, intended, now);
        } else {
            self.make_free(i);
        }
    }

    fn assign(&mut self, i: usize, intended: u64, now: u64) {
        let c = &mut self.conns[i];
        c.inflight.push_back(Slot { intended, sent: 0 });
        c.unsent += 1;
        self.inflight_total += 1;
        match c.state {
            CState::Open => self.flush(i, now),
            CState::Closed => self.start_connect(i, now),
            _ => {}
        }
    }

    fn advance_arrival(&mut self) {
        let gap = if self.poisson { self.exp_gap() } else { 0 };
        if self.poisson {
            self.next_arrival += gap.max(1);
        } else {
            // Constant: exact multiples of the interval from the thread's phase, no drift.
            let k = ((self.next_arrival - self.shared.t0) as f64 / self.interval_ns).round() + 1.0;
            let phase = self.interval_ns * self.id as f64 / self.plan.spec.threads as f64;
            let next = self.shared.t0 + (k * self.interval_ns + phase) as u64;
            self.next_arrival = next.max(self.next_arrival + 1);
        }
    }

    fn dispatch(&mut self, now: u64) {
        while self.next_arrival <= now {
            if !self.may_issue() || self.next_arrival >= self.end {
                self.next_arrival = u64::MAX;
                return;
            }
            let intended = self.next_arrival;
            self.advance_arrival();
            self.issued += 1;
            if self.measuring {
                self.tally.offered += 1;
                hist::record(&mut self.tally.lag, now.saturating_sub(intended) / 1000);
            }
            if let Some(i) = self.pop_free() {
                self.assign(i, intended, now);
            } else if (self.queue.len() as u64) < self.plan.queue_limit {
                self.queue.push_back(intended);
                self.tally.queued += 1;
                self.tally.queue_max = self.tally.queue_max.max(self.queue.len() as u64);
            } else {
                let limit = self.plan.queue_limit;
                self.record_error(ErrorClass::QueueOverflow, 1, now, || {
                    format!("all connections busy and {limit} sends already queued")
                });
            }
        }
    }

    // ---- events --------------------------------------------------------------------------

    fn on_event(&mut self, i: usize, ev: &mio::event::Event, now: u64) {
        if i >= self.conns.len() {
            return;
        }
        match self.conns[i].state {
            CState::Connecting(_) => {
                let Some(s) = self.conns[i].stream.as_ref() else {
                    return;
                };
                match s.take_error() {
                    Ok(Some(e)) | Err(e) => {
                        self.connect_failed(i, &e, now);
                        return;
                    }
                    Ok(None) => {}
                }
                match s.peer_addr() {
                    Ok(_) => self.connected(i, now),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                        if ev.is_error() || ev.is_write_closed() {
                            let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
                            self.connect_failed(i, &e, now);
                        }
                        return;
                    }
                    Err(e) => {
                        self.connect_failed(i, &e, now);
                        return;
                    }
                }
            }
            CState::Open => {}
            _ => return,
        }
        let drain = ev.is_read_closed() || ev.is_error();
        if ev.is_readable() || drain {
            self.on_readable(i, now, drain);
        }
        if ev.is_writable() && self.conns[i].state == CState::Open {
            self.flush(i, now);
        }
    }

    fn on_readable(&mut self, i: usize, now: u64, drain: bool) {
        let mut rbuf = std::mem::take(&mut self.rbuf);
        let open_after = loop {
            let Some(s) = self.conns[i].stream.as_mut() else {
                break false;
            };
            match s.read(&mut rbuf) {
                Ok(0) => {
                    self.on_eof(i, now);
                    break false;
                }
                Ok(n) => {
                    self.tally.bytes_in += n as u64;
                    if !self.process(i, &rbuf[..n], now) {
                        break false;
                    }
                    if n < rbuf.len() && !drain {
                        break true;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let c = &self.conns[i];
                    if c.written() == 0 {
                        // Nothing was asked on this connection: not a request failure.
                        self.close_conn(i);
                        self.reopen(i, now);
                    } else {
                        let (class, msg) = c.parser.on_reset(&e);
                        self.fail(i, class, msg, now);
                    }
                    break false;
                }
            }
        };
        self.rbuf = rbuf;
        if open_after {
            self.flush(i, now);
        }
    }

    fn on_eof(&mut self, i: usize, now: u64) {
        let c = &self.conns[i];
        if c.written() == 0 {
            // The server closed an idle connection (keep-alive timeout): reopen quietly.
            self.close_conn(i);
            self.reopen(i, now);
            return;
        }
        match c.parser.on_eof() {
            Ok(()) => {
                // Read-until-close body completed; on_response closes and reopens.
                self.on_response(i, now);
            }
            Err((class, msg)) => self.fail(i, class, msg, now),
        }
    }

    /// Parse received bytes; returns false when the connection was closed.
    fn process(&mut self, i: usize, data: &[u8], now: u64) -> bool {
        let mut off = 0;
        while off < data.len() {
            let c = &mut self.conns[i];
            if c.written() == 0 {
                let shown =
                    String::from_utf8_lossy(&data[off..data.len().min(off + 40)]).into_owned();
                let class = if c.parser.in_head() {
                    ErrorClass::MalformedStatusLine
                } else {
                    ErrorClass::MalformedHeaders
                };
                self.record_error(class, 1, now, || {
                    format!("unsolicited data from the server: {shown:?}")
                });
                self.close_conn(i);
                self.reopen(i, now);
                return false;
            }
            match c.parser.feed(
                &data[off..],
                self.plan.is_head,
                self.plan.expect_body.as_deref(),
            ) {
                Feed::NeedMore => break,
                Feed::Complete { consumed } => {
                    off += consumed;
                    if !self.on_response(i, now) {
                        return false;
                    }
                }
                Feed::Error(class, msg) => {
                    self.fail(i, class, msg, now);
                    return false;
                }
            }
        }
        true
    }

    /// A response completed on connection `i`. Returns false when the connection was closed.
    fn on_response(&mut self, i: usize, now: u64) -> bool {
        let c = &mut self.conns[i];
        let slot = c
            .inflight
            .pop_front()
            .expect("a written request is in flight");
        self.inflight_total -= 1;
        let status = c.parser.status;
        let close = c.parser.close;
        let mismatch = c.parser.body_mismatch;
        c.parser.reset();
        c.reqs += 1;
        let lat_us = now.saturating_sub(slot.intended) / 1000;
        hist::record(&mut self.tally.latency, lat_us);
        if self.open {
            hist::record(
                &mut self.tally.service,
                now.saturating_sub(slot.sent) / 1000,
            );
        }
        self.tally.requests += 1;
        self.tally.status[(status as usize).min(999)] += 1;
        if self.measuring {
            let t = (now.saturating_sub(self.measure_start) / 1_000_000_000) as usize;
            let s = self.tally.second(t);
            s.0 += 1;
            let _ = s.2.record(lat_us.max(1));
        }
        let expect = &self.plan.spec.expect_status;
        if (!expect.is_empty() && !expect.contains(&status)) || mismatch {
            let msg = if mismatch {
                format!("status {status}: body differs from the expected body")
            } else {
                format!("status {status}, expected one of {expect:?}")
            };
            self.record_error(ErrorClass::CheckFailed, 1, now, || msg);
        }
        if close || !self.keepalive {
            let c = &mut self.conns[i];
            let resent = c.written();
            if resent > 0 {
                // Pipelined requests the server will not answer: send them again.
                self.tally.pipeline_resent += resent as u64;
                c.unsent = c.inflight.len() as u32;
                for s in c.inflight.iter_mut() {
                    *s = Slot {
                        intended: if self.open { s.intended } else { 0 },
                        sent: 0,
                    };
                }
            }
            self.close_conn(i);
            self.reopen(i, now);
            return false;
        }
        if self.open {
            self.conn_idle(i, now);
        } else {
            self.fill(i);
        }
        true
    }

    /// Write whatever requests are waiting on connection `i`, in one batch where possible.
    fn flush(&mut self, i: usize, now: u64) {
        loop {
            let c = &mut self.conns[i];
            if c.state != CState::Open {
                return;
            }
            if c.writing == 0 {
                if c.unsent == 0 {
                    return;
                }
                let k = c.unsent.min(self.depth);
                let start = c.inflight.len() - c.unsent as usize;
                // A fresh timestamp: the send time is taken right before the write, not when
                // the event that led to it was picked up (that would overstate latency).
                let t = sys::now_ns().max(now);
                let base = if self.cpr { c.opened_at } else { t };
                for s in c.inflight.range_mut(start..start + k as usize) {
                    s.sent = t;
                    if s.intended == 0 {
                        s.intended = base;
                    }
                }
                c.unsent -= k;
                c.writing = k;
                c.woff = 0;
            }
            let total = c.writing as usize * self.req_len;
            let Some(s) = c.stream.as_mut() else { return };
            match s.write(&self.batch[c.woff..total]) {
                Ok(n) => {
                    self.tally.bytes_out += n as u64;
                    c.woff += n;
                    if c.woff >= total {
                        c.writing = 0;
                        c.woff = 0;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail(i, ErrorClass::WriteError, format!("write failed: {e}"), now);
                    return;
                }
            }
        }
    }

    /// Timeouts, connect timeouts and reconnect back-offs (every few milliseconds).
    fn scan(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            match self.conns[i].state {
                CState::Connecting(since)
                    if now.saturating_sub(since) >= self.plan.connect_timeout_ns =>
                {
                    let e = io::Error::from_raw_os_error(libc::ETIMEDOUT);
                    self.connect_failed(i, &e, now);
                }
                CState::Backoff(until) if now >= until => {
                    self.conns[i].state = CState::Closed;
                    self.reopen(i, now);
                }
                CState::Open => {
                    let c = &self.conns[i];
                    if c.written() > 0 {
                        let front = c.inflight[0];
                        if now.saturating_sub(front.sent) >= self.plan.timeout_ns {
                            self.on_timeout(i, now);
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// The oldest request on connection `i` passed the timeout: record every written request
    /// on it as a censored latency (>= timeout), count it, and reopen the connection.
    fn on_timeout(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        let written = c.written();
        let in_head = c.parser.in_head();
        let received = c.parser.body_len;
        let t = ((now.saturating_sub(self.measure_start)) / 1_000_000_000) as usize;
        for s in c.inflight.drain(..written) {
            let lat = now.saturating_sub(s.intended) / 1000;
            hist::record(&mut self.tally.latency, lat);
            if self.open {
                hist::record(&mut self.tally.service, now.saturating_sub(s.sent) / 1000);
            }
            if self.measuring {
                let _ = self.tally.second(t).2.record(lat.max(1));
            }
        }
        if self.open {
            // (pipeline is 1 in open loop: nothing unsent remains here)
            c.unsent = c.unsent.min(c.inflight.len() as u32);
        }
        self.inflight_total -= written as u64;
        self.tally.timeouts += written as u64;
        let secs = self.plan.spec.timeout_s;
        if in_head {
            self.record_error(ErrorClass::HeaderTimeout, written as u64, now, || {
                format!("no complete response head within {secs} s")
            });
        } else {
            self.record_error(ErrorClass::BodyTimeout, 1, now, || {
                format!("body incomplete after {secs} s ({received} bytes received)")
            });
            if written > 1 {
                self.record_error(ErrorClass::HeaderTimeout, written as u64 - 1, now, || {
                    format!("no complete response head within {secs} s (pipelined)")
                });
            }
        }
        self.close_conn(i);
        self.reopen(i, now);
    }
}
