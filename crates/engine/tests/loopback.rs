//! End-to-end tests of the engine against tiny in-process servers on loopback.

mod common;

use common::read_request;
use pywebbench_engine::{merge, run, Io, LoadSpec, Mode};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;

/// A keep-alive server answering every request with `response` (one thread per connection).
/// Requests are recognised by their blank line (no bodies). With `close_after = Some((n,
/// last))` it answers the n-th request on a connection with `last` and closes. Returns the port.
fn serve(response: &'static [u8], close_after: Option<(usize, &'static [u8])>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                let mut pending = Vec::new();
                let mut served = 0usize;
                loop {
                    let n = match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    let mut out = Vec::new();
                    while let Some(i) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..i + 4);
                        served += 1;
                        if let Some((n, last)) = close_after {
                            if served == n {
                                out.extend_from_slice(last);
                                let _ = s.write_all(&out);
                                return;
                            }
                        }
                        out.extend_from_slice(response);
                    }
                    if s.write_all(&out).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A server like gunicorn's sync worker: one connection at a time, one request per
/// connection, `service` of work per request, then close. Returns the port.
fn serve_serially(service: std::time::Duration) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            read_request(&mut s);
            thread::sleep(service);
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

const HELLO: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
const CHUNKED: &[u8] =
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nHello\r\n8\r\n, World!\r\n0\r\n\r\n";

fn spec(port: u16, io: Io) -> LoadSpec {
    LoadSpec {
        url: format!("http://127.0.0.1:{port}/"),
        io,
        ..LoadSpec::default()
    }
}

/// Every test runs once on each I/O backend, and checks that backend ran.
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
    closed_loop_exact_budget,
    pipelined_chunked_with_body_check,
    server_closing_connections_is_followed,
    connection_per_request_and_open_loop,
    open_loop_over_new_connections_serves_its_queue_in_order,
    a_failed_connect_with_sends_waiting_keeps_its_connection,
    results_merge,
    a_share_of_fresh_connections_reconnects_for_every_request,
    each_connection_serves_its_requests_then_reconnects,
    refused_connections_end_a_budgeted_run,
    server_that_goes_away_still_ends_a_budgeted_run,
    rate_shortfall_names_the_limit_consistently_with_generator_bound,
);

/// The backend name a result must carry.
fn io_name(io: Io) -> &'static str {
    match io {
        Io::Uring => "uring",
        _ => "epoll",
    }
}

fn closed_loop_exact_budget(io: Io) {
    let port = serve(HELLO, None);
    let r = run(&LoadSpec {
        connections: 4,
        max_requests: Some(2000),
        ..spec(port, io)
    })
    .unwrap();
    assert_eq!(r.mode, Mode::Closed);
    assert_eq!(r.io, io_name(io));
    assert_eq!(r.requests, 2000);
    assert_eq!(r.errors, 0);
    assert_eq!(r.status_counts["200"], 2000);
    assert_eq!(r.latency.summary.count, 2000);
    assert_eq!(r.per_second.iter().map(|s| s.completed).sum::<u64>(), 2000);
    assert_eq!(r.connections.established, 4);
    assert!(r.bytes_in >= 2000 * HELLO.len() as u64);
}

fn pipelined_chunked_with_body_check(io: Io) {
    let port = serve(CHUNKED, None);
    let r = run(&LoadSpec {
        connections: 2,
        pipeline: 16,
        max_requests: Some(3200),
        expect_status: vec![200],
        expect_body: Some("Hello, World!".into()),
        ..spec(port, io)
    })
    .unwrap();
    assert_eq!(r.requests, 3200);
    assert_eq!(r.errors, 0, "{:?}", r.error_classes);
}

fn server_closing_connections_is_followed(io: Io) {
    // Like nginx's keepalive_requests: the third response says `Connection: close`. Pipelined
    // requests written after it are sent again on a new connection, not lost, not errors.
    const LAST: &[u8] =
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 13\r\n\r\nHello, World!";
    let port = serve(HELLO, Some((3, LAST)));
    let r = run(&LoadSpec {
        connections: 2,
        pipeline: 4,
        max_requests: Some(600),
        ..spec(port, io)
    })
    .unwrap();
    assert_eq!(r.requests, 600);
    assert_eq!(r.errors, 0, "{:?}", r.error_classes);
    assert!(r.connections.reopened >= 190, "{:?}", r.connections);
    assert!(r.connections.pipeline_resent > 0);
    assert_eq!(r.connections.requests_per_connection.max, 3);

    // An abrupt close (no header) fails the requests written after it: counted, not lost.
    // Each costs one request of the budget, so completions + errors = the budget.
    let port = serve(HELLO, Some((3, HELLO)));
    let r = run(&LoadSpec {
        connections: 2,
        pipeline: 4,
        max_requests: Some(600),
        ..spec(port, io)
    })
    .unwrap();
    // (EOF, or a reset when the server closed with our next requests unread.)
    let allowed = ["eof_before_headers", "reset_before_response"];
    assert!(r.errors > 0);
    assert!(
        r.error_classes
            .keys()
            .all(|k| allowed.contains(&k.as_str())),
        "{:?}",
        r.error_classes
    );
    assert_eq!(r.requests + r.errors, 600);
}

fn connection_per_request_and_open_loop(io: Io) {
    let port = serve(HELLO, None);
    let r = run(&LoadSpec {
        connections: 2,
        keepalive: false,
        max_requests: Some(300),
        ..spec(port, io)
    })
    .unwrap();
    assert_eq!(r.mode, Mode::ConnectionPerRequest);
    assert_eq!(r.requests, 300);
    assert!(r.connections.established >= 300);

    let r = run(&LoadSpec {
        connections: 4,
        rate: Some(1000.0),
        duration_s: Some(1.0),
        ..spec(port, io)
    })
    .unwrap();
    assert_eq!(r.mode, Mode::Open);
    let ol = r.open_loop.as_ref().unwrap();
    // Every send scheduled in the second is offered, however late the thread gets to it.
    assert_eq!(ol.offered, 1000, "{ol:?}");
    assert_eq!(r.errors, 0, "{:?}", r.error_classes);
    // Each one is answered, or in flight or unsent at the end: half of them unfinished needs
    // the server or the generator held for the last half second, where a host steals in
    // slices of milliseconds (docs/contributing.md, "Timing bounds in the suite").
    let unfinished = ol.unsent_at_end + r.connections.in_flight_at_end;
    assert_eq!(r.requests + unfinished, ol.offered, "{ol:?}");
    assert!(unfinished <= 500, "{unfinished} unfinished: {ol:?}");
    assert_eq!(r.schedule_lag.as_ref().unwrap().summary.count, ol.offered);
}

/// Open loop, a new connection per request, offered twice what a serial server can do: the
/// sends that waited for a connection are served oldest first and their wait is in the
/// latency. (They once went back behind later arrivals and were never sent, so an overloaded
/// server read as fast: the p99 of the requests that got through was the service time.)
fn open_loop_over_new_connections_serves_its_queue_in_order(io: Io) {
    let port = serve_serially(std::time::Duration::from_millis(4));
    let r = run(&LoadSpec {
        connections: 1,
        keepalive: false,
        rate: Some(500.0),
        duration_s: Some(1.0),
        ..spec(port, io)
    })
    .unwrap();
    let ol = r.open_loop.as_ref().unwrap();
    assert!(ol.queued > 100, "{ol:?}");
    // At most 250 answered a second (a 4-ms sleep only ends late); the rest waited, longest
    // at the end of the run. The floor is a function check (the connection kept serving its
    // queue), not a rate: 25 or fewer answered in the second leaves at least
    // 1 s - 25 x 6 ms (the 4-ms sleep plus a new connection's round trip, well under 2 ms on
    // a core 1.45x slower) = 0.85 s in which neither the server nor the generator ran, where
    // a host steals in slices of milliseconds (docs/contributing.md, "Timing bounds in the
    // suite").
    assert!((26..=260).contains(&r.requests), "{} {ol:?}", r.requests);
    let p99_us = r.latency.summary.p99;
    assert!(
        p99_us >= 300_000,
        "p99 {p99_us} us: the queued sends' wait is missing"
    );
    assert_eq!(
        r.requests + ol.unsent_at_end + r.connections.in_flight_at_end + r.errors,
        ol.offered,
        "{ol:?}"
    );
}

/// Open loop, a new connection per request, sends waiting: when the server goes away, each
/// connect fails at once, and the connection must still serve the queue after its back-off
/// (it once parked a second send on itself and was never used again: the run went on until
/// its 24 h limit, the failures unreported).
fn a_failed_connect_with_sends_waiting_keeps_its_connection(io: Io) {
    use std::os::unix::net::UnixListener;
    let path = std::env::temp_dir().join(format!(
        "pwb-engine-gone-{}-{}.sock",
        std::process::id(),
        io_name(io)
    ));
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path).unwrap();
    thread::spawn(move || {
        // 20 requests, slowly, then the listener goes (its path stays: connects are refused)
        for s in l.incoming().take(20) {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            thread::sleep(std::time::Duration::from_millis(5));
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    let spec = LoadSpec {
        url: "http://localhost/".into(),
        unix_socket: Some(path.to_string_lossy().into_owned()),
        connections: 1,
        keepalive: false,
        rate: Some(400.0),
        max_requests: Some(60),
        io,
        ..LoadSpec::default()
    };
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(run(&spec));
    });
    let r = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the run did not end: a connection was lost")
        .unwrap();
    let _ = std::fs::remove_file(&path);
    assert!(r.requests <= 20, "{}", r.requests);
    assert!(
        r.error_classes.contains_key("connect_refused"),
        "{:?}",
        r.error_classes
    );
    assert_eq!(r.requests + r.errors, 60, "{:?}", r.error_classes);
}

fn a_share_of_fresh_connections_reconnects_for_every_request(io: Io) {
    // Half of 4 connections arrive anew for every request (arriving clients); the other
    // two keep theirs. Requests per connection: 1 on the fresh ones, many on the others.
    let port = serve(HELLO, None);
    let r = run(&LoadSpec {
        connections: 4,
        fresh_share: 0.5,
        duration_s: Some(0.5),
        ..spec(port, io)
    })
    .unwrap();
    assert_eq!(r.mode, Mode::Closed);
    assert_eq!(r.errors, 0, "{:?}", r.error_classes);
    let c = &r.connections;
    // How the requests split between the two kinds depends on how much longer a
    // connect-per-request cycle takes than a kept connection's, which is timing: in one
    // suite run here the fresh pair served only 41 of 400, and with a build running on the
    // machine it reconnected fewer than 16 times. A budget of 400 requests also let one kept
    // connection serve 397 of them before either fresh one reconnected once, with the
    // other tests' threads and a neighbour spinning on the two cores: so the run is bounded
    // in time, which gives every connection the same half second, and only what does not
    // depend on timing is asserted: both fresh connections reconnected, and the kept ones
    // served many.
    assert!(
        c.established >= c.targeted + 2 && c.established < r.requests,
        "{c:?}"
    );
    // A reopen counts when its connect starts: one may still be under way at the end.
    assert_eq!(c.reopened, c.attempts - c.targeted, "{c:?}");
    assert!(c.attempts - c.established <= 2, "{c:?}");
    assert_eq!(c.requests_per_connection.min, 1, "{c:?}");
    assert!(c.requests_per_connection.max >= 20, "{c:?}");
    // Only the closed loop with keep-alive takes fresh connections.
    let bad = LoadSpec {
        keepalive: false,
        fresh_share: 0.2,
        ..spec(port, io)
    };
    assert!(bad.validate().unwrap_err().starts_with("fresh_share:"));
}

fn each_connection_serves_its_requests_then_reconnects(io: Io) {
    // httperf's --num-calls: 400 requests over 4 keep-alive connections, each closed after
    // 10 responses and opened again; pipelined, the last batch before the close is cut short
    // (nothing is written that the connection will not answer), so no request is resent.
    for (pipeline, rate) in [(1, None), (4, None), (1, Some(4000.0))] {
        let port = serve(HELLO, None);
        let r = run(&LoadSpec {
            connections: 4,
            pipeline,
            rate,
            requests_per_connection: 10,
            max_requests: Some(400),
            ..spec(port, io)
        })
        .unwrap();
        assert_eq!(r.requests, 400, "pipeline {pipeline}, rate {rate:?}");
        assert_eq!(r.errors, 0, "{:?}", r.error_classes);
        let c = &r.connections;
        // The budget splits unevenly over the 4: each may end on one partial connection,
        // and a reconnect started as the budget ran out may not be established by the end.
        assert!((40..=44).contains(&c.established), "{c:?}");
        assert_eq!(c.reopened, c.attempts - c.targeted, "{c:?}");
        assert_eq!(c.pipeline_resent, 0, "{c:?}");
        let per = &c.requests_per_connection;
        // (a connection opened as the budget ran out served none: it is not counted)
        assert_eq!((per.max, per.p50), (10, 10), "{c:?}");
        assert!((40..=44).contains(&per.count), "{c:?}");
    }
    let bad = LoadSpec {
        keepalive: false,
        requests_per_connection: 10,
        ..spec(1, io)
    };
    assert!(bad
        .validate()
        .unwrap_err()
        .starts_with("requests_per_connection:"));
}

fn results_merge(io: Io) {
    let port = serve(HELLO, None);
    let a = run(&LoadSpec {
        connections: 2,
        max_requests: Some(500),
        ..spec(port, io)
    })
    .unwrap();
    let b = run(&LoadSpec {
        connections: 3,
        max_requests: Some(700),
        ..spec(port, io)
    })
    .unwrap();
    let m = merge(&[a.clone(), b]).unwrap();
    assert_eq!(m.requests, 1200);
    assert_eq!(m.io, io_name(io));
    assert_eq!(m.latency.summary.count, 1200);
    assert_eq!(m.spec.connections, 5);
    assert_eq!(m.generator.threads.len(), 2);
    let json = m.to_json();
    assert_eq!(pywebbench_engine::LoadResult::from_json(&json).unwrap(), m);
    assert!(merge(&[]).is_err());
    let _ = a;
}

fn refused_connections_end_a_budgeted_run(io: Io) {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let r = run(&LoadSpec {
        connections: 2,
        max_requests: Some(10),
        ..spec(port, io)
    })
    .unwrap();
    assert_eq!(r.requests, 0);
    assert!(r.error_classes["connect_refused"].count >= 10);
    let _ = TcpStream::connect(("127.0.0.1", port)).is_err();
}

fn server_that_goes_away_still_ends_a_budgeted_run(io: Io) {
    // Answers one request on each of two connections, closes them abruptly, and is gone.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    thread::spawn(move || {
        for _ in 0..2 {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(HELLO);
        }
    });
    let t = std::time::Instant::now();
    let r = run(&LoadSpec {
        connections: 2,
        pipeline: 4,
        max_requests: Some(100),
        ..spec(port, io)
    })
    .unwrap();
    assert!(t.elapsed().as_secs() < 10, "{:?}", t.elapsed());
    assert!(r.requests >= 1 && r.requests <= 2, "{}", r.requests);
    assert!(r.errors >= 98 - r.requests, "{:?}", r.error_classes);
    assert!(r.error_classes.contains_key("connect_refused"));
}

fn rate_shortfall_names_the_limit_consistently_with_generator_bound(io: Io) {
    use pywebbench_engine::result::self_check;
    let port = serve(HELLO, None);
    let base = run(&LoadSpec {
        connections: 4,
        rate: Some(500.0),
        duration_s: Some(1.0),
        ..spec(port, io)
    })
    .unwrap();
    let mut ok_hist = pywebbench_engine::hist::new_hist();
    for _ in 0..100 {
        pywebbench_engine::hist::record(&mut ok_hist, 20);
    }
    let lag_ok = pywebbench_engine::hist::HistData::from_hist(&ok_hist);
    let mut late_hist = pywebbench_engine::hist::new_hist();
    for _ in 0..100 {
        pywebbench_engine::hist::record(&mut late_hist, 5_000);
    }
    let lag_late = pywebbench_engine::hist::HistData::from_hist(&late_hist);
    let shortfall = |r: &pywebbench_engine::LoadResult| {
        r.warnings.iter().find(|w| w.contains("offered (")).cloned()
    };
    // Half the offered rate, sends late, connections free: generator-bound, and said so.
    let mut r = base.clone();
    r.duration_s = 1.0;
    r.open_loop.as_mut().unwrap().achieved_rate = 250.0;
    r.open_loop.as_mut().unwrap().queued = 0;
    r.schedule_lag = Some(lag_late.clone());
    self_check(&mut r);
    assert!(r.generator.generator_bound);
    let w = shortfall(&r).unwrap();
    assert!(w.contains("the generator sent late"), "{w}");
    // Same, but sends waited for connections: the server/pool is named (and the lag noted).
    r.open_loop.as_mut().unwrap().queued = 100;
    self_check(&mut r);
    let w = shortfall(&r).unwrap();
    assert!(
        w.contains("could not keep up") && w.contains("also late"),
        "{w}"
    );
    // On time, nothing queued: responses did not complete; not generator-bound.
    r.schedule_lag = Some(lag_ok);
    r.open_loop.as_mut().unwrap().queued = 0;
    r.generator.threads.iter_mut().for_each(|t| t.busy = 0.1);
    self_check(&mut r);
    assert!(!r.generator.generator_bound, "{:?}", r.warnings);
    let w = shortfall(&r).unwrap();
    assert!(w.contains("sent on time"), "{w}");
    // A busy generator thread counts as late too.
    r.generator.threads[0].busy = 0.97;
    r.generator.threads[0].wall_s = 1.0;
    self_check(&mut r);
    assert!(r.generator.generator_bound);
    assert!(shortfall(&r).unwrap().contains("the generator sent late"));
    // At the offered rate: no shortfall warning.
    r.open_loop.as_mut().unwrap().achieved_rate = 499.0;
    self_check(&mut r);
    assert!(shortfall(&r).is_none(), "{:?}", r.warnings);
}
