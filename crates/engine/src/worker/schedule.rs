//! What a generator thread sends when: the closed loop tops connections up to the
//! pipeline depth; the open loop issues requests at their arrival times (constant or
//! Poisson, following a constant rate or rate phases) onto free connections, or queues
//! them.

use super::conn::CState;
use super::slot::Slot;
use super::{Worker, MAX_LEAD_NS};
use crate::errors::ErrorClass;
use crate::hist;
use crate::rate::RateCurve;
use crate::spec::{Arrival, Plan};

/// Small, fast, seeded generator (SplitMix64) for Poisson arrivals.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
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

/// A thread's send times: the k-th send is when the thread's share of the rate curve
/// reaches its k-th target count (constant: `k + id/threads`, so the threads' sends
/// interleave; Poisson: a running sum of Exp(1) draws, i.e. time rescaling, seeded).
pub(super) struct Arrivals {
    curve: RateCurve,
    cursor: usize,
    target: f64,
    /// Constant arrivals: the first target count (`id/threads` of the thread's target).
    first: f64,
    poisson: bool,
    rng: Rng,
    t0: u64,
}

impl Arrivals {
    /// The schedule of thread `id` of a run that started at `t0`, with `share` of the rate.
    pub(super) fn new(plan: &Plan, id: usize, share: f64, t0: u64) -> Arrivals {
        let poisson = plan.spec.arrival == Arrival::Poisson;
        let seed = plan.spec.seed ^ (id as u64).wrapping_mul(0xA076_1D64_78BD_642F);
        let threads = plan.spec.threads.max(1) as usize;
        // (an interleaved run numbers its threads across targets: each target's own)
        let first = (id % threads) as f64 / threads as f64;
        let mut a = Arrivals {
            curve: plan.spec.rate_curve(share),
            cursor: 0,
            target: 0.0,
            first,
            poisson,
            rng: Rng(seed),
            t0,
        };
        a.restart(t0);
        a
    }

    /// Start the schedule afresh at `t0` (an interleaved run's window of the thread's target:
    /// its arrivals begin when the window's load does, at the curve's start; Poisson draws
    /// go on from the same seeded stream).
    pub(super) fn restart(&mut self, t0: u64) {
        self.t0 = t0;
        self.cursor = 0;
        self.target = if self.poisson {
            -self.rng.unit().ln()
        } else {
            self.first
        };
    }

    /// The time of the current send (CLOCK_MONOTONIC ns); u64::MAX when the rate fell to 0
    /// for good.
    pub(super) fn current(&mut self) -> u64 {
        match self.curve.time_of(self.target, &mut self.cursor) {
            Some(t) if t < 1e7 => self.t0 + (t * 1e9) as u64,
            _ => u64::MAX,
        }
    }

    /// Move on to the next send and return its time.
    pub(super) fn advance(&mut self) -> u64 {
        self.target += if self.poisson {
            -self.rng.unit().ln()
        } else {
            1.0
        };
        self.current()
    }

    /// How early the timer may be set for a send at `at`: at most a quarter of the send
    /// interval there (so spinning stays below ~25% of a core at any rate), and
    /// `MAX_LEAD_NS`.
    pub(super) fn max_lead_ns(&self, at: u64) -> u64 {
        let rate = self.curve.rate_at(at.saturating_sub(self.t0) as f64 / 1e9);
        if rate > 0.0 {
            ((1e9 / rate / 4.0) as u64).min(MAX_LEAD_NS)
        } else {
            MAX_LEAD_NS
        }
    }
}

impl Worker {
    /// A mix: the entry of the next request, drawn from the alias table built at plan time
    /// (one random number, one look-up); 0 without a mix.
    #[inline]
    pub(super) fn draw_entry(&mut self) -> u32 {
        match &self.plan.mix {
            Some(m) => m.alias.pick(self.mix_rng.next_u64()) as u32,
            None => 0,
        }
    }

    /// Closed loop: top the connection up to `pipeline` requests.
    pub(super) fn fill(&mut self, i: usize) {
        let depth = self.depth as usize;
        while self.conns[i].inflight.len() < depth && self.may_issue() {
            let entry = self.draw_entry();
            let c = &mut self.conns[i];
            c.inflight.push_back(Slot {
                intended: 0,
                sent: 0,
                stream: 0,
                entry,
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
            if ready && c.inflight.len() < self.depth as usize {
                return Some(i);
            }
        }
        None
    }

    /// Open loop: connection `i` has room for requests (HTTP/1.1: none in flight; h2c: a
    /// free stream): serve the queue, or return it to the pool.
    pub(super) fn conn_idle(&mut self, i: usize, now: u64) {
        while self.conns[i].inflight.len() < self.depth as usize {
            let Some(intended) = self.queue.pop_front() else {
                self.make_free(i);
                return;
            };
            self.assign(i, intended, now);
            if self.conns[i].state != CState::Open {
                // Connecting (or failed at once and backing off): one send waits for it.
                return;
            }
        }
    }

    pub(super) fn assign(&mut self, i: usize, intended: u64, now: u64) {
        let entry = self.draw_entry();
        let c = &mut self.conns[i];
        c.inflight.push_back(Slot {
            intended,
            sent: 0,
            stream: 0,
            entry,
        });
        c.unsent += 1;
        self.inflight_total += 1;
        let state = c.state;
        if state == CState::Open && c.inflight.len() < self.depth as usize {
            self.make_free(i); // h2c: more streams free on it
        }
        match state {
            CState::Open => self.flush(i, now),
            CState::Closed => self.start_connect(i, now),
            _ => {}
        }
    }

    pub(super) fn advance_arrival(&mut self) {
        // Targets are exact counts on the curve: no drift, whatever the rate does.
        let next = self.arrivals.advance();
        self.next_arrival = next.max(self.next_arrival.saturating_add(1));
        self.max_lead_ns = self.arrivals.max_lead_ns(self.next_arrival);
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
            // A send scheduled in the warm-up is the warm-up's, however late it goes out:
            // the measured phase offers exactly the sends scheduled from its start to its end.
            if intended >= self.warm_end {
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
