//! Interleaved slices against in-process servers on loopback and on unix sockets: one
//! target loaded at a time, keep-alive connections opened once and kept, a connection per
//! request or a few requests per connection opened only inside the target's windows,
//! per-slice results per target; over HTTP/1.1, h2c (no stream opened, no connection
//! reopened outside the windows, whatever the server's stream limit or GOAWAYs) and
//! WebSocket (no message sent outside the windows).

mod common;

use pywebbench_engine::slices::{self, SlicedResult, SlicedSpec};
use pywebbench_engine::spec::MixEntry;
use pywebbench_engine::{h2, ws, Io, LoadSpec, Protocol};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const HELLO: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";

/// What a test server saw: connections accepted, and the Unix time of every request and of
/// every accept.
#[derive(Default)]
struct Seen {
    accepted: AtomicUsize,
    requests: Mutex<Vec<f64>>,
    accepts: Mutex<Vec<f64>>,
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
    serve_with(idle, Duration::ZERO)
}

/// [`serve_idle`], each response written `delay` after its request was read (a slow
/// server: a connection serves one request per `delay`).
fn serve_with(idle: Option<Duration>, delay: Duration) -> (u16, Arc<Seen>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            s.set_read_timeout(idle).unwrap();
            answer(s, &s2, delay);
        }
    });
    (port, seen)
}

/// [`serve`] on a unix socket at `path`.
fn serve_unix(path: &PathBuf) -> Arc<Seen> {
    let l = UnixListener::bind(path).unwrap();
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            answer(s, &s2, Duration::ZERO);
        }
    });
    seen
}

/// Answer every request on an accepted connection (a thread of its own), until the client
/// closes it, each `delay` after it was read.
fn answer<S: Read + Write + Send + 'static>(mut s: S, seen: &Arc<Seen>, delay: Duration) {
    seen.accepted.fetch_add(1, Ordering::Relaxed);
    seen.accepts.lock().unwrap().push(unix_now());
    let seen = seen.clone();
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
                if !delay.is_zero() {
                    thread::sleep(delay);
                }
                out.extend_from_slice(HELLO);
            }
            if s.write_all(&out).is_err() {
                return;
            }
        }
    });
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
        unix_socket_by_target: Vec::new(),
        slice_s: 0.2,
        slice_s_by_target: Vec::new(),
        warmup_s_by_target: Vec::new(),
        settle_s: 0.1,
        settle_s_by_target: Vec::new(),
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
    spec.load.rate_phases = serde_json::from_str(r#"[{"rate": 10, "duration_s": 1}]"#).unwrap();
    let err = slices::start(&spec).err().unwrap().to_string();
    assert!(err.starts_with("load.rate_phases:"), "{err}");
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

/// How many of `times` fall within the counted part of slice `s`.
fn during(times: &Mutex<Vec<f64>>, s: &slices::SliceStats) -> usize {
    let t = times.lock().unwrap();
    t.iter()
        .filter(|&&t| t > s.started_at && t < s.ended_at)
        .count()
}

/// The other target of a two-target run got neither a connection nor a request during
/// counted slice `s` (at most what was under way at the switch, one per connection).
fn other_target_idle(seen: &[Arc<Seen>; 2], s: &slices::SliceStats) {
    let other = &seen[1 - s.target];
    let (connects, requests) = (during(&other.accepts, s), during(&other.requests, s));
    assert!(
        connects <= 4 && requests <= 4,
        "slice {}: the other target got {connects} connections, {requests} requests",
        s.index
    );
}

fn a_connection_per_request_in_slices(io: Io) {
    // keepalive false: every request its own connection, opened inside its target's windows
    // only; a connection whose request is answered after the window's end is not opened
    // again until the target's next window.
    let (pa, a) = serve();
    let (pb, b) = serve();
    let mut spec = plan(&[pa, pb], io, 4);
    spec.load.keepalive = false;
    let r = slices::run(&spec).unwrap();
    assert!(!r.interrupted && !r.stopped_early);
    assert_eq!(r.slices.len(), 8, "two targets x four rounds");
    let seen = [a, b];
    let windows = 1 + 4; // a warm-up and one slice a round
    for s in &r.slices {
        assert!(s.requests > 0, "slice {} counted nothing", s.index);
        assert_eq!(s.errors, 0, "slice {}", s.index);
        other_target_idle(&seen, s);
        // The target's own server accepted a connection per request (in-flight ones at
        // either edge).
        let own = &seen[s.target];
        let (connects, got) = (
            during(&own.accepts, s) as u64,
            during(&own.requests, s) as u64,
        );
        assert!(
            connects + 8 >= s.requests && connects <= s.requests + 8,
            "slice {}: {connects} connections for {} requests",
            s.index,
            s.requests
        );
        assert!(
            got + 8 >= s.requests && s.requests + 8 >= got,
            "{got} vs {}",
            s.requests
        );
    }
    // No pool is opened at the start: target 1 gets its first connection when its first
    // touch begins, after target 0's (0.2 s each, in target order, then the first round's
    // settle; the estimate of the run's start is late by as much as the thread noticed the
    // first count late, hence a margin).
    let first = &r.slices[0];
    let touch_1 = first.started_at - spec.settle_s - spec.load.warmup_s;
    let early = seen[1].accepts.lock().unwrap()[0];
    assert!(
        early >= touch_1 - 0.15,
        "target 1 got a connection {:.3} s before its first touch",
        touch_1 - early
    );
    // A request's latency runs from its connect: none counts the gap between its target's
    // windows (0.3 s or more here), as one sent on a connection opened in an earlier window
    // would. A slice's worst is a loopback connect and answer; one whole slice may meet a
    // host's rare stall of that length (issue 52).
    let slow: Vec<u64> = r
        .slices
        .iter()
        .map(|s| s.latency.as_ref().unwrap().summary.max)
        .filter(|&max_us| max_us >= 250_000)
        .collect();
    assert!(slow.len() <= 1, "worst latencies of slices: {slow:?} us");
    for (t, target) in r.targets.iter().enumerate() {
        assert_eq!(target.errors, 0, "target {t}: {:?}", target.error_classes);
        // Each request its own connection; at most one connection a window's end left
        // unused (its connect was under way) per connection and window.
        let conns = spec.load.connections as u64;
        assert!(
            target.established >= target.requests
                && target.established <= target.requests + conns * windows,
            "target {t}: {} established for {} requests",
            target.established,
            target.requests
        );
        let accepted = seen[t].accepted.load(Ordering::Relaxed) as u64;
        assert_eq!(accepted, target.established, "target {t}");
    }
}

#[test]
fn epoll_a_connection_per_request_in_slices() {
    a_connection_per_request_in_slices(Io::Epoll)
}

#[test]
fn uring_a_connection_per_request_in_slices() {
    a_connection_per_request_in_slices(Io::Uring)
}

fn a_few_requests_per_connection_in_slices(io: Io) {
    // requests_per_connection 10: a connection is opened again after every 10 answers,
    // inside its target's windows only; a connection keeps its count across windows.
    let (pa, a) = serve();
    let (pb, b) = serve();
    let mut spec = plan(&[pa, pb], io, 4);
    spec.load.requests_per_connection = 10;
    let r = slices::run(&spec).unwrap();
    assert_eq!(r.slices.len(), 8, "two targets x four rounds");
    let seen = [a, b];
    for s in &r.slices {
        assert!(s.requests > 0, "slice {} counted nothing", s.index);
        assert_eq!(s.errors, 0, "slice {}", s.index);
        other_target_idle(&seen, s);
    }
    for (t, target) in r.targets.iter().enumerate() {
        assert_eq!(target.errors, 0, "target {t}: {:?}", target.error_classes);
        // Every connection but the ones open at the end served its 10.
        let conns = spec.load.connections as u64;
        assert!(
            target.established * 10 >= target.requests
                && target.established <= target.requests / 10 + conns,
            "target {t}: {} established for {} requests",
            target.established,
            target.requests
        );
        assert!(target.requests >= 100, "target {t}: {}", target.requests);
        let accepted = seen[t].accepted.load(Ordering::Relaxed) as u64;
        assert_eq!(accepted, target.established, "target {t}");
    }
}

#[test]
fn epoll_a_few_requests_per_connection_in_slices() {
    a_few_requests_per_connection_in_slices(Io::Epoll)
}

#[test]
fn uring_a_few_requests_per_connection_in_slices() {
    a_few_requests_per_connection_in_slices(Io::Uring)
}

/// The events of target `t` (Unix times in `times`) in each gap between two of its windows
/// after the first round began: from `drain` seconds after a slice's end to its next window
/// (the next slice's counted start, less the settle and a margin for a count noticed late),
/// and after its last slice.
fn between_windows(times: &Mutex<Vec<f64>>, r: &SlicedResult, t: usize, drain: f64) -> Vec<usize> {
    let settle = r.spec.settle_s;
    let mine: Vec<&slices::SliceStats> = r.slices.iter().filter(|s| s.target == t).collect();
    let times = times.lock().unwrap();
    mine.iter()
        .enumerate()
        .map(|(k, s)| {
            let next = mine
                .get(k + 1)
                .map_or(f64::INFINITY, |n| n.started_at - settle - 0.05);
            times
                .iter()
                .filter(|&&x| x > s.ended_at + drain && x < next)
                .count()
        })
        .collect()
}

/// Target `t`'s server got at most `requests` requests and `connects` connections in each
/// gap between its windows (what was under way at the switch), and every slice counted.
fn only_inside_windows(seen: &Seen, r: &SlicedResult, t: usize, requests: usize, connects: usize) {
    let got = between_windows(&seen.requests, r, t, 0.0);
    assert!(
        got.iter().all(|&n| n <= requests),
        "target {t}: requests between its windows {got:?} (at most {requests} each)"
    );
    let opened = between_windows(&seen.accepts, r, t, 0.0);
    assert!(
        opened.iter().all(|&n| n <= connects),
        "target {t}: connections between its windows {opened:?} (at most {connects} each)"
    );
    for s in r.slices.iter().filter(|s| s.target == t) {
        assert!(
            s.requests > 0,
            "slice {} of target {t} counted nothing",
            s.index
        );
        assert_eq!(s.errors, 0, "slice {} of target {t}", s.index);
    }
    assert_eq!(r.targets[t].errors, 0, "{:?}", r.targets[t].error_classes);
}

/// A run of two targets over keep-alive connections (`conns` a target, `in_flight` requests
/// in flight a target at most): every round holds both targets; while one's slice is counted
/// the other's server gets nothing but what was under way at the switch; each server saw
/// about what its slices counted; nothing between a target's windows but what was in flight
/// at its end; the connections opened once and kept.
fn kept_and_one_at_a_time(seen: &[Arc<Seen>; 2], r: &SlicedResult, conns: usize, in_flight: usize) {
    assert!(!r.interrupted && !r.stopped_early);
    assert_eq!(r.slices.len(), 8, "two targets x four rounds");
    for s in &r.slices {
        other_target_idle(seen, s);
        let got = during(&seen[s.target].requests, s) as u64;
        let edges = 2 * in_flight as u64;
        assert!(
            got + edges >= s.requests && s.requests + edges >= got,
            "slice {}: the server answered {got}, the slice counted {}",
            s.index,
            s.requests
        );
    }
    for (t, target) in r.targets.iter().enumerate() {
        only_inside_windows(&seen[t], r, t, in_flight, 0);
        let accepted = seen[t].accepted.load(Ordering::Relaxed);
        assert_eq!(
            accepted, conns,
            "target {t}: connections opened once and kept"
        );
        assert_eq!(target.reopened, 0, "target {t}");
    }
}

/// How the h2c test server behaves.
#[derive(Clone, Copy, Default)]
struct H2cServer {
    /// The SETTINGS_MAX_CONCURRENT_STREAMS it announces (None: no limit).
    max_streams: Option<u32>,
    /// After answering this many streams on a connection, a graceful GOAWAY (NO_ERROR)
    /// naming the last of them; the streams after it are left unanswered (None: never).
    goaway_after: Option<usize>,
}

/// A server on a loopback port that records each accept and serves each connection with
/// `conn`, on a thread of its own.
fn serve_each<F>(conn: F) -> (u16, Arc<Seen>)
where
    F: Fn(TcpStream, &Seen) -> std::io::Result<()> + Send + Sync + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    let conn = Arc::new(conn);
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { continue };
            s2.accepted.fetch_add(1, Ordering::Relaxed);
            s2.accepts.lock().unwrap().push(unix_now());
            let (seen, conn) = (s2.clone(), conn.clone());
            thread::spawn(move || {
                let _ = conn(s, &seen);
            });
        }
    });
    (port, seen)
}

/// An h2c server (prior knowledge) answering every GET stream with 200 "Hello, World!"; it
/// records the streams it answers (as requests) and its accepts.
fn serve_h2c(how: H2cServer) -> (u16, Arc<Seen>) {
    serve_each(move |s, seen| h2c_conn(s, how, seen))
}

fn h2_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    h2::frame_header(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

fn h2c_conn(mut s: TcpStream, how: H2cServer, seen: &Seen) -> std::io::Result<()> {
    let mut settings = Vec::new();
    if let Some(m) = how.max_streams {
        settings.extend_from_slice(&h2::SETTINGS_MAX_CONCURRENT_STREAMS.to_be_bytes());
        settings.extend_from_slice(&m.to_be_bytes());
    }
    let mut out = Vec::new();
    h2_frame(&mut out, h2::SETTINGS, 0, 0, &settings);
    s.write_all(&out)?;
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 65536]);
    let mut preface = false;
    let mut answered = 0;
    let mut gone = false;
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if !preface {
            if buf.len() < h2::PREFACE.len() {
                continue;
            }
            buf.drain(..h2::PREFACE.len());
            preface = true;
        }
        let (mut out, mut at) = (Vec::new(), 0);
        while buf.len() - at >= 9 {
            let len = u32::from_be_bytes([0, buf[at], buf[at + 1], buf[at + 2]]) as usize;
            if buf.len() - at < 9 + len {
                break;
            }
            let (kind, flags) = (buf[at + 3], buf[at + 4]);
            let id =
                u32::from_be_bytes(buf[at + 5..at + 9].try_into().unwrap()) & h2::MAX_STREAM_ID;
            at += 9 + len;
            match kind {
                h2::SETTINGS if flags & h2::FLAG_ACK == 0 => {
                    h2_frame(&mut out, h2::SETTINGS, h2::FLAG_ACK, 0, &[]);
                }
                // every request here is a GET: its HEADERS end the stream
                h2::HEADERS if !gone => {
                    seen.requests.lock().unwrap().push(unix_now());
                    // 0x88: :status 200, indexed from the static table
                    h2_frame(&mut out, h2::HEADERS, h2::FLAG_END_HEADERS, id, &[0x88]);
                    h2_frame(
                        &mut out,
                        h2::DATA,
                        h2::FLAG_END_STREAM,
                        id,
                        b"Hello, World!",
                    );
                    answered += 1;
                    if how.goaway_after == Some(answered) {
                        let mut p = id.to_be_bytes().to_vec();
                        p.extend_from_slice(&0u32.to_be_bytes());
                        h2_frame(&mut out, h2::GOAWAY, 0, 0, &p);
                        gone = true;
                    }
                }
                _ => {}
            }
        }
        buf.drain(..at);
        if !out.is_empty() {
            s.write_all(&out)?;
        }
    }
}

fn h2c_plan(ports: &[u16], io: Io, streams: u32) -> SlicedSpec {
    let mut spec = plan(ports, io, 4);
    spec.load.connections = 2;
    spec.load.protocol = Protocol::H2c;
    spec.load.streams = streams;
    spec
}

fn h2c_streams_only_inside_windows(io: Io) {
    // 16 streams a connection asked, 2 allowed by the server: 14 of each connection's
    // requests wait unsent behind the ones in flight. At a window's end they wait for the
    // next window; only the 2 in flight per connection reach the server after it.
    let how = H2cServer {
        max_streams: Some(2),
        ..H2cServer::default()
    };
    let (pa, a) = serve_h2c(how);
    let (pb, b) = serve_h2c(how);
    let spec = h2c_plan(&[pa, pb], io, 16);
    let r = slices::run(&spec).unwrap();
    kept_and_one_at_a_time(&[a, b], &r, 2, 4);
}

#[test]
fn epoll_h2c_streams_only_inside_windows() {
    h2c_streams_only_inside_windows(Io::Epoll)
}

#[test]
fn uring_h2c_streams_only_inside_windows() {
    h2c_streams_only_inside_windows(Io::Uring)
}

fn h2c_connections_reopen_only_inside_windows(io: Io) {
    // Servers that send a graceful GOAWAY after 2 streams a connection (nginx's
    // http2_max_requests), and a client that closes its own after 5
    // (requests_per_connection): the streams the server left unanswered, or that the
    // connection had no room for, go again on a new connection, opened inside the target's
    // windows only. After a window's end each connection answers 2 at most, and is not
    // opened again until the next window.
    let how = H2cServer {
        goaway_after: Some(2),
        ..H2cServer::default()
    };
    let (pa, a) = serve_h2c(how);
    let (pb, b) = serve_h2c(how);
    let spec = h2c_plan(&[pa, pb], io, 8);
    let r = slices::run(&spec).unwrap();
    assert_eq!(r.slices.len(), 8, "two targets x four rounds");
    let seen = [a, b];
    for (t, target) in r.targets.iter().enumerate() {
        only_inside_windows(&seen[t], &r, t, 4, 2);
        assert!(target.reopened >= 10, "target {t}: {}", target.reopened);
    }
    let (pa, a) = serve_h2c(H2cServer::default());
    let (pb, b) = serve_h2c(H2cServer::default());
    let mut spec = h2c_plan(&[pa, pb], io, 4);
    spec.load.requests_per_connection = 5;
    let r = slices::run(&spec).unwrap();
    let seen = [a, b];
    for (t, target) in r.targets.iter().enumerate() {
        only_inside_windows(&seen[t], &r, t, 8, 2);
        // every connection but the ones open at the end served its 5 streams
        assert!(
            target.established * 5 >= target.requests
                && target.established <= target.requests / 5 + 2,
            "target {t}: {} established for {} requests",
            target.established,
            target.requests
        );
    }
}

#[test]
fn epoll_h2c_connections_reopen_only_inside_windows() {
    h2c_connections_reopen_only_inside_windows(Io::Epoll)
}

#[test]
fn uring_h2c_connections_reopen_only_inside_windows() {
    h2c_connections_reopen_only_inside_windows(Io::Uring)
}

/// A WebSocket echo server: it answers the upgrade (after `upgrade_delay`), echoes every
/// binary message in one frame, and records the messages (as requests) and its accepts.
fn serve_ws(upgrade_delay: Duration) -> (u16, Arc<Seen>) {
    serve_each(move |s, seen| ws_echo(s, upgrade_delay, seen))
}

fn ws_echo(mut s: TcpStream, upgrade_delay: Duration, seen: &Seen) -> std::io::Result<()> {
    let (mut buf, mut chunk) = (Vec::new(), [0u8; 65536]);
    let Some(head) = common::read_head(&mut s, &mut buf)? else {
        return Ok(());
    };
    thread::sleep(upgrade_delay);
    s.write_all(common::ws_upgrade_answer(&head).as_bytes())?;
    loop {
        let mut out = Vec::new();
        // client frames: masked, short lengths (the tests' messages are 64 bytes)
        while buf.len() >= 6 && buf.len() >= 6 + (buf[1] & 0x7f) as usize {
            let len = (buf[1] & 0x7f) as usize;
            let (op, mask) = (buf[0] & 0x0f, [buf[2], buf[3], buf[4], buf[5]]);
            let mut payload = buf[6..6 + len].to_vec();
            buf.drain(..6 + len);
            ws::apply_mask(&mut payload, mask);
            if op == ws::OP_CLOSE {
                return Ok(());
            }
            seen.requests.lock().unwrap().push(unix_now());
            out.extend_from_slice(&[0x80 | op, len as u8]);
            out.extend_from_slice(&payload);
        }
        if !out.is_empty() {
            s.write_all(&out)?;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn ws_plan(ports: &[u16], io: Io) -> SlicedSpec {
    let mut spec = plan(ports, io, 4);
    spec.load.protocol = Protocol::Ws;
    spec.targets = ports
        .iter()
        .map(|p| format!("ws://127.0.0.1:{p}/ws"))
        .collect();
    spec
}

fn websocket_messages_only_inside_windows(io: Io) {
    // Keep-alive WebSocket connections: upgraded once, kept across the windows, a message
    // in flight on each at a window's end at most.
    let (pa, a) = serve_ws(Duration::ZERO);
    let (pb, b) = serve_ws(Duration::ZERO);
    let spec = ws_plan(&[pa, pb], io);
    let r = slices::run(&spec).unwrap();
    kept_and_one_at_a_time(&[a, b], &r, 4, 4);
}

#[test]
fn epoll_websocket_messages_only_inside_windows() {
    websocket_messages_only_inside_windows(Io::Epoll)
}

#[test]
fn uring_websocket_messages_only_inside_windows() {
    websocket_messages_only_inside_windows(Io::Uring)
}

fn websocket_connections_reopen_only_inside_windows(io: Io) {
    // One message a connection, 8 filled at once (pipeline 8, requests_per_connection 1):
    // 7 of them wait for a new connection each, opened (and upgraded) inside the target's
    // windows only.
    let (pa, a) = serve_ws(Duration::ZERO);
    let (pb, b) = serve_ws(Duration::ZERO);
    let mut spec = ws_plan(&[pa, pb], io);
    spec.load.connections = 2;
    spec.load.pipeline = 8;
    spec.load.requests_per_connection = 1;
    let r = slices::run(&spec).unwrap();
    for (t, seen) in [a, b].iter().enumerate() {
        only_inside_windows(seen, &r, t, 2, 2);
    }
}

#[test]
fn epoll_websocket_connections_reopen_only_inside_windows() {
    websocket_connections_reopen_only_inside_windows(Io::Epoll)
}

#[test]
fn uring_websocket_connections_reopen_only_inside_windows() {
    websocket_connections_reopen_only_inside_windows(Io::Uring)
}

fn a_websocket_connection_per_message_in_slices(io: Io) {
    // A connection per message, to servers that take 0.2 s to answer the upgrade: each
    // window (0.3 s) opens a connection on each slot, whose message is echoed in the window,
    // then another, whose upgrade is answered 0.1 s after the window's end. Its message is
    // not sent then but with the target's next window's first writes: after the messages in
    // flight at the switch (read by the server within 0.06 s) the server gets none until
    // the next window, and every slice counts (the held messages are sent).
    let delay = Duration::from_millis(200);
    let (pa, a) = serve_ws(delay);
    let (pb, b) = serve_ws(delay);
    let mut spec = ws_plan(&[pa, pb], io);
    spec.load.keepalive = false;
    let r = slices::run(&spec).unwrap();
    let seen = [a, b];
    for (t, target) in r.targets.iter().enumerate() {
        only_inside_windows(&seen[t], &r, t, 4, 4);
        let late = between_windows(&seen[t].requests, &r, t, 0.06);
        assert!(
            late.iter().all(|&n| n == 0),
            "target {t}: messages sent after its windows closed {late:?}"
        );
        assert!(target.established >= target.requests, "target {t}");
    }
}

#[test]
fn epoll_a_websocket_connection_per_message_in_slices() {
    a_websocket_connection_per_message_in_slices(Io::Epoll)
}

#[test]
fn uring_a_websocket_connection_per_message_in_slices() {
    a_websocket_connection_per_message_in_slices(Io::Uring)
}

/// A private directory for the test's unix sockets (removed on drop).
struct SocketDir(PathBuf);

impl SocketDir {
    fn new(name: &str) -> SocketDir {
        let d = std::env::temp_dir().join(format!("pwb-slices-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        SocketDir(d)
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn each_target_on_its_own_unix_socket(io: Io, keepalive: bool) {
    // Two servers on unix sockets, one URL for both (the Host header and the path): each
    // target goes to its own socket, and only inside its windows.
    let dir = SocketDir::new(&format!("{io:?}-{keepalive}"));
    let paths = [dir.0.join("a.sock"), dir.0.join("b.sock")];
    let seen = [serve_unix(&paths[0]), serve_unix(&paths[1])];
    let mut spec = plan(&[1, 2], io, 3);
    spec.load.keepalive = keepalive;
    spec.targets = vec!["http://localhost/hello".into(); 2];
    spec.unix_socket_by_target = paths
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    let r = slices::run(&spec).unwrap();
    assert_eq!(r.slices.len(), 6, "two targets x three rounds");
    for s in &r.slices {
        assert!(s.requests > 0, "slice {} counted nothing", s.index);
        assert_eq!(s.errors, 0, "slice {}", s.index);
        let got = during(&seen[s.target].requests, s) as u64;
        assert!(
            got + 8 >= s.requests && s.requests + 8 >= got,
            "{got} vs {}",
            s.requests
        );
        let other = during(&seen[1 - s.target].requests, s);
        assert!(
            other <= 4,
            "slice {}: the other socket got {other}",
            s.index
        );
    }
    for (t, target) in r.targets.iter().enumerate() {
        assert_eq!(target.errors, 0, "target {t}: {:?}", target.error_classes);
        assert_eq!(target.unix_socket.as_deref(), paths[t].to_str());
        let served = seen[t].requests.lock().unwrap().len() as u64;
        assert!(
            served >= target.requests && served <= target.requests + 4,
            "target {t}: its socket served {served}, the engine counted {}",
            target.requests
        );
        if keepalive {
            assert_eq!(seen[t].accepted.load(Ordering::Relaxed), 4, "target {t}");
        }
    }
}

#[test]
fn epoll_each_target_on_its_own_unix_socket() {
    each_target_on_its_own_unix_socket(Io::Epoll, true)
}

#[test]
fn uring_each_target_on_its_own_unix_socket() {
    each_target_on_its_own_unix_socket(Io::Uring, true)
}

#[test]
fn epoll_each_target_on_its_own_unix_socket_a_connection_per_request() {
    each_target_on_its_own_unix_socket(Io::Epoll, false)
}

#[test]
fn a_socket_that_is_not_there_names_its_target() {
    let dir = SocketDir::new("missing");
    let there = dir.0.join("there.sock");
    let _seen = serve_unix(&there);
    let missing = dir.0.join("missing.sock");
    let mut spec = plan(&[1, 2], Io::Epoll, 2);
    spec.targets = vec!["http://localhost/".into(); 2];
    spec.unix_socket_by_target = [&there, &missing]
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    let err = slices::start(&spec).err().unwrap().to_string();
    let want = format!(
        "targets: http://localhost/ (unix socket {m}): unix_socket: unix socket {m} does not exist",
        m = missing.display()
    );
    assert_eq!(err, want);
}

/// Target `t`'s windows in Unix time: its first touch (the touches one after another, in
/// target order, before the first round's settle), then each slice from its settle's start.
fn windows_of(r: &slices::SlicedResult, t: usize) -> Vec<(f64, f64)> {
    let spec = &r.spec;
    let settle = spec.settle_s;
    let first = r
        .slices
        .iter()
        .map(|s| s.started_at)
        .fold(f64::MAX, f64::min)
        - settle;
    let touches: f64 = (0..spec.targets.len()).map(|k| spec.warmup_s_of(k)).sum();
    let before: f64 = (0..t).map(|k| spec.warmup_s_of(k)).sum();
    let touch = first - touches + before;
    let mut w = vec![(touch, touch + spec.warmup_s_of(t))];
    w.extend(
        r.slices
            .iter()
            .filter(|s| s.target == t)
            .map(|s| (s.started_at - settle, s.ended_at)),
    );
    w
}

/// Every request each of `seen`'s servers read came inside one of its target's windows
/// (30 ms allowed at either edge: the engine's clock read against Unix time, a request
/// written just before a window's end read by the server just after it): a send carried
/// over, or an arrival not stopped, would reach its server in another target's window.
fn requests_inside_windows(seen: &[Arc<Seen>], r: &slices::SlicedResult) {
    for (t, own) in seen.iter().enumerate() {
        let windows = windows_of(r, t);
        let times = own.requests.lock().unwrap();
        let stray = times
            .iter()
            .filter(|&&x| !windows.iter().any(|&(a, b)| x >= a - 0.03 && x <= b + 0.03))
            .count();
        assert_eq!(stray, 0, "target {t}: requests outside its windows");
    }
}

fn an_open_loop_in_slices(io: Io, poisson: bool) {
    // An open loop at 400 req/s per target, over two fast servers: each target's sends
    // arrive inside its own windows only (none leaks into the other's), at its rate from
    // the window's load start, and none is left unsent.
    let (pa, a) = serve();
    let (pb, b) = serve();
    let mut spec = plan(&[pa, pb], io, 4);
    spec.slice_s = 0.3;
    spec.load.rate = Some(400.0);
    if poisson {
        spec.load.arrival = pywebbench_engine::spec::Arrival::Poisson;
    }
    let r = slices::run(&spec).unwrap();
    assert!(!r.interrupted && !r.stopped_early);
    assert_eq!(r.slices.len(), 8, "two targets x four rounds");
    let seen = [a, b];
    for s in &r.slices {
        assert_eq!(s.errors, 0, "slice {}", s.index);
        // a fast server keeps up: at most a send or two due as a busy host noticed the end
        assert!(s.unsent <= 4, "slice {}: {} unsent", s.index, s.unsent);
        // 400/s over the counted part: 120 sends (Poisson: within ~4 sigma)
        let want = 400.0 * s.duration_s;
        let slack = if poisson {
            4.0 * want.sqrt()
        } else {
            0.05 * want + 3.0
        };
        assert!(
            (s.offered as f64 - want).abs() <= slack,
            "slice {}: {} offered in {:.3} s",
            s.index,
            s.offered,
            s.duration_s
        );
        assert!(
            s.requests + 4 >= s.offered && s.requests <= s.offered + 4,
            "slice {}: {} answered of {} offered",
            s.index,
            s.requests,
            s.offered
        );
        let h = s.latency.as_ref().unwrap();
        assert_eq!(h.summary.count, s.requests);
        other_target_idle(&seen, s);
    }
    requests_inside_windows(&seen, &r);
    for t in &r.targets {
        assert_eq!(t.errors, 0, "{:?}", t.error_classes);
    }
    // Progress snapshots of an open loop carry each slice's histogram (once each).
    let running = slices::start(&spec).unwrap();
    running.wait_timeout(Duration::from_secs(10));
    let snap = running.progress().new_slices;
    assert_eq!(snap.len(), 8);
    assert!(snap.iter().all(|s| s.latency.is_some()));
}

#[test]
fn epoll_an_open_loop_in_slices() {
    an_open_loop_in_slices(Io::Epoll, false)
}

#[test]
fn uring_an_open_loop_in_slices() {
    an_open_loop_in_slices(Io::Uring, false)
}

#[test]
fn epoll_a_poisson_open_loop_in_slices() {
    an_open_loop_in_slices(Io::Epoll, true)
}

fn an_overloaded_open_loop_in_slices(io: Io, keepalive: bool) {
    // Two connections per target on servers that take 20 ms a request (100 req/s at most)
    // offered 200 req/s: the sends queue. Latency runs from each send's intended time, so
    // the queue's wait is in it (from the send time it would stay near 20 ms); what is still
    // queued at a window's end is counted unsent and dropped, never sent in the other
    // target's window.
    let delay = Duration::from_millis(20);
    let (pa, a) = serve_with(None, delay);
    let (pb, b) = serve_with(None, delay);
    let mut spec = plan(&[pa, pb], io, 3);
    spec.load.connections = 2;
    spec.load.keepalive = keepalive;
    spec.load.rate = Some(200.0);
    spec.slice_s = 0.5;
    spec.settle_s = 0.1;
    let r = slices::run(&spec).unwrap();
    assert_eq!(r.slices.len(), 6, "two targets x three rounds");
    let seen = [a, b];
    for s in &r.slices {
        let h = s.latency.as_ref().unwrap();
        // served at 100/s of 200/s offered: the queue grows by 100/s, and the median
        // send waits ~0.15 s of the 0.5-s slice (its settle's queue before it)
        assert!(
            h.summary.p50 >= 60_000,
            "slice {}: median {} us: not from the intended send time",
            s.index,
            h.summary.p50
        );
        assert!(s.requests <= 2 * 30, "slice {}: {}", s.index, s.requests);
        assert!(
            s.unsent >= 30,
            "slice {}: {} unsent of {} offered",
            s.index,
            s.unsent,
            s.offered
        );
        assert!(s.offered >= 90, "slice {}: {}", s.index, s.offered);
        other_target_idle(&seen, s);
    }
    // A send's request reaches the server inside its target's windows: a queue carried
    // over would be sent in the next window of the other target.
    requests_inside_windows(&seen, &r);
}

#[test]
fn epoll_an_overloaded_open_loop_in_slices() {
    an_overloaded_open_loop_in_slices(Io::Epoll, true)
}

#[test]
fn uring_an_overloaded_open_loop_in_slices() {
    an_overloaded_open_loop_in_slices(Io::Uring, true)
}

#[test]
fn epoll_an_overloaded_open_loop_in_slices_a_connection_per_request() {
    an_overloaded_open_loop_in_slices(Io::Epoll, false)
}
