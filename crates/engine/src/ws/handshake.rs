//! The server's answer to the upgrade request: `101 Switching Protocols` with
//! `Upgrade: websocket`, `Connection: Upgrade` and the right `Sec-WebSocket-Accept`. Any
//! other answer (a 404 for a wrong path, a 200 from a server that ignores the upgrade, a
//! 426 ...) is `ws_handshake_rejected` naming the status; bytes that are no HTTP answer at
//! all are `ws_protocol_error`.

use super::{WsError, KEY};
use crate::errors::ErrorClass;
use base64::Engine as _;

/// Longest answer head accepted.
pub const MAX_HEAD: usize = 16 * 1024;
const MAX_HEADERS: usize = 64;
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` a server must answer to `key`.
pub fn accept_for(key: &str) -> String {
    let digest = super::sha1(format!("{key}{GUID}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(digest)
}

/// What feeding bytes to `Handshake` found.
#[derive(Debug, PartialEq, Eq)]
pub enum HandshakeFeed {
    /// The answer is not complete yet (all bytes were taken).
    NeedMore,
    /// The upgrade succeeded; `consumed` bytes of this piece were the answer's, the rest
    /// are frames.
    Done { consumed: usize },
}

/// The answer to one connection's upgrade request, buffered until its head is complete.
#[derive(Debug, Default)]
pub struct Handshake {
    buf: Vec<u8>,
}

fn rejected(msg: String) -> WsError {
    (ErrorClass::WsHandshakeRejected, msg)
}

fn has_token(value: &str, token: &str) -> bool {
    value
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl Handshake {
    pub fn new() -> Handshake {
        Handshake {
            buf: Vec::with_capacity(512),
        }
    }

    /// Start over, for a new connection.
    pub fn reset(&mut self) {
        self.buf.clear();
    }

    /// Bytes of an incomplete answer held.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Feed received bytes; `accept` is the expected `Sec-WebSocket-Accept` (`accept_for`).
    pub fn feed(&mut self, data: &[u8], accept: &str) -> Result<HandshakeFeed, WsError> {
        let old = self.buf.len();
        let add = data.len().min(MAX_HEAD + 1 - old.min(MAX_HEAD + 1));
        self.buf.extend_from_slice(&data[..add]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&self.buf) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if self.buf.len() > MAX_HEAD => {
                return Err(rejected(format!(
                    "the answer to the WebSocket upgrade has a head over {MAX_HEAD} bytes"
                )))
            }
            Ok(httparse::Status::Partial) => return Ok(HandshakeFeed::NeedMore),
            Err(e) => {
                let shown = String::from_utf8_lossy(&self.buf[..self.buf.len().min(40)]);
                return Err((
                    ErrorClass::WsProtocolError,
                    format!("the answer to the WebSocket upgrade is not HTTP ({e}): {shown:?}"),
                ));
            }
        };
        let status = resp.code.unwrap_or(0);
        let reason = match resp.reason.unwrap_or("").trim() {
            "" => String::new(),
            r => format!(" {r}"),
        };
        let value = |name: &str| {
            resp.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
        };
        if status != 101 {
            return Err(rejected(format!(
                "the server answered the WebSocket upgrade with {status}{reason} \
                 (expected 101 Switching Protocols)"
            )));
        }
        let upgrade = value("upgrade").unwrap_or_default();
        if !upgrade.eq_ignore_ascii_case("websocket") {
            return Err(rejected(format!(
                "101 without Upgrade: websocket (Upgrade: {upgrade:?})"
            )));
        }
        if !has_token(&value("connection").unwrap_or_default(), "upgrade") {
            return Err(rejected("101 without Connection: Upgrade".into()));
        }
        match value("sec-websocket-accept") {
            Some(a) if a == accept => {}
            Some(a) => {
                return Err(rejected(format!(
                    "wrong Sec-WebSocket-Accept {a:?} (expected {accept:?} for key {KEY})"
                )))
            }
            None => return Err(rejected("101 without Sec-WebSocket-Accept".into())),
        }
        if let Some(ext) = value("sec-websocket-extensions") {
            return Err(rejected(format!(
                "the server chose extensions the engine did not offer: {ext:?}"
            )));
        }
        self.buf.clear();
        Ok(HandshakeFeed::Done { consumed: n - old })
    }
}
