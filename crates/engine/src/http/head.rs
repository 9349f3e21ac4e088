//! The response head: httparse over the bytes received (buffering a head split across
//! reads), then the framing the headers announce (Content-Length, chunked, read until close),
//! `Connection`, and interim 1xx responses.

use super::{ResponseParser, State, MAX_HEAD, MAX_HEADERS};
use crate::errors::ErrorClass;

fn find_header_value<'a>(h: &'a httparse::Header<'a>) -> &'a str {
    std::str::from_utf8(h.value).unwrap_or("").trim()
}

fn has_token(value: &str, token: &str) -> bool {
    value
        .split(',')
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl ResponseParser {
    /// Parse a head from `rest` (plus any buffered partial head). Returns bytes of `rest`
    /// consumed when the head is complete, and sets the body state.
    pub(super) fn parse_head(
        &mut self,
        rest: &[u8],
        is_head: bool,
    ) -> Result<Option<usize>, (ErrorClass, String)> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let old = self.buf.len();
        let parsed;
        let src: &[u8] = if old == 0 {
            parsed = resp.parse(rest);
            rest
        } else {
            let room = (MAX_HEAD + 1).saturating_sub(old);
            let add = rest.len().min(room);
            self.buf.extend_from_slice(&rest[..add]);
            parsed = resp.parse(&self.buf);
            &self.buf
        };
        let n = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                let src_len = src.len();
                if src_len > MAX_HEAD {
                    return Err((
                        ErrorClass::MalformedHeaders,
                        format!("response head longer than {MAX_HEAD} bytes"),
                    ));
                }
                if old == 0 {
                    self.buf.extend_from_slice(rest);
                }
                self.received += (src_len - old) as u64;
                return Ok(None);
            }
            Err(e) => {
                let class = match e {
                    httparse::Error::Status | httparse::Error::Version => {
                        ErrorClass::MalformedStatusLine
                    }
                    _ => ErrorClass::MalformedHeaders,
                };
                let shown: String = String::from_utf8_lossy(&src[..src.len().min(60)]).into_owned();
                return Err((class, format!("{e}: {shown:?}")));
            }
        };
        if n > MAX_HEAD {
            return Err((
                ErrorClass::MalformedHeaders,
                format!("response head longer than {MAX_HEAD} bytes"),
            ));
        }
        let consumed = n - old;
        self.received += consumed as u64;
        let status = resp.code.unwrap_or(0);
        let http10 = resp.version == Some(0);
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        let mut close = http10;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = find_header_value(h);
                let len = v.parse::<u64>().map_err(|_| {
                    (
                        ErrorClass::MalformedHeaders,
                        format!("bad Content-Length {v:?}"),
                    )
                })?;
                if content_length.is_some_and(|c| c != len) {
                    return Err((
                        ErrorClass::MalformedHeaders,
                        "conflicting Content-Length headers".into(),
                    ));
                }
                content_length = Some(len);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = has_token(find_header_value(h), "chunked");
            } else if h.name.eq_ignore_ascii_case("connection") {
                let v = find_header_value(h);
                if has_token(v, "close") {
                    close = true;
                } else if has_token(v, "keep-alive") {
                    close = false;
                }
            }
        }
        self.buf.clear();
        if self.buf.capacity() > 4096 {
            self.buf = Vec::new();
        }
        if (100..200).contains(&status) && status != 101 {
            // Interim response (100 Continue, 103 Early Hints): the real one follows.
            self.state = State::Head;
            return Ok(Some(consumed));
        }
        self.status = status;
        self.close = close;
        self.state = if is_head || status == 204 || status == 304 || status == 101 {
            State::Length(0)
        } else if chunked {
            State::ChunkSize
        } else if let Some(len) = content_length {
            State::Length(len)
        } else {
            self.close = true;
            State::UntilClose
        };
        Ok(Some(consumed))
    }
}
