//! A traffic mix end to end, against a tiny in-process server on loopback that answers by
//! path and counts what it was asked: per-endpoint figures add up, match what the server
//! saw, follow the weights, and each entry's expected statuses apply to it alone.

use pywebbench_engine::spec::MixEntry;
use pywebbench_engine::{merge, run, Io, LoadSpec};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::thread;

type Seen = Arc<Mutex<HashMap<String, u64>>>;

/// A keep-alive server: `/missing` answers 404, anything else 200 "ok" (HEAD: no body);
/// request bodies (Content-Length) are read and skipped. Counts "METHOD path" per request.
fn serve() -> (u16, Seen) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen: Seen = Arc::default();
    let counts = seen.clone();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let counts = counts.clone();
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut pending: Vec<u8> = Vec::new();
                loop {
                    let n = match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    let mut out = Vec::new();
                    let mut close = false;
                    while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&pending[..i]).into_owned();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("Content-Length: "))
                            .map_or(0, |v| v.parse().unwrap());
                        if pending.len() < i + 4 + length {
                            break;
                        }
                        pending.drain(..i + 4 + length);
                        let mut line = head.lines().next().unwrap().split(' ');
                        let (method, path) = (line.next().unwrap(), line.next().unwrap());
                        *counts
                            .lock()
                            .unwrap()
                            .entry(format!("{method} {path}"))
                            .or_default() += 1;
                        close |= head.contains("Connection: close");
                        let status = if path == "/missing" {
                            "404 Not Found"
                        } else {
                            "200 OK"
                        };
                        let body: &[u8] = if method == "HEAD" { b"" } else { b"ok" };
                        out.extend_from_slice(
                            format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\n").as_bytes(),
                        );
                        out.extend_from_slice(body);
                    }
                    if s.write_all(&out).is_err() || close {
                        return;
                    }
                }
            });
        }
    });
    (port, seen)
}

fn entry(name: &str, weight: f64, method: &str, path: &str) -> MixEntry {
    MixEntry {
        name: name.into(),
        weight,
        method: method.into(),
        path: path.into(),
        ..MixEntry::default()
    }
}

fn mix() -> Vec<MixEntry> {
    vec![
        entry("GET /items/{id}", 3.0, "GET", "/items/1"),
        entry("GET /items/{id}", 2.0, "GET", "/items/2?full=1"),
        entry("GET /", 2.0, "GET", "/"),
        MixEntry {
            body_b64: "eyJhIjogMX0=".into(),
            expect_status: vec![200],
            ..entry("POST /items", 1.0, "POST", "/items")
        },
        entry("HEAD /", 1.0, "HEAD", "/"),
        MixEntry {
            expect_status: vec![404],
            ..entry("GET /missing", 1.0, "GET", "/missing")
        },
    ]
}

/// The run's endpoints sum to its figures, match what the server saw, and follow the
/// weights. `n` requests, each endpoint's share within 0.03 of its weight: the standard
/// deviation of a share is at most sqrt(0.25 / n) (0.0035 at n = 20,000, 0.0079 at 4,000),
/// so 0.03 is at least 3.8 of them, a false failure below 1.5e-4 per endpoint at n = 4,000
/// and about 1e-17 at 20,000; the draws are seeded, so a given run is the same every time.
fn check(spec: &LoadSpec, n: u64, seen: &Seen) {
    let r = run(spec).unwrap();
    assert_eq!(r.requests, n, "{:?}", r.error_classes);
    assert_eq!(r.errors, 0, "{:?}", r.error_classes);
    assert_eq!(r.endpoints.len(), 5);
    let total: u64 = r.endpoints.iter().map(|e| e.requests).sum();
    assert_eq!(total, r.requests);
    let seen = seen.lock().unwrap();
    let by_name: HashMap<&str, u64> = r
        .endpoints
        .iter()
        .map(|e| (e.name.as_str(), e.requests))
        .collect();
    assert_eq!(
        by_name["GET /items/{id}"],
        seen["GET /items/1"] + seen["GET /items/2?full=1"]
    );
    assert_eq!(by_name["POST /items"], seen["POST /items"]);
    assert_eq!(by_name["HEAD /"], seen["HEAD /"]);
    for e in &r.endpoints {
        let share = e.requests as f64 / n as f64;
        assert!(
            (share - e.weight / 10.0).abs() < 0.03,
            "{}: {share}",
            e.name
        );
        assert_eq!(e.latency.summary.count, e.requests);
        assert_eq!(e.errors, 0);
    }
    let missing = &r.endpoints[4];
    assert_eq!(missing.name, "GET /missing");
    assert_eq!(missing.status_counts["404"], missing.requests);
    assert!((missing.weight_share - 0.1).abs() < 1e-12);
}

fn closed_loop_pipelined(io: Io) {
    let (port, seen) = serve();
    let spec = LoadSpec {
        url: format!("http://127.0.0.1:{port}/ignored"),
        connections: 4,
        threads: 2,
        pipeline: 4,
        max_requests: Some(20_000),
        mix: mix(),
        io,
        ..LoadSpec::default()
    };
    check(&spec, 20_000, &seen);
}

fn open_loop_without_keepalive(io: Io) {
    let (port, seen) = serve();
    let spec = LoadSpec {
        url: format!("http://127.0.0.1:{port}/"),
        connections: 8,
        keepalive: false,
        rate: Some(4000.0),
        max_requests: Some(4_000),
        mix: mix(),
        io,
        ..LoadSpec::default()
    };
    check(&spec, 4_000, &seen);
}

fn connection_per_request(io: Io) {
    let (port, seen) = serve();
    let spec = LoadSpec {
        url: format!("http://127.0.0.1:{port}/"),
        connections: 4,
        keepalive: false,
        max_requests: Some(4_000),
        mix: mix(),
        io,
        ..LoadSpec::default()
    };
    check(&spec, 4_000, &seen);
}

/// An entry that expects what the server does not answer fails alone, attributed to its
/// endpoint; and endpoints survive a merge of results.
fn expectations_are_per_entry_and_merge(io: Io) {
    let (port, _) = serve();
    let mut entries = mix();
    entries[5].expect_status = vec![200];
    let spec = LoadSpec {
        url: format!("http://127.0.0.1:{port}/"),
        connections: 2,
        max_requests: Some(2_000),
        mix: entries,
        io,
        ..LoadSpec::default()
    };
    let r = run(&spec).unwrap();
    let missing = &r.endpoints[4];
    assert!(missing.requests > 0);
    assert_eq!(missing.errors, missing.requests);
    assert_eq!(missing.error_classes["check_failed"], missing.requests);
    assert_eq!(r.errors, missing.errors, "the other endpoints passed");
    let m = merge(&[r.clone(), r.clone()]).unwrap();
    assert_eq!(m.endpoints.len(), r.endpoints.len());
    for (a, b) in m.endpoints.iter().zip(&r.endpoints) {
        assert_eq!(a.requests, 2 * b.requests);
        assert_eq!(a.errors, 2 * b.errors);
        assert_eq!(a.latency.summary.count, 2 * b.latency.summary.count);
    }
}

macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod epoll {
            $(#[test]
            fn $name() {
                super::$name(pywebbench_engine::Io::Epoll)
            })*
        }
        mod uring {
            $(#[test]
            fn $name() {
                super::$name(pywebbench_engine::Io::Uring)
            })*
        }
    };
}

on_both_backends!(
    closed_loop_pipelined,
    open_loop_without_keepalive,
    connection_per_request,
    expectations_are_per_entry_and_merge,
);
