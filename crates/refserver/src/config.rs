//! `RefServerConfig`: everything the reference server can be told, with validation.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the server answers a request: normally, or with one of the misbehaviours a load
/// generator must classify. Serialised in kebab-case (`"close-mid-response"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A valid response (`Hello, World!`, or what the query asks for).
    #[default]
    Normal,
    /// A valid response with `Transfer-Encoding: chunked` (for parser tests).
    Chunked,
    /// Headers announcing a body, half of it, then a clean close.
    CloseMidResponse,
    /// An invalid status line, then a clean close.
    GarbageStatus,
    /// A status line followed by header lines forever (paced, never spins).
    EndlessHeaders,
    /// `Content-Length: 10000000000` and the body streamed as fast as the client reads.
    HugeBody,
    /// A valid response sent one byte every drip interval.
    Drip,
    /// `SO_LINGER 0` close: the client gets an RST instead of a response.
    Reset,
    /// `Transfer-Encoding: chunked` with an invalid chunk size, then a clean close.
    BadChunked,
    /// Read the request, never answer, keep the socket open.
    NoResponse,
    /// Read the request, then a clean close: the client sees EOF before any header.
    CloseBeforeResponse,
}

impl Mode {
    /// Every mode, in a stable order (the order of `/__stats` `modes`).
    pub const ALL: [Mode; 11] = [
        Mode::Normal,
        Mode::Chunked,
        Mode::CloseMidResponse,
        Mode::GarbageStatus,
        Mode::EndlessHeaders,
        Mode::HugeBody,
        Mode::Drip,
        Mode::Reset,
        Mode::BadChunked,
        Mode::NoResponse,
        Mode::CloseBeforeResponse,
    ];

    /// The kebab-case name used in URLs (`/misbehave/<name>`), flags and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Normal => "normal",
            Mode::Chunked => "chunked",
            Mode::CloseMidResponse => "close-mid-response",
            Mode::GarbageStatus => "garbage-status",
            Mode::EndlessHeaders => "endless-headers",
            Mode::HugeBody => "huge-body",
            Mode::Drip => "drip",
            Mode::Reset => "reset",
            Mode::BadChunked => "bad-chunked",
            Mode::NoResponse => "no-response",
            Mode::CloseBeforeResponse => "close-before-response",
        }
    }

    /// Parses a mode name as written in URLs and flags.
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }

    pub(crate) fn index(self) -> usize {
        Mode::ALL.iter().position(|m| *m == self).unwrap_or(0)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Configuration of the reference server. Every field has a default, so `{}` is a valid
/// JSON config; unknown fields are refused (a typo must not silently do nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RefServerConfig {
    /// Address to bind: a loopback address only (`127.0.0.1`, any `127.x.y.z`, `::1`, `localhost`).
    pub host: String,
    /// TCP port; 0 picks a free one (read it back from `RefServer::port`).
    pub port: u16,
    /// Event-loop threads, each with its own `SO_REUSEPORT` listener.
    pub threads: usize,
    /// CPUs to pin the event-loop threads to (thread i on `cpus[i % len]`); empty = no pinning.
    pub cpus: Vec<usize>,
    /// Fixed service delay added to every response, in milliseconds (fractional allowed).
    pub delay_ms: f64,
    /// Extra random delay, uniform in `[0, delay_jitter_ms)`, added to `delay_ms`.
    pub delay_jitter_ms: f64,
    /// Warm-up that settles: `delay_ms` falls linearly to 0 over this many seconds after
    /// start, then stays 0 (0 = a fixed delay). For steady-state detection tests.
    pub delay_ramp_s: f64,
    /// Warm-up that never settles: in every period of this many seconds the delay rises
    /// linearly from 0 to `delay_ms`, then drops back to 0 (0 = a fixed delay).
    pub delay_saw_s: f64,
    /// Serial service time, in milliseconds (0 = none): each thread serves its requests one
    /// after another, each taking this long, as a single-server FIFO queue would (capacity
    /// `threads / service_ms` per ms). Kept with timers: the thread never spins.
    pub service_ms: f64,
    /// Length of each stall window, in milliseconds (0 = no stalls).
    pub stall_ms: f64,
    /// A stall starts every `stall_every_s` seconds after start (first at `stall_every_s`).
    pub stall_every_s: f64,
    /// Close (with 408) a connection whose request headers are not complete this long after
    /// their first byte arrived.
    pub header_timeout_ms: f64,
    /// Close (with 408) a connection whose request body is not complete this long after the
    /// request started.
    pub body_timeout_ms: f64,
    /// Close a connection that sends nothing between requests for this long (0 = never).
    pub idle_timeout_ms: f64,
    /// Drop a connection whose client has not accepted a byte of our pending output for this
    /// long (slow or stuck readers).
    pub write_timeout_ms: f64,
    /// How a request is answered unless its path says otherwise (`/misbehave/<mode>`).
    pub mode: Mode,
    /// Interval between bytes in `drip` mode, and between header batches in `endless-headers`.
    pub drip_interval_ms: f64,
    /// Refuse connections beyond this many open ones (0 = limited only by the fd limit).
    pub max_connections: usize,
    /// `listen()` backlog.
    pub backlog: u32,
    /// Seed of the jitter generator (0 = from the clock).
    pub seed: u64,
}

impl Default for RefServerConfig {
    fn default() -> Self {
        RefServerConfig {
            host: "127.0.0.1".to_string(),
            port: 0,
            threads: 1,
            cpus: Vec::new(),
            delay_ms: 0.0,
            delay_jitter_ms: 0.0,
            delay_ramp_s: 0.0,
            delay_saw_s: 0.0,
            service_ms: 0.0,
            stall_ms: 0.0,
            stall_every_s: 0.0,
            header_timeout_ms: 10_000.0,
            body_timeout_ms: 60_000.0,
            idle_timeout_ms: 0.0,
            write_timeout_ms: 60_000.0,
            mode: Mode::Normal,
            drip_interval_ms: 10.0,
            max_connections: 0,
            backlog: 4096,
            seed: 0,
        }
    }
}

/// A configuration field with a bad value; `field` names the field (`delay_ms`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    pub field: &'static str,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for ConfigError {}

fn err<T>(field: &'static str, message: impl Into<String>) -> Result<T, ConfigError> {
    Err(ConfigError {
        field,
        message: message.into(),
    })
}

/// How the service delay moves with time since start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum DelayShape {
    /// `delay` for every request.
    Fixed,
    /// From `delay` down to 0 over the duration, then 0.
    Ramp(Duration),
    /// From 0 up to `delay` over each period, then back to 0.
    Saw(Duration),
}

impl DelayShape {
    /// The delay at `since_start`, for a configured (maximum) `delay`.
    pub fn at(self, delay: Duration, since_start: Duration) -> Duration {
        match self {
            DelayShape::Fixed => delay,
            DelayShape::Ramp(over) => {
                let left = 1.0 - (since_start.as_secs_f64() / over.as_secs_f64()).min(1.0);
                delay.mul_f64(left)
            }
            DelayShape::Saw(period) => {
                let p = period.as_secs_f64();
                delay.mul_f64((since_start.as_secs_f64() % p) / p)
            }
        }
    }
}

/// The validated, ready-to-use form of a config (durations instead of floats).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub ip: IpAddr,
    pub port: u16,
    pub threads: usize,
    pub cpus: Vec<usize>,
    pub delay: Duration,
    pub delay_shape: DelayShape,
    pub jitter_ns: u64,
    pub service: Duration,
    pub stall: Duration,
    pub stall_every: Duration,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub idle_timeout: Option<Duration>,
    pub write_timeout: Duration,
    pub mode: Mode,
    pub drip_interval: Duration,
    pub max_connections: usize,
    pub backlog: i32,
    pub seed: u64,
}

/// Milliseconds (finite, >= 0, at most one day) to a duration.
pub(crate) fn ms(field: &'static str, v: f64) -> Result<Duration, ConfigError> {
    if !v.is_finite() || v < 0.0 {
        return err(field, format!("must be a finite number >= 0, got {v}"));
    }
    if v > 86_400_000.0 {
        return err(
            field,
            format!("must be at most 86400000 (one day), got {v}"),
        );
    }
    Ok(Duration::from_nanos((v * 1e6).round() as u64))
}

/// Parses a host string into a loopback address, refusing anything else.
pub fn parse_loopback(host: &str) -> Result<IpAddr, ConfigError> {
    let h = host.trim();
    let ip = if h.eq_ignore_ascii_case("localhost") {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        let bare = h.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => ip,
            Err(_) => {
                return err(
                    "host",
                    format!("{host:?} is not an IP address (use 127.0.0.1 or ::1)"),
                )
            }
        }
    };
    if !ip.is_loopback() && ip != IpAddr::V6(Ipv6Addr::LOCALHOST) {
        return err(
            "host",
            format!("{ip} is not a loopback address: the reference server only binds 127.0.0.0/8 or ::1"),
        );
    }
    Ok(ip)
}

impl RefServerConfig {
    /// Parses a JSON config (missing fields take their defaults) and validates it.
    pub fn from_json(text: &str) -> Result<RefServerConfig, ConfigError> {
        let cfg: RefServerConfig = serde_json::from_str(text).map_err(|e| ConfigError {
            field: "config",
            message: format!("invalid JSON config: {e}"),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// This config as JSON (every field).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_string())
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.settings().map(|_| ())
    }

    pub(crate) fn settings(&self) -> Result<Settings, ConfigError> {
        let ip = parse_loopback(&self.host)?;
        if self.threads == 0 || self.threads > 256 {
            return err(
                "threads",
                format!("must be between 1 and 256, got {}", self.threads),
            );
        }
        // SAFETY: sysconf has no preconditions.
        let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
        let ncpu = if configured > 0 {
            configured as usize
        } else {
            1
        };
        if let Some(bad) = self.cpus.iter().find(|c| **c >= ncpu) {
            return err(
                "cpus",
                format!("CPU {bad} does not exist (this machine has {ncpu})"),
            );
        }
        let delay = ms("delay_ms", self.delay_ms)?;
        let ramp = ms("delay_ramp_s", self.delay_ramp_s * 1000.0)?;
        let saw = ms("delay_saw_s", self.delay_saw_s * 1000.0)?;
        let delay_shape = match (ramp.is_zero(), saw.is_zero()) {
            (true, true) => DelayShape::Fixed,
            (false, true) => DelayShape::Ramp(ramp),
            (true, false) => DelayShape::Saw(saw),
            (false, false) => return err(
                "delay_saw_s",
                "a delay either ramps down (delay_ramp_s) or saw-tooths (delay_saw_s), not both"
                    .to_string(),
            ),
        };
        if delay_shape != DelayShape::Fixed && delay.is_zero() {
            return err(
                "delay_ms",
                "delay_ramp_s and delay_saw_s shape delay_ms: set delay_ms > 0".to_string(),
            );
        }
        let jitter = ms("delay_jitter_ms", self.delay_jitter_ms)?;
        let service = ms("service_ms", self.service_ms)?;
        let stall = ms("stall_ms", self.stall_ms)?;
        if !self.stall_every_s.is_finite() || self.stall_every_s < 0.0 {
            return err(
                "stall_every_s",
                format!("must be >= 0, got {}", self.stall_every_s),
            );
        }
        let stall_every = ms("stall_every_s", self.stall_every_s * 1000.0)?;
        if stall.is_zero() != stall_every.is_zero() {
            return err(
                if stall.is_zero() {
                    "stall_ms"
                } else {
                    "stall_every_s"
                },
                "a stall needs both a length (stall_ms) and a period (stall_every_s): set both or neither",
            );
        }
        if !stall.is_zero() && stall >= stall_every {
            return err(
                "stall_ms",
                format!(
                    "a stall of {} ms does not fit in a period of {} s: the server would never answer",
                    self.stall_ms, self.stall_every_s
                ),
            );
        }
        let header_timeout = ms("header_timeout_ms", self.header_timeout_ms)?;
        if header_timeout.is_zero() {
            return err("header_timeout_ms", "must be > 0");
        }
        let body_timeout = ms("body_timeout_ms", self.body_timeout_ms)?;
        if body_timeout.is_zero() {
            return err("body_timeout_ms", "must be > 0");
        }
        let idle = ms("idle_timeout_ms", self.idle_timeout_ms)?;
        let write_timeout = ms("write_timeout_ms", self.write_timeout_ms)?;
        if write_timeout.is_zero() {
            return err("write_timeout_ms", "must be > 0");
        }
        let drip_interval = ms("drip_interval_ms", self.drip_interval_ms)?;
        if drip_interval < Duration::from_micros(100) {
            return err(
                "drip_interval_ms",
                "must be at least 0.1 (the server must not spin)",
            );
        }
        if self.backlog == 0 || self.backlog > 1 << 20 {
            return err(
                "backlog",
                format!("must be between 1 and 1048576, got {}", self.backlog),
            );
        }
        Ok(Settings {
            ip,
            port: self.port,
            threads: self.threads,
            cpus: self.cpus.clone(),
            delay,
            delay_shape,
            jitter_ns: jitter.as_nanos() as u64,
            service,
            stall,
            stall_every,
            header_timeout,
            body_timeout,
            idle_timeout: if idle.is_zero() { None } else { Some(idle) },
            write_timeout,
            mode: self.mode,
            drip_interval,
            max_connections: self.max_connections,
            backlog: self.backlog as i32,
            seed: self.seed,
        })
    }
}
