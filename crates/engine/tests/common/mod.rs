//! Helpers shared by the engine's loopback test binaries.

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
