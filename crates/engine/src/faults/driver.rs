//! The fault clients' event loop: one thread, one `mio` poll, the kinds' schedules
//! (connections held, a rate, a count), and the books each ended attempt goes into. Every
//! connection is a state machine of its own (`conn.rs`).
use super::conn::{Conn, KindSettings, Step};
use super::response::escape;
use super::sock::{connect_nonblocking, set_linger_zero};
use super::{
    FaultKind, FaultReport, FaultSpec, FaultTarget, Finding, HeldSummary, KindReport,
    MalformedClasses, Outcome, MAX_INFLIGHT_EVENTS,
};
use hdrhistogram::Histogram;
use mio::{Events, Interest, Poll, Token};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait in `poll`, so `stop` is seen within this time.
pub(super) const TICK: Duration = Duration::from_millis(50);
/// Receive buffer of slow readers and ws-no-read clients (set before connecting).
const SLOW_READER_RCVBUF: i32 = 4096;
/// Held kinds: pause before reopening a connection the server ended.
const REOPEN_DELAY: Duration = Duration::from_millis(10);
/// Pause after a failed connect before the kind tries again.
const CONNECT_BACKOFF: Duration = Duration::from_millis(200);

enum Amount {
    Connections(u32),
    Rate(Duration),
    Count(u64),
}

struct SpecState {
    settings: KindSettings,
    amount: Amount,
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
            settings: KindSettings::new(spec, target),
            amount,
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
        let kind = st.settings.spec.kind;
        let small = matches!(kind, FaultKind::SlowReader | FaultKind::WsNoRead);
        let rcvbuf = small.then_some(SLOW_READER_RCVBUF);
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
        self.conns[slot] = Some(Conn::new(i, kind, stream, now + st.settings.timeout));
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
        } else if st.settings.spec.kind.is_held() {
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
                    request: escape(&c.request, 200, c.bytes_out),
                    response: escape(&c.scanner.excerpt, 200, c.bytes_in),
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
            // The hidden request's answer (the outer request's is in `status_counts`).
            status: c.scanner.second_status.unwrap_or(0),
            request: escape(&c.request, 300, c.bytes_out),
            response: escape(&c.scanner.excerpt, 240, c.bytes_in),
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
            let step = c.on_ready(&st.settings, readable, writable, now);
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
                let step = c.on_timer(&st.settings, now);
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
        let name = st.settings.spec.kind.name().to_string();
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
