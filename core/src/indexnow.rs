//! IndexNow (the protocol of indexnow.org, "IndexNow protocol documentation"): a site tells a
//! search engine which of its URLs changed; the engine checks the site's key file before it
//! trusts the submission. This module is the protocol's data side: reading a submission (the
//! JSON POST and the single-URL GET), checking it, the answers' status codes, the key file's
//! address, a per-host rate limit and the cache of key checks. The node's admin port serves it
//! (`shells/src/node/indexnow.rs`, docs/indexnow.md).
//!
//! ```
//! use crawlfleet_core::indexnow::{Submission, Refusal};
//!
//! let body = br#"{"host": "www.example.org", "key": "7e3f6e8bc8a54e2b9a4f3c1d0e9b8a77",
//!   "urlList": ["https://www.example.org/url1", "https://www.example.org/folder/url2"]}"#;
//! let s = Submission::from_json(body).unwrap();
//! assert_eq!(s.key_url(), "https://www.example.org/7e3f6e8bc8a54e2b9a4f3c1d0e9b8a77.txt");
//! let bad = br#"{"host": "www.example.org", "key": "short", "urlList": ["https://www.example.org/"]}"#;
//! assert_eq!(Submission::from_json(bad).unwrap_err(), Refusal::Unprocessable("the key must be 8 to 128 characters of a-z, A-Z, 0-9 and -".into()));
//! ```
//!
//! The protocol's answers: 200 OK (submitted), 202 Accepted (received, key validation
//! pending), 400 Bad request (invalid format), 403 Forbidden (key not valid: the key file is
//! missing or does not hold the key), 422 Unprocessable Entity (URLs that do not belong to the
//! host, or a key that does not match the protocol's format), 429 Too Many Requests.
//!
//! Decisions where the protocol text leaves room:
//! - A POST lists at most [`MAX_URLS`] URLs (the documentation's "up to 10,000 URLs per post");
//!   more is a 400, as is an empty list, a missing field, or a body that is not JSON.
//! - The key file is `<scheme>://<host>/<key>.txt`, the scheme being that of the first URL, or
//!   `keyLocation` when given; keyLocation must be on the host, and then only URLs under its
//!   directory may be submitted (the documentation: a key file in `/catalog/` allows URLs
//!   starting with `/catalog/`), others are a 422.
//! - The key file's body, trimmed of white space, must be the key exactly (UTF-8).

use std::collections::HashMap;
use std::fmt;

use url::Url;

/// URLs one submission may carry.
pub const MAX_URLS: usize = 10_000;
/// Bytes of a key file read.
pub const MAX_KEY_FILE: usize = 4096;

/// Why a submission is refused, with the protocol's status code ([`Refusal::status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 400 Bad request: invalid format.
    BadRequest(String),
    /// 403 Forbidden: the key is not valid (key file missing, or not holding the key).
    Forbidden(String),
    /// 422 Unprocessable Entity: URLs not of the host, or a key not of the protocol's format.
    Unprocessable(String),
    /// 429 Too Many Requests.
    TooMany,
}

impl Refusal {
    /// The HTTP status of the answer.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::BadRequest(_) => 400,
            Refusal::Forbidden(_) => 403,
            Refusal::Unprocessable(_) => 422,
            Refusal::TooMany => 429,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::BadRequest(s) | Refusal::Forbidden(s) | Refusal::Unprocessable(s) => {
                write!(f, "{} {s}", self.status())
            }
            Refusal::TooMany => write!(f, "429 too many requests for this host"),
        }
    }
}

/// True when `key` has the protocol's format: 8 to 128 characters of a-z, A-Z, 0-9 and `-`.
pub fn valid_key(key: &str) -> bool {
    (8..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// A submission, checked: every URL is of `host` (and under `keyLocation`'s directory).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    /// The host the URLs belong to (lower case).
    pub host: String,
    /// The key.
    pub key: String,
    /// The key file's location, if given.
    pub key_location: Option<String>,
    /// The changed URLs, as parsed.
    pub urls: Vec<String>,
}

fn bad(s: &str) -> Refusal {
    Refusal::BadRequest(s.to_string())
}

impl Submission {
    /// Reads a JSON POST body: `{"host", "key", "keyLocation" (optional), "urlList"}`.
    pub fn from_json(body: &[u8]) -> Result<Submission, Refusal> {
        let v: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| bad(&format!("the body is not JSON: {e}")))?;
        let field = |name: &str| v.get(name).and_then(serde_json::Value::as_str);
        let host = field("host").ok_or_else(|| bad("no \"host\""))?;
        let key = field("key").ok_or_else(|| bad("no \"key\""))?;
        let key_location = match v.get("keyLocation") {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err(bad("\"keyLocation\" is not a string")),
        };
        let list = v
            .get("urlList")
            .and_then(serde_json::Value::as_array)
            .ok_or_else(|| bad("no \"urlList\" array"))?;
        if list.len() > MAX_URLS {
            return Err(bad(&format!("more than {MAX_URLS} URLs")));
        }
        let urls: Vec<&str> = list
            .iter()
            .map(|u| {
                u.as_str()
                    .ok_or_else(|| bad("a member of \"urlList\" is not a string"))
            })
            .collect::<Result<_, _>>()?;
        Submission::checked(host, key, key_location, &urls)
    }

    /// Reads the GET form's query: `url`, `key` and optionally `keyLocation`; the host is the
    /// URL's.
    pub fn from_query(query: &str) -> Result<Submission, Refusal> {
        let (mut url, mut key, mut loc) = (None, None, None);
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            match k.as_ref() {
                "url" => url = Some(v.into_owned()),
                "key" => key = Some(v.into_owned()),
                "keyLocation" => loc = Some(v.into_owned()),
                _ => {}
            }
        }
        let url = url.ok_or_else(|| bad("no url"))?;
        let key = key.ok_or_else(|| bad("no key"))?;
        let host = Url::parse(&url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .ok_or_else(|| bad("url is not an absolute URL"))?;
        Submission::checked(&host, &key, loc.as_deref(), &[url.as_str()])
    }

    fn checked(
        host: &str,
        key: &str,
        key_location: Option<&str>,
        urls: &[&str],
    ) -> Result<Submission, Refusal> {
        let host = host.trim().to_ascii_lowercase();
        if host.is_empty() || host.contains(['/', ' ', '@']) {
            return Err(bad("\"host\" is not a host name"));
        }
        if !valid_key(key) {
            return Err(Refusal::Unprocessable(
                "the key must be 8 to 128 characters of a-z, A-Z, 0-9 and -".into(),
            ));
        }
        if urls.is_empty() {
            return Err(bad("no URL"));
        }
        let not_host = |what: &str| Refusal::Unprocessable(format!("{what} is not of host {host}"));
        let scope = match key_location {
            None => None,
            Some(l) => {
                let u = Url::parse(l).map_err(|_| bad("keyLocation is not an absolute URL"))?;
                if u.host_str() != Some(host.as_str()) {
                    return Err(not_host(l));
                }
                let path = u.path();
                Some(path[..path.rfind('/').map_or(0, |i| i + 1)].to_string())
            }
        };
        let mut out = Vec::with_capacity(urls.len());
        for raw in urls {
            let u = Url::parse(raw).map_err(|_| bad(&format!("{raw:?} is not an absolute URL")))?;
            if !matches!(u.scheme(), "http" | "https") {
                return Err(bad(&format!("{raw:?} is not http or https")));
            }
            if u.host_str() != Some(host.as_str()) {
                return Err(not_host(raw));
            }
            if let Some(dir) = &scope {
                if !u.path().starts_with(dir.as_str()) {
                    return Err(Refusal::Unprocessable(format!(
                        "{raw:?} is outside the key file's directory {dir}"
                    )));
                }
            }
            out.push(String::from(u));
        }
        Ok(Submission {
            host,
            key: key.to_string(),
            key_location: key_location.map(str::to_string),
            urls: out,
        })
    }

    /// Where the key file is: `keyLocation`, or `/<key>.txt` on the host, on the scheme of the
    /// first URL.
    pub fn key_url(&self) -> String {
        if let Some(l) = &self.key_location {
            return l.clone();
        }
        let first = self.urls.first().and_then(|u| Url::parse(u).ok());
        let origin = first.map_or_else(
            || format!("https://{}", self.host),
            |u| u.origin().ascii_serialization(),
        );
        format!("{origin}/{}.txt", self.key)
    }
}

/// True when a key file's body holds `key` (the whole body, white space trimmed).
pub fn key_file_holds(body: &[u8], key: &str) -> bool {
    body.len() <= MAX_KEY_FILE && std::str::from_utf8(body).is_ok_and(|b| b.trim() == key)
}

/// A per-host rate limit: a token bucket of `burst` submissions refilled at `per_second`,
/// over at most `max_hosts` hosts (the longest idle forgotten first).
pub struct RateLimit {
    per_second: f64,
    burst: f64,
    max_hosts: usize,
    hosts: HashMap<String, (f64, f64)>,
}

impl RateLimit {
    /// A limit of `per_second` submissions per host, `burst` at once.
    pub fn new(per_second: f64, burst: u32, max_hosts: usize) -> RateLimit {
        RateLimit {
            per_second: per_second.max(0.0),
            burst: f64::from(burst.max(1)),
            max_hosts: max_hosts.max(1),
            hosts: HashMap::new(),
        }
    }

    /// Takes a token of `host` at `now` (seconds); false when it has none left.
    pub fn allow(&mut self, host: &str, now: f64) -> bool {
        if !self.hosts.contains_key(host) && self.hosts.len() >= self.max_hosts {
            // Full hosts are those whose bucket refilled: forgetting them changes nothing.
            let full = self.burst;
            let rate = self.per_second;
            self.hosts
                .retain(|_, (tokens, at)| *tokens + (now - *at) * rate < full);
            if self.hosts.len() >= self.max_hosts {
                let oldest = self
                    .hosts
                    .iter()
                    .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
                    .map(|(h, _)| h.clone());
                if let Some(h) = oldest {
                    self.hosts.remove(&h);
                }
            }
        }
        let (tokens, at) = self
            .hosts
            .entry(host.to_string())
            .or_insert((self.burst, now));
        *tokens = (*tokens + (now - *at).max(0.0) * self.per_second).min(self.burst);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// What is known of a key file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyState {
    /// Being fetched.
    Pending,
    /// It holds the key.
    Valid,
    /// Missing, unreachable, or holding something else.
    Invalid,
}

/// Key checks by (host, key, key file URL), each trusted until its expiry; at most `max`.
pub struct KeyCache {
    ttl: f64,
    max: usize,
    entries: HashMap<(String, String, String), (KeyState, f64)>,
}

impl KeyCache {
    /// A cache keeping answers `ttl` seconds (a pending check never expires by itself).
    pub fn new(ttl: f64, max: usize) -> KeyCache {
        KeyCache {
            ttl,
            max: max.max(1),
            entries: HashMap::new(),
        }
    }

    fn key(s: &Submission) -> (String, String, String) {
        (s.host.clone(), s.key.clone(), s.key_url())
    }

    /// What is known of the key of `s` at `now`.
    pub fn get(&self, s: &Submission, now: f64) -> Option<KeyState> {
        self.entries
            .get(&Self::key(s))
            .filter(|(st, until)| *st == KeyState::Pending || *until > now)
            .map(|(st, _)| *st)
    }

    /// Records the state of the key of `s`; false when the cache is full of pending checks.
    pub fn set(&mut self, s: &Submission, state: KeyState, now: f64) -> bool {
        if self.entries.len() >= self.max {
            self.entries
                .retain(|_, (st, until)| *st == KeyState::Pending || *until > now);
            if self.entries.len() >= self.max && !self.entries.contains_key(&Self::key(s)) {
                return false;
            }
        }
        self.entries.insert(Self::key(s), (state, now + self.ttl));
        true
    }
}

#[cfg(test)]
mod tests;
