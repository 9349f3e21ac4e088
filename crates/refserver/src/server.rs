//! `RefServer`: binds the listeners, runs one event-loop thread each, stops them.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use mio::{Poll, Waker};
use pywebbench_sys::{pin_current_thread, raise_nofile_limit, set_timer_slack_ns};

use crate::config::{ConfigError, RefServerConfig};
use crate::context::Shared;
use crate::stats::ThreadStats;
use crate::worker::{Worker, WAKER};

/// Why a server could not start.
#[derive(Debug)]
pub enum Error {
    /// A configuration field is invalid.
    Config(ConfigError),
    /// A system call failed (bind, listen, poll, thread spawn).
    Io { context: String, source: io::Error },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(e) => write!(f, "invalid refserver config: {e}"),
            Error::Io { context, source } => write!(f, "{context}: {source}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Error {
        Error::Config(e)
    }
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

fn setopt(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: setsockopt with a pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A non-blocking listener with `SO_REUSEADDR` and, if `reuseport`, `SO_REUSEPORT` (so each
/// thread can have its own socket on the same port and the kernel spreads connections).
fn bind_listener(
    addr: SocketAddr,
    backlog: i32,
    reuseport: bool,
) -> io::Result<std::net::TcpListener> {
    let owned = pywebbench_sys::tcp_socket(addr.is_ipv4())?;
    let fd = owned.as_raw_fd();
    setopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if reuseport {
        setopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    if addr.is_ipv6() {
        setopt(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
    }
    let (sa, len) = pywebbench_sys::sockaddr(addr);
    // SAFETY: a valid sockaddr of `len` bytes.
    let r = unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_storage).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a bound socket fd.
    if unsafe { libc::listen(fd, backlog) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(std::net::TcpListener::from(owned))
}

/// A running reference server. Dropping it stops it.
pub struct RefServer {
    shared: Arc<Shared>,
    wakers: Vec<Waker>,
    threads: Vec<JoinHandle<()>>,
    addr: SocketAddr,
}

impl RefServer {
    /// Validates the config, binds, and starts the event-loop threads. When this returns
    /// the port accepts connections.
    pub fn start(config: &RefServerConfig) -> Result<RefServer, Error> {
        let settings = config.settings()?;
        raise_nofile_limit();
        let mut listeners = Vec::with_capacity(settings.threads);
        let wanted = SocketAddr::new(settings.ip, settings.port);
        let cannot = || io_err(format!("cannot listen on {wanted}"));
        // Bind once without SO_REUSEPORT: this both picks the port (for port 0) and proves
        // nobody else listens there (SO_REUSEPORT alone would silently share the port with
        // another server of the same user).
        let first = bind_listener(wanted, settings.backlog, false).map_err(cannot())?;
        let addr = first.local_addr().map_err(io_err("getsockname"))?;
        if settings.threads == 1 {
            listeners.push(first);
        } else {
            drop(first);
            for _ in 0..settings.threads {
                listeners.push(
                    bind_listener(addr, settings.backlog, true)
                        .map_err(io_err(format!("cannot listen on {addr} (SO_REUSEPORT)")))?,
                );
            }
        }
        let shared = Arc::new(Shared {
            stats: (0..settings.threads)
                .map(|_| Arc::new(ThreadStats::new()))
                .collect(),
            settings,
            start: Instant::now(),
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            port: addr.port(),
        });
        let mut workers = Vec::new();
        let mut wakers = Vec::new();
        for (id, l) in listeners.into_iter().enumerate() {
            let poll = Poll::new().map_err(io_err("epoll_create"))?;
            wakers.push(Waker::new(poll.registry(), WAKER).map_err(io_err("eventfd"))?);
            workers.push(Worker::new(id, shared.clone(), l, poll).map_err(io_err("poll setup"))?);
        }
        let mut server = RefServer {
            shared: shared.clone(),
            wakers,
            threads: Vec::new(),
            addr,
        };
        for w in workers {
            let cpus = shared.settings.cpus.clone();
            let id = w.id;
            let handle = std::thread::Builder::new()
                .name(format!("refserver-{id}"))
                .spawn(move || {
                    if !cpus.is_empty() {
                        // A CPU that cannot be pinned to leaves the thread unpinned.
                        let _ = pin_current_thread(cpus[id % cpus.len()]);
                    }
                    // Timer slack of 1 ns: a 1 ms delay fires at 1 ms, not 1.05 ms.
                    set_timer_slack_ns(1);
                    w.run();
                })
                .map_err(io_err("spawning an event-loop thread"))?;
            server.threads.push(handle);
        }
        Ok(server)
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (IPv6 in brackets).
    pub fn url(&self) -> String {
        match self.addr.ip() {
            IpAddr::V4(ip) => format!("http://{ip}:{}", self.addr.port()),
            IpAddr::V6(ip) => format!("http://[{ip}]:{}", self.addr.port()),
        }
    }

    /// The same document `GET /__stats` returns.
    pub fn stats(&self) -> serde_json::Value {
        self.shared.stats_json()
    }

    /// True while every event-loop thread is alive.
    pub fn is_running(&self) -> bool {
        !self.threads.is_empty() && self.threads.iter().all(|t| !t.is_finished())
    }

    fn shutdown(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        for w in &self.wakers {
            let _ = w.wake();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }

    /// Stops every thread (closing all connections) and returns the final counters.
    pub fn stop(mut self) -> serde_json::Value {
        self.shutdown();
        self.shared.stats_json()
    }
}

impl Drop for RefServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}
