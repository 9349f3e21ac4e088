//! Opening a connection to the target: the one place that creates a socket and starts its
//! non-blocking connect, for every I/O backend.
//!
//! A TCP target may be reached from several local source addresses. Linux picks the
//! ephemeral port of a `connect()` by searching one parity of `ip_local_port_range` first;
//! once about half of the range is in use towards one `host:port` from one source address,
//! every connect scans thousands of used ports (measured: ~60 us per connect below 14,000
//! connections, ~2 ms above). Spreading the connections over several source addresses
//! (127.0.0.2, 127.0.0.3, ... on loopback) keeps each one in the cheap half. The source is
//! bound with `IP_BIND_ADDRESS_NO_PORT`, so the kernel still picks the port at connect time.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};
use pywebbench_sys as sys;

/// Connections one source address carries cheaply towards one `host:port`: about half of the
/// default ephemeral range (32768-60999), with a margin.
pub const CONNECTIONS_PER_SOURCE: u32 = 10_000;

/// Where the connections go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A TCP address, connected from `sources` in turn (empty: the kernel picks the source).
    Tcp {
        addr: SocketAddr,
        sources: Vec<IpAddr>,
    },
    /// A unix-domain stream socket.
    Unix(PathBuf),
}

impl Target {
    /// A TCP target; loopback IPv4 targets with more than `CONNECTIONS_PER_SOURCE`
    /// connections get one source address (127.0.0.2 upwards) per that many connections
    /// unless `sources` names them.
    pub fn tcp(addr: SocketAddr, sources: Vec<IpAddr>, connections: u32) -> Target {
        let sources = if sources.is_empty() {
            auto_sources(addr, connections)
        } else {
            sources
        };
        Target::Tcp { addr, sources }
    }

    /// How the target is named in messages: `127.0.0.1:8080` or `unix:/run/app.sock`.
    pub fn describe(&self) -> String {
        match self {
            Target::Tcp { addr, .. } => addr.to_string(),
            Target::Unix(path) => format!("unix:{}", path.display()),
        }
    }

    /// The source addresses connections are spread over (empty: the kernel's choice).
    pub fn sources(&self) -> &[IpAddr] {
        match self {
            Target::Tcp { sources, .. } => sources,
            Target::Unix(_) => &[],
        }
    }
}

/// The automatic source addresses: none unless the target is IPv4 loopback and one source
/// would carry more than `CONNECTIONS_PER_SOURCE` connections.
fn auto_sources(addr: SocketAddr, connections: u32) -> Vec<IpAddr> {
    let IpAddr::V4(ip) = addr.ip() else {
        return Vec::new();
    };
    if !ip.is_loopback() || connections <= CONNECTIONS_PER_SOURCE {
        return Vec::new();
    }
    let n = connections.div_ceil(CONNECTIONS_PER_SOURCE).min(250);
    (0..n)
        .map(|k| IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + k as u8)))
        .collect()
}

/// A connected (or connecting) stream to the target.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// The pending socket error (`SO_ERROR`), e.g. a refused asynchronous connect.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        match self {
            Stream::Tcp(s) => s.take_error(),
            Stream::Unix(s) => s.take_error(),
        }
    }

    /// Ok(true) once the connect completed, Ok(false) while it is in progress.
    pub fn is_connected(&self) -> io::Result<bool> {
        let r = match self {
            Stream::Tcp(s) => s.peer_addr().map(|_| ()),
            Stream::Unix(s) => s.peer_addr().map(|_| ()),
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl From<Stream> for std::os::fd::OwnedFd {
    fn from(s: Stream) -> Self {
        match s {
            Stream::Tcp(s) => s.into(),
            Stream::Unix(s) => s.into(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
}

impl Read for Stream {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.register(r, t, i),
            Stream::Unix(s) => s.register(r, t, i),
        }
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.reregister(r, t, i),
            Stream::Unix(s) => s.reregister(r, t, i),
        }
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.deregister(r),
            Stream::Unix(s) => s.deregister(r),
        }
    }
}

/// Create a non-blocking socket and start connecting it to `target` (TCP_NODELAY on TCP).
/// `seq` picks the source address (`sources[seq % len]`). An error from a unix socket whose
/// listen backlog is full has kind `WouldBlock`: try again later.
pub fn dial(target: &Target, seq: usize) -> io::Result<Stream> {
    match target {
        Target::Unix(path) => UnixStream::connect(path).map(Stream::Unix),
        Target::Tcp { addr, sources } if sources.is_empty() => {
            let s = TcpStream::connect(*addr)?;
            let _ = s.set_nodelay(true);
            Ok(Stream::Tcp(s))
        }
        Target::Tcp { addr, sources } => {
            let s = connect_from(sources[seq % sources.len()], *addr)?;
            let _ = s.set_nodelay(true);
            Ok(Stream::Tcp(s))
        }
    }
}

/// Check that every source address can be bound (a name that is not local fails here, once,
/// rather than on every connect). Errors name the address.
pub fn check_sources(sources: &[IpAddr]) -> Result<(), String> {
    for &ip in sources {
        let s = sys::tcp_socket(ip.is_ipv4()).map_err(|e| format!("socket: {e}"))?;
        bind_no_port(&s, ip).map_err(|e| format!("cannot bind {ip}: {e}"))?;
    }
    Ok(())
}

/// Bind `fd` to `ip` with the port left for `connect()` to choose.
fn bind_no_port(fd: &OwnedFd, ip: IpAddr) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt with a pointer to a live c_int and its size. Failure (old kernels)
    // only means the port is picked at bind time.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let (ss, len) = sys::sockaddr(SocketAddr::new(ip, 0));
    // SAFETY: a valid sockaddr of `len` bytes.
    if unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&ss as *const libc::sockaddr_storage).cast(),
            len,
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A non-blocking TCP socket bound to `source` and connecting to `addr`.
fn connect_from(source: IpAddr, addr: SocketAddr) -> io::Result<TcpStream> {
    let fd = sys::tcp_socket(source.is_ipv4())?;
    bind_no_port(&fd, source)?;
    let (ss, len) = sys::sockaddr(addr);
    // SAFETY: a valid sockaddr of `len` bytes.
    let r = unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&ss as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(TcpStream::from_std(std::net::TcpStream::from(fd)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn loopback(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn sources_spread_automatically_on_loopback_only() {
        assert!(Target::tcp(loopback(80), vec![], 10_000)
            .sources()
            .is_empty());
        let t = Target::tcp(loopback(80), vec![], 25_000);
        let want: Vec<IpAddr> = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(t.sources(), &want[..]);
        let far = SocketAddr::from(([10, 0, 0, 1], 80));
        assert!(Target::tcp(far, vec![], 50_000).sources().is_empty());
        let six: SocketAddr = "[::1]:80".parse().unwrap();
        assert!(Target::tcp(six, vec![], 50_000).sources().is_empty());
        let given = vec!["127.0.0.9".parse().unwrap()];
        assert_eq!(
            Target::tcp(loopback(80), given.clone(), 50_000).sources(),
            &given[..]
        );
    }

    #[test]
    fn connects_from_each_source_in_turn() {
        let l = TcpListener::bind(loopback(0)).unwrap();
        let sources: Vec<IpAddr> = vec!["127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap()];
        let t = Target::tcp(l.local_addr().unwrap(), sources.clone(), 2);
        let _a = dial(&t, 0).unwrap();
        let _b = dial(&t, 1).unwrap();
        let mut seen: Vec<IpAddr> = (0..2).map(|_| l.accept().unwrap().1.ip()).collect();
        seen.sort();
        assert_eq!(seen, sources);
    }

    #[test]
    fn a_source_that_is_not_local_is_named() {
        let e = check_sources(&["192.0.2.1".parse().unwrap()]).unwrap_err();
        assert!(e.starts_with("cannot bind 192.0.2.1"), "{e}");
        assert!(check_sources(&["127.0.0.5".parse().unwrap()]).is_ok());
    }
}
