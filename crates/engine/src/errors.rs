//! The stable error taxonomy: one snake_case class per way a request can fail.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Why a request (or a connection attempt) failed. Names are stable: they are stored in
/// results and compared across versions. Non-2xx statuses are *not* errors (they are counted
/// in `status_counts`); `check_failed` is a response that arrived but failed a response check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ErrorClass {
    ConnectRefused = 0,
    ConnectTimeout,
    ConnectError,
    ResetBeforeResponse,
    ResetMidBody,
    EofBeforeHeaders,
    EofMidBody,
    MalformedStatusLine,
    MalformedHeaders,
    MalformedChunked,
    HeaderTimeout,
    BodyTimeout,
    FdExhaustion,
    AddrUnavailable,
    WriteError,
    CheckFailed,
    QueueOverflow,
    H2NotSpoken,
    H2ProtocolError,
    H2StreamReset,
    H2Goaway,
    WsHandshakeRejected,
    WsProtocolError,
    WsClosed,
    WsEchoMismatch,
    WsEchoTimeout,
}

/// Number of error classes.
pub const N_CLASSES: usize = 26;

/// All classes, in declaration order.
pub const ALL_CLASSES: [ErrorClass; N_CLASSES] = [
    ErrorClass::ConnectRefused,
    ErrorClass::ConnectTimeout,
    ErrorClass::ConnectError,
    ErrorClass::ResetBeforeResponse,
    ErrorClass::ResetMidBody,
    ErrorClass::EofBeforeHeaders,
    ErrorClass::EofMidBody,
    ErrorClass::MalformedStatusLine,
    ErrorClass::MalformedHeaders,
    ErrorClass::MalformedChunked,
    ErrorClass::HeaderTimeout,
    ErrorClass::BodyTimeout,
    ErrorClass::FdExhaustion,
    ErrorClass::AddrUnavailable,
    ErrorClass::WriteError,
    ErrorClass::CheckFailed,
    ErrorClass::QueueOverflow,
    ErrorClass::H2NotSpoken,
    ErrorClass::H2ProtocolError,
    ErrorClass::H2StreamReset,
    ErrorClass::H2Goaway,
    ErrorClass::WsHandshakeRejected,
    ErrorClass::WsProtocolError,
    ErrorClass::WsClosed,
    ErrorClass::WsEchoMismatch,
    ErrorClass::WsEchoTimeout,
];

impl ErrorClass {
    /// The stable snake_case name used in results.
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::ConnectRefused => "connect_refused",
            ErrorClass::ConnectTimeout => "connect_timeout",
            ErrorClass::ConnectError => "connect_error",
            ErrorClass::ResetBeforeResponse => "reset_before_response",
            ErrorClass::ResetMidBody => "reset_mid_body",
            ErrorClass::EofBeforeHeaders => "eof_before_headers",
            ErrorClass::EofMidBody => "eof_mid_body",
            ErrorClass::MalformedStatusLine => "malformed_status_line",
            ErrorClass::MalformedHeaders => "malformed_headers",
            ErrorClass::MalformedChunked => "malformed_chunked",
            ErrorClass::HeaderTimeout => "header_timeout",
            ErrorClass::BodyTimeout => "body_timeout",
            ErrorClass::FdExhaustion => "fd_exhaustion",
            ErrorClass::AddrUnavailable => "addr_unavailable",
            ErrorClass::WriteError => "write_error",
            ErrorClass::CheckFailed => "check_failed",
            ErrorClass::QueueOverflow => "queue_overflow",
            ErrorClass::H2NotSpoken => "h2_not_spoken",
            ErrorClass::H2ProtocolError => "h2_protocol_error",
            ErrorClass::H2StreamReset => "h2_stream_reset",
            ErrorClass::H2Goaway => "h2_goaway",
            ErrorClass::WsHandshakeRejected => "ws_handshake_rejected",
            ErrorClass::WsProtocolError => "ws_protocol_error",
            ErrorClass::WsClosed => "ws_closed",
            ErrorClass::WsEchoMismatch => "ws_echo_mismatch",
            ErrorClass::WsEchoTimeout => "ws_echo_timeout",
        }
    }

    /// Class from its stable name.
    pub fn from_name(name: &str) -> Option<ErrorClass> {
        ALL_CLASSES.iter().copied().find(|c| c.name() == name)
    }

    /// Classify a failed `connect()` (immediate or asynchronous).
    pub fn from_connect_error(err: &std::io::Error) -> ErrorClass {
        match err.raw_os_error() {
            Some(libc::ECONNREFUSED) => ErrorClass::ConnectRefused,
            Some(libc::ETIMEDOUT) => ErrorClass::ConnectTimeout,
            Some(libc::EMFILE) | Some(libc::ENFILE) => ErrorClass::FdExhaustion,
            Some(libc::EADDRNOTAVAIL) | Some(libc::EADDRINUSE) => ErrorClass::AddrUnavailable,
            _ => ErrorClass::ConnectError,
        }
    }
}

/// Count and first example message of one error class.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorEntry {
    pub count: u64,
    pub example: String,
}

/// Per-class counters with the first example message of each class.
#[derive(Debug, Clone, Default)]
pub struct ErrorCounts {
    counts: [u64; N_CLASSES],
    examples: [Option<String>; N_CLASSES],
}

impl ErrorCounts {
    /// Count `n` errors of `class`; `msg` is called only for the first one (allocation once).
    #[inline]
    pub fn add(&mut self, class: ErrorClass, n: u64, msg: impl FnOnce() -> String) {
        let i = class as usize;
        self.counts[i] += n;
        if self.examples[i].is_none() {
            self.examples[i] = Some(msg());
        }
    }

    /// Count of one class.
    pub fn get(&self, class: ErrorClass) -> u64 {
        self.counts[class as usize]
    }

    /// Sum over all classes.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Merge another set of counters into this one (first example wins).
    pub fn merge(&mut self, other: &ErrorCounts) {
        for i in 0..N_CLASSES {
            self.counts[i] += other.counts[i];
            if self.examples[i].is_none() {
                self.examples[i] = other.examples[i].clone();
            }
        }
    }

    /// Non-zero classes as a name-keyed map.
    pub fn to_map(&self) -> BTreeMap<String, ErrorEntry> {
        let mut m = BTreeMap::new();
        for c in ALL_CLASSES {
            let i = c as usize;
            if self.counts[i] > 0 {
                m.insert(
                    c.name().to_string(),
                    ErrorEntry {
                        count: self.counts[i],
                        example: self.examples[i].clone().unwrap_or_default(),
                    },
                );
            }
        }
        m
    }

    /// Counters from a name-keyed map (unknown names are an error).
    pub fn from_map(m: &BTreeMap<String, ErrorEntry>) -> Result<ErrorCounts, String> {
        let mut e = ErrorCounts::default();
        for (k, v) in m {
            let c = ErrorClass::from_name(k).ok_or_else(|| format!("unknown error class {k:?}"))?;
            e.counts[c as usize] += v.count;
            e.examples[c as usize] = Some(v.example.clone());
        }
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for c in ALL_CLASSES {
            assert_eq!(ErrorClass::from_name(c.name()), Some(c));
            assert!(seen.insert(c.name()));
            assert_eq!(ALL_CLASSES[c as usize], c);
        }
    }

    #[test]
    fn first_example_wins_and_merge_sums() {
        let mut a = ErrorCounts::default();
        a.add(ErrorClass::EofMidBody, 2, || "first".into());
        a.add(ErrorClass::EofMidBody, 1, || "second".into());
        let mut b = ErrorCounts::default();
        b.add(ErrorClass::EofMidBody, 3, || "other".into());
        b.add(ErrorClass::QueueOverflow, 1, || "q".into());
        a.merge(&b);
        let m = a.to_map();
        assert_eq!(m["eof_mid_body"].count, 6);
        assert_eq!(m["eof_mid_body"].example, "first");
        assert_eq!(m["queue_overflow"].count, 1);
        assert_eq!(a.total(), 7);
        let back = ErrorCounts::from_map(&m).unwrap();
        assert_eq!(back.to_map(), m);
    }

    #[test]
    fn connect_errors_classify() {
        let e = std::io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(
            ErrorClass::from_connect_error(&e),
            ErrorClass::ConnectRefused
        );
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert_eq!(ErrorClass::from_connect_error(&e), ErrorClass::FdExhaustion);
        let e = std::io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
        assert_eq!(
            ErrorClass::from_connect_error(&e),
            ErrorClass::AddrUnavailable
        );
    }
}
