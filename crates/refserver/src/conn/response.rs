//! Responses: a complete request becomes a `Pending` response with a due time
//! (`Conn::dispatch`), and a due response is written out (`Conn::materialize`).

use std::time::{Duration, Instant};

use super::request::{Parse, Req};
use super::{Active, Conn};
use crate::config::Mode;
use crate::context::Env;
use crate::http::{bodiless, push_hex, push_u64, write_head, Head, Route, HELLO, PATTERN};
use crate::stats::C;

/// The body of a proper response.
#[derive(Debug)]
pub(crate) enum Body {
    Hello,
    Pattern(u64),
    Length(u64),
    NotFound,
    UnknownMode,
}

/// How a request will be answered.
#[derive(Debug)]
pub(crate) enum Plan {
    /// `GET /hello`, HTTP/1.1, keep-alive: the cached response.
    Hello11,
    Respond {
        status: u16,
        body: Body,
        head: bool,
        close: bool,
        ka10: bool,
        chunked: bool,
    },
    Misbehave {
        mode: Mode,
        interval: Duration,
        close: bool,
        size: Option<u64>,
    },
    Stats {
        head: bool,
        close: bool,
        ka10: bool,
    },
    /// An error answer (400, 408, 431); the connection closes after it.
    Error {
        status: u16,
        msg: String,
    },
}

/// A response waiting for its due time.
pub(crate) struct Pending {
    pub due: Instant,
    pub plan: Plan,
    /// Held back by a service delay (its lateness is recorded).
    pub delayed: bool,
}

impl Conn {
    /// Turns a complete request into a pending response.
    pub fn dispatch(&mut self, env: &mut Env, req: Req, body_len: u64, now: Instant) {
        self.req_started = None;
        self.parse = if req.keep_alive {
            Parse::Head
        } else {
            Parse::Done
        };
        if req.has_body {
            env.stats.add(C::RequestBodies, 1);
            env.stats.add(C::RequestBodyBytes, body_len);
        }
        let close = !req.keep_alive;
        let ka10 = req.http10 && req.keep_alive;
        if req.route == Route::Stats {
            env.stats.add(C::StatsRequests, 1);
            self.pending.push_back(Pending {
                due: now,
                plan: Plan::Stats {
                    head: req.head,
                    close,
                    ka10,
                },
                delayed: false,
            });
            return;
        }
        env.stats.add(C::Requests, 1);
        let mode = match req.route {
            Route::Misbehave(m) => m,
            Route::UnknownMode => Mode::Normal,
            _ => env.shared.settings.mode,
        };
        env.stats.add_mode(mode);
        let delay = match req.params.delay_ns {
            Some(ns) => Duration::from_nanos(ns),
            None => env.delay(),
        };
        let served = env.served_at(now);
        let plan = match mode {
            Mode::Normal | Mode::Chunked => {
                let (status, body) = match req.route {
                    Route::NotFound => (404, Body::NotFound),
                    Route::UnknownMode => (404, Body::UnknownMode),
                    _ => (
                        req.params.status.unwrap_or(200),
                        match req.params.size {
                            Some(n) => Body::Pattern(n),
                            None if req.has_body => Body::Length(body_len),
                            None => Body::Hello,
                        },
                    ),
                };
                env.stats.add_status(status);
                if status == 200
                    && matches!(body, Body::Hello)
                    && mode == Mode::Normal
                    && !req.head
                    && !close
                    && !req.http10
                {
                    Plan::Hello11
                } else {
                    Plan::Respond {
                        status,
                        body,
                        head: req.head,
                        close,
                        ka10,
                        chunked: mode == Mode::Chunked,
                    }
                }
            }
            m => Plan::Misbehave {
                mode: m,
                interval: req
                    .params
                    .interval_ns
                    .map_or(env.shared.settings.drip_interval, Duration::from_nanos),
                close,
                size: req.params.size,
            },
        };
        self.pending.push_back(Pending {
            due: served + delay,
            plan,
            delayed: served > now || !delay.is_zero(),
        });
    }

    /// Writes a due response into `wbuf` (and sets up any stream that follows it).
    pub fn materialize(&mut self, env: &mut Env, plan: Plan, now: Instant) {
        let date = env.date.date;
        let out = &mut self.wbuf;
        match plan {
            Plan::Hello11 => out.extend_from_slice(&env.date.hello),
            Plan::Respond {
                status,
                body,
                head,
                close,
                ka10,
                chunked,
            } => {
                let digits;
                let modes;
                let inline: Option<&[u8]> = match body {
                    Body::Hello => Some(HELLO),
                    Body::NotFound => Some(b"Not Found\n"),
                    Body::UnknownMode => {
                        modes = format!(
                            "unknown misbehaviour mode; known: {}\n",
                            Mode::ALL.map(Mode::name).join(", ")
                        );
                        Some(modes.as_bytes())
                    }
                    Body::Length(n) => {
                        let mut d = Vec::with_capacity(20);
                        push_u64(&mut d, n);
                        digits = d;
                        Some(&digits)
                    }
                    Body::Pattern(n) if n <= 16 * 1024 => Some(&PATTERN[..n as usize]),
                    Body::Pattern(_) => None,
                };
                let length = match (&body, inline) {
                    (_, Some(b)) => b.len() as u64,
                    (Body::Pattern(n), None) => *n,
                    _ => 0,
                };
                let no_body = bodiless(status);
                write_head(
                    out,
                    &date,
                    &Head {
                        status,
                        content_type: if no_body { None } else { Some("text/plain") },
                        length: if no_body { None } else { Some(length) },
                        chunked: chunked && !no_body,
                        close,
                        keep_alive_10: ka10,
                    },
                );
                if !head && !no_body {
                    match (inline, chunked) {
                        (Some(b), false) => out.extend_from_slice(b),
                        (Some(b), true) => {
                            if b == HELLO {
                                out.extend_from_slice(b"7\r\nHello, \r\n6\r\nWorld!\r\n0\r\n\r\n");
                            } else {
                                if !b.is_empty() {
                                    push_hex(out, b.len() as u64);
                                    out.extend_from_slice(b"\r\n");
                                    out.extend_from_slice(b);
                                    out.extend_from_slice(b"\r\n");
                                }
                                out.extend_from_slice(b"0\r\n\r\n");
                            }
                        }
                        (None, chunked) => {
                            self.active = Active::Pattern {
                                remaining: length,
                                phase: 0,
                                chunked,
                            }
                        }
                    }
                }
                self.close_after |= close;
            }
            Plan::Stats { head, close, ka10 } => {
                let body = serde_json::to_vec(&env.shared.stats_json()).unwrap_or_default();
                write_head(
                    out,
                    &date,
                    &Head {
                        status: 200,
                        content_type: Some("application/json"),
                        length: Some(body.len() as u64),
                        close,
                        keep_alive_10: ka10,
                        ..Head::default()
                    },
                );
                if !head {
                    out.extend_from_slice(&body);
                }
                self.close_after |= close;
            }
            Plan::Error { status, mut msg } => {
                msg.push('\n');
                write_head(
                    out,
                    &date,
                    &Head {
                        status,
                        content_type: Some("text/plain"),
                        length: Some(msg.len() as u64),
                        close: true,
                        ..Head::default()
                    },
                );
                out.extend_from_slice(msg.as_bytes());
                self.close_after = true;
            }
            Plan::Misbehave {
                mode,
                interval,
                close,
                size,
            } => {
                self.misbehave(env, mode, interval, close, size, now);
            }
        }
    }
}
