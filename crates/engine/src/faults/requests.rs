//! The bytes each fault client sends.
use super::FaultKind;

/// Size of the oversized header's value.
pub const OVERSIZED_HEADER_BYTES: usize = 128 * 1024;
/// Body length a slow-body client announces (and trickles).
pub const SLOW_BODY_LENGTH: u64 = 1024 * 1024;
/// Path of the hidden request in the smuggling attempt.
pub const SMUGGLED_PATH: &str = "/__pwb_smuggled";

const UA: &str = "User-Agent: pywebbench-faults\r\n";

fn get(host: &str, path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{UA}{extra}\r\n")
}

/// The first bytes a connection of `kind` sends once connected.
///
/// For the slow kinds this is only the start; the rest is trickled (see [`trickle_piece`]).
pub fn initial(kind: FaultKind, host: &str, path: &str, depth: u32) -> Vec<u8> {
    match kind {
        FaultKind::SlowHeaders => format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{UA}").into(),
        FaultKind::SlowBody => format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{UA}\
             Content-Type: application/octet-stream\r\nContent-Length: {SLOW_BODY_LENGTH}\r\n\r\n"
        )
        .into(),
        FaultKind::SlowReader | FaultKind::ResetMidResponse => {
            let one = get(host, path, "");
            one.repeat(depth.max(1) as usize).into()
        }
        FaultKind::Idle => Vec::new(),
        FaultKind::WsNoRead => crate::ws::handshake_request(host, path, &[]),
        FaultKind::ResetMidRequest => {
            format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{UA}X-Partial: ").into()
        }
        FaultKind::HalfClose => get(host, path, "").into(),
        FaultKind::Churn => get(host, path, "Connection: close\r\n").into(),
        FaultKind::BadRequestLine => {
            format!("GET {path} HTTP/1.1 extra-part\r\nHost: {host}\r\n{UA}\r\n").into()
        }
        FaultKind::OversizedHeaders => {
            let mut v =
                format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{UA}X-Oversized: ").into_bytes();
            v.resize(v.len() + OVERSIZED_HEADER_BYTES, b'a');
            v.extend_from_slice(b"\r\n\r\n");
            v
        }
        FaultKind::InvalidHeaderBytes => {
            let mut v = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{UA}").into_bytes();
            v.extend_from_slice(b"X-Bad\x01Name: ok\r\nX-Bad-Value: a\x00b\x7fc\r\n\r\n");
            v
        }
        FaultKind::ClTeConflict => {
            // Chunked body of 15 bytes announcing a Content-Length of 3.
            format!(
                "GET {path} HTTP/1.1\r\nHost: {host}\r\n{UA}Content-Length: 3\r\n\
                 Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
            )
            .into()
        }
        FaultKind::MalformedChunked => format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\n{UA}Content-Type: application/octet-stream\r\n\
             Transfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"
        )
        .into(),
        FaultKind::Smuggle => {
            // CL.TE: by Content-Length the body is everything below; by Transfer-Encoding it ends
            // at the empty chunk and a second, hidden request follows on the same connection.
            let hidden = format!("GET {SMUGGLED_PATH} HTTP/1.1\r\nHost: {host}\r\n{UA}\r\n");
            let body = format!("0\r\n\r\n{hidden}");
            format!(
                "POST {path} HTTP/1.1\r\nHost: {host}\r\n{UA}Content-Type: application/x-www-form-urlencoded\r\n\
                 Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n{body}",
                body.len()
            )
            .into()
        }
    }
}

/// Size of each message a ws-no-read client sends.
pub const WS_NO_READ_MESSAGE: usize = 16 * 1024;

/// The `n`-th trickled piece of a slow kind (`None`: nothing more to send).
pub fn trickle_piece(kind: FaultKind, n: u64) -> Option<Vec<u8>> {
    match kind {
        FaultKind::WsNoRead => {
            let mut out = Vec::with_capacity(WS_NO_READ_MESSAGE + 14);
            let mask = ((n as u32).wrapping_mul(0x9E37_79B9) | 1).to_ne_bytes();
            let payload = [b'w'; WS_NO_READ_MESSAGE];
            crate::ws::client_frame(&mut out, crate::ws::OP_BINARY, &payload, mask);
            Some(out)
        }
        FaultKind::SlowHeaders => Some(format!("X-Slow-{n}: {n}\r\n").into_bytes()),
        FaultKind::SlowBody if n < SLOW_BODY_LENGTH => Some(vec![b'x']),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smuggle_content_length_covers_the_hidden_request() {
        let r = String::from_utf8(initial(FaultKind::Smuggle, "h", "/", 1)).unwrap();
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        let cl: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(cl, body.len());
        assert!(body.contains(SMUGGLED_PATH));
    }

    #[test]
    fn pipelined_requests_repeat() {
        let r = initial(FaultKind::SlowReader, "h", "/x", 3);
        let s = String::from_utf8(r).unwrap();
        assert_eq!(s.matches("GET /x HTTP/1.1").count(), 3);
    }

    #[test]
    fn oversized_header_is_large() {
        assert!(initial(FaultKind::OversizedHeaders, "h", "/", 1).len() > OVERSIZED_HEADER_BYTES);
    }
}
