//! Interleaved slices against two in-process servers on loopback: one target loaded at a
//! time, connections opened once and kept, per-slice results per target.

use pywebbench_engine::slices::{self, SlicedSpec};
use pywebbench_engine::spec::MixEntry;
use pywebbench_engine::{Io, LoadSpec};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HELLO: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";

/// What a test server saw: connections accepted, and the Unix time of every request.
#[derive(Default)]
struct Seen {
    accepted: AtomicUsize,
    requests: Mutex<Vec<f64>>,
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// A keep-alive hello server (one thread per connection) that records what it saw.
fn serve() -> (u16, Arc<Seen>) {
    serve_idle(None)
}

/// [`serve`], closing a connection that stays idle for `idle` (a keep-alive timeout).
fn serve_idle(idle: Option<Duration>) -> (u16, Arc<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            s2.accepted.fetch_add(1, Ordering::Relaxed);
            let seen = s2.clone();
            s.set_read_timeout(idle).unwrap();
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut pending = Vec::new();
                loop {
                    let n = match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    let mut out = Vec::new();
                    while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..i + 4);
                        seen.requests.lock().unwrap().push(unix_now());
                        out.extend_from_slice(HELLO);
                    }
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

fn plan(ports: &[u16], io: Io, rounds: u32) -> SlicedSpec {
    SlicedSpec {
        load: LoadSpec {
            connections: 4,
            threads: 1,
            warmup_s: 0.2,
            io,
            ..LoadSpec::default()
        },
        targets: ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}/"))
            .collect(),
        slice_s: 0.2,
        slice_s_by_target: Vec::new(),
        warmup_s_by_target: Vec::new(),
        settle_s: 0.1,
        rounds,
        seed: 3,
    }
}

fn one_target_at_a_time(io: Io) {
    let (pa, a) = serve();
    let (pb, b) = serve();
    let spec = plan(&[pa, pb], io, 6);
    let r = slices::run(&spec).unwrap();
    assert!(!r.interrupted && !r.stopped_early);
    assert_eq!(r.slices.len(), 12, "two targets x six rounds");
    for round in 0..6 {
        let mut targets: Vec<usize> = r
            .slices
            .iter()
            .filter(|s| s.round == round)
            .map(|s| s.target)
            .collect();
        targets.sort();
        assert_eq!(targets, vec![0, 1], "round {round}");
    }
    let seen = [a, b];
    for s in &r.slices {
        assert!(s.requests > 0, "slice {} counted nothing", s.index);
        assert!(s.latency.is_some());
        // A slice ends on the engine's timer, which only fires late: never under 0.15 s of
        // the 0.2 asked; at most 1 s late (issue 52: the host steals up to 50% in slices of
        // milliseconds, and no hold of a second was seen, so 1 in 10,000 is generous).
        assert!(
            s.duration_s > 0.15 && s.duration_s < 1.2,
            "{}",
            s.duration_s
        );
        // While one target's slice is counted, the other target gets no new request: at
        // most the ones in flight at the switch, one per connection, if its server thread
        // was slow to read them (the server stamps a request when it reads it).
        let other = seen[1 - s.target].requests.lock().unwrap();
        let during = other
            .iter()
            .filter(|&&t| t > s.started_at && t < s.ended_at)
            .count();
        assert!(
            during <= 4,
            "slice {}: the other target was loaded ({during})",
            s.index
        );
        let own = seen[s.target].requests.lock().unwrap();
        let got = own
            .iter()
            .filter(|&&t| t >= s.started_at && t <= s.ended_at)
            .count() as u64;
        // The server saw (about) what the slice counted: in-flight ones at either edge.
        assert!(
            got + 8 >= s.requests && s.requests + 8 >= got,
            "{got} vs {}",
            s.requests
        );
    }
    for (t, s) in seen.iter().enumerate() {
        assert_eq!(
            s.accepted.load(Ordering::Relaxed),
            4,
            "target {t}: connections opened once and kept"
        );
        assert_eq!(r.targets[t].reopened, 0);
        assert_eq!(r.targets[t].errors, 0);
    }
}

fn finish_early_keeps_complete_slices(io: Io) {
    let (pa, _a) = serve();
    let (pb, _b) = serve();
    let spec = plan(&[pa, pb], io, 1000);
    let running = slices::start(&spec).unwrap();
    let mut seen = Vec::new();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
        // each snapshot gives the slices completed since the previous one, once each
        seen.extend(running.progress().new_slices.into_iter().map(|s| s.index));
        if seen.len() >= 4 {
            break;
        }
    }
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "a slice given twice: {seen:?}");
    running.finish_early();
    running.wait_timeout(std::time::Duration::from_secs(5));
    let r = running.join(false);
    assert!(r.stopped_early && !r.interrupted);
    assert!(
        r.slices.len() >= 4 && r.slices.len() < 20,
        "{}",
        r.slices.len()
    );
    for (i, s) in r.slices.iter().enumerate() {
        assert_eq!(s.index, i, "complete slices only, in order");
    }
}

#[test]
fn epoll_one_target_at_a_time() {
    one_target_at_a_time(Io::Epoll)
}

#[test]
fn uring_one_target_at_a_time() {
    one_target_at_a_time(Io::Uring)
}

#[test]
fn epoll_finish_early_keeps_complete_slices() {
    finish_early_keeps_complete_slices(Io::Epoll)
}

fn connections_closed_between_windows_are_reopened(io: Io) {
    // Three targets whose servers close a connection idle for 0.25 s: each target waits
    // 0.4 s or more between its windows (the others' warm-ups and slices), so its
    // connections are closed every time. Each window reconnects them: every slice counts.
    let idle = Some(Duration::from_millis(250));
    let servers = [serve_idle(idle), serve_idle(idle), serve_idle(idle)];
    let ports: Vec<u16> = servers.iter().map(|(p, _)| *p).collect();
    let spec = plan(&ports, io, 4);
    let r = slices::run(&spec).unwrap();
    assert_eq!(r.slices.len(), 12, "three targets x four rounds");
    for s in &r.slices {
        assert!(
            s.requests > 0,
            "slice {} of target {} counted nothing",
            s.index,
            s.target
        );
    }
    for (t, target) in r.targets.iter().enumerate() {
        assert!(target.reopened >= 4, "target {t}: {}", target.reopened);
        assert_eq!(target.errors, 0, "target {t}: {:?}", target.error_classes);
    }
}

#[test]
fn epoll_connections_closed_between_windows_are_reopened() {
    connections_closed_between_windows_are_reopened(Io::Epoll)
}

#[test]
fn uring_connections_closed_between_windows_are_reopened() {
    connections_closed_between_windows_are_reopened(Io::Uring)
}

#[test]
fn bad_plans_are_refused_naming_the_field() {
    let mut spec = plan(&[1, 1], Io::Epoll, 2);
    let err = slices::start(&spec).err().unwrap().to_string();
    assert!(err.starts_with("targets:"), "{err}");
    spec = plan(&[1, 2], Io::Epoll, 2);
    spec.load.rate = Some(10.0);
    let err = slices::start(&spec).err().unwrap().to_string();
    assert!(err.starts_with("load.rate:"), "{err}");
}

fn a_mix_is_counted_per_endpoint_in_every_slice(io: Io) {
    // A mix over two targets: every slice holds each endpoint's figures (names and weights
    // from the mix), and they add up to the slice's own (no timing is asserted).
    let (pa, _a) = serve();
    let (pb, _b) = serve();
    let mut spec = plan(&[pa, pb], io, 3);
    let entry = |name: &str, weight: f64, path: &str| MixEntry {
        name: name.into(),
        weight,
        path: path.into(),
        ..MixEntry::default()
    };
    spec.load.mix = vec![
        entry("GET /a", 3.0, "/a"),
        entry("GET /b/{id}", 1.0, "/b/1"),
        entry("GET /b/{id}", 1.0, "/b/2"),
    ];
    let r = slices::run(&spec).unwrap();
    assert_eq!(r.slices.len(), 6, "two targets x three rounds");
    let mut drawn = [0u64; 2];
    for s in &r.slices {
        let names: Vec<&str> = s.endpoints.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["GET /a", "GET /b/{id}"], "slice {}", s.index);
        assert!((s.endpoints[1].weight_share - 0.4).abs() < 1e-12);
        let sum: u64 = s.endpoints.iter().map(|e| e.requests).sum();
        assert_eq!(sum, s.requests, "slice {}", s.index);
        for (k, e) in s.endpoints.iter().enumerate() {
            assert_eq!(e.latency.summary.count, e.requests);
            assert_eq!(e.errors, 0, "{:?}", e.error_classes);
            drawn[k] += e.requests;
        }
    }
    assert!(drawn[0] > 0 && drawn[1] > 0, "{drawn:?}");
    // Progress snapshots stay light: no histograms, no endpoints; each slice once.
    let running = slices::start(&spec).unwrap();
    running.wait_timeout(Duration::from_secs(10));
    let first = running.progress().new_slices;
    assert!(!first.is_empty());
    assert!(first
        .iter()
        .all(|s| s.endpoints.is_empty() && s.latency.is_none()));
    assert!(running.progress().new_slices.is_empty());
}

#[test]
fn epoll_a_mix_is_counted_per_endpoint_in_every_slice() {
    a_mix_is_counted_per_endpoint_in_every_slice(Io::Epoll)
}

#[test]
fn uring_a_mix_is_counted_per_endpoint_in_every_slice() {
    a_mix_is_counted_per_endpoint_in_every_slice(Io::Uring)
}
