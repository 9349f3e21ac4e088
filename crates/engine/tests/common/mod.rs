//! Helpers shared by the engine's loopback test binaries (each uses some of them).
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpStream;

/// Read from `s` until a request's blank line (or the end of the stream).
pub fn read_request(s: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
}

/// Read from `s` into `buf` until a request's head is complete: the head as text, the bytes
/// after it left in `buf` (None: the stream ended first).
pub fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<String>> {
    let mut chunk = [0u8; 65536];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end);
    Ok(Some(head))
}

/// The server's 101 answer to the WebSocket upgrade request `head`.
pub fn ws_upgrade_answer(head: &str) -> String {
    let key = head
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap_or("")
        .trim();
    format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {}\r\n\r\n",
        pywebbench_engine::ws::accept_for(key)
    )
}
