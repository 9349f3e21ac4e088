//! One fault client connection: a small state machine driven by readiness events and its
//! own timers (trickling a request, reading slowly, resetting, lingering for a smuggled
//! answer), deciding when the attempt has ended and how.

use super::requests::{initial, trickle_piece};
use super::response::Scanner;
use super::sock::is_reset;
use super::{FaultKind, FaultSpec, FaultTarget, Outcome};
use crate::ws::{accept_for, Handshake, HandshakeFeed, KEY};
use std::io::{self, Read, Write};
use std::net::Shutdown;
use std::time::{Duration, Instant};

/// After a smuggling attempt's first response, wait this long for the hidden one.
const SMUGGLE_LINGER: Duration = Duration::from_millis(1000);
/// Reset-mid-request: pause between the partial head and the reset.
const RESET_DELAY: Duration = Duration::from_millis(20);
/// Most bytes read from one connection per readiness event (fairness between connections).
const READ_BUDGET: usize = 256 * 1024;
/// Request bytes kept for findings.
const REQUEST_EXCERPT: usize = 300;

/// What every connection of one fault kind is opened with: the kind's settings and the
/// request target it points at.
pub(super) struct KindSettings {
    pub(super) spec: FaultSpec,
    pub(super) host: String,
    pub(super) path: String,
    pub(super) interval: Duration,
    pub(super) timeout: Duration,
}

impl KindSettings {
    pub(super) fn new(spec: &FaultSpec, target: &FaultTarget) -> Self {
        KindSettings {
            spec: spec.clone(),
            host: target.host.clone(),
            path: spec.path.clone().unwrap_or_else(|| target.path.clone()),
            interval: spec.interval(),
            timeout: spec.timeout(),
        }
    }
}

enum Phase {
    Connecting,
    Open,
}

/// One attempt's connection and where it stands.
pub(super) struct Conn {
    pub(super) spec: usize,
    pub(super) kind: FaultKind,
    pub(super) stream: mio::net::TcpStream,
    phase: Phase,
    pub(super) connected: Option<Instant>,
    out: Vec<u8>,
    out_pos: usize,
    pub(super) request: Vec<u8>,
    trickle_n: u64,
    next_trickle: Option<Instant>,
    next_read: Option<Instant>,
    read_bytes: usize,
    deadline: Option<Instant>,
    reset_at: Option<Instant>,
    linger_until: Option<Instant>,
    write_closed: bool,
    pub(super) scanner: Scanner,
    pub(super) bytes_in: u64,
    pub(super) bytes_out: u64,
    /// First transport error on this connection.
    pub(super) error: Option<String>,
    /// ws-no-read: the upgrade's answer while it is awaited (None once upgraded, or for
    /// other kinds), and whether the upgrade succeeded.
    ws_answer: Option<Box<Handshake>>,
    ws_up: bool,
}

/// What a step of a connection decided.
pub(super) enum Step {
    Continue,
    Finish(Outcome),
    /// Reset the connection on purpose (SO_LINGER 0).
    Abort,
}

impl Conn {
    /// A connection to `stream` (connect in progress) for an attempt of spec `spec`,
    /// given up at `deadline` unless it connects.
    pub(super) fn new(
        spec: usize,
        kind: FaultKind,
        stream: mio::net::TcpStream,
        deadline: Instant,
    ) -> Conn {
        Conn {
            spec,
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
            deadline: Some(deadline),
            reset_at: None,
            linger_until: None,
            write_closed: false,
            scanner: Scanner::new(),
            bytes_in: 0,
            bytes_out: 0,
            error: None,
            ws_answer: (kind == FaultKind::WsNoRead).then(|| Box::new(Handshake::new())),
            ws_up: false,
        }
    }

    pub(super) fn earliest_timer(&self) -> Option<Instant> {
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

    fn on_connected(&mut self, st: &KindSettings, now: Instant) -> Step {
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
            // The upgrade's answer must come within the timeout; then messages, no reads.
            FaultKind::WsNoRead => self.deadline = Some(now + st.timeout),
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
                if self.ws_up {
                    // A client that never reads learns of the server's close from a write:
                    // what the server sent is echoes, not an answer.
                    self.error.get_or_insert_with(|| format!("write: {e}"));
                    return Step::Finish(if is_reset(&e) {
                        Outcome::ResetByServer
                    } else {
                        Outcome::ClosedByServer
                    });
                }
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

    pub(super) fn on_ready(
        &mut self,
        st: &KindSettings,
        readable: bool,
        writable: bool,
        now: Instant,
    ) -> Step {
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
        if readable && self.ws_answer.is_some() {
            return self.read_ws_answer(now);
        }
        if readable && self.kind != FaultKind::SlowReader && !self.ws_up {
            let (eof, err) = self.read_some(READ_BUDGET);
            return self.after_read(eof, err, now);
        }
        Step::Continue
    }

    /// ws-no-read: read the answer to the upgrade (and nothing after it). A 101 with the
    /// right accept starts the messages; any other answer ends the attempt with its status.
    fn read_ws_answer(&mut self, now: Instant) -> Step {
        let mut buf = [0u8; 4096];
        loop {
            let n = match self.stream.read(&mut buf) {
                Ok(0) => return Step::Finish(self.ended_by_server(false)),
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Step::Continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return self.after_read(false, Some(e), now),
            };
            self.bytes_in += n as u64;
            self.scanner.feed(&buf[..n]);
            let Some(h) = self.ws_answer.as_mut() else {
                return Step::Continue;
            };
            match h.feed(&buf[..n], &accept_for(KEY)) {
                Ok(HandshakeFeed::NeedMore) => {}
                Ok(HandshakeFeed::Done { .. }) => {
                    // Upgraded: from here on the client never reads.
                    self.ws_answer = None;
                    self.ws_up = true;
                    self.deadline = None;
                    self.next_trickle = Some(now);
                    return Step::Continue;
                }
                Err((_, msg)) => {
                    self.error.get_or_insert(msg);
                    return Step::Finish(Outcome::Response(
                        self.scanner.first_status.unwrap_or(101),
                    ));
                }
            }
        }
    }

    fn connect_failed(&mut self, e: io::Error) -> Step {
        self.error.get_or_insert_with(|| format!("connect: {e}"));
        Step::Finish(Outcome::ConnectFailed)
    }

    pub(super) fn on_timer(&mut self, st: &KindSettings, now: Instant) -> Step {
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
