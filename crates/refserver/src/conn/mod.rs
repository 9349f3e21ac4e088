//! One connection's state machine: requests parsed ahead of their responses (pipelining),
//! the output buffer, and the stream in progress (a large body, a drip, a stall, a close).
//! `Conn::pump` writes due responses in order; nothing ever sleeps.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use mio::net::TcpStream;

use crate::context::Env;
use crate::http::{push_hex, push_u64, PATTERN, PATTERN_PERIOD};
use crate::stats::C;

mod modes;
mod request;
mod response;

use modes::ENDLESS_BATCH;
pub(crate) use modes::HUGE_BODY;
pub(crate) use request::Parse;
#[cfg(test)]
pub(crate) use request::MAX_CHUNK_LINE;
use response::{Pending, Plan};

/// Requests parsed ahead of their responses (pipelining) before we stop reading.
pub(crate) const MAX_PENDING: usize = 128;
/// Output buffered per connection before we stop producing more.
const MAX_OUT: usize = 64 * 1024;
/// How long a closing connection may keep sending us bytes we discard.
const LINGER: Duration = Duration::from_secs(2);

/// The output stream in progress, after `wbuf` is flushed.
pub(crate) enum Active {
    None,
    Pattern {
        remaining: u64,
        phase: usize,
        chunked: bool,
    },
    Drip {
        data: Box<[u8]>,
        pos: usize,
        interval: Duration,
        next: Instant,
    },
    Endless {
        interval: Duration,
        next: Instant,
        n: u64,
    },
    /// `no-response`: answer nothing, ever.
    Hang,
    /// Close cleanly (FIN) once the output is flushed.
    Close,
    /// Close with `SO_LINGER 0` (RST).
    Reset,
    /// Write side shut down; input is discarded until EOF or the deadline.
    Lingering {
        deadline: Instant,
    },
}

/// One accepted connection and where it stands.
pub(crate) struct Conn {
    pub sock: TcpStream,
    pub idx: usize,
    pub rbuf: Vec<u8>,
    pub parse: Parse,
    /// When the current (incomplete) request's first byte arrived.
    pub req_started: Option<Instant>,
    pub last_active: Instant,
    pub last_write: Instant,
    pub pending: VecDeque<Pending>,
    pub wbuf: Vec<u8>,
    pub wpos: usize,
    pub active: Active,
    pub close_after: bool,
    pub wake_at: Option<Instant>,
    pub read_closed: bool,
    /// The socket may hold unread bytes (we did not see WouldBlock or a short read).
    pub read_more: bool,
    /// The last write hit WouldBlock: wait for a writable event.
    pub want_write: bool,
    /// epoll reported the peer's FIN: read to EOF even after a short read.
    pub peer_fin: bool,
}

impl Conn {
    pub fn new(sock: TcpStream, idx: usize, now: Instant) -> Conn {
        Conn {
            sock,
            idx,
            rbuf: Vec::new(),
            parse: Parse::Head,
            req_started: None,
            last_active: now,
            last_write: now,
            pending: VecDeque::new(),
            wbuf: Vec::new(),
            wpos: 0,
            active: Active::None,
            close_after: false,
            wake_at: None,
            read_closed: false,
            read_more: true,
            want_write: false,
            peer_fin: false,
        }
    }

    /// Registers a wake-up of this connection at `t` unless an earlier one is registered.
    fn set_wake(&mut self, env: &mut Env, t: Instant) {
        env.wake_at(&mut self.wake_at, self.idx, t);
    }

    pub fn input_paused(&self) -> bool {
        self.pending.len() >= MAX_PENDING || self.wbuf.len() - self.wpos >= MAX_OUT
    }

    /// Answers with an error status and closes the connection after it.
    pub fn fail(&mut self, env: &mut Env, status: u16, msg: String, now: Instant) {
        match status {
            431 => env.stats.add(C::HeadersTooLarge, 1),
            400 => env.stats.add(C::BadRequests, 1),
            _ => {}
        }
        env.stats.add_status(status);
        self.parse = Parse::Done;
        self.req_started = None;
        self.pending.push_back(Pending {
            due: now,
            plan: Plan::Error { status, msg },
            delayed: false,
        });
    }

    /// Writes whatever is due. Returns false when the connection must be dropped now.
    pub fn pump(&mut self, env: &mut Env, now: Instant) -> bool {
        loop {
            // 1. Materialise due responses, in order, while no stream is in progress.
            while matches!(self.active, Active::None) && self.wbuf.len() - self.wpos < MAX_OUT {
                let Some(front) = self.pending.front() else {
                    break;
                };
                if front.due > now {
                    let due = front.due;
                    self.set_wake(env, due);
                    break;
                }
                if !matches!(front.plan, Plan::Stats { .. }) {
                    if let Some(end) = env.shared.stall_end(now) {
                        self.set_wake(env, end);
                        break;
                    }
                }
                let p = self.pending.pop_front().expect("front exists");
                if p.delayed {
                    let late = now.saturating_duration_since(p.due).as_nanos() as u64;
                    env.stats.add(C::DelayedResponses, 1);
                    env.stats.add(C::DelayLateNs, late);
                    env.stats.max(C::DelayLateMaxNs, late);
                }
                if self.wpos >= self.wbuf.len() {
                    self.last_write = now;
                }
                // The idle clock restarts when a response goes out, not when it was asked.
                self.last_active = now;
                self.materialize(env, p.plan, now);
            }
            // 2. Flush the buffer.
            if self.wpos < self.wbuf.len() {
                if self.want_write {
                    return true;
                }
                match self.sock.write(&self.wbuf[self.wpos..]) {
                    Ok(0) => return false,
                    Ok(n) => {
                        env.stats.add(C::BytesWritten, n as u64);
                        self.last_write = now;
                        self.wpos += n;
                        if self.wpos == self.wbuf.len() {
                            self.wbuf.clear();
                            self.wpos = 0;
                            if self.wbuf.capacity() > 64 * 1024 {
                                self.wbuf = Vec::new();
                            }
                        }
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.want_write = true;
                        return true;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => return false,
                }
            }
            // 3. The buffer is empty: advance the stream in progress.
            match &mut self.active {
                Active::None => {
                    let ready = self.pending.front().is_some_and(|p| {
                        p.due <= now
                            && (matches!(p.plan, Plan::Stats { .. })
                                || env.shared.stall_end(now).is_none())
                    });
                    if ready {
                        continue;
                    }
                    if self.close_after && self.pending.is_empty() {
                        self.active = Active::Close;
                        continue;
                    }
                    return true;
                }
                Active::Pattern {
                    remaining,
                    phase,
                    chunked,
                } => {
                    if let Some(end) = env.shared.stall_end(now) {
                        self.set_wake(env, end);
                        return true;
                    }
                    if *chunked {
                        let n = (*remaining).min(16 * 1024) as usize;
                        push_hex(&mut self.wbuf, n as u64);
                        self.wbuf.extend_from_slice(b"\r\n");
                        self.wbuf.extend_from_slice(&PATTERN[*phase..*phase + n]);
                        self.wbuf.extend_from_slice(b"\r\n");
                        *remaining -= n as u64;
                        *phase = (*phase + n) % PATTERN_PERIOD;
                        if *remaining == 0 {
                            self.wbuf.extend_from_slice(b"0\r\n\r\n");
                            self.active = Active::None;
                        }
                        continue;
                    }
                    if self.want_write {
                        return true;
                    }
                    let n = (*remaining).min(64 * 1024) as usize;
                    match self.sock.write(&PATTERN[*phase..*phase + n]) {
                        Ok(0) => return false,
                        Ok(w) => {
                            env.stats.add(C::BytesWritten, w as u64);
                            self.last_write = now;
                            *remaining -= w as u64;
                            *phase = (*phase + w) % PATTERN_PERIOD;
                            if *remaining == 0 {
                                self.active = Active::None;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            self.want_write = true;
                            return true;
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
                Active::Drip {
                    data,
                    pos,
                    interval,
                    next,
                } => {
                    if env.hold(&mut self.wake_at, self.idx, now, *next) {
                        return true;
                    }
                    self.wbuf.push(data[*pos]);
                    *pos += 1;
                    *next = now + *interval;
                    if *pos == data.len() {
                        self.active = Active::None;
                    }
                }
                Active::Endless { interval, next, n } => {
                    if env.hold(&mut self.wake_at, self.idx, now, *next) {
                        return true;
                    }
                    while self.wbuf.len() < ENDLESS_BATCH {
                        self.wbuf.extend_from_slice(b"X-Endless-");
                        push_u64(&mut self.wbuf, *n);
                        self.wbuf.extend_from_slice(b": ");
                        self.wbuf.extend_from_slice(&PATTERN[..48]);
                        self.wbuf.extend_from_slice(b"\r\n");
                        *n += 1;
                    }
                    *next = now + *interval;
                }
                Active::Hang => return true,
                Active::Close => {
                    let _ = self.sock.shutdown(Shutdown::Write);
                    self.active = Active::Lingering {
                        deadline: now + LINGER,
                    };
                    self.parse = Parse::Done;
                    self.pending.clear();
                    self.req_started = None;
                    self.read_more = true;
                    return true;
                }
                Active::Reset => {
                    let l = libc::linger {
                        l_onoff: 1,
                        l_linger: 0,
                    };
                    // SAFETY: a valid socket fd and a correctly sized linger struct.
                    unsafe {
                        libc::setsockopt(
                            self.sock.as_raw_fd(),
                            libc::SOL_SOCKET,
                            libc::SO_LINGER,
                            (&l as *const libc::linger).cast(),
                            std::mem::size_of::<libc::linger>() as libc::socklen_t,
                        );
                    }
                    return false;
                }
                Active::Lingering { .. } => return true,
            }
        }
    }

    /// Whether the connection has nothing left to do (so it can be dropped).
    pub fn finished(&self) -> bool {
        if !self.read_closed {
            return false;
        }
        match self.active {
            Active::Lingering { .. } | Active::Hang => true,
            Active::None => self.pending.is_empty() && self.wpos >= self.wbuf.len(),
            _ => false,
        }
    }

    pub fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len()
            || matches!(self.active, Active::Pattern { .. } | Active::Endless { .. })
    }
}
