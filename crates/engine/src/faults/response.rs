//! A small incremental HTTP/1.1 response scanner: counts complete responses on a connection and
//! remembers the first status, with bounded memory (bodies are skipped, never stored).

/// Longest response head kept for parsing; past it the stream is treated as unparseable.
const MAX_HEAD: usize = 64 * 1024;
/// Bytes of the stream's start kept as an example for findings.
const EXCERPT: usize = 240;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Body {
    /// Waiting for a status line and headers.
    Head,
    /// Skipping this many body bytes.
    Length(u64),
    /// Chunked: waiting for a chunk-size line.
    ChunkSize,
    /// Chunked: skipping chunk data, then its CRLF.
    ChunkData(u64),
    /// Chunked: waiting for the end of the trailer section.
    Trailers,
    /// Body delimited by the connection's close.
    UntilClose,
    /// The stream cannot be parsed any more.
    Garbage,
}

/// Scans a response stream.
#[derive(Debug)]
pub struct Scanner {
    buf: Vec<u8>,
    state: Body,
    /// Complete responses seen.
    pub complete: u32,
    /// Status of the first response whose head was parsed.
    pub first_status: Option<u16>,
    /// Status of the second final response on the connection (a smuggled request's answer).
    pub second_status: Option<u16>,
    /// The start of the stream (for findings).
    pub excerpt: Vec<u8>,
    /// The last response head asked to close the connection.
    pub close_requested: bool,
}

impl Scanner {
    pub fn new() -> Self {
        Scanner {
            buf: Vec::new(),
            state: Body::Head,
            complete: 0,
            first_status: None,
            second_status: None,
            excerpt: Vec::new(),
            close_requested: false,
        }
    }

    /// True once a response head was seen but its body is still incomplete.
    #[cfg(test)]
    pub fn in_response(&self) -> bool {
        !matches!(self.state, Body::Head | Body::Garbage)
    }

    /// Feeds bytes read from the connection.
    pub fn feed(&mut self, data: &[u8]) {
        if self.excerpt.len() < EXCERPT {
            let n = (EXCERPT - self.excerpt.len()).min(data.len());
            self.excerpt.extend_from_slice(&data[..n]);
        }
        let mut data = data;
        // Skip plain body bytes without copying them.
        loop {
            match self.state {
                Body::Garbage | Body::UntilClose => return,
                Body::Length(n) if self.buf.is_empty() => {
                    let take = (n as usize).min(data.len());
                    data = &data[take..];
                    let left = n - take as u64;
                    if left == 0 {
                        self.complete += 1;
                        self.state = Body::Head;
                    } else {
                        self.state = Body::Length(left);
                        return;
                    }
                }
                _ => break,
            }
        }
        self.buf.extend_from_slice(data);
        self.advance();
    }

    fn advance(&mut self) {
        loop {
            match self.state {
                Body::Garbage | Body::UntilClose => {
                    self.buf.clear();
                    return;
                }
                Body::Head => {
                    if self.buf.is_empty() {
                        return;
                    }
                    let mut headers = [httparse::EMPTY_HEADER; 64];
                    let mut resp = httparse::Response::new(&mut headers);
                    match resp.parse(&self.buf) {
                        Ok(httparse::Status::Complete(n)) => {
                            let status = resp.code.unwrap_or(0);
                            if !(100..200).contains(&status) {
                                if self.first_status.is_none() {
                                    self.first_status = Some(status);
                                } else if self.second_status.is_none() {
                                    self.second_status = Some(status);
                                }
                            }
                            let mut length: Option<u64> = None;
                            let mut chunked = false;
                            let mut close = resp.version == Some(0);
                            for h in resp.headers.iter() {
                                if h.name.eq_ignore_ascii_case("content-length") {
                                    length = std::str::from_utf8(h.value)
                                        .ok()
                                        .and_then(|v| v.trim().parse().ok());
                                } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                                    chunked = h.value.to_ascii_lowercase().ends_with(b"chunked");
                                } else if h.name.eq_ignore_ascii_case("connection") {
                                    let v = h.value.to_ascii_lowercase();
                                    if v.windows(5).any(|w| w == b"close") {
                                        close = true;
                                    }
                                }
                            }
                            self.close_requested = close;
                            self.buf.drain(..n);
                            if (100..200).contains(&status) {
                                // Interim response: the real one follows.
                                continue;
                            }
                            self.state = if status == 204 || status == 304 {
                                Body::Length(0)
                            } else if chunked {
                                Body::ChunkSize
                            } else if let Some(l) = length {
                                Body::Length(l)
                            } else {
                                Body::UntilClose
                            };
                        }
                        Ok(httparse::Status::Partial) => {
                            if self.buf.len() > MAX_HEAD {
                                self.state = Body::Garbage;
                            }
                            return;
                        }
                        Err(_) => {
                            self.state = Body::Garbage;
                        }
                    }
                }
                Body::Length(n) => {
                    let take = (n as usize).min(self.buf.len());
                    self.buf.drain(..take);
                    let left = n - take as u64;
                    if left == 0 {
                        self.complete += 1;
                        self.state = Body::Head;
                    } else {
                        self.state = Body::Length(left);
                        return;
                    }
                }
                Body::ChunkSize => {
                    let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") else {
                        if self.buf.len() > 4096 {
                            self.state = Body::Garbage;
                        }
                        return;
                    };
                    let line = &self.buf[..pos];
                    let hex: Vec<u8> = line
                        .iter()
                        .take_while(|b| b.is_ascii_hexdigit())
                        .copied()
                        .collect();
                    let size = std::str::from_utf8(&hex)
                        .ok()
                        .and_then(|s| u64::from_str_radix(s, 16).ok());
                    self.buf.drain(..pos + 2);
                    self.state = match size {
                        Some(0) => Body::Trailers,
                        Some(s) => Body::ChunkData(s + 2),
                        None => Body::Garbage,
                    };
                }
                Body::ChunkData(n) => {
                    let take = (n as usize).min(self.buf.len());
                    self.buf.drain(..take);
                    let left = n - take as u64;
                    if left == 0 {
                        self.state = Body::ChunkSize;
                    } else {
                        self.state = Body::ChunkData(left);
                        return;
                    }
                }
                Body::Trailers => {
                    if self.buf.starts_with(b"\r\n") {
                        self.buf.drain(..2);
                        self.complete += 1;
                        self.state = Body::Head;
                        continue;
                    }
                    let Some(pos) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        if self.buf.len() > MAX_HEAD {
                            self.state = Body::Garbage;
                        }
                        return;
                    };
                    self.buf.drain(..pos + 4);
                    self.complete += 1;
                    self.state = Body::Head;
                }
            }
        }
    }

    /// The peer closed: a close-delimited body is complete now.
    pub fn eof(&mut self) {
        if self.state == Body::UntilClose {
            self.complete += 1;
            self.state = Body::Head;
        }
    }
}

/// Escapes bytes for display (printable ASCII kept, the rest as `\xNN`, CR LF as `\r\n`),
/// truncated to `max` input bytes; a truncated text ends with `... (N bytes)`, `N` being
/// `total`: the whole length of what was sent or received, of which `bytes` is the start.
pub fn escape(bytes: &[u8], max: usize, total: u64) -> String {
    let mut s = String::new();
    for &b in bytes.iter().take(max) {
        match b {
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\x{b:02x}")),
        }
    }
    let total = total.max(bytes.len() as u64);
    if total > max.min(bytes.len()) as u64 {
        s.push_str(&format!("... ({total} bytes)"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_length_and_chunked_responses_in_pieces() {
        let stream = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nHTTP/1.1 400 Bad\r\nConnection: close\r\n\r\nbye";
        for step in [1usize, 2, 7, 1000] {
            let mut s = Scanner::new();
            for piece in stream.chunks(step) {
                s.feed(piece);
            }
            assert_eq!(s.complete, 2, "step {step}");
            assert!(s.in_response());
            s.eof();
            assert_eq!(s.complete, 3, "step {step}");
            assert_eq!(s.first_status, Some(200));
            assert_eq!(s.second_status, Some(404));
            assert!(s.close_requested);
        }
    }

    #[test]
    fn garbage_is_not_a_response() {
        let mut s = Scanner::new();
        s.feed(b"\x00\x01 not http at all\r\n\r\n");
        s.eof();
        assert_eq!(s.complete, 0);
        assert_eq!(s.first_status, None);
    }

    #[test]
    fn interim_100_is_skipped() {
        let mut s = Scanner::new();
        s.feed(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(s.complete, 1);
        assert_eq!(s.first_status, Some(204));
    }

    #[test]
    fn escape_shows_control_bytes() {
        assert_eq!(escape(b"A\r\n\x00", 10, 4), "A\\r\\n\\x00");
        assert!(escape(b"abcdef", 3, 6).starts_with("abc... (6 bytes)"));
        // An excerpt of a longer stream names the whole length, not the excerpt's.
        assert_eq!(escape(b"abc", 10, 131_072), "abc... (131072 bytes)");
    }
}
