//! The crawl engine of a node scheduler: per-site politeness, robots.txt, redirects, link
//! extraction and document checks, without sockets.
//!
//! The node scheduler's site manager hands over entries of allowed sites ([`Ready`]); the
//! engine turns them into fetch [`Request`]s at the pace each site allows (one site never has
//! more than `max_site_connections` requests open, and a request starts no sooner than `delay`
//! seconds after the previous one to that site ended), and turns each fetch [`Outcome`] into
//! [`Action`]s: links and redirect targets to queue, documents to check for duplicates and
//! store, sites to release (CMD_UM_STOP_CRAWL_IP). Every outcome is counted with the FSCADM
//! codes in the collection's [`CrawlCounters`].

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use log::debug;
use md5::{Digest, Md5};
use url::Url;

use super::counted::{Count, Counted};
use super::counters::{doc_skip, failure_code, uri_skip, CrawlCounters};
use super::links::{self, Extracted};
use super::resolve;
use super::robots::{RobotsCache, Rules};
use super::sitemaps;
use super::types::DEPTH_KEY;
pub use super::types::*;
use crate::config::{CollectionConfig, Refusal};
use crate::msg::types::uri_flags;
use crate::msg::{Checksum, CrawlQueueEntry};
use crate::routing::SameSite;
use crate::sched::node::Ready;
use crate::sched::parse_record;

#[path = "engine_redirect.rs"]
mod redirect;
#[path = "engine_stop.rs"]
mod stop;
#[path = "engine_tally.rs"]
mod tally;
#[path = "engine_took.rs"]
mod took;
use redirect::{excluded_header, redirect_entry};
use took::Took;

struct Site {
    ip: Arc<str>,
    queue: VecDeque<Held>,
    in_flight: u32,
    /// Earliest start of the next request (engine clock, seconds).
    next_at: f64,
    robots_pending: bool,
    idle_since: Option<f64>,
    /// The site is in the run queue.
    runnable: bool,
    /// Requests' worth of the engine's room the site holds once started (`engine_stop.rs`).
    slot: u32,
    /// Documents requested since the site took its room (the collection's max_inter_docs).
    turn: u32,
    /// A copy of the site's key waits in a parking queue (`slots.1` or `capped`): the site is
    /// not queued twice (`engine_stop.rs`).
    parked: bool,
    /// A URL of the site parsed before, whose host its later URIs' parses reuse
    /// ([`resolve::parse_on_site`]).
    origin: Option<Url>,
    /// (epoch, entries): entries of its visit promised since the scheduler last handed visits
    /// over ([`CrawlEngine::promise_visit`]), when the epoch is the engine's current one.
    promised: (u64, usize),
}

/// An entry waiting for its turn on its site.
struct Held {
    /// Its in-flight sequence number.
    seq: u64,
    record: Vec<u8>,
    /// Conditional request headers ([`Ready::conditional`]).
    conditional: Vec<(String, String)>,
}

struct Flight {
    key: SiteKey,
    ip: Arc<str>,
    /// None: the site's robots.txt.
    record: Option<Took>,
    url: String,
    /// `url` parsed (the request's).
    parsed: Url,
}

/// The engine's tables are looked up several times per page: hashed with foldhash (seeded per
/// map) rather than SipHash.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A crawl site of a collection, shared between the site table, the run queue and the timers.
pub type SiteKey = Arc<(Vec<u8>, String)>;

/// Entries a site holds at most for links of its own pages to join its visit
/// ([`CrawlEngine::visit_room`]): with the collection's `max_sites` started (256 by default)
/// they fill a third of the default window of 24,576 entries.
pub const VISIT_HELD_MAX: usize = 32;

/// Seconds a site of a collection suspended by its variable_delay waits before looking again.
const SUSPENDED_RECHECK: f64 = 60.0;

/// An engine-clock instant in microseconds, for the timer heap.
fn micros(t: f64) -> u64 {
    (t.max(0.0) * 1e6) as u64
}

/// The crawl engine.
///
/// Scheduling does not scan every site on each [`CrawlEngine::poll`]: a site is in the run
/// queue when it may have something to start (an entry arrived, a request ended), on the
/// timer heap when it waits for its delay or its linger time, and in its IP address's waiting
/// list when the address has `max_ip_connections` requests open.
pub struct CrawlEngine {
    opts: EngineOptions,
    configs: HashMap<Vec<u8>, Arc<CollectionConfig>>,
    /// Looked up by the borrowed name (`entry_ref`): counting a page copies no collection name.
    counters: hashbrown::HashMap<Vec<u8>, Counted, foldhash::fast::RandomState>,
    sites: HashMap<SiteKey, Site>,
    run: VecDeque<SiteKey>,
    timers: BinaryHeap<Reverse<(u64, SiteKey)>>,
    /// Requests open per IP address, and the sites waiting for one of them to end.
    ips: HashMap<Arc<str>, (u32, Vec<SiteKey>)>,
    flights: HashMap<u64, Flight>,
    robots: RobotsCache,
    next_id: u64,
    queued: usize,
    /// Room held by the started sites, and sites parked until there is room for them.
    slots: (usize, VecDeque<SiteKey>),
    /// Sites holding room, by collection: at most the collection's `max_sites`
    /// (`engine_stop.rs`).
    started: hashbrown::HashMap<Vec<u8>, u32, foldhash::fast::RandomState>,
    /// Sites parked because their collection has `max_sites` started, by collection: woken at
    /// each poll for the places free (`engine_stop.rs`, `unpark`).
    capped: hashbrown::HashMap<Vec<u8>, VecDeque<SiteKey>, foldhash::fast::RandomState>,
    /// Entries finished since the last [`CrawlEngine::take_done`].
    done: Vec<(Vec<u8>, u64)>,
    /// (epoch, entries): visit entries promised ([`CrawlEngine::promise_visit`]) and not yet
    /// handed over ([`CrawlEngine::visits_handed`] starts a new epoch).
    visits: (u64, usize),
}

fn depth_of(e: &CrawlQueueEntry<'_>) -> u32 {
    e.extra
        .iter()
        .find(|(k, _)| k.as_bytes() == Some(DEPTH_KEY))
        .and_then(|(_, v)| v.as_bytes())
        .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
        .unwrap_or(0)
}

/// The URI skip code of `uri` under the collection's rules, if it is not to be crawled (an
/// excluded extension counts as a URI rule).
pub fn rule_skip(cfg: &CollectionConfig, uri: &str, flags: i64) -> Option<&'static str> {
    // URIF_IGNORE_NETLOC bypasses every host name rule (MS-FSCMT 2.2.2.2.1).
    let hosts = flags & uri_flags::URIF_IGNORE_NETLOC == 0;
    refusal_code(cfg.refusal_with(uri, hosts))
}

/// The URI skip code of a refusal.
fn refusal_code(r: Option<Refusal>) -> Option<&'static str> {
    r.map(|r| match r {
        Refusal::Scheme => uri_skip::SCHEME,
        Refusal::Domain => uri_skip::DOMAIN,
        Refusal::Extension | Refusal::Uri | Refusal::Recursion => uri_skip::URI,
    })
}

impl CrawlEngine {
    /// An engine with no collections.
    pub fn new(opts: EngineOptions) -> CrawlEngine {
        CrawlEngine {
            robots: RobotsCache::new(opts.robots_ttl, 100_000),
            opts,
            configs: HashMap::default(),
            counters: hashbrown::HashMap::default(),
            sites: HashMap::default(),
            run: VecDeque::new(),
            timers: BinaryHeap::new(),
            ips: HashMap::default(),
            flights: HashMap::default(),
            next_id: 1,
            queued: 0,
            slots: (0, VecDeque::new()),
            started: hashbrown::HashMap::default(),
            capped: hashbrown::HashMap::default(),
            done: Vec::new(),
            visits: (1, 0),
        }
    }

    /// Sets (or replaces) the configuration of a collection.
    pub fn set_config(&mut self, name: &[u8], cfg: Arc<CollectionConfig>) {
        self.configs.insert(name.to_vec(), cfg);
        self.counters.entry_ref(name).or_default();
    }

    /// The engine's options.
    pub fn options(&self) -> &EngineOptions {
        &self.opts
    }

    /// The configuration of a collection.
    pub fn config(&self, name: &[u8]) -> Option<&Arc<CollectionConfig>> {
        self.configs.get(name)
    }

    /// The counters of a collection.
    pub fn counters(&self, name: &[u8]) -> Option<&CrawlCounters> {
        self.counters.get(name).map(|c| &**c)
    }

    /// The collection of an open request (to archive its exchange before [`Self::complete`]).
    pub fn collection_of(&self, id: u64) -> Option<&[u8]> {
        self.flights.get(&id).map(|f| f.key.0.as_slice())
    }

    /// Every collection's counters.
    pub fn all_counters(&self) -> impl Iterator<Item = (&Vec<u8>, &CrawlCounters)> {
        self.counters.iter().map(|(n, c)| (n, &**c))
    }

    /// Mutable counters (the node scheduler counts duplicates and stores).
    pub fn counters_mut(&mut self, name: &[u8]) -> &mut Counted {
        self.counters.entry_ref(name).or_default()
    }

    /// How many more entries the engine takes now.
    pub fn wants(&self) -> usize {
        self.opts.max_queued.saturating_sub(self.queued)
    }

    /// How many more entries site `key` may take into its visit
    /// ([`crate::sched::NodeScheduler::add_link_on_visit`]): up to [`VISIT_HELD_MAX`] held or
    /// promised for it here; none for a site the engine does not crawl now, and at most what
    /// keeps the entries held and promised within twice the engine's `max_queued`.
    ///
    /// The caller promises what it took ([`Self::promise_visit`]) until the scheduler hands
    /// the visits over ([`Self::visits_handed`]): several pages of a site finished in one
    /// step each see the room the others took.
    pub fn visit_room(&self, key: &SiteKey) -> usize {
        // Visits' entries come even to a full window (`take_ready`), up to twice its size.
        let promised = self.promised();
        let total = (2 * self.opts.max_queued).saturating_sub(self.queued + promised);
        let Some(s) = self.sites.get(key) else {
            return 0;
        };
        let site_promised = if s.promised.0 == self.visits.0 {
            s.promised.1
        } else {
            0
        };
        VISIT_HELD_MAX
            .saturating_sub(s.queue.len() + site_promised)
            .min(total)
    }

    /// Entries of visits promised and not handed over.
    fn promised(&self) -> usize {
        self.visits.1
    }

    /// `n` entries of site `key`'s visit were taken on the room [`Self::visit_room`] gave:
    /// they count against it until [`Self::visits_handed`].
    pub fn promise_visit(&mut self, key: &SiteKey, n: usize) {
        if n == 0 {
            return;
        }
        let epoch = self.visits.0;
        if let Some(s) = self.sites.get_mut(key) {
            if s.promised.0 != epoch {
                s.promised = (epoch, 0);
            }
            s.promised.1 += n;
        }
        self.visits.1 += n;
    }

    /// The scheduler handed over every visit's entry promised
    /// ([`crate::sched::NodeScheduler::take_ready`]): from here the engine holds them, and the
    /// promises start again from none.
    pub fn visits_handed(&mut self) {
        self.visits = (self.visits.0 + 1, 0);
    }

    /// The entries finished (crawled or skipped) since the last call, by collection and
    /// in-flight sequence number ([`Ready::seq`]).
    pub fn take_done(&mut self) -> Vec<(Vec<u8>, u64)> {
        std::mem::take(&mut self.done)
    }

    /// Entries held, requests open, active sites.
    pub fn load(&self) -> (usize, usize, usize) {
        (self.queued, self.flights.len(), self.sites.len())
    }

    /// True when nothing is held, open or active.
    pub fn is_idle(&self) -> bool {
        self.queued == 0 && self.flights.is_empty() && self.sites.is_empty()
    }

    /// True when nothing is held, open or unreported: the sites left, if any, only linger
    /// (each is released `site_linger` after its last request) and do no more work unless
    /// given entries.
    pub fn is_quiet(&self) -> bool {
        self.queued == 0
            && self.flights.is_empty()
            && self.done.is_empty()
            && self
                .sites
                .values()
                .all(|s| s.queue.is_empty() && s.in_flight == 0 && !s.robots_pending)
    }

    /// Takes an entry of an allowed site.
    pub fn push(&mut self, r: Ready) {
        let key: SiteKey = Arc::new((r.collection, r.site));
        let site = self.sites.entry(key.clone()).or_insert_with(|| Site {
            ip: Arc::from(r.ip.as_str()),
            queue: VecDeque::new(),
            in_flight: 0,
            next_at: 0.0,
            robots_pending: false,
            idle_since: None,
            runnable: false,
            slot: 0,
            turn: 0,
            parked: false,
            origin: None,
            promised: (0, 0),
        });
        if *site.ip != *r.ip {
            site.ip = Arc::from(r.ip.as_str());
        }
        site.queue.push_back(Held {
            seq: r.seq,
            record: r.record,
            conditional: r.conditional,
        });
        site.idle_since = None;
        self.queued += 1;
        self.wake(&key);
    }

    /// Puts a site in the run queue (once).
    fn wake(&mut self, key: &SiteKey) {
        if let Some(site) = self.sites.get_mut(key) {
            if !site.runnable {
                site.runnable = true;
                self.run.push_back(key.clone());
            }
        }
    }

    fn new_request(
        &mut self,
        cfg: &CollectionConfig,
        url: &str,
        u: Url,
        ip: &str,
        conditional: Vec<(String, String)>,
    ) -> Option<Request> {
        let port = u.port_or_known_default()?;
        let id = self.next_id;
        self.next_id += 1;
        let mut headers = vec![("User-Agent".to_string(), cfg.user_agent.clone())];
        for h in &cfg.headers {
            if let Some((n, v)) = h.split_once(':') {
                headers.push((n.trim().to_string(), v.trim().to_string()));
            }
        }
        headers.extend(conditional);
        Some(Request {
            id,
            url: url.to_string(),
            parsed: u,
            ip: ip.to_string(),
            port,
            headers,
            max_body: usize::try_from(cfg.max_doc_size).unwrap_or(usize::MAX),
            timeout: cfg.fetch_timeout.max(0.001),
            connect_timeout: self.opts.connect_timeout.min(cfg.fetch_timeout.max(0.001)),
            http10: !cfg.use_http_1_1,
        })
    }

    /// The requests that may start at `now` (engine clock, seconds), and sites released.
    pub fn poll(&mut self, now: f64) -> (Vec<Request>, Vec<Action>) {
        let mut reqs = Vec::new();
        let mut done = Vec::new();
        let now_us = micros(now);
        while self
            .timers
            .peek()
            .is_some_and(|Reverse((t, _))| *t <= now_us)
        {
            let Some(Reverse((_, key))) = self.timers.pop() else {
                break;
            };
            self.wake(&key);
        }
        // Room and places given up since the last poll go to parked sites.
        self.unpark();
        for _ in 0..self.run.len() {
            if self.flights.len() >= self.opts.max_in_flight {
                break;
            }
            let Some(key) = self.run.pop_front() else {
                break;
            };
            let Some(site) = self.sites.get_mut(&key) else {
                continue;
            };
            site.runnable = false;
            self.run_site(&key, now, &mut reqs, &mut done);
        }
        (reqs, done)
    }

    /// Starts what `key` may start now, then leaves it where it waits: on the timer heap for
    /// its delay or linger, in its address's waiting list, back in the run queue when the
    /// engine-wide request limit stopped it, or nowhere when only a request's end can change
    /// anything (that end wakes it).
    fn run_site(
        &mut self,
        key: &SiteKey,
        now: f64,
        reqs: &mut Vec<Request>,
        done: &mut Vec<Action>,
    ) {
        let Some(cfg) = self.configs.get(&key.0).cloned() else {
            return;
        };
        let ip_cap = match cfg.max_ip_connections {
            0 => u32::MAX,
            n => n,
        };
        loop {
            let Some(site) = self.sites.get_mut(key) else {
                return;
            };
            if site.queue.is_empty() {
                if site.in_flight == 0 && !site.robots_pending {
                    let since = *site.idle_since.get_or_insert(now);
                    if now - since >= self.opts.site_linger {
                        self.drop_site(key);
                        done.push(Action::SiteDone {
                            collection: key.0.clone(),
                            site: key.1.clone(),
                        });
                    } else {
                        let at = micros(since + self.opts.site_linger);
                        self.timers.push(Reverse((at, key.clone())));
                        self.lend_room(key);
                    }
                }
                return;
            }
            if site.robots_pending || site.in_flight >= cfg.max_site_connections.max(1) {
                return;
            }
            // A variable_delay period that suspends the collection (MS-FSCADM 2.2.3.3 status
            // 8): no request starts; the site looks again in a minute.
            if cfg.current_delay().is_none() {
                // Its room and place go to other sites meanwhile.
                self.release_slot(key);
                self.timers
                    .push(Reverse((micros(now + SUSPENDED_RECHECK), key.clone())));
                return;
            }
            if now < site.next_at {
                self.timers
                    .push(Reverse((micros(site.next_at), key.clone())));
                return;
            }
            if self.flights.len() >= self.opts.max_in_flight {
                site.runnable = true;
                self.run.push_front(key.clone());
                return;
            }
            let (slot, in_flight) = (site.slot, site.in_flight);
            // max_inter_docs: a site that had its documents' worth gives its room to a site
            // waiting for one, once its requests are done, and waits its turn again.
            if slot != 0
                && cfg.max_inter_docs.is_some_and(|n| site.turn >= n)
                && self.others_waiting(&key.0)
            {
                if in_flight == 0 {
                    self.yield_turn(key);
                }
                return;
            }
            if slot == 0 && !self.take_slot(key, cfg.max_site_connections.max(1)) {
                return;
            }
            let Some(site) = self.sites.get_mut(key) else {
                return;
            };
            let ip = site.ip.clone();
            let per_ip = self.ips.entry(ip.clone()).or_default();
            if per_ip.0 >= ip_cap {
                if !per_ip.1.contains(key) {
                    per_ip.1.push(key.clone());
                }
                return;
            }
            if cfg.robots && self.robots.get(&key.1, now).is_none() {
                // robots.txt first (RFC 9309 2.4), on the scheme of the first entry.
                let scheme = site
                    .queue
                    .front()
                    .and_then(|h| parse_record(&h.record).ok())
                    .map(|(e, _)| {
                        if e.uri.uri.starts_with(b"https:") {
                            "https"
                        } else {
                            "http"
                        }
                    })
                    .unwrap_or("http");
                let url = format!("{scheme}://{}/robots.txt", key.1);
                let Some(req) = Url::parse(&url)
                    .ok()
                    .and_then(|u| self.new_request(&cfg, &url, u, &ip, Vec::new()))
                else {
                    return;
                };
                let site = self.sites.get_mut(key).expect("present above");
                site.robots_pending = true;
                self.start(key, ip, None, url, req, reqs);
                return;
            }
            let Held {
                seq,
                record: rec,
                conditional,
            } = site.queue.pop_front().expect("not empty");
            self.queued -= 1;
            let counters = self.counters.entry_ref(&key.0[..]).or_default();
            // Decoded once: the flight keeps what reading the response needs.
            let Some((took, uri)) = Took::decode(seq, rec) else {
                counters.skip_doc(doc_skip::OTHER);
                self.done.push((key.0.clone(), seq));
                continue;
            };
            let mut skip = None;
            if took.uri_flags & uri_flags::URIF_IGNORE_RULES == 0 {
                skip = rule_skip(&cfg, &uri, took.uri_flags);
            }
            // Parsed once, for robots.txt and the request.
            let parsed = match (skip, self.sites.get_mut(key)) {
                (None, Some(site)) => resolve::parse_on_site(&mut site.origin, &uri),
                (None, None) => Url::parse(&uri).ok(),
                (Some(_), _) => None,
            };
            if skip.is_none()
                && cfg.robots
                && !self
                    .robots
                    .get(&key.1, now)
                    .is_none_or(|r: &Rules| match &parsed {
                        Some(u) => r.allowed_url(u),
                        None => r.allowed(&uri),
                    })
            {
                skip = Some(uri_skip::ROBOTS);
            }
            if let Some(code) = skip {
                counters.skip_uri(code);
                self.done.push((key.0.clone(), seq));
                continue;
            }
            let req = parsed.and_then(|u| self.new_request(&cfg, &uri, u, &ip, conditional));
            let Some(mut req) = req else {
                self.counters_mut(&key.0).skip_uri(uri_skip::SCHEME);
                self.done.push((key.0.clone(), seq));
                continue;
            };
            if took.sitemap {
                req.max_body = sitemaps::MAX_BODY;
            }
            self.counters_mut(&key.0).add(Count::Processed, 1);
            if let Some(site) = self.sites.get_mut(key) {
                site.turn += 1;
            }
            self.start(key, ip, Some(took), uri, req, reqs);
        }
    }

    /// Records a request as open on its site and address.
    fn start(
        &mut self,
        key: &SiteKey,
        ip: Arc<str>,
        record: Option<Took>,
        url: String,
        req: Request,
        reqs: &mut Vec<Request>,
    ) {
        if let Some(site) = self.sites.get_mut(key) {
            site.in_flight += 1;
        }
        self.ips.entry(ip.clone()).or_default().0 += 1;
        self.flights.insert(
            req.id,
            Flight {
                key: key.clone(),
                ip,
                record,
                url,
                parsed: req.parsed.clone(),
            },
        );
        reqs.push(req);
    }

    /// Reads the outcome of a request made by [`CrawlEngine::poll`].
    pub fn complete(&mut self, o: Outcome, now: f64) -> Vec<Action> {
        let Some(mut f) = self.flights.remove(&o.id) else {
            debug!("outcome of an unknown request {}", o.id);
            return Vec::new();
        };
        let key = f.key.clone();
        let cfg = self.configs.get(&key.0).cloned();
        let delay = cfg
            .as_ref()
            .map_or(0.0, |c| self.site_delay(c, &key.1, &f.url, now));
        if let Some(site) = self.sites.get_mut(&key) {
            site.in_flight = site.in_flight.saturating_sub(1);
            site.next_at = now + delay;
            if f.record.is_none() {
                site.robots_pending = false;
            }
        }
        self.wake(&key);
        if let Some((open, waiting)) = self.ips.get_mut(&f.ip) {
            *open = open.saturating_sub(1);
            let waiting = std::mem::take(waiting);
            if *open == 0 {
                self.ips.remove(&f.ip);
            }
            for k in &waiting {
                self.wake(k);
            }
        }
        let Some(cfg) = cfg else {
            return Vec::new();
        };
        let counters = self.counters.entry_ref(&f.key.0[..]).or_default();
        counters.count_download(o.elapsed);
        counters.add(Count::ReadNet, o.net_read);
        counters.add(Count::WriteNet, o.net_written);
        let Some(took) = f.record.take() else {
            let (status, body) = match &o.result {
                Ok(r) => {
                    counters.http_status(r.status);
                    (Some(r.status), r.body.as_slice())
                }
                Err(e) => {
                    counters.skip_doc(failure_code(e));
                    (None, &b""[..])
                }
            };
            let rules = Rules::from_fetch(&cfg.user_agent, status, body);
            if rules.has_sitemap() {
                counters.add(Count::HasSitemap, 1);
            }
            let offered = sitemaps::offered(&cfg, &rules, &f.key.0, &f.key.1, &f.url);
            self.robots.insert(&f.key.1, rules, now);
            return offered.into_iter().collect();
        };
        let seq = took.seq;
        let out = self.read_entry(&f, &cfg, o.result, took);
        // A document's entry is finished by the node scheduler once the document is fed
        // (its seq travels in the Document); every other outcome finishes it here.
        if !out.iter().any(|a| matches!(a, Action::Document(_))) {
            self.done.push((f.key.0.clone(), seq));
        }
        out
    }

    /// The actions of a fetched entry's response (or failure).
    fn read_entry(
        &mut self,
        f: &Flight,
        cfg: &CollectionConfig,
        result: Result<Fetched, Failure>,
        took: Took,
    ) -> Vec<Action> {
        let counters = self.counters.entry_ref(&f.key.0[..]).or_default();
        // Only a sitemap's entry is decoded again (`sitemaps::outcome` is none for others).
        let sitemap = |result| {
            if !took.sitemap {
                return None;
            }
            sitemaps::outcome(&f.key, &f.url, &took.entry()?, result)
        };
        let mut out = Vec::new();
        let r = match result {
            Ok(r) => r,
            Err(e) => {
                counters.skip_doc(failure_code(&e));
                return sitemap(Err(&e)).into_iter().collect();
            }
        };
        counters.add(Count::Downloaded, 1);
        counters.http_status(r.status);
        if let Some(a) = sitemap(Ok(&r)) {
            return vec![a];
        }
        // Parsed when the request was made (`start` is given the request of `f.url`).
        let url = f.parsed.clone();
        // Redirects (3xx with Location): the target is queued with the trail.
        if matches!(r.status, 300..=303 | 307 | 308) {
            let kind = match r.status {
                300 => uri_flags::URIF_REDIRECT_300,
                301 | 308 => uri_flags::URIF_REDIRECT_301,
                _ => uri_flags::URIF_REDIRECT_302,
            };
            let target = r
                .header("location")
                .and_then(|l| links::resolve(&url, &String::from_utf8_lossy(l)));
            match target {
                Some(t) => {
                    let e = took.entry().and_then(|entry| {
                        redirect_entry(cfg, &entry, t.as_str(), kind, &f.url, counters)
                    });
                    if let Some(e) = e {
                        out.push(Action::Queue {
                            collection: f.key.0.clone(),
                            entry: Box::new(e),
                            site: None,
                        });
                    }
                }
                None => counters.skip_doc(doc_skip::NO_REDIRECT_TARGET),
            }
            return out;
        }
        match r.status {
            // Conditional GET answered "not modified" (RFC 9110 15.4.5): the stored copy
            // stands.
            304 => {
                out.push(Action::Unchanged {
                    collection: f.key.0.clone(),
                    uri: f.url.clone().into_bytes(),
                });
                return out;
            }
            // Gone: a stored copy is deleted (the node scheduler knows whether there is one).
            404 | 410 => {
                out.push(Action::Gone {
                    collection: f.key.0.clone(),
                    uri: f.url.clone().into_bytes(),
                });
                return out;
            }
            200..=299 => {}
            _ => return out,
        }
        if !cfg.exclude_headers.is_empty() && excluded_header(cfg, &r) {
            counters.skip_doc(doc_skip::HEADER_EXCLUDED);
            return out;
        }
        // Borrowed from the response unless it is not UTF-8 or not lower case already.
        let ctype = r.header("content-type").map_or(
            Cow::Borrowed("application/octet-stream"),
            String::from_utf8_lossy,
        );
        let mime = ctype.split(';').next().unwrap_or("").trim();
        let mime: Cow<'_, str> = if mime.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Owned(mime.to_ascii_lowercase())
        } else {
            Cow::Borrowed(mime)
        };
        counters.mime_type(&mime);
        if r.header("last-modified").is_some() {
            counters.add(Count::HasLastMod, 1);
        }
        if r.header("etag").is_some() {
            counters.add(Count::HasEtag, 1);
        }
        if r.truncated {
            counters.skip_doc(doc_skip::TOO_LARGE);
            return out;
        }
        if !cfg.allows_type(&mime) {
            counters.skip_doc(doc_skip::MIME);
            return out;
        }
        if r.body.is_empty() {
            counters.skip_doc(doc_skip::EMPTY);
            return out;
        }
        counters.count_doc(r.body.len() as u64);
        let mut flags = took.uri_flags;
        if mime == "text/html" || mime == "application/xhtml+xml" {
            let ex = links::extract(&r.body, &url, cfg.link_extraction);
            let ex = if cfg.check_meta_robots {
                ex
            } else {
                Extracted {
                    noindex: false,
                    nofollow: false,
                    ..ex
                }
            };
            if ex.noindex {
                flags |= uri_flags::URIF_META_NOINDEX;
            }
            if ex.nofollow {
                flags |= uri_flags::URIF_META_NOFOLLOW;
            }
            if let Some(t) = &ex.refresh {
                let e = took.entry().and_then(|entry| {
                    let refresh = uri_flags::URIF_META_REFRESH;
                    redirect_entry(cfg, &entry, t, refresh, &f.url, counters)
                });
                if let Some(e) = e {
                    out.push(Action::Queue {
                        collection: f.key.0.clone(),
                        entry: Box::new(e),
                        site: None,
                    });
                }
            }
            let depth = took.depth;
            let mut page_links = Vec::with_capacity(ex.links.len());
            let mut queue = Vec::with_capacity(ex.links.len());
            let page_site = SameSite::new(&f.url, &f.key.1);
            // The host rules' verdict on the page's own host, for its links written with the
            // page's scheme and authority (asked once, for the first of them).
            let mut page_domain_refused = None;
            // Entries carry their depth when the collection or a SubDomain limits it.
            let track_depth = cfg.max_depth.is_some()
                || cfg
                    .subdomains
                    .iter()
                    .any(|s| matches!(s.max_depth, Some(Some(_))));
            for l in ex.links {
                if ex.nofollow || took.uri_flags & uri_flags::URIF_NOFOLLOW != 0 {
                    counters.skip_uri(uri_skip::NOFOLLOW);
                    continue;
                }
                // The link's crawl site, once for the link graph and the depth.
                let shares_authority = page_site.shares_authority(&l.url);
                let same_site = shares_authority || page_site.is_same(&l.url);
                // The link graph holds every link a page gives, crawled or not: it takes the
                // link (no copy), and the entry below is made from it there.
                page_links.push(PageLink {
                    url: l.url,
                    anchor: l.text,
                    intra: same_site,
                });
                let Some(l) = page_links.last() else {
                    continue;
                };
                let skip = if shares_authority {
                    let refused =
                        *page_domain_refused.get_or_insert_with(|| cfg.domain_refused(&f.url));
                    refusal_code(cfg.refusal_known_domain(&l.url, refused))
                } else {
                    rule_skip(cfg, &l.url, 0)
                };
                if let Some(code) = skip {
                    counters.skip_uri(code);
                    continue;
                }
                // crawlmode.fwdlinks off: links to other sites are not followed (they stay
                // in the link graph above).
                if !same_site && !cfg.forward_links {
                    counters.skip_uri(uri_skip::DOMAIN);
                    continue;
                }
                let child_depth = if cfg.reset_level && !same_site {
                    0
                } else {
                    depth + 1
                };
                // The depth limit of the SubDomain the link belongs to (its crawlmode.mode),
                // else the collection's.
                let max_depth = match cfg.subdomains.is_empty() {
                    true => cfg.max_depth,
                    false => cfg
                        .subdomain_for(&l.url)
                        .and_then(|s| s.max_depth)
                        .unwrap_or(cfg.max_depth),
                };
                if max_depth.is_some_and(|m| child_depth > m) {
                    counters.skip_uri(uri_skip::DEPTH);
                    continue;
                }
                if same_site {
                    counters.add(Count::Local, 1);
                } else {
                    counters.add(Count::LocalFwd, 1);
                }
                queue.push(LinkToQueue {
                    link: page_links.len() - 1,
                    depth: track_depth.then_some(child_depth),
                });
            }
            if !ex.nofollow {
                out.push(Action::Links {
                    collection: f.key.0.clone(),
                    from: f.url.as_bytes().to_vec(),
                    site: super::resolve::origin_site(&url),
                    links: page_links,
                    queue,
                    key: f.key.clone(),
                    refresh_cycle: took.refresh_cycle,
                });
            }
            if ex.noindex {
                counters.skip_doc(doc_skip::NOINDEX);
                return out;
            }
            if ex.refresh.is_some() {
                // A meta refresh is a redirect: the target is the document.
                return out;
            }
        }
        debug_assert!(
            r.checksum
                .is_none_or(|c| c == <[u8; 16]>::from(Md5::digest(&r.body))),
            "a checksum computed beforehand is the body's MD5"
        );
        let checksum = Checksum(r.checksum.unwrap_or_else(|| Md5::digest(&r.body).into()));
        out.push(Action::Document(Box::new(Document {
            collection: f.key.0.clone(),
            uri: f.url.clone().into_bytes(),
            checksum,
            status: r.status,
            headers: r.headers,
            body: r.body,
            uri_flags: flags,
            redirected_from: took.redirected_from,
            seq: took.seq,
        })));
        out
    }

    /// Seconds between a request to `url` of `site` and the site's next: the delay of the
    /// SubDomain `url` belongs to, if it sets one, else the collection's (the variable_delay
    /// period of this UTC day and hour, if one covers it); robots.txt's Crawl-delay when
    /// longer and obeyed.
    fn site_delay(&self, cfg: &CollectionConfig, site: &str, url: &str, now: f64) -> f64 {
        let sub = match cfg.subdomains.is_empty() {
            true => None,
            false => cfg.subdomain_for(url).and_then(|s| s.delay),
        };
        let mut d = sub
            .or_else(|| cfg.current_delay())
            .unwrap_or(cfg.delay)
            .max(0.0);
        if cfg.obey_robots_delay {
            if let Some(cd) = self.robots.get(site, now).and_then(Rules::crawl_delay) {
                d = d.max(cd);
            }
        }
        d
    }
}
