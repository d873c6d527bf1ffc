//! Form logins (docs/collection-config.md "Login"; the `logins` dict of MS-FSCMT 2.2.2.3.1):
//! before a node fetches anything from a site a collection's Login names, it logs in, and every
//! request to those sites then carries the session's cookies.
//!
//! A login is three steps, made by a worker thread with a fetcher of its own (so a slow login
//! server or a name lookup never stalls the node's loop; four workers, so it stalls few other
//! Logins): the
//! `preload` URI fetched for its cookies, the `html_form` page fetched for its cookies and its
//! form's fields (`autofill`), both following redirects, then the form submitted to
//! `scheme://site/form` with `action` (POST, urlencoded, or GET with the fields as the query).
//! A submission answered below 400 is a session (a redirect it answers is followed for the
//! cookies that page sets): its cookies (RFC 6265, kept by
//! `cookie_store`) go with every request to the Login's `sites` until `ttl` seconds have
//! passed, when the next request logs in again. Requests to those sites made while a login
//! runs wait for it. A login that fails is logged and tried again a minute later; the sites
//! are crawled meanwhile with what cookies there are.
//!
//! With `relogin_if_failed`, an answer showing the session gone (401, 403, or a redirect to the
//! form or the `html_form` page) of a request that went with the current session logs in again
//! and sends that request once more. A session that shows gone before any page came through it
//! (wrong credentials), or whose relogins did not help three times in a row (pages forbidden
//! to the account), is not renewed by answers before a minute has passed.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cookie_store::CookieStore;
use crawlfleet_core::config::{CollectionConfig, Login};
use crawlfleet_core::crawl::form::{self, same_page};
use crawlfleet_net::fetch::{FetchRequest, FetchResult, Fetcher, FetcherOptions, Response};
use crossbeam_channel::{unbounded, Receiver, Sender};
use log::{debug, info, warn};
use parking_lot::Mutex;
use url::Url;

/// Seconds before a failed login (or one whose session showed gone at once) is tried again.
const RETRY_AFTER: f64 = 60.0;
/// Most bytes of the preload and form pages kept.
const MAX_PAGE: usize = 1 << 20;
/// Limits on each of a login's requests.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const TIMEOUT: Duration = Duration::from_secs(30);
/// Login worker threads of a node: logins of as many Logins run at once (one Login's are
/// one after another), so a slow login server holds up few others.
const WORKERS: usize = 4;
/// Relogins in a row that did not help before answers start no login for a while.
const WASTED_IN_A_ROW: u32 = 3;
/// Seconds a login may wait and run before its requests go without it: a safety net for a
/// worker that can no longer answer, well past what logins queued behind a few slow ones take
/// (each login is at most 19 requests of 45 s).
const BUSY_LIMIT: f64 = 1800.0;
/// Most redirects followed to the preload and form pages.
const MAX_REDIRECTS: usize = 5;

/// Where a Login stands.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// Not logged in: the next request to its sites starts a login.
    Out,
    /// The worker is logging in, since this time.
    Busy(f64),
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
    /// The login's number (one count for every Login of the node): a request sent with an
    /// older session does not start another, an old login's end is not taken for this one's.
    session: u64,
    /// A page (an answer of 2xx) came through the current session.
    good: bool,
    /// Requests sent again after a relogin that showed the session gone again, in a row: the
    /// relogins did not help (a page forbidden to the account, say).
    wasted: u32,
    /// No answer starts a login before this time (after three wasted relogins).
    quiet_until: f64,
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
            wasted: 0,
            quiet_until: 0.0,
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

    /// `req` with the session's cookies for its URL (RFC 6265 5.4), added to the `Cookie`
    /// header the collection's `headers` give, if any.
    fn with_cookies(&self, mut req: FetchRequest) -> FetchRequest {
        add_cookies(&mut req.headers, cookie_header(&self.jar, &req.url));
        req
    }

    /// True when a login made at `at` is past the Login's `ttl` at `now` (a ttl of 0: never).
    fn expired(&self, at: f64, now: f64) -> bool {
        self.cfg.ttl > 0.0 && now - at >= self.cfg.ttl
    }

    /// True when `resp` to `url` shows the session gone: 401, 403, or a redirect to the
    /// Login's form or its `html_form` page.
    fn shows_logged_out(&self, url: &Url, resp: &Response) -> bool {
        match resp.status {
            401 | 403 => true,
            300..=399 => redirect_target(url, resp)
                .is_some_and(|to| at_the_form(self.target.as_ref(), self.html_form.as_ref(), &to)),
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

/// Adds `cookie` (a `Cookie` header's value) to `headers`: to the `Cookie` header there is
/// (one a request: RFC 6265 5.4), else as one.
fn add_cookies(headers: &mut Vec<(String, String)>, cookie: String) {
    if cookie.is_empty() {
        return;
    }
    match headers
        .iter_mut()
        .find(|(n, _)| n.eq_ignore_ascii_case("cookie"))
    {
        Some((_, v)) => {
            v.push_str("; ");
            v.push_str(&cookie);
        }
        None => headers.push(("Cookie".into(), cookie)),
    }
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
    /// The request as the crawl made it (without the session's cookies).
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
    /// The host of the request that needed the login and the address the node crawls it at,
    /// for a form on that host (which a name lookup might answer otherwise, or not at all).
    known: Option<Known>,
    /// The headers the collection sends (its User-Agent, its `headers`).
    headers: Vec<(String, String)>,
}

/// What a login came to.
pub struct Done {
    collection: Vec<u8>,
    login: usize,
    session: u64,
    result: Result<CookieStore, String>,
}

/// What a collection's logins did since the statistics last took it (collection statistics
/// `Logins`, `LoginFailures`, `Relogins`: continuous, beyond MS-FSCADM 2.2.4.10).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoginCounts {
    /// Logins that gave a session.
    pub made: u64,
    /// Logins that failed.
    pub failed: u64,
    /// Logins started because an answer showed the session gone.
    pub relogins: u64,
}

/// The form logins of a node's collections.
pub struct Logins {
    states: HashMap<Vec<u8>, Vec<State>>,
    counts: HashMap<Vec<u8>, LoginCounts>,
    sent: HashMap<u64, Sent>,
    user_agent: String,
    jobs: Option<Sender<Job>>,
    done_tx: Sender<Done>,
    done: Receiver<Done>,
    /// Logins started, all Logins.
    sessions: u64,
    /// The sessions of logins started and not yet ended or replaced: the worker skips a job
    /// whose Login was replaced while it waited.
    live: Arc<Mutex<HashSet<u64>>>,
}

impl Logins {
    /// No logins yet; the worker starts with the first login to make.
    pub fn new(user_agent: &str) -> Logins {
        let (done_tx, done) = unbounded();
        Logins {
            states: HashMap::new(),
            counts: HashMap::new(),
            sent: HashMap::new(),
            user_agent: user_agent.to_string(),
            jobs: None,
            done_tx,
            done,
            sessions: 0,
            live: Arc::default(),
        }
    }

    /// True when some collection has a Login (else nothing here is looked at a request).
    pub fn active(&self) -> bool {
        !self.states.is_empty()
    }

    /// What `collection`'s logins did since the last call.
    pub fn take_counts(&mut self, collection: &[u8]) -> LoginCounts {
        self.counts.remove(collection).unwrap_or_default()
    }

    /// Logins finished by the worker, for the node's `select!` ([`Logins::finish`]).
    pub fn done(&self) -> &Receiver<Done> {
        &self.done
    }

    /// Takes `collection`'s configuration: its Logins, kept as they stand when they did not
    /// change. The requests that waited for a replaced Login are admitted again under the new
    /// ones; those that go now are returned.
    pub fn configure(
        &mut self,
        collection: &[u8],
        cfg: &CollectionConfig,
        now: f64,
    ) -> Vec<FetchRequest> {
        let same = self.states.get(collection).is_some_and(|s| {
            s.len() == cfg.logins.len() && s.iter().zip(&cfg.logins).all(|(s, l)| &s.cfg == l)
        });
        if same || (cfg.logins.is_empty() && !self.states.contains_key(collection)) {
            return Vec::new();
        }
        let waiting = self.remove(collection);
        if !cfg.logins.is_empty() {
            let states = cfg
                .logins
                .iter()
                .map(|l| State::new(collection, l.clone()))
                .collect();
            self.states.insert(collection.to_vec(), states);
        }
        waiting
            .into_iter()
            .filter_map(|r| self.admit(collection, r, now))
            .collect()
    }

    /// Forgets `collection`'s Logins; returns the requests that waited for them, as the crawl
    /// made them.
    pub fn remove(&mut self, collection: &[u8]) -> Vec<FetchRequest> {
        self.sent.retain(|_, s| s.collection != collection);
        self.states
            .remove(collection)
            .map(|states| {
                let mut live = self.live.lock();
                for s in &states {
                    live.remove(&s.session);
                }
                drop(live);
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
            Phase::In(at) => s.expired(at, now),
            Phase::Failed(until) => now >= until,
            Phase::Busy(_) => {
                s.held.push((req, false));
                return None;
            }
        };
        if start {
            let (known, headers) = job_context(&req);
            s.held.push((req, false));
            self.start(collection, i, known, headers, now);
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
        let sent = Sent {
            collection: collection.to_vec(),
            login: i,
            session: s.session,
            again,
            req: req.clone(),
        };
        let req = s.with_cookies(req);
        self.sent.insert(req.id, sent);
        req
    }

    /// Hands Login `i` of `collection` to the worker (started, or started again, here). When
    /// no worker takes it, the login ends at once as failed, through the same channel.
    fn start(
        &mut self,
        collection: &[u8],
        i: usize,
        known: Option<Known>,
        headers: Vec<(String, String)>,
        now: f64,
    ) {
        let Some(s) = self.states.get_mut(collection).and_then(|s| s.get_mut(i)) else {
            return;
        };
        let Some(target) = s.target.clone() else {
            return;
        };
        self.sessions += 1;
        s.phase = Phase::Busy(now);
        s.session = self.sessions;
        self.live.lock().insert(s.session);
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
            headers,
        };
        info!(
            "collection {}: logging in ({}) at {}",
            String::from_utf8_lossy(collection),
            s.cfg.name,
            job.target
        );
        let mut job = Some(job);
        for _ in 0..2 {
            let jobs = self.jobs.get_or_insert_with(|| {
                spawn_worker(&self.user_agent, self.done_tx.clone(), self.live.clone())
            });
            match jobs.send(job.take().expect("a job")) {
                Ok(()) => return,
                Err(back) => {
                    warn!("the login worker is gone; starting another");
                    self.jobs = None;
                    job = Some(back.0);
                }
            }
        }
        if let Some(job) = job {
            let failed = Done::of(&job, Err("no login worker".into()));
            let _ = self.done_tx.send(failed);
        }
    }

    /// Ends as failed every login running for longer than [`BUSY_LIMIT`] (a worker that can no
    /// longer answer): the requests that waited for them, to send.
    pub fn expire(&mut self, now: f64) -> Vec<FetchRequest> {
        let overdue: Vec<(Vec<u8>, usize, u64)> = self
            .states
            .iter()
            .flat_map(|(c, states)| {
                states
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, s)| match s.phase {
                        Phase::Busy(since) if now - since > BUSY_LIMIT => {
                            Some((c.clone(), i, s.session))
                        }
                        _ => None,
                    })
            })
            .collect();
        let mut out = Vec::new();
        for (collection, login, session) in overdue {
            let result = Err(format!("no end in {BUSY_LIMIT} s"));
            let d = Done {
                collection,
                login,
                session,
                result,
            };
            out.extend(self.finish(d, now));
        }
        out
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
        self.live.lock().remove(&d.session);
        match d.result {
            Ok(jar) => {
                info!(
                    "collection {name}: logged in ({}): {} cookies",
                    s.cfg.name,
                    jar.iter_unexpired().count()
                );
                s.jar = jar;
                s.phase = Phase::In(now);
                self.counts.entry(d.collection.clone()).or_default().made += 1;
            }
            Err(e) => {
                warn!(
                    "collection {name}: login {} failed: {e}; its sites are crawled without it, \
                     another try in {RETRY_AFTER} s",
                    s.cfg.name
                );
                s.phase = Phase::Failed(now + RETRY_AFTER);
                self.counts.entry(d.collection.clone()).or_default().failed += 1;
            }
        }
        let held = std::mem::take(&mut s.held);
        held.into_iter()
            .map(|(req, again)| self.send(&d.collection, d.login, req, again))
            .collect()
    }

    /// Reads the answer to a request before the crawl does: keeps its cookies when it went to a
    /// Login's sites with the current session, and when it shows the session gone (with
    /// `relogin_if_failed`), holds the request for a new login, or sends it again at once
    /// when a newer session is there.
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
        let current = sent.session == s.session;
        if current {
            // An older session's answers (a slow page of a dead session) set nothing now.
            keep_cookies(&mut s.jar, &r.url, resp);
        }
        let gone = s.shows_logged_out(&r.url, resp);
        if sent.again {
            // A request sent again after a relogin: did the relogin help? Each third one in a
            // row that did not quiets answer-started logins, twice as long each time.
            if gone {
                s.wasted += 1;
                if s.wasted % WASTED_IN_A_ROW == 0 {
                    let quiet =
                        RETRY_AFTER * f64::from(1u32 << (s.wasted / WASTED_IN_A_ROW - 1).min(6));
                    warn!(
                        "collection {}: login {}: pages still show the session gone after \
                         logging in again; no login for them for {quiet} s",
                        String::from_utf8_lossy(&sent.collection),
                        s.cfg.name
                    );
                    s.quiet_until = now + quiet;
                }
            } else {
                s.wasted = 0;
            }
        }
        if !gone {
            if current && (200..300).contains(&resp.status) {
                s.good = true;
            }
            return Seen::Crawl;
        }
        if !s.cfg.relogin_if_failed || sent.again || s.target.is_none() || now < s.quiet_until {
            return Seen::Crawl;
        }
        let name = String::from_utf8_lossy(&sent.collection).into_owned();
        let req = sent.req;
        match s.phase {
            // A login is under way: the request waits for it.
            Phase::Busy(_) => {
                s.held.push((req, true));
                return Seen::Held;
            }
            // Logged in again since the request went: once more with the new session.
            Phase::In(_) if !current => {
                let again = self.send(&sent.collection, sent.login, req, true);
                return Seen::Again(Box::new(again));
            }
            Phase::In(_) if s.good => {}
            Phase::In(_) => {
                // The session may be fine and the page forbidden: answers start no login for
                // a minute; pages that come through meanwhile make the session good.
                warn!(
                    "collection {name}: login {}: {} shows the session gone before any page \
                     came through it; no login for such answers for {RETRY_AFTER} s",
                    s.cfg.name, r.url
                );
                s.quiet_until = now + RETRY_AFTER;
                return Seen::Crawl;
            }
            Phase::Out | Phase::Failed(_) => return Seen::Crawl,
        }
        info!(
            "collection {name}: login {}: {} shows the session gone; logging in again",
            s.cfg.name, r.url
        );
        let (known, headers) = job_context(&req);
        s.held.push((req, true));
        self.counts
            .entry(sent.collection.clone())
            .or_default()
            .relogins += 1;
        self.start(&sent.collection, sent.login, known, headers, now);
        Seen::Held
    }
}

/// A host and the address the node crawls it at.
type Known = (String, IpAddr);

/// What a login started by `req` takes from it: its host and the address the node crawls it
/// at, and the collection's headers (User-Agent, `headers`) without the conditional ones and
/// those the login's requests set.
fn job_context(req: &FetchRequest) -> (Option<Known>, Vec<(String, String)>) {
    let known = req
        .url
        .host_str()
        .map(|h| (h.to_ascii_lowercase(), req.addr.ip()));
    let headers = req
        .headers
        .iter()
        .filter(|(n, _)| {
            // Conditions of the page's fetch, and what the login's requests set themselves.
            ![
                "if-none-match",
                "if-modified-since",
                "content-length",
                "transfer-encoding",
                "content-type",
                "referer",
            ]
            .iter()
            .any(|c| n.eq_ignore_ascii_case(c))
        })
        .cloned()
        .collect();
    (known, headers)
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

/// Starts the login workers: [`WORKERS`] threads taking logins from one queue, each with a
/// fetcher of its own made at its first login (made again for the next login when it could
/// not start), making one login at a time, skipping those whose Login was replaced while they
/// waited (their sessions are no longer in `live`). The jobs' sender is the caller's; when no
/// thread could start, it finds the queue closed.
fn spawn_worker(
    user_agent: &str,
    done: Sender<Done>,
    live: Arc<Mutex<HashSet<u64>>>,
) -> Sender<Job> {
    let (tx, jobs) = unbounded::<Job>();
    for n in 0..WORKERS {
        let (jobs, done, live) = (jobs.clone(), done.clone(), live.clone());
        let user_agent = user_agent.to_string();
        let spawned = std::thread::Builder::new()
            .name("login".into())
            .spawn(move || work(&user_agent, &jobs, &done, &live));
        if let Err(e) = spawned {
            warn!("login worker {n} did not start: {e}");
        }
    }
    tx
}

/// One login worker's loop, until the jobs' sender is dropped.
fn work(user_agent: &str, jobs: &Receiver<Job>, done: &Sender<Done>, live: &Mutex<HashSet<u64>>) {
    let mut client: Option<Client> = None;
    for job in jobs {
        if !live.lock().contains(&job.session) {
            let _ = done.send(Done::of(&job, Err("replaced".into())));
            continue;
        }
        if client.is_none() {
            match Fetcher::spawn(FetcherOptions {
                user_agent: user_agent.to_string(),
                max_connections: 4,
                ..FetcherOptions::default()
            }) {
                Ok(fetcher) => {
                    client = Some(Client {
                        fetcher,
                        next_id: 0,
                    })
                }
                Err(e) => {
                    warn!("the login worker's fetcher did not start: {e}");
                    let _ = done.send(Done::of(&job, Err(format!("no fetcher: {e}"))));
                    continue;
                }
            }
        }
        let Some(c) = client.as_mut() else { continue };
        // A panic in a login is that login's failure, not the worker's end.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.log_in(&job)))
            .unwrap_or_else(|_| Err("the login panicked".into()));
        if done.send(Done::of(&job, result)).is_err() {
            break;
        }
    }
    if let Some(c) = client {
        c.fetcher.shutdown();
    }
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
            let (body, page) = self.get(job, &mut jar, page)?;
            let forms = form::forms(&body);
            form = form::login_form(&forms, &page, &job.target).cloned();
            if form.is_none() {
                warn!("login {}: {page} has no form", job.cfg.name);
            }
        }
        let fields = form::submission(&job.cfg.parameters, form.as_ref(), job.cfg.autofill);
        let encoded = form::urlencoded(&fields);
        let mut url = job.target.clone();
        let mut headers = job.headers.clone();
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
        // The page a submission redirects to, as a browser goes there (RFC 9110 15.4: GET
        // after a POST's 301, 302 or 303; a 307 or 308 would repeat the POST, not done): some
        // sites set the session's cookies there. The session is the submission's answer; that
        // page only adds cookies, and a redirect back to the form (which may hand out a fresh
        // anonymous session) is not followed.
        let follow = redirect_target(&url, &resp).filter(|to| {
            matches!(resp.status, 301..=303)
                && !at_the_form(Some(&job.target), job.html_form.as_ref(), to)
        });
        if let Some(to) = follow {
            if let Err(e) = self.get(job, &mut jar, &to) {
                debug!("login {}: after the submission, {e}", job.cfg.name);
            }
        }
        Ok(jar)
    }

    /// GET `url` with the jar's cookies, following up to five redirects (each answer's
    /// cookies kept); the body and URL of the answer below 300.
    fn get(
        &mut self,
        job: &Job,
        jar: &mut CookieStore,
        url: &Url,
    ) -> Result<(Vec<u8>, Url), String> {
        let mut url = url.clone();
        for _ in 0..=MAX_REDIRECTS {
            let resp = self.fetch(job, jar, &url, job.headers.clone(), None)?;
            match resp.status {
                300..=399 => {
                    url = redirect_target(&url, &resp)
                        .ok_or_else(|| format!("{url} answered {} to nowhere", resp.status))?;
                }
                400.. => return Err(format!("{url} answered {}", resp.status)),
                _ => return Ok((resp.body, url)),
            }
        }
        Err(format!("{url}: more than {MAX_REDIRECTS} redirects"))
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
        add_cookies(&mut headers, cookie_header(jar, url));
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

/// True when `to` is a Login's form (`target`) or its form page (`html_form`).
fn at_the_form(target: Option<&Url>, html_form: Option<&Url>, to: &Url) -> bool {
    target
        .into_iter()
        .chain(html_form)
        .any(|f| same_page(f, to))
}

/// Where a 3xx answer to `url` sends: its `Location` resolved against `url`, when http(s).
fn redirect_target(url: &Url, resp: &Response) -> Option<Url> {
    if !(300..400).contains(&resp.status) {
        return None;
    }
    resp.header("location")
        .and_then(|l| std::str::from_utf8(l).ok())
        .and_then(|l| url.join(l.trim()).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https"))
}

/// Where to connect for `url`: its IP address, the address the node crawls its host at, or
/// the system resolver's first answer.
fn address(url: &Url, known: Option<&Known>) -> Result<SocketAddr, String> {
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

    /// A node's Logins with a worker that is this test: the jobs come out of the receiver.
    fn logins(cfg: &CollectionConfig) -> (Logins, Receiver<Job>) {
        let mut l = Logins::new("agent");
        let (tx, rx) = unbounded();
        l.jobs = Some(tx);
        assert!(l.configure(b"c", cfg, 0.0).is_empty());
        (l, rx)
    }

    fn config(password: &str, ttl: f64) -> CollectionConfig {
        let mut cfg = CollectionConfig::defaults("c");
        let mut s = login("h.test", &[]);
        s.cfg.parameters = vec![("pass".into(), password.into())];
        s.cfg.ttl = ttl;
        cfg.logins = vec![s.cfg];
        cfg
    }

    fn request(id: u64, u: &str) -> FetchRequest {
        FetchRequest {
            id,
            url: url(u),
            addr: "127.0.0.7:80".parse().unwrap(),
            headers: vec![
                ("User-Agent".into(), "collection-agent".into()),
                ("If-None-Match".into(), "\"x\"".into()),
            ],
            max_body: 1000,
            connect_timeout: TIMEOUT,
            timeout: TIMEOUT,
            head: false,
            http10: false,
            post: None,
        }
    }

    fn jar(cookie: &str) -> CookieStore {
        let mut j = CookieStore::new();
        j.parse(cookie, &url("http://h.test/login")).unwrap();
        j
    }

    fn answer(id: u64, u: &str, resp: Response) -> FetchResult {
        FetchResult {
            id,
            url: url(u),
            result: Ok(resp),
            started: Instant::now(),
            elapsed: Duration::ZERO,
            queued: Duration::ZERO,
            net_read: 0,
            net_written: 0,
        }
    }

    fn cookie(r: &FetchRequest) -> Option<&str> {
        r.headers
            .iter()
            .find(|(n, _)| n == "Cookie")
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn requests_wait_for_the_login_then_carry_its_cookies() {
        let (mut l, jobs) = logins(&config("p", 100.0));
        // Another host: not the Login's.
        let other = l
            .admit(b"c", request(9, "http://other.test/"), 0.0)
            .unwrap();
        assert_eq!(cookie(&other), None);
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        assert!(l.admit(b"c", request(2, "http://h.test/b"), 0.0).is_none());
        let job = jobs.try_recv().unwrap();
        assert!(jobs.try_recv().is_err(), "one login for both");
        assert_eq!(
            job.known,
            Some(("h.test".into(), "127.0.0.7".parse().unwrap()))
        );
        assert_eq!(
            job.headers,
            [("User-Agent".to_string(), "collection-agent".to_string())]
        );
        let go = l.finish(Done::of(&job, Ok(jar("s=1; Path=/"))), 1.0);
        assert_eq!(go.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2]);
        assert!(go.iter().all(|r| cookie(r) == Some("s=1")));
        let r = l.admit(b"c", request(3, "http://h.test/c"), 50.0).unwrap();
        assert_eq!(cookie(&r), Some("s=1"));
        // Past the ttl: the next request logs in again.
        assert!(l
            .admit(b"c", request(4, "http://h.test/d"), 101.0)
            .is_none());
        let job = jobs.try_recv().unwrap();
        l.finish(Done::of(&job, Err("refused".into())), 102.0);
        let counts = LoginCounts {
            made: 1,
            failed: 1,
            relogins: 0,
        };
        assert_eq!(l.take_counts(b"c"), counts);
        assert_eq!(l.take_counts(b"c"), LoginCounts::default());
    }

    #[test]
    fn a_ttl_of_zero_never_expires() {
        let (mut l, jobs) = logins(&config("p", 0.0));
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        let job = jobs.try_recv().unwrap();
        l.finish(Done::of(&job, Ok(jar("s=1"))), 0.0);
        for id in 2..10 {
            assert!(l
                .admit(b"c", request(id, "http://h.test/a"), id as f64 * 1e6)
                .is_some());
        }
        assert!(jobs.try_recv().is_err());
    }

    #[test]
    fn a_login_that_never_ends_lets_its_requests_go() {
        let (mut l, jobs) = logins(&config("p", 100.0));
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        let job = jobs.try_recv().unwrap();
        assert!(l.expire(BUSY_LIMIT).is_empty());
        let go = l.expire(BUSY_LIMIT + 1.0);
        assert_eq!(go.iter().map(|r| r.id).collect::<Vec<_>>(), [1]);
        assert_eq!(l.take_counts(b"c").failed, 1);
        // Failed: the next requests go without waiting, until the retry.
        assert!(l
            .admit(b"c", request(2, "http://h.test/b"), BUSY_LIMIT + 2.0)
            .is_some());
        // The late end of that login still gives its session.
        assert!(l
            .finish(Done::of(&job, Ok(jar("s=1"))), BUSY_LIMIT + 3.0)
            .is_empty());
        let r = l
            .admit(b"c", request(3, "http://h.test/c"), BUSY_LIMIT + 4.0)
            .unwrap();
        assert_eq!(cookie(&r), Some("s=1"));
    }

    /// A forbidden page of a good session at `now`: true when its answer started a relogin
    /// (the page then sent again, forbidden again, and a page coming through the new session).
    fn forbidden_round(l: &mut Logins, jobs: &Receiver<Job>, id: &mut u64, now: f64) -> bool {
        *id += 1;
        let r = l.admit(b"c", request(*id, "http://h.test/x"), now).unwrap();
        match l.observe(&answer(r.id, "http://h.test/x", response(403, None)), now) {
            Seen::Held => {}
            Seen::Crawl => return false,
            Seen::Again(_) => panic!("sent again at once"),
        }
        let job = jobs.try_recv().unwrap();
        let again = l.finish(Done::of(&job, Ok(jar("s=1"))), now);
        assert_eq!(again.len(), 1);
        *id += 1;
        let page = l
            .admit(b"c", request(*id, "http://h.test/ok"), now)
            .unwrap();
        let through = answer(page.id, "http://h.test/ok", response(200, None));
        assert!(matches!(l.observe(&through, now), Seen::Crawl));
        let forbidden = answer(again[0].id, "http://h.test/x", response(403, None));
        assert!(matches!(l.observe(&forbidden, now), Seen::Crawl));
        true
    }

    #[test]
    fn relogins_that_do_not_help_quiet_answer_started_logins_longer_each_time() {
        let (mut l, jobs) = logins(&config("p", 1e6));
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        let job = jobs.try_recv().unwrap();
        l.finish(Done::of(&job, Ok(jar("s=1"))), 0.0);
        l.observe(&answer(1, "http://h.test/a", response(200, None)), 0.0);
        let mut id = 1;
        // Three relogins that did not help: a minute without; three more: two minutes.
        for (now, relogin) in [
            (1.0, true),
            (2.0, true),
            (3.0, true),
            (4.0, false),
            (62.0, false),
            (64.0, true),
            (65.0, true),
            (66.0, true),
            (180.0, false),
            (187.0, true),
        ] {
            assert_eq!(
                forbidden_round(&mut l, &jobs, &mut id, now),
                relogin,
                "at {now}"
            );
        }
        assert_eq!(l.take_counts(b"c").relogins, 7);
    }

    /// A session's first answer showing it gone (a forbidden robots.txt, say) starts no
    /// login for a minute, and the session stays: pages keep coming through it.
    #[test]
    fn a_fresh_sessions_first_gone_answer_keeps_the_session() {
        let (mut l, jobs) = logins(&config("p", 1e6));
        assert!(l
            .admit(b"c", request(1, "http://h.test/robots.txt"), 0.0)
            .is_none());
        let job = jobs.try_recv().unwrap();
        l.finish(Done::of(&job, Ok(jar("s=1"))), 0.0);
        let robots = answer(1, "http://h.test/robots.txt", response(403, None));
        assert!(matches!(l.observe(&robots, 1.0), Seen::Crawl));
        for (id, now) in [(2, 2.0), (3, 100.0)] {
            let r = l.admit(b"c", request(id, "http://h.test/p"), now).unwrap();
            assert_eq!(cookie(&r), Some("s=1"));
        }
        assert!(jobs.try_recv().is_err());
    }

    #[test]
    fn a_changed_login_takes_the_waiting_requests_and_an_old_end_is_ignored() {
        let (mut l, jobs) = logins(&config("old", 100.0));
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        let old = jobs.try_recv().unwrap();
        // The password is mended while the first login runs: the request waits for the new.
        assert!(l.configure(b"c", &config("new", 100.0), 1.0).is_empty());
        let new = jobs.try_recv().unwrap();
        assert_eq!(new.cfg.parameters[0].1, "new");
        assert_ne!(old.session, new.session);
        assert!(l.finish(Done::of(&old, Ok(jar("s=old"))), 2.0).is_empty());
        let go = l.finish(Done::of(&new, Ok(jar("s=new"))), 3.0);
        assert_eq!(go.len(), 1);
        assert_eq!(cookie(&go[0]), Some("s=new"));
    }

    #[test]
    fn a_gone_session_logs_in_again_once_for_the_request_that_showed_it() {
        let (mut l, jobs) = logins(&config("p", 1000.0));
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        let job = jobs.try_recv().unwrap();
        let sent = l.finish(Done::of(&job, Ok(jar("s=1"))), 0.0);
        assert_eq!(sent.len(), 1);
        let page = response(200, None);
        assert!(matches!(
            l.observe(&answer(1, "http://h.test/a", page), 1.0),
            Seen::Crawl
        ));
        let r = l.admit(b"c", request(2, "http://h.test/b"), 1.0).unwrap();
        let mut gone = response(302, Some("/login"));
        gone.headers
            .push(("set-cookie".into(), b"s=anonymous".to_vec()));
        assert!(matches!(
            l.observe(&answer(r.id, "http://h.test/b", gone.clone()), 2.0),
            Seen::Held
        ));
        // Requests meanwhile wait for the new login.
        assert!(l.admit(b"c", request(3, "http://h.test/c"), 2.0).is_none());
        let job = jobs.try_recv().unwrap();
        let again = l.finish(Done::of(&job, Ok(jar("s=2"))), 3.0);
        assert_eq!(again.iter().map(|r| r.id).collect::<Vec<_>>(), [2, 3]);
        assert!(again.iter().all(|r| cookie(r) == Some("s=2")));
        assert_eq!(l.take_counts(b"c").relogins, 1);
        // The request sent again shows the session gone again: the crawl reads that answer.
        assert!(matches!(
            l.observe(&answer(2, "http://h.test/b", gone.clone()), 4.0),
            Seen::Crawl
        ));
        assert!(jobs.try_recv().is_err());
    }

    #[test]
    fn an_old_sessions_late_answer_sets_no_cookie() {
        let (mut l, jobs) = logins(&config("p", 1000.0));
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        let job = jobs.try_recv().unwrap();
        l.finish(Done::of(&job, Ok(jar("s=1"))), 0.0);
        l.observe(&answer(1, "http://h.test/a", response(200, None)), 0.0);
        let slow = l
            .admit(b"c", request(2, "http://h.test/slow"), 0.0)
            .unwrap();
        let r = l.admit(b"c", request(3, "http://h.test/b"), 0.0).unwrap();
        assert!(matches!(
            l.observe(&answer(r.id, "http://h.test/b", response(403, None)), 1.0),
            Seen::Held
        ));
        let job = jobs.try_recv().unwrap();
        l.finish(Done::of(&job, Ok(jar("s=2"))), 1.0);
        let mut late = response(200, None);
        late.headers
            .push(("set-cookie".into(), b"s=anonymous".to_vec()));
        assert!(matches!(
            l.observe(&answer(slow.id, "http://h.test/slow", late), 2.0),
            Seen::Crawl
        ));
        let next = l.admit(b"c", request(4, "http://h.test/c"), 2.0).unwrap();
        assert_eq!(cookie(&next), Some("s=2"));
    }

    #[test]
    fn a_dead_worker_is_replaced_and_a_failed_login_lets_the_requests_go() {
        let mut l = Logins::new("agent");
        let (tx, rx) = unbounded::<Job>();
        drop(rx);
        l.jobs = Some(tx);
        l.configure(b"c", &config("p", 100.0), 0.0);
        // A new worker takes the login; nothing listens where it goes (127.0.0.7:80), so it
        // fails, and the waiting request goes without it.
        assert!(l.admit(b"c", request(1, "http://h.test/a"), 0.0).is_none());
        let done = l.done().recv_timeout(Duration::from_secs(60)).unwrap();
        let go = l.finish(done, 1.0);
        assert_eq!(go.len(), 1);
        // Failed: requests go without waiting until the retry.
        assert!(l.admit(b"c", request(2, "http://h.test/b"), 2.0).is_some());
    }

    /// A site for the worker: answers each request (one a connection) with what `answer`
    /// makes of its head, and records the heads.
    fn serve(
        answer: impl Fn(&str) -> String + Send + 'static,
    ) -> (SocketAddr, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
        use std::io::{BufRead, BufReader, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut r = BufReader::new(stream.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let reply = answer(&head);
                seen.lock().unwrap().push(head);
                let _ = stream.write_all(reply.as_bytes());
            }
        });
        (addr, heads)
    }

    /// A login of `cfg` to make: its form at `target`, its form page, the collection's headers.
    fn job(
        cfg: Login,
        target: &str,
        html_form: Option<String>,
        headers: Vec<(String, String)>,
    ) -> Job {
        Job {
            collection: b"c".to_vec(),
            login: 0,
            session: 1,
            target: url(target),
            preload: None,
            html_form: html_form.as_deref().map(url),
            known: None,
            headers,
            cfg,
        }
    }

    /// `job`'s login, made as the worker makes it.
    fn log_in(job: &Job) -> Result<CookieStore, String> {
        let fetcher = Fetcher::spawn(FetcherOptions::default()).unwrap();
        let mut client = Client {
            fetcher,
            next_id: 0,
        };
        let r = client.log_in(job);
        client.fetcher.shutdown();
        r
    }

    fn reply(status: &str, headers: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 {status}\r\nConnection: close\r\nContent-Length: {}\r\n{headers}\r\n{body}",
            body.len()
        )
    }

    /// A GET login (`action` GET): the form page reached through a redirect, its hidden
    /// field filled in, the fields sent as the query of the form URI, with the collection's
    /// User-Agent and the cookies of every answer before; the page the submission redirects
    /// to fetched for its cookies.
    #[test]
    fn a_get_login_follows_the_form_pages_redirect_and_sends_the_fields_as_the_query() {
        let (addr, heads) = serve(|head| {
            let path = head.split(' ').nth(1).unwrap_or("");
            match path {
                "/form" => reply("301 Moved", "Location: /form/\r\nSet-Cookie: a=1\r\n", ""),
                "/form/" => reply(
                    "200 OK",
                    "Set-Cookie: b=2; Path=/\r\n",
                    "<form action=\"/login\"><input type=hidden name=t value=x&amp;y>\
                     <input name=user></form>",
                ),
                p if p.starts_with("/login?") => {
                    reply("302 Found", "Location: /home\r\nSet-Cookie: s=3\r\n", "")
                }
                "/home" => reply("200 OK", "Set-Cookie: h=4\r\n", "welcome"),
                _ => reply("404 Not Found", "", ""),
            }
        });
        let base = format!("http://{addr}");
        let mut cfg = login(&addr.to_string(), &[]).cfg;
        cfg.action = "GET".into();
        cfg.form = "/login?lang=en".into();
        cfg.parameters = vec![("user".into(), "alice".into())];
        let job = job(
            cfg,
            &format!("{base}/login?lang=en"),
            Some(format!("{base}/form")),
            vec![("User-Agent".into(), "collection-agent".into())],
        );
        let jar = log_in(&job).unwrap();
        // The jar's order is its own (RFC 6265 5.4 leaves equal paths unordered).
        let sorted = |h: &str| {
            let mut v: Vec<String> = h.split("; ").map(String::from).collect();
            v.sort();
            v.join("; ")
        };
        let all = cookie_header(&jar, &url(&format!("{base}/p")));
        assert_eq!(sorted(&all), "a=1; b=2; h=4; s=3");
        let heads = heads.lock().unwrap();
        assert_eq!(heads.len(), 4, "{heads:?}");
        assert!(heads[3].starts_with("GET /home "), "{heads:?}");
        assert!(heads[1].starts_with("GET /form/ "), "{heads:?}");
        assert!(
            heads[2].starts_with("GET /login?lang=en&t=x%26y&user=alice HTTP/1.1\r\n"),
            "{heads:?}"
        );
        let sent = heads[2]
            .lines()
            .find_map(|l| l.strip_prefix("Cookie: "))
            .unwrap_or_default();
        assert_eq!(sorted(sent), "a=1; b=2", "{heads:?}");
        assert!(
            heads[2].contains("\r\nUser-Agent: collection-agent\r\n"),
            "{heads:?}"
        );
        assert!(
            heads[2].contains(&format!("\r\nReferer: {base}/form\r\n")),
            "{heads:?}"
        );
    }

    /// Two Logins log in at once: one whose server never answers does not hold up the other.
    #[test]
    fn a_login_whose_server_hangs_holds_up_no_other() {
        let hang = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (ok, _) = serve(|_| reply("200 OK", "Set-Cookie: s=b\r\n", "in"));
        let mut cfg = CollectionConfig::defaults("c");
        let ok_site = format!("localhost:{}", ok.port());
        let hang_site = hang.local_addr().unwrap().to_string();
        for (site, host) in [
            (hang_site.as_str(), "a.test"),
            (ok_site.as_str(), "localhost"),
        ] {
            let mut l = login(site, &[host]).cfg;
            l.html_form = None;
            cfg.logins.push(l);
        }
        let mut l = Logins::new("agent");
        l.configure(b"c", &cfg, 0.0);
        assert!(l.admit(b"c", request(1, "http://a.test/x"), 0.0).is_none());
        // The node crawls localhost at the site's address: the login goes there too.
        let mut b = request(2, &format!("http://{ok_site}/y"));
        b.addr = ok;
        assert!(l.admit(b"c", b, 0.0).is_none());
        let d = l.done().recv_timeout(Duration::from_secs(25)).unwrap();
        let go = l.finish(d, 1.0);
        assert_eq!(go.iter().map(|r| r.id).collect::<Vec<_>>(), [2]);
        assert_eq!(cookie(&go[0]), Some("s=b"));
    }

    /// A submission redirected back to the form page (a site that hands out a fresh anonymous
    /// session there) is a session all the same, and the form page is not fetched after it.
    #[test]
    fn a_submission_redirected_to_the_form_is_not_followed() {
        let (addr, heads) = serve(|head| match head.split(' ').nth(1).unwrap_or("") {
            "/form" => reply("200 OK", "", "<form action=/login><input name=u></form>"),
            "/login" => reply("302 Found", "Location: /form\r\nSet-Cookie: s=1\r\n", ""),
            _ => reply("404 Not Found", "", ""),
        });
        let mut cfg = login(&addr.to_string(), &[]).cfg;
        cfg.parameters = vec![("u".into(), "a".into())];
        let job = job(
            cfg,
            &format!("http://{addr}/login"),
            Some(format!("http://{addr}/form")),
            Vec::new(),
        );
        let jar = log_in(&job).unwrap();
        assert_eq!(cookie_header(&jar, &url(&format!("http://{addr}/"))), "s=1");
        let heads = heads.lock().unwrap();
        let paths: Vec<&str> = heads.iter().map(|h| h.split(' ').nth(1).unwrap()).collect();
        assert_eq!(paths, ["/form", "/login"]);
    }

    /// A submission answered 400 or more is a failed login, with what the site answered.
    #[test]
    fn a_refused_submission_is_a_failed_login() {
        let (addr, _) = serve(|_| reply("403 Forbidden", "", "no"));
        let mut cfg = login(&addr.to_string(), &[]).cfg;
        cfg.html_form = None;
        let job = job(cfg, &format!("http://{addr}/login"), None, Vec::new());
        let e = log_in(&job).unwrap_err();
        assert!(e.contains("403"), "{e}");
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
