//! Incremental parsing of the frames a server sends on an h2c connection.
//!
//! `FrameParser::step` takes received bytes and returns how many it used and at most one
//! event; the caller calls it again on the rest. DATA payloads stream through as slices of
//! the caller's bytes; other frames are buffered (at most `MAX_FRAME` bytes, and a header
//! block at most `MAX_BLOCK` across CONTINUATION frames). Any violation of the framing
//! rules is a connection error (`h2_protocol_error`); a first reply that is not HTTP/2 at
//! all is `h2_not_spoken`.

use super::*;
use httlib_hpack::Decoder;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Decoded header fields: name, value, flags (httlib's form).
type Fields = Vec<(Vec<u8>, Vec<u8>, u8)>;

/// Largest response header block (HEADERS and its CONTINUATION frames) accepted.
pub const MAX_BLOCK: usize = 256 * 1024;

/// What a step of the parser found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'d> {
    /// The server's SETTINGS (not an acknowledgement): to be acknowledged. Its
    /// SETTINGS_MAX_CONCURRENT_STREAMS, if it set one.
    Settings { max_streams: Option<u32> },
    /// A complete header block on `stream`: its `:status` (0 when it has none: trailers).
    Headers {
        stream: u32,
        status: u16,
        end_stream: bool,
    },
    /// Part of a DATA frame on `stream`: `body` bytes of it, `flow` bytes counted against the
    /// receive windows (padding included); `end_stream` on the part that ends the frame.
    Data {
        stream: u32,
        body: &'d [u8],
        flow: u32,
        end_stream: bool,
    },
    /// The server reset `stream` with error `code`.
    Reset { stream: u32, code: u32 },
    /// The server is closing the connection: streams above `last` were not processed.
    GoAway { last: u32, code: u32, debug: String },
    /// A PING to answer.
    Ping { opaque: [u8; 8] },
}

/// Bytes used and the event found (if any).
#[derive(Debug, PartialEq, Eq)]
pub struct Step<'d> {
    pub consumed: usize,
    pub event: Option<Event<'d>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a 9-byte frame header.
    Head,
    /// Buffering the payload of a non-DATA frame.
    Payload {
        kind: u8,
        flags: u8,
        stream: u32,
        len: usize,
    },
    /// Streaming a DATA payload: the pad-length byte (if `pad_pending`), then `left` body
    /// bytes, then `pad` padding bytes.
    Data {
        stream: u32,
        end: bool,
        pad_pending: bool,
        len: usize,
        left: usize,
        pad: usize,
    },
}

/// The per-connection parser of server frames, with the connection's HPACK decoder.
pub struct FrameParser {
    state: State,
    head: [u8; 9],
    got: usize,
    buf: Vec<u8>,
    block: Vec<u8>,
    /// A header block continues on this stream (END_STREAM of its HEADERS frame).
    cont: Option<(u32, bool)>,
    decoder: Decoder<'static>,
    /// The decoded fields of the last header block (reused).
    fields: Fields,
    /// The HPACK decoder failed half-way: its table can no longer be trusted.
    poisoned: bool,
    /// The server set the dynamic table to 0 bytes (a size update to 0, none larger since):
    /// a header block decodes the same whatever came before it.
    table_zero: bool,
    /// While `table_zero`: the last block decoded and its `:status` (None: nothing cached).
    cached: Vec<u8>,
    cached_status: Option<u16>,
    /// A first frame was seen (it must be SETTINGS: the server's preface).
    started: bool,
}

impl Default for FrameParser {
    fn default() -> Self {
        Self::new()
    }
}

fn protocol(msg: impl Into<String>) -> H2Error {
    (ErrorClass::H2ProtocolError, msg.into())
}

impl FrameParser {
    /// A parser at the start of a connection.
    pub fn new() -> FrameParser {
        FrameParser {
            state: State::Head,
            head: [0; 9],
            got: 0,
            buf: Vec::new(),
            block: Vec::new(),
            cont: None,
            decoder: Decoder::default(),
            fields: Vec::with_capacity(16),
            poisoned: false,
            table_zero: false,
            cached: Vec::new(),
            cached_status: None,
            started: false,
        }
    }

    /// Start over, for a new connection (a fresh HPACK table too).
    pub fn reset(&mut self) {
        self.state = State::Head;
        self.got = 0;
        self.buf.clear();
        self.block.clear();
        if self.block.capacity() > 4 * MAX_FRAME {
            self.block = Vec::new();
        }
        self.cont = None;
        self.decoder = Decoder::default();
        self.fields.clear();
        self.poisoned = false;
        self.table_zero = false;
        self.cached_status = None;
        self.started = false;
    }

    /// Bytes held by the parser's own buffers (for memory bounds in tests).
    pub fn buffered(&self) -> usize {
        self.buf.capacity() + self.block.capacity()
    }

    /// A first frame arrived (the server speaks HTTP/2 framing, at least).
    pub fn started(&self) -> bool {
        self.started
    }

    /// True between frames (a connection that ends here ended cleanly, framing-wise).
    pub fn at_frame_boundary(&self) -> bool {
        self.state == State::Head && self.got == 0 && self.cont.is_none()
    }

    /// Parse from the start of `data`: the bytes used and at most one event.
    pub fn step<'d>(&mut self, data: &'d [u8]) -> Result<Step<'d>, H2Error> {
        match self.state {
            State::Head => self.head_step(data),
            State::Payload {
                kind,
                flags,
                stream,
                len,
            } => {
                let take = (len - self.buf.len()).min(data.len());
                self.buf.extend_from_slice(&data[..take]);
                if self.buf.len() < len {
                    return Ok(Step {
                        consumed: take,
                        event: None,
                    });
                }
                self.state = State::Head;
                let event = self.frame(kind, flags, stream)?;
                Ok(Step {
                    consumed: take,
                    event,
                })
            }
            State::Data { .. } => Ok(self.data_step(data)?),
        }
    }

    fn head_step<'d>(&mut self, data: &'d [u8]) -> Result<Step<'d>, H2Error> {
        let take = (9 - self.got).min(data.len());
        self.head[self.got..self.got + take].copy_from_slice(&data[..take]);
        self.got += take;
        if self.got < 9 {
            return Ok(Step {
                consumed: take,
                event: None,
            });
        }
        self.got = 0;
        let h = self.head;
        let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
        let (kind, flags) = (h[3], h[4]);
        let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_STREAM_ID;
        if !self.started {
            self.started = true;
            if h.starts_with(b"HTTP/") {
                let mut line = h.to_vec();
                line.extend_from_slice(&data[take..data.len().min(take + 60)]);
                let line = String::from_utf8_lossy(&line);
                let line = line.split(['\r', '\n']).next().unwrap_or_default();
                return Err((
                    ErrorClass::H2NotSpoken,
                    format!("server did not speak h2c: answered HTTP/1.x ({line:?})"),
                ));
            }
            if kind != SETTINGS || flags & FLAG_ACK != 0 {
                return Err((
                    ErrorClass::H2NotSpoken,
                    format!(
                        "server did not speak h2c: its first frame is not SETTINGS \
                         (bytes {:02x?})",
                        h
                    ),
                ));
            }
        }
        if len > MAX_FRAME {
            return Err(protocol(format!(
                "frame of {len} bytes (type {kind}) over the {MAX_FRAME}-byte maximum"
            )));
        }
        if let Some((s, _)) = self.cont {
            if kind != CONTINUATION || stream != s {
                return Err(protocol(format!(
                    "frame type {kind} on stream {stream} inside a header block of stream {s}"
                )));
            }
        }
        if kind == DATA {
            if stream == 0 {
                return Err(protocol("DATA on stream 0"));
            }
            let pad_pending = flags & FLAG_PADDED != 0;
            if pad_pending && len == 0 {
                return Err(protocol("padded DATA frame without a pad length"));
            }
            self.state = State::Data {
                stream,
                end: flags & FLAG_END_STREAM != 0,
                pad_pending,
                len,
                left: len,
                pad: 0,
            };
            if len == 0 {
                let step = self.data_step(&[])?;
                return Ok(Step {
                    consumed: take,
                    event: step.event,
                });
            }
            return Ok(Step {
                consumed: take,
                event: None,
            });
        }
        self.buf.clear();
        if len == 0 {
            let event = self.frame(kind, flags, stream)?;
            return Ok(Step {
                consumed: take,
                event,
            });
        }
        self.state = State::Payload {
            kind,
            flags,
            stream,
            len,
        };
        Ok(Step {
            consumed: take,
            event: None,
        })
    }

    fn data_step<'d>(&mut self, data: &'d [u8]) -> Result<Step<'d>, H2Error> {
        let State::Data {
            stream,
            end,
            mut pad_pending,
            len,
            mut left,
            mut pad,
        } = self.state
        else {
            unreachable!("data_step outside a DATA frame");
        };
        let mut off = 0;
        if pad_pending {
            let Some(&p) = data.first() else {
                return Ok(Step {
                    consumed: 0,
                    event: None,
                });
            };
            pad = p as usize;
            if pad >= len {
                return Err(protocol(format!(
                    "DATA padding of {pad} bytes in a {len}-byte frame"
                )));
            }
            pad_pending = false;
            left = len - 1 - pad;
            off = 1;
        }
        let body_n = left.min(data.len() - off);
        let body = &data[off..off + body_n];
        off += body_n;
        left -= body_n;
        let pad_n = if left == 0 {
            pad.min(data.len() - off)
        } else {
            0
        };
        off += pad_n;
        pad -= pad_n;
        let done = left == 0 && pad == 0 && !pad_pending;
        self.state = if done {
            State::Head
        } else {
            State::Data {
                stream,
                end,
                pad_pending,
                len,
                left,
                pad,
            }
        };
        Ok(Step {
            consumed: off,
            event: Some(Event::Data {
                stream,
                body,
                flow: off as u32,
                end_stream: done && end,
            }),
        })
    }

    /// A whole non-DATA frame is in `buf`.
    fn frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
    ) -> Result<Option<Event<'static>>, H2Error> {
        let p = &self.buf[..];
        let len = p.len();
        let need_stream0 = |zero: bool| -> Result<(), H2Error> {
            match (zero, stream == 0) {
                (true, false) => Err(protocol(format!("frame type {kind} on stream {stream}"))),
                (false, true) => Err(protocol(format!("frame type {kind} on stream 0"))),
                _ => Ok(()),
            }
        };
        let exact = |n: usize| -> Result<(), H2Error> {
            match len == n {
                true => Ok(()),
                false => Err(protocol(format!(
                    "frame type {kind} of {len} bytes (expected {n})"
                ))),
            }
        };
        match kind {
            HEADERS => {
                need_stream0(false)?;
                let mut p = p;
                if flags & FLAG_PADDED != 0 {
                    let pad = *p.first().unwrap_or(&0) as usize;
                    if p.is_empty() || pad >= p.len() {
                        return Err(protocol("HEADERS padding longer than the frame"));
                    }
                    p = &p[1..p.len() - pad];
                }
                if flags & FLAG_PRIORITY != 0 {
                    if p.len() < 5 {
                        return Err(protocol("HEADERS priority fields cut short"));
                    }
                    p = &p[5..];
                }
                self.block.clear();
                self.block.extend_from_slice(p);
                let end_stream = flags & FLAG_END_STREAM != 0;
                if flags & FLAG_END_HEADERS != 0 {
                    return self.decode(stream, end_stream).map(Some);
                }
                self.cont = Some((stream, end_stream));
                Ok(None)
            }
            CONTINUATION => {
                let Some((s, end_stream)) = self.cont else {
                    return Err(protocol("CONTINUATION without a header block"));
                };
                if self.block.len() + len > MAX_BLOCK {
                    return Err(protocol(format!(
                        "response header block over {MAX_BLOCK} bytes"
                    )));
                }
                self.block.extend_from_slice(p);
                if flags & FLAG_END_HEADERS != 0 {
                    self.cont = None;
                    return self.decode(s, end_stream).map(Some);
                }
                Ok(None)
            }
            SETTINGS => {
                need_stream0(true)?;
                if flags & FLAG_ACK != 0 {
                    exact(0)?;
                    return Ok(None);
                }
                if !len.is_multiple_of(6) {
                    return Err(protocol(format!("SETTINGS of {len} bytes")));
                }
                let mut max_streams = None;
                for e in p.chunks_exact(6) {
                    let id = u16::from_be_bytes([e[0], e[1]]);
                    let v = u32::from_be_bytes([e[2], e[3], e[4], e[5]]);
                    if id == SETTINGS_MAX_CONCURRENT_STREAMS {
                        max_streams = Some(v);
                    }
                }
                Ok(Some(Event::Settings { max_streams }))
            }
            PING => {
                need_stream0(true)?;
                exact(8)?;
                if flags & FLAG_ACK != 0 {
                    return Ok(None);
                }
                let mut opaque = [0u8; 8];
                opaque.copy_from_slice(p);
                Ok(Some(Event::Ping { opaque }))
            }
            GOAWAY => {
                need_stream0(true)?;
                if len < 8 {
                    return Err(protocol(format!("GOAWAY of {len} bytes")));
                }
                let last = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_STREAM_ID;
                let code = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
                let debug = String::from_utf8_lossy(&p[8..len.min(8 + 200)]).into_owned();
                Ok(Some(Event::GoAway { last, code, debug }))
            }
            RST_STREAM => {
                need_stream0(false)?;
                exact(4)?;
                let code = u32::from_be_bytes([p[0], p[1], p[2], p[3]]);
                Ok(Some(Event::Reset { stream, code }))
            }
            WINDOW_UPDATE => exact(4).map(|_| None),
            PRIORITY => {
                need_stream0(false)?;
                exact(5).map(|_| None)
            }
            PUSH_PROMISE => Err(protocol("PUSH_PROMISE although push is disabled")),
            _ => Ok(None), // unknown frame types are ignored (RFC 9113 4.1)
        }
    }

    /// Decode the header block of `stream` for its `:status` (the block is used up).
    fn decode(&mut self, stream: u32, end_stream: bool) -> Result<Event<'static>, H2Error> {
        if self.poisoned {
            return Err(protocol("HPACK decoder unusable after an earlier error"));
        }
        self.fields.clear();
        let Some(size_update) = walk(&self.block) else {
            self.poisoned = true;
            return Err(protocol(format!(
                "HPACK decoding of stream {stream}'s headers: truncated or malformed block"
            )));
        };
        if let (true, None, Some(status)) = (self.table_zero, size_update, self.cached_status) {
            if self.block == self.cached {
                // No dynamic table: the same bytes decode to the same fields.
                self.block.clear();
                return Ok(Event::Headers {
                    stream,
                    status,
                    end_stream,
                });
            }
        }
        let zero_after = size_update.map_or(self.table_zero, |size| size == 0);
        if zero_after {
            self.cached.clear();
            self.cached.extend_from_slice(&self.block);
        }
        self.cached_status = None;
        let (decoder, block, fields) = (&mut self.decoder, &mut self.block, &mut self.fields);
        // httlib indexes past the end of truncated blocks instead of failing: `walk`
        // refuses those first; a panic left is a malformed block like any other.
        let decoded = catch_unwind(AssertUnwindSafe(|| decoder.decode(block, fields)));
        let failed = match decoded {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("{e:?}")),
            Err(_) => Some("malformed block".to_string()),
        };
        if let Some(why) = failed {
            self.poisoned = true;
            return Err(protocol(format!(
                "HPACK decoding of stream {stream}'s headers: {why}"
            )));
        }
        let status = match self.fields.iter().find(|f| f.0 == b":status") {
            None => 0,
            Some((_, v, _)) => std::str::from_utf8(v)
                .ok()
                .filter(|s| s.len() == 3 && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u16>().ok())
                .filter(|s| *s >= 100)
                .ok_or_else(|| {
                    protocol(format!(
                        "invalid :status {:?} on stream {stream}",
                        String::from_utf8_lossy(v)
                    ))
                })?,
        };
        self.table_zero = zero_after;
        if zero_after {
            self.cached_status = Some(status);
        }
        Ok(Event::Headers {
            stream,
            status,
            end_stream,
        })
    }
}

/// An HPACK integer with an `n`-bit prefix at the start of `b`: its value and length, if
/// complete within the 5 bytes httlib accepts.
fn hpack_int(b: &[u8], n: u8) -> Option<(usize, usize)> {
    let max = (1usize << n) - 1;
    let mut v = (*b.first()? as usize) & max;
    if v < max {
        return Some((v, 1));
    }
    for (k, &byte) in b.iter().enumerate().skip(1).take(4) {
        v += ((byte & 0x7f) as usize) << (7 * (k - 1));
        if byte & 0x80 == 0 {
            return Some((v, k + 1));
        }
    }
    None
}

/// Walk the structure of a header block: None unless it is whole (every integer and string
/// literal complete: what httlib's decoder assumes without checking), else the last dynamic
/// table size update in it (Some(None): none). Values are not decoded here.
fn walk(block: &[u8]) -> Option<Option<usize>> {
    let string = |at: usize| -> Option<usize> {
        let (len, n) = hpack_int(block.get(at..)?, 7)?;
        (at + n + len <= block.len()).then_some(at + n + len)
    };
    let mut at = 0;
    let mut size_update = None;
    while at < block.len() {
        let b = block[at];
        let (prefix, literal) = match b {
            _ if b & 0x80 != 0 => (7, false),
            _ if b & 0xc0 == 0x40 => (6, true),
            _ if b & 0xe0 == 0x20 => (5, false),
            _ => (4, true),
        };
        let (index, n) = hpack_int(&block[at..], prefix)?;
        at += n;
        if prefix == 5 {
            size_update = Some(index);
        }
        if literal {
            if index == 0 {
                at = string(at)?;
            }
            at = string(at)?;
        }
    }
    Some(size_update)
}
