//! A traffic mix (docs/mix.md): weighted requests, each serialised once at plan time, drawn
//! per request from a seeded alias table (Vose) built once: one random number, one table
//! look-up, no lock and no allocation per request.

use super::url::valid_token;
use super::{bad, LoadSpec, Protocol};
use crate::h2::{self, MAX_FRAME};
use serde::{Deserialize, Serialize};

/// Most entries a mix may have.
pub const MAX_MIX_ENTRIES: usize = 65_536;

/// One weighted request of a mix. Several entries may share an endpoint `name`: figures
/// are reported per name.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct MixEntry {
    /// The endpoint this request belongs to (e.g. `GET /items/{id}`).
    pub name: String,
    /// Relative weight (> 0); the share of requests is weight / sum of weights.
    pub weight: f64,
    pub method: String,
    /// Path and query (`/items/42?full=1`); the spec's URL gives the host and port.
    pub path: String,
    /// Headers of this request, after the spec's own `headers`.
    pub headers: Vec<(String, String)>,
    /// Request body as base64 (standard alphabet, padded); empty: none.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub body_b64: String,
    /// Statuses that count as success for this entry (empty: the spec's `expect_status`).
    pub expect_status: Vec<u16>,
}

impl Default for MixEntry {
    fn default() -> Self {
        MixEntry {
            name: String::new(),
            weight: 1.0,
            method: "GET".into(),
            path: "/".into(),
            headers: Vec::new(),
            body_b64: String::new(),
            expect_status: Vec::new(),
        }
    }
}

/// One mix entry ready to send.
#[derive(Debug, Clone)]
pub struct MixRequest {
    /// The HTTP/1.1 request (head and body).
    pub request: Vec<u8>,
    /// h2c: its header block and body.
    pub h2: Option<super::H2Request>,
    pub is_head: bool,
    /// The statuses that pass (empty: any).
    pub expect_status: Vec<u16>,
    /// Index of its endpoint in `MixPlan::endpoints`.
    pub endpoint: u32,
}

/// A mix, prepared: the requests, the endpoints (names in first-seen order, with their
/// summed weights) and the alias table the draws use.
#[derive(Debug, Clone)]
pub struct MixPlan {
    pub entries: Vec<MixRequest>,
    pub endpoints: Vec<(String, f64)>,
    pub alias: AliasTable,
    /// Longest HTTP/1.1 request (bytes), for the write buffers.
    pub max_len: usize,
}

/// Vose's alias method: a draw is one uniform column and one biased coin.
#[derive(Debug, Clone, PartialEq)]
pub struct AliasTable {
    /// Per column: keep the column when the low 32 bits of the draw are below this (out of
    /// 2^32), else take its alias.
    keep: Vec<u64>,
    alias: Vec<u32>,
}

impl AliasTable {
    /// Build from positive, finite weights (at least one).
    pub fn new(weights: &[f64]) -> AliasTable {
        let n = weights.len();
        assert!(
            n > 0 && n <= u32::MAX as usize,
            "an alias table needs weights"
        );
        let total: f64 = weights.iter().sum();
        let mut p: Vec<f64> = weights.iter().map(|w| w * n as f64 / total).collect();
        let mut alias: Vec<u32> = (0..n as u32).collect();
        let mut small: Vec<usize> = Vec::with_capacity(n);
        let mut large: Vec<usize> = Vec::with_capacity(n);
        for (i, &q) in p.iter().enumerate() {
            if q < 1.0 {
                small.push(i);
            } else {
                large.push(i);
            }
        }
        while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
            small.pop();
            alias[s] = l as u32;
            p[l] = (p[l] + p[s]) - 1.0;
            if p[l] < 1.0 {
                large.pop();
                small.push(l);
            }
        }
        // What is left is 1 up to rounding.
        for &i in small.iter().chain(large.iter()) {
            p[i] = 1.0;
        }
        let keep = p
            .iter()
            .map(|&q| ((q.clamp(0.0, 1.0) * 4_294_967_296.0).round()) as u64)
            .collect();
        AliasTable { keep, alias }
    }

    /// Number of columns (entries).
    pub fn len(&self) -> usize {
        self.keep.len()
    }

    /// True when the table has no column (never, once built).
    pub fn is_empty(&self) -> bool {
        self.keep.is_empty()
    }

    /// The entry for a 64-bit uniform random number: its high 32 bits pick the column
    /// (multiply-shift, no division), its low 32 bits toss the column's coin.
    #[inline]
    pub fn pick(&self, r: u64) -> usize {
        let col = (((r >> 32) * self.keep.len() as u64) >> 32) as usize;
        if (r & 0xFFFF_FFFF) < self.keep[col] {
            col
        } else {
            self.alias[col] as usize
        }
    }

    /// Each entry's probability as the table encodes it (for tests and checks).
    pub fn probabilities(&self) -> Vec<f64> {
        let n = self.keep.len() as f64;
        let mut out = vec![0.0; self.keep.len()];
        for (col, &k) in self.keep.iter().enumerate() {
            let kept = k as f64 / 4_294_967_296.0;
            out[col] += kept / n;
            out[self.alias[col] as usize] += (1.0 - kept) / n;
        }
        out
    }
}

fn entry_field(i: usize, e: &MixEntry, field: &str) -> String {
    format!("mix[{i}] ({:?}).{field}", e.name)
}

impl LoadSpec {
    /// The mix's own rules, and what a mix rules out. Errors name the entry and field:
    /// `mix: entry 3 ("GET /items/{id}").weight: must be > 0`.
    pub(crate) fn check_mix(&self) -> Result<(), String> {
        if self.mix.is_empty() {
            return Ok(());
        }
        if self.mix.len() > MAX_MIX_ENTRIES {
            return Err(bad("mix", format!("at most {MAX_MIX_ENTRIES} entries")));
        }
        if self.protocol == Protocol::Ws {
            return Err(bad(
                "mix",
                "WebSocket runs echo messages on one upgraded connection: a mix of requests \
                 needs protocol http1 or h2c",
            ));
        }
        if self.method != "GET" {
            return Err(bad(
                "method",
                "a mix gives each entry its own method: leave the spec's method at GET",
            ));
        }
        if !self.body.is_empty() || !self.body_b64.is_empty() {
            return Err(bad(
                "body",
                "a mix gives each entry its own body: leave the spec's body empty",
            ));
        }
        if self.expect_body.is_some() {
            return Err(bad(
                "expect_body",
                "not with a mix (each entry has its expected statuses only)",
            ));
        }
        for (i, e) in self.mix.iter().enumerate() {
            let at = |f: &str| entry_field(i, e, f);
            if e.name.is_empty() {
                return Err(bad(&at("name"), "must not be empty"));
            }
            if !(e.weight.is_finite() && e.weight > 0.0) {
                return Err(bad(&at("weight"), format!("{} must be > 0", e.weight)));
            }
            if !valid_token(&e.method) {
                return Err(bad(
                    &at("method"),
                    format!("{:?} is not a valid HTTP method", e.method),
                ));
            }
            if !e.path.starts_with('/') {
                return Err(bad(
                    &at("path"),
                    format!("{:?} must start with '/'", e.path),
                ));
            }
            if e.path.contains([' ', '\r', '\n']) {
                return Err(bad(&at("path"), "must not contain spaces or line breaks"));
            }
            for &s in &e.expect_status {
                if !(100..=999).contains(&s) {
                    return Err(bad(
                        &at("expect_status"),
                        format!("{s} is not an HTTP status code"),
                    ));
                }
            }
            super::check_headers(&e.headers).map_err(|m| bad(&at("headers"), m))?;
            if self.protocol == Protocol::H2c {
                for (name, _) in &e.headers {
                    if h2::forbidden_header(&name.to_ascii_lowercase()) {
                        return Err(bad(
                            &at("headers"),
                            format!("{name} is connection-specific: HTTP/2 forbids it"),
                        ));
                    }
                }
            }
            let body = entry_body(e).map_err(|m| bad(&at("body_b64"), m))?;
            if self.protocol == Protocol::H2c && body.len() > MAX_FRAME {
                return Err(bad(
                    &at("body_b64"),
                    format!(
                        "h2c request bodies are at most {MAX_FRAME} bytes (one DATA frame); \
                         this one has {}",
                        body.len()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Serialise every entry once (HTTP/1.1 bytes, and for h2c the HPACK block and body),
    /// and build the alias table. None without a mix.
    pub(crate) fn mix_plan(&self, host: &str, port: u16) -> Result<Option<MixPlan>, String> {
        if self.mix.is_empty() {
            return Ok(None);
        }
        let mut endpoints: Vec<(String, f64)> = Vec::new();
        let mut entries = Vec::with_capacity(self.mix.len());
        for (i, e) in self.mix.iter().enumerate() {
            let endpoint = match endpoints.iter().position(|(n, _)| *n == e.name) {
                Some(k) => {
                    endpoints[k].1 += e.weight;
                    k
                }
                None => {
                    endpoints.push((e.name.clone(), e.weight));
                    endpoints.len() - 1
                }
            };
            let body = entry_body(e).map_err(|m| bad(&entry_field(i, e, "body_b64"), m))?;
            let mut headers = self.headers.clone();
            headers.extend(e.headers.iter().cloned());
            let request = self.http1_request(&e.method, host, port, &e.path, &headers, &body);
            let method_has_body = matches!(e.method.as_str(), "POST" | "PUT" | "PATCH");
            let h2 = match self.protocol {
                Protocol::H2c => {
                    let authority = super::authority(host, port);
                    let length = (!body.is_empty() || method_has_body).then_some(body.len());
                    let block =
                        h2::encode_request(&e.method, &authority, &e.path, &headers, length);
                    if block.len() > MAX_FRAME {
                        return Err(bad(
                            &entry_field(i, e, "headers"),
                            format!("the HTTP/2 header block is over {MAX_FRAME} bytes"),
                        ));
                    }
                    Some(super::H2Request {
                        block,
                        body: body.clone(),
                    })
                }
                _ => None,
            };
            entries.push(MixRequest {
                request,
                h2,
                is_head: e.method == "HEAD",
                expect_status: if e.expect_status.is_empty() {
                    self.expect_status.clone()
                } else {
                    e.expect_status.clone()
                },
                endpoint: endpoint as u32,
            });
        }
        let weights: Vec<f64> = self.mix.iter().map(|e| e.weight).collect();
        let max_len = entries.iter().map(|e| e.request.len()).max().unwrap_or(0);
        Ok(Some(MixPlan {
            entries,
            endpoints,
            alias: AliasTable::new(&weights),
            max_len,
        }))
    }
}

/// An entry's body bytes.
fn entry_body(e: &MixEntry) -> Result<Vec<u8>, String> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(e.body_b64.trim())
        .map_err(|err| format!("not valid base64: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::worker::Rng;

    fn mix_spec(entries: Vec<MixEntry>) -> LoadSpec {
        LoadSpec {
            url: "http://127.0.0.1:8080/".into(),
            mix: entries,
            ..LoadSpec::default()
        }
    }

    fn entry(name: &str, weight: f64, path: &str) -> MixEntry {
        MixEntry {
            name: name.into(),
            weight,
            path: path.into(),
            ..MixEntry::default()
        }
    }

    #[test]
    fn alias_table_encodes_the_weights() {
        let w = [5.0, 1.0, 3.0, 0.5, 10.0, 0.01];
        let t = AliasTable::new(&w);
        let total: f64 = w.iter().sum();
        for (p, w) in t.probabilities().iter().zip(w) {
            assert!((p - w / total).abs() < 1e-8, "{p} vs {}", w / total);
        }
        let one = AliasTable::new(&[2.0]);
        assert_eq!(one.pick(0), 0);
        assert_eq!(one.pick(u64::MAX), 0);
    }

    /// 1,000,000 seeded draws over six weights: each share within 0.005 of its weight. The
    /// standard deviation of a share is at most sqrt(0.25 / 1e6) = 0.0005, so 0.005 is ten
    /// of them (a false failure about 1e-23 per entry); with a fixed seed the draws, and so
    /// the outcome, are the same on every run anyway.
    #[test]
    fn alias_draws_follow_the_weights_and_the_seed() {
        let w = [40.0, 25.0, 15.0, 10.0, 9.0, 1.0];
        let t = AliasTable::new(&w);
        let draws = 1_000_000;
        let count = |seed: u64| {
            let mut rng = Rng(seed);
            let mut n = [0u64; 6];
            for _ in 0..draws {
                n[t.pick(rng.next_u64())] += 1;
            }
            n
        };
        let a = count(7);
        for (k, &n) in a.iter().enumerate() {
            let share = n as f64 / draws as f64;
            assert!((share - w[k] / 100.0).abs() < 0.005, "{k}: {share}");
        }
        assert_eq!(a, count(7), "the same seed draws the same requests");
        assert_ne!(a, count(8));
    }

    #[test]
    fn entries_are_serialised_once_and_grouped_by_name() {
        let mut s = mix_spec(vec![
            entry("GET /items/{id}", 2.0, "/items/1"),
            MixEntry {
                method: "POST".into(),
                body_b64: "aGk=".into(),
                headers: vec![("Content-Type".into(), "text/plain".into())],
                expect_status: vec![201],
                ..entry("POST /items", 1.0, "/items")
            },
            entry("GET /items/{id}", 1.0, "/items/2?full=1"),
            MixEntry {
                method: "HEAD".into(),
                ..entry("HEAD /", 1.0, "/")
            },
        ]);
        s.headers = vec![("X-Run".into(), "a".into())];
        s.expect_status = vec![200];
        let p = s.plan().unwrap();
        let m = p.mix.as_ref().unwrap();
        assert_eq!(m.endpoints.len(), 3);
        assert_eq!(m.endpoints[0], ("GET /items/{id}".to_string(), 3.0));
        let post = String::from_utf8(m.entries[1].request.clone()).unwrap();
        assert!(
            post.starts_with("POST /items HTTP/1.1\r\nX-Run: a\r\nContent-Type: text/plain\r\n")
        );
        assert!(post.ends_with("Content-Length: 2\r\n\r\nhi"), "{post}");
        let get = String::from_utf8(m.entries[2].request.clone()).unwrap();
        assert!(get.starts_with("GET /items/2?full=1 HTTP/1.1\r\n"), "{get}");
        assert_eq!(m.entries[2].endpoint, 0);
        assert_eq!(m.entries[1].expect_status, vec![201]);
        assert_eq!(
            m.entries[0].expect_status,
            vec![200],
            "the spec's by default"
        );
        assert!(m.entries[3].is_head && !m.entries[0].is_head);
        assert_eq!(
            m.max_len,
            m.entries.iter().map(|e| e.request.len()).max().unwrap()
        );
        s.protocol = Protocol::H2c;
        let p = s.plan().unwrap();
        let m = p.mix.unwrap();
        assert!(m.entries.iter().all(|e| e.h2.is_some()));
        assert_eq!(m.entries[1].h2.as_ref().unwrap().body, b"hi");
    }

    #[test]
    fn mix_validation_names_the_entry_and_field() {
        let err = |e: MixEntry| {
            mix_spec(vec![entry("ok", 1.0, "/"), e])
                .validate()
                .unwrap_err()
        };
        assert_eq!(
            err(entry("GET /x", 0.0, "/x")),
            "mix[1] (\"GET /x\").weight: 0 must be > 0"
        );
        assert!(err(entry("GET /x", -1.0, "/x")).starts_with("mix[1] (\"GET /x\").weight: "));
        assert!(err(entry("GET /x", f64::NAN, "/x")).contains(".weight: "));
        assert!(err(entry("", 1.0, "/x")).starts_with("mix[1] (\"\").name: "));
        assert!(err(entry("x", 1.0, "x")).contains(".path: \"x\" must start with '/'"));
        assert!(err(entry("x", 1.0, "/a b")).contains(".path: "));
        let bad_method = MixEntry {
            method: "GE T".into(),
            ..entry("x", 1.0, "/")
        };
        assert!(err(bad_method).contains(".method: \"GE T\" is not a valid HTTP method"));
        let bad_status = MixEntry {
            expect_status: vec![42],
            ..entry("x", 1.0, "/")
        };
        assert!(err(bad_status).contains(".expect_status: 42 "));
        let bad_header = MixEntry {
            headers: vec![("Content-Length".into(), "3".into())],
            ..entry("x", 1.0, "/")
        };
        assert!(err(bad_header).contains(".headers: Content-Length is set by the engine"));
        let bad_body = MixEntry {
            body_b64: "!!".into(),
            ..entry("x", 1.0, "/")
        };
        assert!(err(bad_body).contains(".body_b64: not valid base64"));

        let mut ws = mix_spec(vec![entry("x", 1.0, "/")]);
        ws.url = "ws://127.0.0.1:8080/".into();
        ws.protocol = Protocol::Ws;
        assert!(ws.validate().unwrap_err().starts_with("mix: WebSocket"));
        let mut m = mix_spec(vec![entry("x", 1.0, "/")]);
        m.method = "POST".into();
        assert!(m.validate().unwrap_err().starts_with("method: a mix"));
        let mut m = mix_spec(vec![entry("x", 1.0, "/")]);
        m.body = "x".into();
        assert!(m.validate().unwrap_err().starts_with("body: a mix"));
        let mut m = mix_spec(vec![entry("x", 1.0, "/")]);
        m.expect_body = Some("x".into());
        assert!(m.validate().unwrap_err().starts_with("expect_body: "));
    }

    #[test]
    fn mix_json_round_trips_and_unknown_keys_are_named() {
        let s = mix_spec(vec![entry("a", 1.0, "/a")]);
        let back = LoadSpec::from_json(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(back, s);
        let text = r#"{"url": "http://127.0.0.1:1/", "mix": [{"name": "a", "wieght": 2}]}"#;
        assert!(LoadSpec::from_json(text).unwrap_err().starts_with("mix: "));
        // No mix: the field is left out of the document (older readers are unaffected).
        let plain = serde_json::to_string(&LoadSpec::default()).unwrap();
        assert!(!plain.contains("\"mix\""));
    }
}
