//! IndexNow on the node's admin port (docs/indexnow.md): `POST /indexnow` (JSON: host, key,
//! keyLocation, urlList) and `GET /indexnow?url=...&key=...`, answered in the admin server's
//! thread with the protocol's status codes (`crawlfleet_core::indexnow`).
//!
//! A submission's key is trusted only once its key file, fetched from the submitting host off
//! the event loop (a thread with a fetcher of its own), holds it; the answer is cached an
//! hour. Until then the submission is answered 202 and waits (bounded); a key found valid
//! sends the waiting URLs on, one found invalid drops them and later submissions with that key
//! are answered 403. Accepted URLs go to the node's role loop over a channel
//! ([`IndexNow::urls`]), which queues them for fetching at once in each collection covering
//! their host, and counts the others as dropped.

use std::collections::HashMap;
use std::net::ToSocketAddrs;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crawlfleet_core::indexnow::{
    key_file_holds, KeyCache, KeyState, RateLimit, Refusal, Submission, MAX_KEY_FILE,
};
use crawlfleet_net::fetch::{FetchRequest, Fetcher, FetcherOptions};
use crawlfleet_net::http::{self, Request};
use crossbeam_channel::{Receiver, Sender};
use log::{debug, info, warn};
use parking_lot::Mutex;

use crate::admin::server::Route;

/// Submissions a host may make per second, and at once.
const PER_SECOND: f64 = 1.0;
const BURST: u32 = 10;
/// Hosts the rate limit and the key cache track.
const MAX_HOSTS: usize = 10_000;
/// Seconds a key check is trusted.
const KEY_TTL: f64 = 3600.0;
/// URLs waiting for key checks, all hosts.
const MAX_WAITING_URLS: usize = 100_000;
/// Limit on one key file fetch.
const KEY_FETCH_TIMEOUT: Duration = Duration::from_secs(10);

type KeyId = (String, String, String);

struct State {
    rate: RateLimit,
    keys: KeyCache,
    /// Submissions waiting for their key's check.
    waiting: HashMap<KeyId, Vec<Submission>>,
    waiting_urls: usize,
}

/// The IndexNow endpoint of one node.
pub struct IndexNow {
    state: Arc<Mutex<State>>,
    checks: Sender<Submission>,
    accepted: Sender<Vec<String>>,
}

fn id(s: &Submission) -> KeyId {
    (s.host.clone(), s.key.clone(), s.key_url())
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl IndexNow {
    /// Starts the key checker; the URLs accepted come out of the receiver.
    pub fn start() -> std::io::Result<(Arc<IndexNow>, Receiver<Vec<String>>)> {
        let (accepted, urls) = crossbeam_channel::unbounded();
        let (checks, to_check) = crossbeam_channel::unbounded();
        let state = Arc::new(Mutex::new(State {
            rate: RateLimit::new(PER_SECOND, BURST, MAX_HOSTS),
            keys: KeyCache::new(KEY_TTL, MAX_HOSTS),
            waiting: HashMap::new(),
            waiting_urls: 0,
        }));
        let fetcher = Fetcher::spawn(FetcherOptions {
            max_connections: 16,
            ..FetcherOptions::default()
        })?;
        let (st, out) = (state.clone(), accepted.clone());
        std::thread::Builder::new()
            .name("indexnow-keys".into())
            .spawn(move || check_keys(&fetcher, &to_check, &st, &out))?;
        Ok((
            Arc::new(IndexNow {
                state,
                checks,
                accepted,
            }),
            urls,
        ))
    }

    /// Decides on one submission: the status and a one-line reason.
    fn submit(&self, s: Result<Submission, Refusal>) -> (u16, String) {
        let s = match s {
            Ok(s) => s,
            Err(r) => return (r.status(), r.to_string()),
        };
        let t = now();
        let mut st = self.state.lock();
        if !st.rate.allow(&s.host, t) {
            return (429, Refusal::TooMany.to_string());
        }
        match st.keys.get(&s, t) {
            Some(KeyState::Valid) => {
                let n = s.urls.len();
                let _ = self.accepted.send(s.urls);
                (200, format!("200 {n} URLs accepted"))
            }
            Some(KeyState::Invalid) => (
                403,
                format!("403 the key file {} does not hold the key", s.key_url()),
            ),
            pending => {
                if st.waiting_urls + s.urls.len() > MAX_WAITING_URLS {
                    return (429, "429 too many URLs waiting for key checks".into());
                }
                if pending.is_none() {
                    if !st.keys.set(&s, KeyState::Pending, t) {
                        return (429, "429 too many key checks under way".into());
                    }
                    let _ = self.checks.send(s.clone());
                }
                st.waiting_urls += s.urls.len();
                let n = s.urls.len();
                st.waiting.entry(id(&s)).or_default().push(s);
                (
                    202,
                    format!("202 {n} URLs received; key validation pending"),
                )
            }
        }
    }
}

/// Whether `req` is for the IndexNow endpoint.
fn is_indexnow(req: &Request<'_>) -> bool {
    let path = req.path.split_once('?').map_or(req.path, |(p, _)| p);
    path == "/indexnow" || path == "/IndexNow"
}

impl Route for IndexNow {
    /// A submission proves itself with the key file on its host (docs/indexnow.md): sites
    /// submit without the admin token.
    fn public(&self, req: &Request<'_>) -> bool {
        is_indexnow(req)
    }

    fn answer(&self, req: &Request<'_>, keep_alive: bool) -> Option<Vec<u8>> {
        if !is_indexnow(req) {
            return None;
        }
        let query = req.path.split_once('?').map_or("", |(_, q)| q);
        let (status, text) = match req.method {
            "POST" => self.submit(Submission::from_json(req.body)),
            "GET" => self.submit(Submission::from_query(query)),
            _ => (405, "405 GET or POST".into()),
        };
        debug!("IndexNow {} {}: {text}", req.method, req.path);
        let mut out = Vec::new();
        let allow: &[(&str, &str)] = if status == 405 {
            &[("Allow", "GET, POST")]
        } else {
            &[]
        };
        http::write_response(
            &mut out,
            status,
            "text/plain; charset=utf-8",
            allow,
            format!("{text}\n").as_bytes(),
            keep_alive,
        );
        Some(out)
    }
}

/// The key checker's thread: fetches each key file, records the answer, and sends on or
/// drops what waited for it.
fn check_keys(
    fetcher: &Fetcher,
    to_check: &Receiver<Submission>,
    state: &Mutex<State>,
    accepted: &Sender<Vec<String>>,
) {
    let mut next_id = 0;
    for s in to_check {
        next_id += 1;
        let key_url = s.key_url();
        let valid =
            fetch_key(fetcher, next_id, &key_url).is_some_and(|b| key_file_holds(&b, &s.key));
        let mut st = state.lock();
        st.keys.set(
            &s,
            if valid {
                KeyState::Valid
            } else {
                KeyState::Invalid
            },
            now(),
        );
        let waited = st.waiting.remove(&id(&s)).unwrap_or_default();
        for w in waited {
            st.waiting_urls -= w.urls.len();
            if valid {
                let _ = accepted.send(w.urls);
            }
        }
        if valid {
            info!("IndexNow: the key of {} is valid ({key_url})", s.host);
        } else {
            warn!(
                "IndexNow: the key file {key_url} of {} does not hold its key",
                s.host
            );
        }
    }
}

/// The body of a 200 answer to GET `url`, or `None`.
fn fetch_key(fetcher: &Fetcher, id: u64, url: &str) -> Option<Vec<u8>> {
    let u = url::Url::parse(url).ok()?;
    let port = u.port_or_known_default()?;
    let addr = (u.host_str()?, port).to_socket_addrs().ok()?.next()?;
    let req = FetchRequest {
        id,
        url: u,
        addr,
        headers: Vec::new(),
        max_body: MAX_KEY_FILE + 1,
        connect_timeout: KEY_FETCH_TIMEOUT,
        timeout: KEY_FETCH_TIMEOUT,
        head: false,
        http10: false,
        post: None,
    };
    fetcher.submit(req).ok()?;
    let until = Instant::now() + KEY_FETCH_TIMEOUT * 2;
    loop {
        let left = until.checked_duration_since(Instant::now())?;
        let r = fetcher.results.recv_timeout(left).ok()?;
        if r.id != id {
            continue;
        }
        let resp = r.result.ok()?;
        return (resp.status == 200 && !resp.truncated).then_some(resp.body);
    }
}
