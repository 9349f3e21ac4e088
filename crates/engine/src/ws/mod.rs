//! WebSocket (RFC 6455), the client side the engine needs: the upgrade handshake (request
//! built once per run, the answer checked by `Handshake`), client frames (masked) and an
//! incremental parser of server frames (`FrameParser`, parse.rs). No I/O here: the worker
//! (`worker/ws.rs`) feeds received bytes and writes what these functions append.
//!
//! The framing is the engine's own (a few dozen lines, fuzzed by tests/ws_props.rs like
//! the HTTP/1.1 and h2c parsers) rather than a crate's: both I/O backends hand the parser
//! slices of their own buffers, and nothing is allocated or locked per message.

use crate::errors::ErrorClass;

mod handshake;
mod parse;

pub use handshake::{accept_for, Handshake, HandshakeFeed, MAX_HEAD};
pub use parse::{Event, FrameParser, Step};

/// The SHA-1 digest of `data` (RustCrypto's `sha1`): only for the handshake's
/// `Sec-WebSocket-Accept`, computed once per run.
pub fn sha1(data: &[u8]) -> [u8; 20] {
    use sha1::{Digest, Sha1};
    Sha1::digest(data).into()
}

/// A WebSocket error: its class and a one-line description.
pub type WsError = (ErrorClass, String);

pub const OP_CONTINUATION: u8 = 0x0;
pub const OP_TEXT: u8 = 0x1;
pub const OP_BINARY: u8 = 0x2;
pub const OP_CLOSE: u8 = 0x8;
pub const OP_PING: u8 = 0x9;
pub const OP_PONG: u8 = 0xA;

/// Largest message (all its fragments) accepted from the server, and largest
/// `message_bytes`.
pub const MAX_MESSAGE: u64 = 16 * 1024 * 1024;
/// Largest control frame payload (RFC 6455 5.5).
pub const MAX_CONTROL: usize = 125;

/// The `Sec-WebSocket-Key` the engine sends (a fixed nonce: the server only hashes it) and
/// the `Sec-WebSocket-Accept` it must answer with.
pub const KEY: &str = "cHl3ZWJiZW5jaC13c2tleQ==";

/// Append one client frame (FIN set, masked with `mask`) of `opcode` carrying `payload`.
pub fn client_frame(out: &mut Vec<u8>, opcode: u8, payload: &[u8], mask: [u8; 4]) {
    let start = frame_head(out, opcode, payload.len() as u64, mask);
    out.extend_from_slice(payload);
    apply_mask(&mut out[start..], mask);
}

/// Append one binary message of `pattern`'s length whose first bytes (up to 4) are `seq`
/// (little-endian) and the rest `pattern`'s, masked with `mask`: what `expected_differs`
/// checks the echo against.
pub fn client_message(out: &mut Vec<u8>, pattern: &[u8], seq: u32, mask: [u8; 4]) {
    let start = frame_head(out, OP_BINARY, pattern.len() as u64, mask);
    out.extend_from_slice(pattern);
    let n = pattern.len().min(4);
    out[start..start + n].copy_from_slice(&seq.to_le_bytes()[..n]);
    apply_mask(&mut out[start..], mask);
}

/// The header of a masked client frame; returns where its payload starts in `out`.
fn frame_head(out: &mut Vec<u8>, opcode: u8, len: u64, mask: [u8; 4]) -> usize {
    out.push(0x80 | opcode);
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= u16::MAX as u64 {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&len.to_be_bytes());
    }
    out.extend_from_slice(&mask);
    out.len()
}

/// XOR `data` with the 4-byte `mask` (its own inverse: masking twice gives the data back).
pub fn apply_mask(data: &mut [u8], mask: [u8; 4]) {
    let m = u32::from_ne_bytes(mask);
    let mut chunks = data.chunks_exact_mut(4);
    for c in &mut chunks {
        let v = u32::from_ne_bytes([c[0], c[1], c[2], c[3]]) ^ m;
        c.copy_from_slice(&v.to_ne_bytes());
    }
    for (k, b) in chunks.into_remainder().iter_mut().enumerate() {
        *b ^= mask[k];
    }
}

/// The deterministic payload of a run's messages (before the sequence number goes in).
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|k| b'a' + (k % 26) as u8).collect()
}

/// Do `bytes`, arriving at offset `at` of the echo of message `seq`, differ from what was
/// sent (see `client_message`)?
#[inline]
pub fn echo_differs(pattern: &[u8], seq: u32, at: u64, bytes: &[u8]) -> bool {
    let start = at as usize;
    let end = start + bytes.len();
    if end > pattern.len() {
        return true;
    }
    let seq = seq.to_le_bytes();
    let head = pattern.len().min(4);
    let mut k = start;
    while k < end && k < head {
        if bytes[k - start] != seq[k] {
            return true;
        }
        k += 1;
    }
    bytes[k - start..] != pattern[k..end]
}

/// The answer to the server's close or the end of a connection per message: close 1000.
pub fn close_frame(out: &mut Vec<u8>, mask: [u8; 4]) {
    client_frame(out, OP_CLOSE, &1000u16.to_be_bytes(), mask);
}

/// The upgrade request: `GET path`, the Host header unless `headers` has one, the caller's
/// headers, then the WebSocket ones.
pub fn handshake_request(host: &str, path: &str, headers: &[(String, String)]) -> Vec<u8> {
    let mut head = format!("GET {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {host}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {KEY}\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    ));
    head.into_bytes()
}

/// Headers the engine sets itself on the upgrade request (lower case).
pub fn forbidden_header(lower: &str) -> bool {
    matches!(
        lower,
        "upgrade"
            | "connection"
            | "sec-websocket-key"
            | "sec-websocket-version"
            | "sec-websocket-accept"
            | "sec-websocket-extensions"
            | "content-length"
            | "transfer-encoding"
    )
}

/// A close code's name (RFC 6455 7.4.1), for messages.
pub fn close_code_name(code: u16) -> &'static str {
    match code {
        1000 => "normal closure",
        1001 => "going away",
        1002 => "protocol error",
        1003 => "unsupported data",
        1007 => "invalid payload data",
        1008 => "policy violation",
        1009 => "message too big",
        1010 => "mandatory extension",
        1011 => "internal error",
        1012 => "service restart",
        1013 => "try again later",
        _ => "other",
    }
}

#[cfg(test)]
mod tests;
