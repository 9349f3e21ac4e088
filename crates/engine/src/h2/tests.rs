use super::*;
use httlib_hpack::{Decoder, Encoder};

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame_header(&mut out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
    out
}

fn settings(max_streams: Option<u32>) -> Vec<u8> {
    let mut p = Vec::new();
    if let Some(m) = max_streams {
        p.extend_from_slice(&SETTINGS_MAX_CONCURRENT_STREAMS.to_be_bytes());
        p.extend_from_slice(&m.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &p)
}

/// A response header block as a server would send it: Huffman-coded literals, some
/// indexed into the dynamic table.
fn response_block(enc: &mut Encoder, status: &str) -> Vec<u8> {
    let mut dst = Vec::new();
    let huff = Encoder::HUFFMAN_VALUE | Encoder::WITH_INDEXING | Encoder::BEST_FORMAT;
    for (n, v) in [
        (":status", status),
        ("server", "nginx/1.22.1"),
        ("date", "Thu, 26 Nov 2026 16:40:00 GMT"),
        ("content-type", "text/plain"),
    ] {
        enc.encode(
            (n.as_bytes().to_vec(), v.as_bytes().to_vec(), huff),
            &mut dst,
        )
        .unwrap();
    }
    dst
}

/// Everything the parser reports for `data` fed in pieces of `step` bytes, as owned values:
/// (events, error class).
fn events(data: &[u8], step: usize) -> (Vec<String>, Option<ErrorClass>) {
    let mut p = FrameParser::new();
    let mut out = Vec::new();
    let mut body = Vec::new();
    for piece in data.chunks(step.max(1)) {
        let mut off = 0;
        while off < piece.len() {
            match p.step(&piece[off..]) {
                Ok(s) => {
                    off += s.consumed;
                    match s.event {
                        Some(Event::Data {
                            stream,
                            body: b,
                            end_stream,
                            ..
                        }) => {
                            body.extend_from_slice(b);
                            if end_stream {
                                out.push(format!(
                                    "data {stream} {:?}",
                                    String::from_utf8_lossy(&body)
                                ));
                                body.clear();
                            }
                        }
                        Some(e) => out.push(format!("{e:?}")),
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
fn request_block_decodes_to_the_request() {
    let headers = vec![
        ("Host".to_string(), "example:8080".to_string()),
        ("Accept".to_string(), "text/plain".to_string()),
        ("X-Long".to_string(), "v".repeat(300)),
    ];
    let block = encode_request("POST", "127.0.0.1:80", "/a?b=1", &headers, Some(5));
    let mut dec = Decoder::default();
    let mut fields = Vec::new();
    dec.decode(&mut block.clone(), &mut fields).unwrap();
    let got: Vec<(String, String)> = fields
        .into_iter()
        .map(|(n, v, _)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
        .collect();
    let want: Vec<(String, String)> = [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "example:8080"),
        (":path", "/a?b=1"),
        ("accept", "text/plain"),
        ("x-long", &"v".repeat(300)),
        ("content-length", "5"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn client_start_is_preface_settings_and_window() {
    let mut out = Vec::new();
    client_start(&mut out);
    assert!(out.starts_with(PREFACE));
    let rest = &out[PREFACE.len()..];
    assert_eq!(&rest[..9], &[0, 0, 18, SETTINGS, 0, 0, 0, 0, 0]);
    assert_eq!(&rest[9..15], &[0, 1, 0, 0, 0, 0]); // HEADER_TABLE_SIZE 0
    let wu = &rest[9 + 18..];
    assert_eq!(&wu[..9], &[0, 0, 4, WINDOW_UPDATE, 0, 0, 0, 0, 0]);
    let inc = u32::from_be_bytes([wu[9], wu[10], wu[11], wu[12]]);
    assert_eq!(inc + 65_535, WINDOW);
}

#[test]
fn request_frames_carry_end_stream_on_the_last_frame() {
    let mut out = Vec::new();
    request_frames(&mut out, 3, b"\x82", b"");
    assert_eq!(
        out,
        [
            0,
            0,
            1,
            HEADERS,
            FLAG_END_HEADERS | FLAG_END_STREAM,
            0,
            0,
            0,
            3,
            0x82
        ]
    );
    out.clear();
    request_frames(&mut out, 5, b"\x83", b"hi");
    assert_eq!(out[4], FLAG_END_HEADERS);
    assert_eq!(
        &out[10..],
        &[0, 0, 2, DATA, FLAG_END_STREAM, 0, 0, 0, 5, b'h', b'i']
    );
}

fn conversation() -> Vec<u8> {
    let mut enc = Encoder::default();
    let mut data = settings(Some(100));
    data.extend(frame(SETTINGS, FLAG_ACK, 0, &[]));
    data.extend(frame(PING, 0, 0, b"12345678"));
    // Stream 1: headers split over CONTINUATION, padded DATA in two frames.
    let block = response_block(&mut enc, "200");
    let (a, b) = block.split_at(block.len() / 2);
    let mut h = vec![2u8]; // pad length
    h.extend_from_slice(&[0, 0, 0, 0, 16]); // priority
    h.extend_from_slice(a);
    h.extend_from_slice(&[0, 0]);
    data.extend(frame(HEADERS, FLAG_PADDED | FLAG_PRIORITY, 1, &h));
    data.extend(frame(CONTINUATION, FLAG_END_HEADERS, 1, b));
    data.extend(frame(DATA, FLAG_PADDED, 1, b"\x03hello\0\0\0"));
    data.extend(frame(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
    data.extend(frame(DATA, FLAG_END_STREAM, 1, b" world"));
    // Stream 3: 404 with the dynamic table in use, headers-only.
    let block = response_block(&mut enc, "404");
    data.extend(frame(
        HEADERS,
        FLAG_END_HEADERS | FLAG_END_STREAM,
        3,
        &block,
    ));
    data.extend(frame(0xfa, 0, 0, b"unknown frame type"));
    data.extend(frame(RST_STREAM, 0, 5, &[0, 0, 0, 7]));
    let mut g = vec![0, 0, 0, 7, 0, 0, 0, 0];
    g.extend_from_slice(b"bye");
    data.extend(frame(GOAWAY, 0, 0, &g));
    data
}

#[test]
fn a_conversation_parses_the_same_in_any_pieces() {
    let data = conversation();
    let (whole, err) = events(&data, data.len());
    assert_eq!(err, None);
    assert_eq!(
        whole,
        vec![
            "Settings { max_streams: Some(100) }".to_string(),
            "Ping { opaque: [49, 50, 51, 52, 53, 54, 55, 56] }".into(),
            "Headers { stream: 1, status: 200, end_stream: false }".into(),
            "data 1 \"hello world\"".into(),
            "Headers { stream: 3, status: 404, end_stream: true }".into(),
            "Reset { stream: 5, code: 7 }".into(),
            "GoAway { last: 7, code: 0, debug: \"bye\" }".into(),
        ]
    );
    for step in 1..40 {
        assert_eq!(events(&data, step), (whole.clone(), None), "step {step}");
    }
}

#[test]
fn data_flow_counts_padding() {
    let mut data = settings(None);
    data.extend(frame(DATA, FLAG_PADDED, 1, b"\x03hello\0\0\0"));
    let mut p = FrameParser::new();
    let mut off = 0;
    let mut flow = 0;
    while off < data.len() {
        let s = p.step(&data[off..]).unwrap();
        off += s.consumed;
        if let Some(Event::Data { flow: f, .. }) = s.event {
            flow += f;
        }
    }
    assert_eq!(flow, 9);
    assert!(p.at_frame_boundary());
}

#[test]
fn an_http1_answer_is_h2_not_spoken() {
    let data = b"HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n\r\n";
    let mut p = FrameParser::new();
    let (class, msg) = p.step(data).unwrap_err();
    assert_eq!(class, ErrorClass::H2NotSpoken);
    assert!(
        msg.contains("answered HTTP/1.x (\"HTTP/1.1 400 Bad Request\")"),
        "{msg}"
    );
    let (_, err) = events(&frame(PING, 0, 0, b"12345678"), 100);
    assert_eq!(err, Some(ErrorClass::H2NotSpoken));
}

#[test]
fn framing_violations_are_protocol_errors() {
    let bad = [
        frame(DATA, 0, 0, b"x"),                             // DATA on stream 0
        frame(HEADERS, 0, 0, b"\x88"),                       // HEADERS on stream 0
        frame(PING, 0, 0, b"1234"),                          // short PING
        frame(SETTINGS, 0, 1, &[]),                          // SETTINGS on a stream
        frame(SETTINGS, 0, 0, &[0; 5]),                      // not a multiple of 6
        frame(RST_STREAM, 0, 1, &[0; 3]),                    // short RST_STREAM
        frame(PUSH_PROMISE, FLAG_END_HEADERS, 1, &[0; 4]),   // push is disabled
        frame(CONTINUATION, FLAG_END_HEADERS, 1, b"\x88"),   // no header block open
        frame(DATA, FLAG_PADDED, 1, b"\x05ab"),              // padding over the frame
        frame(HEADERS, FLAG_END_HEADERS, 1, b"\x80"),        // HPACK index 0
        frame(HEADERS, FLAG_END_HEADERS, 1, b"\x7f"),        // truncated HPACK integer
        frame(HEADERS, FLAG_END_HEADERS, 1, b"\x08\x03abc"), // :status "abc"
    ];
    for (k, f) in bad.iter().enumerate() {
        let mut data = settings(None);
        data.extend_from_slice(f);
        let (_, err) = events(&data, 1000);
        assert_eq!(err, Some(ErrorClass::H2ProtocolError), "case {k}");
    }
    // A frame over the maximum size, and a frame between HEADERS and its CONTINUATION.
    let mut data = settings(None);
    data.extend_from_slice(&[0, 0x40, 1, DATA, 0, 0, 0, 0, 1]);
    assert_eq!(events(&data, 1000).1, Some(ErrorClass::H2ProtocolError));
    let mut data = settings(None);
    data.extend(frame(HEADERS, 0, 1, b"\x88"));
    data.extend(frame(PING, 0, 0, b"12345678"));
    assert_eq!(events(&data, 1000).1, Some(ErrorClass::H2ProtocolError));
}

#[test]
fn hpack_integers_cross_their_prefix() {
    for v in [0usize, 14, 15, 16, 126, 127, 128, 300, 16_384, 1 << 20] {
        let mut out = Vec::new();
        hpack_int(&mut out, 0, 4, 0);
        hpack_str(&mut out, b"x-n");
        hpack_str(&mut out, "a".repeat(v).as_bytes());
        let mut fields = Vec::new();
        Decoder::default().decode(&mut out, &mut fields).unwrap();
        assert_eq!(fields[0].1.len(), v, "length {v}");
    }
}

#[test]
fn forbidden_headers_are_the_connection_specific_ones() {
    assert!(forbidden_header("transfer-encoding"));
    assert!(forbidden_header("upgrade"));
    assert!(!forbidden_header("accept"));
}

#[test]
fn with_the_table_at_zero_a_repeated_block_decodes_the_same() {
    // nginx's form: literals with incremental indexing every time; a size update to 0 first.
    let mut lit = vec![0x40];
    hpack_str(&mut lit, b"x-a");
    hpack_str(&mut lit, b"1");
    let first: Vec<u8> = [&[0x20u8, 0x88][..], &lit].concat();
    let again: Vec<u8> = [&[0x88u8][..], &lit].concat();
    let not_found: Vec<u8> = [&[0x8du8][..], &lit].concat(); // :status 404
    let mut data = settings(None);
    for (k, block) in [&first, &again, &again, &not_found, &again]
        .iter()
        .enumerate()
    {
        let stream = 2 * k as u32 + 1;
        data.extend(frame(
            HEADERS,
            FLAG_END_HEADERS | FLAG_END_STREAM,
            stream,
            block,
        ));
    }
    // The table is empty: index 62 does not exist.
    data.extend(frame(
        HEADERS,
        FLAG_END_HEADERS | FLAG_END_STREAM,
        11,
        &[0xbe],
    ));
    let (got, err) = events(&data, data.len());
    let statuses: Vec<&str> = got.iter().skip(1).map(String::as_str).collect();
    assert_eq!(
        statuses,
        [
            "Headers { stream: 1, status: 200, end_stream: true }",
            "Headers { stream: 3, status: 200, end_stream: true }",
            "Headers { stream: 5, status: 200, end_stream: true }",
            "Headers { stream: 7, status: 404, end_stream: true }",
            "Headers { stream: 9, status: 200, end_stream: true }",
        ]
    );
    assert_eq!(err, Some(ErrorClass::H2ProtocolError));
    // Without the size update the same blocks fill the table, and index 62 is "x-a: 1".
    let mut data = settings(None);
    data.extend(frame(
        HEADERS,
        FLAG_END_HEADERS | FLAG_END_STREAM,
        1,
        &again,
    ));
    data.extend(frame(
        HEADERS,
        FLAG_END_HEADERS | FLAG_END_STREAM,
        3,
        &[0x88, 0xbe],
    ));
    assert_eq!(events(&data, data.len()).1, None);
}
