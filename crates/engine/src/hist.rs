//! HdrHistogram helpers: the one histogram shape the engine uses, V2+DEFLATE base64
//! encoding, merging, quantiles and summaries.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest trackable value: one hour in microseconds. Larger values are clamped.
pub const MAX_US: u64 = 3_600_000_000;
/// Significant digits of every histogram.
pub const SIGFIG: u8 = 3;

/// A latency histogram in microseconds, 1 us .. 1 h, 3 significant digits.
pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, SIGFIG).expect("static bounds are valid")
}

/// Record one value (microseconds), clamped to the trackable range.
#[inline]
pub fn record(h: &mut Histogram<u64>, us: u64) {
    let _ = h.record(us.min(MAX_US));
}

/// Serialise as HdrHistogram V2 + DEFLATE, base64 (standard alphabet, padded).
pub fn encode(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serialising to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// Decode what [`encode`] produced (also accepts plain V2 and the HdrHistogram Java/Go encodings).
pub fn decode(s: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .map_err(|e| format!("histogram is not valid base64: {e}"))?;
    let h: Histogram<u64> = Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .map_err(|e| format!("histogram cannot be decoded: {e:?}"))?;
    Ok(h)
}

/// Merge encoded histograms into one encoded histogram.
pub fn merge_encoded(items: &[&str]) -> Result<String, String> {
    let mut total = new_hist();
    for s in items {
        add(&mut total, &decode(s)?);
    }
    Ok(encode(&total))
}

/// Add `other` into `into` (growing the range if needed).
pub fn add(into: &mut Histogram<u64>, other: &Histogram<u64>) {
    if into.add(other).is_err() {
        for v in other.iter_recorded() {
            let _ = into.record_n(v.value_iterated_to().min(MAX_US), v.count_at_value());
        }
    }
}

/// Value at each quantile (0..=1); 0 for an empty histogram.
pub fn quantiles(h: &Histogram<u64>, qs: &[f64]) -> Vec<u64> {
    qs.iter()
        .map(|&q| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q.clamp(0.0, 1.0))
            }
        })
        .collect()
}

/// Summary figures of one histogram, all in microseconds (counts aside).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
}

/// Summarise a histogram.
pub fn summary(h: &Histogram<u64>) -> Summary {
    if h.is_empty() {
        return Summary::default();
    }
    let q = quantiles(h, &[0.5, 0.9, 0.99, 0.999, 0.9999]);
    Summary {
        count: h.len(),
        min: h.min(),
        max: h.max(),
        mean: h.mean(),
        stdev: h.stdev(),
        p50: q[0],
        p90: q[1],
        p99: q[2],
        p999: q[3],
        p9999: q[4],
    }
}

/// A histogram as stored in results: the encoding plus its summary.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HistData {
    /// HdrHistogram V2+DEFLATE, base64.
    pub hist: String,
    pub summary: Summary,
}

impl HistData {
    /// Encode and summarise.
    pub fn from_hist(h: &Histogram<u64>) -> HistData {
        HistData {
            hist: encode(h),
            summary: summary(h),
        }
    }

    /// Decode the stored histogram.
    pub fn decode(&self) -> Result<Histogram<u64>, String> {
        decode(&self.hist)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_decode_merge_quantiles() {
        let mut a = new_hist();
        let mut b = new_hist();
        for v in 1..=1000u64 {
            record(&mut a, v);
            record(&mut b, v + 1000);
        }
        record(&mut b, u64::MAX);
        let ea = encode(&a);
        let da = decode(&ea).unwrap();
        assert_eq!(da.len(), 1000);
        assert_eq!(summary(&da), summary(&a));
        let m = decode(&merge_encoded(&[&ea, &encode(&b)]).unwrap()).unwrap();
        assert_eq!(m.len(), 2001);
        let q = quantiles(&m, &[0.5, 1.0]);
        assert!((999..=1001).contains(&q[0]), "{q:?}");
        assert!(q[1] >= MAX_US - MAX_US / 1000);
        assert!(decode("not base64!").is_err());
        assert!(decode("aGVsbG8=").is_err());
    }

    #[test]
    fn empty_summary_is_zero() {
        let h = new_hist();
        assert_eq!(summary(&h), Summary::default());
        assert_eq!(quantiles(&h, &[0.5]), vec![0]);
    }
}
