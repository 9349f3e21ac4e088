//! The load spec's protocol: `protocol` and `streams`, what h2c rules out, and the h2c
//! request (its header block encoded once, `crate::h2::encode_request`).

use super::{bad, LoadSpec, Protocol};
use crate::h2::{self, MAX_FRAME};

/// An h2c request, the same on every stream.
#[derive(Debug, Clone)]
pub struct H2Request {
    pub block: Vec<u8>,
    pub body: Vec<u8>,
}

impl LoadSpec {
    /// `protocol` and `streams`, and what h2c rules out.
    pub(crate) fn check_protocol(&self) -> Result<(), String> {
        if self.streams == 0 || self.streams > 1024 {
            return Err(bad("streams", "must be between 1 and 1024"));
        }
        if self.protocol != Protocol::H2c {
            if self.streams > 1 {
                return Err(bad(
                    "streams",
                    "concurrent streams need protocol h2c (HTTP/1.1 has pipeline instead)",
                ));
            }
            return Ok(());
        }
        if self.pipeline > 1 {
            return Err(bad(
                "pipeline",
                "h2c multiplexes requests as streams (use streams, not pipeline)",
            ));
        }
        if !self.keepalive {
            return Err(bad("keepalive", "h2c needs keep-alive connections"));
        }
        if self.fresh_share > 0.0 {
            return Err(bad("fresh_share", "h2c needs keep-alive connections"));
        }
        for (name, _) in &self.headers {
            if h2::forbidden_header(&name.to_ascii_lowercase()) {
                return Err(bad(
                    "headers",
                    format!("{name} is connection-specific: HTTP/2 forbids it"),
                ));
            }
        }
        let body = self.body_bytes()?.len();
        if body > MAX_FRAME {
            return Err(bad(
                if self.body_b64.is_empty() {
                    "body"
                } else {
                    "body_b64"
                },
                format!(
                    "h2c request bodies are at most {} bytes (one DATA frame); this one has {body}",
                    MAX_FRAME
                ),
            ));
        }
        Ok(())
    }

    /// The h2c request (None for HTTP/1.1). Errors name the field.
    pub(crate) fn h2_request(
        &self,
        host: &str,
        port: u16,
        path: &str,
        body: &[u8],
        method_has_body: bool,
    ) -> Result<Option<H2Request>, String> {
        if self.protocol != Protocol::H2c {
            return Ok(None);
        }
        let authority = if port == 80 {
            host.to_string()
        } else if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let length = (!body.is_empty() || method_has_body).then_some(body.len());
        let block = h2::encode_request(&self.method, &authority, path, &self.headers, length);
        if block.len() > MAX_FRAME {
            return Err(bad(
                "headers",
                format!("the HTTP/2 header block is over {MAX_FRAME} bytes"),
            ));
        }
        Ok(Some(H2Request {
            block,
            body: body.to_vec(),
        }))
    }
}
