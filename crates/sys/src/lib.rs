//! Thin wrappers over the few OS calls pywebbench's engine and reference server need
//! (Linux): clocks, the open-file limit, CPU pinning, timer slack and a timerfd.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clock ids used are always supported on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC in nanoseconds (vDSO, no syscall).
#[inline]
pub fn now_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Time the calling thread has spent runnable but waiting for a CPU (run-queue delay), in
/// nanoseconds, from `/proc/thread-self/schedstat`; `None` when the kernel does not say.
pub fn thread_run_delay_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

/// Wall-clock time as Unix seconds.
pub fn unix_time_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The RLIMIT_NOFILE pair (soft, hard).
fn nofile_limit() -> io::Result<libc::rlimit> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(lim)
}

/// Sets RLIMIT_NOFILE; false when the kernel refused.
fn set_nofile_limit(soft: libc::rlim_t, hard: libc::rlim_t) -> bool {
    let want = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: valid pointer to an initialised rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 }
}

/// Make sure the process may open `need` file descriptors: raise the soft RLIMIT_NOFILE to
/// the hard limit (and beyond it, where the kernel allows). Returns the resulting soft limit,
/// or an error naming the limit and its value.
pub fn ensure_nofile(need: u64) -> Result<u64, String> {
    let soft = raise_nofile_limit();
    if soft >= need {
        return Ok(soft);
    }
    if set_nofile_limit(need, need) {
        return Ok(need);
    }
    let lim = nofile_limit().map_err(|e| format!("getrlimit(RLIMIT_NOFILE) failed: {e}"))?;
    Err(format!(
        "need {need} file descriptors, but the open-file limit (RLIMIT_NOFILE) is {} \
         (hard limit {}); raise it with `ulimit -n {need}` (as root for the hard limit) \
         or use fewer connections",
        lim.rlim_cur, lim.rlim_max
    ))
}

/// Raises the soft open-file limit to the hard limit (10,000+ connections need it).
/// Returns the resulting soft limit (0 when it cannot be read).
pub fn raise_nofile_limit() -> u64 {
    let Ok(lim) = nofile_limit() else {
        return 0;
    };
    if lim.rlim_cur < lim.rlim_max && set_nofile_limit(lim.rlim_max, lim.rlim_max) {
        return lim.rlim_max;
    }
    lim.rlim_cur
}

/// Pin the calling thread to one CPU (an index beyond `cpu_set_t` is an `InvalidInput`
/// error).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond the affinity mask"),
        ));
    }
    // SAFETY: cpu_set_t is plain data and `cpu` is within it (checked above).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Ask for precise timer wake-ups for the calling thread (default slack is 50 us).
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long; no pointers involved.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0);
    }
}

/// A one-shot CLOCK_MONOTONIC timerfd, armed at absolute times or after a delay
/// (nanosecond precision, unlike epoll_wait's millisecond timeout).
pub struct TimerFd {
    fd: OwnedFd,
    armed_at: u64,
}

impl TimerFd {
    /// Create a non-blocking timerfd.
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: plain syscall; the returned fd is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(TimerFd {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            armed_at: 0,
        })
    }

    /// Fire once at the absolute monotonic time `at_ns` (no-op if already armed for it).
    pub fn arm_at(&mut self, at_ns: u64) {
        if self.armed_at == at_ns {
            return;
        }
        self.armed_at = at_ns;
        let value = libc::timespec {
            tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
            tv_nsec: (at_ns % 1_000_000_000).max(1) as libc::c_long,
        };
        self.settime(libc::TFD_TIMER_ABSTIME, value);
    }

    /// Fire once `after` from now (at least 1 ns: a zero delay would disarm the timer).
    /// Forgets any absolute arming time (`armed_at` becomes 0).
    pub fn arm_after(&mut self, after: Duration) {
        self.armed_at = 0;
        let after = after.max(Duration::from_nanos(1));
        let value = libc::timespec {
            tv_sec: after.as_secs() as libc::time_t,
            tv_nsec: after.subsec_nanos() as libc::c_long,
        };
        self.settime(0, value);
    }

    fn settime(&self, flags: libc::c_int, value: libc::timespec) {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: valid fd and pointers.
        unsafe {
            libc::timerfd_settime(self.fd.as_raw_fd(), flags, &spec, std::ptr::null_mut());
        }
    }

    /// The absolute time the timer is armed for (0: not armed).
    pub fn armed_at(&self) -> u64 {
        self.armed_at
    }

    /// Note that the timer fired. Re-arming resets the expiration counter and edge-triggered
    /// epoll reports every expiration, so the counter is never read (no syscall).
    pub fn fired(&mut self) {
        self.armed_at = 0;
    }

    /// Read (and so reset) the expiration counter; a no-op when the timer has not fired.
    pub fn drain(&self) {
        let mut count = [0u8; 8];
        // SAFETY: reading 8 bytes into an 8-byte buffer from our own non-blocking timerfd.
        unsafe {
            libc::read(self.fd.as_raw_fd(), count.as_mut_ptr().cast(), 8);
        }
    }

    /// The raw descriptor (for registration with the poller).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// A new non-blocking, close-on-exec TCP socket (IPv4 or IPv6).
pub fn tcp_socket(ipv4: bool) -> io::Result<OwnedFd> {
    let domain = if ipv4 { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain syscall; the fd is owned right after.
    let fd = unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A `sockaddr_storage` holding `addr`, and its length.
pub fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sa) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sa = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for sockaddr_in6.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sa) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Resident set size of this process, in bytes (from /proc/self/statm).
pub fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    pages * page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance() {
        let a = now_ns();
        let c = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_add(i * i);
        }
        assert!(x > 0);
        assert!(now_ns() > a);
        assert!(thread_cpu_ns() > c);
    }

    #[test]
    fn nofile_is_raised_or_explained() {
        assert!(ensure_nofile(64).unwrap() >= 64);
        let err = ensure_nofile(u64::MAX / 2).unwrap_err();
        assert!(
            err.contains("ulimit -n") && err.contains("(RLIMIT_NOFILE) is "),
            "{err}"
        );
    }

    #[test]
    fn nofile_soft_limit_rises_to_hard() {
        let soft = raise_nofile_limit();
        assert!(soft >= 64, "{soft}");
        assert_eq!(soft, nofile_limit().unwrap().rlim_cur);
    }

    #[test]
    fn pinning_beyond_the_mask_is_refused() {
        let err = pin_current_thread(1 << 20).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn timer_fires_after_a_delay_and_at_a_time() {
        let mut t = TimerFd::new().unwrap();
        let wait_readable = |t: &TimerFd| {
            let mut pfd = libc::pollfd {
                fd: t.raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 2_000) == 1 }
        };
        t.arm_after(Duration::ZERO);
        assert_eq!(t.armed_at(), 0);
        assert!(wait_readable(&t));
        t.drain();
        let at = now_ns() + 1_000_000;
        t.arm_at(at);
        assert_eq!(t.armed_at(), at);
        assert!(wait_readable(&t));
        assert!(now_ns() >= at);
        t.fired();
        assert_eq!(t.armed_at(), 0);
    }

    #[test]
    fn run_delay_is_read() {
        assert!(thread_run_delay_ns().is_some());
    }

    #[test]
    fn rss_is_reported() {
        assert!(rss_bytes() > 0);
    }
}
