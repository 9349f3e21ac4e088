//! The fault clients' event loop: one thread, one `mio` poll, every connection a small state
//! machine driven by readiness events and its own timers.
use super::requests::{initial, trickle_piece};
use super::response::{escape, Scanner};
use super::sock::{connect_nonblocking, is_reset, set_linger_zero};
use super::{
    FaultKind, FaultReport, FaultSpec, FaultTarget, Finding, HeldSummary, KindReport,
    MalformedClasses, Outcome, MAX_INFLIGHT_EVENTS,
};
use hdrhistogram::Histogram;
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait in `poll`, so `stop` is seen within this time.
const TICK: Duration = Duration::from_millis(50);
/// Receive buffer of slow readers (set before connecting).
const SLOW_READER_RCVBUF: i32 = 4096;
/// After a smuggling attempt's first response, wait this long for the hidden one.
const SMUGGLE_LINGER: Duration = Duration::from_millis(1000);
/// Reset-mid-request: pause between the partial head and the reset.
const RESET_DELAY: Duration = Duration::from_millis(20);
/// Held kinds: pause before reopening a connection the server ended.
const REOPEN_DELAY: Duration = Duration::from_millis(10);
/// Pause after a failed connect before the kind tries again.
const CONNECT_BACKOFF: Duration = Duration::from_millis(200);
/// Most bytes read from one connection per readiness event (fairness between connections).
const READ_BUDGET: usize = 256 * 1024;
/// Request bytes kept for findings.
const REQUEST_EXCERPT: usize = 300;

enum Amount {
    Connections(u32),
    Rate(Duration),
    Count(u64),
}

struct SpecState {
    spec: FaultSpec,
    host: String,
    path: String,
    amount: Amount,
    interval: Duration,
    timeout: Duration,
    inflight: u32,
    started: u64,
    next_start: Instant,
    report: KindReport,
    held: Histogram<u64>,
    accepted: Option<Finding>,
    smuggled: Option<Finding>,
}

impl SpecState {
    fn new(spec: &FaultSpec, target: &FaultTarget, now: Instant) -> Self {
        let amount = if let Some(n) = spec.connections {
            Amount::Connections(n)
        } else if let Some(r) = spec.rate {
            Amount::Rate(Duration::from_secs_f64(1.0 / r))
        } else {
            Amount::Count(spec.count.unwrap_or(1))
        };
        SpecState {
            spec: spec.clone(),
            host: target.host.clone(),
            path: spec.path.clone().unwrap_or_else(|| target.path.clone()),
            amount,
            interval: spec.interval(),
            timeout: spec.timeout(),
            inflight: 0,
            started: 0,
            next_start: now,
            report: KindReport {
                spec: Some(spec.clone()),
                malformed: spec.kind.is_malformed().then(MalformedClasses::default),
                ..KindReport::default()
            },
            held: Histogram::new_with_bounds(1, 7 * 24 * 3600 * 1000, 2)
                .expect("valid histogram bounds"),
            accepted: None,
            smuggled: None,
        }
    }

    fn done(&self) -> bool {
        matches!(self.amount, Amount::Count(n) if self.started >= n && self.inflight == 0)
    }

    fn note_error(&mut self, e: &io::Error) {
        if self.report.first_error.is_none() {
            self.report.first_error = Some(e.to_string());
        }
    }
}

enum Phase {
    Connecting,
    Open,
}

struct Conn {
    spec: usize,
    kind: FaultKind,
    stream: mio::net::TcpStream,
    phase: Phase,
    connected: Option<Instant>,
    out: Vec<u8>,
    out_pos: usize,
    request: Vec<u8>,
    trickle_n: u64,
    next_trickle: Option<Instant>,
    next_read: Option<Instant>,
    read_bytes: usize,
    deadline: Option<Instant>,
    reset_at: Option<Instant>,
    linger_until: Option<Instant>,
    write_closed: bool,
    scanner: Scanner,
    bytes_in: u64,
    bytes_out: u64,
    /// First transport error on this connection.
    error: Option<String>,
}

/// What a step of a connection decided.
enum Step {
    Continue,
    Finish(Outcome),
    /// Reset the connection on purpose (SO_LINGER 0).
    Abort,
}

impl Conn {
    fn earliest_timer(&self) -> Option<Instant> {
        [
            self.next_trickle,
            self.next_read,
            self.deadline,
            self.reset_at,
            self.linger_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The outcome when the server ended the connection (EOF or reset).
    fn ended_by_server(&mut self, reset: bool) -> Outcome {
        self.scanner.eof();
        match self.scanner.first_status {
            Some(s) => Outcome::Response(s),
            None if reset => Outcome::ResetByServer,
            None => Outcome::ClosedByServer,
        }
    }

    /// Reads up to `limit` bytes. Returns (eof, error).
    fn read_some(&mut self, limit: usize) -> (bool, Option<io::Error>) {
        let mut buf = [0u8; 16 * 1024];
        let mut total = 0usize;
        while total < limit {
            let want = buf.len().min(limit - total);
            match self.stream.read(&mut buf[..want]) {
                Ok(0) => return (true, None),
                Ok(n) => {
                    total += n;
                    self.bytes_in += n as u64;
                    self.scanner.feed(&buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return (false, Some(e)),
            }
        }
        (false, None)
    }

    /// Writes pending output. `Err` carries a transport error.
    fn flush(&mut self) -> Result<(), io::Error> {
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    self.out_pos += n;
                    self.bytes_out += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_pos = 0;
        if self.kind == FaultKind::HalfClose && !self.write_closed {
            self.write_closed = true;
            let _ = self.stream.shutdown(Shutdown::Write);
        }
        Ok(())
    }

    fn flushed(&self) -> bool {
        self.out_pos >= self.out.len()
    }

    fn push_out(&mut self, bytes: &[u8]) {
        if self.request.len() < REQUEST_EXCERPT {
            let n = (REQUEST_EXCERPT - self.request.len()).min(bytes.len());
            self.request.extend_from_slice(&bytes[..n]);
        }
        self.out.extend_from_slice(bytes);
    }

    fn on_connected(&mut self, st: &SpecState, now: Instant) -> Step {
        self.phase = Phase::Open;
        self.connected = Some(now);
        self.deadline = None;
        let depth = st.spec.depth.unwrap_or(match self.kind {
            FaultKind::SlowReader => 32,
            _ => 8,
        });
        let first = initial(self.kind, &st.host, &st.path, depth);
        self.push_out(&first);
        match self.kind {
            FaultKind::SlowHeaders | FaultKind::SlowBody => {
                self.next_trickle = Some(now + st.interval)
            }
            FaultKind::SlowReader => {
                self.read_bytes = st.spec.read_bytes.unwrap_or(64) as usize;
                self.next_read = Some(now + st.interval);
            }
            FaultKind::Idle => {}
            FaultKind::ResetMidRequest => self.reset_at = Some(now + RESET_DELAY),
            _ => self.deadline = Some(now + st.timeout),
        }
        self.flush_step()
    }

    fn flush_step(&mut self) -> Step {
        let r = self.flush();
        self.after_write(r)
    }

    fn after_write(&mut self, r: Result<(), io::Error>) -> Step {
        match r {
            Ok(()) => Step::Continue,
            Err(e) => {
                // The server may have answered before it closed: read what is there first.
                let _ = self.read_some(READ_BUDGET);
                if !is_reset(&e) {
                    self.error.get_or_insert_with(|| format!("write: {e}"));
                }
                // A write that fails means the server broke the connection.
                Step::Finish(self.ended_by_server(true))
            }
        }
    }

    /// Decides after new bytes arrived (or the stream ended).
    fn after_read(&mut self, eof: bool, err: Option<io::Error>, now: Instant) -> Step {
        if self.kind == FaultKind::ResetMidResponse && self.bytes_in > 0 {
            return Step::Abort;
        }
        if let Some(e) = err {
            if !is_reset(&e) {
                self.error.get_or_insert_with(|| format!("read: {e}"));
            }
            return Step::Finish(self.ended_by_server(true));
        }
        if eof {
            return Step::Finish(self.ended_by_server(false));
        }
        if self.scanner.complete >= 1 {
            match self.kind {
                FaultKind::SlowReader => {}
                FaultKind::Smuggle => {
                    if self.scanner.complete >= 2 {
                        return Step::Finish(Outcome::Response(
                            self.scanner.first_status.unwrap_or(0),
                        ));
                    }
                    if self.linger_until.is_none() {
                        self.linger_until = Some(now + SMUGGLE_LINGER);
                        self.deadline = None;
                    }
                }
                _ => {
                    return Step::Finish(Outcome::Response(self.scanner.first_status.unwrap_or(0)))
                }
            }
        }
        Step::Continue
    }

    fn on_ready(&mut self, st: &SpecState, readable: bool, writable: bool, now: Instant) -> Step {
        if let Phase::Connecting = self.phase {
            match self.stream.take_error() {
                Ok(Some(e)) | Err(e) => return self.connect_failed(e),
                Ok(None) => {}
            }
            match self.stream.peer_addr() {
                Ok(_) => {
                    if let Step::Finish(o) = self.on_connected(st, now) {
                        return Step::Finish(o);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => return Step::Continue,
                Err(e) => return self.connect_failed(e),
            }
        }
        if writable && !self.flushed() {
            if let Step::Finish(o) = self.flush_step() {
                return Step::Finish(o);
            }
        }
        if readable && self.kind != FaultKind::SlowReader {
            let (eof, err) = self.read_some(READ_BUDGET);
            return self.after_read(eof, err, now);
        }
        Step::Continue
    }

    fn connect_failed(&mut self, e: io::Error) -> Step {
        self.error.get_or_insert_with(|| format!("connect: {e}"));
        Step::Finish(Outcome::ConnectFailed)
    }

    fn on_timer(&mut self, st: &SpecState, now: Instant) -> Step {
        if let Phase::Connecting = self.phase {
            if self.deadline.is_some_and(|d| now >= d) {
                return Step::Finish(Outcome::TimedOut);
            }
            return Step::Continue;
        }
        if self.reset_at.is_some_and(|t| now >= t) {
            return Step::Abort;
        }
        if self.linger_until.is_some_and(|t| now >= t) {
            return Step::Finish(Outcome::Response(self.scanner.first_status.unwrap_or(0)));
        }
        if self.deadline.is_some_and(|t| now >= t) {
            return Step::Finish(match self.scanner.first_status {
                Some(s) => Outcome::Response(s),
                None => Outcome::TimedOut,
            });
        }
        if self.next_trickle.is_some_and(|t| now >= t) {
            if self.flushed() {
                match trickle_piece(self.kind, self.trickle_n) {
                    Some(p) => {
                        self.trickle_n += 1;
                        self.push_out(&p);
                        self.next_trickle = Some(now + st.interval);
                        if let Step::Finish(o) = self.flush_step() {
                            return Step::Finish(o);
                        }
                    }
                    None => {
                        self.next_trickle = None;
                        self.deadline = Some(now + st.timeout);
                    }
                }
            } else {
                // The server is not reading: try again one interval later.
                self.next_trickle = Some(now + st.interval);
            }
        }
        if self.next_read.is_some_and(|t| now >= t) {
            self.next_read = Some(now + st.interval);
            let (eof, err) = self.read_some(self.read_bytes);
            return self.after_read(eof, err, now);
        }
        Step::Continue
    }
}

struct Driver<'a> {
    target: &'a FaultTarget,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    states: Vec<SpecState>,
}

impl Driver<'_> {
    fn start(&mut self, i: usize, now: Instant) {
        let st = &mut self.states[i];
        st.started += 1;
        st.report.attempts += 1;
        let kind = st.spec.kind;
        let rcvbuf = (kind == FaultKind::SlowReader).then_some(SLOW_READER_RCVBUF);
        let mut stream = match connect_nonblocking(self.target.addr, rcvbuf) {
            Ok(s) => s,
            Err(e) => {
                st.note_error(&e);
                record(st, kind, Outcome::ConnectFailed, None, now);
                st.next_start = now + CONNECT_BACKOFF;
                return;
            }
        };
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            Token(slot),
            Interest::READABLE | Interest::WRITABLE,
        ) {
            st.note_error(&e);
            record(st, kind, Outcome::ConnectFailed, None, now);
            self.free.push(slot);
            return;
        }
        st.inflight += 1;
        self.conns[slot] = Some(Conn {
            spec: i,
            kind,
            stream,
            phase: Phase::Connecting,
            connected: None,
            out: Vec::new(),
            out_pos: 0,
            request: Vec::new(),
            trickle_n: 0,
            next_trickle: None,
            next_read: None,
            read_bytes: 64,
            deadline: Some(now + st.timeout),
            reset_at: None,
            linger_until: None,
            write_closed: false,
            scanner: Scanner::new(),
            bytes_in: 0,
            bytes_out: 0,
            error: None,
        });
    }

    fn start_due(&mut self, now: Instant) {
        for i in 0..self.states.len() {
            let mut guard = 0;
            loop {
                let st = &mut self.states[i];
                if guard >= 1000 || now < st.next_start {
                    break;
                }
                guard += 1;
                match st.amount {
                    Amount::Connections(n) => {
                        if st.inflight >= n {
                            break;
                        }
                        self.start(i, now);
                    }
                    Amount::Rate(period) => {
                        st.next_start += period;
                        if st.inflight >= MAX_INFLIGHT_EVENTS {
                            st.report.skipped += 1;
                        } else {
                            self.start(i, now);
                        }
                        // Never burst more than a second's worth after a stall.
                        let st = &mut self.states[i];
                        if now.saturating_duration_since(st.next_start) > Duration::from_secs(1) {
                            let behind = now.saturating_duration_since(st.next_start);
                            st.report.skipped +=
                                (behind.as_secs_f64() / period.as_secs_f64()) as u64;
                            st.next_start = now;
                        }
                    }
                    Amount::Count(n) => {
                        if st.inflight > 0 || st.started >= n {
                            break;
                        }
                        self.start(i, now);
                    }
                }
            }
        }
    }

    fn finish(&mut self, slot: usize, step: Step, now: Instant) {
        let Some(mut c) = self.conns[slot].take() else {
            return;
        };
        self.free.push(slot);
        let _ = self.poll.registry().deregister(&mut c.stream);
        let outcome = match step {
            Step::Abort => {
                let _ = set_linger_zero(&c.stream);
                Outcome::AbortedByClient
            }
            Step::Finish(o) => o,
            Step::Continue => return,
        };
        let st = &mut self.states[c.spec];
        if let Some(e) = c.error.take() {
            st.report.first_error.get_or_insert(e);
        }
        if outcome == Outcome::ConnectFailed {
            st.next_start = st.next_start.max(now + CONNECT_BACKOFF);
        } else if st.spec.kind.is_held() {
            st.next_start = st.next_start.max(now + REOPEN_DELAY);
        }
        st.inflight = st.inflight.saturating_sub(1);
        st.report.bytes_sent += c.bytes_out;
        st.report.bytes_received += c.bytes_in;
        record(st, c.kind, outcome, Some(&c), now);
    }
}

/// Books one ended attempt into its kind's report.
fn record(st: &mut SpecState, kind: FaultKind, outcome: Outcome, c: Option<&Conn>, now: Instant) {
    let r = &mut st.report;
    *r.outcomes.entry(outcome.key().to_string()).or_default() += 1;
    let Some(c) = c else { return };
    if let Some(s) = c.scanner.first_status {
        *r.status_counts.entry(s).or_default() += 1;
    }
    r.extra_responses += u64::from(c.scanner.complete.saturating_sub(1));
    if let Some(t) = c.connected {
        let ms = now.saturating_duration_since(t).as_millis() as u64;
        let _ = st.held.record(ms.max(1));
    }
    if let Some(m) = r.malformed.as_mut() {
        match outcome {
            Outcome::Response(s) if (400..500).contains(&s) => m.rejected += 1,
            Outcome::Response(s) if s >= 500 => m.server_error += 1,
            Outcome::Response(s) => {
                m.accepted += 1;
                let f = st.accepted.get_or_insert_with(|| Finding {
                    kind,
                    what: "accepted".into(),
                    count: 0,
                    status: s,
                    request: escape(&c.request, 200),
                    response: escape(&c.scanner.excerpt, 200),
                });
                f.count += 1;
            }
            Outcome::ClosedByServer | Outcome::ResetByServer => m.closed += 1,
            Outcome::TimedOut | Outcome::OpenAtEnd => m.timed_out += 1,
            Outcome::ConnectFailed | Outcome::AbortedByClient => {}
        }
    }
    if kind == FaultKind::Smuggle && c.scanner.complete >= 2 {
        let f = st.smuggled.get_or_insert_with(|| Finding {
            kind,
            what: "smuggled-request-answered".into(),
            count: 0,
            status: c.scanner.first_status.unwrap_or(0),
            request: escape(&c.request, 300),
            response: escape(&c.scanner.excerpt, 240),
        });
        f.count += 1;
    }
}

fn summary(h: &Histogram<u64>) -> HeldSummary {
    if h.is_empty() {
        return HeldSummary::default();
    }
    HeldSummary {
        count: h.len(),
        min_ms: h.min() as f64,
        mean_ms: h.mean(),
        p50_ms: h.value_at_quantile(0.5) as f64,
        p90_ms: h.value_at_quantile(0.9) as f64,
        p99_ms: h.value_at_quantile(0.99) as f64,
        max_ms: h.max() as f64,
    }
}

/// Runs the fault clients until `stop` is set or `deadline` passes (or, when every spec is a
/// `count`, until all attempts ended), and reports what they saw.
///
/// Specs are assumed valid ([`FaultSpec::validate`]); invalid amounts are clamped.
pub fn run_faults(
    target: &FaultTarget,
    specs: &[FaultSpec],
    stop: Arc<AtomicBool>,
    deadline: Instant,
) -> FaultReport {
    let t0 = Instant::now();
    let mut report = FaultReport::default();
    let poll = match Poll::new() {
        Ok(p) => p,
        Err(e) => {
            for s in specs {
                let kr = KindReport {
                    spec: Some(s.clone()),
                    first_error: Some(format!("cannot create poll: {e}")),
                    ..KindReport::default()
                };
                report.kinds.insert(s.kind.name().to_string(), kr);
            }
            return report;
        }
    };
    let mut d = Driver {
        target,
        poll,
        conns: Vec::new(),
        free: Vec::new(),
        states: specs
            .iter()
            .map(|s| SpecState::new(s, target, t0))
            .collect(),
    };
    let mut events = Events::with_capacity(1024);
    let all_counted = !d.states.is_empty()
        && d.states
            .iter()
            .all(|s| matches!(s.amount, Amount::Count(_)));
    loop {
        let now = Instant::now();
        if stop.load(Ordering::Relaxed) {
            report.stopped = true;
            break;
        }
        if now >= deadline || (all_counted && d.states.iter().all(|s| s.done())) {
            break;
        }
        d.start_due(now);
        let mut wake = (now + TICK).min(deadline);
        for c in d.conns.iter().flatten() {
            if let Some(t) = c.earliest_timer() {
                wake = wake.min(t);
            }
        }
        for st in &d.states {
            let pending = match st.amount {
                Amount::Connections(n) => st.inflight < n,
                Amount::Rate(_) => true,
                Amount::Count(n) => st.inflight == 0 && st.started < n,
            };
            if pending {
                wake = wake.min(st.next_start.max(now));
            }
        }
        let timeout = wake.saturating_duration_since(now);
        if let Err(e) = d.poll.poll(&mut events, Some(timeout)) {
            if e.kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        let now = Instant::now();
        for ev in events.iter() {
            let slot = ev.token().0;
            let Some(c) = d.conns.get_mut(slot).and_then(|c| c.as_mut()) else {
                continue;
            };
            let st = &d.states[c.spec];
            let readable = ev.is_readable() || ev.is_read_closed() || ev.is_error();
            let writable = ev.is_writable() || ev.is_error();
            let step = c.on_ready(st, readable, writable, now);
            if !matches!(step, Step::Continue) {
                d.finish(slot, step, now);
            }
        }
        for slot in 0..d.conns.len() {
            let Some(c) = d.conns[slot].as_mut() else {
                continue;
            };
            if c.earliest_timer().is_some_and(|t| now >= t) {
                let st = &d.states[c.spec];
                let step = c.on_timer(st, now);
                if !matches!(step, Step::Continue) {
                    d.finish(slot, step, now);
                }
            }
        }
    }
    // Whatever is still open: held connections the server kept, answers still awaited.
    let now = Instant::now();
    for slot in 0..d.conns.len() {
        let Some(c) = d.conns[slot].as_ref() else {
            continue;
        };
        let outcome = match (c.kind.is_held(), c.scanner.first_status) {
            (false, Some(s)) if c.scanner.complete >= 1 => Outcome::Response(s),
            _ => Outcome::OpenAtEnd,
        };
        d.finish(slot, Step::Finish(outcome), now);
    }
    report.duration_s = t0.elapsed().as_secs_f64();
    for mut st in d.states {
        st.report.held = summary(&st.held);
        if let Some(f) = st.accepted.take() {
            report.findings.push(f);
        }
        if let Some(f) = st.smuggled.take() {
            report.findings.push(f);
        }
        let name = st.spec.kind.name().to_string();
        match report.kinds.get_mut(&name) {
            // The same kind twice in one mix: keep both, the second under a suffixed name.
            Some(_) => {
                let mut k = 2;
                while report.kinds.contains_key(&format!("{name}#{k}")) {
                    k += 1;
                }
                report.kinds.insert(format!("{name}#{k}"), st.report);
            }
            None => {
                report.kinds.insert(name, st.report);
            }
        }
    }
    report
}
