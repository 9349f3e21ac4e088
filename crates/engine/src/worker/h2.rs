//! h2c connections in a generator thread: streams as in-flight requests, frames out in one
//! write per connection and turn, frames in through `crate::h2::FrameParser`.
//!
//! A connection's requests stay in `Conn::inflight` as for HTTP/1.1 (written ones first, in
//! stream order, then unsent ones), so timeouts, failures, budgets and both loops work the
//! same; a response completes whichever stream it ends, not only the oldest. Frames to send
//! (the preface, SETTINGS and PING acknowledgements, WINDOW_UPDATEs, new requests) collect
//! in `pending` and go out together as `out` in the connection's next write.

use super::slot::Slot;
use super::Worker;
use crate::errors::ErrorClass;
use crate::h2::{self, Event, FrameParser, MAX_STREAM_ID, UPDATE_AT};
use crate::sys;

/// One open stream: the response so far.
struct Stream {
    id: u32,
    status: u16,
    /// The final (non-1xx) response headers arrived.
    headers: bool,
    body_len: u64,
    mismatch: bool,
    /// DATA bytes received since the last stream WINDOW_UPDATE.
    unacked: u32,
}

/// The HTTP/2 state of one connection.
pub(super) struct H2Conn {
    parser: FrameParser,
    /// Frames waiting for the next write.
    pending: Vec<u8>,
    /// Frames being written (not touched until written: io_uring sends from it).
    pub(super) out: Vec<u8>,
    streams: Vec<Stream>,
    next_id: u32,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS (unlimited until it says).
    peer_max: u32,
    /// No new streams on this connection (GOAWAY received, or stream ids used up): it is
    /// reopened once its streams are done.
    draining: bool,
    /// DATA bytes received on the connection since its last WINDOW_UPDATE.
    unacked: u32,
}

impl H2Conn {
    pub(super) fn new(streams: usize) -> H2Conn {
        H2Conn {
            parser: FrameParser::new(),
            pending: Vec::with_capacity(1024),
            out: Vec::with_capacity(1024),
            streams: Vec::with_capacity(streams),
            next_id: 1,
            peer_max: u32::MAX,
            draining: false,
            unacked: 0,
        }
    }

    /// A new connection: fresh state, and the client preface queued.
    pub(super) fn start(&mut self) {
        self.parser.reset();
        self.pending.clear();
        self.out.clear();
        self.streams.clear();
        self.next_id = 1;
        self.peer_max = u32::MAX;
        self.draining = false;
        self.unacked = 0;
        h2::client_start(&mut self.pending);
    }

    /// The response of the oldest open stream has not finished its headers (for timeouts),
    /// and the body bytes it received.
    pub(super) fn progress(&self, stream: u32) -> (bool, u64) {
        match self.streams.iter().find(|s| s.id == stream) {
            Some(s) => (!s.headers, s.body_len),
            None => (true, 0),
        }
    }

    /// How the connection ending (`how`: "closed the connection" or a reset) is classified.
    pub(super) fn on_close(&self, reset: Option<&std::io::Error>) -> (ErrorClass, String) {
        let mid_body = self.streams.iter().find(|s| s.headers);
        let hint = if self.parser.started() {
            ""
        } else {
            " (no HTTP/2 frame received: does the server speak h2c?)"
        };
        match (reset, mid_body) {
            (None, None) => (
                ErrorClass::EofBeforeHeaders,
                format!("server closed the connection before sending a response{hint}"),
            ),
            (None, Some(s)) => (
                ErrorClass::EofMidBody,
                format!(
                    "server closed the connection after {} body bytes (stream {})",
                    s.body_len, s.id
                ),
            ),
            (Some(e), None) => (
                ErrorClass::ResetBeforeResponse,
                format!("connection reset before the response was complete{hint}: {e}"),
            ),
            (Some(e), Some(s)) => (
                ErrorClass::ResetMidBody,
                format!(
                    "connection reset after {} body bytes (stream {}): {e}",
                    s.body_len, s.id
                ),
            ),
        }
    }
}

/// Compare `bytes`, arriving at offset `at` of a body, with the expected body.
#[inline]
fn body_differs(expect: &[u8], at: u64, bytes: &[u8]) -> bool {
    let start = at as usize;
    !(start + bytes.len() <= expect.len() && expect[start..start + bytes.len()] == *bytes)
}

impl Worker {
    /// Start writing connection `i`'s pending frames and as many of its unsent requests as
    /// it has free streams (each stamped with its send time); false when there is nothing.
    pub(super) fn h2_take_batch(&mut self, i: usize, now: u64) -> bool {
        let req = self
            .plan
            .h2
            .as_ref()
            .expect("an h2c run has an h2c request");
        let c = &mut self.conns[i];
        let Some(h) = c.h2.as_mut() else { return false };
        h.out.clear();
        std::mem::swap(&mut h.out, &mut h.pending);
        // Interleaved slices: control frames go out at any time, new streams only inside
        // the thread's windows (requests queued behind the server's stream limit, or put
        // back by a GOAWAY, wait for the next window: `slice_refill`).
        if !h.draining && c.unsent > 0 && self.slice_open {
            let limit = self.depth.min(h.peer_max) as usize;
            let mut k = (c.unsent as usize).min(limit.saturating_sub(h.streams.len()));
            let ids_left = ((MAX_STREAM_ID - h.next_id) / 2 + 1) as usize;
            if k >= ids_left {
                k = ids_left;
                h.draining = true;
            }
            if self.per_conn_limit > 0 {
                // `requests_per_connection`: drain, then reconnect, once that many are opened
                let opened = u64::from((h.next_id - 1) / 2);
                let left = self.per_conn_limit.saturating_sub(opened) as usize;
                if k >= left {
                    k = left;
                    h.draining = true;
                }
            }
            if k > 0 {
                let t = sys::now_ns().max(now);
                let start = c.inflight.len() - c.unsent as usize;
                for s in c.inflight.range_mut(start..start + k) {
                    let id = h.next_id;
                    h.next_id += 2;
                    let req = match &self.plan.mix {
                        Some(m) => m.entries[s.entry as usize].h2.as_ref().unwrap_or(req),
                        None => req,
                    };
                    h2::request_frames(&mut h.out, id, &req.block, &req.body);
                    s.sent = t;
                    s.stream = id;
                    if s.intended == 0 {
                        s.intended = t;
                    }
                    h.streams.push(Stream {
                        id,
                        status: 0,
                        headers: false,
                        body_len: 0,
                        mismatch: false,
                        unacked: 0,
                    });
                }
                c.unsent -= k as u32;
            }
        }
        if h.out.is_empty() {
            return false;
        }
        c.writing = 1;
        c.woff = 0;
        true
    }

    /// Parse bytes received on h2c connection `i`; false when the connection was closed.
    pub(super) fn h2_process(&mut self, i: usize, data: &[u8], now: u64) -> bool {
        let mut off = 0;
        while off < data.len() {
            let Some(h) = self.conns[i].h2.as_mut() else {
                return false;
            };
            let step = match h.parser.step(&data[off..]) {
                Ok(s) => s,
                Err((class, msg)) => {
                    self.fail(i, class, msg, now);
                    return false;
                }
            };
            off += step.consumed;
            if let Some(ev) = step.event {
                if !self.h2_event(i, ev, now) {
                    return false;
                }
            }
        }
        true
    }

    fn h2_event(&mut self, i: usize, ev: Event<'_>, now: u64) -> bool {
        let expect = self.plan.expect_body.as_deref();
        let expect_len = expect.map(|e| e.len() as u64);
        let Some(h) = self.conns[i].h2.as_mut() else {
            return false;
        };
        match ev {
            Event::Settings { max_streams } => {
                h2::settings_ack(&mut h.pending);
                if let Some(m) = max_streams {
                    h.peer_max = m;
                }
            }
            Event::Ping { opaque } => h2::ping_ack(&mut h.pending, &opaque),
            Event::Headers {
                stream,
                status,
                end_stream,
            } => {
                let Some(k) = h.streams.iter().position(|s| s.id == stream) else {
                    return true; // a stream we no longer wait for
                };
                let s = &mut h.streams[k];
                if !s.headers && status >= 200 {
                    s.status = status;
                    s.headers = true;
                } else if !s.headers && (status == 0 || end_stream) {
                    let msg = format!("stream {stream} ended without a final :status");
                    self.fail(i, ErrorClass::H2ProtocolError, msg, now);
                    return false;
                }
                // Otherwise an interim 1xx response (skipped) or trailers.
                if end_stream {
                    return self.h2_complete(i, k, expect_len, now);
                }
            }
            Event::Data {
                stream,
                body,
                flow,
                end_stream,
            } => {
                h.unacked += flow;
                if h.unacked >= UPDATE_AT {
                    h2::window_update(&mut h.pending, 0, h.unacked);
                    h.unacked = 0;
                }
                let Some(k) = h.streams.iter().position(|s| s.id == stream) else {
                    return true;
                };
                let s = &mut h.streams[k];
                if !s.headers {
                    let msg = format!("DATA before the response headers on stream {stream}");
                    self.fail(i, ErrorClass::H2ProtocolError, msg, now);
                    return false;
                }
                if let Some(exp) = expect {
                    s.mismatch |= body_differs(exp, s.body_len, body);
                }
                s.body_len += body.len() as u64;
                if end_stream {
                    return self.h2_complete(i, k, expect_len, now);
                }
                s.unacked += flow;
                if s.unacked >= UPDATE_AT {
                    h2::window_update(&mut h.pending, stream, s.unacked);
                    s.unacked = 0;
                }
            }
            Event::Reset { stream, code } => {
                let Some(k) = h.streams.iter().position(|s| s.id == stream) else {
                    return true;
                };
                h.streams.swap_remove(k);
                let slot = self.h2_forget(i, stream);
                if let (Some(m), Some(s)) = (&self.plan.mix, slot) {
                    let ep = m.entries[s.entry as usize].endpoint as usize;
                    self.tally.endpoints[ep].errors[ErrorClass::H2StreamReset as usize] += 1;
                }
                let name = h2::error_code_name(code);
                self.record_error(ErrorClass::H2StreamReset, 1, now, || {
                    format!("server reset the stream: RST_STREAM {name} (0x{code:x})")
                });
                return self.h2_next(i, now);
            }
            Event::GoAway { last, code, debug } => {
                return self.h2_goaway(i, last, code, debug, now)
            }
        }
        true
    }

    /// Drop the request of `stream` from connection `i`'s in-flight list.
    fn h2_forget(&mut self, i: usize, stream: u32) -> Option<Slot> {
        let c = &mut self.conns[i];
        let pos = c.inflight.iter().position(|s| s.stream == stream)?;
        self.inflight_total -= 1;
        c.inflight.remove(pos)
    }

    /// Stream number `k` of connection `i` ended: its response is complete.
    fn h2_complete(&mut self, i: usize, k: usize, expect_len: Option<u64>, now: u64) -> bool {
        let Some(h) = self.conns[i].h2.as_mut() else {
            return false;
        };
        let s = h.streams.swap_remove(k);
        let mismatch = s.mismatch || expect_len.is_some_and(|n| s.body_len != n);
        let Some(slot) = self.h2_forget(i, s.id) else {
            return true;
        };
        self.conns[i].reqs += 1;
        self.record_response(slot, s.status, mismatch, now);
        self.h2_next(i, now)
    }

    /// A stream of connection `i` ended: reopen a draining connection once it is idle, else
    /// give the stream to the next request.
    fn h2_next(&mut self, i: usize, now: u64) -> bool {
        let c = &self.conns[i];
        if c.h2.as_ref().is_some_and(|h| h.draining) {
            if c.written() == 0 {
                self.close_conn(i);
                self.reopen(i, now);
                return false;
            }
            return true;
        }
        if self.open {
            self.conn_idle(i, now);
        } else {
            self.fill(i);
        }
        true
    }

    /// The server sent GOAWAY. With an error code, the requests in flight failed; without
    /// one (a graceful close, e.g. nginx's http2_max_requests), streams above `last` were not
    /// processed and are sent again on a new connection once the others are done.
    fn h2_goaway(&mut self, i: usize, last: u32, code: u32, debug: String, now: u64) -> bool {
        if code != 0 {
            let name = h2::error_code_name(code);
            let msg =
                format!("server sent GOAWAY {name} (0x{code:x}), last stream {last}: {debug:?}");
            self.fail(i, ErrorClass::H2Goaway, msg, now);
            return false;
        }
        let open = self.open;
        let c = &mut self.conns[i];
        let Some(h) = c.h2.as_mut() else {
            return false;
        };
        h.draining = true;
        h.streams.retain(|s| s.id <= last);
        let written = c.written();
        // Streams were opened in `inflight` order: the unprocessed ones are the last written.
        let again = c
            .inflight
            .range(..written)
            .filter(|s| s.stream > last)
            .count();
        for s in c.inflight.range_mut(written - again..written) {
            *s = Slot {
                intended: if open { s.intended } else { 0 },
                sent: 0,
                stream: 0,
                entry: s.entry,
            };
        }
        c.unsent += again as u32;
        self.tally.pipeline_resent += again as u64;
        if c.written() == 0 {
            self.close_conn(i);
            self.reopen(i, now);
            return false;
        }
        true
    }
}
