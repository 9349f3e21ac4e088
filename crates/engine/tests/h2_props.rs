//! Property-based fuzzing of the HTTP/2 frame parser and its HPACK decoding (proptest).
//!
//! Properties, as for the HTTP/1.1 parser (parser_props.rs): no panic on any bytes; the
//! parser's buffers stay within their limits; a stream of frames fed in pieces (split at
//! every byte boundary, or at random points) gives exactly what it gives whole, valid or
//! hostile (edited, junk appended) or plain junk; and generated server conversations (random
//! statuses and header sets, HPACK with and without Huffman coding and dynamic-table
//! indexing, or with the dynamic table set to 0 and identical header blocks, header blocks
//! cut into CONTINUATION frames, padded HEADERS and DATA, bodies cut
//! into DATA frames of random sizes, trailers, PINGs) parse to what was generated.
//!
//! Cases per property: `PWB_FUZZ_CASES` (default: a few hundred, for CI);
//! `benchmarks/fuzz_parsers.py` runs millions.

#[macro_use]
mod fuzz;

use fuzz::{config, cut, cuts, edits, fill, junk, mutate};
use httlib_hpack::Encoder;
use proptest::prelude::*;
use pywebbench_engine::h2::{
    frame_header, Event, FrameParser, CONTINUATION, DATA, FLAG_END_HEADERS, FLAG_END_STREAM,
    FLAG_PADDED, HEADERS, MAX_FRAME, PING, SETTINGS,
};
use pywebbench_engine::ErrorClass;

/// The parser's buffers: one frame payload and one header block, each of which a `Vec` may
/// have grown to twice what it holds.
const MAX_BUFFERED: usize = 2 * (MAX_FRAME + pywebbench_engine::h2::MAX_BLOCK);

/// Everything the parser made of a stream, independent of how it was cut.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    events: Vec<String>,
    /// DATA bytes counted against the flow-control windows.
    flow: u64,
    /// The first error, if any.
    end: Result<(), ErrorClass>,
}

fn drive<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> (Outcome, usize) {
    let mut p = FrameParser::new();
    let mut events = Vec::new();
    let mut bodies: std::collections::BTreeMap<u32, Vec<u8>> = Default::default();
    let mut flow = 0u64;
    let mut most = 0;
    for piece in pieces {
        let mut off = 0;
        while off < piece.len() {
            let step = match p.step(&piece[off..]) {
                Ok(s) => s,
                Err((class, _)) => {
                    let out = Outcome {
                        events,
                        flow,
                        end: Err(class),
                    };
                    return (out, most.max(p.buffered()));
                }
            };
            assert!(step.consumed > 0 || step.event.is_some(), "no progress");
            off += step.consumed;
            most = most.max(p.buffered());
            let ended = match step.event {
                None => None,
                Some(Event::Data {
                    stream,
                    body,
                    flow: f,
                    end_stream,
                }) => {
                    flow += f as u64;
                    bodies.entry(stream).or_default().extend_from_slice(body);
                    end_stream.then_some(stream)
                }
                Some(Event::Headers {
                    stream,
                    status,
                    end_stream,
                }) => {
                    events.push(format!("headers {stream} {status}"));
                    end_stream.then_some(stream)
                }
                Some(e) => {
                    events.push(format!("{e:?}"));
                    None
                }
            };
            if let Some(s) = ended {
                let body = bodies.remove(&s).unwrap_or_default();
                events.push(format!("end {s} {}", String::from_utf8_lossy(&body)));
            }
        }
    }
    let out = Outcome {
        events,
        flow,
        end: Ok(()),
    };
    (out, most)
}

fn whole(data: &[u8]) -> Outcome {
    let (out, most) = drive([data]);
    assert!(most <= MAX_BUFFERED, "buffered {most}");
    out
}

fn split(data: &[u8], cuts: &[usize]) -> Outcome {
    let (out, most) = drive(cut(data, cuts));
    assert!(most <= MAX_BUFFERED, "buffered {most}");
    out
}

fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    frame_header(out, payload.len(), kind, flags, stream);
    out.extend_from_slice(payload);
}

/// One generated response.
#[derive(Debug, Clone)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    /// HPACK flags per field (Huffman name/value, indexing, best format).
    hpack: u8,
    body: Vec<u8>,
    /// DATA frame size, CONTINUATION piece size.
    data_chunk: usize,
    block_chunk: usize,
    /// Padding of HEADERS and of DATA frames (None: not padded).
    pad: Option<u8>,
    trailers: bool,
    ping: bool,
}

fn resp() -> impl Strategy<Value = Resp> {
    let header = (0usize..6, any::<u64>(), 0usize..40).prop_map(|(n, seed, len)| {
        let names = [
            "server",
            "date",
            "content-type",
            "x-a",
            "set-cookie",
            "vary",
        ];
        let value = fill(seed, len, b"abcdefghijklmnopqrstuvwxyz0123456789 -_/;=,");
        (names[n].to_string(), String::from_utf8(value).unwrap())
    });
    (
        prop_oneof![Just(200u16), Just(204), Just(404), Just(500), 100u16..1000],
        proptest::collection::vec(header, 0..6),
        0u8..32,
        (0usize..3000, any::<u64>()).prop_map(|(n, seed)| fill(seed, n, b"hello world")),
        (1usize..5000, 1usize..80),
        proptest::option::of(any::<u8>()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(status, headers, hpack, body, (data_chunk, block_chunk), pad, trailers, ping)| {
                Resp {
                    // 1xx is informational: a final response is generated instead.
                    status: if status < 200 { 200 } else { status },
                    headers,
                    hpack,
                    body,
                    data_chunk,
                    block_chunk,
                    pad,
                    trailers,
                    ping,
                }
            },
        )
}

/// A generated conversation: its responses; `zero`: the server first sets the dynamic table
/// to 0 bytes (as it must when the client's SETTINGS say so), and with `same` every response
/// repeats the first one's headers (identical header blocks, as nginx sends them).
#[derive(Debug, Clone)]
struct Convo {
    rs: Vec<Resp>,
    zero: bool,
}

fn pipeline() -> impl Strategy<Value = Convo> {
    (
        proptest::collection::vec(resp(), 1..5),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mut rs, zero, same)| {
            if same {
                let (status, headers, hpack) = (rs[0].status, rs[0].headers.clone(), rs[0].hpack);
                for r in &mut rs {
                    (r.status, r.headers, r.hpack) = (status, headers.clone(), hpack);
                }
            }
            Convo { rs, zero }
        })
}

fn padded(pad: Option<u8>, payload: &[u8]) -> (u8, Vec<u8>) {
    match pad {
        None => (0, payload.to_vec()),
        Some(n) => {
            let n = n.min((MAX_FRAME - 1 - payload.len()) as u8);
            let mut p = vec![n];
            p.extend_from_slice(payload);
            p.extend(std::iter::repeat_n(0, n as usize));
            (FLAG_PADDED, p)
        }
    }
}

fn header_frames(out: &mut Vec<u8>, r: &Resp, stream: u32, block: &[u8], end: bool) {
    let pieces: Vec<&[u8]> = if block.is_empty() {
        vec![block]
    } else {
        block.chunks(r.block_chunk).collect()
    };
    let end_flag = if end { FLAG_END_STREAM } else { 0 };
    for (k, piece) in pieces.iter().enumerate() {
        let last = if k + 1 == pieces.len() {
            FLAG_END_HEADERS
        } else {
            0
        };
        if k == 0 {
            let (pf, p) = padded(r.pad, piece);
            frame(out, HEADERS, pf | end_flag | last, stream, &p);
        } else {
            frame(out, CONTINUATION, last, stream, piece);
        }
    }
}

/// The server's bytes for `c`, encoded with one HPACK encoder as a server would.
fn concat(c: &Convo) -> Vec<u8> {
    let mut out = Vec::new();
    frame(&mut out, SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
    let mut enc = Encoder::default();
    for (k, r) in c.rs.iter().enumerate() {
        let stream = 2 * k as u32 + 1;
        let mut block = Vec::new();
        if c.zero && k == 0 {
            enc.update_max_dynamic_size(0, &mut block).unwrap();
        }
        let status = r.status.to_string();
        let fields = std::iter::once((":status", status.as_str()))
            .chain(r.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        for (n, v) in fields {
            let f = (n.as_bytes().to_vec(), v.as_bytes().to_vec(), r.hpack & 0x1f);
            enc.encode(f, &mut block).unwrap();
        }
        let no_body = r.body.is_empty();
        header_frames(&mut out, r, stream, &block, no_body && !r.trailers);
        if r.ping {
            frame(&mut out, PING, 0, 0, b"pingpong");
        }
        let chunk = r.data_chunk.min(MAX_FRAME - 256);
        let pieces: Vec<&[u8]> = r.body.chunks(chunk).collect();
        for (j, piece) in pieces.iter().enumerate() {
            let end = j + 1 == pieces.len() && !r.trailers;
            let (pf, p) = padded(r.pad, piece);
            let ef = if end { FLAG_END_STREAM } else { 0 };
            frame(&mut out, DATA, pf | ef, stream, &p);
        }
        if r.trailers {
            let mut block = Vec::new();
            enc.encode(
                (b"x-trailer".to_vec(), b"1".to_vec(), r.hpack & 0x1f),
                &mut block,
            )
            .unwrap();
            header_frames(&mut out, r, stream, &block, true);
        }
    }
    out
}

fn expected_outcome(c: &Convo) -> Outcome {
    let rs = &c.rs;
    let mut events = vec!["Settings { max_streams: Some(100) }".to_string()];
    let mut flow = 0u64;
    for (k, r) in rs.iter().enumerate() {
        let stream = 2 * k as u32 + 1;
        events.push(format!("headers {stream} {}", r.status));
        let ended_by_headers = r.body.is_empty() && !r.trailers;
        if ended_by_headers {
            events.push(format!("end {stream} "));
        }
        if r.ping {
            events.push(format!(
                "{:?}",
                Event::Ping {
                    opaque: *b"pingpong"
                }
            ));
        }
        let chunk = r.data_chunk.min(MAX_FRAME - 256);
        for piece in r.body.chunks(chunk) {
            flow += padded(r.pad, piece).1.len() as u64;
        }
        if r.trailers {
            events.push(format!("headers {stream} 0"));
        }
        if !ended_by_headers {
            events.push(format!("end {stream} {}", String::from_utf8_lossy(&r.body)));
        }
    }
    Outcome {
        events,
        flow,
        end: Ok(()),
    }
}

split_properties!(400);

proptest! {
    #![proptest_config(config(400))]

    /// Generated conversations parse to what was generated.
    #[test]
    fn valid_conversations_parse_to_what_was_sent(c in pipeline()) {
        let data = concat(&c);
        prop_assert_eq!(whole(&data), expected_outcome(&c));
    }

    /// Any bytes after a valid SETTINGS frame: no panic, buffers bounded, errors classified
    /// as protocol errors (never as "not spoken": the server did speak HTTP/2).
    #[test]
    fn junk_after_settings_is_a_protocol_error_at_worst(junk in junk(3000)) {
        let mut data = Vec::new();
        frame(&mut data, SETTINGS, 0, 0, &[]);
        data.extend_from_slice(&junk);
        let out = whole(&data);
        prop_assert!(matches!(out.end, Ok(()) | Err(ErrorClass::H2ProtocolError)), "{:?}", out.end);
    }

    /// Any bytes as a response header block (HPACK): decoded or refused as a protocol
    /// error, never a panic, and the next block still parses or is refused the same way.
    #[test]
    fn junk_header_blocks_are_refused_cleanly(block in junk(300), flags in 0u8..64) {
        let mut data = Vec::new();
        frame(&mut data, SETTINGS, 0, 0, &[]);
        frame(&mut data, HEADERS, FLAG_END_HEADERS | (flags & FLAG_END_STREAM), 1, &block);
        frame(&mut data, HEADERS, FLAG_END_HEADERS | FLAG_END_STREAM, 3, &[0x88]);
        let out = whole(&data);
        prop_assert!(matches!(out.end, Ok(()) | Err(ErrorClass::H2ProtocolError)), "{:?}", out.end);
        if out.end.is_ok() {
            prop_assert_eq!(out.events.last().map(String::as_str), Some("end 3 "));
        }
    }
}
