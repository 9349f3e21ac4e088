//! A generator thread's connections: connecting and reconnecting, reading and parsing
//! responses, writing request batches, and timeouts.

use super::{Worker, BACKOFF_NS};
use crate::errors::ErrorClass;
use crate::hist;
use crate::http::{Feed, ResponseParser};
use crate::sys;
use mio::net::TcpStream;
use mio::{Interest, Token};
use std::collections::VecDeque;
use std::io::{self, Read, Write};

#[derive(Clone, Copy)]
pub(super) struct Slot {
    /// When the request should have been sent (open loop), connect start (connection per
    /// request) or 0 = same as `sent`.
    pub(super) intended: u64,
    /// When the write of the request started; 0 = not written yet.
    pub(super) sent: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum CState {
    Closed,
    Backoff(u64),
    Connecting(u64),
    Open,
}

pub(super) struct Conn {
    pub(super) stream: Option<TcpStream>,
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
    pub(super) in_free: bool,
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
            in_free: false,
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

    pub(super) fn connect_failed(&mut self, i: usize, e: &io::Error, now: u64) {
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

    pub(super) fn connected(&mut self, i: usize, now: u64) {
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
    pub(super) fn close_conn(&mut self, i: usize) {
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
    pub(super) fn reopen(&mut self, i: usize, now: u64) {
        if self.open && !self.keepalive {
            self.make_free(i);
        } else if self.may_issue() || self.conns[i].unsent > 0 || self.open {
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
        c.inflight.drain(..drop_n);
        self.inflight_total -= drop_n as u64;
        self.record_error(class, (drop_n as u64).max(1), now, || msg);
        self.close_conn(i);
        self.reopen(i, now);
    }

    pub(super) fn on_event(&mut self, i: usize, ev: &mio::event::Event, now: u64) {
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

    pub(super) fn on_readable(&mut self, i: usize, now: u64, drain: bool) {
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

    pub(super) fn on_eof(&mut self, i: usize, now: u64) {
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
    pub(super) fn process(&mut self, i: usize, data: &[u8], now: u64) -> bool {
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
        if close || !self.keepalive || i < self.fresh_conns {
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
    pub(super) fn flush(&mut self, i: usize, now: u64) {
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
    pub(super) fn on_timeout(&mut self, i: usize, now: u64) {
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
