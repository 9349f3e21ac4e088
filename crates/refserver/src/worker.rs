//! One event-loop thread: a mio poll with its own `SO_REUSEPORT` listener, a timerfd for
//! precise timers (delays, drip pacing, stall ends), and a coarse sweep for timeouts.
//!
//! Every connection is a small state machine: bytes in are parsed into requests
//! (`Conn::feed`), each request becomes a `Pending` response with a due time, and
//! `Conn::pump` writes due responses in order (pipelining), stalls, streams and
//! misbehaviours. Nothing ever sleeps in the loop.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::mem::MaybeUninit;
use std::net::Shutdown;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use serde_json::{json, Map};

use crate::config::{Mode, Settings};
use crate::http::{
    bodiless, push_hex, push_u64, route, write_head, DateCache, Head, Params, Route, HELLO,
    MAX_HEAD, MAX_HEADERS, PATTERN, PATTERN_PERIOD, SERVER_NAME,
};
use crate::stats::{snapshot, ThreadStats, C};

pub(crate) const LISTENER: Token = Token(usize::MAX - 1);
pub(crate) const WAKER: Token = Token(usize::MAX - 2);
pub(crate) const TIMER: Token = Token(usize::MAX - 3);

/// Requests parsed ahead of their responses (pipelining) before we stop reading.
const MAX_PENDING: usize = 128;
/// Output buffered per connection before we stop producing more.
const MAX_OUT: usize = 64 * 1024;
/// How long a closing connection may keep sending us bytes we discard.
const LINGER: Duration = Duration::from_secs(2);
const READ_BUF: usize = 64 * 1024;
/// Longest chunk-size line accepted in a chunked request body.
const MAX_CHUNK_LINE: usize = 4096;
/// `Content-Length` of the `huge-body` misbehaviour (10 GB).
pub(crate) const HUGE_BODY: u64 = 10_000_000_000;
/// Bytes of header lines sent per tick in `endless-headers`.
const ENDLESS_BATCH: usize = 4096;

/// State shared by every thread of one server.
pub(crate) struct Shared {
    pub settings: Settings,
    pub start: Instant,
    pub stop: AtomicBool,
    pub stats: Vec<Arc<ThreadStats>>,
    pub open: AtomicUsize,
    pub port: u16,
}

impl Shared {
    /// End of the stall window `now` falls in, if any. Stalls start at every multiple of
    /// `stall_every` after start (the first one at `stall_every`) and last `stall`.
    #[inline]
    pub fn stall_end(&self, now: Instant) -> Option<Instant> {
        let s = &self.settings;
        if s.stall.is_zero() {
            return None;
        }
        let t = now.saturating_duration_since(self.start).as_nanos() as u64;
        let p = s.stall_every.as_nanos() as u64;
        let k = t / p;
        let st = s.stall.as_nanos() as u64;
        if k >= 1 && t - k * p < st {
            Some(self.start + Duration::from_nanos(k * p + st))
        } else {
            None
        }
    }

    /// The `/__stats` document.
    pub fn stats_json(&self) -> serde_json::Value {
        let mut extra = Map::new();
        extra.insert("port".into(), json!(self.port));
        extra.insert("threads".into(), json!(self.settings.threads));
        extra.insert("mode".into(), json!(self.settings.mode.name()));
        extra.insert("uptime_s".into(), json!(self.start.elapsed().as_secs_f64()));
        snapshot(&self.stats, extra)
    }
}

/// What a parsed request needs to be answered.
#[derive(Debug, Clone, Copy)]
struct Req {
    route: Route,
    params: Params,
    head: bool,
    keep_alive: bool,
    http10: bool,
    has_body: bool,
    /// `Expect: 100-continue`.
    expect_continue: bool,
}

#[derive(Debug)]
enum Parse {
    Head,
    Body {
        req: Req,
        remaining: u64,
        total: u64,
    },
    Chunked {
        req: Req,
        st: ChunkSt,
        total: u64,
        trailer: usize,
    },
    /// No more requests on this connection: input is read and discarded.
    Done,
}

#[derive(Debug, Clone, Copy)]
enum ChunkSt {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
}

#[derive(Debug)]
enum Body {
    Hello,
    Pattern(u64),
    Length(u64),
    NotFound,
    UnknownMode,
}

#[derive(Debug)]
enum Plan {
    /// `GET /hello`, HTTP/1.1, keep-alive: the cached response.
    Hello11,
    Respond {
        status: u16,
        body: Body,
        head: bool,
        close: bool,
        ka10: bool,
        chunked: bool,
    },
    Misbehave {
        mode: Mode,
        interval: Duration,
        close: bool,
        size: Option<u64>,
    },
    Stats {
        head: bool,
        close: bool,
        ka10: bool,
    },
    /// An error answer (400, 408, 431); the connection closes after it.
    Error {
        status: u16,
        msg: String,
    },
}

struct Pending {
    due: Instant,
    plan: Plan,
    /// Held back by a service delay (its lateness is recorded).
    delayed: bool,
}

/// The output stream in progress, after `wbuf` is flushed.
enum Active {
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

struct Conn {
    sock: TcpStream,
    idx: usize,
    rbuf: Vec<u8>,
    parse: Parse,
    /// When the current (incomplete) request's first byte arrived.
    req_started: Option<Instant>,
    last_active: Instant,
    last_write: Instant,
    pending: VecDeque<Pending>,
    wbuf: Vec<u8>,
    wpos: usize,
    active: Active,
    close_after: bool,
    wake_at: Option<Instant>,
    read_closed: bool,
    /// The socket may hold unread bytes (we did not see WouldBlock or a short read).
    read_more: bool,
    /// The last write hit WouldBlock: wait for a writable event.
    want_write: bool,
    /// epoll reported the peer's FIN: read to EOF even after a short read.
    peer_fin: bool,
}

/// Per-thread context the connections use.
struct Env {
    shared: Arc<Shared>,
    stats: Arc<ThreadStats>,
    date: DateCache,
    rng: u64,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    timerfd: OwnedFd,
    armed: Option<Instant>,
}

impl Env {
    fn push_timer(&mut self, t: Instant, idx: usize) {
        self.timers.push(Reverse((t, idx)));
        if self.armed.is_none_or(|a| t < a) {
            self.arm(t);
        }
    }

    fn arm(&mut self, t: Instant) {
        let d = t.saturating_duration_since(Instant::now());
        let d = if d.is_zero() {
            Duration::from_nanos(1)
        } else {
            d
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec.
        unsafe {
            libc::timerfd_settime(self.timerfd.as_raw_fd(), 0, &spec, std::ptr::null_mut());
        }
        self.armed = Some(t);
    }

    /// The service delay of one request: its shape at this moment plus uniform jitter.
    fn delay(&mut self) -> Duration {
        let s = &self.shared.settings;
        let base = s.delay_shape.at(s.delay, self.shared.start.elapsed());
        if s.jitter_ns == 0 {
            return base;
        }
        // xorshift64*
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        base + Duration::from_nanos(r % s.jitter_ns)
    }
}

fn set_wake(c: &mut Conn, env: &mut Env, t: Instant) {
    wake_at(env, &mut c.wake_at, c.idx, t);
}

/// Registers a wake-up of connection `idx` at `t` unless an earlier one is registered.
fn wake_at(env: &mut Env, wake: &mut Option<Instant>, idx: usize, t: Instant) {
    if wake.is_none_or(|w| t < w) {
        *wake = Some(t);
        env.push_timer(t, idx);
    }
}

/// Whether a paced stream must wait (a stall, or its next tick is ahead); if so the wake-up
/// is registered.
fn hold(
    env: &mut Env,
    wake: &mut Option<Instant>,
    idx: usize,
    now: Instant,
    next: Instant,
) -> bool {
    let until = match env.shared.stall_end(now) {
        Some(end) => end,
        None if now < next => next,
        None => return false,
    };
    wake_at(env, wake, idx, until);
    true
}

enum HeadResult {
    Partial,
    Complete(usize, Req, Framing),
    Error(u16, String),
}

enum Framing {
    None,
    Length(u64),
    Chunked,
}

fn parse_content_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

fn parse_head(buf: &[u8]) -> HeadResult {
    let mut headers: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut r = httparse::Request::new(&mut []);
    let n = match r.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Partial) => return HeadResult::Partial,
        Ok(httparse::Status::Complete(n)) => n,
        Err(e) => {
            let (status, what) = match e {
                httparse::Error::TooManyHeaders => (431, "more than 100 header fields"),
                httparse::Error::HeaderName => (400, "invalid byte in a header name"),
                httparse::Error::HeaderValue => (400, "invalid byte in a header value"),
                httparse::Error::NewLine => (400, "invalid line ending"),
                httparse::Error::Token => (400, "invalid request line (method or target)"),
                httparse::Error::Version => (400, "invalid HTTP version"),
                _ => (400, "malformed request"),
            };
            return HeadResult::Error(status, what.to_string());
        }
    };
    if n > MAX_HEAD {
        return HeadResult::Error(431, "request head larger than 16 KiB".into());
    }
    let (Some(method), Some(path), Some(version)) = (r.method, r.path, r.version) else {
        return HeadResult::Error(400, "malformed request line".into());
    };
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut te_seen = false;
    let mut conn_close = false;
    let mut conn_ka = false;
    let mut expect_continue = false;
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let Some(v) = parse_content_length(h.value) else {
                return HeadResult::Error(400, "invalid Content-Length".into());
            };
            if length.is_some_and(|l| l != v) {
                return HeadResult::Error(400, "conflicting Content-Length headers".into());
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if te_seen {
                return HeadResult::Error(400, "more than one Transfer-Encoding header".into());
            }
            te_seen = true;
            if !h.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return HeadResult::Error(
                    400,
                    "unsupported Transfer-Encoding (only \"chunked\" is accepted)".into(),
                );
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("expect") {
            expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        } else if h.name.eq_ignore_ascii_case("connection") {
            for tok in h.value.split(|b| *b == b',') {
                let tok = tok.trim_ascii();
                if tok.eq_ignore_ascii_case(b"close") {
                    conn_close = true;
                } else if tok.eq_ignore_ascii_case(b"keep-alive") {
                    conn_ka = true;
                }
            }
        }
    }
    if te_seen && length.is_some() {
        return HeadResult::Error(
            400,
            "both Content-Length and Transfer-Encoding (request smuggling risk)".into(),
        );
    }
    if te_seen && version == 0 {
        return HeadResult::Error(400, "Transfer-Encoding in an HTTP/1.0 request".into());
    }
    let (route, params) = match route(path) {
        Ok(x) => x,
        Err(msg) => return HeadResult::Error(400, msg),
    };
    let http10 = version == 0;
    let keep_alive = !conn_close && (!http10 || conn_ka);
    let framing = if chunked {
        Framing::Chunked
    } else {
        match length {
            Some(l) => Framing::Length(l),
            None => Framing::None,
        }
    };
    let req = Req {
        route,
        params,
        head: method == "HEAD",
        keep_alive,
        http10,
        has_body: !matches!(framing, Framing::None),
        expect_continue: expect_continue && version == 1,
    };
    HeadResult::Complete(n, req, framing)
}

impl Conn {
    fn new(sock: TcpStream, idx: usize, now: Instant) -> Conn {
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

    fn input_paused(&self) -> bool {
        self.pending.len() >= MAX_PENDING || self.wbuf.len() - self.wpos >= MAX_OUT
    }

    /// Answers with an error status and closes the connection after it.
    fn fail(&mut self, env: &mut Env, status: u16, msg: String, now: Instant) {
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

    /// Parses as many requests out of `data` as allowed; returns the bytes consumed.
    fn feed(&mut self, env: &mut Env, data: &[u8], now: Instant) -> usize {
        let mut pos = 0;
        while pos < data.len() {
            if self.pending.len() >= MAX_PENDING {
                break;
            }
            let buf = &data[pos..];
            match &mut self.parse {
                Parse::Done => return data.len(),
                Parse::Head => match parse_head(buf) {
                    HeadResult::Partial => {
                        if buf.len() > MAX_HEAD {
                            self.fail(env, 431, "request head larger than 16 KiB".into(), now);
                            return data.len();
                        }
                        break;
                    }
                    HeadResult::Error(status, msg) => {
                        self.fail(env, status, msg, now);
                        return data.len();
                    }
                    HeadResult::Complete(n, req, framing) => {
                        pos += n;
                        // Interim 100 only when nothing is ahead of it on the wire.
                        if req.expect_continue
                            && !matches!(framing, Framing::None | Framing::Length(0))
                            && self.pending.is_empty()
                            && matches!(self.active, Active::None)
                            && pos == data.len()
                        {
                            self.wbuf
                                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                        }
                        match framing {
                            Framing::None => self.dispatch(env, req, 0, now),
                            Framing::Length(0) => self.dispatch(env, req, 0, now),
                            Framing::Length(l) => {
                                self.parse = Parse::Body {
                                    req,
                                    remaining: l,
                                    total: l,
                                }
                            }
                            Framing::Chunked => {
                                self.parse = Parse::Chunked {
                                    req,
                                    st: ChunkSt::Size,
                                    total: 0,
                                    trailer: 0,
                                }
                            }
                        }
                    }
                },
                Parse::Body {
                    req,
                    remaining,
                    total,
                } => {
                    let take = (*remaining).min(buf.len() as u64);
                    pos += take as usize;
                    *remaining -= take;
                    if *remaining == 0 {
                        let (req, total) = (*req, *total);
                        self.dispatch(env, req, total, now);
                    }
                }
                Parse::Chunked {
                    req,
                    st,
                    total,
                    trailer,
                } => match *st {
                    ChunkSt::Size => {
                        let Some(nl) = buf.iter().position(|b| *b == b'\n') else {
                            if buf.len() > MAX_CHUNK_LINE {
                                self.fail(env, 400, "chunk-size line too long".into(), now);
                                return data.len();
                            }
                            break;
                        };
                        match httparse::parse_chunk_size(&buf[..=nl]) {
                            Ok(httparse::Status::Complete((used, size))) => {
                                pos += used;
                                *st = if size == 0 {
                                    ChunkSt::Trailer
                                } else {
                                    ChunkSt::Data(size)
                                };
                            }
                            _ => {
                                self.fail(
                                    env,
                                    400,
                                    "invalid chunk size in request body".into(),
                                    now,
                                );
                                return data.len();
                            }
                        }
                    }
                    ChunkSt::Data(rem) => {
                        let take = rem.min(buf.len() as u64);
                        pos += take as usize;
                        *total += take;
                        *st = if rem == take {
                            ChunkSt::DataEnd
                        } else {
                            ChunkSt::Data(rem - take)
                        };
                    }
                    ChunkSt::DataEnd => {
                        if buf.len() < 2 {
                            if buf[0] != b'\r' {
                                self.fail(env, 400, "chunk data not followed by CRLF".into(), now);
                                return data.len();
                            }
                            break;
                        }
                        if &buf[..2] != b"\r\n" {
                            self.fail(env, 400, "chunk data not followed by CRLF".into(), now);
                            return data.len();
                        }
                        pos += 2;
                        *st = ChunkSt::Size;
                    }
                    ChunkSt::Trailer => {
                        let Some(nl) = buf.iter().position(|b| *b == b'\n') else {
                            if buf.len() + *trailer > MAX_HEAD {
                                self.fail(
                                    env,
                                    431,
                                    "chunked trailer larger than 16 KiB".into(),
                                    now,
                                );
                                return data.len();
                            }
                            break;
                        };
                        pos += nl + 1;
                        if nl == 0 || (nl == 1 && buf[0] == b'\r') {
                            let (req, total) = (*req, *total);
                            self.dispatch(env, req, total, now);
                        } else {
                            *trailer += nl + 1;
                            if *trailer > MAX_HEAD {
                                self.fail(
                                    env,
                                    431,
                                    "chunked trailer larger than 16 KiB".into(),
                                    now,
                                );
                                return data.len();
                            }
                        }
                    }
                },
            }
        }
        pos
    }

    /// Turns a complete request into a pending response.
    fn dispatch(&mut self, env: &mut Env, req: Req, body_len: u64, now: Instant) {
        self.req_started = None;
        self.parse = if req.keep_alive {
            Parse::Head
        } else {
            Parse::Done
        };
        if req.has_body {
            env.stats.add(C::RequestBodies, 1);
            env.stats.add(C::RequestBodyBytes, body_len);
        }
        let close = !req.keep_alive;
        let ka10 = req.http10 && req.keep_alive;
        if req.route == Route::Stats {
            env.stats.add(C::StatsRequests, 1);
            self.pending.push_back(Pending {
                due: now,
                plan: Plan::Stats {
                    head: req.head,
                    close,
                    ka10,
                },
                delayed: false,
            });
            return;
        }
        env.stats.add(C::Requests, 1);
        let mode = match req.route {
            Route::Misbehave(m) => m,
            Route::UnknownMode => Mode::Normal,
            _ => env.shared.settings.mode,
        };
        env.stats.add_mode(mode);
        let delay = match req.params.delay_ns {
            Some(ns) => Duration::from_nanos(ns),
            None => env.delay(),
        };
        let plan = match mode {
            Mode::Normal | Mode::Chunked => {
                let (status, body) = match req.route {
                    Route::NotFound => (404, Body::NotFound),
                    Route::UnknownMode => (404, Body::UnknownMode),
                    _ => (
                        req.params.status.unwrap_or(200),
                        match req.params.size {
                            Some(n) => Body::Pattern(n),
                            None if req.has_body => Body::Length(body_len),
                            None => Body::Hello,
                        },
                    ),
                };
                env.stats.add_status(status);
                if status == 200
                    && matches!(body, Body::Hello)
                    && mode == Mode::Normal
                    && !req.head
                    && !close
                    && !req.http10
                {
                    Plan::Hello11
                } else {
                    Plan::Respond {
                        status,
                        body,
                        head: req.head,
                        close,
                        ka10,
                        chunked: mode == Mode::Chunked,
                    }
                }
            }
            m => Plan::Misbehave {
                mode: m,
                interval: req
                    .params
                    .interval_ns
                    .map_or(env.shared.settings.drip_interval, Duration::from_nanos),
                close,
                size: req.params.size,
            },
        };
        self.pending.push_back(Pending {
            due: now + delay,
            plan,
            delayed: !delay.is_zero(),
        });
    }

    /// Writes a due response into `wbuf` (and sets up any stream that follows it).
    fn materialize(&mut self, env: &mut Env, plan: Plan, now: Instant) {
        let date = env.date.date;
        let out = &mut self.wbuf;
        match plan {
            Plan::Hello11 => out.extend_from_slice(&env.date.hello),
            Plan::Respond {
                status,
                body,
                head,
                close,
                ka10,
                chunked,
            } => {
                let digits;
                let modes;
                let inline: Option<&[u8]> = match body {
                    Body::Hello => Some(HELLO),
                    Body::NotFound => Some(b"Not Found\n"),
                    Body::UnknownMode => {
                        modes = format!(
                            "unknown misbehaviour mode; known: {}\n",
                            Mode::ALL.map(Mode::name).join(", ")
                        );
                        Some(modes.as_bytes())
                    }
                    Body::Length(n) => {
                        let mut d = Vec::with_capacity(20);
                        push_u64(&mut d, n);
                        digits = d;
                        Some(&digits)
                    }
                    Body::Pattern(n) if n <= 16 * 1024 => Some(&PATTERN[..n as usize]),
                    Body::Pattern(_) => None,
                };
                let length = match (&body, inline) {
                    (_, Some(b)) => b.len() as u64,
                    (Body::Pattern(n), None) => *n,
                    _ => 0,
                };
                let no_body = bodiless(status);
                write_head(
                    out,
                    &date,
                    &Head {
                        status,
                        content_type: if no_body { None } else { Some("text/plain") },
                        length: if no_body { None } else { Some(length) },
                        chunked: chunked && !no_body,
                        close,
                        keep_alive_10: ka10,
                    },
                );
                if !head && !no_body {
                    match (inline, chunked) {
                        (Some(b), false) => out.extend_from_slice(b),
                        (Some(b), true) => {
                            if b == HELLO {
                                out.extend_from_slice(b"7\r\nHello, \r\n6\r\nWorld!\r\n0\r\n\r\n");
                            } else {
                                if !b.is_empty() {
                                    push_hex(out, b.len() as u64);
                                    out.extend_from_slice(b"\r\n");
                                    out.extend_from_slice(b);
                                    out.extend_from_slice(b"\r\n");
                                }
                                out.extend_from_slice(b"0\r\n\r\n");
                            }
                        }
                        (None, chunked) => {
                            self.active = Active::Pattern {
                                remaining: length,
                                phase: 0,
                                chunked,
                            }
                        }
                    }
                }
                self.close_after |= close;
            }
            Plan::Stats { head, close, ka10 } => {
                let body = serde_json::to_vec(&env.shared.stats_json()).unwrap_or_default();
                write_head(
                    out,
                    &date,
                    &Head {
                        status: 200,
                        content_type: Some("application/json"),
                        length: Some(body.len() as u64),
                        close,
                        keep_alive_10: ka10,
                        ..Head::default()
                    },
                );
                if !head {
                    out.extend_from_slice(&body);
                }
                self.close_after |= close;
            }
            Plan::Error { status, mut msg } => {
                msg.push('\n');
                write_head(
                    out,
                    &date,
                    &Head {
                        status,
                        content_type: Some("text/plain"),
                        length: Some(msg.len() as u64),
                        close: true,
                        ..Head::default()
                    },
                );
                out.extend_from_slice(msg.as_bytes());
                self.close_after = true;
            }
            Plan::Misbehave {
                mode,
                interval,
                close,
                size,
            } => {
                self.misbehave(env, mode, interval, close, size, now);
            }
        }
    }

    fn misbehave(
        &mut self,
        env: &mut Env,
        mode: Mode,
        interval: Duration,
        close: bool,
        size: Option<u64>,
        now: Instant,
    ) {
        let date = env.date.date;
        let out = &mut self.wbuf;
        let plain = |status, length, close| Head {
            status,
            content_type: Some("text/plain"),
            length,
            close,
            ..Head::default()
        };
        match mode {
            Mode::Normal | Mode::Chunked => {}
            Mode::CloseMidResponse => {
                let total = size.unwrap_or(1000).max(2);
                write_head(out, &date, &plain(200, Some(total), false));
                let part = (total / 2).min(64 * 1024) as usize;
                out.extend_from_slice(&PATTERN[..part]);
                self.active = Active::Close;
            }
            Mode::GarbageStatus => {
                out.extend_from_slice(b"HTTP/1.1 TWO-HUNDRED OK\r\nServer: ");
                out.extend_from_slice(SERVER_NAME.as_bytes());
                out.extend_from_slice(b"\r\nContent-Length: 13\r\n\r\nHello, World!");
                self.active = Active::Close;
            }
            Mode::EndlessHeaders => {
                out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: ");
                out.extend_from_slice(SERVER_NAME.as_bytes());
                out.extend_from_slice(b"\r\nDate: ");
                out.extend_from_slice(&date);
                out.extend_from_slice(b"\r\n");
                self.active = Active::Endless {
                    interval,
                    next: now,
                    n: 0,
                };
            }
            Mode::HugeBody => {
                write_head(
                    out,
                    &date,
                    &Head {
                        content_type: Some("application/octet-stream"),
                        ..plain(200, Some(HUGE_BODY), close)
                    },
                );
                self.active = Active::Pattern {
                    remaining: HUGE_BODY,
                    phase: 0,
                    chunked: false,
                };
                self.close_after |= close;
            }
            Mode::Drip => {
                let mut data = Vec::with_capacity(192);
                write_head(
                    &mut data,
                    &date,
                    &plain(200, Some(HELLO.len() as u64), close),
                );
                data.extend_from_slice(HELLO);
                self.active = Active::Drip {
                    data: data.into_boxed_slice(),
                    pos: 0,
                    interval,
                    next: now,
                };
                self.close_after |= close;
            }
            Mode::Reset => self.active = Active::Reset,
            Mode::BadChunked => {
                write_head(
                    out,
                    &date,
                    &Head {
                        chunked: true,
                        ..plain(200, None, false)
                    },
                );
                out.extend_from_slice(b"zz\r\nHello, World!\r\n0\r\n\r\n");
                self.active = Active::Close;
            }
            Mode::NoResponse => {
                self.active = Active::Hang;
                self.parse = Parse::Done;
                self.req_started = None;
            }
            Mode::CloseBeforeResponse => self.active = Active::Close,
        }
    }

    /// Writes whatever is due. Returns false when the connection must be dropped now.
    fn pump(&mut self, env: &mut Env, now: Instant) -> bool {
        loop {
            // 1. Materialise due responses, in order, while no stream is in progress.
            while matches!(self.active, Active::None) && self.wbuf.len() - self.wpos < MAX_OUT {
                let Some(front) = self.pending.front() else {
                    break;
                };
                if front.due > now {
                    let due = front.due;
                    set_wake(self, env, due);
                    break;
                }
                if !matches!(front.plan, Plan::Stats { .. }) {
                    if let Some(end) = env.shared.stall_end(now) {
                        set_wake(self, env, end);
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
                        set_wake(self, env, end);
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
                    if hold(env, &mut self.wake_at, self.idx, now, *next) {
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
                    if hold(env, &mut self.wake_at, self.idx, now, *next) {
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
    fn finished(&self) -> bool {
        if !self.read_closed {
            return false;
        }
        match self.active {
            Active::Lingering { .. } | Active::Hang => true,
            Active::None => self.pending.is_empty() && self.wpos >= self.wbuf.len(),
            _ => false,
        }
    }

    fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len()
            || matches!(self.active, Active::Pattern { .. } | Active::Endless { .. })
    }
}

/// What the sweep decided for a connection.
enum Verdict {
    Keep,
    Step,
    Drop,
}

pub(crate) struct Worker {
    pub id: usize,
    poll: Poll,
    listener: TcpListener,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    scratch: Box<[u8]>,
    env: Env,
    accept_paused: Option<Instant>,
    sweep_every: Duration,
    next_sweep: Instant,
}

fn timerfd() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall; the fd is owned right after.
    let fd = unsafe {
        libc::timerfd_create(
            libc::CLOCK_MONOTONIC,
            libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Worker {
    /// Sets up a worker around a bound listener; registers it, its waker and its timer.
    pub fn new(
        id: usize,
        shared: Arc<Shared>,
        listener: std::net::TcpListener,
        poll: Poll,
    ) -> io::Result<Worker> {
        let mut listener = TcpListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        let tfd = timerfd()?;
        poll.registry()
            .register(&mut SourceFd(&tfd.as_raw_fd()), TIMER, Interest::READABLE)?;
        let s = &shared.settings;
        let mut shortest = s.header_timeout.min(s.body_timeout).min(s.write_timeout);
        if let Some(i) = s.idle_timeout {
            shortest = shortest.min(i);
        }
        let sweep_every =
            (shortest / 10).clamp(Duration::from_millis(5), Duration::from_millis(100));
        let seed = if s.seed != 0 {
            s.seed
        } else {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        };
        let stats = shared.stats[id].clone();
        let now = Instant::now();
        Ok(Worker {
            id,
            poll,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            scratch: vec![0u8; READ_BUF].into_boxed_slice(),
            env: Env {
                shared,
                stats,
                date: DateCache::new(),
                rng: (seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
                timers: BinaryHeap::new(),
                timerfd: tfd,
                armed: None,
            },
            accept_paused: None,
            sweep_every,
            next_sweep: now + sweep_every,
        })
    }

    /// Runs the loop until the shared stop flag is set.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        while !self.env.shared.stop.load(Ordering::Acquire) {
            let timeout = self.next_sweep.saturating_duration_since(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                // A broken poll cannot recover; stop this thread (the server sees it).
                break;
            }
            let now = Instant::now();
            self.env.date.refresh();
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(now),
                    WAKER => {}
                    TIMER => {
                        let mut b = [0u8; 8];
                        // SAFETY: reading 8 bytes into an 8-byte buffer from our timerfd.
                        unsafe {
                            libc::read(self.env.timerfd.as_raw_fd(), b.as_mut_ptr().cast(), 8);
                        }
                        self.env.armed = None;
                    }
                    Token(i) => {
                        let readable = ev.is_readable() || ev.is_read_closed() || ev.is_error();
                        if let Some(Some(c)) = self.conns.get_mut(i) {
                            if ev.is_writable() || ev.is_error() || ev.is_write_closed() {
                                c.want_write = false;
                            }
                            if readable {
                                c.read_more = true;
                            }
                            if ev.is_read_closed() || ev.is_error() {
                                c.peer_fin = true;
                            }
                            self.step(i, now);
                        }
                    }
                }
            }
            self.run_timers(now);
            if now >= self.next_sweep {
                self.sweep(now);
                self.next_sweep = now + self.sweep_every;
            }
        }
    }

    fn accept(&mut self, now: Instant) {
        if self.accept_paused.is_some() {
            return;
        }
        let max = self.env.shared.settings.max_connections;
        loop {
            match self.listener.accept() {
                Ok((mut sock, _)) => {
                    if max > 0 && self.env.shared.open.load(Ordering::Relaxed) >= max {
                        self.env.stats.add(C::ConnRejected, 1);
                        drop(sock);
                        continue;
                    }
                    let _ = sock.set_nodelay(true);
                    let idx = match self.free.pop() {
                        Some(i) => i,
                        None => {
                            self.conns.push(None);
                            self.conns.len() - 1
                        }
                    };
                    if self
                        .poll
                        .registry()
                        .register(
                            &mut sock,
                            Token(idx),
                            Interest::READABLE | Interest::WRITABLE,
                        )
                        .is_err()
                    {
                        self.free.push(idx);
                        self.env.stats.add(C::AcceptErrors, 1);
                        continue;
                    }
                    self.conns[idx] = Some(Conn::new(sock, idx, now));
                    self.env.stats.add(C::ConnAccepted, 1);
                    self.env.shared.open.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.env.stats.add(C::AcceptErrors, 1);
                    match e.raw_os_error() {
                        Some(libc::ECONNABORTED) | Some(libc::EPROTO) => continue,
                        _ => {
                            // EMFILE, ENFILE, ENOBUFS, ENOMEM: back off, retry from the sweep.
                            self.accept_paused = Some(now + Duration::from_millis(50));
                            break;
                        }
                    }
                }
            }
        }
    }

    fn close_conn(&mut self, i: usize) {
        if let Some(Some(_)) = self.conns.get(i) {
            self.conns[i] = None;
            self.free.push(i);
            self.env.stats.add(C::ConnClosed, 1);
            self.env.shared.open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Reads, parses and writes for one connection until it has to wait; drops it if done.
    fn step(&mut self, i: usize, now: Instant) {
        let keep = self.step_inner(i, now);
        if !keep {
            self.close_conn(i);
        }
    }

    fn step_inner(&mut self, i: usize, now: Instant) -> bool {
        loop {
            if !self.read_input(i, now) {
                return false;
            }
            let Some(Some(c)) = self.conns.get_mut(i) else {
                return true;
            };
            if !c.pump(&mut self.env, now) {
                return false;
            }
            if c.finished() {
                return false;
            }
            if c.read_more && !c.read_closed && !c.input_paused() {
                continue;
            }
            return true;
        }
    }

    /// Reads what the socket has and parses it. Returns false on a fatal socket error.
    fn read_input(&mut self, i: usize, now: Instant) -> bool {
        let Worker {
            conns,
            scratch,
            env,
            ..
        } = self;
        let Some(Some(c)) = conns.get_mut(i) else {
            return true;
        };
        loop {
            // Parse what is already buffered first (input may have been paused).
            if !c.rbuf.is_empty() && !c.input_paused() && !matches!(c.parse, Parse::Done) {
                let buf = std::mem::take(&mut c.rbuf);
                let used = c.feed(env, &buf, now);
                c.rbuf = buf;
                c.rbuf.drain(..used);
            }
            if matches!(c.parse, Parse::Done) {
                c.rbuf = Vec::new();
            }
            if !c.read_more || c.read_closed || c.input_paused() {
                break;
            }
            let n = match c.sock.read(scratch) {
                Ok(0) => {
                    c.read_closed = true;
                    c.read_more = false;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    c.read_more = false;
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            };
            env.stats.add(C::BytesRead, n as u64);
            c.last_active = now;
            if n < scratch.len() && !c.peer_fin {
                // A short read drained the socket; epoll will report new data. (Not after
                // the peer's FIN: that was already reported, so read on to see the EOF.)
                c.read_more = false;
            }
            if matches!(c.parse, Parse::Done) {
                continue;
            }
            if c.rbuf.is_empty() {
                let used = c.feed(env, &scratch[..n], now);
                if used < n {
                    c.rbuf.extend_from_slice(&scratch[used..n]);
                }
            } else {
                c.rbuf.extend_from_slice(&scratch[..n]);
                let buf = std::mem::take(&mut c.rbuf);
                let used = c.feed(env, &buf, now);
                c.rbuf = buf;
                c.rbuf.drain(..used);
            }
            if c.rbuf.is_empty() && c.rbuf.capacity() > 64 * 1024 {
                c.rbuf = Vec::new();
            }
        }
        // Start the header/body clock when a request is partly here.
        let partial = match c.parse {
            Parse::Head => !c.rbuf.is_empty(),
            Parse::Body { .. } | Parse::Chunked { .. } => true,
            Parse::Done => false,
        };
        if !partial {
            c.req_started = None;
        } else if c.req_started.is_none() {
            c.req_started = Some(now);
        }
        true
    }

    fn run_timers(&mut self, now: Instant) {
        while let Some(Reverse((t, idx))) = self.env.timers.peek().copied() {
            if t > now {
                break;
            }
            self.env.timers.pop();
            let due = match self.conns.get_mut(idx) {
                Some(Some(c)) if c.wake_at == Some(t) => {
                    c.wake_at = None;
                    true
                }
                _ => false,
            };
            if due {
                self.step(idx, now);
            }
        }
        if let Some(Reverse((t, _))) = self.env.timers.peek().copied() {
            if self.env.armed.is_none_or(|a| a <= now || t < a) {
                self.env.arm(t);
            }
        }
    }

    fn sweep(&mut self, now: Instant) {
        if self.accept_paused.is_some_and(|t| t <= now) {
            self.accept_paused = None;
            self.accept(now);
        }
        let s = &self.env.shared.settings;
        let (ht, bt, wt, it) = (
            s.header_timeout,
            s.body_timeout,
            s.write_timeout,
            s.idle_timeout,
        );
        for i in 0..self.conns.len() {
            let Some(c) = self.conns[i].as_mut() else {
                continue;
            };
            let verdict = if let Active::Lingering { deadline } = c.active {
                if now >= deadline {
                    Verdict::Drop
                } else {
                    Verdict::Keep
                }
            } else if c.has_output() && now.saturating_duration_since(c.last_write) >= wt {
                self.env.stats.add(C::WriteTimeouts, 1);
                Verdict::Drop
            } else if let Some(t0) = c.req_started {
                let in_head = matches!(c.parse, Parse::Head);
                let limit = if in_head { ht } else { bt };
                if now.saturating_duration_since(t0) >= limit {
                    let (counter, what) = if in_head {
                        (C::HeaderTimeouts, "request headers not received in time")
                    } else {
                        (C::BodyTimeouts, "request body not received in time")
                    };
                    self.env.stats.add(counter, 1);
                    c.fail(&mut self.env, 408, what.into(), now);
                    Verdict::Step
                } else {
                    Verdict::Keep
                }
            } else if let Some(idle) = it {
                let quiet = matches!(c.parse, Parse::Head)
                    && matches!(c.active, Active::None)
                    && c.pending.is_empty()
                    && c.wpos >= c.wbuf.len();
                if quiet && now.saturating_duration_since(c.last_active) >= idle {
                    self.env.stats.add(C::IdleTimeouts, 1);
                    c.active = Active::Close;
                    Verdict::Step
                } else {
                    Verdict::Keep
                }
            } else {
                Verdict::Keep
            };
            match verdict {
                Verdict::Keep => {}
                Verdict::Step => self.step(i, now),
                Verdict::Drop => self.close_conn(i),
            }
        }
    }
}
