//! Incremental HTTP/1.1 response parsing: httparse for the head, our own framing for bodies
//! (Content-Length, chunked via `httparse::parse_chunk_size`, read-until-close). Bodies are
//! never buffered: they are counted (and optionally compared with an expected body) and dropped.
//! The head (status line, framing and connection headers) is parsed in `head.rs`; the body
//! framing state machine is here.

use crate::errors::ErrorClass;

mod head;

/// Largest response head accepted; beyond it the response is `malformed_headers`.
pub const MAX_HEAD: usize = 64 * 1024;
/// Largest chunk-size line (with extensions) accepted.
const MAX_CHUNK_LINE: usize = 4096;
/// Largest trailer section accepted.
const MAX_TRAILERS: u32 = 64 * 1024;
/// Headers per response accepted by the parser.
const MAX_HEADERS: usize = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkCrlf(u8),
    Trailers { line: u32, total: u32 },
    UntilClose,
}

/// Outcome of feeding bytes to the parser.
#[derive(Debug, PartialEq, Eq)]
pub enum Feed {
    /// All bytes were consumed and the response is not complete yet.
    NeedMore,
    /// A response completed after `consumed` bytes; the rest belongs to the next response.
    Complete { consumed: usize },
    /// The response is malformed.
    Error(ErrorClass, String),
}

/// Per-connection response parser. Small: a state, a few fields and a buffer that is only
/// used (and grown) for partial heads and partial chunk-size lines.
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    buf: Vec<u8>,
    /// Status code of the current response (valid once the head is parsed).
    pub status: u16,
    /// The server will close the connection after this response.
    pub close: bool,
    /// Bytes of the current response received so far (head and body).
    pub received: u64,
    /// Body bytes of the current response.
    pub body_len: u64,
    /// The body differed from the expected body (when a body check is asked).
    pub body_mismatch: bool,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseParser {
    /// A parser waiting for a response head.
    pub fn new() -> Self {
        ResponseParser {
            state: State::Head,
            buf: Vec::new(),
            status: 0,
            close: false,
            received: 0,
            body_len: 0,
            body_mismatch: false,
        }
    }

    /// Forget the current response (after completion or when the connection is reopened).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.buf.clear();
        if self.buf.capacity() > 4096 {
            self.buf = Vec::new();
        }
        self.status = 0;
        self.close = false;
        self.received = 0;
        self.body_len = 0;
        self.body_mismatch = false;
    }

    /// True while the response head is not complete.
    pub fn in_head(&self) -> bool {
        self.state == State::Head
    }

    /// Bytes held by the parser's own buffer (for memory accounting in tests).
    pub fn buffered(&self) -> usize {
        self.buf.capacity()
    }

    /// Classify the end of the stream (read returned 0) in the current state: `Ok(())` if it
    /// completes a read-until-close body, otherwise the error class and message.
    pub fn on_eof(&self) -> Result<(), (ErrorClass, String)> {
        match self.state {
            State::UntilClose => Ok(()),
            State::Head if self.received == 0 => Err((
                ErrorClass::EofBeforeHeaders,
                "server closed the connection before sending a response".into(),
            )),
            State::Head => Err((
                ErrorClass::EofBeforeHeaders,
                format!(
                    "server closed the connection after {} bytes of the response head",
                    self.received
                ),
            )),
            _ => Err((
                ErrorClass::EofMidBody,
                format!(
                    "server closed the connection after {} body bytes",
                    self.body_len
                ),
            )),
        }
    }

    /// Classify a connection reset in the current state.
    pub fn on_reset(&self, err: &std::io::Error) -> (ErrorClass, String) {
        if self.state == State::Head {
            (
                ErrorClass::ResetBeforeResponse,
                format!("connection reset before the response was complete: {err}"),
            )
        } else {
            (
                ErrorClass::ResetMidBody,
                format!("connection reset after {} body bytes: {err}", self.body_len),
            )
        }
    }

    /// Feed received bytes. `is_head` marks a response to HEAD (no body); `expect` is the
    /// expected body, compared as it streams by.
    pub fn feed(&mut self, data: &[u8], is_head: bool, expect: Option<&[u8]>) -> Feed {
        let mut off = 0usize;
        loop {
            let rest = &data[off..];
            match self.state {
                State::Head => {
                    if rest.is_empty() {
                        return Feed::NeedMore;
                    }
                    match self.parse_head(rest, is_head) {
                        Ok(Some(n)) => {
                            off += n;
                            if self.state == State::Head {
                                // Interim 1xx response skipped: parse the next head.
                                continue;
                            }
                            if self.is_done_state() {
                                return Feed::Complete { consumed: off };
                            }
                        }
                        Ok(None) => return Feed::NeedMore,
                        Err((c, m)) => return Feed::Error(c, m),
                    }
                }
                State::Length(remaining) => {
                    let take = (rest.len() as u64).min(remaining) as usize;
                    self.body(&rest[..take], expect);
                    self.received += take as u64;
                    off += take;
                    let left = remaining - take as u64;
                    if left == 0 {
                        self.finish_body(expect);
                        return Feed::Complete { consumed: off };
                    }
                    self.state = State::Length(left);
                    return Feed::NeedMore;
                }
                State::UntilClose => {
                    self.body(rest, expect);
                    self.received += rest.len() as u64;
                    return Feed::NeedMore;
                }
                State::ChunkSize => {
                    if rest.is_empty() {
                        return Feed::NeedMore;
                    }
                    match self.chunk_size(rest) {
                        Ok(Some((n, size))) => {
                            off += n;
                            self.state = if size == 0 {
                                State::Trailers { line: 0, total: 0 }
                            } else {
                                State::ChunkData(size)
                            };
                        }
                        Ok(None) => return Feed::NeedMore,
                        Err(m) => return Feed::Error(ErrorClass::MalformedChunked, m),
                    }
                }
                State::ChunkData(remaining) => {
                    if rest.is_empty() {
                        return Feed::NeedMore;
                    }
                    let take = (rest.len() as u64).min(remaining) as usize;
                    self.body(&rest[..take], expect);
                    self.received += take as u64;
                    off += take;
                    let left = remaining - take as u64;
                    self.state = if left == 0 {
                        State::ChunkCrlf(0)
                    } else {
                        State::ChunkData(left)
                    };
                }
                State::ChunkCrlf(got) => {
                    let Some(&b) = rest.first() else {
                        return Feed::NeedMore;
                    };
                    off += 1;
                    self.received += 1;
                    match (got, b) {
                        (0, b'\r') => self.state = State::ChunkCrlf(1),
                        (_, b'\n') => self.state = State::ChunkSize,
                        _ => {
                            return Feed::Error(
                                ErrorClass::MalformedChunked,
                                format!("expected CRLF after chunk data, got byte 0x{b:02x}"),
                            )
                        }
                    }
                }
                State::Trailers {
                    mut line,
                    mut total,
                } => {
                    for (i, &b) in rest.iter().enumerate() {
                        total += 1;
                        if total > MAX_TRAILERS {
                            return Feed::Error(
                                ErrorClass::MalformedChunked,
                                format!("chunked trailers longer than {MAX_TRAILERS} bytes"),
                            );
                        }
                        match b {
                            b'\n' if line == 0 => {
                                self.received += i as u64 + 1;
                                self.finish_body(expect);
                                return Feed::Complete {
                                    consumed: off + i + 1,
                                };
                            }
                            b'\n' => line = 0,
                            b'\r' => {}
                            _ => line += 1,
                        }
                    }
                    self.received += rest.len() as u64;
                    self.state = State::Trailers { line, total };
                    return Feed::NeedMore;
                }
            }
        }
    }

    fn is_done_state(&self) -> bool {
        matches!(self.state, State::Length(0))
    }

    #[inline]
    fn body(&mut self, bytes: &[u8], expect: Option<&[u8]>) {
        if let Some(exp) = expect {
            if !self.body_mismatch {
                let start = self.body_len as usize;
                let ok =
                    start + bytes.len() <= exp.len() && exp[start..start + bytes.len()] == *bytes;
                self.body_mismatch = !ok;
            }
        }
        self.body_len += bytes.len() as u64;
    }

    fn finish_body(&mut self, expect: Option<&[u8]>) {
        if let Some(exp) = expect {
            if self.body_len != exp.len() as u64 {
                self.body_mismatch = true;
            }
        }
    }

    fn chunk_size(&mut self, rest: &[u8]) -> Result<Option<(usize, u64)>, String> {
        let old = self.buf.len();
        let (src, parsed) = if old == 0 {
            (rest, httparse::parse_chunk_size(rest))
        } else {
            let add = rest.len().min((MAX_CHUNK_LINE + 1).saturating_sub(old));
            self.buf.extend_from_slice(&rest[..add]);
            (&self.buf[..], httparse::parse_chunk_size(&self.buf))
        };
        match parsed {
            // The same limit whether the line came in one read or several.
            Ok(httparse::Status::Complete((n, _))) if n > MAX_CHUNK_LINE => Err(format!(
                "chunk-size line longer than {MAX_CHUNK_LINE} bytes"
            )),
            Ok(httparse::Status::Complete((n, size))) => {
                self.buf.clear();
                self.received += (n - old) as u64;
                Ok(Some((n - old, size)))
            }
            Ok(httparse::Status::Partial) => {
                if src.len() > MAX_CHUNK_LINE {
                    return Err(format!(
                        "chunk-size line longer than {MAX_CHUNK_LINE} bytes"
                    ));
                }
                if old == 0 {
                    self.buf.extend_from_slice(rest);
                    self.received += rest.len() as u64;
                } else {
                    self.received += (src.len() - old) as u64;
                }
                Ok(None)
            }
            Err(_) => {
                let shown = String::from_utf8_lossy(&src[..src.len().min(40)]).into_owned();
                Err(format!("invalid chunk size line {shown:?}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feed `data` split into pieces of `step` bytes; return completions (status, body_len)
    /// or the first error.
    fn run(
        data: &[u8],
        step: usize,
        expect: Option<&[u8]>,
    ) -> Result<Vec<(u16, u64, bool, bool)>, ErrorClass> {
        let mut p = ResponseParser::new();
        let mut out = Vec::new();
        for piece in data.chunks(step) {
            let mut off = 0;
            while off < piece.len() {
                match p.feed(&piece[off..], false, expect) {
                    Feed::NeedMore => break,
                    Feed::Complete { consumed } => {
                        out.push((p.status, p.body_len, p.close, p.body_mismatch));
                        p.reset();
                        off += consumed;
                    }
                    Feed::Error(c, _) => return Err(c),
                }
            }
        }
        if p.on_eof().is_ok() {
            out.push((p.status, p.body_len, p.close, p.body_mismatch));
        }
        Ok(out)
    }

    const TWO: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";

    #[test]
    fn content_length_pipelined_any_split() {
        for step in [1, 2, 3, 7, 1000] {
            let r = run(TWO, step, None).unwrap();
            assert_eq!(
                r,
                vec![(200, 5, false, false), (404, 0, false, false)],
                "step {step}"
            );
        }
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
        for step in [1, 4, 1000] {
            let r = run(data, step, None).unwrap();
            assert_eq!(
                r,
                vec![(200, 11, false, false), (200, 0, false, false)],
                "step {step}"
            );
        }
    }

    #[test]
    fn malformed_chunked() {
        let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        assert_eq!(run(data, 1000, None), Err(ErrorClass::MalformedChunked));
        let data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n";
        assert_eq!(run(data, 1000, None), Err(ErrorClass::MalformedChunked));
    }

    #[test]
    fn until_close_and_connection_close() {
        let data = b"HTTP/1.1 200 OK\r\n\r\nabc";
        assert_eq!(run(data, 2, None).unwrap(), vec![(200, 3, true, false)]);
        let data = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(run(data, 100, None).unwrap(), vec![(200, 1, true, false)]);
        let data = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx";
        assert_eq!(run(data, 100, None).unwrap(), vec![(200, 1, true, false)]);
    }

    #[test]
    fn interim_and_bodyless_statuses() {
        let data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(
            run(data, 3, None).unwrap(),
            vec![(204, 0, false, false), (304, 0, false, false)]
        );
    }

    #[test]
    fn head_response_has_no_body() {
        let mut p = ResponseParser::new();
        let d = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
        assert_eq!(p.feed(d, true, None), Feed::Complete { consumed: d.len() });
    }

    #[test]
    fn malformed_heads_classify() {
        assert_eq!(
            run(b"GARBAGE 200 OK\r\n\r\n", 100, None),
            Err(ErrorClass::MalformedStatusLine)
        );
        assert_eq!(
            run(b"HTTP/1.1 2x0 OK\r\n\r\n", 100, None),
            Err(ErrorClass::MalformedStatusLine)
        );
        assert_eq!(
            run(b"HTTP/1.1 200 OK\r\nBad Header\r\n\r\n", 100, None),
            Err(ErrorClass::MalformedHeaders)
        );
        assert_eq!(
            run(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", 100, None),
            Err(ErrorClass::MalformedHeaders)
        );
    }

    #[test]
    fn endless_headers_are_bounded() {
        let mut p = ResponseParser::new();
        assert_eq!(p.feed(b"HTTP/1.1 200 OK\r\n", false, None), Feed::NeedMore);
        let line = b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        let mut err = None;
        for _ in 0..100_000 {
            match p.feed(line, false, None) {
                Feed::NeedMore => {}
                Feed::Error(c, _) => {
                    err = Some(c);
                    break;
                }
                Feed::Complete { .. } => panic!("cannot complete"),
            }
            assert!(p.buffered() <= 2 * MAX_HEAD + 128);
        }
        assert_eq!(err, Some(ErrorClass::MalformedHeaders));
    }

    #[test]
    fn body_check_streams() {
        let data = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
        assert_eq!(
            run(data, 1, Some(b"hello")).unwrap(),
            vec![(200, 5, false, false)]
        );
        assert_eq!(
            run(data, 2, Some(b"hellO")).unwrap(),
            vec![(200, 5, false, true)]
        );
        assert_eq!(
            run(data, 2, Some(b"hell")).unwrap(),
            vec![(200, 5, false, true)]
        );
        assert_eq!(
            run(data, 2, Some(b"hello!")).unwrap(),
            vec![(200, 5, false, true)]
        );
    }

    #[test]
    fn eof_and_reset_classes() {
        let mut p = ResponseParser::new();
        assert_eq!(p.on_eof().unwrap_err().0, ErrorClass::EofBeforeHeaders);
        assert_eq!(
            p.feed(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nab",
                false,
                None
            ),
            Feed::NeedMore
        );
        assert_eq!(p.on_eof().unwrap_err().0, ErrorClass::EofMidBody);
        let e = std::io::Error::from_raw_os_error(libc::ECONNRESET);
        assert_eq!(p.on_reset(&e).0, ErrorClass::ResetMidBody);
        p.reset();
        assert_eq!(p.on_reset(&e).0, ErrorClass::ResetBeforeResponse);
    }

    #[test]
    fn huge_body_is_not_buffered() {
        let mut p = ResponseParser::new();
        assert_eq!(
            p.feed(
                b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n",
                false,
                None
            ),
            Feed::NeedMore
        );
        let block = vec![b'x'; 65536];
        for _ in 0..1000 {
            assert_eq!(p.feed(&block, false, None), Feed::NeedMore);
        }
        assert_eq!(p.body_len, 65_536_000);
        assert_eq!(p.buffered(), 0);
    }
}
