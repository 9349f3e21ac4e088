//! The target URL: `http://host[:port][/path]`, and the token rule of methods and header
//! names.

use super::bad;

/// Split `http://host[:port][/path]` into (host, port, path-and-query).
pub fn parse_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = if let Some(r) = url.strip_prefix("http://") {
        r
    } else if url.starts_with("https://") {
        return Err(bad(
            "url",
            "https is not supported (cleartext HTTP/1.1 and h2c only)",
        ));
    } else {
        return Err(bad("url", format!("{url:?} must start with http://")));
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_string()),
        Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
        None => (rest, "/".to_string()),
    };
    if authority.is_empty() {
        return Err(bad("url", format!("{url:?} has no host")));
    }
    if authority.contains('@') {
        return Err(bad("url", "user info in the URL is not supported"));
    }
    let (host, port) = if let Some(stripped) = authority.strip_prefix('[') {
        let end = stripped
            .find(']')
            .ok_or_else(|| bad("url", format!("{url:?}: unclosed '[' in host")))?;
        let host = &stripped[..end];
        let after = &stripped[end + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| bad("url", format!("bad port {p:?}")))?,
            None if after.is_empty() => 80,
            None => return Err(bad("url", format!("{url:?}: junk after ']'"))),
        };
        (host.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => {
                let port = p
                    .parse::<u16>()
                    .map_err(|_| bad("url", format!("bad port {p:?}")))?;
                (h.to_string(), port)
            }
            None => (authority.to_string(), 80),
        }
    };
    if port == 0 {
        return Err(bad("url", "port 0 is not a valid target"));
    }
    if path.contains(' ') || path.contains('\r') || path.contains('\n') {
        return Err(bad(
            "url",
            "the path must not contain spaces or line breaks",
        ));
    }
    Ok((host, port, path))
}

pub(super) fn valid_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
