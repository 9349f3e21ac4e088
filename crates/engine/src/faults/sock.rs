//! Socket helpers the standard library lacks: a non-blocking connect with a receive buffer
//! set before the handshake, and an abortive close (SO_LINGER 0, so the peer sees a reset).
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt<T>(fd: libc::c_int, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live value of the size passed; fd is an open socket.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            v as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    cvt(r).map(|_| ())
}

/// Starts a non-blocking TCP connect to `addr`. With `rcvbuf`, SO_RCVBUF is set before the
/// handshake so the advertised window stays small. Completion shows as writability.
pub fn connect_nonblocking(
    addr: SocketAddr,
    rcvbuf: Option<i32>,
) -> io::Result<mio::net::TcpStream> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2) call.
    let fd = cvt(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: fd is a fresh socket we own; the std stream closes it on drop from here on.
    let std_stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    if let Some(sz) = rcvbuf {
        setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &(sz as libc::c_int))?;
    }
    let one: libc::c_int = 1;
    setsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, &one)?;
    let r = match addr {
        SocketAddr::V4(a) => {
            // SAFETY: zeroed sockaddr_in is valid; fields set below.
            let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sa.sin_family = libc::AF_INET as libc::sa_family_t;
            sa.sin_port = a.port().to_be();
            sa.sin_addr = libc::in_addr {
                s_addr: u32::from_ne_bytes(a.ip().octets()),
            };
            // SAFETY: sa is a valid sockaddr_in of the given length.
            unsafe {
                libc::connect(
                    fd,
                    &sa as *const libc::sockaddr_in as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            }
        }
        SocketAddr::V6(a) => {
            // SAFETY: zeroed sockaddr_in6 is valid; fields set below.
            let mut sa: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sa.sin6_port = a.port().to_be();
            sa.sin6_addr = libc::in6_addr {
                s6_addr: a.ip().octets(),
            };
            sa.sin6_flowinfo = a.flowinfo();
            sa.sin6_scope_id = a.scope_id();
            // SAFETY: sa is a valid sockaddr_in6 of the given length.
            unsafe {
                libc::connect(
                    fd,
                    &sa as *const libc::sockaddr_in6 as *const libc::sockaddr,
                    std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            }
        }
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINPROGRESS) {
            return Err(e);
        }
    }
    Ok(mio::net::TcpStream::from_std(std_stream))
}

/// Sets SO_LINGER to 0 so that closing the socket sends a reset instead of a FIN.
pub fn set_linger_zero(s: &mio::net::TcpStream) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_LINGER, &l)
}

/// True for the errors that mean the peer reset or broke the connection.
pub fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}
