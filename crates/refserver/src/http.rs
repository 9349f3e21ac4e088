//! HTTP/1.1 pieces: the cached Date header, response heads, the body pattern, request
//! routing and query parameters.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::Mode;

pub(crate) const SERVER_NAME: &str = "pywebbench-refserver";
pub(crate) const HELLO: &[u8] = b"Hello, World!";
/// Largest request head accepted (request line + headers); beyond it: 431.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Most headers in one request; beyond it: 431.
pub(crate) const MAX_HEADERS: usize = 100;

/// Byte `i` of a `size=N` body is `PATTERN[i % 26]`.
pub(crate) const PATTERN_PERIOD: usize = 26;
/// A buffer of the body pattern, long enough to write 64 KiB from any phase.
pub(crate) static PATTERN: [u8; 65_536 + PATTERN_PERIOD] = {
    let mut b = [0u8; 65_536 + PATTERN_PERIOD];
    let mut i = 0;
    while i < b.len() {
        b[i] = b'a' + (i % PATTERN_PERIOD) as u8;
        i += 1;
    }
    b
};

/// Formats a Unix time as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub(crate) fn http_date(secs: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (hh, mm, ss) = (rem / 3600, (rem / 60) % 60, rem % 60);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    let two = |o: &mut [u8], v: u64| {
        o[0] = b'0' + (v / 10) as u8;
        o[1] = b'0' + (v % 10) as u8;
    };
    two(&mut out[5..7], d as u64);
    out[8..11].copy_from_slice(MONTHS[(m - 1) as usize]);
    let y = y.clamp(0, 9999) as u64;
    two(&mut out[12..14], y / 100);
    two(&mut out[14..16], y % 100);
    two(&mut out[17..19], hh);
    two(&mut out[20..22], mm);
    two(&mut out[23..25], ss);
    out
}

/// The current Date header value, refreshed at most once per second, plus a ready-made
/// `GET /hello` keep-alive response (the hot path is one memcpy).
pub(crate) struct DateCache {
    secs: u64,
    pub date: [u8; 29],
    pub hello: Vec<u8>,
}

impl DateCache {
    pub fn new() -> DateCache {
        let mut d = DateCache {
            secs: u64::MAX,
            date: [0; 29],
            hello: Vec::with_capacity(192),
        };
        d.refresh();
        d
    }

    /// Re-reads the wall clock; rebuilds the cached strings when the second changed.
    #[inline]
    pub fn refresh(&mut self) {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if secs != self.secs {
            self.secs = secs;
            self.date = http_date(secs);
            self.hello.clear();
            let date = self.date;
            write_head(
                &mut self.hello,
                &date,
                &Head {
                    status: 200,
                    content_type: Some("text/plain"),
                    length: Some(HELLO.len() as u64),
                    ..Head::default()
                },
            );
            self.hello.extend_from_slice(HELLO);
        }
    }
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        418 => "I'm a teapot",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Whether a status forbids a body (and a Content-Length we would have to honour).
pub(crate) fn bodiless(status: u16) -> bool {
    status == 204 || status == 304 || (100..200).contains(&status)
}

/// What goes in a response head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    pub status: u16,
    pub content_type: Option<&'static str>,
    /// `Content-Length`; `None` with `chunked` false means no length header at all.
    pub length: Option<u64>,
    pub chunked: bool,
    /// `Connection: close`.
    pub close: bool,
    /// `Connection: keep-alive` (for HTTP/1.0 clients that asked for it).
    pub keep_alive_10: bool,
}

impl Default for Head {
    fn default() -> Head {
        Head {
            status: 200,
            content_type: None,
            length: None,
            chunked: false,
            close: false,
            keep_alive_10: false,
        }
    }
}

#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

pub(crate) fn push_hex(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(format!("{v:x}").as_bytes());
}

/// Appends a status line and headers, ending with the blank line.
pub(crate) fn write_head(out: &mut Vec<u8>, date: &[u8; 29], h: &Head) {
    out.extend_from_slice(b"HTTP/1.1 ");
    push_u64(out, u64::from(h.status));
    out.push(b' ');
    out.extend_from_slice(reason(h.status).as_bytes());
    out.extend_from_slice(b"\r\nServer: ");
    out.extend_from_slice(SERVER_NAME.as_bytes());
    out.extend_from_slice(b"\r\nDate: ");
    out.extend_from_slice(date);
    out.extend_from_slice(b"\r\n");
    if let Some(ct) = h.content_type {
        out.extend_from_slice(b"Content-Type: ");
        out.extend_from_slice(ct.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if h.chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    } else if let Some(n) = h.length {
        out.extend_from_slice(b"Content-Length: ");
        push_u64(out, n);
        out.extend_from_slice(b"\r\n");
    }
    if h.close {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if h.keep_alive_10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Where a request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    Hello,
    Stats,
    NotFound,
    Misbehave(Mode),
    UnknownMode,
}

/// Query parameters the server understands; the others are ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Params {
    pub delay_ns: Option<u64>,
    pub size: Option<u64>,
    pub status: Option<u16>,
    pub interval_ns: Option<u64>,
}

/// Splits a request target into its route and parameters. An invalid parameter value gives
/// `Err(message)` naming the parameter (answered with 400).
pub(crate) fn route(target: &str) -> Result<(Route, Params), String> {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, q),
        None => (target, ""),
    };
    let route = match path {
        "/" | "/hello" => Route::Hello,
        "/__stats" => Route::Stats,
        _ => match path.strip_prefix("/misbehave/") {
            Some(name) => Mode::from_name(name.trim_end_matches('/'))
                .map_or(Route::UnknownMode, Route::Misbehave),
            None => Route::NotFound,
        },
    };
    let mut p = Params::default();
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "delay_ms" => p.delay_ns = Some(ms_param("delay_ms", v, 0.0)?),
            "interval_ms" => p.interval_ns = Some(ms_param("interval_ms", v, 0.1)?),
            "size" => {
                p.size = Some(v.parse::<u64>().map_err(|_| {
                    format!("query parameter size: expected a byte count (integer >= 0), got {v:?}")
                })?)
            }
            "status" => {
                let s = v.parse::<u16>().ok().filter(|s| (200..=599).contains(s));
                p.status = Some(s.ok_or_else(|| {
                    format!("query parameter status: expected an integer 200-599, got {v:?}")
                })?)
            }
            _ => {}
        }
    }
    Ok((route, p))
}

fn ms_param(name: &str, v: &str, min: f64) -> Result<u64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= min && x <= 3_600_000.0 => Ok((x * 1e6).round() as u64),
        _ => Err(format!(
            "query parameter {name}: expected milliseconds between {min} and 3600000, got {v:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(1_709_210_096), b"Thu, 29 Feb 2024 12:34:56 GMT");
    }

    #[test]
    fn routes_and_params() {
        assert_eq!(route("/").unwrap().0, Route::Hello);
        assert_eq!(route("/hello?x=1").unwrap().0, Route::Hello);
        assert_eq!(route("/nope").unwrap().0, Route::NotFound);
        assert_eq!(
            route("/misbehave/drip").unwrap().0,
            Route::Misbehave(Mode::Drip)
        );
        assert_eq!(route("/misbehave/what").unwrap().0, Route::UnknownMode);
        let (_, p) = route("/?delay_ms=1.5&size=10&status=503&interval_ms=2").unwrap();
        assert_eq!(p.delay_ns, Some(1_500_000));
        assert_eq!(p.size, Some(10));
        assert_eq!(p.status, Some(503));
        assert_eq!(p.interval_ns, Some(2_000_000));
        assert!(route("/?status=99").unwrap_err().contains("status"));
        assert!(route("/?size=-1").unwrap_err().contains("size"));
        assert!(route("/?delay_ms=nan").unwrap_err().contains("delay_ms"));
    }

    #[test]
    fn pattern_and_numbers() {
        assert_eq!(&PATTERN[..3], b"abc");
        assert_eq!(PATTERN[26], b'a');
        let mut v = Vec::new();
        push_u64(&mut v, 0);
        v.push(b' ');
        push_u64(&mut v, 10_000_000_000);
        assert_eq!(v, b"0 10000000000");
    }
}
