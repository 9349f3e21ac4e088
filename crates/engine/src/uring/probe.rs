//! Does this kernel have what the io_uring backend needs? Probed once per process, by
//! doing it: a ring, a provided-buffer ring, and a multishot receive on a socket pair.

use super::bufs::{BufRing, BGID};
use io_uring::{cqueue, opcode, types, Probe};
use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::OnceLock;

/// Which I/O backend drives the sockets (docs/load-engine.md, "I/O backends").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Io {
    /// io_uring when the kernel passes the probe, else epoll.
    #[default]
    Auto,
    Epoll,
    Uring,
}

/// What the kernel supports beyond the minimum (ring, provided-buffer ring, send, receive,
/// poll, cancel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Support {
    /// Multishot receive (Linux 6.0): one receive armed per connection, not one per read.
    pub multishot_recv: bool,
    /// A wait can ask for several completions but settle for one after a short minimum
    /// wait (Linux 6.12, IORING_FEAT_MIN_TIMEOUT): how completions are batched.
    pub min_wait: bool,
}

/// The probe's verdict (cached): what is supported, or why the backend cannot run.
pub fn probe() -> Result<Support, String> {
    static VERDICT: OnceLock<Result<Support, String>> = OnceLock::new();
    VERDICT.get_or_init(run_probe).clone()
}

/// The backend a run uses for the spec's `io` choice: `auto` takes io_uring when the probe
/// passes, else epoll; `uring` without kernel support is an error naming the field.
pub fn resolve(choice: Io) -> Result<Option<Support>, String> {
    match choice {
        Io::Epoll => Ok(None),
        Io::Auto => Ok(probe().ok()),
        Io::Uring => probe()
            .map(Some)
            .map_err(|why| format!("io: uring is not available here: {why} (use epoll)")),
    }
}

fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (a, b) = std::os::unix::net::UnixStream::pair()?;
    Ok((a.into(), b.into()))
}

fn run_probe() -> Result<Support, String> {
    let mut ring = super::build(8, false).map_err(|e| format!("io_uring_setup failed: {e}"))?;
    let mut ops = Probe::new();
    ring.submitter()
        .register_probe(&mut ops)
        .map_err(|e| format!("the kernel cannot list its io_uring operations: {e}"))?;
    for (code, name) in [
        (opcode::Send::CODE, "send"),
        (opcode::Recv::CODE, "recv"),
        (opcode::PollAdd::CODE, "poll"),
        (opcode::AsyncCancel::CODE, "cancel"),
    ] {
        if !ops.is_supported(code) {
            return Err(format!("no io_uring {name} operation"));
        }
    }
    let bufs = BufRing::new(&ring.submitter(), 4, 64)
        .map_err(|e| format!("no provided-buffer rings (Linux >= 5.19 needed): {e}"))?;
    let (a, b) = socket_pair().map_err(|e| format!("socketpair: {e}"))?;
    let recv = opcode::RecvMulti::new(types::Fd(a.as_raw_fd()), BGID)
        .build()
        .user_data(1);
    // SAFETY: the entry points at the registered buffer ring only, which outlives the ring.
    unsafe { ring.submission().push(&recv) }.map_err(|e| e.to_string())?;
    ring.submit().map_err(|e| format!("io_uring_enter: {e}"))?;
    // SAFETY: writing one byte from a valid buffer to a socket we own.
    let wrote = unsafe { libc::write(b.as_raw_fd(), b"x".as_ptr().cast(), 1) };
    if wrote != 1 {
        return Err("socketpair write failed".into());
    }
    ring.submit_and_wait(1)
        .map_err(|e| format!("io_uring_enter: {e}"))?;
    let cqe = ring
        .completion()
        .next()
        .ok_or("no completion from a receive")?;
    let multishot_recv = match cqe.result() {
        1 => cqueue::more(cqe.flags()),
        r if r == -libc::EINVAL => false,
        r => {
            return Err(format!(
                "a receive failed: {}",
                std::io::Error::from_raw_os_error(-r)
            ))
        }
    };
    let min_wait = ring.params().is_feature_min_timeout();
    // Closing the socket ends the receive; the ring goes before the buffers it points at.
    drop((a, b));
    drop(ring);
    drop(bufs);
    Ok(Support {
        multishot_recv,
        min_wait,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_follows_the_probe_and_a_forced_uring_names_the_field() {
        assert_eq!(resolve(Io::Epoll), Ok(None));
        assert_eq!(resolve(Io::Auto), Ok(probe().ok()));
        match probe() {
            Ok(s) => assert_eq!(resolve(Io::Uring), Ok(Some(s))),
            Err(_) => assert!(resolve(Io::Uring).unwrap_err().starts_with("io: uring")),
        }
        // The probe runs once: the second answer is the cached first one.
        assert_eq!(probe(), probe());
    }
}
