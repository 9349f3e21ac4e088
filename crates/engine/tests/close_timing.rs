//! The engine's one test that compares the two backends' timings. It has a test binary of its
//! own because Cargo runs test binaries one after another: in loopback.rs its rounds shared the
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

/// A connection the engine closes sends its FIN at once, on either backend. On io_uring it
/// once waited twice: for the number's close, after the next submission's wait, and for a
/// batched wait's hold (64 requests in flight) before the answer was even read. A server that
/// waits for the client's close after each response (gunicorn's sync worker) waited about
/// twice as long on io_uring as on epoll (46-47 us against 24 us), and served a third fewer
/// requests. Each backend loads the server in two alternating rounds and the median
/// waits are compared, so a slow moment of the machine falls on both. That comparison is
/// made up to three times: the fault was in every round, so it fails all three, while one
/// stray median (a few microseconds long) fails only one.
#[test]
fn a_closed_connection_closes_at_once_for_a_server_that_waits_for_it() {
    let (port, waits) = serve_lingering();
    let mid = |v: &mut Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
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
        let (e, u) = (mid(&mut epoll), mid(&mut uring));
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
