//! Open-loop rate phases: each a linear ramp or a constant step, and the rate curve the
//! send schedule follows (expected sends as a function of time, and its inverse).
//!
//! The k-th send of a thread is at the time the curve's expected count reaches its k-th
//! target: `k + offset` for constant arrivals, a running sum of exponential gaps for
//! Poisson arrivals (time rescaling: a non-homogeneous Poisson process with the phases as
//! its intensity).

use serde::{Deserialize, Serialize};

/// Largest rate of any phase (requests/s).
pub const MAX_RATE: f64 = 10_000_000.0;
/// Most phases in one spec.
pub const MAX_PHASES: usize = 10_000;

/// One rate phase: from `rate` to `end_rate` (a linear ramp) over `duration_s`,
/// or at `rate` throughout when `end_rate` is null (a step).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RatePhase {
    /// Requests/s at the start of the phase.
    pub rate: f64,
    /// Requests/s at its end; null: `rate` throughout.
    #[serde(default)]
    pub end_rate: Option<f64>,
    pub duration_s: f64,
}

impl RatePhase {
    /// Requests/s at the end of the phase.
    pub fn last_rate(&self) -> f64 {
        self.end_rate.unwrap_or(self.rate)
    }
}

/// Check rate phases; the message does not name the field (the caller does).
pub fn validate(phases: &[RatePhase], max_total_s: f64) -> Result<(), String> {
    if phases.len() > MAX_PHASES {
        return Err(format!("at most {MAX_PHASES} phases"));
    }
    let ok_rate = |r: f64| r.is_finite() && (0.0..=MAX_RATE).contains(&r);
    for (i, p) in phases.iter().enumerate() {
        let n = i + 1;
        if !ok_rate(p.rate) || !p.end_rate.is_none_or(ok_rate) {
            return Err(format!(
                "phase {n}: rates must be >= 0 and <= {MAX_RATE} requests/s"
            ));
        }
        if !(p.duration_s.is_finite() && p.duration_s > 0.0) {
            return Err(format!("phase {n}: duration_s must be > 0"));
        }
    }
    if total_s(phases) > max_total_s {
        return Err(format!("the phases last more than {max_total_s} s"));
    }
    if phases.iter().all(|p| p.rate == 0.0 && p.last_rate() == 0.0) {
        return Err("every rate is 0: nothing would be sent".into());
    }
    Ok(())
}

/// Seconds the phases last together.
pub fn total_s(phases: &[RatePhase]) -> f64 {
    phases.iter().map(|p| p.duration_s).sum()
}

/// The highest rate the phases reach.
pub fn peak_rate(phases: &[RatePhase]) -> f64 {
    phases
        .iter()
        .map(|p| p.rate.max(p.last_rate()))
        .fold(0.0, f64::max)
}

#[derive(Debug, Clone, Copy)]
struct Segment {
    /// Seconds since the start of the run.
    start: f64,
    /// Requests/s at `start`.
    rate: f64,
    /// Change of the rate per second.
    slope: f64,
    /// Expected sends before `start`.
    before: f64,
}

/// The offered rate over time since the start of the run (warm-up included): piecewise
/// linear, the last rate held for ever.
#[derive(Debug, Clone)]
pub struct RateCurve {
    segments: Vec<Segment>,
}

impl RateCurve {
    /// A constant rate.
    pub fn constant(rate: f64) -> RateCurve {
        RateCurve::from_phases(&[], rate, 0.0, 1.0)
    }

    /// The curve of rate phases scaled by `share`: the warm-up (`warmup_s`) at the first
    /// phase's starting rate, then the phases, then the last rate held. No phases is
    /// the constant `rate`.
    pub fn from_phases(phases: &[RatePhase], rate: f64, warmup_s: f64, share: f64) -> RateCurve {
        let mut segments = Vec::with_capacity(phases.len() + 2);
        let mut t = 0.0;
        let mut count = 0.0;
        let mut push = |len: f64, r0: f64, r1: f64| {
            let (r0, r1) = (r0 * share, r1 * share);
            let slope = if len.is_finite() {
                (r1 - r0) / len
            } else {
                0.0
            };
            segments.push(Segment {
                start: t,
                rate: r0,
                slope,
                before: count,
            });
            t += len;
            count += (r0 + r1) / 2.0 * len;
        };
        match phases.first() {
            None => push(f64::INFINITY, rate, rate),
            Some(first) => {
                if warmup_s > 0.0 {
                    push(warmup_s, first.rate, first.rate);
                }
                for p in phases {
                    push(p.duration_s, p.rate, p.last_rate());
                }
                let last = phases[phases.len() - 1].last_rate();
                push(f64::INFINITY, last, last);
            }
        }
        RateCurve { segments }
    }

    fn segment_at(&self, t: f64) -> &Segment {
        let i = self.segments.partition_point(|s| s.start <= t);
        &self.segments[i.saturating_sub(1)]
    }

    /// Requests/s at time `t` (seconds since the start of the run).
    pub fn rate_at(&self, t: f64) -> f64 {
        let s = self.segment_at(t);
        (s.rate + s.slope * (t - s.start)).max(0.0)
    }

    /// Expected sends from the start of the run to `t`.
    pub fn count_at(&self, t: f64) -> f64 {
        let s = self.segment_at(t.max(0.0));
        let dt = t.max(0.0) - s.start;
        s.before + s.rate * dt + s.slope * dt * dt / 2.0
    }

    /// The mean rate between `a` and `b` (requests/s).
    pub fn mean_rate(&self, a: f64, b: f64) -> f64 {
        if b > a {
            (self.count_at(b) - self.count_at(a)) / (b - a)
        } else {
            self.rate_at(a)
        }
    }

    /// The earliest time the expected count reaches `n`, searching forward from segment
    /// `*cursor` (moved along; targets must not decrease). None: never (the rate fell to 0
    /// for good).
    pub fn time_of(&self, n: f64, cursor: &mut usize) -> Option<f64> {
        let segs = &self.segments;
        while *cursor + 1 < segs.len() && n > segs[*cursor + 1].before {
            *cursor += 1;
        }
        let s = &segs[*cursor];
        let m = n - s.before;
        if m <= 0.0 {
            return Some(s.start);
        }
        // Solve rate*dt + slope*dt^2/2 = m for the smallest dt >= 0 (stable form).
        let disc = (s.rate * s.rate + 2.0 * s.slope * m).max(0.0);
        let denom = s.rate + disc.sqrt();
        if denom <= 0.0 {
            return None;
        }
        Some(s.start + 2.0 * m / denom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(a: f64, b: f64, d: f64) -> RatePhase {
        RatePhase {
            rate: a,
            end_rate: Some(b),
            duration_s: d,
        }
    }

    fn step(r: f64, d: f64) -> RatePhase {
        RatePhase {
            rate: r,
            end_rate: None,
            duration_s: d,
        }
    }

    #[test]
    fn constant_curve_is_exact_multiples() {
        let c = RateCurve::constant(1000.0);
        let mut cur = 0;
        for k in 1..5 {
            let t = c.time_of(k as f64, &mut cur).unwrap();
            assert!((t - k as f64 / 1000.0).abs() < 1e-12);
        }
        assert_eq!(c.count_at(2.0), 2000.0);
    }

    #[test]
    fn ramp_counts_and_inverse_agree() {
        let c = RateCurve::from_phases(&[ramp(1000.0, 20000.0, 6.0)], 0.0, 1.0, 1.0);
        // Warm-up second at 1000/s, then the ramp, then 20000/s held.
        assert!((c.count_at(1.0) - 1000.0).abs() < 1e-9);
        assert!((c.count_at(7.0) - (1000.0 + 10500.0 * 6.0)).abs() < 1e-6);
        assert!((c.rate_at(4.0) - 10500.0).abs() < 1e-9);
        assert!((c.rate_at(100.0) - 20000.0).abs() < 1e-9);
        let mut cur = 0;
        for n in [0.5, 999.0, 1000.0, 1001.0, 30000.0, 64000.0, 70000.0] {
            let t = c.time_of(n, &mut cur).unwrap();
            assert!((c.count_at(t) - n).abs() < 1e-6, "n {n} t {t}");
        }
    }

    #[test]
    fn ramp_down_and_zero_steps() {
        let phases = [ramp(5000.0, 0.0, 2.0), step(0.0, 1.0), step(100.0, 1.0)];
        let c = RateCurve::from_phases(&phases, 0.0, 0.0, 0.5);
        assert!((c.count_at(2.0) - 2500.0).abs() < 1e-9);
        let mut cur = 0;
        let t = c.time_of(2500.0, &mut cur).unwrap();
        assert!((t - 2.0).abs() < 1e-6, "{t}");
        let t = c.time_of(2501.0, &mut cur).unwrap();
        assert!((t - 3.02).abs() < 1e-9, "{t}: the zero step is skipped");
        let end = RateCurve::from_phases(&[step(10.0, 1.0), step(0.0, 1.0)], 0.0, 0.0, 1.0);
        let mut cur = 0;
        assert!(
            end.time_of(10.5, &mut cur).is_none(),
            "rate 0 held: no more sends"
        );
    }

    #[test]
    fn validation() {
        assert!(validate(&[ramp(0.0, 10.0, 1.0)], 100.0).is_ok());
        assert!(validate(&[step(0.0, 1.0)], 100.0)
            .unwrap_err()
            .contains("every rate is 0"));
        assert!(validate(&[step(-1.0, 1.0)], 100.0)
            .unwrap_err()
            .starts_with("phase 1:"));
        assert!(validate(&[step(1.0, 1.0), step(1.0, 0.0)], 100.0)
            .unwrap_err()
            .starts_with("phase 2: duration_s"));
        assert!(validate(&[step(1.0, 200.0)], 100.0).is_err());
        assert_eq!(peak_rate(&[ramp(5.0, 9.0, 1.0), step(7.0, 1.0)]), 9.0);
    }
}
