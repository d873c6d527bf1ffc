//! The node scheduler as a state machine (MS-FSCMT 3.1), free of sockets: the role shell feeds
//! it frames from the multinode scheduler and the duplicate servers, and timer ticks, and sends
//! what it returns to [`Dest`]inations.
//!
//! The crawl queue of each collection is persistent ([`crate::queue`]); so are the routing
//! database, the collection configurations and states. The crawl engine (fetching) takes work
//! through [`NodeScheduler::dispatch`] and [`NodeScheduler::take_ready`] and reports the end of
//! a site with [`NodeScheduler::site_done`]: a site is crawled only after the multinode scheduler
//! allowed its IP address (CMD_UM_START_CRAWL_IP, 3.1.5.21), at most 10 sites per IP address,
//! never while quarantined or blocked.
//!
//! Decisions where the spec is silent:
//! - Entries of a quarantined or blocked site wait in the collection's persistent quarantine
//!   queue and return to the front of the crawl queue when the Quarantine timer finds the site
//!   free again.
//! - A standalone node scheduler (no multinode scheduler, FSCADM IsDistributed = 0) answers its
//!   own START_CRAWL_IP (one collection per IP, the same 10-sites rule), resolves names through
//!   the shell ([`Outbox::lookups`]) and keeps every site.
//! - CMD_ADM_PREEMPT_SITE with requeue puts the site's pending entries at the front of the crawl
//!   queue, without requeue at the back.
//! - CMD_UM_DELETE_SITE / CMD_UM_DELETE_URIS drop the site's (the URIs') queued entries and their
//!   checksums (PPDUP_REMOVE to the duplicate servers).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use foldhash::fast::RandomState as Fast;
use log::{debug, error, info, warn};

use crate::clock::Clock;
use crate::config::CollectionConfig;

use super::collections::{meta, CollectionDirs, StoreError};
use super::dns::{DnsCache, DnsEntry};
use super::inflight::Inflight;
use super::multinode::SchedError;
use super::seen::SeenSet;
use super::{parse_record, peek_record, record, show, start_uri_entry, start_uris, Outbox};

#[path = "node_conns.rs"]
mod conns;
#[path = "node_diskfull.rs"]
mod diskfull;
#[cfg(test)]
pub(super) use diskfull::KILL_BEFORE_PUT_BACK_PUBLISHED;
#[cfg(test)]
pub(super) use sites::{KILLED_IN_DISPATCH, KILL_IN_DISPATCH_AT};
#[path = "node_docs.rs"]
mod docs;
#[path = "node_frames.rs"]
mod frames;
#[path = "node_indexnow.rs"]
mod indexnow;
#[path = "node_ops.rs"]
mod ops;
#[path = "node_owners.rs"]
mod owners;
#[path = "node_refresh.rs"]
mod refresh;
#[path = "node_rup.rs"]
mod rup;
#[path = "node_sitemap.rs"]
mod sitemap;
#[path = "node_sites.rs"]
mod sites;
#[path = "node_store.rs"]
mod store;
#[path = "node_timers.rs"]
mod timers;
use crate::feed::Feeder;
use crate::frame::Priority;
use crate::marshal::{self, Limits, Value};
use crate::msg::types::conf_state;
use crate::msg::types::refresh_options;
use crate::msg::types::uri_flags;
use crate::msg::{
    AddRoute, Bytes, Checksum, CollectionOnly, CrawlQueueEntry, Init, Log, Message, PpdupChecksum,
    PpdupConfRemove, PpdupSetConfig, RouteList, StartCrawlIp, Stat, StopCrawlIp, UriMsg,
};
use crate::queue::{CrawlQueue, QueueOptions, SyncPolicy};
use crate::routing::{
    crawl_site, crawl_site_ref, routing_attribute, site_host, AttrMemo, RoutingDb,
};
use crate::store::{store_dir, CrawlStore, UriState};
pub use diskfull::RETRY_EVERY as DISK_FULL_RETRY;
pub use docs::Verdict;
pub use refresh::{RefreshOnly, RefreshPolicy};
pub use rup::url_base;
pub use sitemap::{SitemapTally, HOLD_SECONDS as SITEMAP_HOLD_SECONDS};
pub use store::Fate;

/// Where a frame of the node scheduler goes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dest {
    /// The multinode scheduler.
    Multinode,
    /// A duplicate server, by its configured address.
    Dup(String),
}

/// Settings of a node scheduler.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The node identifier (PKT_NODE_ID).
    pub node_id: Vec<u8>,
    /// No multinode scheduler: the node decides alone.
    pub standalone: bool,
    /// The administrative interface reported in CMD_UM_INIT (PKT_XMLRPCPRT).
    pub xmlrpc: (Vec<u8>, i64),
    /// Seconds a site is blocked after a refused START_CRAWL_IP (3.1.5.21: 30 minutes).
    pub block_seconds: i64,
    /// Sites crawled at once per IP address (3.1.5.21: 10).
    pub max_sites_per_ip: usize,
    /// Seconds a name resolved by the standalone node is cached.
    pub dns_ttl: i64,
    /// Segment size of the crawl queues.
    pub queue_segment_bytes: u64,
    /// Where the node reads the time of crawls, deletes and refresh cycles (a test's manual
    /// clock, or the system's).
    pub clock: Clock,
}

impl NodeOptions {
    /// Defaults for a node named `node_id`.
    pub fn new(node_id: &[u8]) -> Self {
        NodeOptions {
            node_id: node_id.to_vec(),
            standalone: false,
            xmlrpc: (b"localhost".to_vec(), 0),
            block_seconds: 30 * 60,
            max_sites_per_ip: 10,
            dns_ttl: 3600,
            queue_segment_bytes: 64 << 20,
            clock: Clock::System,
        }
    }
}

/// Counters sent as CMD_UM_STAT deltas (3.1.6 Statistics Timeout).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeCounters {
    /// Entries received from the multinode scheduler or added locally.
    pub uris_queued: u64,
    /// Entries sent to the multinode scheduler (sites routed elsewhere or not routed yet).
    pub uris_forwarded: u64,
    /// Entries set aside because their site was quarantined or blocked.
    pub uris_quarantined: u64,
    /// Entries dropped: no crawl site, a failed DNS lookup, a deleted site or URI.
    pub uris_dropped: u64,
    /// Sites allowed and started.
    pub sites_started: u64,
    /// Sites refused or over the per-IP limit (blocked for 30 minutes).
    pub sites_blocked: u64,
    /// URIs not queued because they were queued before in this refresh cycle (skip code `ic`).
    pub uris_seen: u64,
    /// New URIs held back while the collection only refreshes.
    pub uris_held_refresh_only: u64,
    /// URLs of IndexNow submissions queued (docs/indexnow.md).
    pub indexnow_queued: u64,
}

impl NodeCounters {
    fn to_value(self) -> Value<'static> {
        meta(vec![
            ("uris_queued", Value::int(self.uris_queued as i64)),
            ("uris_forwarded", Value::int(self.uris_forwarded as i64)),
            ("uris_quarantined", Value::int(self.uris_quarantined as i64)),
            ("uris_dropped", Value::int(self.uris_dropped as i64)),
            ("sites_started", Value::int(self.sites_started as i64)),
            ("sites_blocked", Value::int(self.sites_blocked as i64)),
            ("uris_seen", Value::int(self.uris_seen as i64)),
            (
                "uris_held_refresh_only",
                Value::int(self.uris_held_refresh_only as i64),
            ),
            ("indexnow_queued", Value::int(self.indexnow_queued as i64)),
        ])
    }
}

/// An entry the crawl engine may fetch now: its site is allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct Ready {
    /// The collection.
    pub collection: Vec<u8>,
    /// The crawl site.
    pub site: String,
    /// The IP address the site was allowed for.
    pub ip: String,
    /// The queue record ([`super::parse_record`] gives the entry).
    pub record: Vec<u8>,
    /// Its number in the collection's in-flight journal: hand it to
    /// [`NodeScheduler::entry_done`] when the entry is finished.
    pub seq: u64,
    /// Conditional request headers (If-None-Match, If-Modified-Since) from the crawl store's
    /// record of the URI, filled by [`NodeScheduler::take_ready`].
    pub conditional: Vec<(String, String)>,
}

/// A site waiting for its address or for permission.
#[derive(Default)]
struct Waiting {
    host: String,
    ip: Option<String>,
    /// (in-flight sequence number, record).
    records: Vec<(u64, Vec<u8>)>,
}

/// How long forwarded URIs are kept to be sent again to a multinode scheduler that restarted:
/// well over its queue's sync interval.
const FORWARD_RESEND_WINDOW: std::time::Duration = std::time::Duration::from_secs(2);
/// At most this many are kept (the newest).
const FORWARD_RESEND_MAX: usize = 1 << 16;

struct Collection {
    /// The collection's name (PKT_DSPECNAME).
    name: Vec<u8>,
    dict: Value<'static>,
    /// `dict` parsed, shared with the crawler ([`NodeScheduler::collection_settings`]).
    settings: Arc<CollectionConfig>,
    state: i64,
    /// Refresh cycles and what decides the crawl mode (MS-FSCMT 3.1.5.10; FSCADM CrawlMode).
    refresh: RefreshState,
    /// The crawl queues, and what was taken from them (3.1.1).
    queue: CrawlQueue,
    quarantine_queue: CrawlQueue,
    /// URIs queued in this refresh cycle.
    seen: SeenSet,
    /// Entries taken from the queues and not finished.
    inflight: Inflight,
    /// Entries finished since the last sync; marked done in `inflight` once the feed and the
    /// crawl store are durable.
    finished: Vec<u64>,
    /// Politeness and site control: quarantine, START_CRAWL_IP, active sites (3.1.1).
    sites: SiteControl,
    /// Duplicate detection: the checksum database and the duplicate server's answers awaited
    /// (3.1.5.23-3.1.5.26).
    dedup: Dedup,
    /// The crawl store: what became of every URI crawled.
    store: CrawlStore,
    /// The document feed and its suspension (3.1.5.5, 3.1.5.6).
    feeding: Feeding,
    /// The collection's directory.
    dir: PathBuf,
    /// The 2.2.5 structures (FSCADM names) of what was gathered since the last CMD_UM_STAT,
    /// one per refresh cycle ([`NodeScheduler::add_stat_report`]).
    stat_reports: Vec<Value<'static>>,
    counters: NodeCounters,
    sent: NodeCounters,
    /// The node's clock (see [`NodeOptions::clock`]).
    clock: Clock,
    /// The crawl paused for a full disk, and the entries waiting for room in the queues.
    disk: diskfull::DiskPause,
    /// The sites' sitemaps, and the stored URIs a refresh cycle holds for them.
    sitemaps: sitemap::SiteMaps,
}

/// A collection's refresh cycles and crawl mode.
struct RefreshState {
    /// The current refresh cycle.
    cycle: i64,
    /// When the current refresh cycle began (Unix seconds).
    cycle_started: i64,
    policy: RefreshPolicy,
    /// New URIs (not in the crawl store) met while the collection only refreshes; back to
    /// the crawl queue when it may crawl new content again.
    new_held: CrawlQueue,
    /// Stored documents, as last counted (`limits.max_doc`).
    doc_count: u64,
    /// Free space of the data directory's file system, percent, as last read
    /// (`limits.disk_free`).
    disk_free_pct: Option<f64>,
}

/// Which sites a collection may crawl now.
#[derive(Default)]
struct SiteControl {
    /// Quarantine list (3.1.1): site -> until (Unix seconds).
    quarantine: HashMap<String, i64>,
    /// Sites blocked after a refused START_CRAWL_IP: site -> until.
    blocked: HashMap<String, i64>,
    /// Active sites and their IP address.
    active: HashMap<String, String>,
    /// Crawl site IP addresses (3.1.1): IP -> the active sites on it.
    ip_sites: HashMap<String, BTreeSet<String>>,
    waiting: HashMap<String, Waiting>,
    ready: VecDeque<Ready>,
    /// Entries of links that joined their site's visit ([`NodeScheduler::add_link_on_visit`]):
    /// handed to the crawl engine all at once, before `ready`, at the next
    /// [`NodeScheduler::take_ready`].
    visit: VecDeque<Ready>,
    /// Sites stopped since the crawl engine last asked ([`NodeScheduler::take_stopped`]):
    /// the entries it holds for them come back to the crawl queue.
    stopped: Vec<String>,
}

impl SiteControl {
    /// Puts the entries of `visit` at the front of `ready`, in their order: what goes through
    /// every ready entry (stopping sites, deleting URIs, a restarted cycle) sees them too.
    fn fold_visits(&mut self) {
        while let Some(r) = self.visit.pop_back() {
            self.ready.push_front(r);
        }
    }
}

/// A collection's duplicate detection.
#[derive(Default)]
struct Dedup {
    /// The checksum database (3.1.5.23): checksum -> URIs this node owns it for (MD5: foldhash).
    checksums: HashMap<Checksum, owners::Owners, Fast>,
    /// PPDUP_ADDs sent and not answered: URI -> checksum. This map and `pending_docs` are
    /// looked up six times a page: hashed with foldhash rather than SipHash.
    pending_adds: HashMap<Vec<u8>, Checksum, Fast>,
    /// PPDUP_REMOVEs sent and not answered: URI -> their checksums, oldest first
    /// (PPDUP_REMOVE_OK names only the URI).
    pending_removes: HashMap<Vec<u8>, VecDeque<Checksum>>,
    /// Fetched documents waiting for their duplicate check: URI -> documents, oldest first.
    pending_docs: HashMap<Vec<u8>, VecDeque<Box<crate::crawl::Document>>, Fast>,
}

/// A collection's document feed.
struct Feeding {
    /// Feeding suspended for every destination (CMD_UM_FEEDING_SUSPEND without one).
    all_suspended: bool,
    /// Destinations whose feeding is suspended.
    suspended: BTreeSet<Vec<u8>>,
    /// The document feed (the document log, held while feeding is suspended).
    feeder: Feeder,
    /// The document-log sequence number from which the crawl store may lack what was fed
    /// (saved in [`store::FED_MARK`] after each store sync).
    fed_mark: store::FedMark,
}

/// A duplicate server as the node sees it (3.1.1 duplicate server status structure).
#[derive(Default)]
struct DupStatus {
    connected: bool,
    /// Our vector clock toward it: the PKT_VCLOCK of the last PPDUP_SET_CONFIG sent.
    vclock: i64,
    /// The last SET_CONFIG was acknowledged (3.1.5.22).
    updated: bool,
    keepalive_pending: bool,
}

/// The node scheduler.
pub struct NodeScheduler {
    opts: NodeOptions,
    dirs: CollectionDirs,
    routing: RoutingDb,
    collections: BTreeMap<Vec<u8>, Collection>,
    dns: DnsCache,
    /// Names asked for and not answered yet.
    dns_pending: BTreeSet<String>,
    multinode_connected: bool,
    multinode_keepalive_pending: bool,
    /// CMD_UM_KEEPALIVE received and not answered yet: the answer waits for the next sync of
    /// the crawl queues, so that it confirms every CMD_UM_URI received before it is durable
    /// (the multinode scheduler keeps a copy of each until then: multinode/retain.rs).
    keepalive_acks_owed: u32,
    /// CMD_UM_URI frames forwarded to the multinode scheduler lately, newest last. The protocol
    /// has no acknowledgement for them, and a multinode scheduler that dies loses what it had
    /// not synced yet (its sync interval, 100 ms by default): when it comes back, these go
    /// again (a node that already has an entry drops the copy: `seen`).
    forwarded: VecDeque<(std::time::Instant, Vec<u8>)>,
    /// The frames of `forwarded` when the connection closed, sent when it is up again.
    resend: VecDeque<Vec<u8>>,
    dups: BTreeMap<String, DupStatus>,
    /// Standalone: which collection holds each IP (the multinode's job otherwise).
    local_ip_locks: HashMap<String, Vec<u8>>,
    /// Duplicate-check answers for the crawl engine.
    verdicts: Vec<Verdict>,
    /// The RUP robot's sites (`node_rup.rs`).
    rup: rup::RupHook,
    out: Outbox<Dest>,
    /// IndexNow URLs no collection covers, since the start.
    indexnow_dropped: u64,
    /// Refresh cycles begun since start ([`NodeScheduler::cycles_begun`]).
    cycles_begun: u64,
    /// The routing attribute of the last site routed (`add_uri`).
    attr_memo: AttrMemo,
}

/// The conditional request headers for a queue record whose URI has a stored copy with
/// validators; none for an entry that must be fetched whole (URIF_PROMOTE, URIF_FORCE).
fn conditional(c: &Collection, rec: &[u8]) -> Vec<(String, String)> {
    let Ok((uri, flags)) = peek_record(rec) else {
        return Vec::new();
    };
    if flags & (uri_flags::URIF_PROMOTE | uri_flags::URIF_FORCE) != 0 {
        return Vec::new();
    }
    store::conditional_headers(&c.store, &uri)
}

fn owned(b: &[u8]) -> Bytes<'static> {
    Cow::Owned(b.to_vec())
}

/// The duplicate servers a collection configuration names: the `dupservers` list of its `ppdup`
/// section (strings "host:port").
pub fn ppdup_servers(dict: &Value<'_>) -> Vec<String> {
    let Some(sec) = dict.get(b"ppdup") else {
        return Vec::new();
    };
    let Some(list) = sec.get(b"dupservers") else {
        return Vec::new();
    };
    list.as_list()
        .or_else(|| list.as_tuple())
        .unwrap_or(&[])
        .iter()
        .filter_map(|v| v.as_bytes())
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect()
}

/// Queues an entry in a collection's crawl queue: back, or front when urgent.
fn queue_local(
    c: &mut Collection,
    entry: &CrawlQueueEntry<'_>,
    urgent: bool,
) -> Result<(), SchedError> {
    // A URI queued before in this cycle is not queued again, unless the entry insists
    // (promotion, forced re-crawl).
    let insists = entry.uri_flags & (uri_flags::URIF_PROMOTE | uri_flags::URIF_FORCE) != 0;
    // A stored URI waiting for its site's sitemaps is theirs to queue or skip (node_sitemap.rs),
    // not a link's.
    if !insists && c.sitemaps.holds(&entry.uri.uri) {
        c.counters.uris_seen += 1;
        return Ok(());
    }
    if !c.seen.insert(&entry.uri.uri)? && !insists {
        c.counters.uris_seen += 1;
        return Ok(());
    }
    let rec = record(entry, urgent);
    c.enqueue(diskfull::Target::Queue, urgent, &rec, None)?;
    c.counters.uris_queued += 1;
    Ok(())
}

impl NodeScheduler {
    /// Opens the data directory: collections, queues and routes.
    pub fn open(data_dir: &Path, opts: NodeOptions) -> Result<NodeScheduler, SchedError> {
        fs::create_dir_all(data_dir).map_err(|e| StoreError {
            path: data_dir.to_path_buf(),
            disk_full: crate::diskfull::is_full(&e),
            error: e.to_string(),
        })?;
        let dirs = CollectionDirs::open(&data_dir.join("collections"))?;
        let routing = RoutingDb::open(&data_dir.join("routes"))?;
        let mut n = NodeScheduler {
            opts,
            dirs,
            routing,
            collections: BTreeMap::new(),
            dns: DnsCache::new(1 << 20),
            dns_pending: BTreeSet::new(),
            multinode_connected: false,
            multinode_keepalive_pending: false,
            keepalive_acks_owed: 0,
            forwarded: VecDeque::new(),
            resend: VecDeque::new(),
            dups: BTreeMap::new(),
            local_ip_locks: HashMap::new(),
            verdicts: Vec::new(),
            rup: rup::RupHook::default(),
            out: Outbox::new(),
            indexnow_dropped: 0,
            cycles_begun: 0,
            attr_memo: AttrMemo::default(),
        };
        for m in n.dirs.load_all()? {
            let Some(name) = m.get(b"name").and_then(Value::as_bytes).map(<[u8]>::to_vec) else {
                continue;
            };
            let dict = m.get(b"dspec").cloned().unwrap_or(Value::Dict(Vec::new()));
            let cycle = m.get(b"cycle").and_then(Value::as_i64).unwrap_or(0);
            let mut c = n.open_collection(&name, dict, cycle)?;
            c.state = m
                .get(b"state")
                .and_then(Value::as_i64)
                .unwrap_or(conf_state::ACTIVE);
            if let Some(t) = m.get(b"cycle_ts").and_then(Value::as_i64) {
                c.refresh.cycle_started = t;
            }
            c.feeding.all_suspended = m.get(b"feeding_all").and_then(Value::as_i64) == Some(1);
            if let Some(l) = m.get(b"feeding").and_then(Value::as_list) {
                c.feeding.suspended = l
                    .iter()
                    .filter_map(|v| v.as_bytes())
                    .map(<[u8]>::to_vec)
                    .collect();
            }
            info!(
                "collection {}: state {}, {} queued, {} quarantined",
                show(&name),
                c.state,
                c.queue.len(),
                c.quarantine_queue.len()
            );
            for s in ppdup_servers(&c.dict) {
                n.dups.entry(s).or_default();
            }
            n.collections.insert(name, c);
        }
        Ok(n)
    }

    fn open_collection(
        &self,
        name: &[u8],
        dict: Value<'static>,
        refresh_cycle: i64,
    ) -> Result<Collection, SchedError> {
        let dir = self.dirs.dir(name)?;
        let qo = || QueueOptions {
            segment_bytes: self.opts.queue_segment_bytes,
            sync: SyncPolicy::Manual,
        };
        let mut queue = CrawlQueue::open(&dir.join("queue"), qo())?;
        // What the last run had taken and not finished goes back to the front of the queue.
        let (mut inflight, pending) =
            Inflight::open(&dir.join("inflight"), queue.resumed_generation())?;
        if !pending.is_empty() {
            for r in pending.iter().rev() {
                queue.push_front(r)?;
            }
            queue.sync()?;
            info!(
                "collection {}: {} entries taken and not finished before the restart are queued again",
                show(name),
                pending.len()
            );
        }
        inflight.reset()?;
        let mut store = CrawlStore::open(&store_dir(&dir))?;
        // What was fed before a crash and not yet recorded in the store is recorded now, so
        // that the entry's fetch after the restart finds its document unchanged.
        let fed_mark = store::replay_feed(name, &dir, &mut store, refresh_cycle)?;
        // The node's checksum database: the checksums of the documents it fed.
        let mut checksums: HashMap<Checksum, owners::Owners, Fast> = HashMap::default();
        for (u, r) in store.iter() {
            if r.state == UriState::Stored {
                checksums.entry(Checksum(r.checksum)).or_default().insert(u);
            }
        }
        let feeder = Feeder::open(&dir)?;
        let sitemaps = sitemap::SiteMaps::open(&dir)?;
        let settings = crate::config::parsed(name, &dict);
        let policy = RefreshPolicy::of(&settings);
        let mut c = Collection {
            name: name.to_vec(),
            dict,
            settings,
            state: conf_state::ACTIVE,
            refresh: RefreshState {
                cycle: refresh_cycle,
                cycle_started: self.opts.clock.now(),
                policy,
                new_held: CrawlQueue::open(&dir.join("refresh-only"), qo())?,
                doc_count: 0,
                disk_free_pct: None,
            },
            queue,
            quarantine_queue: CrawlQueue::open(&dir.join("quarantine"), qo())?,
            seen: SeenSet::open(&dir.join("seen"))?,
            inflight,
            finished: Vec::new(),
            sites: SiteControl::default(),
            dedup: Dedup {
                checksums,
                ..Dedup::default()
            },
            store,
            feeding: Feeding {
                all_suspended: false,
                suspended: BTreeSet::new(),
                feeder,
                fed_mark,
            },
            dir,
            stat_reports: Vec::new(),
            counters: NodeCounters::default(),
            sent: NodeCounters::default(),
            clock: self.opts.clock.clone(),
            disk: diskfull::DiskPause::default(),
            sitemaps,
        };
        c.count_documents();
        Ok(c)
    }

    fn save(&self, name: &[u8]) -> Result<(), SchedError> {
        let Some(c) = self.collections.get(name) else {
            return Ok(());
        };
        let feeding = c
            .feeding
            .suspended
            .iter()
            .map(|d| Value::owned_bytes(d.clone()))
            .collect();
        let m = meta(vec![
            ("name", Value::owned_bytes(name.to_vec())),
            ("dspec", c.dict.clone()),
            ("state", Value::int(c.state)),
            ("cycle", Value::int(c.refresh.cycle)),
            ("cycle_ts", Value::int(c.refresh.cycle_started)),
            (
                "feeding_all",
                Value::int(i64::from(c.feeding.all_suspended)),
            ),
            ("feeding", Value::list(feeding)),
        ]);
        Ok(self.dirs.save(name, &m)?)
    }

    /// What the shell must do now; empties the outbox.
    pub fn take_output(&mut self) -> Outbox<Dest> {
        std::mem::replace(&mut self.out, Outbox::new())
    }

    /// The node identifier.
    pub fn node_id(&self) -> &[u8] {
        &self.opts.node_id
    }

    /// Whether the node runs without a multinode scheduler (FSCADM IsDistributed = 0).
    pub fn is_standalone(&self) -> bool {
        self.opts.standalone
    }

    /// The administrative interface (host, port) reported in CMD_UM_INIT.
    pub fn xmlrpc_addr(&self) -> (Vec<u8>, i64) {
        self.opts.xmlrpc.clone()
    }

    /// Collections and their states.
    pub fn collections(&self) -> Vec<(Vec<u8>, i64)> {
        self.collections
            .iter()
            .map(|(n, c)| (n.clone(), c.state))
            .collect()
    }

    /// A collection's configuration dict.
    pub fn collection_config(&self, name: &[u8]) -> Option<&Value<'static>> {
        self.collections.get(name).map(|c| &c.dict)
    }

    /// A collection's configuration as parsed once when it was added or updated (defaults
    /// where its dict does not parse): what the crawler crawls it with.
    pub fn collection_settings(&self, name: &[u8]) -> Option<Arc<CollectionConfig>> {
        self.collections.get(name).map(|c| Arc::clone(&c.settings))
    }

    /// Entries in a collection's crawl queue and quarantine queue.
    pub fn queued(&self, name: &[u8]) -> Option<(u64, u64)> {
        self.collections
            .get(name)
            .map(|c| (c.queue.len(), c.quarantine_queue.len()))
    }

    /// Crawl queue entries of a collection that live in memory (taken from the queue, not
    /// finished: the site manager's ready and waiting entries and the crawl engine's), and an
    /// estimate of the heap bytes they hold: each record once (the entry's; the in-flight
    /// journal keeps its length only) and each entry's fixed-size parts (a [`Ready`] and the
    /// journal's map slot), without the allocator's own overhead. What `/metrics` reports as
    /// `crawlfleet_queue_memory_entries` and `crawlfleet_queue_memory_bytes`.
    pub fn queued_in_memory(&self, name: &[u8]) -> Option<(u64, u64)> {
        self.collections.get(name).map(|c| {
            let n = c.inflight.len() as u64;
            let fixed = (std::mem::size_of::<Ready>() + std::mem::size_of::<(u64, u32)>()) as u64;
            (n, c.inflight.bytes() + n * fixed)
        })
    }

    /// The sequence number of a collection's document log below which every document is
    /// durable (synced by [`NodeScheduler::sync`]): what a session sink may send on.
    pub fn feed_durable(&self, name: &[u8]) -> Option<u64> {
        self.collections
            .get(name)
            .map(|c| c.feeding.feeder.log().durable_seq())
    }

    /// Feeding state of a collection: (all suspended, destinations suspended).
    pub fn feeding(&self, name: &[u8]) -> Option<(bool, Vec<Vec<u8>>)> {
        self.collections.get(name).map(|c| {
            (
                c.feeding.all_suspended,
                c.feeding.suspended.iter().cloned().collect(),
            )
        })
    }

    /// The refresh cycle of a collection.
    pub fn refresh_cycle(&self, name: &[u8]) -> Option<i64> {
        self.collections.get(name).map(|c| c.refresh.cycle)
    }

    /// The routing database.
    pub fn routing(&self) -> &RoutingDb {
        &self.routing
    }

    /// The cached DNS answer for `host`.
    pub fn dns(&self, host: &[u8], now: i64) -> Option<&DnsEntry> {
        self.dns.get(host, now)
    }

    /// Whether `site` is quarantined or blocked in `collection` at `now`.
    pub fn is_held(&self, collection: &[u8], site: &str, now: i64) -> bool {
        self.collections.get(collection).is_some_and(|c| {
            c.sites.quarantine.get(site).is_some_and(|&t| t > now)
                || c.sites.blocked.get(site).is_some_and(|&t| t > now)
        })
    }

    /// The active sites of a collection and their IP addresses.
    pub fn active_sites(&self, collection: &[u8]) -> Vec<(String, String)> {
        let mut v: Vec<_> = self
            .collections
            .get(collection)
            .map(|c| {
                c.sites
                    .active
                    .iter()
                    .map(|(s, i)| (s.clone(), i.clone()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// How many sites of `collection` are being crawled ([`Self::active_sites`] without
    /// listing them: the figure `/metrics`, the status and the dashboard ask for).
    pub fn active_site_count(&self, collection: &[u8]) -> usize {
        self.collections
            .get(collection)
            .map_or(0, |c| c.sites.active.len())
    }

    /// URIs this node owns `checksum` for.
    pub fn checksum_owners(&self, collection: &[u8], checksum: &Checksum) -> Vec<Vec<u8>> {
        self.collections
            .get(collection)
            .and_then(|c| c.dedup.checksums.get(checksum))
            .map(|s| s.iter().map(<[u8]>::to_vec).collect())
            .unwrap_or_default()
    }

    /// Counters of a collection since start.
    pub fn counters(&self, collection: &[u8]) -> Option<NodeCounters> {
        self.collections.get(collection).map(|c| c.counters)
    }

    /// The duplicate servers and whether each has acknowledged the latest configuration.
    pub fn dup_status(&self) -> Vec<(String, bool, bool)> {
        self.dups
            .iter()
            .map(|(a, s)| (a.clone(), s.connected, s.updated))
            .collect()
    }

    fn send_multinode(&mut self, priority: Priority, m: &Message<'_>) {
        if self.opts.standalone {
            return;
        }
        self.out.send(Dest::Multinode, priority, m);
    }

    fn send_dups(&mut self, servers: &[String], priority: Priority, m: &Message<'_>) {
        for s in servers {
            self.out.send(Dest::Dup(s.clone()), priority, m);
        }
    }

    // ---- duplicate server operations (used by the crawl engine) ----------------------------------

    /// Sends PPDUP_ADD for a document's checksum to the collection's duplicate servers.
    pub fn ppdup_add(&mut self, name: &[u8], uri: &[u8], checksum: Checksum) -> bool {
        let Some(c) = self.collections.get_mut(name) else {
            return false;
        };
        let servers = ppdup_servers(&c.dict);
        if servers.is_empty() {
            return false;
        }
        c.dedup.pending_adds.insert(uri.to_vec(), checksum);
        let m = Message::PpdupAdd(PpdupChecksum {
            collection: Cow::Borrowed(name),
            node_id: Cow::Borrowed(&self.opts.node_id),
            uri: Cow::Borrowed(uri),
            checksum,
            ppdup_id: None,
            dbname: None,
        });
        for s in servers {
            self.out.send(Dest::Dup(s), Priority::Normal, &m);
        }
        true
    }
}

/// Decodes a saved meta value; exposed for tools that read a node's data directory.
pub fn read_meta(path: &Path) -> Option<Value<'static>> {
    let bytes = fs::read(path).ok()?;
    match marshal::from_bytes(&bytes, &Limits::default()) {
        Ok(v) => Some(v.into_owned()),
        Err(e) => {
            error!("{}: {e}", path.display());
            None
        }
    }
}

/// The data directory layout, for tests and tools.
pub fn collection_dir(data_dir: &Path, name: &[u8]) -> PathBuf {
    data_dir.join("collections").join(super::file_name(name))
}
