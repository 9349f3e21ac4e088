//! The engine's one comparison of the two backends' timings (a benchmark, ignored in the
//! suite; issue 52), and a function check of the same close that the suite runs. It has a
//! test binary of its own because Cargo runs test binaries one after another: in loopback.rs its rounds shared the
//! two cores with 24 other load tests run in parallel, and it once read io_uring 11 us against
//! epoll 1 us (a fresh clone's CI run, 29 Nov 2026) where 11 reruns read alike.

mod common;

use common::read_request;
use pywebbench_engine::{run, Io, LoadSpec};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A server like gunicorn's sync worker: ~100 us of work per request, then after the
/// response it shuts its side down and waits for the client to close before it accepts the
/// next connection. Returns the port and the waits for the client's close, in microseconds.
fn serve_lingering() -> (u16, Arc<Mutex<Vec<u64>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let waits = Arc::new(Mutex::new(Vec::new()));
    let out = waits.clone();
    thread::spawn(move || {
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            read_request(&mut s);
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_micros(100) {}
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n");
            let _ = s.write_all(b"ok");
            let _ = s.shutdown(std::net::Shutdown::Write);
            let t = Instant::now();
            let mut buf = [0u8; 512];
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
            waits.lock().unwrap().push(t.elapsed().as_micros() as u64);
        }
    });
    (port, out)
}

/// One round: the engine on core 1 loads the lingering server for 0.25 s over a new
/// connection per request; returns the server's waits for the client's close.
fn round(port: u16, waits: &Mutex<Vec<u64>>, io: Io) -> Vec<u64> {
    waits.lock().unwrap().clear();
    let r = run(&LoadSpec {
        url: format!("http://127.0.0.1:{port}/"),
        io,
        connections: 64,
        keepalive: false,
        duration_s: Some(0.25),
        cpus: vec![1],
        ..LoadSpec::default()
    })
    .unwrap();
    // A floor for a median of hundreds of waits, not a rate to meet: the serial server's
    // cycle is its 100 us of work, an accept and the wait for the client's close, and it served
    // 715-892 requests a round (~3,000/s) on this 2-core VM with other tests running; a host
    // 2.9x slower (half the core stolen, the core 1.45x slower: docs/contributing.md, "Timing
    // bounds in the suite") serves about 250, and 100 is 2.5x under that.
    assert!(
        r.requests > 100 && r.errors == 0,
        "{} {:?}",
        r.requests,
        r.error_classes
    );
    // The connections left in the server's accept queue are served after the run: their
    // waits belong to it, not to the next round.
    let mut seen = usize::MAX;
    while seen != waits.lock().unwrap().len() {
        seen = waits.lock().unwrap().len();
        thread::sleep(Duration::from_millis(20));
    }
    waits.lock().unwrap().clone()
}

fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Function, on any host: on either backend, a connection the engine closes is closed
/// while the run goes on (the server's median wait for the client's close is under 1 s),
/// and each round serves over 100 requests without an error. The design's wait is tens of
/// microseconds; 1 s of slack is more than a host that steals up to 50% of the cores in
/// slices of milliseconds can take from a median of hundreds of waits (no hold of a second
/// was seen at 11-48% steal), so a false failure is far rarer than 1 in 10,000 (issue 52).
/// How long the wait is, io_uring against epoll, is [`io_uring_closes_as_soon_as_epoll`].
#[test]
fn a_closed_connection_is_closed_during_the_run_on_both_backends() {
    let (port, waits) = serve_lingering();
    for io in [Io::Epoll, Io::Uring] {
        let mut got = round(port, &waits, io);
        let m = median(&mut got);
        assert!(
            m < 1_000_000,
            "{io:?}: median wait for the client's close {m} us"
        );
    }
}

/// A connection the engine closes sends its FIN at once, on either backend. On io_uring it
/// once waited twice: for the number's close, after the next submission's wait, and for a
/// batched wait's hold (64 requests in flight) before the answer was even read. A server that
/// waits for the client's close after each response (gunicorn's sync worker) waited about
/// twice as long on io_uring as on epoll (46-47 us against 24 us), and served a third fewer
/// requests. Each backend loads the server in two alternating rounds and the median
/// waits are compared, so a slow moment of the machine falls on both. That comparison is
/// made up to three times: the fault was in every round, so it fails all three, while one
/// stray median (a few microseconds long) fails only one.
///
/// A benchmark, not a test of the suite (issue 52): a 1.5x bound on waits of tens of
/// microseconds cannot be held to 1 in 10,000 false failures on a host that steals up to
/// 50% of the cores in slices of milliseconds and moves a core's speed by 1.45x (it failed a
/// fresh clone's suite). It is ignored, and neither scripts/test.sh nor .ci runs ignored
/// tests; run it on a quiet host with
/// `cargo test --profile ci -p pywebbench-engine --test close_timing -- --ignored io_uring_closes_as_soon_as_epoll`.
#[test]
#[ignore = "benchmark: io_uring's close wait against epoll's on a quiet host (see the doc comment)"]
fn io_uring_closes_as_soon_as_epoll() {
    let (port, waits) = serve_lingering();
    let mut medians = Vec::new();
    for _ in 0..3 {
        let (mut epoll, mut uring) = (Vec::new(), Vec::new());
        for io in [Io::Epoll, Io::Uring, Io::Uring, Io::Epoll] {
            let got = round(port, &waits, io);
            match io {
                Io::Epoll => epoll.extend(got),
                _ => uring.extend(got),
            }
        }
        let (e, u) = (median(&mut epoll), median(&mut uring));
        if u * 2 <= e * 3 {
            return;
        }
        medians.push(format!("io_uring {u} us, epoll {e} us"));
    }
    panic!(
        "median wait for the client's close, three times: {}",
        medians.join("; ")
    );
}
