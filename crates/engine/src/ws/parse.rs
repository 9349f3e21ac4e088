//! Incremental parsing of the frames a server sends on a WebSocket connection.
//!
//! `FrameParser::step` takes received bytes and returns how many it used and at most one
//! event; the caller calls it again on the rest. Message payloads (text, binary and their
//! continuation frames) stream through as slices of the caller's bytes; control frames
//! (ping, pong, close: at most 125 bytes) are gathered in a fixed buffer. Nothing is
//! allocated, except the reason text of a close. Any violation of the framing rules
//! (a masked server frame, reserved bits without an extension, an unknown opcode, a
//! fragmented or long control frame, a continuation with no message begun or a new message
//! inside one, a length not in its shortest form, a message over `MAX_MESSAGE`) is
//! `ws_protocol_error`.

use super::*;

/// What a step of the parser found.
#[derive(Debug, PartialEq, Eq)]
pub enum Event<'d> {
    /// Part of a message: `payload` bytes of it; `end` on the part that ends the message
    /// (its last frame's last byte; a message of 0 bytes is one event with `end`).
    Data { payload: &'d [u8], end: bool },
    /// A ping: to be answered with a pong carrying the same payload.
    Ping { payload: [u8; MAX_CONTROL], len: u8 },
    /// The server closes the connection: its status code (None: none given) and reason.
    Close { code: Option<u16>, reason: String },
}

/// Bytes used and the event found (if any).
#[derive(Debug, PartialEq, Eq)]
pub struct Step<'d> {
    pub consumed: usize,
    pub event: Option<Event<'d>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading a frame header (2 bytes, then 0, 2 or 8 of extended length).
    Head,
    /// Streaming `left` bytes of a data frame; `fin` ends the message.
    Data { left: u64, fin: bool },
    /// Gathering a control frame of `len` bytes.
    Control { opcode: u8, len: usize },
}

/// The per-connection parser of server frames.
#[derive(Debug)]
pub struct FrameParser {
    state: State,
    head: [u8; 10],
    got: usize,
    ctl: [u8; MAX_CONTROL],
    ctl_got: usize,
    /// A message has begun and not ended (fragmented): continuations are expected.
    in_message: bool,
    /// Bytes of the current message so far (all its frames).
    message_len: u64,
}

impl Default for FrameParser {
    fn default() -> Self {
        Self::new()
    }
}

fn protocol(msg: impl Into<String>) -> WsError {
    (ErrorClass::WsProtocolError, msg.into())
}

impl FrameParser {
    pub fn new() -> FrameParser {
        FrameParser {
            state: State::Head,
            head: [0; 10],
            got: 0,
            ctl: [0; MAX_CONTROL],
            ctl_got: 0,
            in_message: false,
            message_len: 0,
        }
    }

    /// Start over, for a new connection.
    pub fn reset(&mut self) {
        *self = FrameParser::new();
    }

    /// A frame (or a fragmented message) is part-way through: the connection ending now
    /// ends it mid-frame.
    pub fn mid_frame(&self) -> bool {
        self.state != State::Head || self.got > 0 || self.in_message
    }

    /// Bytes buffered (a partial header and a partial control frame): at most 135.
    pub fn buffered(&self) -> usize {
        self.got + self.ctl_got
    }

    /// Parse from `data`: the bytes used (at least one, when `data` is not empty) and the
    /// event they completed, if any.
    pub fn step<'d>(&mut self, data: &'d [u8]) -> Result<Step<'d>, WsError> {
        match self.state {
            State::Head => self.step_head(data),
            State::Data { left, fin } => {
                let n = (data.len() as u64).min(left) as usize;
                let left = left - n as u64;
                let end = fin && left == 0;
                self.state = if left == 0 {
                    State::Head
                } else {
                    State::Data { left, fin }
                };
                if end {
                    self.in_message = false;
                }
                Ok(Step {
                    consumed: n,
                    event: Some(Event::Data {
                        payload: &data[..n],
                        end,
                    }),
                })
            }
            State::Control { opcode, len } => {
                let n = data.len().min(len - self.ctl_got);
                self.ctl[self.ctl_got..self.ctl_got + n].copy_from_slice(&data[..n]);
                self.ctl_got += n;
                let event = if self.ctl_got == len {
                    self.control_done(opcode, len)?
                } else {
                    None
                };
                Ok(Step { consumed: n, event })
            }
        }
    }

    fn step_head<'d>(&mut self, data: &'d [u8]) -> Result<Step<'d>, WsError> {
        let mut used = 0;
        // First the 2 fixed bytes, then the extended length they announce.
        while used < data.len() {
            let need = if self.got < 2 {
                2
            } else {
                match self.head[1] & 0x7f {
                    126 => 4,
                    127 => 10,
                    _ => 2,
                }
            };
            if self.got == 2 {
                self.check_first_two()?;
            }
            if self.got >= need {
                break;
            }
            let n = (need - self.got).min(data.len() - used);
            self.head[self.got..self.got + n].copy_from_slice(&data[used..used + n]);
            self.got += n;
            used += n;
        }
        if self.got < 2 {
            return Ok(Step {
                consumed: used,
                event: None,
            });
        }
        self.check_first_two()?;
        let len7 = self.head[1] & 0x7f;
        let need = match len7 {
            126 => 4,
            127 => 10,
            _ => 2,
        };
        if self.got < need {
            return Ok(Step {
                consumed: used,
                event: None,
            });
        }
        let len = match len7 {
            126 => {
                let l = u16::from_be_bytes([self.head[2], self.head[3]]) as u64;
                if l < 126 {
                    return Err(protocol(format!(
                        "frame length {l} in the 16-bit form (must use the shortest)"
                    )));
                }
                l
            }
            127 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&self.head[2..10]);
                let l = u64::from_be_bytes(b);
                if l >> 63 != 0 {
                    return Err(protocol("frame length with its most significant bit set"));
                }
                if l <= u16::MAX as u64 {
                    return Err(protocol(format!(
                        "frame length {l} in the 64-bit form (must use the shortest)"
                    )));
                }
                l
            }
            l => l as u64,
        };
        let fin = self.head[0] & 0x80 != 0;
        let opcode = self.head[0] & 0x0f;
        self.got = 0;
        if opcode >= 0x8 {
            let len = len as usize; // checked <= 125 in check_first_two
            self.ctl_got = 0;
            if len == 0 {
                let event = self.control_done(opcode, 0)?;
                return Ok(Step {
                    consumed: used,
                    event,
                });
            }
            self.state = State::Control { opcode, len };
            return Ok(Step {
                consumed: used,
                event: None,
            });
        }
        if opcode == OP_CONTINUATION {
            self.message_len += len;
        } else {
            self.message_len = len;
        }
        if self.message_len > MAX_MESSAGE {
            return Err(protocol(format!(
                "a message of over {MAX_MESSAGE} bytes ({} so far)",
                self.message_len
            )));
        }
        self.in_message = !fin;
        if len == 0 {
            // An empty frame: an empty message, or an empty fragment of one.
            return Ok(Step {
                consumed: used,
                event: fin.then_some(Event::Data {
                    payload: &[],
                    end: true,
                }),
            });
        }
        self.state = State::Data { left: len, fin };
        Ok(Step {
            consumed: used,
            event: None,
        })
    }

    /// The rules the first two header bytes alone can break.
    fn check_first_two(&self) -> Result<(), WsError> {
        let (b0, b1) = (self.head[0], self.head[1]);
        if b0 & 0x70 != 0 {
            return Err(protocol(format!(
                "reserved bits set (0x{:x}) with no extension negotiated",
                b0 & 0x70
            )));
        }
        if b1 & 0x80 != 0 {
            return Err(protocol("a masked frame from the server"));
        }
        let opcode = b0 & 0x0f;
        let fin = b0 & 0x80 != 0;
        match opcode {
            OP_CONTINUATION if !self.in_message => {
                Err(protocol("a continuation frame with no message begun"))
            }
            OP_TEXT | OP_BINARY if self.in_message => {
                Err(protocol("a new message before the fragmented one ended"))
            }
            OP_CONTINUATION | OP_TEXT | OP_BINARY => Ok(()),
            OP_CLOSE | OP_PING | OP_PONG if !fin => Err(protocol("a fragmented control frame")),
            OP_CLOSE | OP_PING | OP_PONG if (b1 & 0x7f) as usize > MAX_CONTROL => Err(protocol(
                format!("a control frame of over {MAX_CONTROL} bytes"),
            )),
            OP_CLOSE | OP_PING | OP_PONG => Ok(()),
            op => Err(protocol(format!("unknown opcode 0x{op:x}"))),
        }
    }

    /// A control frame of `len` bytes (in `ctl`) is complete.
    fn control_done(&mut self, opcode: u8, len: usize) -> Result<Option<Event<'static>>, WsError> {
        self.state = State::Head;
        self.ctl_got = 0;
        match opcode {
            OP_PING => Ok(Some(Event::Ping {
                payload: self.ctl,
                len: len as u8,
            })),
            OP_PONG => Ok(None),
            _ => {
                if len == 1 {
                    return Err(protocol("a close frame with a 1-byte payload"));
                }
                let code = (len >= 2).then(|| u16::from_be_bytes([self.ctl[0], self.ctl[1]]));
                let reason = String::from_utf8_lossy(&self.ctl[len.min(2)..len]).into_owned();
                Ok(Some(Event::Close { code, reason }))
            }
        }
    }
}
