//! Form logins (docs/collection-config.md "Login"; the `logins` dict of MS-FSCMT 2.2.2.3.1):
//! before a node fetches anything from a site a collection's Login names, it logs in, and every
//! request to those sites then carries the session's cookies.
//!
//! A login is three steps, made by a worker thread with a fetcher of its own (so a slow login
//! server or a name lookup never stalls the node's loop): the `preload` URI fetched for its
//! cookies, the `html_form` page fetched for its cookies and its form's fields (`autofill`),
//! then the form submitted to `scheme://site/form` with `action` (POST, urlencoded, or GET
//! with the fields as the query). A submission answered below 400 is a session: its cookies
//! (RFC 6265, kept by `cookie_store`) go with every request to the Login's `sites` until `ttl`
//! seconds have passed, when the next request logs in again. Requests to those sites made while
//! a login runs wait for it. A login that fails is logged and tried again a minute later; the
//! sites are crawled meanwhile with what cookies there are.
//!
//! With `relogin_if_failed`, an answer showing the session gone (401, 403, or a redirect to the
//! form or the `html_form` page) of a request that went with the current session logs in again
//! and sends that request once more. A session that shows gone before any page came through it
//! (wrong credentials) is not renewed before a minute has passed.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use cookie_store::CookieStore;
use crawlfleet_core::config::{CollectionConfig, Login};
use crawlfleet_core::crawl::form;
use crawlfleet_net::fetch::{FetchRequest, FetchResult, Fetcher, FetcherOptions, Response};
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::{debug, info, warn};
use url::Url;

/// Seconds before a failed login (or one whose session showed gone at once) is tried again.
const RETRY_AFTER: f64 = 60.0;
/// Most bytes of the preload and form pages kept.
const MAX_PAGE: usize = 1 << 20;
/// Limits on each of a login's requests.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(30);

/// Where a Login stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Not logged in: the next request to its sites starts a login.
    Out,
    /// The worker is logging in.
    Busy,
    /// Logged in at this time (the node's clock, seconds).
    In(f64),
    /// The last login failed, or its session showed gone at once: requests go with what
    /// cookies there are until this time, then the next one logs in again.
    Failed(f64),
}

/// One Login of a collection.
struct State {
    cfg: Login,
    /// `scheme://site/form`; `None` when that is not a URL (the Login is then never made).
    target: Option<Url>,
    preload: Option<Url>,
    html_form: Option<Url>,
    jar: CookieStore,
    phase: Phase,
    /// Requests to the Login's sites waiting for its login, each with whether it is being
    /// sent again after the session showed gone.
    held: Vec<(FetchRequest, bool)>,
    /// Bumped at every login: a request sent with an older session does not start another.
    session: u64,
    /// An answer came through the current session without showing it gone.
    good: bool,
}

impl State {
    fn new(collection: &[u8], cfg: Login) -> State {
        let target = Url::parse(&format!("{}://{}{}", cfg.scheme, cfg.site, cfg.form)).ok();
        if target.is_none() {
            warn!(
                "collection {}: login {}: {}://{}{} is not a URL; its sites are crawled without it",
                String::from_utf8_lossy(collection),
                cfg.name,
                cfg.scheme,
                cfg.site,
                cfg.form
            );
        }
        let url = |s: &Option<String>| s.as_deref().and_then(|s| Url::parse(s).ok());
        State {
            preload: url(&cfg.preload),
            html_form: url(&cfg.html_form),
            cfg,
            target,
            jar: CookieStore::new(),
            phase: Phase::Out,
            held: Vec::new(),
            session: 0,
            good: false,
        }
    }

    /// True when the Login's sites include `url`'s host: an entry of `sites` that is the host
    /// or `host:port` (any case), or with no `sites`, the host of the Login's `site`.
    fn covers(&self, url: &Url) -> bool {
        let host = url.host_str().unwrap_or_default();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.port_or_known_default();
        let matches = |entry: &str| {
            let (h, p) = split_site(entry);
            h.eq_ignore_ascii_case(host) && (p.is_none() || p == port)
        };
        if self.cfg.sites.is_empty() {
            matches(&self.cfg.site)
        } else {
            self.cfg.sites.iter().any(|s| matches(s))
        }
    }

    /// `req` with a `Cookie` header of the session's cookies for its URL (RFC 6265 5.4).
    fn with_cookies(&self, mut req: FetchRequest) -> FetchRequest {
        let cookie = cookie_header(&self.jar, &req.url);
        if !cookie.is_empty() {
            req.headers.push(("Cookie".into(), cookie));
        }
        req
    }

    /// True when `resp` to `url` shows the session gone: 401, 403, or a redirect to the
    /// Login's form or its `html_form` page.
    fn shows_logged_out(&self, url: &Url, resp: &Response) -> bool {
        match resp.status {
            401 | 403 => true,
            300..=399 => {
                let Some(to) = resp
                    .header("location")
                    .and_then(|l| std::str::from_utf8(l).ok())
                    .and_then(|l| url.join(l.trim()).ok())
                else {
                    return false;
                };
                let same = |u: &Url| {
                    u.scheme() == to.scheme()
                        && u.host_str() == to.host_str()
                        && u.port_or_known_default() == to.port_or_known_default()
                        && u.path() == to.path()
                };
                self.target.iter().chain(&self.html_form).any(same)
            }
            _ => false,
        }
    }
}

/// A site as a Login writes it, `host`, `host:port`, `[v6]` or `[v6]:port`: its host (without
/// brackets) and port.
fn split_site(entry: &str) -> (&str, Option<u16>) {
    let entry = entry.trim();
    if let Some(rest) = entry.strip_prefix('[') {
        if let Some((h, tail)) = rest.split_once(']') {
            return (h, tail.strip_prefix(':').and_then(|p| p.parse().ok()));
        }
    }
    match entry.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => match p.parse() {
            Ok(p) => (h, Some(p)),
            Err(_) => (entry, None),
        },
        _ => (entry, None),
    }
}

/// The `Cookie` header value `jar` has for `url`; empty when it has none.
fn cookie_header(jar: &CookieStore, url: &Url) -> String {
    let mut out = String::new();
    for (name, value) in jar.get_request_values(url) {
        if !out.is_empty() {
            out.push_str("; ");
        }
        out.push_str(name);
        out.push('=');
        out.push_str(value);
    }
    out
}

/// Keeps the `Set-Cookie` fields of `resp` to `url` in `jar` (one a field: RFC 6265 3).
fn keep_cookies(jar: &mut CookieStore, url: &Url, resp: &Response) {
    for (name, value) in &resp.headers {
        if name == "set-cookie" {
            if let Ok(v) = std::str::from_utf8(value) {
                if let Err(e) = jar.parse(v, url) {
                    debug!("{url}: cookie {v:?} not kept: {e}");
                }
            }
        }
    }
}

/// A request sent to a Login's sites, kept until its answer.
struct Sent {
    collection: Vec<u8>,
    login: usize,
    session: u64,
    /// Already sent again after a relogin.
    again: bool,
    req: FetchRequest,
}

/// A login for the worker to make.
struct Job {
    collection: Vec<u8>,
    login: usize,
    session: u64,
    cfg: Login,
    target: Url,
    preload: Option<Url>,
    html_form: Option<Url>,
    /// A host name of the Login's sites and the address the node crawls it at, for a form on
    /// that host (which a name lookup might answer otherwise, or not at all).
    known: Option<(String, IpAddr)>,
}

/// What a login came to.
pub struct Done {
    collection: Vec<u8>,
    login: usize,
    session: u64,
    result: Result<CookieStore, String>,
}

/// The form logins of a node's collections.
pub struct Logins {
    states: HashMap<Vec<u8>, Vec<State>>,
    sent: HashMap<u64, Sent>,
    user_agent: String,
    jobs: Option<Sender<Job>>,
    done_tx: Sender<Done>,
    done: Receiver<Done>,
}

impl Logins {
    /// No logins yet; the worker starts with the first login to make.
    pub fn new(user_agent: &str) -> Logins {
        let (done_tx, done) = unbounded();
        Logins {
            states: HashMap::new(),
            sent: HashMap::new(),
            user_agent: user_agent.to_string(),
            jobs: None,
            done_tx,
            done,
        }
    }

    /// True when some collection has a Login (else nothing here is looked at a request).
    pub fn active(&self) -> bool {
        !self.states.is_empty()
    }

    /// Logins finished by the worker, for the node's `select!` ([`Logins::finish`]).
    pub fn done(&self) -> &Receiver<Done> {
        &self.done
    }

    /// Takes `collection`'s configuration: its Logins, kept as they stand when they did not
    /// change. Returns the requests held for Logins that are gone, to send as they are.
    pub fn configure(&mut self, collection: &[u8], cfg: &CollectionConfig) -> Vec<FetchRequest> {
        let same = self.states.get(collection).is_some_and(|s| {
            s.len() == cfg.logins.len() && s.iter().zip(&cfg.logins).all(|(s, l)| &s.cfg == l)
        });
        if same || (cfg.logins.is_empty() && !self.states.contains_key(collection)) {
            return Vec::new();
        }
        let released = self.remove(collection);
        if !cfg.logins.is_empty() {
            let states = cfg
                .logins
                .iter()
                .map(|l| State::new(collection, l.clone()))
                .collect();
            self.states.insert(collection.to_vec(), states);
        }
        released
    }

    /// Forgets `collection`'s Logins; returns the requests they held.
    pub fn remove(&mut self, collection: &[u8]) -> Vec<FetchRequest> {
        self.sent.retain(|_, s| s.collection != collection);
        self.states
            .remove(collection)
            .map(|states| {
                states
                    .into_iter()
                    .flat_map(|s| s.held.into_iter().map(|(r, _)| r))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A request of `collection`'s crawl: `Some` to send now (with the session's cookies when
    /// its site has a Login), `None` when it waits for a login.
    pub fn admit(
        &mut self,
        collection: &[u8],
        req: FetchRequest,
        now: f64,
    ) -> Option<FetchRequest> {
        let Some(states) = self.states.get_mut(collection) else {
            return Some(req);
        };
        let Some(i) = states.iter().position(|s| s.covers(&req.url)) else {
            return Some(req);
        };
        let s = &mut states[i];
        let start = match s.phase {
            _ if s.target.is_none() => false,
            Phase::Out => true,
            Phase::In(at) => now - at >= s.cfg.ttl,
            Phase::Failed(until) => now >= until,
            Phase::Busy => {
                s.held.push((req, false));
                return None;
            }
        };
        if start {
            let known = req
                .url
                .host_str()
                .map(|h| (h.to_ascii_lowercase(), req.addr.ip()));
            s.held.push((req, false));
            self.start(collection, i, known);
            return None;
        }
        Some(self.send(collection, i, req, false))
    }

    /// `req` to Login `i`'s sites with the session's cookies, kept until its answer.
    fn send(
        &mut self,
        collection: &[u8],
        i: usize,
        req: FetchRequest,
        again: bool,
    ) -> FetchRequest {
        let Some(s) = self.states.get(collection).and_then(|s| s.get(i)) else {
            return req;
        };
        let req = s.with_cookies(req);
        let sent = Sent {
            collection: collection.to_vec(),
            login: i,
            session: s.session,
            again,
            req: req.clone(),
        };
        self.sent.insert(req.id, sent);
        req
    }

    /// Hands Login `i` of `collection` to the worker.
    fn start(&mut self, collection: &[u8], i: usize, known: Option<(String, IpAddr)>) {
        let Some(s) = self.states.get_mut(collection).and_then(|s| s.get_mut(i)) else {
            return;
        };
        let Some(target) = s.target.clone() else {
            return;
        };
        s.phase = Phase::Busy;
        s.session += 1;
        s.good = false;
        let job = Job {
            collection: collection.to_vec(),
            login: i,
            session: s.session,
            cfg: s.cfg.clone(),
            target,
            preload: s.preload.clone(),
            html_form: s.html_form.clone(),
            known,
        };
        info!(
            "collection {}: logging in ({}) at {}",
            String::from_utf8_lossy(collection),
            s.cfg.name,
            job.target
        );
        let jobs = self
            .jobs
            .get_or_insert_with(|| spawn_worker(&self.user_agent, self.done_tx.clone()));
        if jobs.send(job).is_err() {
            warn!("the login worker is gone");
        }
    }

    /// Takes a finished login: its session's cookies, and the requests that waited for it,
    /// returned to send.
    pub fn finish(&mut self, d: Done, now: f64) -> Vec<FetchRequest> {
        let name = String::from_utf8_lossy(&d.collection).into_owned();
        let Some(s) = self
            .states
            .get_mut(&d.collection)
            .and_then(|s| s.get_mut(d.login))
        else {
            return Vec::new();
        };
        if s.session != d.session {
            return Vec::new();
        }
        match d.result {
            Ok(jar) => {
                info!(
                    "collection {name}: logged in ({}): {} cookies",
                    s.cfg.name,
                    jar.iter_unexpired().count()
                );
                s.jar = jar;
                s.phase = Phase::In(now);
            }
            Err(e) => {
                warn!(
                    "collection {name}: login {} failed: {e}; its sites are crawled without it, \
                     another try in {RETRY_AFTER} s",
                    s.cfg.name
                );
                s.phase = Phase::Failed(now + RETRY_AFTER);
            }
        }
        let held = std::mem::take(&mut s.held);
        held.into_iter()
            .map(|(req, again)| self.send(&d.collection, d.login, req, again))
            .collect()
    }

    /// Reads the answer to a request before the crawl does: keeps its cookies when it went to a
    /// Login's sites, and when it shows the session gone (with `relogin_if_failed`), holds the
    /// request for a new login, or sends it again at once when a newer session is there.
    pub fn observe(&mut self, r: &FetchResult, now: f64) -> Seen {
        let Some(sent) = self.sent.remove(&r.id) else {
            return Seen::Crawl;
        };
        let Ok(resp) = &r.result else {
            return Seen::Crawl;
        };
        let Some(s) = self
            .states
            .get_mut(&sent.collection)
            .and_then(|s| s.get_mut(sent.login))
        else {
            return Seen::Crawl;
        };
        keep_cookies(&mut s.jar, &r.url, resp);
        if !s.shows_logged_out(&r.url, resp) {
            if sent.session == s.session {
                s.good = true;
            }
            return Seen::Crawl;
        }
        if !s.cfg.relogin_if_failed || sent.again || s.target.is_none() {
            return Seen::Crawl;
        }
        let name = String::from_utf8_lossy(&sent.collection).into_owned();
        let mut req = sent.req;
        req.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case("cookie"));
        match s.phase {
            // A login is under way: the request waits for it.
            Phase::Busy => {
                s.held.push((req, true));
                return Seen::Held;
            }
            // Logged in again since the request went: once more with the new session.
            Phase::In(_) if sent.session != s.session => {
                let again = self.send(&sent.collection, sent.login, req, true);
                return Seen::Again(Box::new(again));
            }
            Phase::In(_) if s.good => {}
            Phase::In(_) => {
                warn!(
                    "collection {name}: login {}: {} shows the session gone before any page \
                     came through it; not logging in again for {RETRY_AFTER} s",
                    s.cfg.name, r.url
                );
                s.phase = Phase::Failed(now + RETRY_AFTER);
                return Seen::Crawl;
            }
            Phase::Out | Phase::Failed(_) => return Seen::Crawl,
        }
        info!(
            "collection {name}: login {}: {} shows the session gone; logging in again",
            s.cfg.name, r.url
        );
        let known = req
            .url
            .host_str()
            .map(|h| (h.to_ascii_lowercase(), req.addr.ip()));
        s.held.push((req, true));
        self.start(&sent.collection, sent.login, known);
        Seen::Held
    }
}

/// What [`Logins::observe`] made of an answer.
#[derive(Debug)]
pub enum Seen {
    /// The crawl reads it.
    Crawl,
    /// The request waits for a new login: the crawl does not see this answer.
    Held,
    /// The request is to be sent again now, as given: the crawl does not see this answer.
    Again(Box<FetchRequest>),
}

/// Starts the login worker: a thread with a fetcher of its own, making one login at a time.
fn spawn_worker(user_agent: &str, done: Sender<Done>) -> Sender<Job> {
    let (tx, jobs) = unbounded::<Job>();
    let user_agent = user_agent.to_string();
    let spawned = std::thread::Builder::new()
        .name("login".into())
        .spawn(move || {
            let fetcher = match Fetcher::spawn(FetcherOptions {
                user_agent,
                max_connections: 4,
                ..FetcherOptions::default()
            }) {
                Ok(f) => f,
                Err(e) => {
                    warn!("the login worker's fetcher did not start: {e}");
                    for job in jobs {
                        let result = Err(format!("no fetcher: {e}"));
                        let _ = done.send(Done::of(&job, result));
                    }
                    return;
                }
            };
            let mut client = Client {
                fetcher,
                next_id: 0,
            };
            for job in jobs {
                let result = client.log_in(&job);
                if done.send(Done::of(&job, result)).is_err() {
                    break;
                }
            }
            client.fetcher.shutdown();
        });
    if let Err(e) = spawned {
        warn!("the login worker did not start: {e}");
    }
    tx
}

impl Done {
    fn of(job: &Job, result: Result<CookieStore, String>) -> Done {
        Done {
            collection: job.collection.clone(),
            login: job.login,
            session: job.session,
            result,
        }
    }
}

/// The login worker's fetching, one request at a time.
struct Client {
    fetcher: Fetcher,
    next_id: u64,
}

impl Client {
    /// Makes `job`'s login: preload, form page, submission; the cookies they set.
    fn log_in(&mut self, job: &Job) -> Result<CookieStore, String> {
        let mut jar = CookieStore::new();
        if let Some(url) = &job.preload {
            self.get(job, &mut jar, url)?;
        }
        let mut form = None;
        if let Some(page) = &job.html_form {
            let body = self.get(job, &mut jar, page)?;
            let forms = form::forms(&body);
            form = form::login_form(&forms, page, &job.target).cloned();
            if form.is_none() {
                warn!("login {}: {page} has no form", job.cfg.name);
            }
        }
        let fields = form::submission(&job.cfg.parameters, form.as_ref(), job.cfg.autofill);
        let encoded = form::urlencoded(&fields);
        let mut url = job.target.clone();
        let mut headers = Vec::new();
        let post = if job.cfg.action.eq_ignore_ascii_case("GET") {
            let query = match url.query() {
                Some(q) if !q.is_empty() && !encoded.is_empty() => format!("{q}&{encoded}"),
                Some(q) if encoded.is_empty() => q.to_string(),
                _ => encoded,
            };
            url.set_query(Some(&query));
            None
        } else {
            headers.push((
                "Content-Type".to_string(),
                "application/x-www-form-urlencoded".to_string(),
            ));
            Some(encoded.into_bytes())
        };
        if let Some(page) = &job.html_form {
            headers.push(("Referer".to_string(), page.to_string()));
        }
        let resp = self.fetch(job, &mut jar, &url, headers, post)?;
        if resp.status >= 400 {
            return Err(format!("{url} answered {}", resp.status));
        }
        debug!("login {}: {url} answered {}", job.cfg.name, resp.status);
        Ok(jar)
    }

    /// GET `url` with the jar's cookies; its body when it answers below 400.
    fn get(&mut self, job: &Job, jar: &mut CookieStore, url: &Url) -> Result<Vec<u8>, String> {
        let resp = self.fetch(job, jar, url, Vec::new(), None)?;
        if resp.status >= 400 {
            return Err(format!("{url} answered {}", resp.status));
        }
        Ok(resp.body)
    }

    /// One request with the jar's cookies; keeps the cookies of its answer.
    fn fetch(
        &mut self,
        job: &Job,
        jar: &mut CookieStore,
        url: &Url,
        mut headers: Vec<(String, String)>,
        post: Option<Vec<u8>>,
    ) -> Result<Response, String> {
        let addr = address(url, job.known.as_ref())?;
        let cookie = cookie_header(jar, url);
        if !cookie.is_empty() {
            headers.push(("Cookie".into(), cookie));
        }
        self.next_id += 1;
        let id = self.next_id;
        let req = FetchRequest {
            id,
            url: url.clone(),
            addr,
            headers,
            max_body: MAX_PAGE,
            connect_timeout: CONNECT_TIMEOUT,
            timeout: TIMEOUT,
            head: false,
            http10: false,
            post,
        };
        self.fetcher
            .submit(req)
            .map_err(|e| format!("{url}: {e}"))?;
        let until = Instant::now() + CONNECT_TIMEOUT + TIMEOUT + Duration::from_secs(5);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let r = self
                .fetcher
                .results
                .recv_timeout(left)
                .map_err(|_| format!("{url}: no answer"))?;
            if r.id != id {
                continue;
            }
            let resp = r.result.map_err(|e| format!("{url}: {e}"))?;
            keep_cookies(jar, url, &resp);
            return Ok(resp);
        }
    }
}

/// Where to connect for `url`: its IP address, the address the node crawls its host at, or
/// the system resolver's first answer.
fn address(url: &Url, known: Option<&(String, IpAddr)>) -> Result<SocketAddr, String> {
    let port = url
        .port_or_known_default()
        .ok_or_else(|| format!("{url}: no port"))?;
    let host = url.host_str().ok_or_else(|| format!("{url}: no host"))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    if let Some((h, ip)) = known {
        if h.eq_ignore_ascii_case(host) {
            return Ok(SocketAddr::new(*ip, port));
        }
    }
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("{host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}: no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn login(site: &str, sites: &[&str]) -> State {
        let cfg = Login {
            name: "l".into(),
            preload: None,
            scheme: "http".into(),
            site: site.into(),
            form: "/login".into(),
            action: "POST".into(),
            parameters: Vec::new(),
            sites: sites.iter().map(|s| s.to_string()).collect(),
            ttl: 7200.0,
            html_form: Some("http://h.test/account/form".into()),
            autofill: true,
            relogin_if_failed: true,
        };
        State::new(b"c", cfg)
    }

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn sites_are_hosts_with_or_without_a_port() {
        assert_eq!(split_site("h.test"), ("h.test", None));
        assert_eq!(split_site(" h.test:8080 "), ("h.test", Some(8080)));
        assert_eq!(split_site("[::1]:81"), ("::1", Some(81)));
        assert_eq!(split_site("[::1]"), ("::1", None));
        assert_eq!(split_site("::1"), ("::1", None));
        let s = login("h.test:8080", &["a.test", "B.test:81", "[::1]"]);
        assert!(s.covers(&url("http://a.test/x")));
        assert!(s.covers(&url("https://A.TEST:9/x")));
        assert!(s.covers(&url("http://b.test:81/")));
        assert!(!s.covers(&url("http://b.test/")));
        assert!(s.covers(&url("http://[::1]:5/")));
        assert!(!s.covers(&url("http://h.test:8080/")));
        // Without sites: the form's own host.
        let s = login("h.test:8080", &[]);
        assert!(s.covers(&url("http://h.test:8080/p")));
        assert!(!s.covers(&url("http://h.test/p")));
    }

    fn response(status: u16, location: Option<&str>) -> Response {
        Response {
            status,
            headers: location
                .map(|l| ("location".to_string(), l.as_bytes().to_vec()))
                .into_iter()
                .collect(),
            body: Vec::new(),
            truncated: false,
            reused_connection: false,
            wire: None,
        }
    }

    #[test]
    fn a_session_is_gone_at_401_403_or_a_redirect_to_the_form() {
        let s = login("h.test", &[]);
        let page = url("http://h.test/p/1");
        for (status, location, gone) in [
            (200, None, false),
            (404, None, false),
            (401, None, true),
            (403, None, true),
            (302, Some("/login?next=/p/1"), true),
            (303, Some("http://H.test:80/account/form"), true),
            (302, Some("../account/form"), true),
            (301, Some("/p/2"), false),
            (302, Some("http://other.test/login"), false),
            (302, None, false),
        ] {
            assert_eq!(
                s.shows_logged_out(&page, &response(status, location)),
                gone,
                "{status} {location:?}"
            );
        }
    }

    #[test]
    fn cookies_set_by_answers_go_with_requests_they_match() {
        let mut jar = CookieStore::new();
        let mut resp = response(200, None);
        for c in ["session=abc; Path=/", "pref=1; Path=/docs", "bad"] {
            resp.headers
                .push(("set-cookie".into(), c.as_bytes().to_vec()));
        }
        keep_cookies(&mut jar, &url("http://h.test/login"), &resp);
        assert_eq!(cookie_header(&jar, &url("http://h.test/p")), "session=abc");
        let docs = cookie_header(&jar, &url("http://h.test/docs/a"));
        assert!(
            docs.contains("session=abc") && docs.contains("pref=1"),
            "{docs}"
        );
        assert_eq!(cookie_header(&jar, &url("http://other.test/")), "");
    }

    #[test]
    fn a_login_connects_to_an_ip_or_where_the_node_crawls_its_host() {
        let known = ("h.test".to_string(), IpAddr::from([127, 9, 9, 9]));
        assert_eq!(
            address(&url("http://127.1.2.3:81/x"), Some(&known)).unwrap(),
            "127.1.2.3:81".parse().unwrap()
        );
        assert_eq!(
            address(&url("https://h.test/login"), Some(&known)).unwrap(),
            "127.9.9.9:443".parse().unwrap()
        );
        assert_eq!(
            address(&url("http://[::1]:82/"), None).unwrap(),
            "[::1]:82".parse().unwrap()
        );
    }
}
