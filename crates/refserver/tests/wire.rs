//! Wire-level tests of the reference server: raw TCP sockets, no HTTP client library, so
//! we see exactly the bytes (and FIN/RST) the server sends.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

use pywebbench_refserver::{Mode, RefServer, RefServerConfig};

fn start(cfg: RefServerConfig) -> RefServer {
    RefServer::start(&cfg).expect("server starts")
}

fn connect(s: &RefServer) -> TcpStream {
    let c = TcpStream::connect(s.local_addr()).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.set_nodelay(true).unwrap();
    c
}

/// Reads one response framed by Content-Length; returns (head, body).
fn read_response(c: &mut TcpStream, buf: &mut Vec<u8>) -> (String, Vec<u8>) {
    loop {
        if let Some(end) = find(buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_string();
            let len: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            while buf.len() < end + 4 + len {
                read_more(c, buf);
            }
            let body = buf[end + 4..end + 4 + len].to_vec();
            buf.drain(..end + 4 + len);
            return (head, body);
        }
        read_more(c, buf);
    }
}

fn read_more(c: &mut TcpStream, buf: &mut Vec<u8>) {
    let mut tmp = [0u8; 65536];
    let n = c.read(&mut tmp).expect("read");
    assert!(
        n > 0,
        "unexpected EOF; have {:?}",
        String::from_utf8_lossy(buf)
    );
    buf.extend_from_slice(&tmp[..n]);
}

/// Reads until EOF (or error); returns the bytes and whether it ended with a reset.
fn read_to_end(c: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut tmp = [0u8; 65536];
    loop {
        match c.read(&mut tmp) {
            Ok(0) => return (out, false),
            Ok(n) => out.extend_from_slice(&tmp[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return (out, true),
            Err(e) => panic!("read: {e}"),
        }
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn get(c: &mut TcpStream, target: &str) {
    c.write_all(format!("GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())
        .unwrap();
}

#[test]
fn hello_keepalive_headers_and_pipelining_in_order() {
    let s = start(RefServerConfig::default());
    let mut c = connect(&s);
    let mut buf = Vec::new();
    get(&mut c, "/");
    let (head, body) = read_response(&mut c, &mut buf);
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("\r\nServer: pywebbench-refserver"));
    assert!(head.contains("\r\nDate: ") && head.contains(" GMT"));
    assert!(head.contains("Content-Type: text/plain"));
    assert_eq!(body, b"Hello, World!");
    // Pipelined: the slow first request must still come back first.
    c.write_all(
        b"GET /hello?delay_ms=80&size=3 HTTP/1.1\r\n\r\nGET /hello?size=5 HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n",
    )
    .unwrap();
    let t0 = Instant::now();
    assert_eq!(read_response(&mut c, &mut buf).1, b"abc");
    assert!(t0.elapsed() >= Duration::from_millis(75));
    assert_eq!(read_response(&mut c, &mut buf).1, b"abcde");
    let (head, _) = read_response(&mut c, &mut buf);
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");
    let st = s.stop();
    assert_eq!(st["requests"], 4);
    assert_eq!(st["modes"]["normal"], 4);
    assert_eq!(st["statuses"]["4xx"], 1);
}

/// 30 requests for a 1 ms delay on one connection, one after another; returns their
/// sorted round trips.
fn one_ms_delays(c: &mut TcpStream, buf: &mut Vec<u8>) -> Vec<Duration> {
    let mut samples = Vec::new();
    for _ in 0..30 {
        let t = Instant::now();
        get(c, "/?delay_ms=1");
        read_response(c, buf);
        samples.push(t.elapsed());
    }
    samples.sort();
    samples
}

/// Delays are timers: a slow request does not hold a fast one, and no delay ends early.
/// Bounds (issue 52): a timer only fires late, so the lower bounds hold on any host; the
/// upper ones allow over a second beyond the design, which a host that steals up to 50% of
/// the cores in slices of milliseconds (no 1-s hold seen at 11-48% steal) cannot take from
/// one request. The fast request (50 ms) must come back before 2.0 s: 1.95 s of slack, and
/// still 1 s under the slow one's 3.0 s, so one held behind the other fails. How precise a
/// 1-ms delay is belongs to the benchmark [`one_ms_delay_is_precise`].
#[test]
fn delays_are_timers_not_sleeps() {
    let s = start(RefServerConfig {
        delay_ms: 50.0,
        ..Default::default()
    });
    let mut slow = connect(&s);
    let mut fast = connect(&s);
    let (mut b1, mut b2) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    get(&mut slow, "/?delay_ms=3000");
    get(&mut fast, "/");
    read_response(&mut fast, &mut b2);
    let fast_t = t0.elapsed();
    read_response(&mut slow, &mut b1);
    let slow_t = t0.elapsed();
    assert!(
        fast_t >= Duration::from_millis(49) && fast_t < Duration::from_millis(2000),
        "{fast_t:?}"
    );
    assert!(slow_t >= Duration::from_millis(2999), "{slow_t:?}");
    // A 1 ms delay is never shorter than 1 ms (a timer fires late, never early).
    let samples = one_ms_delays(&mut fast, &mut b2);
    assert!(samples[0] >= Duration::from_micros(1000), "{samples:?}");
    // The server's own account of how late its delayed responses went out: a figure in
    // microseconds, each under a second (no hold of a second or more).
    let st = s.stats();
    assert_eq!(st["delayed_responses"], 32);
    let late = st["delay_late_us_mean"].as_f64().unwrap();
    assert!(
        (0.0..1_000_000.0).contains(&late),
        "mean lateness {late} us"
    );
}

/// Accuracy, not function: a 1 ms delay is 1 ms, not a poll tick later (p50 within 300 us,
/// mean lateness under 1 ms). Its 300-us margin is below what a host that steals in slices
/// of milliseconds takes, so it cannot be bounded at 1 in 10,000 false failures under 50%
/// steal (issue 52): it is ignored, and neither scripts/test.sh nor .ci runs ignored tests.
/// Run it as a benchmark on a quiet host:
/// `cargo test --profile ci -p pywebbench-refserver --test wire -- --ignored one_ms_delay_is_precise`.
#[test]
#[ignore = "benchmark: timer accuracy on a quiet host (see the doc comment)"]
fn one_ms_delay_is_precise() {
    let s = start(RefServerConfig::default());
    let mut c = connect(&s);
    let mut buf = Vec::new();
    let samples = one_ms_delays(&mut c, &mut buf);
    let p50 = samples[samples.len() / 2];
    assert!(
        p50 >= Duration::from_micros(1000) && p50 < Duration::from_micros(1300),
        "p50 of a 1 ms delay: {p50:?}"
    );
    let st = s.stats();
    assert_eq!(st["delayed_responses"], 30);
    let late = st["delay_late_us_mean"].as_f64().unwrap();
    assert!(late < 1000.0, "mean lateness {late} us");
}

/// A request in a stall is answered when the stall ends. Stalls of 2 s every 4 s: windows
/// [4, 6), [8, 10) s after the server's start, which is at most the start-up's time before
/// `started` (under 1 s: no hold of a second seen). The request goes out at 4.1 s (a late
/// wake-up under 1 s keeps it inside the window); its answer comes at the stall's end,
/// 6.0 s minus that start-up time, so after 5.0 s, and before 7.0 s (1 s of slack). Without
/// the stall it would come at 4.1 s plus any hold, under 5.0 s. The next request, sent
/// before 7.0 s plus a hold under 1 s, so before the next stall at 8.0 s, is answered under
/// 1.0 s (issue 52: margins of a second where the host steals in slices of milliseconds).
#[test]
fn stall_holds_responses_until_it_ends() {
    let s = start(RefServerConfig {
        stall_ms: 2000.0,
        stall_every_s: 4.0,
        ..Default::default()
    });
    let mut c = connect(&s);
    let mut buf = Vec::new();
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(4100));
    get(&mut c, "/");
    read_response(&mut c, &mut buf);
    let answered = started.elapsed();
    assert!(
        answered >= Duration::from_millis(5000) && answered < Duration::from_millis(7000),
        "answered at {answered:?}"
    );
    // Outside a stall: immediate.
    let t = Instant::now();
    get(&mut c, "/");
    read_response(&mut c, &mut buf);
    assert!(
        t.elapsed() < Duration::from_millis(1000),
        "{:?}",
        t.elapsed()
    );
}

#[test]
fn request_bodies_content_length_and_chunked() {
    let s = start(RefServerConfig::default());
    let mut c = connect(&s);
    let mut buf = Vec::new();
    c.write_all(b"POST /hello HTTP/1.1\r\nContent-Length: 11\r\n\r\nhello world")
        .unwrap();
    assert_eq!(read_response(&mut c, &mut buf).1, b"11");
    // Chunked, sent in awkward pieces, with an extension and a trailer.
    for piece in [
        &b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r"[..],
        b"\nabcd\r\n1",
        b"0\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\n",
    ] {
        c.write_all(piece).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(read_response(&mut c, &mut buf).1, b"20");
    // Expect: 100-continue gets the interim response before the body is sent.
    c.write_all(b"POST / HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n")
        .unwrap();
    while find(&buf, b"\r\n\r\n").is_none() {
        read_more(&mut c, &mut buf);
    }
    assert!(buf.starts_with(b"HTTP/1.1 100 Continue\r\n\r\n"));
    buf.drain(..25);
    c.write_all(b"abcd").unwrap();
    assert_eq!(read_response(&mut c, &mut buf).1, b"4");
    let st = s.stop();
    assert_eq!(st["request_bodies"], 3);
    assert_eq!(st["request_body_bytes"], 35);
}

fn expect_error_and_close(s: &RefServer, raw: &[u8], status: &str) {
    let mut c = connect(s);
    c.write_all(raw).unwrap();
    let (out, _) = read_to_end(&mut c);
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with(&format!("HTTP/1.1 {status}")),
        "for {:?}: {text}",
        String::from_utf8_lossy(raw)
    );
    assert!(text.contains("Connection: close"));
}

#[test]
fn malformed_requests_get_400_and_close() {
    let s = start(RefServerConfig::default());
    let cases: &[&[u8]] = &[
        b"GET\x01 / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
        b"GET /?status=abc HTTP/1.1\r\n\r\n",
    ];
    for raw in cases {
        expect_error_and_close(&s, raw, "400");
    }
    let mut big = b"GET / HTTP/1.1\r\n".to_vec();
    while big.len() < 20_000 {
        big.extend_from_slice(b"X-Filler: 0123456789012345678901234567890123456789\r\n");
    }
    big.extend_from_slice(b"\r\n");
    expect_error_and_close(&s, &big, "431");
    let st = s.stop();
    assert_eq!(st["bad_requests"], cases.len() as u64);
    assert_eq!(st["headers_too_large"], 1);
    assert_eq!(st["requests"], 0);
}

#[test]
fn slow_headers_time_out_with_408() {
    let s = start(RefServerConfig {
        header_timeout_ms: 200.0,
        ..Default::default()
    });
    let mut c = connect(&s);
    let t0 = Instant::now();
    c.write_all(b"GET / HTTP/1.1\r\nX-Slow: ").unwrap();
    let (out, _) = read_to_end(&mut c);
    let waited = t0.elapsed();
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 408"));
    // The 200-ms timer only fires late (its start, at the accept, may precede t0 by the
    // write's few microseconds: 190); the upper bound allows the design plus a second, which a
    // host that steals in slices of milliseconds cannot take from one timer (issue 52;
    // docs/contributing.md, "Timing bounds in the suite"), and still fails a timeout seen
    // over a second late or not at all (the client's read gives up at 5 s).
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_millis(200 + 1000),
        "{waited:?}"
    );
    // An idle connection with no partial request is not timed out by the header timeout.
    let mut idle = connect(&s);
    std::thread::sleep(Duration::from_millis(400));
    let mut buf = Vec::new();
    get(&mut idle, "/");
    assert_eq!(read_response(&mut idle, &mut buf).1, b"Hello, World!");
    assert_eq!(s.stats()["header_timeouts"], 1);
}

#[test]
fn misbehaviours_on_the_wire() {
    let s = start(RefServerConfig {
        drip_interval_ms: 2.0,
        ..Default::default()
    });
    let run = |path: &str| {
        let mut c = connect(&s);
        get(&mut c, path);
        read_to_end(&mut c)
    };
    let (out, rst) = run("/misbehave/close-mid-response");
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("Content-Length: 1000") && !rst);
    assert_eq!(out.len() - find(&out, b"\r\n\r\n").unwrap() - 4, 500);

    let (out, rst) = run("/misbehave/garbage-status");
    assert!(out.starts_with(b"HTTP/1.1 TWO-HUNDRED") && !rst);

    let (out, rst) = run("/misbehave/reset");
    assert!(out.is_empty() && rst, "reset: {out:?} rst={rst}");

    let (out, rst) = run("/misbehave/close-before-response");
    assert!(out.is_empty() && !rst);

    let (out, _) = run("/misbehave/bad-chunked");
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("Transfer-Encoding: chunked") && text.contains("\r\n\r\nzz\r\n"));

    // chunked is valid and keeps the connection.
    let mut c = connect(&s);
    get(&mut c, "/misbehave/chunked?size=40000");
    let mut got = Vec::new();
    while find(&got, b"\r\n0\r\n\r\n").is_none() {
        read_more(&mut c, &mut got);
    }
    let body_start = find(&got, b"\r\n\r\n").unwrap() + 4;
    let mut body = Vec::new();
    let mut rest = &got[body_start..];
    loop {
        let nl = find(rest, b"\r\n").unwrap();
        let n = usize::from_str_radix(std::str::from_utf8(&rest[..nl]).unwrap(), 16).unwrap();
        if n == 0 {
            break;
        }
        body.extend_from_slice(&rest[nl + 2..nl + 2 + n]);
        rest = &rest[nl + 2 + n + 2..];
    }
    assert_eq!(body.len(), 40000);
    assert!(body
        .iter()
        .enumerate()
        .all(|(i, b)| *b == b'a' + (i % 26) as u8));

    // drip: one byte at a time, paced.
    let mut c = connect(&s);
    let t0 = Instant::now();
    get(&mut c, "/misbehave/drip?interval_ms=3");
    let mut buf = Vec::new();
    let mut reads = 0;
    while !buf.ends_with(b"Hello, World!") {
        read_more(&mut c, &mut buf);
        reads += 1;
    }
    assert!(
        reads > buf.len() / 2,
        "{reads} reads for {} bytes",
        buf.len()
    );
    assert!(t0.elapsed() >= Duration::from_millis(3 * (buf.len() as u64 - 1)));

    // endless-headers: keeps coming, never a blank line.
    let mut c = connect(&s);
    get(&mut c, "/misbehave/endless-headers?interval_ms=1");
    let mut buf = Vec::new();
    while buf.len() < 64 * 1024 {
        read_more(&mut c, &mut buf);
    }
    assert!(find(&buf, b"\r\n\r\n").is_none());

    // huge-body: 10 GB announced, streamed; we read 8 MB and hang up.
    let mut c = connect(&s);
    get(&mut c, "/misbehave/huge-body");
    let mut buf = Vec::new();
    while buf.len() < 8 << 20 {
        read_more(&mut c, &mut buf);
    }
    assert!(String::from_utf8_lossy(&buf[..300]).contains("Content-Length: 10000000000"));
    drop(c);

    // no-response: nothing, and the socket stays open.
    let mut c = connect(&s);
    c.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    get(&mut c, "/misbehave/no-response");
    let mut tmp = [0u8; 16];
    let e = c.read(&mut tmp).unwrap_err();
    assert!(matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut
    ));
    c.shutdown(Shutdown::Write).unwrap();

    let st = s.stats();
    for m in Mode::ALL {
        if m != Mode::Normal {
            assert_eq!(st["modes"][m.name()], 1, "mode {m}");
        }
    }
}

#[test]
fn server_wide_mode_and_http10() {
    let s = start(RefServerConfig {
        mode: Mode::CloseBeforeResponse,
        ..Default::default()
    });
    let mut c = connect(&s);
    get(&mut c, "/anything");
    assert_eq!(read_to_end(&mut c), (Vec::new(), false));
    // /__stats is exempt from the server-wide mode.
    let mut c = connect(&s);
    c.write_all(b"GET /__stats HTTP/1.0\r\n\r\n").unwrap();
    let (out, _) = read_to_end(&mut c);
    let text = String::from_utf8_lossy(&out);
    assert!(text.contains("\"close-before-response\":1"), "{text}");
    drop(s);

    let s = start(RefServerConfig::default());
    let mut c = connect(&s);
    c.write_all(b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    let (head, _) = read_response(&mut c, &mut buf);
    assert!(head.contains("Connection: keep-alive"));
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let (out, _) = read_to_end(&mut c);
    assert!(String::from_utf8_lossy(&out).contains("Connection: close"));
}

#[test]
fn config_validation_names_the_field() {
    let bad = |cfg: RefServerConfig| RefServer::start(&cfg).err().expect("refused").to_string();
    assert!(bad(RefServerConfig {
        host: "0.0.0.0".into(),
        ..Default::default()
    })
    .contains("host"));
    assert!(bad(RefServerConfig {
        host: "10.1.2.3".into(),
        ..Default::default()
    })
    .contains("loopback"));
    assert!(bad(RefServerConfig {
        stall_ms: 100.0,
        ..Default::default()
    })
    .contains("stall"));
    assert!(bad(RefServerConfig {
        delay_ms: -1.0,
        ..Default::default()
    })
    .contains("delay_ms"));
    assert!(RefServerConfig::from_json(r#"{"delay_msec": 1}"#)
        .unwrap_err()
        .to_string()
        .contains("delay_msec"));
    let cfg = RefServerConfig::from_json(r#"{"mode": "drip", "delay_ms": 1.5}"#).unwrap();
    assert_eq!(cfg.mode, Mode::Drip);
    // IPv6 loopback works.
    let s = start(RefServerConfig {
        host: "::1".into(),
        threads: 2,
        ..Default::default()
    });
    assert!(s.url().starts_with("http://[::1]:"));
    let mut c = connect(&s);
    let mut buf = Vec::new();
    get(&mut c, "/");
    assert_eq!(read_response(&mut c, &mut buf).1, b"Hello, World!");
}

#[test]
fn idle_write_timeouts_and_connection_limit() {
    let s = start(RefServerConfig {
        idle_timeout_ms: 200.0,
        write_timeout_ms: 300.0,
        ..Default::default()
    });
    // Idle: used once, then silent: closed cleanly after ~200 ms.
    let mut idle = connect(&s);
    let mut buf = Vec::new();
    get(&mut idle, "/");
    read_response(&mut idle, &mut buf);
    let t0 = Instant::now();
    assert_eq!(read_to_end(&mut idle), (Vec::new(), false));
    let waited = t0.elapsed();
    // As the header timeout above: a timer only fires late; the design plus a second above.
    assert!(
        waited >= Duration::from_millis(190) && waited < Duration::from_millis(200 + 1000),
        "{waited:?}"
    );
    // A reader that never reads a huge body: dropped once the output stops moving.
    let mut stuck = connect(&s);
    get(&mut stuck, "/misbehave/huge-body");
    let t0 = Instant::now();
    while s.stats()["write_timeouts"] == 0 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.stats()["write_timeouts"], 1);
    drop(stuck);
    assert_eq!(s.stop()["idle_timeouts"], 1);

    // Connection limit: the 4th concurrent connection is refused (closed at once).
    let s = start(RefServerConfig {
        max_connections: 3,
        ..Default::default()
    });
    let held: Vec<TcpStream> = (0..3).map(|_| connect(&s)).collect();
    std::thread::sleep(Duration::from_millis(100));
    let mut extra = connect(&s);
    get(&mut extra, "/");
    let (out, _) = read_to_end(&mut extra);
    assert!(out.is_empty());
    assert!(s.stats()["connections_rejected"].as_u64().unwrap() >= 1);
    drop(held);
}

#[test]
fn random_garbage_never_takes_it_down() {
    let s = start(RefServerConfig {
        header_timeout_ms: 300.0,
        ..Default::default()
    });
    let pieces: &[&[u8]] = &[
        b"GET / HTTP/1.1\r\n",
        b"POST /?size=3 HTTP/1.1\r\n",
        b"Content-Length: 5\r\n",
        b"Transfer-Encoding: chunked\r\n",
        b"\r\n",
        b"5\r\nhello\r\n",
        b"0\r\n\r\n",
        b"ffffffffffffffffff\r\n",
        b"\x00\xff\x80",
        b"GET /misbehave/drip?interval_ms=0.1 HTTP/1.1\r\n\r\n",
        b"GET /misbehave/reset HTTP/1.1\r\n\r\n",
        b"HEAD /?size=99999999 HTTP/1.1\r\n\r\n",
        b"Connection: close\r\n",
    ];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..200 {
        let mut c = connect(&s);
        c.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut msg = Vec::new();
        for _ in 0..(next() % 8 + 1) {
            if next() % 4 == 0 {
                msg.extend((0..next() % 64).map(|_| next() as u8));
            } else {
                msg.extend_from_slice(pieces[(next() % pieces.len() as u64) as usize]);
            }
        }
        let _ = c.write_all(&msg);
        let mut tmp = [0u8; 4096];
        let _ = c.read(&mut tmp);
    }
    assert!(s.is_running());
    let mut c = connect(&s);
    let mut buf = Vec::new();
    get(&mut c, "/");
    assert_eq!(read_response(&mut c, &mut buf).1, b"Hello, World!");
    // Every abandoned connection is eventually closed (timeouts, EOF, lingering).
    drop(c);
    let t0 = Instant::now();
    while s.stats()["connections_open"] != 0 && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.stats()["connections_open"], 0);
}

#[test]
fn request_then_immediate_half_close_is_not_leaked() {
    let s = start(RefServerConfig::default());
    for path in ["/misbehave/no-response", "/", "/?delay_ms=50"] {
        let mut c = connect(&s);
        c.write_all(format!("GET {path} HTTP/1.1\r\n\r\n").as_bytes())
            .unwrap();
        c.shutdown(Shutdown::Write).unwrap();
        // The answer (if any) still comes, then the server closes its side too.
        let (out, _) = read_to_end(&mut c);
        assert_eq!(out.is_empty(), path.contains("no-response"), "{path}");
    }
    let t0 = Instant::now();
    while s.stats()["connections_open"] != 0 && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.stats()["connections_open"], 0);
}
