//! Property-based fuzzing of the response parser (proptest, stable Rust).
//!
//! Properties: no panic on any bytes; the parser's own buffer stays within its limits;
//! feeding a stream in pieces (split at every byte boundary, or at random points) gives
//! exactly what feeding it whole gives; and generated valid responses (random header sets,
//! Content-Length, chunked with random chunk sizes, extensions and trailers, read until
//! close, interim 1xx) parse to what was generated.
//!
//! Cases per property: `PWB_FUZZ_CASES` (default: a few hundred, for CI);
//! `benchmarks/fuzz_parsers.py` runs millions.

#[macro_use]
mod fuzz;

use fuzz::{config, cut, cuts, edits, fill, junk, mutate};
use proptest::prelude::*;
use pywebbench_engine::http::{Feed, ResponseParser, MAX_HEAD};
use pywebbench_engine::ErrorClass;

/// Largest chunk-size line the parser accepts (mirrors the parser's private limit).
const MAX_CHUNK_LINE: usize = 4096;
/// Headers per response the parser accepts.
const MAX_HEADERS: usize = 64;
/// The parser's buffer may hold one head (or chunk-size line) over the limit, and a `Vec`
/// may double its capacity once past what it holds.
const MAX_BUFFERED: usize = 2 * (MAX_HEAD + 1);

/// One completed response: status, body length, close, body mismatch, bytes received.
type Done = (u16, u64, bool, bool, u64);

/// Everything the parser made of a stream.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    done: Vec<Done>,
    /// The first error, or else how the end of the stream is classified.
    end: Result<(), ErrorClass>,
}

/// Feed `pieces` in order, as a connection would (each piece parsed until it is used up),
/// then end the stream. Returns the outcome and the largest the parser's buffer got.
fn drive<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
    is_head: bool,
    expect: Option<&[u8]>,
) -> (Outcome, usize) {
    let mut p = ResponseParser::new();
    let mut done = Vec::new();
    let mut most = 0;
    for piece in pieces {
        let mut off = 0;
        while off < piece.len() {
            let feed = p.feed(&piece[off..], is_head, expect);
            most = most.max(p.buffered());
            match feed {
                Feed::NeedMore => break,
                Feed::Complete { consumed } => {
                    assert!(consumed > 0 && off + consumed <= piece.len());
                    done.push((p.status, p.body_len, p.close, p.body_mismatch, p.received));
                    p.reset();
                    off += consumed;
                }
                Feed::Error(class, msg) => {
                    assert!(!msg.contains('\n'), "one-line message: {msg:?}");
                    let end = Err(class);
                    return (Outcome { done, end }, most);
                }
            }
        }
    }
    let end = match p.on_eof() {
        Ok(()) => {
            done.push((p.status, p.body_len, p.close, p.body_mismatch, p.received));
            Ok(())
        }
        Err((class, _)) if class == ErrorClass::EofBeforeHeaders && p.received == 0 => Ok(()),
        Err((class, _)) => Err(class),
    };
    (Outcome { done, end }, most)
}

fn whole(data: &[u8]) -> Outcome {
    let (o, most) = drive([data], false, None);
    assert!(most <= MAX_BUFFERED, "buffer grew to {most}");
    o
}

fn split(data: &[u8], cuts: &[usize]) -> Outcome {
    let (o, most) = drive(cut(data, cuts), false, None);
    assert!(most <= MAX_BUFFERED, "buffer grew to {most}");
    o
}

// ---- generated responses ------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Body {
    Length(Vec<u8>),
    /// Chunks (data, extension), trailer lines.
    Chunked(Vec<(Vec<u8>, String)>, Vec<String>),
    /// 204 or 304 (an announced length is ignored).
    Bodiless(Option<u64>),
    UntilClose(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Resp {
    http10: bool,
    interim: Option<u16>,
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    connection: Option<&'static str>,
    body: Body,
}

const FRAMING: [&str; 3] = ["content-length", "transfer-encoding", "connection"];
const TOKEN: &[u8] = b"ABCXYZabcxyz0189!#$%&'*+.^_`|~-";

fn text(seed: u64, len: usize, alphabet: &[u8]) -> String {
    String::from_utf8(fill(seed, len, alphabet)).expect("ASCII alphabet")
}

fn printable() -> Vec<u8> {
    (b' '..=b'~').collect()
}

fn header() -> impl Strategy<Value = (String, String)> {
    let value_len = prop_oneof![20 => 0usize..40, 1 => 0usize..3000];
    (1usize..24, value_len, any::<u64>())
        .prop_map(|(n, v, seed)| (text(seed, n, TOKEN), text(!seed, v, &printable())))
        .prop_filter("framing headers are generated apart", |(n, _)| {
            !FRAMING.contains(&n.to_ascii_lowercase().as_str())
        })
}

/// Random header sets: a few, up to around the count limit, or one around the size limit.
fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    prop_oneof![
        12 => proptest::collection::vec(header(), 0..8),
        1 => proptest::collection::vec(header(), 60..70),
        1 => (MAX_HEAD - 100..MAX_HEAD + 100).prop_map(|n| vec![("X-Big".into(), "v".repeat(n))]),
    ]
}

fn chunk_ext() -> impl Strategy<Value = String> {
    let ext = |(n, seed): (usize, u64)| {
        let name = text(seed, 1 + n % 8, b"abcdefgxyz");
        match n % 3 {
            0 => format!(";{name}"),
            1 => format!(";{name}={}", text(!seed, n % 9, b"abc0189-")),
            _ => format!(";{name}=\"{}\" ; z", text(!seed, n % 20, b" abc!#~,;=")),
        }
    };
    prop_oneof![
        6 => Just(String::new()),
        4 => (0usize..60, any::<u64>()).prop_map(ext),
        1 => (MAX_CHUNK_LINE - 20..MAX_CHUNK_LINE + 20).prop_map(|n| format!(";{}", "e".repeat(n))),
    ]
}

fn body() -> impl Strategy<Value = Body> {
    let chunk = (1usize..200, any::<u64>()).prop_map(|(n, seed)| fill(seed, n, &[]));
    let trailer = (1usize..10, 0usize..20, any::<u64>()).prop_map(|(n, v, seed)| {
        format!("{}: {}", text(seed, n, TOKEN), text(!seed, v, &printable()))
    });
    prop_oneof![
        4 => junk(300).prop_map(Body::Length),
        4 => (
            proptest::collection::vec((chunk, chunk_ext()), 0..5),
            proptest::collection::vec(trailer, 0..3),
        )
            .prop_map(|(c, t)| Body::Chunked(c, t)),
        1 => proptest::option::of(0u64..100).prop_map(Body::Bodiless),
        1 => junk(300).prop_map(Body::UntilClose),
    ]
}

fn resp() -> impl Strategy<Value = Resp> {
    (
        any::<bool>(),
        proptest::option::of(prop_oneof![Just(100u16), Just(103u16)]),
        200u16..600,
        (0usize..12, any::<u64>()).prop_map(|(n, seed)| text(seed, n, b"OK Fine")),
        headers(),
        proptest::option::of(prop_oneof![Just("close"), Just("keep-alive")]),
        body(),
    )
        .prop_map(
            |(http10, interim, status, reason, headers, connection, body)| {
                let status = match (&body, status) {
                    (Body::Bodiless(_), s) if s % 2 == 0 => 204,
                    (Body::Bodiless(_), _) => 304,
                    (_, 204 | 304) => 200,
                    (_, s) => s,
                };
                Resp {
                    http10,
                    interim,
                    status,
                    reason,
                    headers,
                    connection,
                    body,
                }
            },
        )
}

impl Resp {
    /// The interim head (if any), the head, and the body as sent.
    fn parts(&self) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let interim = match self.interim {
            Some(code) => format!("HTTP/1.1 {code} Interim\r\n\r\n").into_bytes(),
            None => Vec::new(),
        };
        let version = if self.http10 { "1.0" } else { "1.1" };
        let mut head = format!("HTTP/{version} {} {}\r\n", self.status, self.reason);
        for (n, v) in &self.headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        if let Some(c) = self.connection {
            head.push_str(&format!("Connection: {c}\r\n"));
        }
        let mut body = Vec::new();
        match &self.body {
            Body::Length(b) => {
                head.push_str(&format!("Content-Length: {}\r\n", b.len()));
                body.extend_from_slice(b);
            }
            Body::Chunked(chunks, trailers) => {
                head.push_str("Transfer-Encoding: chunked\r\n");
                for (data, ext) in chunks {
                    body.extend_from_slice(format!("{:X}{ext}\r\n", data.len()).as_bytes());
                    body.extend_from_slice(data);
                    body.extend_from_slice(b"\r\n");
                }
                body.extend_from_slice(b"0\r\n");
                for t in trailers {
                    body.extend_from_slice(format!("{t}\r\n").as_bytes());
                }
                body.extend_from_slice(b"\r\n");
            }
            Body::Bodiless(Some(n)) => head.push_str(&format!("Content-Length: {n}\r\n")),
            Body::Bodiless(None) => {}
            Body::UntilClose(b) => body.extend_from_slice(b),
        }
        head.push_str("\r\n");
        (interim, head.into_bytes(), body)
    }

    fn bytes(&self) -> Vec<u8> {
        let (interim, head, body) = self.parts();
        [interim, head, body].concat()
    }

    /// What the parser must report, or the error class it must stop with.
    fn expected(&self) -> Result<Done, ErrorClass> {
        let (interim, head, body) = self.parts();
        let fields = head.windows(2).filter(|w| w == b"\r\n").count() - 2;
        if fields > MAX_HEADERS || head.len() > MAX_HEAD {
            return Err(ErrorClass::MalformedHeaders);
        }
        let body_len = match &self.body {
            Body::Length(b) | Body::UntilClose(b) => b.len() as u64,
            Body::Chunked(chunks, _) => {
                let line = |(d, e): &(Vec<u8>, String)| format!("{:X}{e}\r\n", d.len()).len();
                if chunks.iter().any(|c| line(c) > MAX_CHUNK_LINE) {
                    return Err(ErrorClass::MalformedChunked);
                }
                chunks.iter().map(|(d, _)| d.len() as u64).sum()
            }
            Body::Bodiless(_) => 0,
        };
        let close = match (&self.body, self.connection) {
            (Body::UntilClose(_), _) | (_, Some("close")) => true,
            (_, Some(_)) => false,
            (_, None) => self.http10,
        };
        let received = (interim.len() + head.len() + body.len()) as u64;
        Ok((self.status, body_len, close, false, received))
    }
}

/// A pipeline of responses; read-until-close only as the last one.
fn pipeline() -> impl Strategy<Value = Vec<Resp>> {
    proptest::collection::vec(resp(), 1..4).prop_map(|mut rs| {
        let last = rs.len() - 1;
        for r in &mut rs[..last] {
            if let Body::UntilClose(b) = &r.body {
                r.body = Body::Length(b.clone());
            }
        }
        rs
    })
}

fn expected_outcome(rs: &[Resp]) -> Outcome {
    let mut done = Vec::new();
    for r in rs {
        match r.expected() {
            Ok(d) => done.push(d),
            Err(class) => {
                let end = Err(class);
                return Outcome { done, end };
            }
        }
    }
    Outcome { done, end: Ok(()) }
}

fn concat(rs: &[Resp]) -> Vec<u8> {
    rs.iter().map(Resp::bytes).collect::<Vec<_>>().concat()
}

split_properties!(400);

proptest! {
    #![proptest_config(config(400))]

    /// Generated responses parse to what was generated.
    #[test]
    fn valid_responses_parse_to_what_was_sent(rs in pipeline()) {
        let data = concat(&rs);
        prop_assert_eq!(whole(&data), expected_outcome(&rs));
    }
}

// ---- regression cases found by the properties ---------------------------------------------

#[test]
fn long_chunk_extension_is_refused_whole_and_split() {
    // A chunk-size line longer than the limit was accepted when it arrived in one read and
    // refused when it arrived in two.
    let mut data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;".to_vec();
    data.extend_from_slice(&[b'e'; MAX_CHUNK_LINE]);
    data.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
    let want = Outcome {
        done: vec![],
        end: Err(ErrorClass::MalformedChunked),
    };
    assert_eq!(whole(&data), want);
    assert_eq!(split(&data, &[60, 3000]), want);
}
