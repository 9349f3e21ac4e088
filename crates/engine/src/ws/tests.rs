use super::*;

/// A server frame (unmasked) of `opcode` with `payload`; `fin` as given.
fn server_frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![(if fin { 0x80 } else { 0 }) | opcode];
    let len = payload.len();
    if len < 126 {
        out.push(len as u8);
    } else if len <= 0xffff {
        out.push(126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
    out
}

/// Everything the parser reports for `data` fed in pieces of `step` bytes: messages (as
/// their bytes), pings, closes, and the error class it stopped on.
fn events(data: &[u8], step: usize) -> (Vec<String>, Option<ErrorClass>) {
    let mut p = FrameParser::new();
    let mut out = Vec::new();
    let mut msg = Vec::new();
    for piece in data.chunks(step.max(1)) {
        let mut off = 0;
        while off < piece.len() {
            match p.step(&piece[off..]) {
                Ok(s) => {
                    assert!(s.consumed > 0 || s.event.is_some());
                    off += s.consumed;
                    match s.event {
                        Some(Event::Data { payload, end }) => {
                            msg.extend_from_slice(payload);
                            if end {
                                out.push(format!("msg {}", String::from_utf8_lossy(&msg)));
                                msg.clear();
                            }
                        }
                        Some(Event::Ping { payload, len }) => out.push(format!(
                            "ping {}",
                            String::from_utf8_lossy(&payload[..len as usize])
                        )),
                        Some(Event::Close { code, reason }) => {
                            out.push(format!("close {code:?} {reason}"))
                        }
                        None => {}
                    }
                }
                Err((c, _)) => return (out, Some(c)),
            }
        }
    }
    (out, None)
}

#[test]
fn sha1_matches_known_digests() {
    let hex = |d: [u8; 20]| d.iter().map(|b| format!("{b:02x}")).collect::<String>();
    assert_eq!(hex(sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    assert_eq!(
        hex(sha1(b"abc")),
        "a9993e364706816aba3e25717850c26c9cd0d89d"
    );
    let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    assert_eq!(hex(sha1(long)), "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    assert_eq!(
        hex(sha1(&[b'a'; 1000])),
        "291e9a6c66994949b57ba5e650361e98fc36b1ba"
    );
}

#[test]
fn accept_is_the_rfc_example() {
    // RFC 6455 1.3.
    assert_eq!(
        accept_for("dGhlIHNhbXBsZSBub25jZQ=="),
        "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    );
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD
        .decode(KEY)
        .unwrap();
    assert_eq!(key.len(), 16, "the key is a 16-byte nonce");
}

#[test]
fn the_upgrade_request_has_the_websocket_headers() {
    let r = handshake_request("127.0.0.1:8000", "/ws?x=1", &[("X-A".into(), "1".into())]);
    let r = String::from_utf8(r).unwrap();
    assert!(r.starts_with("GET /ws?x=1 HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nX-A: 1\r\n"));
    assert!(r.contains("Upgrade: websocket\r\nConnection: Upgrade\r\n"));
    assert!(r.contains(&format!("Sec-WebSocket-Key: {KEY}\r\n")));
    assert!(r.ends_with("Sec-WebSocket-Version: 13\r\n\r\n"));
    let own = handshake_request("h", "/", &[("host".into(), "other".into())]);
    assert_eq!(String::from_utf8(own).unwrap().matches("ost:").count(), 1);
}

fn answer(status: &str, accept: &str, extra: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n{extra}\r\n"
    )
    .into_bytes()
}

#[test]
fn a_101_with_the_right_accept_completes_the_handshake_in_any_pieces() {
    let accept = accept_for(KEY);
    let mut data = answer("101 Switching Protocols", &accept, "");
    let head = data.len();
    data.extend(server_frame(true, OP_BINARY, b"hi"));
    for step in 1..data.len() {
        let mut h = Handshake::new();
        let mut fed = 0;
        loop {
            let end = (fed + step).min(data.len());
            match h.feed(&data[fed..end], &accept).unwrap() {
                HandshakeFeed::NeedMore => fed = end,
                HandshakeFeed::Done { consumed } => {
                    assert_eq!(fed + consumed, head, "step {step}");
                    break;
                }
            }
        }
    }
}

#[test]
fn other_answers_are_rejected_naming_the_status() {
    let accept = accept_for(KEY);
    let feed = |data: &[u8]| Handshake::new().feed(data, &accept);
    let e = feed(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").unwrap_err();
    assert_eq!(e.0, ErrorClass::WsHandshakeRejected);
    assert!(e.1.contains("404 Not Found"), "{}", e.1);
    let e = feed(&answer("101 Switching Protocols", "AAAA", "")).unwrap_err();
    assert!(e.1.contains("wrong Sec-WebSocket-Accept"), "{}", e.1);
    let ext = answer(
        "101 Switching Protocols",
        &accept,
        "Sec-WebSocket-Extensions: permessage-deflate\r\n",
    );
    assert_eq!(feed(&ext).unwrap_err().0, ErrorClass::WsHandshakeRejected);
    let e = feed(b"SSH-2.0-OpenSSH\r\n\r\n").unwrap_err();
    assert_eq!(e.0, ErrorClass::WsProtocolError);
    let mut long = b"HTTP/1.1 101 Switching Protocols\r\n".to_vec();
    long.extend(std::iter::repeat_n(b'x', MAX_HEAD + 10));
    assert_eq!(feed(&long).unwrap_err().0, ErrorClass::WsHandshakeRejected);
}

#[test]
fn client_frames_are_masked_and_unmask_to_the_message() {
    for len in [0usize, 3, 4, 125, 126, 65535, 65536, 70_000] {
        let pattern = pattern(len);
        let mut out = Vec::new();
        let mask = [0x12, 0x34, 0x56, 0x78];
        client_message(&mut out, &pattern, 0xA1B2C3D4, mask);
        assert_eq!(out[0], 0x82);
        assert_eq!(out[1] & 0x80, 0x80, "masked");
        let (hlen, n) = match out[1] & 0x7f {
            126 => (4, u16::from_be_bytes([out[2], out[3]]) as usize),
            127 => (
                10,
                u64::from_be_bytes(out[2..10].try_into().unwrap()) as usize,
            ),
            l => (2, l as usize),
        };
        assert_eq!(n, len);
        assert_eq!(&out[hlen..hlen + 4], &mask);
        let mut payload = out[hlen + 4..].to_vec();
        assert_eq!(payload.len(), len);
        apply_mask(&mut payload, mask);
        assert!(
            !echo_differs(&pattern, 0xA1B2C3D4, 0, &payload),
            "len {len}"
        );
        if len > 0 {
            assert!(echo_differs(&pattern, 0xA1B2C3D5, 0, &payload));
            // In pieces, at their offsets.
            let mid = len / 2;
            assert!(!echo_differs(&pattern, 0xA1B2C3D4, 0, &payload[..mid]));
            assert!(!echo_differs(
                &pattern,
                0xA1B2C3D4,
                mid as u64,
                &payload[mid..]
            ));
            let mut bad = payload.clone();
            bad[len - 1] ^= 1;
            assert!(echo_differs(&pattern, 0xA1B2C3D4, 0, &bad));
        }
        // One byte too many differs.
        assert!(echo_differs(&pattern, 0xA1B2C3D4, len as u64, b"x"));
    }
}

#[test]
fn messages_of_every_length_form_parse_in_any_pieces() {
    for len in [0usize, 1, 125, 126, 127, 65535, 65536, 100_000] {
        let body: Vec<u8> = (0..len).map(|k| b'a' + (k % 26) as u8).collect();
        let data = server_frame(true, OP_BINARY, &body);
        let want = format!("msg {}", String::from_utf8_lossy(&body));
        for step in [1, 7, 1000, data.len()] {
            let (got, err) = events(&data, step);
            assert_eq!(err, None, "len {len}");
            assert_eq!(got, vec![want.clone()], "len {len} step {step}");
        }
    }
}

#[test]
fn fragments_with_control_frames_between_them_make_one_message() {
    let mut data = server_frame(false, OP_TEXT, b"hel");
    data.extend(server_frame(true, OP_PING, b"p1"));
    data.extend(server_frame(false, OP_CONTINUATION, b""));
    data.extend(server_frame(true, OP_PONG, b"ignored"));
    data.extend(server_frame(true, OP_CONTINUATION, b"lo"));
    data.extend(server_frame(true, OP_BINARY, b""));
    let close = [&1001u16.to_be_bytes()[..], b"bye"].concat();
    data.extend(server_frame(true, OP_CLOSE, &close));
    for step in 1..=data.len() {
        let (got, err) = events(&data, step);
        assert_eq!(err, None);
        assert_eq!(
            got,
            ["ping p1", "msg hello", "msg ", "close Some(1001) bye"],
            "step {step}"
        );
    }
}

#[test]
fn framing_violations_are_protocol_errors() {
    let bad = |data: Vec<u8>| {
        let (_, err) = events(&data, data.len());
        assert_eq!(err, Some(ErrorClass::WsProtocolError), "{data:?}");
    };
    bad(vec![0x82, 0x81, 1, 2, 3, 4, 0]); // masked
    bad(vec![0xC2, 0x00]); // RSV1
    bad(vec![0x83, 0x00]); // unknown opcode
    bad(server_frame(true, OP_CONTINUATION, b"x")); // nothing to continue
    bad([
        server_frame(false, OP_TEXT, b"a"),
        server_frame(true, OP_TEXT, b"b"),
    ]
    .concat());
    bad(server_frame(false, OP_PING, b"x")); // fragmented control
    bad(vec![0x89, 126, 0, 200]); // long control
    bad(vec![0x82, 126, 0, 5]); // 16-bit form for a short length
    bad(vec![0x82, 127, 0, 0, 0, 0, 0, 0, 0, 200]); // 64-bit form for a short length
    bad(vec![0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0]); // top bit
    bad(vec![0x82, 127, 0, 0, 0, 0, 0x10, 0, 0, 1]); // over MAX_MESSAGE
    bad(vec![0x88, 0x01, 0x03]); // 1-byte close
}

#[test]
fn mid_frame_is_known_until_the_frame_ends() {
    let mut p = FrameParser::new();
    assert!(!p.mid_frame());
    let data = server_frame(true, OP_BINARY, b"abcdef");
    let s = p.step(&data[..1]).unwrap();
    assert_eq!(s.consumed, 1);
    assert!(p.mid_frame());
    let s = p.step(&data[1..4]).unwrap();
    assert_eq!(s.consumed, 1); // the rest of the header
    let s = p.step(&data[2..4]).unwrap();
    assert_eq!(s.consumed, 2);
    assert!(p.mid_frame());
    p.step(&data[4..]).unwrap();
    assert!(!p.mid_frame());
}
