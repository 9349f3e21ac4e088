//! The epoll backend (mio, edge-triggered): readiness events, then `read` and `write` on
//! the socket. Open-loop send times are kept by a timerfd in the same poller.

use super::conn::CState;
use super::{Io, Wake, Worker};
use crate::dial::Stream;
use crate::errors::ErrorClass;
use crate::sys;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Read, Write};
use std::time::Duration;

const RBUF: usize = 64 * 1024;
const TIMER_TOKEN: Token = Token(usize::MAX - 1);

/// A thread's poller, its events, read buffer and (open loop) timer.
pub(super) struct EpollIo {
    poll: Poll,
    events: Option<Events>,
    rbuf: Vec<u8>,
    timer: Option<sys::TimerFd>,
}

impl EpollIo {
    pub(super) fn new(open: bool) -> io::Result<EpollIo> {
        let poll = Poll::new()?;
        let mut timer = None;
        if open {
            let t = sys::TimerFd::new()?;
            poll.registry().register(
                &mut SourceFd(&t.raw_fd()),
                TIMER_TOKEN,
                Interest::READABLE,
            )?;
            timer = Some(t);
        }
        Ok(EpollIo {
            poll,
            events: Some(Events::with_capacity(1024)),
            rbuf: vec![0u8; RBUF],
            timer,
        })
    }

    /// Watch a new socket (once, for both directions) as connection `i`.
    pub(super) fn register(&mut self, s: &mut Stream, i: usize) -> io::Result<()> {
        self.poll
            .registry()
            .register(s, Token(i), Interest::READABLE | Interest::WRITABLE)
    }
}

impl Worker {
    fn epoll(&mut self) -> &mut EpollIo {
        match &mut self.io {
            Io::Epoll(e) => e,
            Io::Uring(_) => unreachable!("an epoll call on the io_uring backend"),
        }
    }

    /// One turn of the loop: wait for events (or the timer), then handle them.
    pub(super) fn epoll_turn(&mut self, now: u64, wake: &Wake) -> io::Result<()> {
        let e = self.epoll();
        if let (Some(at), Some(t)) = (wake.timer_at, e.timer.as_mut()) {
            t.arm_at(at);
        }
        let mut events = e
            .events
            .take()
            .expect("events are put back after each turn");
        match e
            .poll
            .poll(&mut events, Some(Duration::from_nanos(wake.sleep)))
        {
            Err(err) if err.kind() != io::ErrorKind::Interrupted => {
                e.events = Some(events);
                return Err(err);
            }
            _ => {}
        }
        let mut fired_at = None;
        if let Some(t) = e.timer.as_mut() {
            if events.iter().any(|ev| ev.token() == TIMER_TOKEN) {
                fired_at = Some(t.armed_at());
                t.fired();
            }
        }
        self.after_wait(now, wake, events.is_empty(), fired_at);
        for ev in events.iter() {
            let tok = ev.token();
            if tok == TIMER_TOKEN {
                continue;
            }
            let now = sys::now_ns();
            self.slice_tick(now);
            self.on_event(tok.0, ev, now);
        }
        self.epoll().events = Some(events);
        Ok(())
    }

    fn on_event(&mut self, i: usize, ev: &mio::event::Event, now: u64) {
        if i >= self.conns.len() {
            return;
        }
        match self.conns[i].state {
            CState::Connecting(_) => {
                self.finish_connect(i, ev.is_error() || ev.is_write_closed(), now);
                if self.conns[i].state != CState::Open {
                    return;
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

    fn on_readable(&mut self, i: usize, now: u64, drain: bool) {
        let mut rbuf = std::mem::take(&mut self.epoll().rbuf);
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
                    self.on_read_error(i, &e, now);
                    break false;
                }
            }
        };
        self.epoll().rbuf = rbuf;
        if open_after {
            self.flush(i, now);
        }
    }

    /// Write the waiting batches on connection `i` until done or the socket is full.
    pub(super) fn epoll_flush(&mut self, i: usize, now: u64) {
        loop {
            let c = &self.conns[i];
            if c.state != CState::Open {
                return;
            }
            if c.writing == 0 && !self.take_batch(i, now) {
                return;
            }
            let c = &mut self.conns[i];
            let bytes = match (&c.h2, &c.ws) {
                (Some(h), _) => &h.out[c.woff..],
                (_, Some(w)) => &w.out[c.woff..],
                _ if self.plan.mix.is_some() => &c.mix_out[c.woff..],
                _ => &self.batch[c.woff..c.writing as usize * self.req_len],
            };
            let Some(s) = c.stream.as_mut() else { return };
            match s.write(bytes) {
                Ok(n) => self.wrote(i, n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.fail(i, ErrorClass::WriteError, format!("write failed: {e}"), now);
                    return;
                }
            }
        }
    }
}
