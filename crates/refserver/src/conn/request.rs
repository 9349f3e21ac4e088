//! Request parsing: the head parser (httparse plus the framing and smuggling checks) and
//! the per-connection incremental parser that cuts requests and their bodies out of the
//! bytes read, chunked bodies included.

use std::mem::MaybeUninit;
use std::time::Instant;

use super::{Active, Conn, MAX_PENDING};
use crate::context::Env;
use crate::http::{route, Params, Route, MAX_HEAD, MAX_HEADERS};

/// Longest chunk-size line accepted in a chunked request body.
pub(crate) const MAX_CHUNK_LINE: usize = 4096;

/// What a parsed request needs to be answered.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Req {
    pub route: Route,
    pub params: Params,
    pub head: bool,
    pub keep_alive: bool,
    pub http10: bool,
    pub has_body: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// Where the incremental parser of a connection stands.
#[derive(Debug)]
pub(crate) enum Parse {
    Head,
    Body {
        req: Req,
        remaining: u64,
        total: u64,
    },
    Chunked {
        req: Req,
        st: ChunkSt,
        total: u64,
        trailer: usize,
    },
    /// No more requests on this connection: input is read and discarded.
    Done,
}

/// Where a chunked request body stands.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ChunkSt {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
}

/// What `parse_head` made of the bytes so far.
pub(crate) enum HeadResult {
    Partial,
    Complete(usize, Req, Framing),
    Error(u16, String),
}

/// How the request body is delimited.
pub(crate) enum Framing {
    None,
    Length(u64),
    Chunked,
}

fn parse_content_length(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii();
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// Parses a request head at the start of `buf`: request line, framing headers (rejecting
/// ambiguous ones), `Connection`, `Expect`, and the route.
pub(crate) fn parse_head(buf: &[u8]) -> HeadResult {
    // Look at no more than the limit allows, so a head gets the same verdict (and message)
    // whether it arrived in one read or several.
    let buf = &buf[..buf.len().min(MAX_HEAD + 1)];
    let mut headers: [MaybeUninit<httparse::Header<'_>>; MAX_HEADERS] =
        [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut r = httparse::Request::new(&mut []);
    let n = match r.parse_with_uninit_headers(buf, &mut headers) {
        Ok(httparse::Status::Partial) => return HeadResult::Partial,
        Ok(httparse::Status::Complete(n)) => n,
        Err(e) => {
            let (status, what) = match e {
                httparse::Error::TooManyHeaders => (431, "more than 100 header fields"),
                httparse::Error::HeaderName => (400, "invalid byte in a header name"),
                httparse::Error::HeaderValue => (400, "invalid byte in a header value"),
                httparse::Error::NewLine => (400, "invalid line ending"),
                httparse::Error::Token => (400, "invalid request line (method or target)"),
                httparse::Error::Version => (400, "invalid HTTP version"),
                _ => (400, "malformed request"),
            };
            return HeadResult::Error(status, what.to_string());
        }
    };
    if n > MAX_HEAD {
        return HeadResult::Error(431, "request head larger than 16 KiB".into());
    }
    let (Some(method), Some(path), Some(version)) = (r.method, r.path, r.version) else {
        return HeadResult::Error(400, "malformed request line".into());
    };
    let mut length: Option<u64> = None;
    let mut chunked = false;
    let mut te_seen = false;
    let mut conn_close = false;
    let mut conn_ka = false;
    let mut expect_continue = false;
    for h in r.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            let Some(v) = parse_content_length(h.value) else {
                return HeadResult::Error(400, "invalid Content-Length".into());
            };
            if length.is_some_and(|l| l != v) {
                return HeadResult::Error(400, "conflicting Content-Length headers".into());
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if te_seen {
                return HeadResult::Error(400, "more than one Transfer-Encoding header".into());
            }
            te_seen = true;
            if !h.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return HeadResult::Error(
                    400,
                    "unsupported Transfer-Encoding (only \"chunked\" is accepted)".into(),
                );
            }
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("expect") {
            expect_continue = h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        } else if h.name.eq_ignore_ascii_case("connection") {
            for tok in h.value.split(|b| *b == b',') {
                let tok = tok.trim_ascii();
                if tok.eq_ignore_ascii_case(b"close") {
                    conn_close = true;
                } else if tok.eq_ignore_ascii_case(b"keep-alive") {
                    conn_ka = true;
                }
            }
        }
    }
    if te_seen && length.is_some() {
        return HeadResult::Error(
            400,
            "both Content-Length and Transfer-Encoding (request smuggling risk)".into(),
        );
    }
    if te_seen && version == 0 {
        return HeadResult::Error(400, "Transfer-Encoding in an HTTP/1.0 request".into());
    }
    let (route, params) = match route(path) {
        Ok(x) => x,
        Err(msg) => return HeadResult::Error(400, msg),
    };
    let http10 = version == 0;
    let keep_alive = !conn_close && (!http10 || conn_ka);
    let framing = if chunked {
        Framing::Chunked
    } else {
        match length {
            Some(l) => Framing::Length(l),
            None => Framing::None,
        }
    };
    let req = Req {
        route,
        params,
        head: method == "HEAD",
        keep_alive,
        http10,
        has_body: !matches!(framing, Framing::None),
        expect_continue: expect_continue && version == 1,
    };
    HeadResult::Complete(n, req, framing)
}

impl Conn {
    /// Parses as many requests out of `data` as allowed; returns the bytes consumed.
    pub fn feed(&mut self, env: &mut Env, data: &[u8], now: Instant) -> usize {
        let mut pos = 0;
        while pos < data.len() {
            if self.pending.len() >= MAX_PENDING {
                break;
            }
            let buf = &data[pos..];
            match &mut self.parse {
                Parse::Done => return data.len(),
                Parse::Head => match parse_head(buf) {
                    HeadResult::Partial => {
                        if buf.len() > MAX_HEAD {
                            self.fail(env, 431, "request head larger than 16 KiB".into(), now);
                            return data.len();
                        }
                        break;
                    }
                    HeadResult::Error(status, msg) => {
                        self.fail(env, status, msg, now);
                        return data.len();
                    }
                    HeadResult::Complete(n, req, framing) => {
                        pos += n;
                        // Interim 100 only when nothing is ahead of it on the wire.
                        if req.expect_continue
                            && !matches!(framing, Framing::None | Framing::Length(0))
                            && self.pending.is_empty()
                            && matches!(self.active, Active::None)
                            && pos == data.len()
                        {
                            self.wbuf
                                .extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                        }
                        match framing {
                            Framing::None => self.dispatch(env, req, 0, now),
                            Framing::Length(0) => self.dispatch(env, req, 0, now),
                            Framing::Length(l) => {
                                self.parse = Parse::Body {
                                    req,
                                    remaining: l,
                                    total: l,
                                }
                            }
                            Framing::Chunked => {
                                self.parse = Parse::Chunked {
                                    req,
                                    st: ChunkSt::Size,
                                    total: 0,
                                    trailer: 0,
                                }
                            }
                        }
                    }
                },
                Parse::Body {
                    req,
                    remaining,
                    total,
                } => {
                    let take = (*remaining).min(buf.len() as u64);
                    pos += take as usize;
                    *remaining -= take;
                    if *remaining == 0 {
                        let (req, total) = (*req, *total);
                        self.dispatch(env, req, total, now);
                    }
                }
                Parse::Chunked {
                    req,
                    st,
                    total,
                    trailer,
                } => match *st {
                    ChunkSt::Size => {
                        let Some(nl) = buf.iter().position(|b| *b == b'\n') else {
                            if buf.len() > MAX_CHUNK_LINE {
                                self.fail(env, 400, "chunk-size line too long".into(), now);
                                return data.len();
                            }
                            break;
                        };
                        if nl >= MAX_CHUNK_LINE {
                            // The same limit whether the line came in one read or several.
                            self.fail(env, 400, "chunk-size line too long".into(), now);
                            return data.len();
                        }
                        match httparse::parse_chunk_size(&buf[..=nl]) {
                            Ok(httparse::Status::Complete((used, size))) => {
                                pos += used;
                                *st = if size == 0 {
                                    ChunkSt::Trailer
                                } else {
                                    ChunkSt::Data(size)
                                };
                            }
                            _ => {
                                self.fail(
                                    env,
                                    400,
                                    "invalid chunk size in request body".into(),
                                    now,
                                );
                                return data.len();
                            }
                        }
                    }
                    ChunkSt::Data(rem) => {
                        let take = rem.min(buf.len() as u64);
                        pos += take as usize;
                        *total += take;
                        *st = if rem == take {
                            ChunkSt::DataEnd
                        } else {
                            ChunkSt::Data(rem - take)
                        };
                    }
                    ChunkSt::DataEnd => {
                        if buf.len() < 2 {
                            if buf[0] != b'\r' {
                                self.fail(env, 400, "chunk data not followed by CRLF".into(), now);
                                return data.len();
                            }
                            break;
                        }
                        if &buf[..2] != b"\r\n" {
                            self.fail(env, 400, "chunk data not followed by CRLF".into(), now);
                            return data.len();
                        }
                        pos += 2;
                        *st = ChunkSt::Size;
                    }
                    ChunkSt::Trailer => {
                        let Some(nl) = buf.iter().position(|b| *b == b'\n') else {
                            // A lone CR may start the final blank line, which is not counted.
                            if buf.len() + *trailer > MAX_HEAD && buf != b"\r" {
                                self.fail(
                                    env,
                                    431,
                                    "chunked trailer larger than 16 KiB".into(),
                                    now,
                                );
                                return data.len();
                            }
                            break;
                        };
                        pos += nl + 1;
                        if nl == 0 || (nl == 1 && buf[0] == b'\r') {
                            let (req, total) = (*req, *total);
                            self.dispatch(env, req, total, now);
                        } else {
                            *trailer += nl + 1;
                            if *trailer > MAX_HEAD {
                                self.fail(
                                    env,
                                    431,
                                    "chunked trailer larger than 16 KiB".into(),
                                    now,
                                );
                                return data.len();
                            }
                        }
                    }
                },
            }
        }
        pos
    }
}
