//! The load spec (JSON in) and its validated, prepared form (`Plan`).

use crate::dial::Target;
use crate::rate::RatePhase;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, ToSocketAddrs};
use std::path::PathBuf;

/// How open-loop arrivals are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Arrival {
    /// Evenly spaced sends at `rate` per second.
    #[default]
    Constant,
    /// Exponentially distributed gaps (a Poisson process) with mean `1/rate`, seeded.
    Poisson,
}

/// The protocol spoken on every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// HTTP/1.1 (`pipeline` requests in flight per connection).
    #[default]
    Http1,
    /// HTTP/2 over cleartext TCP with prior knowledge (`streams` in flight per connection).
    H2c,
}

/// Which I/O backend drives the sockets (defined beside the probe that resolves `auto`).
pub use crate::uring::Io;

/// What to run. Field documentation: docs/load-engine.md.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LoadSpec {
    pub url: String,
    pub method: String,
    pub headers: Vec<(String, String)>,
    /// Request body as UTF-8 text (compatibility form; `body_b64` carries any bytes).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub body: String,
    /// Request body as base64 (standard alphabet, padded): any bytes. At most one of
    /// `body` and `body_b64` may be non-empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub body_b64: String,
    pub connections: u32,
    pub threads: u32,
    pub duration_s: Option<f64>,
    pub max_requests: Option<u64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub connect_timeout_s: Option<f64>,
    pub keepalive: bool,
    /// Closed loop: the share (0..1) of the connections that open a new connection for
    /// every request (arriving clients); the rest stay keep-alive. 0: none.
    #[serde(skip_serializing_if = "is_zero")]
    pub fresh_share: f64,
    pub pipeline: u32,
    /// Keep-alive connections: close each connection after this many responses and open a
    /// new one (httperf's `--num-calls`), HTTP/1.1 and h2c alike. 0: never.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub requests_per_connection: u64,
    /// `http1` or `h2c` (docs/http2.md).
    pub protocol: Protocol,
    /// h2c: concurrent streams (requests in flight) per connection.
    pub streams: u32,
    pub rate: Option<f64>,
    /// Open loop with a rate that changes: ramps and steps (docs/load-engine.md). Empty:
    /// none (`rate` is the constant case; at most one of the two is set). Read under its
    /// former name `rate_profile` too, so specs stored before the rename still load.
    #[serde(skip_serializing_if = "Vec::is_empty", alias = "rate_profile")]
    pub rate_phases: Vec<RatePhase>,
    pub arrival: Arrival,
    pub seed: u64,
    pub queue_limit: Option<u64>,
    pub cpus: Vec<usize>,
    pub expect_status: Vec<u16>,
    pub expect_body: Option<String>,
    /// Fault clients run beside the load, from the start of the warm-up to the end
    /// (docs/faults.md). Empty: none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<crate::faults::FaultSpec>,
    /// Wall-clock instant (Unix nanoseconds) at which the run starts: the engine waits for
    /// it, so load agents on several hosts start together. None: start at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_at_unix_ns: Option<u64>,
    pub io: Io,
    /// Local IP addresses the TCP connections are spread over, in turn. Empty: automatic
    /// (several 127.0.0.x on a loopback target with many connections, see `dial.rs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub source_addresses: Vec<String>,
    /// Connect to this unix-domain socket instead of the URL's host and port (the URL still
    /// gives the path and the Host header), as curl's `--unix-socket`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unix_socket: Option<String>,
}

impl Default for LoadSpec {
    fn default() -> Self {
        LoadSpec {
            url: String::new(),
            method: "GET".into(),
            headers: Vec::new(),
            body: String::new(),
            body_b64: String::new(),
            connections: 64,
            threads: 1,
            duration_s: None,
            max_requests: None,
            warmup_s: 0.0,
            timeout_s: 5.0,
            connect_timeout_s: None,
            keepalive: true,
            fresh_share: 0.0,
            pipeline: 1,
            requests_per_connection: 0,
            protocol: Protocol::Http1,
            streams: 1,
            rate: None,
            rate_phases: Vec::new(),
            arrival: Arrival::Constant,
            seed: 1,
            queue_limit: None,
            cpus: Vec::new(),
            expect_status: Vec::new(),
            expect_body: None,
            faults: Vec::new(),
            start_at_unix_ns: None,
            io: Io::Auto,
            source_addresses: Vec::new(),
            unix_socket: None,
        }
    }
}

/// Load model of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// N keep-alive connections, `pipeline` requests in flight on each.
    Closed,
    /// A new connection for every request (no keep-alive).
    ConnectionPerRequest,
    /// Sends at a target rate over a bounded pool, with a bounded queue.
    Open,
}

/// Default duration when neither `duration_s` nor `max_requests` is given.
pub const DEFAULT_DURATION_S: f64 = 10.0;
/// Hard upper bound on any run, so the engine always stops by itself.
pub const MAX_DURATION_S: f64 = 24.0 * 3600.0;

/// A validated spec with its target resolved and its request serialised.
#[derive(Debug, Clone)]
pub struct Plan {
    pub spec: LoadSpec,
    pub mode: Mode,
    /// Where connections go (TCP address and source addresses, or a unix socket).
    pub target: Target,
    /// One serialised request (head and body).
    pub request: Vec<u8>,
    pub is_head: bool,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub timeout_ns: u64,
    pub connect_timeout_ns: u64,
    pub queue_limit: u64,
    pub expect_body: Option<Vec<u8>>,
    /// h2c: the request's header block (HPACK, encoded once) and body; None: HTTP/1.1.
    pub h2: Option<H2Request>,
    /// The io_uring backend and what it may use; None: epoll. Set by the engine at start.
    pub uring: Option<crate::uring::Support>,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

pub(crate) fn bad(field: &str, msg: impl std::fmt::Display) -> String {
    format!("{field}: {msg}")
}

fn secs_to_ns(s: f64) -> u64 {
    (s * 1e9).round() as u64
}

impl LoadSpec {
    /// Which load model this spec selects.
    pub fn mode(&self) -> Mode {
        if self.rate.is_some() || !self.rate_phases.is_empty() {
            Mode::Open
        } else if !self.keepalive {
            Mode::ConnectionPerRequest
        } else {
            Mode::Closed
        }
    }

    /// Parse a spec from JSON. Errors name the field: `"connections: invalid type: ..."`
    /// (serde alone names unknown fields but not a field whose value has the wrong type).
    pub fn from_json(text: &str) -> Result<LoadSpec, String> {
        use serde_json::Value;
        let value: Value =
            serde_json::from_str(text).map_err(|e| format!("load spec: not JSON: {e}"))?;
        let Value::Object(fields) = &value else {
            return Err("load spec: expected a JSON object".into());
        };
        serde_json::from_value(value.clone()).map_err(|whole| {
            // Every field has a default, so each field can be parsed on its own.
            for (name, v) in fields {
                let alone = Value::Object([(name.clone(), v.clone())].into_iter().collect());
                if let Err(e) = serde_json::from_value::<LoadSpec>(alone) {
                    let msg = e.to_string();
                    return match msg.starts_with("unknown field") {
                        true => bad(name, "unknown load spec field"),
                        false => bad(name, msg),
                    };
                }
            }
            format!("load spec: {whole}")
        })
    }

    /// Check every field (without resolving the host). Errors name the field:
    /// `"connections: must be >= 1"`.
    pub fn validate(&self) -> Result<(), String> {
        let endpoint = self.endpoint()?;
        if endpoint.unix_socket.is_some() {
            if !self.source_addresses.is_empty() {
                return Err(bad(
                    "source_addresses",
                    "apply to TCP targets only, not to a unix socket",
                ));
            }
            if !self.faults.is_empty() {
                return Err(bad("faults", "fault clients need a TCP target"));
            }
        }
        self.source_ips()?;
        if !valid_token(&self.method) {
            return Err(bad(
                "method",
                format!("{:?} is not a valid HTTP method", self.method),
            ));
        }
        if self.connections == 0 {
            return Err(bad("connections", "must be >= 1"));
        }
        if self.connections > 1_000_000 {
            return Err(bad("connections", "must be <= 1000000"));
        }
        if self.threads == 0 {
            return Err(bad("threads", "must be >= 1"));
        }
        if self.threads > 1024 {
            return Err(bad("threads", "must be <= 1024"));
        }
        if self.threads > self.connections {
            return Err(bad(
                "threads",
                format!(
                    "{} threads for {} connections: each thread needs at least one connection",
                    self.threads, self.connections
                ),
            ));
        }
        if self.pipeline == 0 || self.pipeline > 1024 {
            return Err(bad("pipeline", "must be between 1 and 1024"));
        }
        if self.pipeline > 1 && self.mode() != Mode::Closed {
            return Err(bad(
                "pipeline",
                "pipelining needs keep-alive connections in a closed loop (no rate, keepalive on)",
            ));
        }
        self.check_protocol()?;
        if !(0.0..=1.0).contains(&self.fresh_share) {
            return Err(bad("fresh_share", "must be between 0 and 1"));
        }
        if self.fresh_share > 0.0 && (self.mode() != Mode::Closed || self.pipeline > 1) {
            return Err(bad(
                "fresh_share",
                "fresh connections need the closed loop with keep-alive and no pipelining",
            ));
        }
        if self.requests_per_connection > 0 && !self.keepalive {
            return Err(bad(
                "requests_per_connection",
                "needs keep-alive connections (keepalive false is one request per connection)",
            ));
        }
        let finite_pos = |v: f64| v.is_finite() && v > 0.0;
        if let Some(d) = self.duration_s {
            if !finite_pos(d) || d > MAX_DURATION_S {
                return Err(bad(
                    "duration_s",
                    format!("must be > 0 and <= {MAX_DURATION_S} s"),
                ));
            }
        }
        if let Some(0) = self.max_requests {
            return Err(bad("max_requests", "must be >= 1"));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0 && self.warmup_s <= 3600.0) {
            return Err(bad("warmup_s", "must be between 0 and 3600 s"));
        }
        if !finite_pos(self.timeout_s) || self.timeout_s > 3600.0 {
            return Err(bad("timeout_s", "must be > 0 and <= 3600 s"));
        }
        let connect_timeout = self.connect_timeout_s.unwrap_or(self.timeout_s);
        if !finite_pos(connect_timeout) || connect_timeout > 3600.0 {
            return Err(bad("connect_timeout_s", "must be > 0 and <= 3600 s"));
        }
        if let Some(r) = self.rate {
            if !finite_pos(r) || r > 10_000_000.0 {
                return Err(bad("rate", "must be > 0 and <= 10000000 requests/s"));
            }
        }
        self.check_rate_phases()?;
        if self.queue_limit.is_some() && self.mode() != Mode::Open {
            return Err(bad(
                "queue_limit",
                "only applies to open loop (set rate or rate_phases)",
            ));
        }
        if let Some(&c) = self.cpus.iter().find(|&&c| c >= libc::CPU_SETSIZE as usize) {
            return Err(bad("cpus", format!("cpu {c} is out of range")));
        }
        for &s in &self.expect_status {
            if !(100..=999).contains(&s) {
                return Err(bad(
                    "expect_status",
                    format!("{s} is not an HTTP status code"),
                ));
            }
        }
        for (name, value) in &self.headers {
            if !valid_token(name) {
                return Err(bad(
                    "headers",
                    format!("{name:?} is not a valid header name"),
                ));
            }
            if value.contains('\r') || value.contains('\n') {
                return Err(bad(
                    "headers",
                    format!("value of {name:?} contains a line break"),
                ));
            }
            let lname = name.to_ascii_lowercase();
            if lname == "content-length" || lname == "transfer-encoding" {
                return Err(bad(
                    "headers",
                    format!("{name} is set by the engine from the body; do not pass it"),
                ));
            }
            if lname == "connection" {
                return Err(bad(
                    "headers",
                    "Connection is set by the engine (use keepalive)",
                ));
            }
        }
        self.body_bytes()?;
        for f in &self.faults {
            f.validate().map_err(|e| bad("faults", e))?;
        }
        Ok(())
    }

    /// Validate every field and prepare the run. Errors name the field: `"connections: must be >= 1"`.
    pub fn plan(&self) -> Result<Plan, String> {
        self.validate()?;
        let Endpoint {
            host,
            port,
            path,
            unix_socket,
        } = self.endpoint()?;
        let mut has_host = false;
        let mut head = format!("{} {} HTTP/1.1\r\n", self.method, path);
        for (name, value) in &self.headers {
            has_host |= name.eq_ignore_ascii_case("host");
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        if !has_host {
            let h = if host.contains(':') {
                format!("[{host}]")
            } else {
                host.clone()
            };
            let h = if port == 80 { h } else { format!("{h}:{port}") };
            head.push_str(&format!("Host: {h}\r\n"));
        }
        let body = self.body_bytes()?;
        let method_has_body = matches!(self.method.as_str(), "POST" | "PUT" | "PATCH");
        if !body.is_empty() || method_has_body {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        if !self.keepalive {
            head.push_str("Connection: close\r\n");
        }
        head.push_str("\r\n");
        let mut request = head.into_bytes();
        request.extend_from_slice(&body);
        let h2 = self.h2_request(&host, port, &path, &body, method_has_body)?;

        let target = match unix_socket {
            Some((field, path)) => unix_target(field, path)?,
            None => self.tcp_target(&host, port)?,
        };

        let duration_s = self.planned_duration_s().unwrap_or(MAX_DURATION_S);
        let queue_limit = match self.peak_rate() {
            Some(r) => self.queue_limit.unwrap_or_else(|| {
                // Default: one timeout's worth of arrivals at the peak rate, at least 1000.
                ((r * self.timeout_s) as u64).max(1000)
            }),
            None => 0,
        };
        Ok(Plan {
            spec: self.clone(),
            mode: self.mode(),
            target,
            request,
            is_head: self.method == "HEAD",
            duration_ns: secs_to_ns(duration_s),
            warmup_ns: secs_to_ns(self.warmup_s),
            timeout_ns: secs_to_ns(self.timeout_s),
            connect_timeout_ns: secs_to_ns(self.connect_timeout_s.unwrap_or(self.timeout_s)),
            queue_limit,
            expect_body: self.expect_body.as_ref().map(|b| b.as_bytes().to_vec()),
            h2,
            uring: None,
        })
    }

    /// Host (for the Host header), port, request path and, for a unix socket target, the
    /// field that named the socket and its path.
    fn endpoint(&self) -> Result<Endpoint, String> {
        if let Some(rest) = self.url.strip_prefix("unix:") {
            if self.unix_socket.is_some() {
                return Err(bad(
                    "unix_socket",
                    "the url already names a unix socket (unix:PATH:/request-path)",
                ));
            }
            let (socket, path) = match rest.rfind(":/") {
                Some(i) => (&rest[..i], &rest[i + 1..]),
                None => (rest, "/"),
            };
            if socket.is_empty() || path.contains([' ', '\r', '\n']) {
                return Err(bad(
                    "url",
                    format!("{:?}: expected unix:/path/to.sock:/request-path", self.url),
                ));
            }
            return Ok(Endpoint {
                host: "localhost".into(),
                port: 80,
                path: path.into(),
                unix_socket: Some(("url", socket.into())),
            });
        }
        let (host, port, path) = parse_url(&self.url)?;
        if self.unix_socket.as_deref() == Some("") {
            return Err(bad("unix_socket", "must be a path, not empty"));
        }
        Ok(Endpoint {
            host,
            port,
            path,
            unix_socket: self.unix_socket.clone().map(|p| ("unix_socket", p)),
        })
    }

    /// `source_addresses` parsed.
    fn source_ips(&self) -> Result<Vec<IpAddr>, String> {
        self.source_addresses
            .iter()
            .map(|a| {
                a.parse::<IpAddr>()
                    .map_err(|_| bad("source_addresses", format!("{a:?} is not an IP address")))
            })
            .collect()
    }

    /// Resolve the host and check the source addresses against it.
    fn tcp_target(&self, host: &str, port: u16) -> Result<Target, String> {
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| bad("url", format!("cannot resolve {host:?}: {e}")))?
            .next()
            .ok_or_else(|| bad("url", format!("{host:?} resolves to no address")))?;
        let sources = self.source_ips()?;
        if let Some(ip) = sources.iter().find(|ip| ip.is_ipv4() != addr.is_ipv4()) {
            return Err(bad(
                "source_addresses",
                format!("{ip} is not of the target's address family ({addr})"),
            ));
        }
        crate::dial::check_sources(&sources).map_err(|e| bad("source_addresses", e))?;
        Ok(Target::tcp(addr, sources, self.connections))
    }

    /// The request body as bytes: `body_b64` decoded, or `body` as UTF-8.
    pub fn body_bytes(&self) -> Result<Vec<u8>, String> {
        use base64::Engine as _;
        match (self.body.is_empty(), self.body_b64.is_empty()) {
            (_, true) => Ok(self.body.as_bytes().to_vec()),
            (true, false) => base64::engine::general_purpose::STANDARD
                .decode(self.body_b64.trim())
                .map_err(|e| bad("body_b64", format!("not valid base64: {e}"))),
            (false, false) => Err(bad(
                "body_b64",
                "give the body either as text (body) or as base64 (body_b64), not both",
            )),
        }
    }

    /// Number of file descriptors the run needs (sockets, pollers, timers, margin).
    pub fn fds_needed(&self) -> u64 {
        self.connections as u64
            + 3 * self.threads as u64
            + 64
            + crate::faults::fds_needed(&self.faults)
    }
}

/// What the URL (and `unix_socket`) say about where to connect.
struct Endpoint {
    host: String,
    port: u16,
    path: String,
    unix_socket: Option<(&'static str, String)>,
}

/// A unix socket target, checked to exist (errors name `field`, the one that gave the path).
fn unix_target(field: &str, path: String) -> Result<Target, String> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(&path) {
        Ok(m) if m.file_type().is_socket() => Ok(Target::Unix(PathBuf::from(path))),
        Ok(_) => Err(bad(field, format!("{path} is not a unix socket"))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(bad(field, format!("unix socket {path} does not exist")))
        }
        Err(e) => Err(bad(field, format!("unix socket {path}: {e}"))),
    }
}

/// Parse and validate a spec (JSON) with the engine's own rules and return it with every
/// default filled in (JSON): the one check every caller (Python, remote agents) goes through.
/// Errors name the field, on one line: `"connections: must be >= 1"`.
pub fn normalise_spec_json(spec_json: &str) -> Result<String, String> {
    let spec = LoadSpec::from_json(spec_json)?;
    spec.validate()?;
    serde_json::to_string(&spec).map_err(|e| format!("load spec: {e}"))
}

mod protocol;
mod url;
pub use protocol::H2Request;
pub use url::parse_url;
use url::valid_token;
mod rate_phases;
#[cfg(test)]
mod tests;
