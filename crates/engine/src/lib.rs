//! pywebbench's load-generation engine: an HTTP/1.1, h2c (HTTP/2 cleartext) and WebSocket load generator on io_uring or epoll (mio), with
//! httparse and HdrHistogram. No Python inside; see docs/load-engine.md.
//!
//! ```no_run
//! let spec = pywebbench_engine::LoadSpec {
//!     url: "http://127.0.0.1:8080/".into(),
//!     duration_s: Some(2.0),
//!     ..Default::default()
//! };
//! let result = pywebbench_engine::run(&spec).unwrap();
//! println!("{} requests/s, p99 {} us", result.rps, result.latency.summary.p99);
//! ```

pub mod dial;
pub mod engine;
pub mod errors;
pub mod faults;
pub mod h2;
pub mod hist;
pub mod http;
pub mod rate;
pub mod result;
pub mod slices;
pub mod spec;
pub mod uring;
mod worker;
pub mod ws;

/// The OS-call wrappers (clocks, open-file limit, pinning, timerfd), shared with the
/// reference server.
pub use pywebbench_sys as sys;

pub use engine::{run, start, Progress, RunningLoad, StartError};
pub use errors::{ErrorClass, ErrorEntry};
pub use rate::RatePhase;
pub use result::{merge, LoadResult};
pub use slices::{RunningSlices, SlicedResult, SlicedSpec};
pub use spec::{normalise_spec_json, Arrival, Io, LoadSpec, Mode, Protocol};
