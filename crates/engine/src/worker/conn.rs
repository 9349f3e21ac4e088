//! A generator thread's connections, whatever the I/O backend: connecting and
//! reconnecting, parsing responses, taking request batches to write, and timeouts.

use super::h2::H2Conn;
use super::slot::Slot;
use super::ws::WsConn;
use super::{Io, Worker, BACKLOG_RETRY_NS, BACKOFF_NS};
use crate::dial::{self, Stream};
use crate::errors::ErrorClass;
use crate::hist;
use crate::http::{Feed, ResponseParser};
use crate::sys;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum CState {
    Closed,
    Backoff(u64),
    Connecting(u64),
    Open,
}

pub(super) struct Conn {
    pub(super) stream: Option<Stream>,
    pub(super) state: CState,
    /// Requests issued on this connection: written ones first, then `unsent` ones.
    pub(super) inflight: VecDeque<Slot>,
    pub(super) unsent: u32,
    /// Requests in the batch being written, and bytes of it written so far.
    pub(super) writing: u32,
    pub(super) woff: usize,
    pub(super) parser: ResponseParser,
    pub(super) reqs: u64,
    pub(super) opened_at: u64,
    pub(super) attempted: bool,
    /// The connection was established at least once.
    pub(super) ever_open: bool,
    /// Waiting to connect again because a unix socket's listen backlog was full (the wait
    /// counts towards the connect timeout from `opened_at`, not as an error).
    pub(super) backlog_full: bool,
    pub(super) in_free: bool,
    /// io_uring: generation of the socket (completions of an earlier one are stale), and
    /// whether a receive or a send is armed on it.
    pub(super) gen: u32,
    pub(super) recv_armed: bool,
    pub(super) send_busy: bool,
    /// h2c: the connection's HTTP/2 state (None: HTTP/1.1).
    pub(super) h2: Option<Box<H2Conn>>,
    /// ws: the connection's WebSocket state (None: HTTP).
    pub(super) ws: Option<Box<WsConn>>,
    /// A mix over HTTP/1.1: the requests of the batch being written, copied from their
    /// entries (empty otherwise; io_uring sends from it, so it is not touched until sent).
    pub(super) mix_out: Vec<u8>,
}

impl Conn {
    pub(super) fn new(depth: usize) -> Conn {
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
            ever_open: false,
            backlog_full: false,
            in_free: false,
            gen: 0,
            recv_armed: false,
            send_busy: false,
            h2: None,
            ws: None,
            mix_out: Vec::new(),
        }
    }

    #[inline]
    pub(super) fn written(&self) -> usize {
        self.inflight.len() - self.unsent as usize
    }
}

impl Worker {
    pub(super) fn start_connect(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        if !c.backlog_full {
            self.tally.attempts += 1;
            if c.attempted {
                self.tally.reopened += 1;
            }
            c.attempted = true;
            c.opened_at = now;
        }
        // The one way both I/O backends open connections (dial.rs: source addresses, unix
        // sockets).
        self.dial_seq = self.dial_seq.wrapping_add(1);
        match dial::dial(&self.plan.target, self.dial_seq) {
            Ok(mut s) => {
                let armed = match &mut self.io {
                    Io::Epoll(e) => e.register(&mut s, i),
                    Io::Uring(_) => Ok(()),
                };
                if let Err(e) = armed {
                    self.connect_failed(i, &e, now);
                    return;
                }
                let c = &mut self.conns[i];
                c.stream = Some(s);
                c.backlog_full = false;
                c.state = CState::Connecting(c.opened_at);
                if let Io::Uring(_) = self.io {
                    self.uring_arm_connect(i);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // A unix socket whose listen backlog is full: try again shortly, as TCP would
                // retransmit its SYN; the connect timeout still runs from the first attempt.
                let c = &mut self.conns[i];
                if now.saturating_sub(c.opened_at) >= self.plan.connect_timeout_ns {
                    c.backlog_full = false;
                    let e = io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the server's listen backlog stayed full",
                    );
                    self.connect_failed_as(i, ErrorClass::ConnectTimeout, &e, now);
                } else {
                    c.backlog_full = true;
                    c.state = CState::Backoff(now + BACKLOG_RETRY_NS);
                }
            }
            Err(e) => self.connect_failed(i, &e, now),
        }
    }

    /// A connect in progress on `i` signalled (`failed`: with an error or hang-up): learn
    /// its outcome. It may still be in progress after a spurious wake-up.
    pub(super) fn finish_connect(&mut self, i: usize, failed: bool, now: u64) {
        let Some(s) = self.conns[i].stream.as_ref() else {
            return;
        };
        match s.take_error() {
            Ok(Some(e)) | Err(e) => return self.connect_failed(i, &e, now),
            Ok(None) => {}
        }
        match s.is_connected() {
            Ok(true) => self.connected(i, now),
            Ok(false) => {
                if failed {
                    let e = io::Error::from_raw_os_error(libc::ECONNREFUSED);
                    self.connect_failed(i, &e, now);
                }
            }
            Err(e) => self.connect_failed(i, &e, now),
        }
    }

    /// Close the socket of connection `i` (the backend lets go of it first).
    fn drop_stream(&mut self, i: usize) {
        if let Io::Uring(_) = self.io {
            self.uring_release(i);
        }
        let s = self.conns[i].stream.take();
        if let (Io::Uring(r), Some(s)) = (&mut self.io, s) {
            let fd: OwnedFd = s.into();
            // The number is closed only after the next submission (it names the socket),
            // which waits for completions; the FIN goes now. A server that waits for the
            // client's close (gunicorn's sync worker polls for it after each response) sat
            // idle meanwhile: a fifth of its core, a connection per request.
            // SAFETY: a socket this connection owns, still open.
            unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RDWR) };
            r.close_after_submit(fd);
        }
    }

    pub(super) fn connect_failed(&mut self, i: usize, e: &io::Error, now: u64) {
        self.connect_failed_as(i, ErrorClass::from_connect_error(e), e, now);
    }

    fn connect_failed_as(&mut self, i: usize, class: ErrorClass, e: &io::Error, now: u64) {
        let plan = self.plan.clone();
        self.give_up(i, class, now, || {
            format!("connect to {}: {e}", plan.target.describe())
        });
    }

    /// Connection `i` could not be set up (a failed connect, or a refused WebSocket
    /// upgrade): the requests waiting for it failed with it; back off before trying again.
    /// `msg` is called for the first error of its class only (no allocation per failure).
    pub(super) fn give_up(
        &mut self,
        i: usize,
        class: ErrorClass,
        now: u64,
        msg: impl FnOnce() -> String,
    ) {
        self.drop_stream(i);
        let c = &mut self.conns[i];
        c.parser.reset();
        c.writing = 0;
        c.woff = 0;
        // Requests waiting for this connection (open loop, connection per request, pipelined
        // requests to resend) failed with it.
        let waiting = c.inflight.len() as u64;
        self.inflight_total -= waiting;
        if let Some(m) = &self.plan.mix {
            for s in &c.inflight {
                let ep = m.entries[s.entry as usize].endpoint as usize;
                self.tally.endpoints[ep].errors[class as usize] += 1;
            }
        }
        c.inflight.clear();
        c.unsent = 0;
        let n = waiting.max(1);
        if waiting == 0 && !self.open && self.budget.is_some() {
            // Count the attempt against the budget so an unreachable server still ends the run.
            self.issued += 1;
        }
        self.record_error(class, n, now, msg);
        if self.open && !self.keepalive && self.queue.is_empty() {
            self.conns[i].state = CState::Closed;
            self.make_free(i);
        } else {
            // Sends are waiting (open loop): they are served after the back-off, by `reopen`,
            // not by a tight loop of failing connects.
            self.conns[i].state = CState::Backoff(now + BACKOFF_NS);
        }
    }

    pub(super) fn connected(&mut self, i: usize, now: u64) {
        self.conns[i].state = CState::Open;
        self.conns[i].ever_open = true;
        self.tally.established += 1;
        if self.cpr && !self.slice_open {
            // Interleaved slices, a connection per request: a connect still under way when
            // the thread's window closed ends here, unused, and the next window opens its own.
            // A request sent on it then would count the gap between the windows in its
            // latency, which runs from the connect.
            self.close_conn(i);
            return;
        }
        if let Some(h) = self.conns[i].h2.as_mut() {
            h.start();
        }
        if let Some(w) = self.conns[i].ws.as_mut() {
            w.start();
        }
        if let Io::Uring(_) = self.io {
            self.uring_arm_recv(i);
        }
        if self.open {
            self.conn_idle(i, now);
        } else {
            self.fill(i);
        }
        self.flush(i, now);
    }

    /// Close the socket (slots stay, for the caller to deal with).
    pub(super) fn close_conn(&mut self, i: usize) {
        self.drop_stream(i);
        self.closed_since_wait = true;
        let c = &mut self.conns[i];
        if c.reqs > 0 {
            let _ = self.tally.per_conn.record(c.reqs);
        }
        c.state = CState::Closed;
        c.parser.reset();
        c.writing = 0;
        c.woff = 0;
        c.reqs = 0;
    }

    /// After a close: reconnect (keep-alive pools), or, open loop with a connection per
    /// request, serve the oldest queued send on a new connection (the pool otherwise: a
    /// queued send must not wait behind later arrivals, or its wait would never be counted).
    /// Interleaved slices: never outside the thread's windows, not even for requests put
    /// back unsent (pipelined ones the server did not answer, h2c streams above a GOAWAY's
    /// last, a draining connection's rest): the next window opens it (`slice_refill`),
    /// never during another target's.
    pub(super) fn reopen(&mut self, i: usize, now: u64) {
        if self.open && !self.keepalive {
            if self.conns[i].unsent > 0 {
                self.start_connect(i, now);
            } else {
                self.conn_idle(i, now);
            }
        } else if self.slice_open && (self.may_issue() || self.conns[i].unsent > 0 || self.open) {
            self.start_connect(i, now);
        }
    }

    /// A request failed on connection `i`: count it, drop its written requests, reconnect.
    pub(super) fn fail(&mut self, i: usize, class: ErrorClass, msg: String, now: u64) {
        let c = &mut self.conns[i];
        let written = c.written();
        let mut drop_n = written;
        if self.open {
            drop_n = c.inflight.len();
            c.unsent = 0;
        }
        if let Some(m) = &self.plan.mix {
            for s in c.inflight.range(..drop_n) {
                let ep = m.entries[s.entry as usize].endpoint as usize;
                self.tally.endpoints[ep].errors[class as usize] += 1;
            }
        }
        c.inflight.drain(..drop_n);
        self.inflight_total -= drop_n as u64;
        self.record_error(class, (drop_n as u64).max(1), now, || msg);
        self.close_conn(i);
        self.reopen(i, now);
    }

    /// Reading from connection `i` failed with `e`.
    pub(super) fn on_read_error(&mut self, i: usize, e: &io::Error, now: u64) {
        if self.ws_ended(i, Some(e), now) {
            return;
        }
        let c = &self.conns[i];
        if c.written() == 0 {
            // Nothing was asked on this connection: not a request failure.
            self.close_conn(i);
            self.reopen(i, now);
        } else {
            let (class, msg) = match &c.h2 {
                Some(h) => h.on_close(Some(e)),
                None => c.parser.on_reset(e),
            };
            self.fail(i, class, msg, now);
        }
    }

    pub(super) fn on_eof(&mut self, i: usize, now: u64) {
        if self.ws_ended(i, None, now) {
            return;
        }
        let c = &self.conns[i];
        if c.written() == 0 {
            // The server closed an idle connection (keep-alive timeout): reopen quietly.
            self.close_conn(i);
            self.reopen(i, now);
            return;
        }
        if let Some(h) = &c.h2 {
            let (class, msg) = h.on_close(None);
            return self.fail(i, class, msg, now);
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
    pub(super) fn process(&mut self, i: usize, data: &[u8], now: u64) -> bool {
        if self.conns[i].h2.is_some() {
            return self.h2_process(i, data, now);
        }
        if self.conns[i].ws.is_some() {
            return self.ws_process(i, data, now);
        }
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
            let is_head = match &self.plan.mix {
                Some(m) => m.entries[c.inflight[0].entry as usize].is_head,
                None => self.plan.is_head,
            };
            match c
                .parser
                .feed(&data[off..], is_head, self.plan.expect_body.as_deref())
            {
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
    pub(super) fn on_response(&mut self, i: usize, now: u64) -> bool {
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
        let spent = self.per_conn_limit > 0 && c.reqs >= self.per_conn_limit;
        self.record_response(slot, status, mismatch, now);
        if close || spent || !self.keepalive || i < self.fresh_conns {
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
                        stream: 0,
                        entry: s.entry,
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

    /// Count a response to the request `slot`: latency (and service time), status, the
    /// per-second series, and the response checks.
    pub(super) fn record_response(&mut self, slot: Slot, status: u16, mismatch: bool, now: u64) {
        self.record_latency(slot, now);
        self.tally.status[(status as usize).min(999)] += 1;
        let plan = &self.plan;
        let expect = match &plan.mix {
            Some(m) => {
                let entry = &m.entries[slot.entry as usize];
                let ep = &mut self.tally.endpoints[entry.endpoint as usize];
                ep.status(status, 1);
                if !entry.expect_status.is_empty() && !entry.expect_status.contains(&status) {
                    ep.errors[ErrorClass::CheckFailed as usize] += 1;
                }
                &entry.expect_status
            }
            None => &plan.spec.expect_status,
        };
        if (!expect.is_empty() && !expect.contains(&status)) || mismatch {
            let msg = if mismatch {
                format!("status {status}: body differs from the expected body")
            } else {
                format!("status {status}, expected one of {expect:?}")
            };
            self.record_error(ErrorClass::CheckFailed, 1, now, || msg);
        }
    }

    /// Count a completed request (HTTP response or WebSocket echo): its latency (and
    /// service time) and the per-second series.
    pub(super) fn record_latency(&mut self, slot: Slot, now: u64) {
        let lat_us = now.saturating_sub(slot.intended) / 1000;
        hist::record(&mut self.tally.latency, lat_us);
        if let Some(m) = &self.plan.mix {
            let ep = &mut self.tally.endpoints[m.entries[slot.entry as usize].endpoint as usize];
            ep.requests += 1;
            hist::record(&mut ep.latency, lat_us);
        }
        if slot.sent != 0 {
            let rtt = now.saturating_sub(slot.sent);
            self.rtt_ns = self.rtt_ns - self.rtt_ns / 16 + rtt / 16;
        }
        if self.open {
            hist::record(
                &mut self.tally.service,
                now.saturating_sub(slot.sent) / 1000,
            );
        }
        self.tally.requests += 1;
        if self.measuring {
            let t = (now.saturating_sub(self.measure_start) / 1_000_000_000) as usize;
            let s = self.tally.second(t);
            s.0 += 1;
            let _ = s.2.record(lat_us.max(1));
        }
    }

    /// Write whatever requests are waiting on connection `i`, in one batch where possible.
    pub(super) fn flush(&mut self, i: usize, now: u64) {
        match self.io {
            Io::Epoll(_) => self.epoll_flush(i, now),
            Io::Uring(_) => self.uring_flush(i, now),
        }
    }

    /// Start writing the next batch of unsent requests on connection `i` (up to `pipeline`
    /// of them, stamped with their send time); false when none is waiting.
    pub(super) fn take_batch(&mut self, i: usize, now: u64) -> bool {
        if self.conns[i].h2.is_some() {
            return self.h2_take_batch(i, now);
        }
        if self.conns[i].ws.is_some() {
            return self.ws_take_batch(i, now);
        }
        let c = &mut self.conns[i];
        if c.unsent == 0 || !self.slice_open {
            // (Interleaved slices: requests put back unsent on a connection that opened
            // after its window closed wait for the next window.)
            return false;
        }
        let mut k = c.unsent.min(self.depth);
        if self.per_conn_limit > 0 {
            // never write more than the connection will answer before it is closed
            let used = c.reqs + c.written() as u64;
            k = k.min(
                self.per_conn_limit
                    .saturating_sub(used)
                    .min(u32::MAX as u64) as u32,
            );
            if k == 0 {
                return false;
            }
        }
        let start = c.inflight.len() - c.unsent as usize;
        // A fresh timestamp: the send time is taken right before the write, not when the
        // event that led to it was picked up (that would overstate latency).
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
        if let Some(m) = &self.plan.mix {
            c.mix_out.clear();
            for s in c.inflight.range(start..start + k as usize) {
                c.mix_out
                    .extend_from_slice(&m.entries[s.entry as usize].request);
            }
        }
        true
    }

    /// `n` bytes of the batch on connection `i` were written.
    pub(super) fn wrote(&mut self, i: usize, n: usize) {
        self.tally.bytes_out += n as u64;
        let c = &mut self.conns[i];
        c.woff += n;
        let total = match (&c.h2, &c.ws) {
            (Some(h), _) => h.out.len(),
            (_, Some(w)) => w.out.len(),
            _ if self.plan.mix.is_some() => c.mix_out.len(),
            _ => c.writing as usize * self.req_len,
        };
        if c.woff >= total {
            c.writing = 0;
            c.woff = 0;
        }
    }

    /// Timeouts, connect timeouts and reconnect back-offs (every few milliseconds).
    pub(super) fn scan(&mut self, now: u64) {
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
                    if self.conns[i].backlog_full {
                        self.start_connect(i, now);
                    } else {
                        self.reopen(i, now);
                    }
                }
                CState::Open => {
                    let c = &self.conns[i];
                    if let Some(w) = c.ws.as_ref().filter(|w| !w.upgraded && w.hs_sent > 0) {
                        if now.saturating_sub(w.hs_sent) >= self.plan.timeout_ns {
                            let secs = self.plan.spec.timeout_s;
                            self.give_up(i, ErrorClass::HeaderTimeout, now, || {
                                format!("no answer to the WebSocket upgrade within {secs} s")
                            });
                        }
                        continue;
                    }
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
    pub(super) fn on_timeout(&mut self, i: usize, now: u64) {
        let c = &mut self.conns[i];
        let written = c.written();
        let (in_head, received) = match (&c.h2, &c.ws) {
            (Some(h), _) => h.progress(c.inflight[0].stream),
            (_, Some(w)) => (false, w.received()),
            _ => (c.parser.in_head(), c.parser.body_len),
        };
        let ws = c.ws.is_some();
        let t = ((now.saturating_sub(self.measure_start)) / 1_000_000_000) as usize;
        let class = if ws {
            ErrorClass::WsEchoTimeout
        } else if in_head {
            ErrorClass::HeaderTimeout
        } else {
            ErrorClass::BodyTimeout
        };
        for (k, s) in c.inflight.drain(..written).enumerate() {
            let lat = now.saturating_sub(s.intended) / 1000;
            hist::record(&mut self.tally.latency, lat);
            if let Some(m) = &self.plan.mix {
                // As the whole run's: the first a body timeout when the head had arrived,
                // the pipelined ones behind it header timeouts.
                let class = if k > 0 && class == ErrorClass::BodyTimeout {
                    ErrorClass::HeaderTimeout
                } else {
                    class
                };
                let ep = &mut self.tally.endpoints[m.entries[s.entry as usize].endpoint as usize];
                hist::record(&mut ep.latency, lat);
                ep.timeouts += 1;
                ep.errors[class as usize] += 1;
            }
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
        if ws {
            self.record_error(ErrorClass::WsEchoTimeout, written as u64, now, || {
                format!("no complete echo within {secs} s ({received} bytes of it received)")
            });
        } else if in_head {
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
