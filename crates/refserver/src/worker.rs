//! One event-loop thread: a mio poll with its own `SO_REUSEPORT` listener, a timerfd for
//! precise timers (delays, drip pacing, stall ends), and a coarse sweep for timeouts.
//!
//! The loop accepts connections, hands socket events and due timers to each connection's
//! state machine (`conn/`), and sweeps for timeouts. Nothing ever sleeps in the loop.

use std::cmp::Reverse;
use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::TcpListener;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use pywebbench_sys::TimerFd;

use crate::conn::{Active, Conn, Parse};
use crate::context::{Env, Shared};
use crate::stats::C;

pub(crate) const LISTENER: Token = Token(usize::MAX - 1);
pub(crate) const WAKER: Token = Token(usize::MAX - 2);
pub(crate) const TIMER: Token = Token(usize::MAX - 3);
const READ_BUF: usize = 64 * 1024;

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
        let timer = TimerFd::new()?;
        poll.registry()
            .register(&mut SourceFd(&timer.raw_fd()), TIMER, Interest::READABLE)?;
        let s = &shared.settings;
        let mut shortest = s.header_timeout.min(s.body_timeout).min(s.write_timeout);
        if let Some(i) = s.idle_timeout {
            shortest = shortest.min(i);
        }
        let sweep_every =
            (shortest / 10).clamp(Duration::from_millis(5), Duration::from_millis(100));
        let now = Instant::now();
        Ok(Worker {
            id,
            poll,
            listener,
            conns: Vec::new(),
            free: Vec::new(),
            scratch: vec![0u8; READ_BUF].into_boxed_slice(),
            env: Env::new(shared, id, timer),
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
                        self.env.timer.drain();
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
