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

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use pywebbench_engine::http::{Feed, ResponseParser, MAX_HEAD};
use pywebbench_engine::ErrorClass;

/// Largest chunk-size line the parser accepts (mirrors the parser's private limit).
const MAX_CHUNK_LINE: usize = 4096;
/// Headers per response the parser accepts.
const MAX_HEADERS: usize = 64;
/// The parser's buffer may hold one head (or chunk-size line) over the limit, and a `Vec`
/// may double its capacity once past what it holds.
const MAX_BUFFERED: usize = 2 * (MAX_HEAD + 1);

fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PWB_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::Off)),
        ..Config::default()
    }
}

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

/// `data` cut at the given points (any order, out-of-range points clamped).
fn pieces(data: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (data.len() + 1)).collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut at = 0;
    for c in cuts.into_iter().chain([data.len()]) {
        out.push(data[at..c].to_vec());
        at = c;
    }
    out
}

fn split_outcome(data: &[u8], cuts: &[usize]) -> Outcome {
    let parts = pieces(data, cuts);
    let (o, most) = drive(parts.iter().map(|p| &p[..]), false, None);
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

/// `len` pseudo-random bytes from `seed`, each from `alphabet` (all bytes when empty).
/// Generating bytes from a seed keeps a case cheap (millions of cases are run).
fn fill(seed: u64, len: usize, alphabet: &[u8]) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let z = (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            let z = (z ^ (z >> 29)) as usize;
            match alphabet.len() {
                0 => z as u8,
                n => alphabet[z % n],
            }
        })
        .collect()
}

fn text(seed: u64, len: usize, alphabet: &[u8]) -> String {
    String::from_utf8(fill(seed, len, alphabet)).expect("ASCII alphabet")
}

fn printable() -> Vec<u8> {
    (b' '..=b'~').collect()
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    (0..max, any::<u64>()).prop_map(|(n, seed)| fill(seed, n, &[]))
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
        4 => bytes(300).prop_map(Body::Length),
        4 => (
            proptest::collection::vec((chunk, chunk_ext()), 0..5),
            proptest::collection::vec(trailer, 0..3),
        )
            .prop_map(|(c, t)| Body::Chunked(c, t)),
        1 => proptest::option::of(0u64..100).prop_map(Body::Bodiless),
        1 => bytes(300).prop_map(Body::UntilClose),
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
    let mut out = Vec::new();
    for r in rs {
        out.extend_from_slice(&r.bytes());
    }
    out
}

proptest! {
    #![proptest_config(config(400))]

    /// Generated responses parse to what was generated.
    #[test]
    fn valid_responses_parse_to_what_was_sent(rs in pipeline()) {
        let data = concat(&rs);
        prop_assert_eq!(whole(&data), expected_outcome(&rs));
    }

    /// Split at random points, the stream parses exactly as it does whole.
    #[test]
    fn split_at_random_points_equals_whole(
        rs in pipeline(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let data = concat(&rs);
        prop_assert_eq!(split_outcome(&data, &cuts), whole(&data));
    }

    /// Mutated responses and plain garbage: no panic, bounded buffer, split equals whole.
    #[test]
    fn hostile_bytes_split_equals_whole(
        rs in pipeline(),
        edits in proptest::collection::vec((any::<usize>(), 0u8..3, any::<u8>()), 0..6),
        junk in bytes(200),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut data = concat(&rs);
        for (at, op, b) in edits {
            let at = at % (data.len() + 1);
            match op {
                0 if at < data.len() => data[at] = b,
                1 => data.insert(at, b),
                _ if at < data.len() => { data.remove(at); }
                _ => {}
            }
        }
        data.extend_from_slice(&junk);
        prop_assert_eq!(split_outcome(&data, &cuts), whole(&data));
        prop_assert_eq!(split_outcome(&junk, &cuts), whole(&junk));
    }
}

proptest! {
    #![proptest_config(config(100))]

    /// Small responses split in two at every byte boundary parse as they do whole.
    #[test]
    fn split_at_every_boundary_equals_whole(rs in pipeline()) {
        let data = concat(&rs);
        let data = &data[..data.len().min(600)];
        let want = whole(data);
        for i in 0..=data.len() {
            let (got, most) = drive([&data[..i], &data[i..]], false, None);
            prop_assert!(most <= MAX_BUFFERED);
            prop_assert_eq!(&got, &want, "split at {}", i);
        }
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
    assert_eq!(split_outcome(&data, &[60, 3000]), want);
}
