//! The misbehaviour modes: what a connection writes (or does not) instead of a proper
//! response, for a load generator to classify.

use std::time::{Duration, Instant};

use super::request::Parse;
use super::{Active, Conn};
use crate::config::Mode;
use crate::context::Env;
use crate::http::{write_head, Head, HELLO, PATTERN, SERVER_NAME};

/// `Content-Length` of the `huge-body` misbehaviour (10 GB).
pub(crate) const HUGE_BODY: u64 = 10_000_000_000;
/// Bytes of header lines sent per tick in `endless-headers`.
pub(crate) const ENDLESS_BATCH: usize = 4096;

impl Conn {
    /// Writes the start of misbehaviour `mode` and sets up the stream that follows it.
    pub fn misbehave(
        &mut self,
        env: &mut Env,
        mode: Mode,
        interval: Duration,
        close: bool,
        size: Option<u64>,
        now: Instant,
    ) {
        let date = env.date.date;
        let out = &mut self.wbuf;
        let plain = |status, length, close| Head {
            status,
            content_type: Some("text/plain"),
            length,
            close,
            ..Head::default()
        };
        match mode {
            Mode::Normal | Mode::Chunked => {}
            Mode::CloseMidResponse => {
                let total = size.unwrap_or(1000).max(2);
                write_head(out, &date, &plain(200, Some(total), false));
                let part = (total / 2).min(64 * 1024) as usize;
                out.extend_from_slice(&PATTERN[..part]);
                self.active = Active::Close;
            }
            Mode::GarbageStatus => {
                out.extend_from_slice(b"HTTP/1.1 TWO-HUNDRED OK\r\nServer: ");
                out.extend_from_slice(SERVER_NAME.as_bytes());
                out.extend_from_slice(b"\r\nContent-Length: 13\r\n\r\nHello, World!");
                self.active = Active::Close;
            }
            Mode::EndlessHeaders => {
                out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: ");
                out.extend_from_slice(SERVER_NAME.as_bytes());
                out.extend_from_slice(b"\r\nDate: ");
                out.extend_from_slice(&date);
                out.extend_from_slice(b"\r\n");
                self.active = Active::Endless {
                    interval,
                    next: now,
                    n: 0,
                };
            }
            Mode::HugeBody => {
                write_head(
                    out,
                    &date,
                    &Head {
                        content_type: Some("application/octet-stream"),
                        ..plain(200, Some(HUGE_BODY), close)
                    },
                );
                self.active = Active::Pattern {
                    remaining: HUGE_BODY,
                    phase: 0,
                    chunked: false,
                };
                self.close_after |= close;
            }
            Mode::Drip => {
                let mut data = Vec::with_capacity(192);
                write_head(
                    &mut data,
                    &date,
                    &plain(200, Some(HELLO.len() as u64), close),
                );
                data.extend_from_slice(HELLO);
                self.active = Active::Drip {
                    data: data.into_boxed_slice(),
                    pos: 0,
                    interval,
                    next: now,
                };
                self.close_after |= close;
            }
            Mode::Reset => self.active = Active::Reset,
            Mode::BadChunked => {
                write_head(
                    out,
                    &date,
                    &Head {
                        chunked: true,
                        ..plain(200, None, false)
                    },
                );
                out.extend_from_slice(b"zz\r\nHello, World!\r\n0\r\n\r\n");
                self.active = Active::Close;
            }
            Mode::NoResponse => {
                self.active = Active::Hang;
                self.parse = Parse::Done;
                self.req_started = None;
            }
            Mode::CloseBeforeResponse => self.active = Active::Close,
        }
    }
}
