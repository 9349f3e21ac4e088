//! Property-based fuzzing of the WebSocket frame parser and the handshake answer parser
//! (proptest), as for the HTTP/1.1 and HTTP/2 parsers (parser_props.rs, h2_props.rs): no
//! panic on any bytes; the parser's buffers stay within their limits; a stream of frames fed
//! in pieces (split at every byte boundary, or at random points) gives exactly what it gives
//! whole, valid or hostile (edited, junk appended) or plain junk; generated server streams
//! (messages of random sizes in every length form, cut into fragments with pings and pongs
//! between them, a close at the end) parse to what was generated; any bytes are at worst a
//! `ws_protocol_error`; and the handshake answer, cut anywhere, completes at the same byte
//! or fails with the same class.
//!
//! Cases per property: `PWB_FUZZ_CASES` (default: a few hundred, for CI);
//! `benchmarks/fuzz_parsers.py` runs millions.

#[macro_use]
mod fuzz;

use fuzz::{config, cut, cuts, edits, fill, junk, mutate};
use proptest::prelude::*;
use pywebbench_engine::ws::{
    accept_for, Event, FrameParser, Handshake, HandshakeFeed, KEY, MAX_CONTROL, OP_BINARY,
    OP_CLOSE, OP_CONTINUATION, OP_PING, OP_PONG, OP_TEXT,
};
use pywebbench_engine::ErrorClass;

/// A partial header (10 bytes) and a partial control frame.
const MAX_BUFFERED: usize = 10 + MAX_CONTROL;

/// Everything the parser made of a stream, independent of how it was cut.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    events: Vec<String>,
    /// The first error, if any.
    end: Result<(), ErrorClass>,
}

fn drive<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> (Outcome, usize) {
    let mut p = FrameParser::new();
    let mut events = Vec::new();
    let mut msg = Vec::new();
    let mut most = 0;
    for piece in pieces {
        let mut off = 0;
        while off < piece.len() {
            let step = match p.step(&piece[off..]) {
                Ok(s) => s,
                Err((class, _)) => {
                    let out = Outcome {
                        events,
                        end: Err(class),
                    };
                    return (out, most.max(p.buffered()));
                }
            };
            assert!(step.consumed > 0 || step.event.is_some(), "no progress");
            off += step.consumed;
            most = most.max(p.buffered());
            match step.event {
                Some(Event::Data { payload, end }) => {
                    msg.extend_from_slice(payload);
                    if end {
                        events.push(message_event(&msg));
                        msg.clear();
                    }
                }
                Some(Event::Ping { payload, len }) => {
                    events.push(format!("ping {:?}", &payload[..len as usize]))
                }
                Some(Event::Close { code, reason }) => {
                    events.push(format!("close {code:?} {reason:?}"))
                }
                None => {}
            }
        }
    }
    let out = Outcome {
        events,
        end: Ok(()),
    };
    (out, most)
}

/// A message as an event: its length and a digest of its bytes (messages can be large).
fn message_event(msg: &[u8]) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for &b in msg {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    format!("message {} {h:016x}", msg.len())
}

fn whole(data: &[u8]) -> Outcome {
    let (out, most) = drive([data]);
    assert!(most <= MAX_BUFFERED, "buffered {most}");
    out
}

fn split(data: &[u8], cuts: &[usize]) -> Outcome {
    let (out, most) = drive(cut(data, cuts));
    assert!(most <= MAX_BUFFERED, "buffered {most}");
    out
}

/// A server frame (unmasked), in the shortest length form.
fn frame(out: &mut Vec<u8>, fin: bool, opcode: u8, payload: &[u8]) {
    out.push(if fin { 0x80 } else { 0 } | opcode);
    let len = payload.len();
    if len < 126 {
        out.push(len as u8);
    } else if len <= 0xffff {
        out.push(126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(payload);
}

/// One generated message.
#[derive(Debug, Clone)]
struct Msg {
    text: bool,
    body: Vec<u8>,
    /// Sizes of its fragments (the last takes the rest).
    frags: Vec<usize>,
    /// Control frames before each fragment: 0 none, 1 ping, 2 pong.
    controls: Vec<(u8, Vec<u8>)>,
}

/// A generated server stream: messages, then maybe a close.
#[derive(Debug, Clone)]
struct Convo {
    msgs: Vec<Msg>,
    close: Option<(u16, String)>,
}

fn msg() -> impl Strategy<Value = Msg> {
    // Mostly short bodies; now and then one in the 16-bit or 64-bit length form.
    let len = prop_oneof![
        8 => 0usize..200,
        2 => 126usize..2000,
        1 => 65_536usize..70_000,
    ];
    let control = (0u8..3, 0usize..=MAX_CONTROL, any::<u64>())
        .prop_map(|(kind, n, seed)| (kind, fill(seed, n, &[])));
    (
        any::<bool>(),
        len,
        any::<u64>(),
        proptest::collection::vec(0usize..300, 0..4),
        proptest::collection::vec(control, 0..4),
    )
        .prop_map(|(text, len, seed, frags, controls)| Msg {
            text,
            body: fill(seed, len, &[]),
            frags,
            controls,
        })
}

fn pipeline() -> impl Strategy<Value = Convo> {
    let close = proptest::option::of((1000u16..5000, "[a-z ]{0,20}"));
    (proptest::collection::vec(msg(), 1..5), close).prop_map(|(msgs, close)| Convo { msgs, close })
}

fn concat(c: &Convo) -> Vec<u8> {
    let mut out = Vec::new();
    for m in &c.msgs {
        let mut at = 0;
        let n = m.frags.len() + 1;
        for k in 0..n {
            if let Some((kind, p)) = m.controls.get(k) {
                match kind {
                    1 => frame(&mut out, true, OP_PING, p),
                    2 => frame(&mut out, true, OP_PONG, p),
                    _ => {}
                }
            }
            let size = match m.frags.get(k) {
                Some(&s) => s.min(m.body.len() - at),
                None => m.body.len() - at,
            };
            let op = match (k, m.text) {
                (0, true) => OP_TEXT,
                (0, false) => OP_BINARY,
                _ => OP_CONTINUATION,
            };
            frame(&mut out, k == n - 1, op, &m.body[at..at + size]);
            at += size;
        }
    }
    if let Some((code, reason)) = &c.close {
        let p = [&code.to_be_bytes()[..], reason.as_bytes()].concat();
        frame(&mut out, true, OP_CLOSE, &p);
    }
    out
}

fn expected_outcome(c: &Convo) -> Outcome {
    let mut events = Vec::new();
    for m in &c.msgs {
        let n = m.frags.len() + 1;
        for k in 0..n {
            if let Some((1, p)) = m.controls.get(k) {
                events.push(format!("ping {:?}", &p[..]));
            }
        }
        events.push(message_event(&m.body));
    }
    if let Some((code, reason)) = &c.close {
        events.push(format!("close {:?} {reason:?}", Some(*code)));
    }
    Outcome {
        events,
        end: Ok(()),
    }
}

split_properties!(400);

/// What the handshake parser made of `pieces`: the offset its answer ended at in the whole
/// stream, or its error class.
fn handshake<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Result<Option<usize>, ErrorClass> {
    let accept = accept_for(KEY);
    let mut h = Handshake::new();
    let mut fed = 0;
    for piece in pieces {
        match h.feed(piece, &accept) {
            Ok(HandshakeFeed::NeedMore) => fed += piece.len(),
            Ok(HandshakeFeed::Done { consumed }) => return Ok(Some(fed + consumed)),
            Err((class, _)) => return Err(class),
        }
        assert!(h.buffered() <= pywebbench_engine::ws::MAX_HEAD + 1);
    }
    Ok(None)
}

fn answer(extra: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n{extra}\r\n",
        accept_for(KEY)
    )
    .into_bytes()
}

proptest! {
    #![proptest_config(config(400))]

    /// Generated server streams parse to what was generated.
    #[test]
    fn valid_conversations_parse_to_what_was_sent(c in pipeline()) {
        let data = concat(&c);
        prop_assert_eq!(whole(&data), expected_outcome(&c));
    }

    /// Any bytes: no panic, buffers bounded, and at worst a protocol error.
    #[test]
    fn junk_is_a_protocol_error_at_worst(junk in junk(3000)) {
        let out = whole(&junk);
        prop_assert!(matches!(out.end, Ok(()) | Err(ErrorClass::WsProtocolError)), "{:?}", out.end);
    }

    /// A valid handshake answer, edited and followed by frames or junk, cut anywhere:
    /// completes at the same byte or fails with the same class as whole; an unedited one
    /// completes at its end; failures are rejections or protocol errors only.
    #[test]
    fn handshake_answers_split_equal_whole(
        edits in edits(),
        junk in junk(300),
        cuts in cuts(8),
        edited in any::<bool>(),
    ) {
        let mut data = answer("X-Pad: 1\r\n");
        let head = data.len();
        if edited {
            mutate(&mut data, &edits, &junk);
        } else {
            data.extend_from_slice(&junk);
        }
        let want = handshake([&data[..]]);
        prop_assert_eq!(handshake(cut(&data, &cuts)), want);
        if !edited {
            prop_assert_eq!(want, Ok(Some(head)));
        }
        prop_assert!(
            matches!(want, Ok(_) | Err(ErrorClass::WsHandshakeRejected | ErrorClass::WsProtocolError)),
            "{:?}", want
        );
    }
}
