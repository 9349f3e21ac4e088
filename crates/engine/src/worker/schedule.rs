//! What a generator thread sends when: the closed loop tops connections up to the
//! pipeline depth; the open loop issues requests at their arrival times (constant or
//! Poisson) onto free connections, or queues them.

use super::conn::{CState, Slot};
use super::Worker;
use crate::errors::ErrorClass;
use crate::hist;

/// Small, fast, seeded generator (SplitMix64) for Poisson arrivals.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    pub(super) fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

impl Worker {
    pub(super) fn exp_gap(&mut self) -> u64 {
        (-self.rng.unit().ln() * self.interval_ns) as u64
    }

    /// Closed loop: top the connection up to `pipeline` requests.
    pub(super) fn fill(&mut self, i: usize) {
        let depth = self.depth as usize;
        while self.conns[i].inflight.len() < depth && self.may_issue() {
            let c = &mut self.conns[i];
            c.inflight.push_back(Slot {
                intended: 0,
                sent: 0,
            });
            c.unsent += 1;
            self.issued += 1;
            self.inflight_total += 1;
        }
    }

    // ---- open loop -----------------------------------------------------------------------

    pub(super) fn make_free(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.in_free {
            c.in_free = true;
            self.free.push(i as u32);
        }
    }

    pub(super) fn pop_free(&mut self) -> Option<usize> {
        while let Some(i) = self.free.pop() {
            let i = i as usize;
            let c = &mut self.conns[i];
            c.in_free = false;
            let ready = if self.keepalive {
                c.state == CState::Open
            } else {
                c.state == CState::Closed
            };
            if ready && c.inflight.is_empty() {
                return Some(i);
            }
        }
        None
    }

    /// Open loop: connection `i` has nothing in flight: serve the queue or return to the pool.
    pub(super) fn conn_idle(&mut self, i: usize, now: u64) {
        if let Some(intended) = self.queue.pop_front() {
            self.assign(i, intended, now);
        } else {
            self.make_free(i);
        }
    }

    pub(super) fn assign(&mut self, i: usize, intended: u64, now: u64) {
        let c = &mut self.conns[i];
        c.inflight.push_back(Slot { intended, sent: 0 });
        c.unsent += 1;
        self.inflight_total += 1;
        match c.state {
            CState::Open => self.flush(i, now),
            CState::Closed => self.start_connect(i, now),
            _ => {}
        }
    }

    pub(super) fn advance_arrival(&mut self) {
        let gap = if self.poisson { self.exp_gap() } else { 0 };
        if self.poisson {
            self.next_arrival += gap.max(1);
        } else {
            // Constant: exact multiples of the interval from the thread's phase, no drift.
            let k = ((self.next_arrival - self.shared.t0) as f64 / self.interval_ns).round() + 1.0;
            let phase = self.interval_ns * self.id as f64 / self.plan.spec.threads as f64;
            let next = self.shared.t0 + (k * self.interval_ns + phase) as u64;
            self.next_arrival = next.max(self.next_arrival + 1);
        }
    }

    pub(super) fn dispatch(&mut self, now: u64) {
        while self.next_arrival <= now {
            if !self.may_issue() || self.next_arrival >= self.end {
                self.next_arrival = u64::MAX;
                return;
            }
            let intended = self.next_arrival;
            self.advance_arrival();
            self.issued += 1;
            if self.measuring {
                self.tally.offered += 1;
                hist::record(&mut self.tally.lag, now.saturating_sub(intended) / 1000);
            }
            if let Some(i) = self.pop_free() {
                self.assign(i, intended, now);
            } else if (self.queue.len() as u64) < self.plan.queue_limit {
                self.queue.push_back(intended);
                self.tally.queued += 1;
                self.tally.queue_max = self.tally.queue_max.max(self.queue.len() as u64);
            } else {
                let limit = self.plan.queue_limit;
                self.record_error(ErrorClass::QueueOverflow, 1, now, || {
                    format!("all connections busy and {limit} sends already queued")
                });
            }
        }
    }
}
