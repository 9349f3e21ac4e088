//! A thread's part of an interleaved run (crate::slices): it issues requests only inside its
//! target's windows, counts each slice in a tally of its own, and hands the slice to the
//! board when its window ends. Keep-alive connections (HTTP/1.1, h2c, WebSocket) stay open
//! between windows; a connection closed outside them (a connection per request, a few
//! requests per connection, a server's keep-alive timeout, an h2c GOAWAY) is opened again
//! when the next window opens. Outside the windows a connection writes no request (h2c: no
//! new stream; WebSocket: no message), only what the protocol asks of it (SETTINGS and PING
//! acknowledgements, WINDOW_UPDATEs, pongs, and the preface or upgrade of a connection that
//! opened outside a window: the pool opened at the start, a connect under way at a window's
//! end).
//!
//! An open loop's arrivals start afresh at each window's `load_start`, at the target's rate,
//! and stop at the window's end: a send due in the window but not sent by its end (queued,
//! waiting for its connection, or not dispatched yet by a thread that noticed the end late)
//! is dropped there and counted as unsent in the slice, never sent in another target's
//! window. Latency runs from each send's intended time, as in any open loop.

use super::conn::CState;
use super::Worker;
use crate::result::Tally;
use crate::sys;
use std::sync::Arc;

/// One target's window of load: from `load_start`, counted from `count_start` to `end`
/// (CLOCK_MONOTONIC ns). `slice`: index on the board; None for a warm-up window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub slice: Option<usize>,
    pub load_start: u64,
    pub count_start: u64,
    pub end: u64,
}

/// What one generator thread spent over one slice: its CPU time, and the time it was
/// runnable but waited for a CPU (the kernel's schedstat; None when it does not say). A
/// slice whose thread was busy, or waited, for much of it was limited by the generator.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ThreadSpent {
    pub cpu_ns: u64,
    pub wait_ns: Option<u64>,
}

/// Where a thread hands each finished slice (crate::slices' board: one lock per slice per
/// thread, none per request). A trait, so the worker does not depend on the slices module.
pub trait SliceSink: Send + Sync {
    /// Add one thread's part of slice `index`, counted from `started_ns` to `ended_ns`.
    fn add(&self, index: usize, tally: &Tally, started_ns: u64, ended_ns: u64, spent: ThreadSpent);
}

/// Where a thread is in its windows.
pub(super) struct SliceTrack {
    windows: Vec<Window>,
    /// The current (or next) window.
    next: usize,
    stage: Stage,
    board: Arc<dyn SliceSink>,
    /// The run's tally while a slice is counted in `Worker::tally`.
    outside: Option<Tally>,
    /// When the counted part of the current slice began (ns).
    counted_from: u64,
    /// The thread's CPU time and CPU wait when the counted part began.
    cpu_from: u64,
    wait_from: Option<u64>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Before the window's load starts.
    Idle,
    /// Loading, not counted yet (settle).
    Loading,
    /// Loading and counted.
    Counting,
}

impl SliceTrack {
    pub(super) fn new(windows: Vec<Window>, board: Arc<dyn SliceSink>) -> SliceTrack {
        SliceTrack {
            windows,
            next: 0,
            stage: Stage::Idle,
            board,
            outside: None,
            counted_from: 0,
            cpu_from: 0,
            wait_from: None,
        }
    }

    /// The next instant at which the stage changes (u64::MAX after the last window).
    pub(super) fn next_boundary(&self) -> u64 {
        match (self.windows.get(self.next), self.stage) {
            (None, _) => u64::MAX,
            (Some(w), Stage::Idle) => w.load_start,
            (Some(w), Stage::Loading) => w.count_start,
            (Some(w), Stage::Counting) => w.end,
        }
    }
}

impl Worker {
    /// Per event: a window boundary passed since the turn began is acted on at once, so no
    /// request is issued outside the thread's windows however long a turn lasts.
    #[inline]
    pub(super) fn slice_tick(&mut self, now: u64) {
        if let Some(t) = &self.slices {
            if now >= t.next_boundary() {
                self.slice_step(now);
            }
        }
    }

    /// Move through the window boundaries that `now` has passed.
    pub(super) fn slice_step(&mut self, now: u64) {
        let Some(mut t) = self.slices.take() else {
            return;
        };
        while let Some(w) = t.windows.get(t.next).copied() {
            match t.stage {
                Stage::Idle if now >= w.load_start => {
                    t.stage = Stage::Loading;
                    // A thread that woke after its whole window (no CPU for that long) lets
                    // it pass unloaded: its slice counts nothing, and its round is dropped.
                    if now < w.end {
                        self.slice_open = true;
                        if self.open {
                            self.slice_arrivals_from(w.load_start);
                        }
                        self.slice_refill(now);
                    }
                }
                Stage::Loading if now >= w.count_start => {
                    t.stage = Stage::Counting;
                    if w.slice.is_some() {
                        // The slice's own tally, with a counter per endpoint of a mix.
                        let mut fresh = Tally::new();
                        fresh.endpoints = self
                            .tally
                            .endpoints
                            .iter()
                            .map(|_| Default::default())
                            .collect();
                        t.outside = Some(std::mem::replace(&mut self.tally, fresh));
                        t.counted_from = now;
                        // two reads per slice, none per request
                        t.cpu_from = sys::thread_cpu_ns();
                        t.wait_from = sys::thread_run_delay_ns();
                    }
                }
                Stage::Counting if now >= w.end => {
                    t.stage = Stage::Idle;
                    t.next += 1;
                    self.slice_open = false;
                    if self.open {
                        self.slice_drop_unsent(w.end);
                    }
                    if let (Some(i), Some(mut outside)) = (w.slice, t.outside.take()) {
                        // Nothing was counted after the planned end (checked per event), so
                        // a thread that notices the end late still ends the slice there.
                        let ended = now.min(w.end).max(t.counted_from);
                        let spent = ThreadSpent {
                            cpu_ns: sys::thread_cpu_ns().saturating_sub(t.cpu_from),
                            wait_ns: match (t.wait_from, sys::thread_run_delay_ns()) {
                                (Some(a), Some(b)) => Some(b.saturating_sub(a)),
                                _ => None,
                            },
                        };
                        t.board.add(i, &self.tally, t.counted_from, ended, spent);
                        outside.merge(&self.tally);
                        self.tally = outside;
                    }
                }
                _ => break,
            }
        }
        self.slices = Some(t);
    }

    /// A run stopped inside a counted slice: the part is not a slice; fold it back.
    pub(super) fn slice_abandon(&mut self) {
        if let Some(outside) = self.slices.as_mut().and_then(|t| t.outside.take()) {
            let part = std::mem::replace(&mut self.tally, outside);
            self.tally.merge(&part);
        }
    }

    /// A window opened: put requests on every idle open connection (not in an open loop,
    /// whose idle connections wait in its pool for the arrivals) and send the ones waiting
    /// unsent (h2c streams queued behind the server's stream limit, a WebSocket message
    /// filled before its upgrade was answered), and open the closed connections: those
    /// closed while the thread was outside its windows (a keep-alive timeout shorter than
    /// the gap between windows, a connection that served its `requests_per_connection`, an
    /// h2c connection drained after a GOAWAY, or with a connection per request every one,
    /// whose request was answered after the window's end; the reconnect is not done at the
    /// close, where it would load the server during another target's slice), and with a
    /// connection per request, the ones never opened (no pool is opened at the start then).
    fn slice_refill(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            match c.state {
                // (An open loop's idle connections wait in its pool for the arrivals.)
                CState::Open
                    if !self.open && (c.unsent > 0 || c.inflight.len() < self.depth as usize) =>
                {
                    self.fill(i);
                    self.flush(i, now);
                }
                // (A connection of the initial pool not yet started is the connect phase's;
                // an open loop's connection per request is opened by its send.)
                CState::Closed if i < self.pending_connect && (self.keepalive || !self.open) => {
                    self.start_connect(i, now);
                }
                _ => {}
            }
        }
    }

    /// Open loop: a window of the thread's target opened at `at`: its arrivals start there,
    /// at the thread's share of the rate (a thread that noticed the opening late dispatches
    /// the sends already due at once, their wait counted from their intended times).
    fn slice_arrivals_from(&mut self, at: u64) {
        self.arrivals.restart(at);
        self.next_arrival = self.arrivals.current();
        self.max_lead_ns = self.arrivals.max_lead_ns(self.next_arrival);
    }

    /// Open loop: the window ended at `end`; nothing of it is sent in another target's
    /// window. The sends due before the end that were not sent are dropped and counted in
    /// the window's tally as unsent (`unsent_at_end`): the queued ones, the ones waiting for
    /// their connection, and the ones the thread had not dispatched yet because it noticed
    /// the end late (those are offered too). A connection per request whose connect was
    /// under way for a dropped send is closed and goes back to the pool. Sends already
    /// written stay in flight: their answers come during the next window's settle, as a
    /// closed loop's do.
    fn slice_drop_unsent(&mut self, end: u64) {
        let mut unsent = self.queue.len() as u64;
        self.queue.clear();
        while self.next_arrival < end {
            self.tally.offered += 1;
            unsent += 1;
            self.advance_arrival();
        }
        self.next_arrival = u64::MAX;
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.unsent == 0 {
                continue;
            }
            let written = c.written();
            c.inflight.truncate(written);
            unsent += c.unsent as u64;
            self.inflight_total -= c.unsent as u64;
            c.unsent = 0;
            if !self.keepalive && written == 0 && matches!(c.state, CState::Connecting(_)) {
                self.close_conn(i);
                self.make_free(i);
            }
        }
        self.tally.unsent_at_end += unsent;
    }
}
