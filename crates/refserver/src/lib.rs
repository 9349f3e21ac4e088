//! pywebbench's reference HTTP/1.1 server (no Python inside).
//!
//! A fast, small server for testing load generators and measuring their ceiling: per-thread
//! mio event loops on `SO_REUSEPORT` listeners, httparse for requests, keep-alive and
//! pipelining, a cached `Date`. On top: fixed and random service delays, periodic stalls,
//! and misbehaviour modes a generator must classify. See `docs/refserver.md`.
//!
//! ```no_run
//! use pywebbench_refserver::{RefServer, RefServerConfig};
//! let server = RefServer::start(&RefServerConfig { delay_ms: 1.0, ..Default::default() }).unwrap();
//! println!("listening on {}", server.url());
//! let final_stats = server.stop();
//! ```

mod config;
mod conn;
mod context;
mod http;
#[cfg(test)]
mod request_props;
mod server;
mod stats;
mod worker;

pub use config::{parse_loopback, ConfigError, Mode, RefServerConfig};
pub use pywebbench_sys::raise_nofile_limit;
pub use server::{Error, RefServer};

/// `Content-Length` announced by the `huge-body` misbehaviour.
pub const HUGE_BODY_LENGTH: u64 = conn::HUGE_BODY;
/// Largest request head accepted before answering 431.
pub const MAX_REQUEST_HEAD: usize = http::MAX_HEAD;
/// Value of the `Server` header.
pub const SERVER_HEADER: &str = http::SERVER_NAME;
