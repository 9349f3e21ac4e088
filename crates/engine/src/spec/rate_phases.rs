//! The load spec's open-loop rate phases: their check, and what they imply for the measured
//! duration, the peak rate and the rate curve (the phases themselves: `crate::rate`).

use super::{LoadSpec, DEFAULT_DURATION_S, MAX_DURATION_S};
use crate::rate::{peak_rate, total_s, validate, RateCurve};

impl LoadSpec {
    /// Check `rate_phases` (and that `rate` is not also set). Errors name the field.
    pub(crate) fn check_rate_phases(&self) -> Result<(), String> {
        if self.rate_phases.is_empty() {
            return Ok(());
        }
        if self.rate.is_some() {
            return Err(
                "rate_phases: give either rate (constant) or rate_phases (ramps, steps), not both"
                    .into(),
            );
        }
        validate(&self.rate_phases, MAX_DURATION_S).map_err(|e| format!("rate_phases: {e}"))
    }

    /// The measured duration: `duration_s`, else the rate phases' length, else the
    /// default (10 s); None when bounded by `max_requests` only.
    pub fn planned_duration_s(&self) -> Option<f64> {
        match (self.duration_s, self.max_requests) {
            (Some(d), _) => Some(d),
            (None, _) if !self.rate_phases.is_empty() => Some(total_s(&self.rate_phases)),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_DURATION_S),
        }
    }

    /// Open loop: the highest offered rate (requests/s).
    pub fn peak_rate(&self) -> Option<f64> {
        match self.rate {
            Some(r) => Some(r),
            None if !self.rate_phases.is_empty() => Some(peak_rate(&self.rate_phases)),
            None => None,
        }
    }

    /// Open loop: the offered rate over time since the start of the run (warm-up
    /// included), scaled by `share` (a thread's part).
    pub fn rate_curve(&self, share: f64) -> RateCurve {
        RateCurve::from_phases(
            &self.rate_phases,
            self.rate.unwrap_or(0.0),
            self.warmup_s,
            share,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::{normalise_spec_json, Mode};
    use super::LoadSpec;

    fn spec(fields: &str) -> Result<String, String> {
        normalise_spec_json(&format!(r#"{{"url": "http://127.0.0.1:1/", {fields}}}"#))
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                r#""rate": 5, "rate_phases": [{"rate": 1, "duration_s": 1}]"#,
                "rate_phases: give either",
            ),
            (
                r#""rate_phases": [{"rate": 1}]"#,
                "rate_phases: missing field",
            ),
            (
                r#""rate_phases": [{"rate": 0, "duration_s": 1}]"#,
                "rate_phases: every rate is 0",
            ),
            (
                r#""rate_phases": [{"rate": 1, "end_rate": -2, "duration_s": 1}]"#,
                "rate_phases: phase 1: rates",
            ),
            (
                r#""rate_phases": [{"rate": 1, "duration_s": 1}], "queue_limit": 5"#,
                "",
            ),
        ];
        for (fields, prefix) in cases {
            match spec(fields) {
                Ok(_) => assert!(prefix.is_empty(), "{fields} should fail"),
                Err(e) => assert!(
                    !prefix.is_empty() && e.starts_with(prefix),
                    "{e} / {prefix}"
                ),
            }
        }
    }

    #[test]
    fn duration_and_peak_follow_the_phases() {
        let spec = LoadSpec::from_json(
            r#"{"url": "http://127.0.0.1:1/", "rate_phases": [
                {"rate": 10, "end_rate": 30, "duration_s": 4}, {"rate": 50, "duration_s": 2}]}"#,
        )
        .unwrap();
        assert_eq!(spec.planned_duration_s(), Some(6.0));
        assert_eq!(spec.peak_rate(), Some(50.0));
        assert_eq!(spec.mode(), Mode::Open);
    }

    #[test]
    fn specs_written_before_the_rename_still_read() {
        let old = spec(r#""rate_profile": [{"rate": 7, "duration_s": 2}]"#).unwrap();
        let new = spec(r#""rate_phases": [{"rate": 7, "duration_s": 2}]"#).unwrap();
        assert_eq!(old, new);
        assert!(new.contains(r#""rate_phases":"#) && !new.contains("rate_profile"));
    }
}
