//! HTTP/2 over cleartext TCP with prior knowledge (h2c, RFC 9113 section 3.3): the engine's
//! own framing (frame headers, SETTINGS, HEADERS + CONTINUATION, DATA, WINDOW_UPDATE,
//! RST_STREAM, GOAWAY, PING) and `loona-hpack` for decoding response header blocks.
//!
//! The client side is small on purpose: the request header block is encoded once per run
//! (`encode_request`, static table and literals only, no dynamic table) and copied into a
//! HEADERS frame for every stream; responses are parsed incrementally by `FrameParser`,
//! which never buffers DATA payloads (they are counted, optionally compared, and dropped).
//! No locks, channels or per-request allocations on our side (HPACK may allocate for a
//! Huffman-coded literal).

use crate::errors::ErrorClass;

mod parse;
pub use parse::{Event, FrameParser, Step, MAX_BLOCK};

/// The client connection preface.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub const DATA: u8 = 0;
pub const HEADERS: u8 = 1;
pub const PRIORITY: u8 = 2;
pub const RST_STREAM: u8 = 3;
pub const SETTINGS: u8 = 4;
pub const PUSH_PROMISE: u8 = 5;
pub const PING: u8 = 6;
pub const GOAWAY: u8 = 7;
pub const WINDOW_UPDATE: u8 = 8;
pub const CONTINUATION: u8 = 9;

pub const FLAG_END_STREAM: u8 = 0x1;
pub const FLAG_ACK: u8 = 0x1;
pub const FLAG_END_HEADERS: u8 = 0x4;
pub const FLAG_PADDED: u8 = 0x8;
pub const FLAG_PRIORITY: u8 = 0x20;

/// SETTINGS identifiers we send or read.
const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
const SETTINGS_ENABLE_PUSH: u16 = 0x2;
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;

/// Largest frame payload: SETTINGS_MAX_FRAME_SIZE's default, which we never raise (so the
/// server may not send larger frames), and which our own frames respect.
pub const MAX_FRAME: usize = 16_384;
/// The receive window we grant, per stream (SETTINGS_INITIAL_WINDOW_SIZE) and for the
/// connection (a WINDOW_UPDATE on stream 0 right after the preface).
pub const WINDOW: u32 = 16 << 20;
/// Received DATA bytes (padding included) after which a WINDOW_UPDATE gives them back, per
/// stream and per connection: large bodies never stall on flow control.
pub const UPDATE_AT: u32 = WINDOW / 2;
/// The connection window before our first WINDOW_UPDATE (RFC 9113 6.9.2).
const DEFAULT_WINDOW: u32 = 65_535;
/// Largest stream id: a connection that reaches it is drained and reopened.
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// GOAWAY and RST_STREAM error codes (RFC 9113 section 7), by name for messages.
pub fn error_code_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "unknown error code",
    }
}

/// Append a frame header (RFC 9113 4.1).
#[inline]
pub fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    debug_assert!(len <= MAX_FRAME);
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & MAX_STREAM_ID).to_be_bytes());
}

/// What a client sends first: the preface, its SETTINGS (no HPACK dynamic table, no push,
/// our stream window) and a WINDOW_UPDATE that opens the connection window to `WINDOW`.
///
/// A dynamic table of 0 bytes: once the server has applied it (it says so with a table size
/// update in a header block), every response header block decodes the same whatever came
/// before, so a block identical to the previous one is not decoded again
/// (`FrameParser::decode`): servers that repeat their headers cost no HPACK work.
pub fn client_start(out: &mut Vec<u8>) {
    out.extend_from_slice(PREFACE);
    frame_header(out, 18, SETTINGS, 0, 0);
    for (id, value) in [
        (SETTINGS_HEADER_TABLE_SIZE, 0u32),
        (SETTINGS_ENABLE_PUSH, 0),
        (SETTINGS_INITIAL_WINDOW_SIZE, WINDOW),
    ] {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
    window_update(out, 0, WINDOW - DEFAULT_WINDOW);
}

/// Acknowledge the server's SETTINGS.
pub fn settings_ack(out: &mut Vec<u8>) {
    frame_header(out, 0, SETTINGS, FLAG_ACK, 0);
}

/// Answer a PING.
pub fn ping_ack(out: &mut Vec<u8>, opaque: &[u8; 8]) {
    frame_header(out, 8, PING, FLAG_ACK, 0);
    out.extend_from_slice(opaque);
}

/// Give `increment` bytes of receive window back on `stream` (0: the connection).
pub fn window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    frame_header(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & MAX_STREAM_ID).to_be_bytes());
}

/// One request on `stream`: a HEADERS frame with the pre-encoded `block`, then a DATA frame
/// with `body` if there is one (END_STREAM on the last frame). Both fit one frame
/// (`LoadSpec::validate` keeps the block and the body within `MAX_FRAME`).
#[inline]
pub fn request_frames(out: &mut Vec<u8>, stream: u32, block: &[u8], body: &[u8]) {
    let end = if body.is_empty() { FLAG_END_STREAM } else { 0 };
    frame_header(out, block.len(), HEADERS, FLAG_END_HEADERS | end, stream);
    out.extend_from_slice(block);
    if !body.is_empty() {
        frame_header(out, body.len(), DATA, FLAG_END_STREAM, stream);
        out.extend_from_slice(body);
    }
}

/// An HPACK integer with an `n`-bit prefix, the first byte's high bits set to `first`
/// (RFC 7541 5.1).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// An HPACK string literal, not Huffman-coded.
fn hpack_str(out: &mut Vec<u8>, s: &[u8]) {
    hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// Static-table index of a name (RFC 7541 appendix A) for the names a request carries.
fn static_name(name: &str) -> Option<usize> {
    Some(match name {
        ":authority" => 1,
        ":method" => 2,
        ":path" => 4,
        ":scheme" => 6,
        "accept" => 19,
        "accept-encoding" => 16,
        "content-length" => 28,
        "content-type" => 31,
        "cookie" => 32,
        "user-agent" => 58,
        _ => return None,
    })
}

/// The request header block, encoded once: pseudo-headers first, then `headers` with their
/// names lower-cased (a `host` header becomes `:authority`). Exact static-table entries are
/// indexed; everything else is a literal without indexing, so the block is independent of
/// any HPACK state and the same bytes serve every stream.
pub fn encode_request(
    method: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
    content_length: Option<usize>,
) -> Vec<u8> {
    let mut out = Vec::new();
    let mut authority = authority.to_string();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("host") {
            authority = value.clone();
        }
    }
    let mut field = |name: &str, value: &str| {
        let exact = match (name, value) {
            (":method", "GET") => Some(2),
            (":method", "POST") => Some(3),
            (":path", "/") => Some(4),
            (":scheme", "http") => Some(6),
            _ => None,
        };
        match (exact, static_name(name)) {
            (Some(i), _) => hpack_int(&mut out, 0x80, 7, i),
            (None, Some(i)) => {
                hpack_int(&mut out, 0x00, 4, i);
                hpack_str(&mut out, value.as_bytes());
            }
            (None, None) => {
                out.push(0x00);
                hpack_str(&mut out, name.as_bytes());
                hpack_str(&mut out, value.as_bytes());
            }
        }
    };
    field(":method", method);
    field(":scheme", "http");
    field(":authority", &authority);
    field(":path", path);
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if lower != "host" {
            field(&lower, value);
        }
    }
    if let Some(n) = content_length {
        field("content-length", &n.to_string());
    }
    out
}

/// Headers that HTTP/2 forbids in a request (RFC 9113 8.2.2): connection-specific ones.
pub fn forbidden_header(lower_name: &str) -> bool {
    matches!(
        lower_name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" | "te"
    )
}

/// A connection-level failure of the HTTP/2 exchange: its class and message.
pub type H2Error = (ErrorClass, String);

#[cfg(test)]
mod tests;
