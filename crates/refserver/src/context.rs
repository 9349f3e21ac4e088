//! What an event-loop thread's connections share: the server-wide `Shared` state and the
//! per-thread `Env` (statistics, Date cache, service-delay generator, timers).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pywebbench_sys::TimerFd;
use serde_json::{json, Map};

use crate::config::Settings;
use crate::http::DateCache;
use crate::stats::{snapshot, ThreadStats};

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

/// Per-thread context the connections use.
pub(crate) struct Env {
    pub shared: Arc<Shared>,
    pub stats: Arc<ThreadStats>,
    pub date: DateCache,
    rng: u64,
    /// Connection wake-ups, earliest first: (when, connection index).
    pub timers: BinaryHeap<Reverse<(Instant, usize)>>,
    pub timer: TimerFd,
    /// When `timer` is set to fire, if it is.
    pub armed: Option<Instant>,
    /// Serial service: when this thread's single server is free again.
    busy_until: Option<Instant>,
}

impl Env {
    /// The context of thread `id`, whose connection timers fire through `timer`.
    pub fn new(shared: Arc<Shared>, id: usize, timer: TimerFd) -> Env {
        let s = &shared.settings;
        let seed = if s.seed != 0 {
            s.seed
        } else {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        };
        Env {
            stats: shared.stats[id].clone(),
            date: DateCache::new(),
            rng: (seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
            timers: BinaryHeap::new(),
            timer,
            armed: None,
            busy_until: None,
            shared,
        }
    }

    fn push_timer(&mut self, t: Instant, idx: usize) {
        self.timers.push(Reverse((t, idx)));
        if self.armed.is_none_or(|a| t < a) {
            self.arm(t);
        }
    }

    /// Sets the thread's timer to fire at `t`.
    pub fn arm(&mut self, t: Instant) {
        self.timer
            .arm_after(t.saturating_duration_since(Instant::now()));
        self.armed = Some(t);
    }

    /// When a request that arrived at `now` leaves the thread's serial server (`now` itself
    /// without a serial service time): it waits for the requests before it, then takes
    /// `service`. The chain runs on due times, not on wake-ups, so late timers cost no capacity.
    pub fn served_at(&mut self, now: Instant) -> Instant {
        let service = self.shared.settings.service;
        if service.is_zero() {
            return now;
        }
        let done = self.busy_until.map_or(now, |b| b.max(now)) + service;
        self.busy_until = Some(done);
        done
    }

    /// The service delay of one request: its shape at this moment plus uniform jitter.
    pub fn delay(&mut self) -> Duration {
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

    /// Registers a wake-up of connection `idx` at `t` unless an earlier one is registered.
    pub fn wake_at(&mut self, wake: &mut Option<Instant>, idx: usize, t: Instant) {
        if wake.is_none_or(|w| t < w) {
            *wake = Some(t);
            self.push_timer(t, idx);
        }
    }

    /// Whether a paced stream must wait (a stall, or its next tick is ahead); if so the
    /// wake-up is registered.
    pub fn hold(
        &mut self,
        wake: &mut Option<Instant>,
        idx: usize,
        now: Instant,
        next: Instant,
    ) -> bool {
        let until = match self.shared.stall_end(now) {
            Some(end) => end,
            None if now < next => next,
            None => return false,
        };
        self.wake_at(wake, idx, until);
        true
    }
}
