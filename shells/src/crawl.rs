//! The node scheduler's crawl loop: the site manager of `core::sched::node` hands entries of
//! allowed sites to `core::crawl::CrawlEngine`, whose requests go to the HTTP fetcher of
//! `crawlfleet-net`; outcomes come back as links to queue (kept or forwarded to the multinode
//! scheduler), documents to check with the duplicate servers, and sites to release.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::config::CollectionConfig;
use crawlfleet_core::crawl::counters::doc_skip;
use crawlfleet_core::crawl::site_tally::SiteTally;
use crawlfleet_core::crawl::{
    link_entries, Action, Count, CrawlCounters, CrawlEngine, EngineOptions, Failure, Fetched,
    Outcome, Request,
};
use crawlfleet_core::marshal::Value;
use crawlfleet_core::sched::multinode::SchedError;
use crawlfleet_core::sched::node::{Fate, NodeScheduler, Verdict};
use crawlfleet_core::sched::show;
use crawlfleet_core::stats::sites::SiteStats;
use crawlfleet_core::stats::Stats;
use crawlfleet_net::fetch::{FetchError, FetchRequest, FetchResult, Fetcher, FetcherOptions};
use crossbeam_channel::Receiver;

use crate::linkclient::{Applications, LinkBatcher, OutLink};
use crate::login::{Logins, Seen};
use log::{debug, error, warn};
use parking_lot::Mutex;

/// What one collection on one node has done, for progress displays and `up --until-idle`.
#[derive(Clone, Debug, Default)]
pub struct CollectionStatus {
    /// The engine's counters (FSCADM 2.2.4.9 names); `stored` counts documents that passed
    /// the duplicate check, `doc_skip["cs"]` the duplicates.
    pub counters: CrawlCounters,
    /// Entries in the node's crawl queue.
    pub queued: u64,
    /// Entries held by the engine.
    pub held: usize,
    /// Requests open.
    pub in_flight: usize,
    /// Sites being crawled.
    pub active_sites: usize,
    /// Nothing queued, held, open or waiting for a duplicate check.
    pub drained: bool,
    /// Documents fed through content distributor sessions (`--nameserver`).
    pub feed: crate::sessionsink::FeedCounters,
    /// WARC records and bytes written (the collection's `warc` setting, docs/warc.md).
    pub warc: crate::warc::WarcCounts,
}

/// A node's status, published every few hundred milliseconds.
#[derive(Clone, Debug, Default)]
pub struct NodeStatus {
    /// By collection name.
    pub collections: BTreeMap<String, CollectionStatus>,
    /// When it was published.
    pub at: Option<Instant>,
    /// IndexNow URLs dropped: no collection covers their host (docs/indexnow.md).
    pub indexnow_dropped: u64,
    /// What the node's RUP robot did (docs/rup.md).
    pub rup: crate::node::RupCounters,
}

/// Where a node publishes its status.
pub type StatusSlot = Arc<Mutex<NodeStatus>>;

/// The crawl engine and the fetcher of one node scheduler.
pub struct Crawler {
    engine: CrawlEngine,
    fetcher: Fetcher,
    links: Option<LinkBatcher>,
    epoch: Instant,
    /// The scheduler's parse of each collection's configuration the engine was given. The
    /// scheduler parses a configuration once, whenever its dict is set, and shares it: a
    /// different `Arc` is a new configuration, and holding this one keeps its address from
    /// being reused. Compared by address at every step (comparing the dicts cost 2,300
    /// instructions a step).
    dicts: HashMap<Vec<u8>, Arc<CollectionConfig>>,
    /// The counters as last given to the statistics.
    fed: HashMap<Vec<u8>, CrawlCounters>,
    /// The WARC writers of the collections that archive (docs/warc.md).
    archiver: Option<crate::warc::Archiver>,
    /// The time of every fetch, for `/metrics`.
    latency: Arc<crawlfleet_core::metrics::Histogram>,
    /// What each crawl site got, for the per-site statistics (FSCADM 2.2.4.9).
    sites: SiteTally,
    /// A sitemap read since the last [`Crawler::take_sitemap_queued`] queued URIs.
    sitemap_queued: bool,
    /// Fetch results read and not yet given to the engine, each with its body's MD5 when it
    /// has a body (computed for the batch together, [`crawlfleet_core::md5many`]).
    held: VecDeque<(FetchResult, Option<[u8; 16]>)>,
    /// The collections' form logins (docs/collection-config.md "Login").
    logins: Logins,
    /// Requests a login let go (it finished, or its collection changed), to send at the next
    /// step.
    released: Vec<FetchRequest>,
}

fn failure(e: FetchError) -> Failure {
    match e {
        FetchError::Refused => Failure::Refused,
        FetchError::ConnectTimeout => Failure::ConnectTimeout,
        FetchError::Timeout => Failure::Timeout,
        FetchError::Protocol(s) => Failure::Protocol(s),
        FetchError::Decode(s) => Failure::Decode(s),
        e @ (FetchError::Tls(_)
        | FetchError::Io(_)
        | FetchError::Shutdown
        | FetchError::InvalidRequest(_)) => Failure::Network(e.to_string()),
    }
}

impl Crawler {
    /// Starts the fetcher with `connections` sockets, the engine's room for requests open at
    /// once (the node's `--connections`); `links` ships link data to a link store (MS-FSWASDR).
    pub fn start(
        user_agent: &str,
        connections: usize,
        links: Option<LinkBatcher>,
    ) -> std::io::Result<Crawler> {
        let connections = connections.max(1);
        let fetcher = Fetcher::spawn(FetcherOptions {
            user_agent: user_agent.to_string(),
            max_connections: connections,
            ..FetcherOptions::default()
        })?;
        Ok(Crawler {
            engine: CrawlEngine::new(EngineOptions {
                max_in_flight: connections,
                ..EngineOptions::default()
            }),
            fetcher,
            links,
            epoch: Instant::now(),
            dicts: HashMap::new(),
            fed: HashMap::new(),
            archiver: None,
            latency: Arc::default(),
            sites: SiteTally::new(),
            sitemap_queued: false,
            held: VecDeque::new(),
            logins: Logins::new(user_agent),
            released: Vec::new(),
        })
    }

    /// Archives the exchanges of collections whose configuration has an enabled `warc`
    /// section.
    pub fn archive_with(&mut self, archiver: crate::warc::Archiver) {
        self.archiver = Some(archiver);
        self.dicts.clear();
    }

    /// The time of every fetch (request sent to answer read, or failure), for `/metrics`.
    pub fn latency(&self) -> Arc<crawlfleet_core::metrics::Histogram> {
        self.latency.clone()
    }

    /// Fetch results, for the node's `select!`.
    pub fn results(&self) -> &Receiver<FetchResult> {
        &self.fetcher.results
    }

    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// Brings the engine's configurations in line with the scheduler's collections.
    fn sync_configs(&mut self, sm: &mut NodeScheduler) {
        let names: Vec<Vec<u8>> = sm.collections().into_iter().map(|(n, _)| n).collect();
        for name in &names {
            let (Some(settings), Some(dict)) =
                (sm.collection_settings(name), sm.collection_config(name))
            else {
                continue;
            };
            if self
                .dicts
                .get(name)
                .is_some_and(|s| Arc::ptr_eq(s, &settings))
            {
                continue;
            }
            // The scheduler's parse of the configuration, shared (not parsed again here).
            let room = self.engine.options().max_in_flight;
            let pending = settings.max_site_connections.max(1) as usize;
            let wanted = settings.max_sites as usize * pending;
            if wanted > room {
                warn!(
                    "collection {}: max_sites {} at max_pending {pending} would hold {wanted} \
                     connections; this node has {room} (--connections): at most {} of its \
                     sites at once",
                    String::from_utf8_lossy(name),
                    settings.max_sites,
                    room / pending
                );
            }
            self.engine.set_config(name, settings.clone());
            let now = self.now();
            let released = self.logins.configure(name, &settings, now);
            self.released.extend(released);
            if let Some(b) = &self.links {
                b.set_applications(name, link_applications(dict));
            }
            if let Some(a) = &mut self.archiver {
                a.configure(name, Some(dict));
            }
            self.dicts.insert(name.clone(), settings);
        }
        let gone: Vec<Vec<u8>> = self
            .dicts
            .keys()
            .filter(|n| !names.contains(n))
            .cloned()
            .collect();
        for name in gone {
            self.dicts.remove(&name);
            let released = self.logins.remove(&name);
            self.released.extend(released);
            if let Some(a) = &mut self.archiver {
                a.configure(&name, None);
            }
            for a in self.engine.remove_collection(&name) {
                if let Action::SiteDone { collection, site } = a {
                    // The collection is gone from the scheduler too: nothing to put back.
                    if let Err(e) = sm.site_done(&collection, &site) {
                        warn!("collection {}: site {site}: {e}", show(&collection));
                    }
                }
            }
            self.sites.remove_collection(&name);
        }
        if let Some(a) = &self.archiver {
            self.fetcher.keep_wire(a.any());
        }
    }

    /// Moves work along: entries of allowed sites into the engine, requests to the fetcher,
    /// idle sites released.
    pub fn step(&mut self, sm: &mut NodeScheduler, now_secs: i64) -> Result<(), SchedError> {
        self.sync_configs(sm);
        // Sites the scheduler stopped (suspend, preempt, quarantine, an IP no longer granted):
        // no new request for them; what the engine held goes back to the crawl queue.
        for (name, sites) in sm.take_stopped() {
            for site in &sites {
                self.sites.ended(&name, site, unix_secs());
            }
            let held = self.engine.withdraw(&name, Some(&sites));
            sm.give_back(&name, held)?;
        }
        let want = self.engine.wants();
        if want > 0 {
            sm.dispatch(want, now_secs)?;
        }
        // The entries of links that joined their site's visit come even to a full engine.
        for r in sm.take_ready(want) {
            self.sites.started(&r.collection, &r.site, unix_secs());
            self.engine.push(r);
        }
        // Every visit's entry waiting was among them (a collection paused for a full disk
        // keeps its visits with its ready entries).
        self.engine.visits_handed();
        let (reqs, done) = self.engine.poll(self.now());
        // An error of the scheduler (a full disk) while releasing a site or answering one
        // request: every other site is still released, every other request still sent or
        // answered, and the first error returned at the end.
        let mut first_err: Option<SchedError> = None;
        self.sites.requested(&mut self.engine, &reqs, unix_secs());
        for a in done {
            if let Action::SiteDone { collection, site } = a {
                debug!("collection {}: site {site} done", show(&collection));
                self.sites.ended(&collection, &site, unix_secs());
                if let Err(e) = sm.site_done(&collection, &site) {
                    first_err.get_or_insert(e);
                }
            }
        }
        let mut batch = Vec::with_capacity(reqs.len());
        for r in reqs {
            let Ok(ip) = r.ip.parse::<IpAddr>() else {
                // Not fetchable as given (bad address): answered as a network failure.
                let o = Outcome {
                    id: r.id,
                    result: Err(Failure::Network(format!("bad address {}", r.ip))),
                    elapsed: 0.0,
                    net_read: 0,
                    net_written: 0,
                };
                let now = self.now();
                let actions = self.complete(o, now);
                if let Err(e) = self.apply(sm, actions) {
                    first_err.get_or_insert(e);
                }
                continue;
            };
            let req = to_fetch(r, ip);
            if !self.logins.active() {
                batch.push(req);
                continue;
            }
            let now = self.now();
            let collection = self.engine.collection_of(req.id).unwrap_or_default();
            batch.extend(self.logins.admit(collection, req, now));
        }
        if self.logins.active() {
            let now = self.now();
            let overdue = self.logins.expire(now);
            self.released.extend(overdue);
        }
        batch.append(&mut self.released);
        if !batch.is_empty() {
            // A request the fetcher refuses (a collection header that is not one header line,
            // say) is that request's failure: the engine gets its outcome, the others go. A
            // fetcher that is gone (its thread ended) fails no URI: the node is stopping.
            for (req, e) in self.fetcher.submit_many(batch) {
                if matches!(e, FetchError::Shutdown) {
                    error!("the fetcher is gone: {} not fetched", req.url);
                    continue;
                }
                warn!("the fetcher refused {}: {e}", req.url);
                let refused = FetchResult {
                    id: req.id,
                    url: req.url,
                    result: Err(e),
                    started: Instant::now(),
                    elapsed: Duration::ZERO,
                    queued: Duration::ZERO,
                    net_read: 0,
                    net_written: 0,
                };
                if let Err(e) = self.on_result(sm, refused, None) {
                    first_err.get_or_insert(e);
                }
            }
        }
        let finished = self.finish_entries(sm);
        match first_err {
            Some(e) => Err(e),
            None => finished,
        }
    }

    /// Logins finished by their worker, for the node's `select!`.
    pub fn logins_done(&self) -> &Receiver<crate::login::Done> {
        self.logins.done()
    }

    /// Takes a finished login: the requests that waited for it go at the next step.
    pub fn login_done(&mut self, d: crate::login::Done) {
        let now = self.now();
        let released = self.logins.finish(d, now);
        self.released.extend(released);
    }

    /// True once when a sitemap read since the last call queued URIs: the node's loop then
    /// dispatches them before it reads the next fetch result, rather than after a whole
    /// batch of results (reading a large sitemap takes a while, and a refresh cycle's
    /// sitemaps come in together).
    pub fn take_sitemap_queued(&mut self) -> bool {
        std::mem::take(&mut self.sitemap_queued)
    }

    /// Tells the scheduler which entries the engine finished (their in-flight journal records).
    fn finish_entries(&mut self, sm: &mut NodeScheduler) -> Result<(), SchedError> {
        for (name, seq) in self.engine.take_done() {
            sm.entry_done(&name, seq)?;
        }
        Ok(())
    }

    /// Holds `first` (if any) and the fetch results waiting, `max` in all at most, and computes
    /// the MD5s of their bodies (the document checksums, MS-FSCMT 2.2.5.3) together: eight at
    /// a time cost about what one costs (`md5many`). False when none is held.
    pub fn hold_results(&mut self, first: Option<FetchResult>, max: usize) -> bool {
        let start = self.held.len();
        self.held.extend(first.map(|r| (r, None)));
        while self.held.len() - start < max {
            let Ok(r) = self.fetcher.results.try_recv() else {
                break;
            };
            self.held.push_back((r, None));
        }
        let new = self.held.range(start..);
        let bodies: Vec<&[u8]> = new
            .filter_map(|(r, _)| r.result.as_ref().ok().map(|resp| resp.body.as_slice()))
            .collect();
        let mut sums = vec![[0u8; 16]; bodies.len()];
        crawlfleet_core::md5many::md5_many(&bodies, &mut sums);
        let mut sums = sums.into_iter();
        for (r, sum) in self.held.range_mut(start..) {
            if r.result.is_ok() {
                *sum = sums.next();
            }
        }
        !self.held.is_empty()
    }

    /// Results held by [`Crawler::hold_results`] not yet read.
    pub fn has_held(&self) -> bool {
        !self.held.is_empty()
    }

    /// Reads the next result held, if any.
    pub fn read_held(&mut self, sm: &mut NodeScheduler) -> Option<Result<(), SchedError>> {
        let (r, sum) = self.held.pop_front()?;
        Some(self.on_result(sm, r, sum))
    }

    /// Reads one fetch result; `checksum` is its body's MD5 if already computed.
    fn on_result(
        &mut self,
        sm: &mut NodeScheduler,
        r: FetchResult,
        checksum: Option<[u8; 16]>,
    ) -> Result<(), SchedError> {
        let mut r = r;
        if self.logins.active() {
            match self.logins.observe(&r, self.now()) {
                Seen::Crawl => {}
                Seen::Held => return Ok(()),
                Seen::Again(req) => {
                    self.released.push(*req);
                    return Ok(());
                }
            }
        }
        if let (Ok(resp), Some(a)) = (&mut r.result, &self.archiver) {
            if let (Some(wire), Some(c)) = (resp.wire.take(), self.engine.collection_of(r.id)) {
                if a.archives(c) {
                    a.archive(
                        c,
                        crawlfleet_core::warc::Exchange {
                            uri: r.url.to_string(),
                            ip: Some(wire.peer.ip()),
                            date_ms: crawlfleet_core::clock::unix_now_ms(),
                            request: wire.request,
                            response: wire.response,
                            truncated: resp.truncated,
                        },
                    );
                }
            }
        }
        let result = match r.result {
            Ok(resp) => Ok(Fetched {
                status: resp.status,
                headers: resp.headers,
                body: resp.body,
                truncated: resp.truncated,
                checksum,
            }),
            Err(e) => Err(failure(e)),
        };
        let o = Outcome {
            id: r.id,
            result,
            elapsed: r.elapsed.as_secs_f64(),
            net_read: r.net_read,
            net_written: r.net_written,
        };
        self.latency.record(o.elapsed);
        let now = self.now();
        let actions = self.complete(o, now);
        self.apply(sm, actions)
    }

    /// The engine reads an outcome; what it counts is the request's site's.
    fn complete(&mut self, o: Outcome, now: f64) -> Vec<Action> {
        self.sites.complete(&mut self.engine, o, now, unix_secs())
    }

    fn apply(&mut self, sm: &mut NodeScheduler, actions: Vec<Action>) -> Result<(), SchedError> {
        // A page's links are queued below one after another, each asking the seen set, whose
        // table is larger than the cache: their places are fetched together first.
        for a in &actions {
            if let Action::Links {
                collection,
                links,
                queue,
                ..
            } = a
            {
                for l in queue.iter().filter_map(|q| links.get(q.link)) {
                    sm.prefetch_seen(collection, l.url.as_bytes());
                }
            }
        }
        for a in actions {
            match a {
                Action::Queue {
                    collection,
                    entry,
                    site,
                } => {
                    let site = site.as_ref().map(|k| k.1.as_str());
                    sm.add_uri_at(&collection, &entry, site, false)?;
                }
                Action::Document(d) => {
                    if let (Some(b), false) = (&self.links, d.redirected_from.is_empty()) {
                        // The redirect chain and its target: one equivalence class.
                        let mut class: Vec<&[u8]> =
                            d.redirected_from.iter().map(Vec::as_slice).collect();
                        class.push(&d.uri);
                        if let Err(e) = b.add_equivalents(&d.collection, &d.uri, &class, unix_now())
                        {
                            debug!("link store: equivalence class of a document refused: {e}");
                        }
                    }
                    if let Some(v) = sm.document(d)? {
                        self.booked_verdict(&v);
                    }
                }
                Action::Links {
                    collection,
                    from,
                    site,
                    links,
                    queue,
                    key,
                    refresh_cycle,
                } => {
                    // Links to the page's own site join its visit while it has room.
                    let offered = self.engine.visit_room(&key);
                    let mut room = offered;
                    let mut queued = Ok(true);
                    for (entry, at) in link_entries(&from, &links, &queue, &key, refresh_cycle) {
                        queued = match at {
                            Some(k) => sm.add_link_on_visit(&collection, &entry, &k.1, &mut room),
                            None => sm.add_uri_at(&collection, &entry, None, false),
                        };
                        if queued.is_err() {
                            break;
                        }
                    }
                    // What was taken counts, even when a later link failed.
                    self.engine.promise_visit(&key, offered - room);
                    queued?;
                    if let Some(b) = &self.links {
                        let out: Vec<OutLink<'_>> = links
                            .iter()
                            .map(|l| OutLink {
                                url: l.url.as_bytes(),
                                anchor: l.anchor.as_bytes(),
                                intra: l.intra,
                            })
                            .collect();
                        if let Err(e) = b.add_links(&collection, &from, &out, unix_now()) {
                            debug!("link store: links of a page refused: {e}");
                        }
                        // The page's site (2.2.1.3.1.7), from the URL the request parsed.
                        if let Err(e) = b.sitemap(&collection, &from, site.as_bytes()) {
                            debug!("link store: sitemap line refused: {e}");
                        }
                    }
                }
                Action::SiteDone { collection, site } => {
                    self.sites.ended(&collection, &site, unix_secs());
                    sm.site_done(&collection, &site)?
                }
                Action::Sitemaps {
                    collection,
                    site,
                    urls,
                } => sm.sitemaps_offered(&collection, &site, &urls)?,
                Action::Sitemap {
                    collection,
                    site,
                    url,
                    found,
                    result,
                } => {
                    let t = sm.sitemap_read(&collection, &site, &url, found, result)?;
                    self.sitemap_queued |= t.queued > 0;
                    let c = self.engine.counters_mut(&collection);
                    match t.read {
                        true => c.add(Count::SitemapsRead, 1),
                        false => c.add(Count::SitemapsRefused, 1),
                    }
                    c.add(Count::SitemapSkipped, t.skipped);
                }
                Action::Unchanged { collection, uri } => {
                    if let Some(v) = sm.unchanged(&collection, &uri)? {
                        self.booked_verdict(&v);
                    }
                }
                Action::Gone { collection, uri } => {
                    if let Some(v) = sm.gone(&collection, &uri)? {
                        self.booked_verdict(&v);
                    }
                }
            }
        }
        for v in sm.take_verdicts() {
            self.booked_verdict(&v);
        }
        self.finish_entries(sm)
    }

    /// [`Self::verdict`], what it counts booked to the document's site.
    fn booked_verdict(&mut self, v: &Verdict) {
        self.sites.before(&mut self.engine, &v.collection);
        self.verdict(v);
        self.sites
            .after_uri(&mut self.engine, &v.collection, &v.uri, unix_secs());
    }

    /// Counts what became of a document (MS-FSCADM 2.2.4.9): stored (added or modified),
    /// unchanged, deleted, or skipped as a duplicate (`cs`); tells the link store (SPRel
    /// 2.2.1.3.2.1) of added, modified and deleted documents, and of the owner's new duplicate.
    fn verdict(&mut self, v: &Verdict) {
        let c = self.engine.counters_mut(&v.collection);
        match v.fate {
            Fate::Duplicate => c.skip_doc(doc_skip::DUPLICATE),
            Fate::Unchanged => c.add(Count::Unchanged, 1),
            Fate::Added | Fate::Modified => {
                c.add(Count::Stored, 1);
                if v.fate == Fate::Modified {
                    c.add(Count::Modified, 1);
                }
            }
            Fate::Deleted => c.add(Count::Deleted, 1),
        }
        let Some(b) = &self.links else {
            return;
        };
        let sent = match v.fate {
            // The document's duplicates are not known here, so the DUPLICATE column is the
            // empty class. A modified document is added again (its index entry replaced).
            Fate::Added | Fate::Modified => b.uri_add(&v.collection, &v.uri, &[], unix_now()),
            // The owner of the checksum gained a URL: its equivalence class changed
            // (URLSCHCHANGE, one line per member this node knows of: the duplicate).
            Fate::Duplicate if !v.owner.is_empty() && v.owner != v.uri => {
                b.uri_schchange(&v.collection, &v.owner, &[v.uri.as_slice()], unix_now())
            }
            // WebAnalyzer `delete` (2.2.1.3.1.3) and SPRel DEL (2.2.1.3.2.1).
            Fate::Deleted => b
                .delete(&v.collection, &v.uri, unix_now())
                .and_then(|()| b.uri_del(&v.collection, &v.uri, unix_now())),
            _ => Ok(()),
        };
        if let Err(e) = sent {
            debug!("link store: SPRel line refused: {e}");
        }
    }

    /// Counts verdicts that arrived with frames from the duplicate servers.
    pub fn collect_verdicts(&mut self, sm: &mut NodeScheduler) {
        for v in sm.take_verdicts() {
            self.booked_verdict(&v);
        }
    }

    /// Adds what the engine counted since the last call to the FSCADM statistics (2.2.4.9
    /// attribute names; DocSize and DLTime one sample per document and download, 2.2.5), and
    /// sets the discrete values (ActiveSites, QueueLength, PPChecksums; LastUri is not
    /// tracked). The node's CMD_UM_STAT is made from the same statistics.
    pub fn feed_stats(&mut self, sm: &mut NodeScheduler, stats: &mut Stats) {
        let (_, _, sites) = self.engine.load();
        let names: Vec<Vec<u8>> = self.engine.all_counters().map(|(n, _)| n.clone()).collect();
        for name in &names {
            if stats.collection(name).is_none() {
                stats.add_collection(name, crate::multinode::now_secs());
            }
            let cur = self.engine.counters_mut(name);
            let extremes = cur.take_extremes();
            let cur = cur.clone();
            let old = self.fed.entry(name.clone()).or_default();
            let delta = cur.since(old);
            for (key, v) in delta.continuous() {
                if v != 0.0 && key != "DocSize" && key != "DLTime" {
                    stats.add(name, key, v);
                }
            }
            if let Some((lo, hi)) = extremes.doc_size {
                let n = delta.docs;
                stats.add_samples(
                    name,
                    "DocSize",
                    delta.doc_size as f64,
                    n,
                    lo as f64,
                    hi as f64,
                );
            }
            if let Some((lo, hi)) = extremes.dl_time {
                stats.add_samples(name, "DLTime", delta.dl_time, delta.downloads, lo, hi);
            }
            // MS-FSCADM 2.2.4.10: documents new (unseen, unique checksum) and modified.
            let added = delta.stored.saturating_sub(delta.modified);
            if added > 0 {
                stats.add(name, "PPAdded", added as f64);
            }
            if delta.modified > 0 {
                stats.add(name, "PPModified", delta.modified as f64);
            }
            for (key, buckets) in delta.histograms() {
                for (bucket, n) in buckets {
                    stats.hist(name, key, &bucket, n as f64);
                }
            }
            *old = cur;
            stats.set(name, "ActiveSites", sites as f64);
            // Beyond FSCADM 2.2.4.10: the collection's form logins (docs/collection-config.md).
            let logins = self.logins.take_counts(name);
            for (key, n) in [
                ("Logins", logins.made),
                ("LoginFailures", logins.failed),
                ("Relogins", logins.relogins),
            ] {
                if n > 0 {
                    stats.add(name, key, n as f64);
                }
            }
            // Beyond FSCADM 2.2.4.9: the WARC records and compressed bytes written.
            if let Some(w) = self.archiver.as_ref().and_then(|a| a.counts(name)) {
                stats.set(name, "WarcRecords", w.records as f64);
                stats.set(name, "WarcBytes", w.bytes as f64);
            }
            if let Some((q, _)) = sm.queued(name) {
                stats.set(name, "QueueLength", q as f64);
            }
            if let Some(n) = sm.checksums(name) {
                stats.set(name, "PPChecksums", n as f64);
            }
        }
    }

    /// Hands what each crawl site got since the last call to the per-site statistics.
    pub fn feed_site_stats(&mut self, sm: &NodeScheduler, sites: &mut SiteStats) {
        sites.absorb(self.sites.take(), |c| sm.refresh_cycle(c).unwrap_or(0));
    }

    /// The status of every collection.
    pub fn status(&self, sm: &NodeScheduler) -> NodeStatus {
        let (held, in_flight, sites) = self.engine.load();
        let mut out = NodeStatus {
            collections: BTreeMap::new(),
            at: Some(Instant::now()),
            indexnow_dropped: sm.indexnow_dropped(),
            rup: Default::default(),
        };
        for (name, _) in sm.collections() {
            let counters = self.engine.counters(&name).cloned().unwrap_or_default();
            let queued = sm.queued(&name).map_or(0, |(q, _)| q);
            out.collections.insert(
                String::from_utf8_lossy(&name).into_owned(),
                CollectionStatus {
                    counters,
                    queued,
                    held,
                    in_flight,
                    active_sites: sites,
                    drained: sm.is_drained(&name) && self.engine.is_quiet(),
                    feed: Default::default(),
                    warc: self
                        .archiver
                        .as_ref()
                        .and_then(|a| a.counts(&name))
                        .unwrap_or_default(),
                },
            );
        }
        out
    }
}

fn unix_now() -> u64 {
    crawlfleet_core::clock::Clock::System.now_u64()
}

fn unix_secs() -> i64 {
    i64::try_from(unix_now()).unwrap_or(i64::MAX)
}

/// Which applications receive a collection's link data: the `linkstore` section's
/// `applications` list ("webanalyzer", "sharepoint"); WebAnalyzer alone when absent.
fn link_applications(dict: &Value<'_>) -> Applications {
    let Some(list) = dict
        .get(b"linkstore")
        .and_then(|s| s.get(b"applications"))
        .and_then(Value::as_list)
    else {
        return Applications {
            webanalyzer: true,
            sharepoint: false,
        };
    };
    let has = |n: &[u8]| {
        list.iter()
            .any(|v| v.as_bytes().is_some_and(|b| b.eq_ignore_ascii_case(n)))
    };
    Applications {
        webanalyzer: has(b"webanalyzer"),
        sharepoint: has(b"sharepoint"),
    }
}

/// The fetcher's request for `r` to `ip` (its address), its URL and headers moved.
fn to_fetch(r: Request, ip: IpAddr) -> FetchRequest {
    FetchRequest {
        id: r.id,
        url: r.parsed,
        addr: SocketAddr::new(ip, r.port),
        headers: r.headers,
        max_body: r.max_body,
        connect_timeout: Duration::from_secs_f64(r.connect_timeout),
        timeout: Duration::from_secs_f64(r.timeout),
        head: false,
        http10: r.http10,
        post: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crawlfleet_core::sched::collections::meta;
    use crawlfleet_core::sched::node::NodeOptions;

    fn config(delay: f64) -> Value<'static> {
        meta(vec![("delay", Value::Float(delay))])
    }

    /// The engine takes each configuration the scheduler parses, once: a step after an
    /// update gives it the new one, a step with none leaves it.
    #[test]
    fn the_engine_follows_each_configuration_of_the_scheduler() {
        let dir = tempfile::TempDir::with_prefix("cf-crawler-configs-").unwrap();
        let mut opts = NodeOptions::new(b"n1");
        opts.standalone = true;
        let mut sm = NodeScheduler::open(dir.path(), opts).unwrap();
        let mut crawler = Crawler::start("crawlfleet-test", 512, None).unwrap();
        sm.conf_add(b"web", config(2.5)).unwrap();
        crawler.sync_configs(&mut sm);
        let first = crawler.engine.config(b"web").unwrap().clone();
        assert_eq!(first.delay, 2.5);
        assert!(Arc::ptr_eq(
            &first,
            &sm.collection_settings(b"web").unwrap()
        ));
        crawler.sync_configs(&mut sm);
        assert!(Arc::ptr_eq(crawler.engine.config(b"web").unwrap(), &first));
        // An update, even to the same dict, is a new parse: taken.
        sm.conf_update(b"web", config(0.5)).unwrap();
        crawler.sync_configs(&mut sm);
        assert_eq!(crawler.engine.config(b"web").unwrap().delay, 0.5);
        sm.conf_update(b"web", config(0.5)).unwrap();
        crawler.sync_configs(&mut sm);
        let now = sm.collection_settings(b"web").unwrap();
        assert!(Arc::ptr_eq(crawler.engine.config(b"web").unwrap(), &now));
        assert!(!Arc::ptr_eq(&now, &first));
    }
}
