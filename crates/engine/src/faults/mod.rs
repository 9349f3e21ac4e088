//! Fault clients: misbehaving HTTP/1.1 clients that run beside the measured, well-behaved
//! stream, so a study can show how a server copes with slow, broken and hostile clients.
//!
//! The module is self-contained: [`run_faults`] drives every configured fault kind from one
//! thread with a `mio` event loop (non-blocking sockets), bounded in connections, memory and
//! time, and returns a [`FaultReport`] saying what each fault client saw. [`FaultSession`]
//! runs it on a background thread and can be stopped at any time.
//!
//! Kinds (`FaultKind`, kebab-case in JSON):
//! - held connections (amount = `connections`, kept open, reopened when the server drops one):
//!   `slow-headers` (slowloris), `slow-body`, `slow-reader`, `idle`, `ws-no-read` (a
//!   WebSocket client that completes the upgrade and then never reads);
//! - events (amount = `rate` per second or `count` one after another): `reset-mid-request`,
//!   `reset-mid-response`, `half-close`, `churn`, and the malformed requests
//!   `bad-request-line`, `oversized-headers`, `invalid-header-bytes`, `cl-te-conflict`,
//!   `malformed-chunked`, `smuggle`.
//!
//! Malformed requests are classified by the server's first answer: `rejected` (4xx),
//! `server_error` (5xx), `closed` (closed or reset without an answer), `timed_out` (no answer in
//! time), or `accepted` (1xx-3xx: the server took it for a valid request). Accepted ones, and
//! smuggled requests that got their own response, are listed in [`FaultReport::findings`].

mod conn;
mod driver;
mod requests;
mod response;
mod sock;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use driver::run_faults;

/// Every kind of fault client.
#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum FaultKind {
    /// Slowloris: a request line, then one header line every `interval_ms`, never finishing.
    SlowHeaders,
    /// A POST whose body (1 MiB announced) is trickled one byte every `interval_ms`.
    SlowBody,
    /// Pipelines `depth` requests, with a tiny receive buffer, and reads `read_bytes` every
    /// `interval_ms`.
    SlowReader,
    /// Keep-alive connections that never send a byte.
    Idle,
    /// Sends half a request head, then resets (SO_LINGER 0).
    ResetMidRequest,
    /// Sends `depth` pipelined requests and resets as soon as the response starts.
    ResetMidResponse,
    /// Sends a whole request, then shuts down its writing side.
    HalfClose,
    /// Opens, sends one `Connection: close` request, reads the answer, closes.
    Churn,
    /// A request line that is not HTTP (four parts).
    BadRequestLine,
    /// A single 128 KiB header.
    OversizedHeaders,
    /// Control bytes in a header name and value.
    InvalidHeaderBytes,
    /// Both `Content-Length` and `Transfer-Encoding: chunked`, disagreeing.
    ClTeConflict,
    /// `Transfer-Encoding: chunked` with a chunk size that is not hexadecimal.
    MalformedChunked,
    /// CL.TE request smuggling: a second, hidden request inside the body.
    Smuggle,
    /// A WebSocket client (SO_RCVBUF 4 KiB) that completes the upgrade, then sends a 16 KiB
    /// message every `interval_ms` (while the server takes them) and never reads: the
    /// echoes pile up on the server's side.
    WsNoRead,
}

impl FaultKind {
    /// All kinds, in a stable order.
    pub const ALL: [FaultKind; 15] = [
        FaultKind::SlowHeaders,
        FaultKind::SlowBody,
        FaultKind::SlowReader,
        FaultKind::Idle,
        FaultKind::ResetMidRequest,
        FaultKind::ResetMidResponse,
        FaultKind::HalfClose,
        FaultKind::Churn,
        FaultKind::BadRequestLine,
        FaultKind::OversizedHeaders,
        FaultKind::InvalidHeaderBytes,
        FaultKind::ClTeConflict,
        FaultKind::MalformedChunked,
        FaultKind::Smuggle,
        FaultKind::WsNoRead,
    ];

    /// The kebab-case name used in JSON and in `--faults` mixes.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::SlowHeaders => "slow-headers",
            FaultKind::SlowBody => "slow-body",
            FaultKind::SlowReader => "slow-reader",
            FaultKind::Idle => "idle",
            FaultKind::ResetMidRequest => "reset-mid-request",
            FaultKind::ResetMidResponse => "reset-mid-response",
            FaultKind::HalfClose => "half-close",
            FaultKind::Churn => "churn",
            FaultKind::BadRequestLine => "bad-request-line",
            FaultKind::OversizedHeaders => "oversized-headers",
            FaultKind::InvalidHeaderBytes => "invalid-header-bytes",
            FaultKind::ClTeConflict => "cl-te-conflict",
            FaultKind::MalformedChunked => "malformed-chunked",
            FaultKind::Smuggle => "smuggle",
            FaultKind::WsNoRead => "ws-no-read",
        }
    }

    /// Held kinds keep `connections` open; the others are events at a rate or a count.
    pub fn is_held(self) -> bool {
        matches!(
            self,
            FaultKind::SlowHeaders
                | FaultKind::SlowBody
                | FaultKind::SlowReader
                | FaultKind::Idle
                | FaultKind::WsNoRead
        )
    }

    /// Malformed kinds have their answer classified (accepted ones are findings).
    pub fn is_malformed(self) -> bool {
        matches!(
            self,
            FaultKind::BadRequestLine
                | FaultKind::OversizedHeaders
                | FaultKind::InvalidHeaderBytes
                | FaultKind::ClTeConflict
                | FaultKind::MalformedChunked
                | FaultKind::Smuggle
        )
    }

    /// Default pause between trickled pieces (slow kinds) in milliseconds.
    fn default_interval_ms(self) -> u64 {
        match self {
            FaultKind::SlowHeaders => 2000,
            FaultKind::SlowBody => 1000,
            FaultKind::SlowReader | FaultKind::WsNoRead => 100,
            _ => 0,
        }
    }
}

/// One fault client kind and how much of it to run.
///
/// Exactly one amount: `connections` (held kinds), `rate` (attempts per second) or `count`
/// (attempts one after another) for event kinds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub kind: FaultKind,
    /// Held kinds: connections kept open at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u32>,
    /// Event kinds: attempts started per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Event kinds: total attempts, each started when the previous one ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Slow kinds: milliseconds between trickled pieces (default: slow-headers 2000,
    /// slow-body 1000, slow-reader and ws-no-read 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// Request path (default: the target's path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Event kinds: how long to wait for the server's answer (default 5000 ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// slow-reader and reset-mid-response: pipelined requests per connection (default 32 / 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// slow-reader: bytes read per interval (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bytes: Option<u32>,
}

/// Upper bounds that keep the fault clients bounded whatever the spec says.
pub const MAX_CONNECTIONS_PER_KIND: u32 = 4096;
/// Rate cap per kind, attempts per second.
pub const MAX_RATE: f64 = 20_000.0;
/// At most this many event attempts of one kind in flight; further starts are `skipped`.
pub const MAX_INFLIGHT_EVENTS: u32 = 512;

impl FaultSpec {
    /// A spec with only a kind and an amount.
    pub fn new(kind: FaultKind) -> Self {
        FaultSpec {
            kind,
            connections: None,
            rate: None,
            count: None,
            interval_ms: None,
            path: None,
            timeout_ms: None,
            depth: None,
            read_bytes: None,
        }
    }

    /// Checks the amount and parameters; the error names the kind and the field.
    pub fn validate(&self) -> Result<(), String> {
        let k = self.kind.name();
        let amounts = [
            self.connections.is_some(),
            self.rate.is_some(),
            self.count.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if amounts != 1 {
            return Err(format!(
                "fault {k}: give exactly one of connections, rate, count (got {amounts})"
            ));
        }
        if self.kind.is_held() {
            match self.connections {
                Some(n) if (1..=MAX_CONNECTIONS_PER_KIND).contains(&n) => {}
                Some(n) => {
                    return Err(format!(
                        "fault {k}: connections must be 1..={MAX_CONNECTIONS_PER_KIND}, got {n}"
                    ))
                }
                None => {
                    return Err(format!(
                        "fault {k}: holds connections, so its amount is `connections` (e.g. {k}=50)"
                    ))
                }
            }
        } else {
            if self.connections.is_some() {
                return Err(format!(
                    "fault {k}: is an event, so its amount is a rate (e.g. {k}=10/s) or a count"
                ));
            }
            if let Some(r) = self.rate {
                if !(r.is_finite() && r > 0.0 && r <= MAX_RATE) {
                    return Err(format!(
                        "fault {k}: rate must be in (0, {MAX_RATE}], got {r}"
                    ));
                }
            }
            if self.count == Some(0) {
                return Err(format!("fault {k}: count must be at least 1"));
            }
        }
        if let Some(p) = &self.path {
            if !p.starts_with('/') || p.bytes().any(|b| b <= b' ' || b == 0x7f) {
                return Err(format!(
                    "fault {k}: path must start with / and have no spaces or control bytes"
                ));
            }
        }
        if self.interval_ms == Some(0) {
            return Err(format!("fault {k}: interval_ms must be at least 1"));
        }
        if matches!(self.depth, Some(0) | Some(1025..)) {
            return Err(format!("fault {k}: depth must be 1..=1024"));
        }
        if matches!(self.read_bytes, Some(0) | Some(65537..)) {
            return Err(format!("fault {k}: read_bytes must be 1..=65536"));
        }
        if self.timeout_ms == Some(0) {
            return Err(format!("fault {k}: timeout_ms must be at least 1"));
        }
        Ok(())
    }

    fn interval(&self) -> Duration {
        Duration::from_millis(
            self.interval_ms
                .unwrap_or_else(|| self.kind.default_interval_ms())
                .max(1),
        )
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(5000))
    }
}

/// Where the fault clients go: the server's address, the `Host` header and the default path.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct FaultTarget {
    pub addr: SocketAddr,
    pub host: String,
    pub path: String,
}

/// How one fault attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered; the first response's status code.
    Response(u16),
    /// The server closed the connection without answering.
    ClosedByServer,
    /// The server reset the connection (or the write side broke) without answering.
    ResetByServer,
    /// No answer within the attempt's timeout.
    TimedOut,
    /// Still open, unanswered, when the fault phase ended (a held connection the server kept).
    OpenAtEnd,
    /// Could not connect.
    ConnectFailed,
    /// The client ended it on purpose (the reset kinds).
    AbortedByClient,
}

impl Outcome {
    fn key(self) -> &'static str {
        match self {
            Outcome::Response(_) => "response",
            Outcome::ClosedByServer => "closed_by_server",
            Outcome::ResetByServer => "reset_by_server",
            Outcome::TimedOut => "timed_out",
            Outcome::OpenAtEnd => "open_at_end",
            Outcome::ConnectFailed => "connect_failed",
            Outcome::AbortedByClient => "aborted_by_client",
        }
    }
}

/// Summary of how long connections were held (milliseconds, connect to end).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct HeldSummary {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// Classification of the answers to malformed requests.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct MalformedClasses {
    /// Answered 4xx: correct.
    pub rejected: u64,
    /// Answered 5xx.
    pub server_error: u64,
    /// Closed or reset without an answer: acceptable.
    pub closed: u64,
    /// No answer before the timeout or the end of the phase.
    pub timed_out: u64,
    /// Answered 1xx-3xx: taken for a valid request (a finding).
    pub accepted: u64,
}

/// What the fault clients of one kind saw.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct KindReport {
    /// The spec that ran.
    pub spec: Option<FaultSpec>,
    /// Connections attempted.
    pub attempts: u64,
    /// Rate kinds: starts skipped because `MAX_INFLIGHT_EVENTS` were already in flight.
    pub skipped: u64,
    /// Count per outcome (`response`, `closed_by_server`, `reset_by_server`, `timed_out`,
    /// `open_at_end`, `connect_failed`, `aborted_by_client`).
    pub outcomes: BTreeMap<String, u64>,
    /// Status codes of the first response on each connection that got one.
    pub status_counts: BTreeMap<u16, u64>,
    /// Responses beyond the first on one connection (smuggle: hidden requests answered).
    pub extra_responses: u64,
    /// How long the server held each connection (connect to close/answer/end).
    pub held: HeldSummary,
    /// Malformed kinds only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub malformed: Option<MalformedClasses>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// First transport error seen, for diagnosis.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
}

/// A malformed request the server accepted, or a smuggled request it answered.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Finding {
    pub kind: FaultKind,
    /// `accepted` (a 1xx-3xx answer) or `smuggled-request-answered`.
    pub what: String,
    /// How many attempts showed it.
    pub count: u64,
    /// `accepted`: the first response's status; `smuggled-request-answered`: the status
    /// of the hidden request's answer (the second response on the connection).
    pub status: u16,
    /// The request sent (escaped, truncated; `... (N bytes)` gives the whole length sent).
    pub request: String,
    /// The start of what came back (escaped, truncated).
    pub response: String,
}

/// Everything the fault clients saw in one run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct FaultReport {
    /// Seconds the fault phase ran.
    pub duration_s: f64,
    /// Per kind, keyed by the kind's name.
    pub kinds: BTreeMap<String, KindReport>,
    /// Malformed requests accepted and smuggled requests answered: each is a defect.
    pub findings: Vec<Finding>,
    /// True when the phase ended because `stop` was set (rather than at the deadline).
    pub stopped: bool,
}

/// The JSON document accepted by [`FaultSession::start_json`].
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(deny_unknown_fields)]
pub struct FaultSessionSpec {
    /// `host:port` of the server (resolved; loopback expected).
    pub target: String,
    /// `Host` header (default: `target`).
    #[serde(default)]
    pub host: Option<String>,
    /// Default request path (default `/`).
    #[serde(default)]
    pub path: Option<String>,
    /// Hard upper bound on the fault phase in seconds (default 600).
    #[serde(default)]
    pub max_duration_s: Option<f64>,
    pub faults: Vec<FaultSpec>,
}

/// Fault clients running on a background thread until [`FaultSession::stop`].
pub struct FaultSession {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<FaultReport>>,
}

impl FaultSession {
    /// Validates the specs and starts the fault clients on their own thread.
    pub fn start(
        target: FaultTarget,
        specs: Vec<FaultSpec>,
        max_duration: Duration,
    ) -> Result<Self, String> {
        for s in &specs {
            s.validate()?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let deadline = Instant::now() + max_duration;
        let handle = std::thread::Builder::new()
            .name("pwb-faults".into())
            .spawn(move || run_faults(&target, &specs, stop2, deadline))
            .map_err(|e| format!("cannot start the fault thread: {e}"))?;
        Ok(FaultSession {
            stop,
            handle: Some(handle),
        })
    }

    /// Parses a [`FaultSessionSpec`] JSON document and starts the session.
    pub fn start_json(spec_json: &str) -> Result<Self, String> {
        let spec: FaultSessionSpec =
            serde_json::from_str(spec_json).map_err(|e| format!("fault spec: {e}"))?;
        let addr = spec
            .target
            .to_socket_addrs()
            .map_err(|e| format!("fault spec: target {:?}: {e}", spec.target))?
            .next()
            .ok_or_else(|| format!("fault spec: target {:?} resolves to nothing", spec.target))?;
        let path = spec.path.unwrap_or_else(|| "/".into());
        if !path.starts_with('/') {
            return Err(format!("fault spec: path must start with /, got {path:?}"));
        }
        let max = spec.max_duration_s.unwrap_or(600.0);
        if !(max.is_finite() && max > 0.0) {
            return Err(format!(
                "fault spec: max_duration_s must be positive, got {max}"
            ));
        }
        let target = FaultTarget {
            addr,
            host: spec.host.unwrap_or_else(|| spec.target.clone()),
            path,
        };
        Self::start(target, spec.faults, Duration::from_secs_f64(max))
    }

    /// True while the fault thread runs (it ends by itself at `max_duration`).
    pub fn is_running(&self) -> bool {
        self.handle.as_ref().is_some_and(|h| !h.is_finished())
    }

    /// Stops the fault clients (within ~100 ms) and returns what they saw.
    pub fn stop(&mut self) -> FaultReport {
        self.stop.store(true, Ordering::SeqCst);
        match self.handle.take() {
            Some(h) => h.join().unwrap_or_default(),
            None => FaultReport::default(),
        }
    }
}

impl Drop for FaultSession {
    fn drop(&mut self) {
        if self.handle.is_some() {
            self.stop();
        }
    }
}

/// Starts fault clients beside a load run on `url` (already resolved to `addr`), or nothing
/// when `specs` is empty. They run until stopped, at most `max`.
pub fn start_beside(
    url: &str,
    addr: SocketAddr,
    specs: &[FaultSpec],
    max: Duration,
) -> Result<Option<FaultSession>, String> {
    if specs.is_empty() {
        return Ok(None);
    }
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("ws://"))
        .unwrap_or(url);
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let target = FaultTarget {
        addr,
        host: authority.to_string(),
        path: path.to_string(),
    };
    FaultSession::start(target, specs.to_vec(), max)
        .map(Some)
        .map_err(|e| format!("faults: {e}"))
}

/// File descriptors the fault clients of `specs` may hold at once.
pub fn fds_needed(specs: &[FaultSpec]) -> u64 {
    let per = |s: &FaultSpec| -> u64 {
        if let Some(n) = s.connections {
            return u64::from(n);
        }
        match s.rate {
            Some(r) => ((r * s.timeout().as_secs_f64()).ceil() as u64 + 1)
                .min(u64::from(MAX_INFLIGHT_EVENTS)),
            None => 1,
        }
    };
    specs.iter().map(per).sum::<u64>() + if specs.is_empty() { 0 } else { 2 }
}

/// JSON of a report (stable field names; see docs/faults.md).
pub fn report_to_json(report: &FaultReport) -> String {
    serde_json::to_string(report).unwrap_or_else(|_| "{}".into())
}
