//! Tests of the load spec: URL parsing, validation messages, defaults.
use super::*;

fn spec(url: &str) -> LoadSpec {
    LoadSpec {
        url: url.into(),
        ..LoadSpec::default()
    }
}

#[test]
fn urls_parse() {
    assert_eq!(
        parse_url("http://127.0.0.1:8080/a?b=1").unwrap(),
        ("127.0.0.1".into(), 8080, "/a?b=1".into())
    );
    assert_eq!(
        parse_url("http://localhost").unwrap(),
        ("localhost".into(), 80, "/".into())
    );
    assert_eq!(
        parse_url("http://[::1]:81/x").unwrap(),
        ("::1".into(), 81, "/x".into())
    );
    assert_eq!(
        parse_url("http://h:1?q").unwrap(),
        ("h".into(), 1, "/?q".into())
    );
    assert!(parse_url("https://x/").unwrap_err().contains("https"));
    assert!(parse_url("ftp://x/").unwrap_err().starts_with("url:"));
    assert!(parse_url("http://x:99999/").is_err());
}

#[test]
fn request_is_serialised_once() {
    let mut s = spec("http://127.0.0.1:8080/p");
    s.method = "POST".into();
    s.body = "abc".into();
    s.headers = vec![("X-A".into(), "1".into())];
    let p = s.plan().unwrap();
    let r = String::from_utf8(p.request).unwrap();
    assert_eq!(
        r,
        "POST /p HTTP/1.1\r\nX-A: 1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 3\r\n\r\nabc"
    );
    s.keepalive = false;
    s.body.clear();
    s.method = "GET".into();
    let r = String::from_utf8(s.plan().unwrap().request).unwrap();
    assert!(r.ends_with("Connection: close\r\n\r\n"));
}

#[test]
fn binary_body_from_base64() {
    use base64::Engine as _;
    let all: Vec<u8> = (0..=255u8).collect();
    let mut s = spec("http://127.0.0.1:8080/p");
    s.method = "POST".into();
    s.body_b64 = base64::engine::general_purpose::STANDARD.encode(&all);
    let p = s.plan().unwrap();
    let head = b"POST /p HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 256\r\n\r\n";
    assert_eq!(&p.request[..head.len()], head);
    assert_eq!(&p.request[head.len()..], &all[..]);
    // The spec round-trips through JSON with the base64 form only.
    let j = serde_json::to_string(&s).unwrap();
    assert!(j.contains("\"body_b64\"") && !j.contains("\"body\""), "{j}");
    assert_eq!(serde_json::from_str::<LoadSpec>(&j).unwrap(), s);
    s.body = "x".into();
    assert!(s.plan().unwrap_err().starts_with("body_b64:"));
    s.body.clear();
    s.body_b64 = "not base64!".into();
    assert!(s
        .plan()
        .unwrap_err()
        .starts_with("body_b64: not valid base64"));
}

#[test]
fn validation_names_the_field() {
    let cases = [
        (r#""connections": 0"#, "connections: must be >= 1"),
        (r#""connections": -1"#, "connections: invalid value"),
        (r#""connections": "8""#, "connections: invalid type"),
        (r#""conections": 1"#, "conections: unknown load spec field"),
        (r#""threads": 0"#, "threads:"),
        (r#""threads": 65"#, "threads:"),
        (r#""pipeline": 0"#, "pipeline:"),
        (r#""pipeline": 4, "keepalive": false"#, "pipeline:"),
        (r#""duration_s": -1"#, "duration_s:"),
        (r#""timeout_s": 0"#, "timeout_s:"),
        (r#""rate": 0"#, "rate:"),
        (r#""arrival": "bursty""#, "arrival: unknown variant"),
        (r#""io": "kqueue""#, "io: unknown variant"),
        (r#""method": "G T""#, "method:"),
        (r#""expect_status": [42]"#, "expect_status:"),
        (r#""headers": [["Content-Length", "1"]]"#, "headers:"),
        (r#""queue_limit": 5"#, "queue_limit:"),
        (r#""url": "https://x/""#, "url:"),
    ];
    for (field, prefix) in cases {
        let json = format!(r#"{{"url": "http://127.0.0.1:1/", "connections": 64, {field}}}"#);
        let e = normalise_spec_json(&json).unwrap_err();
        assert!(e.starts_with(prefix), "{e} should start with {prefix}");
        assert!(!e.contains('\n'), "{e} is one line");
    }
    assert!(normalise_spec_json("[1]")
        .unwrap_err()
        .starts_with("load spec:"));
}

#[test]
fn normalised_spec_has_every_default() {
    let j = normalise_spec_json(r#"{"url": "http://nowhere.invalid/", "rate": 5}"#).unwrap();
    let back: LoadSpec = serde_json::from_str(&j).unwrap();
    let want = LoadSpec {
        rate: Some(5.0),
        ..spec("http://nowhere.invalid/")
    };
    assert_eq!(back, want, "validation does not resolve the host");
    assert!(j.contains(r#""connections":64"#) && j.contains(r#""queue_limit":null"#));
}

#[test]
fn modes_and_defaults() {
    let mut s = spec("http://127.0.0.1:1/");
    assert_eq!(s.mode(), Mode::Closed);
    assert_eq!(s.plan().unwrap().duration_ns, 10_000_000_000);
    s.keepalive = false;
    assert_eq!(s.mode(), Mode::ConnectionPerRequest);
    s.rate = Some(100.0);
    assert_eq!(s.mode(), Mode::Open);
    assert_eq!(s.plan().unwrap().queue_limit, 1000);
    let j: LoadSpec =
        serde_json::from_str(r#"{"url": "http://x:1/", "arrival": "poisson"}"#).unwrap();
    assert_eq!(j.arrival, Arrival::Poisson);
    assert!(serde_json::from_str::<LoadSpec>(r#"{"url": "x", "conections": 1}"#).is_err());
}

#[test]
fn unix_socket_targets_parse_and_are_checked() {
    let e = spec("unix:/run/a:b.sock:/x?y").endpoint().unwrap();
    assert_eq!((e.host.as_str(), e.path.as_str()), ("localhost", "/x?y"));
    assert_eq!(e.unix_socket, Some(("url", "/run/a:b.sock".to_string())));
    assert_eq!(spec("unix:/s.sock").endpoint().unwrap().path, "/");
    let mut s = spec("unix:/s.sock:/");
    s.unix_socket = Some("/t.sock".into());
    assert!(s.validate().unwrap_err().starts_with("unix_socket:"));
    let mut s = spec("http://localhost/");
    s.unix_socket = Some("/no/such.sock".into());
    assert_eq!(
        s.plan().unwrap_err(),
        "unix_socket: unix socket /no/such.sock does not exist"
    );
    s.source_addresses = vec!["127.0.0.2".into()];
    assert!(s.validate().unwrap_err().starts_with("source_addresses:"));
}

#[test]
fn protocol_and_streams_are_checked_with_their_field() {
    let h2 = |f: fn(&mut LoadSpec)| {
        let mut s = spec("http://127.0.0.1:8080/");
        s.protocol = Protocol::H2c;
        f(&mut s);
        s.validate()
    };
    assert!(h2(|s| s.streams = 100).is_ok());
    let err = |r: Result<(), String>| r.unwrap_err();
    assert!(err(h2(|s| s.streams = 0)).starts_with("streams: "));
    assert!(err(h2(|s| s.pipeline = 2)).starts_with("pipeline: "));
    assert!(err(h2(|s| s.keepalive = false)).starts_with("keepalive: "));
    assert!(err(h2(|s| s.body = "x".repeat(20_000))).starts_with("body: "));
    let e = err(h2(|s| s.headers = vec![("Upgrade".into(), "h2c".into())]));
    assert!(e.starts_with("headers: Upgrade"), "{e}");
    let mut s = spec("http://127.0.0.1:8080/");
    s.streams = 4;
    assert!(err(s.validate()).starts_with("streams: concurrent streams need protocol h2c"));
    let e = LoadSpec::from_json(r#"{"url": "http://x/", "protocol": "h3"}"#).unwrap_err();
    assert!(e.starts_with("protocol: "), "{e}");
}

#[test]
fn an_h2c_plan_carries_the_encoded_request() {
    let mut s = spec("http://127.0.0.1:8080/x");
    s.protocol = Protocol::H2c;
    let plan = s.plan().unwrap();
    let h2 = plan.h2.expect("h2c request");
    assert!(h2.body.is_empty());
    assert!(!h2.block.is_empty());
    assert!(spec("http://127.0.0.1:8080/").plan().unwrap().h2.is_none());
}

#[test]
fn ws_needs_a_ws_url_and_refuses_what_it_does_not_send() {
    let ws = |f: fn(&mut LoadSpec)| {
        let mut s = spec("ws://127.0.0.1:8080/ws");
        s.protocol = Protocol::Ws;
        f(&mut s);
        s.validate()
    };
    let err = |r: Result<(), String>| r.unwrap_err();
    assert!(ws(|_| {}).is_ok());
    assert!(ws(|s| s.pipeline = 4).is_ok());
    assert!(ws(|s| s.keepalive = false).is_ok());
    assert!(ws(|s| s.rate = Some(100.0)).is_ok());
    assert!(ws(|s| s.message_bytes = 16 << 20).is_ok());
    assert!(err(ws(|s| s.message_bytes = (16 << 20) + 1)).starts_with("message_bytes: "));
    assert!(err(ws(|s| s.url = "http://127.0.0.1:8080/".into())).starts_with("url: protocol ws"));
    assert!(err(ws(|s| s.url = "wss://127.0.0.1/".into())).contains("wss"));
    assert!(err(ws(|s| s.streams = 2)).starts_with("streams: "));
    assert!(err(ws(|s| s.method = "POST".into())).starts_with("method: "));
    assert!(err(ws(|s| s.body = "x".into())).starts_with("body: "));
    assert!(err(ws(|s| s.expect_status = vec![200])).starts_with("expect_status: "));
    assert!(err(ws(|s| s.expect_body = Some("x".into()))).starts_with("expect_body: "));
    let e = err(ws(|s| {
        s.headers = vec![("Sec-WebSocket-Key".into(), "x".into())]
    }));
    assert!(e.starts_with("headers: Sec-WebSocket-Key"), "{e}");
    // A ws:// URL without protocol ws, and message_bytes without it.
    let e = err(spec("ws://127.0.0.1:8080/").validate());
    assert!(e.starts_with("url: a ws:// URL needs protocol ws"), "{e}");
    let mut s = spec("http://127.0.0.1:8080/");
    s.message_bytes = 100;
    assert!(err(s.validate()).starts_with("message_bytes: applies to protocol ws only"));
}

#[test]
fn a_ws_plan_carries_the_upgrade_request() {
    let mut s = spec("ws://127.0.0.1:8080/ws?room=1");
    s.protocol = Protocol::Ws;
    s.message_bytes = 10;
    let plan = s.plan().unwrap();
    let ws = plan.ws.expect("a ws plan");
    let req = String::from_utf8(plan.request).unwrap();
    assert!(req.starts_with("GET /ws?room=1 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"));
    assert!(req.contains("Upgrade: websocket\r\n"));
    assert_eq!(ws.pattern.len(), 10);
    assert_eq!(ws.accept, crate::ws::accept_for(crate::ws::KEY));
    // message_bytes is written only when it is not the default.
    let json = serde_json::to_string(&s).unwrap();
    assert!(json.contains(r#""message_bytes":10"#), "{json}");
    s.message_bytes = 64;
    assert!(!serde_json::to_string(&s).unwrap().contains("message_bytes"));
    assert!(spec("http://127.0.0.1:8080/").plan().unwrap().ws.is_none());
}
