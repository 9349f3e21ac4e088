//! The io_uring backend: the worker's side of `crate::uring`. Per connection at most one
//! receive (multishot: armed once, it stays armed), one send (straight from the pre-built
//! request batch) and, while connecting, one poll for writability. Submissions queue up
//! while completions are handled and go to the kernel together, in the same
//! `io_uring_enter` as the wait for the next completions.

use super::conn::CState;
use super::{Io, Wake, Worker};
use crate::errors::ErrorClass;
use crate::sys;
use crate::uring::{self, Op, Ring};
use io_uring::{cqueue, opcode, squeue, types};
use std::io;
use std::os::fd::AsRawFd;

/// How long the end of a run waits for cancelled operations to complete.
const DRAIN_NS: u64 = 1_000_000_000;

/// A wait may hold the completions that have come for up to this share (1/32, about 3%) of
/// the running round-trip time, so that more arrive and are handled, and answered, in one
/// turn: fewer wake-ups and larger writes for both the engine and the server
/// (docs/load-engine.md, "Batched waits").
const BATCH_SHARE: u64 = 32;
/// ... and never for more than this (microseconds).
const BATCH_MAX_US: u64 = 50;
/// ... and only with at least this many requests in flight: about 2 answers arrive during a
/// hold of 1/32 of the round trip (in flight / 32). With fewer, a hold would mostly end on
/// the turn's own send completions alone and cost a second wait.
const BATCH_MIN_INFLIGHT: u64 = 2 * BATCH_SHARE;

/// How long a wait may hold completions for a round-trip time of `rtt_ns` (microseconds;
/// 0 for under 2: not worth a timer).
pub(super) fn batch_wait_us(rtt_ns: u64) -> u32 {
    let us = (rtt_ns / BATCH_SHARE / 1000).min(BATCH_MAX_US);
    if us < 2 {
        0
    } else {
        us as u32
    }
}

impl Worker {
    fn ring(&mut self) -> &mut Ring {
        match &mut self.io {
            Io::Uring(r) => r,
            Io::Epoll(_) => unreachable!("an io_uring call on the epoll backend"),
        }
    }

    /// Queue operation `op` on connection `i`'s socket.
    fn uring_push(&mut self, i: usize, op: Op, build: impl FnOnce(types::Fd) -> squeue::Entry) {
        let c = &self.conns[i];
        let Some(s) = c.stream.as_ref() else { return };
        let e = build(types::Fd(s.as_raw_fd())).user_data(uring::user_data(op, i, c.gen));
        self.ring().push(e);
    }

    /// Connection `i` started a non-blocking connect: wait until it is writable.
    pub(super) fn uring_arm_connect(&mut self, i: usize) {
        let events = (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) as u32;
        self.uring_push(i, Op::Connect, |fd| {
            opcode::PollAdd::new(fd, events).build()
        });
    }

    /// Connection `i` is open (or its receive ended): keep a receive armed on it.
    pub(super) fn uring_arm_recv(&mut self, i: usize) {
        if self.conns[i].recv_armed {
            return;
        }
        self.conns[i].recv_armed = true;
        let (multishot, size) = {
            let r = self.ring();
            (r.multishot, r.bufs.size() as u32)
        };
        self.uring_push(i, Op::Recv, |fd| {
            if multishot {
                opcode::RecvMulti::new(fd, uring::BGID).build()
            } else {
                opcode::Recv::new(fd, std::ptr::null_mut(), size)
                    .buf_group(uring::BGID)
                    .build()
                    .flags(squeue::Flags::BUFFER_SELECT)
            }
        });
    }

    /// Send the waiting batch on connection `i` unless a send is under way.
    pub(super) fn uring_flush(&mut self, i: usize, now: u64) {
        let c = &self.conns[i];
        if c.state != CState::Open || c.send_busy {
            return;
        }
        if c.writing == 0 && !self.take_batch(i, now) {
            return;
        }
        let c = &mut self.conns[i];
        c.send_busy = true;
        // The bytes stay put until the send completes: `out` (h2c, ws) and `batch` are not
        // touched while `send_busy`.
        let rest = match (&c.h2, &c.ws) {
            (Some(h), _) => &h.out[c.woff..],
            (_, Some(w)) => &w.out[c.woff..],
            _ if self.plan.mix.is_some() => &c.mix_out[c.woff..],
            _ => &self.batch[c.woff..c.writing as usize * self.req_len],
        };
        let (ptr, len) = (rest.as_ptr(), rest.len() as u32);
        // MSG_WAITALL: the kernel retries a short send itself, so a completion means all of
        // it was sent (or an error).
        self.uring_push(i, Op::Send, |fd| {
            opcode::Send::new(fd, ptr, len)
                .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                .build()
        });
        self.ring().sends_queued += 1;
    }

    /// Connection `i`'s socket is about to be closed: cancel what is armed on it (an armed
    /// operation holds the socket open) and make its later completions stale.
    pub(super) fn uring_release(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.stream.is_none() {
            return;
        }
        let gen = c.gen;
        let mut ops = [None; 3];
        if matches!(c.state, CState::Connecting(_)) {
            ops[0] = Some(Op::Connect);
        }
        if c.recv_armed {
            ops[1] = Some(Op::Recv);
        }
        if c.send_busy {
            ops[2] = Some(Op::Send);
        }
        c.gen = uring::next_gen(gen);
        c.recv_armed = false;
        c.send_busy = false;
        for op in ops.into_iter().flatten() {
            let target = uring::user_data(op, i, gen);
            let e = opcode::AsyncCancel::new(target)
                .build()
                .user_data(uring::user_data(Op::Cancel, i, gen));
            self.ring().push(e);
        }
    }

    /// One turn of the loop: submit what is queued, wait for completions (or the timer),
    /// then handle them.
    pub(super) fn uring_turn(&mut self, now: u64, wake: &Wake) -> io::Result<()> {
        let timeout = match wake.timer_at {
            Some(at) => at.saturating_sub(now).min(wake.sleep),
            None => wake.sleep,
        };
        // No hold where connections close per response (a connection per request, a share of
        // fresh ones, or a server that closes them): the server may be waiting for the next
        // request on a new connection, or for this one's close, while the answer is held.
        let closing = !self.keepalive || self.fresh_conns > 0 || self.closed_since_wait;
        self.closed_since_wait = false;
        let batch = (self.inflight_total >= BATCH_MIN_INFLIGHT && !closing)
            .then(|| (self.conns.len(), batch_wait_us(self.rtt_ns)));
        let r = self.ring();
        r.wait(timeout, batch)?;
        let mut batch = std::mem::take(&mut r.cqes);
        let idle = batch.is_empty();
        let fired_at = wake.timer_at.filter(|&at| sys::now_ns() >= at);
        self.after_wait(now, wake, idle, fired_at);
        loop {
            for (ud, res, flags) in batch.drain(..) {
                self.on_cqe(ud, res, flags);
            }
            // Completions picked up while pushing to a full submission queue come next.
            let r = self.ring();
            if r.cqes.is_empty() {
                r.cqes = batch;
                return Ok(());
            }
            std::mem::swap(&mut r.cqes, &mut batch);
        }
    }

    fn on_cqe(&mut self, ud: u64, res: i32, flags: u32) {
        let (op, i, gen) = uring::split_user_data(ud);
        let bid = cqueue::buffer_select(flags);
        let current = i < self.conns.len() && self.conns[i].gen == gen;
        if !current {
            if let Some(bid) = bid {
                self.ring().bufs.recycle(bid);
            }
            return;
        }
        let now = sys::now_ns();
        self.slice_tick(now);
        match op {
            x if x == Op::Recv as u8 => self.on_recv(i, res, flags, bid, now),
            x if x == Op::Send as u8 => {
                self.conns[i].send_busy = false;
                if res < 0 {
                    let e = io::Error::from_raw_os_error(-res);
                    self.fail(i, ErrorClass::WriteError, format!("write failed: {e}"), now);
                } else {
                    self.wrote(i, res as usize);
                    self.uring_flush(i, now);
                }
            }
            x if x == Op::Connect as u8 => {
                if !matches!(self.conns[i].state, CState::Connecting(_)) {
                    return;
                }
                let hup = (libc::POLLERR | libc::POLLHUP) as i32;
                self.finish_connect(i, res < 0 || res & hup != 0, now);
                if matches!(self.conns[i].state, CState::Connecting(_)) {
                    self.uring_arm_connect(i);
                }
            }
            _ => {}
        }
    }

    fn on_recv(&mut self, i: usize, res: i32, flags: u32, bid: Option<u16>, now: u64) {
        if !cqueue::more(flags) {
            self.conns[i].recv_armed = false;
        }
        if self.conns[i].state != CState::Open {
            if let Some(bid) = bid {
                self.ring().bufs.recycle(bid);
            }
            return;
        }
        let gen = self.conns[i].gen;
        if res > 0 {
            let Some(bid) = bid else { return };
            // SAFETY: the buffer is recycled only after `process` is done with it.
            let data = unsafe { self.ring().bufs.filled(bid, res as usize) };
            self.tally.bytes_in += res as u64;
            let alive = self.process(i, data, now);
            self.ring().bufs.recycle(bid);
            if alive && self.conns[i].gen == gen {
                self.uring_arm_recv(i);
                self.flush(i, now);
            }
        } else if res == 0 {
            self.on_eof(i, now);
        } else if res == -libc::ENOBUFS {
            // Every buffer was in use: they are back by the next submit.
            self.uring_arm_recv(i);
        } else if res != -libc::ECANCELED {
            self.on_read_error(i, &io::Error::from_raw_os_error(-res), now);
        }
    }

    /// End of the run: cancel everything still armed and wait for it, so the kernel no
    /// longer refers to the request batch or the receive buffers. If that cannot be
    /// confirmed in time, both are leaked rather than freed under the kernel.
    pub(super) fn uring_drain(&mut self) {
        let cancel_all = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(uring::user_data(Op::Cancel, 0, 0));
        let r = self.ring();
        r.push(cancel_all);
        let until = sys::now_ns() + DRAIN_NS;
        while r.pending_ops > 0 && sys::now_ns() < until {
            if r.wait(10_000_000, None).is_err() {
                break;
            }
            r.cqes.clear();
        }
        if r.pending_ops > 0 {
            r.leak();
            std::mem::forget(std::mem::take(&mut self.batch));
            for c in &mut self.conns {
                std::mem::forget(c.h2.take());
                std::mem::forget(c.ws.take());
                std::mem::forget(std::mem::take(&mut c.mix_out));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::batch_wait_us;

    #[test]
    fn completions_are_held_for_a_thirty_second_of_the_round_trip_at_most_50_us() {
        assert_eq!(batch_wait_us(0), 0);
        assert_eq!(batch_wait_us(60_000), 0, "under 2 us: no timer");
        assert_eq!(batch_wait_us(320_000), 10);
        assert_eq!(batch_wait_us(1_280_000), 40);
        assert_eq!(batch_wait_us(50_000_000), 50);
    }
}
