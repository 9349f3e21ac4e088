//! WebSocket connections in a generator thread: the upgrade handshake once per connection,
//! then each "request" is one binary message, timed from its write to the end of its echo,
//! which is compared byte for byte with what was sent (`crate::ws::echo_differs`).
//!
//! Messages stay in `Conn::inflight` as HTTP/1.1 requests do (written ones first, then
//! unsent ones; an echo completes the oldest), so timeouts, failures, budgets, pipelining
//! and both loops work the same. Until the upgrade is answered, messages wait unsent. Frames
//! to send (the upgrade request, pongs, new messages) collect in `pending` and go out
//! together as `out` in the connection's next write, as h2c's do. Each message carries its
//! sequence number (in `Slot::stream`) in its first bytes, so an echo of the wrong message
//! is a mismatch too.

use super::Worker;
use crate::errors::ErrorClass;
use crate::hist;
use crate::sys;
use crate::ws::{self, Event, FrameParser, Handshake, HandshakeFeed};
use std::io;
use std::os::fd::AsRawFd;

/// The WebSocket state of one connection.
pub(super) struct WsConn {
    handshake: Handshake,
    /// The upgrade was answered with 101: frames from here on.
    pub(super) upgraded: bool,
    /// When the upgrade request was put in a write (0: not yet).
    pub(super) hs_sent: u64,
    parser: FrameParser,
    /// Frames waiting for the next write.
    pending: Vec<u8>,
    /// Frames being written (not touched until written: io_uring sends from it).
    pub(super) out: Vec<u8>,
    next_seq: u32,
    /// Bytes of the oldest message's echo received so far, and whether they differ.
    rx: u64,
    mismatch: bool,
    /// Masking keys (RFC 6455 5.3: a new one for every frame): xorshift64 state.
    rng: u64,
}

impl WsConn {
    pub(super) fn new(seed: u64) -> WsConn {
        WsConn {
            handshake: Handshake::new(),
            upgraded: false,
            hs_sent: 0,
            parser: FrameParser::new(),
            pending: Vec::with_capacity(256),
            out: Vec::with_capacity(256),
            next_seq: 0,
            rx: 0,
            mismatch: false,
            rng: seed | 1,
        }
    }

    /// A new connection: fresh state (the upgrade request goes out with the first write).
    pub(super) fn start(&mut self) {
        self.handshake.reset();
        self.parser.reset();
        self.upgraded = false;
        self.hs_sent = 0;
        self.pending.clear();
        self.out.clear();
        self.rx = 0;
        self.mismatch = false;
    }

    fn mask(&mut self) -> [u8; 4] {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        ((x >> 32) as u32).to_ne_bytes()
    }

    /// Bytes of the oldest echo received (for timeouts).
    pub(super) fn received(&self) -> u64 {
        self.rx
    }
}

impl Worker {
    /// Start writing connection `i`'s pending frames: the upgrade request on a new
    /// connection, else pongs and every unsent message (each stamped with its send time);
    /// false when there is nothing.
    pub(super) fn ws_take_batch(&mut self, i: usize, now: u64) -> bool {
        let wp = self.plan.ws.as_ref().expect("a ws run has a ws plan");
        let c = &mut self.conns[i];
        let written = c.written() as u64;
        let Some(w) = c.ws.as_mut() else { return false };
        w.out.clear();
        std::mem::swap(&mut w.out, &mut w.pending);
        if !w.upgraded {
            if w.hs_sent == 0 {
                w.out.extend_from_slice(&self.plan.request);
                w.hs_sent = sys::now_ns().max(now);
            }
        } else if c.unsent > 0 && self.slice_open {
            // (Interleaved slices: pongs go out at any time, messages only inside the
            // thread's windows; one filled before the upgrade was answered waits for the
            // next window when this one closed meanwhile: `slice_refill`.)
            let mut k = c.unsent as usize;
            if self.per_conn_limit > 0 {
                // `requests_per_connection`: never send more than the connection will echo
                // before it is closed.
                let used = c.reqs + written;
                k = k.min(self.per_conn_limit.saturating_sub(used) as usize);
            }
            let t = sys::now_ns().max(now);
            let start = c.inflight.len() - c.unsent as usize;
            for s in c.inflight.range_mut(start..start + k) {
                let seq = w.next_seq;
                w.next_seq = seq.wrapping_add(1);
                let mask = w.mask();
                ws::client_message(&mut w.out, &wp.pattern, seq, mask);
                s.sent = t;
                s.stream = seq;
                if s.intended == 0 {
                    s.intended = t;
                }
            }
            c.unsent -= k as u32;
        }
        if w.out.is_empty() {
            return false;
        }
        c.writing = 1;
        c.woff = 0;
        true
    }

    /// Parse bytes received on WebSocket connection `i`; false when it was closed.
    pub(super) fn ws_process(&mut self, i: usize, data: &[u8], now: u64) -> bool {
        let wp = self.plan.ws.as_ref().expect("a ws run has a ws plan");
        let Some(w) = self.conns[i].ws.as_mut() else {
            return false;
        };
        let mut off = 0;
        if !w.upgraded {
            match w.handshake.feed(data, &wp.accept) {
                Ok(HandshakeFeed::NeedMore) => return true,
                Ok(HandshakeFeed::Done { consumed }) => {
                    w.upgraded = true;
                    off = consumed;
                    self.tally.ws_handshakes += 1;
                    let took = now.saturating_sub(w.hs_sent) / 1000;
                    hist::record(&mut self.tally.handshake, took);
                }
                Err((class, msg)) => {
                    self.give_up(i, class, now, || msg);
                    return false;
                }
            }
        }
        while off < data.len() {
            let Some(w) = self.conns[i].ws.as_mut() else {
                return false;
            };
            let step = match w.parser.step(&data[off..]) {
                Ok(s) => s,
                Err((class, msg)) => {
                    self.fail(i, class, msg, now);
                    return false;
                }
            };
            off += step.consumed;
            if let Some(ev) = step.event {
                if !self.ws_event(i, ev, now) {
                    return false;
                }
            }
        }
        true
    }

    fn ws_event(&mut self, i: usize, ev: Event<'_>, now: u64) -> bool {
        let c = &mut self.conns[i];
        let written = c.written();
        let Some(w) = c.ws.as_mut() else { return false };
        match ev {
            Event::Data { payload, end } => {
                if written == 0 {
                    let msg = "a message from the server with none of ours awaiting its echo \
                               (does the endpoint echo?)";
                    self.fail(i, ErrorClass::WsProtocolError, msg.into(), now);
                    return false;
                }
                let pattern = &self.plan.ws.as_ref().expect("a ws plan").pattern;
                if !w.mismatch {
                    w.mismatch = ws::echo_differs(pattern, c.inflight[0].stream, w.rx, payload);
                }
                w.rx += payload.len() as u64;
                if end {
                    return self.ws_echoed(i, now);
                }
            }
            Event::Ping { payload, len } => {
                let mask = w.mask();
                ws::client_frame(&mut w.pending, ws::OP_PONG, &payload[..len as usize], mask);
            }
            Event::Close { code, reason } => {
                self.ws_say_close(i);
                if written == 0 {
                    // Closed while idle (a server's idle timeout): open a new one quietly.
                    self.close_conn(i);
                    self.reopen(i, now);
                    return false;
                }
                let code = match code {
                    Some(k) => format!("{k} ({})", ws::close_code_name(k)),
                    None => "with no code".into(),
                };
                let msg = format!(
                    "the server sent close {code} {reason:?} with {written} message(s) \
                     awaiting their echo"
                );
                self.fail(i, ErrorClass::WsClosed, msg, now);
                return false;
            }
        }
        true
    }

    /// The oldest message on connection `i` was echoed in full: count it (a mismatch is
    /// still a round trip, and a `ws_echo_mismatch` error), then the next one.
    fn ws_echoed(&mut self, i: usize, now: u64) -> bool {
        let expected = self.plan.spec.message_bytes as u64;
        let c = &mut self.conns[i];
        let slot = c
            .inflight
            .pop_front()
            .expect("a written message is in flight");
        self.inflight_total -= 1;
        let Some(w) = c.ws.as_mut() else { return false };
        let (rx, mismatch) = (w.rx, w.mismatch || w.rx != expected);
        w.rx = 0;
        w.mismatch = false;
        c.reqs += 1;
        let spent = self.per_conn_limit > 0 && c.reqs >= self.per_conn_limit;
        self.record_latency(slot, now);
        if mismatch {
            let seq = slot.stream;
            self.record_error(ErrorClass::WsEchoMismatch, 1, now, || {
                format!(
                    "the echo of message {seq} differs from it ({rx} bytes back, \
                     {expected} sent)"
                )
            });
        }
        if spent || !self.keepalive || i < self.fresh_conns {
            self.ws_say_close(i);
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

    /// Send a close frame (1000) on connection `i` before closing it, if the socket takes it
    /// at once (best effort: the TCP close follows anyway).
    fn ws_say_close(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let (Some(w), Some(s)) = (c.ws.as_mut(), c.stream.as_ref()) else {
            return;
        };
        if !w.upgraded {
            return;
        }
        let m = w.mask();
        let code = 1000u16.to_be_bytes();
        let frame = [
            0x80 | ws::OP_CLOSE,
            0x82,
            m[0],
            m[1],
            m[2],
            m[3],
            code[0] ^ m[0],
            code[1] ^ m[1],
        ];
        // SAFETY: a send of a local buffer on an open socket.
        let _ = unsafe {
            libc::send(
                s.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
    }

    /// WebSocket connection `i` ended (`reset`: with that error, else the server closed
    /// it). True when handled here: before the upgrade was answered, or with messages
    /// awaiting their echo; false for an idle connection (reopened quietly by the caller).
    pub(super) fn ws_ended(&mut self, i: usize, reset: Option<&io::Error>, now: u64) -> bool {
        let c = &self.conns[i];
        let Some(w) = c.ws.as_ref() else { return false };
        let how = match reset {
            Some(e) => format!("reset the connection ({e})"),
            None => "closed the connection".into(),
        };
        if !w.upgraded {
            let got = w.handshake.buffered();
            self.give_up(i, ErrorClass::WsClosed, now, || {
                format!(
                    "the server {how} before answering the WebSocket upgrade ({got} bytes of \
                     an answer received)"
                )
            });
            return true;
        }
        let written = c.written();
        if written == 0 {
            return false;
        }
        let msg = if w.parser.mid_frame() || w.rx > 0 {
            format!(
                "the server {how} mid-frame ({} of {} echo bytes received)",
                w.rx, self.plan.spec.message_bytes
            )
        } else {
            format!("the server {how} with {written} message(s) awaiting their echo")
        };
        self.fail(i, ErrorClass::WsClosed, msg, now);
        true
    }
}
