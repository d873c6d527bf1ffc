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

use log::{debug, error, info, warn};

use super::collections::{meta, CollectionDirs, StoreError};
use super::dns::{DnsCache, DnsEntry};
use super::inflight::Inflight;
use super::multinode::SchedError;
use super::seen::SeenSet;
use super::{parse_record, record, show, start_uri_entry, start_uris, Outbox};

#[path = "node_docs.rs"]
mod docs;
#[path = "node_refresh.rs"]
mod refresh;
#[path = "node_store.rs"]
mod store;
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
use crate::routing::{crawl_site, routing_attribute, site_host, RoutingDb};
use crate::store::{store_dir, CrawlStore, UriState};
pub use docs::Verdict;
pub use refresh::{RefreshOnly, RefreshPolicy};
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
    dict: Value<'static>,
    state: i64,
    feeding_all_suspended: bool,
    feeding_suspended: BTreeSet<Vec<u8>>,
    refresh_cycle: i64,
    /// When the current refresh cycle began (Unix seconds).
    cycle_started: i64,
    policy: RefreshPolicy,
    queue: CrawlQueue,
    quarantine_queue: CrawlQueue,
    /// New URIs (not in the crawl store) met while the collection only refreshes; back to
    /// `queue` when it may crawl new content again.
    new_held: CrawlQueue,
    /// Stored documents, as last counted (`limits.max_doc`).
    doc_count: u64,
    /// Free space of the data directory's file system, percent, as last read
    /// (`limits.disk_free`).
    disk_free_pct: Option<f64>,
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
    /// The checksum database (3.1.5.23): checksum -> URIs this node owns it for.
    checksums: HashMap<Checksum, BTreeSet<Vec<u8>>>,
    /// PPDUP_ADDs sent and not answered: URI -> checksum.
    pending_adds: HashMap<Vec<u8>, Checksum>,
    /// PPDUP_REMOVEs sent and not answered: URI -> their checksums, oldest first
    /// (PPDUP_REMOVE_OK names only the URI).
    pending_removes: HashMap<Vec<u8>, VecDeque<Checksum>>,
    /// URIs queued in this refresh cycle.
    seen: SeenSet,
    /// Entries taken from the queues and not finished.
    inflight: Inflight,
    /// Entries finished since the last sync; marked done in `inflight` once the feed and the
    /// crawl store are durable.
    finished: Vec<u64>,
    /// The crawl store: what became of every URI crawled.
    store: CrawlStore,
    /// The document feed (the document log, held while feeding is suspended).
    feeder: Feeder,
    /// The collection's directory.
    dir: PathBuf,
    /// The document-log sequence number from which the crawl store may lack what was fed
    /// (saved in [`store::FED_MARK`] after each store sync).
    fed_mark: u64,
    /// Fetched documents waiting for their duplicate check: URI -> documents, oldest first.
    pending_docs: HashMap<Vec<u8>, VecDeque<Box<crate::crawl::Document>>>,
    /// Statistics the crawl engine counted since the last CMD_UM_STAT (FSCADM names).
    crawl_delta: Value<'static>,
    counters: NodeCounters,
    sent: NodeCounters,
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
    out: Outbox<Dest>,
}

/// The conditional request headers for a queue record whose URI has a stored copy with
/// validators; none for an entry that must be fetched whole (URIF_PROMOTE, URIF_FORCE).
fn conditional(c: &Collection, rec: &[u8]) -> Vec<(String, String)> {
    let Ok((e, _)) = parse_record(rec) else {
        return Vec::new();
    };
    if e.uri_flags & (uri_flags::URIF_PROMOTE | uri_flags::URIF_FORCE) != 0 {
        return Vec::new();
    }
    store::conditional_headers(&c.store, &e.uri.uri)
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// [`unix_now`] as the crawl store and the feed count time.
fn unix_now_u64() -> u64 {
    u64::try_from(unix_now()).unwrap_or(0)
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
    if !c.seen.insert(&entry.uri.uri)? && !insists {
        c.counters.uris_seen += 1;
        return Ok(());
    }
    let rec = record(entry, urgent);
    if urgent {
        c.queue.push_front(&rec)?;
    } else {
        c.queue.push_back(&rec)?;
    }
    c.counters.uris_queued += 1;
    Ok(())
}

impl NodeScheduler {
    /// Opens the data directory: collections, queues and routes.
    pub fn open(data_dir: &Path, opts: NodeOptions) -> Result<NodeScheduler, SchedError> {
        fs::create_dir_all(data_dir).map_err(|e| StoreError {
            path: data_dir.to_path_buf(),
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
            forwarded: VecDeque::new(),
            resend: VecDeque::new(),
            dups: BTreeMap::new(),
            local_ip_locks: HashMap::new(),
            verdicts: Vec::new(),
            out: Outbox::new(),
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
                c.cycle_started = t;
            }
            c.feeding_all_suspended = m.get(b"feeding_all").and_then(Value::as_i64) == Some(1);
            if let Some(l) = m.get(b"feeding").and_then(Value::as_list) {
                c.feeding_suspended = l
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
        let (mut inflight, pending) = Inflight::open(&dir.join("inflight"))?;
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
        let mut checksums: HashMap<Checksum, BTreeSet<Vec<u8>>> = HashMap::new();
        for (u, r) in store.iter() {
            if r.state == UriState::Stored {
                checksums
                    .entry(Checksum(r.checksum))
                    .or_default()
                    .insert(u.to_vec());
            }
        }
        let feeder = Feeder::open(&dir)?;
        let policy = RefreshPolicy::of(name, &dict);
        let mut c = Collection {
            dict,
            state: conf_state::ACTIVE,
            feeding_all_suspended: false,
            feeding_suspended: BTreeSet::new(),
            refresh_cycle,
            cycle_started: unix_now(),
            policy,
            queue,
            quarantine_queue: CrawlQueue::open(&dir.join("quarantine"), qo())?,
            new_held: CrawlQueue::open(&dir.join("refresh-only"), qo())?,
            doc_count: 0,
            disk_free_pct: None,
            quarantine: HashMap::new(),
            blocked: HashMap::new(),
            active: HashMap::new(),
            ip_sites: HashMap::new(),
            waiting: HashMap::new(),
            ready: VecDeque::new(),
            checksums,
            pending_adds: HashMap::new(),
            pending_removes: HashMap::new(),
            seen: SeenSet::open(&dir.join("seen"))?,
            inflight,
            finished: Vec::new(),
            store,
            feeder,
            dir,
            fed_mark,
            pending_docs: HashMap::new(),
            crawl_delta: Value::Dict(Vec::new()),
            counters: NodeCounters::default(),
            sent: NodeCounters::default(),
        };
        c.count_documents();
        Ok(c)
    }

    fn save(&self, name: &[u8]) -> Result<(), SchedError> {
        let Some(c) = self.collections.get(name) else {
            return Ok(());
        };
        let feeding = c
            .feeding_suspended
            .iter()
            .map(|d| Value::owned_bytes(d.clone()))
            .collect();
        let m = meta(vec![
            ("name", Value::owned_bytes(name.to_vec())),
            ("dspec", c.dict.clone()),
            ("state", Value::int(c.state)),
            ("cycle", Value::int(c.refresh_cycle)),
            ("cycle_ts", Value::int(c.cycle_started)),
            (
                "feeding_all",
                Value::int(i64::from(c.feeding_all_suspended)),
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

    /// Entries in a collection's crawl queue and quarantine queue.
    pub fn queued(&self, name: &[u8]) -> Option<(u64, u64)> {
        self.collections
            .get(name)
            .map(|c| (c.queue.len(), c.quarantine_queue.len()))
    }

    /// Feeding state of a collection: (all suspended, destinations suspended).
    pub fn feeding(&self, name: &[u8]) -> Option<(bool, Vec<Vec<u8>>)> {
        self.collections.get(name).map(|c| {
            (
                c.feeding_all_suspended,
                c.feeding_suspended.iter().cloned().collect(),
            )
        })
    }

    /// The refresh cycle of a collection.
    pub fn refresh_cycle(&self, name: &[u8]) -> Option<i64> {
        self.collections.get(name).map(|c| c.refresh_cycle)
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
            c.quarantine.get(site).is_some_and(|&t| t > now)
                || c.blocked.get(site).is_some_and(|&t| t > now)
        })
    }

    /// The active sites of a collection and their IP addresses.
    pub fn active_sites(&self, collection: &[u8]) -> Vec<(String, String)> {
        let mut v: Vec<_> = self
            .collections
            .get(collection)
            .map(|c| {
                c.active
                    .iter()
                    .map(|(s, i)| (s.clone(), i.clone()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// URIs this node owns `checksum` for.
    pub fn checksum_owners(&self, collection: &[u8], checksum: &Checksum) -> Vec<Vec<u8>> {
        self.collections
            .get(collection)
            .and_then(|c| c.checksums.get(checksum))
            .map(|s| s.iter().cloned().collect())
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

    // ---- connections ----------------------------------------------------------------------------

    /// The link to the multinode scheduler is up. The shell sends [`Self::init_frame`] on the
    /// new connection before anything else (3.2.5.1: the first frame must be CMD_UM_INIT).
    pub fn multinode_connected(&mut self) {
        self.multinode_connected = true;
        self.multinode_keepalive_pending = false;
        let again = std::mem::take(&mut self.resend);
        if !again.is_empty() {
            info!(
                "forwarding the {} URIs of the {:?} before the connection closed to the multinode scheduler again",
                again.len(),
                FORWARD_RESEND_WINDOW
            );
        }
        for frame in again {
            self.out
                .sends
                .push((Dest::Multinode, Priority::Normal, frame));
        }
        self.ask_again();
    }

    /// After (re)connecting: questions the multinode scheduler may have taken down with it are
    /// asked again. START_CRAWL_IP for every site waiting for its answer, and for every active
    /// site (a restarted multinode scheduler knows no IP locks: this restores this node's; the
    /// answers for sites not waiting are ignored), and CMD_UM_DNS_REQUEST for every name still
    /// unanswered. A multinode scheduler that did answer answers again the same way.
    fn ask_again(&mut self) {
        if self.opts.standalone {
            return;
        }
        let mut asks: Vec<Message<'static>> = Vec::new();
        let mut hosts: BTreeSet<String> = BTreeSet::new();
        for (name, c) in &self.collections {
            let start = |site: &str, ip: &str| {
                Message::CmdUmStartCrawlIp(StartCrawlIp {
                    collection: owned(name),
                    ip: owned(ip.as_bytes()),
                    site: owned(site.as_bytes()),
                    store_id: 0,
                })
            };
            for (site, ip) in &c.active {
                asks.push(start(site, ip));
            }
            for (site, w) in &c.waiting {
                match &w.ip {
                    Some(ip) => asks.push(start(site, ip)),
                    None if self.dns_pending.contains(&w.host) && hosts.insert(w.host.clone()) => {
                        asks.push(Message::CmdUmDnsRequest(crate::msg::DnsRequest {
                            collection: owned(name),
                            host: owned(w.host.as_bytes()),
                        }));
                    }
                    None => {}
                }
            }
        }
        for m in asks {
            self.send_multinode(Priority::Normal, &m);
        }
    }

    /// The CMD_UM_INIT frame that registers this node (2.2.4.1).
    pub fn init_frame(&self) -> Vec<u8> {
        let init = Message::CmdUmInit(Init {
            node_id: owned(&self.opts.node_id),
            xmlrpc_host: owned(&self.opts.xmlrpc.0),
            xmlrpc_port: self.opts.xmlrpc.1,
        });
        let mut out = Vec::new();
        crate::frame::encode_message(&init, Priority::Normal, &mut out);
        out
    }

    /// The link to the multinode scheduler is down (the shell reconnects).
    pub fn multinode_closed(&mut self) {
        self.multinode_connected = false;
        // What the multinode scheduler may not have synced goes again on the next connection
        // (what is forwarded meanwhile the shell holds until then).
        let lately = self.forwarded.drain(..).map(|(_, f)| f);
        self.resend.extend(lately);
        while self.resend.len() > FORWARD_RESEND_MAX {
            self.resend.pop_front();
        }
    }

    /// Whether the multinode scheduler is connected.
    pub fn is_multinode_connected(&self) -> bool {
        self.multinode_connected
    }

    /// The duplicate servers any collection names, for the shell to connect to.
    pub fn dup_servers(&self) -> Vec<String> {
        self.dups.keys().cloned().collect()
    }

    /// A duplicate server connected: send it the configuration of every collection that uses it.
    pub fn dup_connected(&mut self, addr: &str) {
        self.dups.entry(addr.to_string()).or_default().connected = true;
        let names: Vec<Vec<u8>> = self
            .collections
            .iter()
            .filter(|(_, c)| ppdup_servers(&c.dict).iter().any(|s| s == addr))
            .map(|(n, _)| n.clone())
            .collect();
        for n in names {
            self.send_set_config(&n, &[addr.to_string()]);
        }
    }

    /// A duplicate server connection is gone.
    pub fn dup_closed(&mut self, addr: &str) {
        if let Some(d) = self.dups.get_mut(addr) {
            d.connected = false;
            d.updated = false;
            d.keepalive_pending = false;
        }
    }

    /// 3.1.5.11: PPDUP_SET_CONFIG with the ppdup section and the next vector clock.
    fn send_set_config(&mut self, name: &[u8], servers: &[String]) {
        let Some(c) = self.collections.get(name) else {
            return;
        };
        let section = c
            .dict
            .get(b"ppdup")
            .cloned()
            .unwrap_or(Value::Dict(Vec::new()));
        for s in servers {
            let d = self.dups.entry(s.clone()).or_default();
            d.vclock += 1;
            d.updated = false;
            let m = Message::PpdupSetConfig(PpdupSetConfig {
                config: Value::Dict(vec![(Value::owned_bytes(name.to_vec()), section.clone())]),
                vclock: d.vclock,
                collection: Some(owned(name)),
            });
            self.out.send(Dest::Dup(s.clone()), Priority::Normal, &m);
        }
    }

    // ---- frames -----------------------------------------------------------------------------------

    /// One frame from the multinode scheduler or a duplicate server.
    pub fn handle_frame(&mut self, from: &Dest, body: &[u8], now: i64) -> Result<(), SchedError> {
        match crate::frame::decode_message(body, &Limits::default()) {
            Ok((_, m)) => self.handle_message(from, m, now),
            Err(e) => {
                warn!("{from:?}: undecodable frame ignored: {e}");
                Ok(())
            }
        }
    }

    /// One message (3.1.5).
    pub fn handle_message(
        &mut self,
        from: &Dest,
        m: Message<'_>,
        now: i64,
    ) -> Result<(), SchedError> {
        match m {
            Message::CmdUmKeepalive => {
                self.send_multinode(Priority::Normal, &Message::CmdUmKeepaliveAck)
            }
            Message::CmdUmKeepaliveAck => self.multinode_keepalive_pending = false,
            Message::CmdUmUri(u) => self.on_uri(&u, false)?,
            Message::CmdUmUriUrg(u) => self.on_uri(&u, true)?,
            Message::CmdAdmConfSuspend(s) => {
                if !matches!(
                    s.state,
                    conf_state::SUSPENDED_USER
                        | conf_state::SUSPENDED_DISK
                        | conf_state::SUSPENDED_VARIABLE_DELAY
                ) {
                    warn!(
                        "CMD_ADM_CONF_SUSPEND with state {}: not 4, 5 or 8; ignored",
                        s.state
                    );
                } else if self.set_state(&s.collection, s.state)? {
                    // 3.1.5.4: stop crawling every site of the collection.
                    self.stop_sites(&s.collection, |_| true, true)?;
                }
            }
            Message::CmdAdmConfResume(c) => {
                self.set_state(&c.collection, conf_state::ACTIVE)?;
            }
            Message::CmdAdmConfFeedingSuspend(f) => {
                if let Some(c) = self.collections.get_mut(f.collection.as_ref()) {
                    match &f.destinations {
                        None => {
                            c.feeding_all_suspended = f.suspend;
                            if !f.suspend {
                                c.feeding_suspended.clear();
                            }
                        }
                        Some(ds) => {
                            for d in ds {
                                if f.suspend {
                                    c.feeding_suspended.insert(d.to_vec());
                                } else {
                                    c.feeding_suspended.remove(d.as_ref());
                                }
                            }
                        }
                    }
                    // The document log is the default destination.
                    let held =
                        c.feeding_all_suspended || c.feeding_suspended.contains(&b"default"[..]);
                    self.save(&f.collection)?;
                    self.set_feeding(&f.collection, held)?;
                }
            }
            Message::CmdUmAddRoute(r) => self.on_add_route(&r, now),
            Message::CmdUmAskRoute(c) => self.on_ask_route(&c.collection),
            Message::CmdAdmConfRefresh(r) => {
                self.refresh(&r.collection, r.subcollection.as_deref(), r.options)?
            }
            Message::CmdAdmConfAdd(c) => self.conf_add(&c.collection, c.config.into_owned())?,
            Message::CmdAdmConfUpdate(c) => {
                self.conf_update(&c.collection, c.config.into_owned())?
            }
            Message::CmdAdmConfRemove(c) => self.conf_remove(&c.collection)?,
            Message::CmdAdmPreemptSite(p) => {
                let site = String::from_utf8_lossy(&p.site).into_owned();
                let active = self
                    .collections
                    .get(p.collection.as_ref())
                    .is_some_and(|c| c.active.contains_key(&site) || c.waiting.contains_key(&site));
                // 3.1.5.13: ignored unless the site is being crawled.
                if active {
                    self.stop_sites(&p.collection, |s| s == site, p.requeue)?;
                }
            }
            Message::CmdUmReprocessSite(r) => {
                let site = String::from_utf8_lossy(&r.site).into_owned();
                self.reprocess(&r.collection, &site, &r.prefix, r.exact)?;
            }
            Message::CmdUmDeleteSite(d) => {
                let site = String::from_utf8_lossy(&d.site).into_owned();
                self.delete_matching(&d.collection, |s, _| s == site)?;
            }
            Message::CmdUmDeleteUris(d) => {
                let uris: BTreeSet<Vec<u8>> = d
                    .uris
                    .iter()
                    .flat_map(|(_, l)| l.iter().map(|u| u.to_vec()))
                    .collect();
                self.delete_matching(&d.collection, |_, u| uris.contains(u))?;
            }
            Message::CmdUmQuarantineSite(q) => {
                self.quarantine(&q.collection, &q.site, q.seconds, false, now)?
            }
            Message::CmdUmQuarantineSiteRequeue(q) => {
                self.quarantine(&q.collection, &q.site, q.seconds, true, now)?
            }
            Message::CmdUmDnsReply(r) => {
                let e = DnsEntry {
                    addrinfo: r
                        .addrinfo
                        .map(|v| v.into_iter().map(|a| a.into_owned()).collect()),
                    resolved_at: r.resolved_at,
                    ttl: r.ttl,
                };
                self.dns_answer(&String::from_utf8_lossy(&r.host), e, now)?;
            }
            Message::CmdUmConfState(s) => {
                self.set_state(&s.collection, s.state)?;
            }
            Message::CmdUmStartCrawlIpReply(r) => self.on_start_crawl_ip(
                &r.collection,
                &String::from_utf8_lossy(&r.ip),
                &String::from_utf8_lossy(&r.site),
                r.allowed,
                now,
            )?,
            Message::PpdupConfigAck(a) => {
                if let Dest::Dup(addr) = from {
                    if let Some(d) = self.dups.get_mut(addr) {
                        if a.vclock == d.vclock {
                            d.updated = true;
                        } else {
                            // 3.1.5.22: not the reply to the latest SET_CONFIG.
                            debug!(
                                "{addr}: stale PPDUP_CONFIG_ACK ({} != {})",
                                a.vclock, d.vclock
                            );
                        }
                    }
                }
            }
            Message::PpdupAddOk(ok) => {
                let pending = self
                    .collections
                    .get_mut(ok.collection.as_ref())
                    .and_then(|c| c.pending_adds.remove(ok.uri.as_ref()));
                if pending.is_some() {
                    let owner = ok.owner_uri.as_deref().unwrap_or(&ok.uri).to_vec();
                    if let Some(v) = self.resolve_document(&ok.collection, &ok.uri, &owner)? {
                        self.verdicts.push(v);
                    }
                }
            }
            Message::PpdupRemoveOk(ok) => {
                // 3.1.5.24: the URI leaves the checksum database, under the checksum its
                // PPDUP_REMOVE named (taken out already when it was sent; unless the URI holds
                // that checksum again since, as its stored copy says).
                if let Some(c) = self.collections.get_mut(ok.collection.as_ref()) {
                    let uri = ok.uri.as_ref();
                    let cs = c.pending_removes.get_mut(uri).and_then(VecDeque::pop_front);
                    if c.pending_removes.get(uri).is_some_and(VecDeque::is_empty) {
                        c.pending_removes.remove(uri);
                    }
                    let holds = |cs: &Checksum| {
                        c.store
                            .get(uri)
                            .is_some_and(|r| r.state == UriState::Stored && r.checksum == cs.0)
                    };
                    if let Some(cs) = cs.filter(|cs| !holds(cs)) {
                        if let Some(owners) = c.checksums.get_mut(&cs) {
                            owners.remove(uri);
                            if owners.is_empty() {
                                c.checksums.remove(&cs);
                            }
                        }
                    }
                }
            }
            Message::PpdupPromoteReq(p) => {
                // 3.1.5.25: re-crawl every URI with that checksum.
                let uris = self.checksum_owners(&p.collection, &p.checksum);
                for u in uris {
                    let mut e = start_uri_entry(&u);
                    e.uri_flags = uri_flags::URIF_PROMOTE;
                    self.add_uri(&p.collection, &e, true)?;
                }
            }
            Message::PpdupError(e) => warn!(
                "{from:?}: PPDUP_ERROR for collection {}: {}",
                show(&e.collection),
                show(&e.why)
            ),
            Message::PpdupKeepalive => {
                if let Dest::Dup(a) = from {
                    self.out.send(
                        Dest::Dup(a.clone()),
                        Priority::Normal,
                        &Message::PpdupKeepaliveAck,
                    );
                }
            }
            Message::PpdupKeepaliveAck => {
                if let Dest::Dup(a) = from {
                    if let Some(d) = self.dups.get_mut(a) {
                        d.keepalive_pending = false;
                    }
                }
            }
            other => warn!(
                "{from:?}: {} is not a node scheduler message; ignored",
                other.command().name()
            ),
        }
        Ok(())
    }

    fn set_state(&mut self, name: &[u8], state: i64) -> Result<bool, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("state {state} for unknown collection {}", show(name));
            return Ok(false);
        };
        c.state = state;
        self.save(name)?;
        Ok(true)
    }

    /// 3.1.5.2 / 3.1.5.3.
    fn on_uri(&mut self, u: &UriMsg<'_>, urgent: bool) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(u.collection.as_ref()) else {
            warn!(
                "CMD_UM_URI for unknown collection {} dropped",
                show(&u.collection)
            );
            return Ok(());
        };
        queue_local(c, &u.entry, urgent)
    }

    /// Queues an entry found on this node (a start URI, a forward link, a promoted URI): to the
    /// local crawl queue when its site is routed here (or the node is standalone), else to the
    /// multinode scheduler (3.1 "forward links").
    pub fn add_uri(
        &mut self,
        name: &[u8],
        entry: &CrawlQueueEntry<'_>,
        urgent: bool,
    ) -> Result<bool, SchedError> {
        if !self.collections.contains_key(name) {
            return Ok(false);
        }
        let local = self.opts.standalone
            || crawl_site(&entry.uri.uri).is_some_and(|site| {
                self.routing.get(name, routing_attribute(&site).as_bytes())
                    == Some(&self.opts.node_id[..])
            });
        let c = self.collections.get_mut(name).expect("checked above");
        if local {
            queue_local(c, entry, urgent)?;
        } else {
            c.counters.uris_forwarded += 1;
            let u = UriMsg {
                collection: Cow::Borrowed(name),
                entry: entry.clone(),
            };
            let m = if urgent {
                Message::CmdUmUriUrg(u)
            } else {
                Message::CmdUmUri(u)
            };
            self.send_multinode(Priority::Normal, &m);
            self.remember_forward();
        }
        Ok(true)
    }

    /// Keeps the frame just queued for the multinode scheduler for [`FORWARD_RESEND_WINDOW`].
    fn remember_forward(&mut self) {
        if !self.multinode_connected {
            return;
        }
        let Some((Dest::Multinode, _, frame)) = self.out.sends.last() else {
            return;
        };
        let now = std::time::Instant::now();
        while self.forwarded.front().is_some_and(|(t, _)| {
            now.duration_since(*t) > FORWARD_RESEND_WINDOW
                || self.forwarded.len() >= FORWARD_RESEND_MAX
        }) {
            self.forwarded.pop_front();
        }
        self.forwarded.push_back((now, frame.clone()));
    }

    /// 3.1.5.7.
    fn on_add_route(&mut self, r: &AddRoute<'_>, now: i64) {
        self.routing.set(&r.collection, &r.routing_attr, &r.node_id);
        if r.node_id.as_ref() == self.opts.node_id && r.addrinfo.is_some() {
            let host = site_host(&String::from_utf8_lossy(&r.site)).to_string();
            let e = DnsEntry {
                addrinfo: r
                    .addrinfo
                    .clone()
                    .map(|v| v.into_iter().map(|a| a.into_owned()).collect()),
                resolved_at: now,
                ttl: r.ttl,
            };
            self.dns.insert(host.as_bytes(), e, now);
        }
    }

    /// 3.1.5.8: every route in CMD_UM_ADD_ROUTE lists of at most 256, then CMD_UM_LAST_ROUTE.
    fn on_ask_route(&mut self, name: &[u8]) {
        let routes: Vec<(Bytes<'static>, Bytes<'static>)> = self
            .routing
            .routes(name)
            .map(|(a, n)| (owned(a), owned(n)))
            .collect();
        for chunk in routes.chunks(RouteList::MAX_ROUTES) {
            let m = Message::CmdUmAddRoutes(RouteList {
                collection: owned(name),
                routes: chunk.to_vec(),
            });
            self.send_multinode(Priority::Normal, &m);
        }
        self.send_multinode(
            Priority::Normal,
            &Message::CmdUmLastRoute(CollectionOnly {
                collection: owned(name),
            }),
        );
    }

    /// Adds a collection locally (standalone `--config`) or from CMD_ADM_CONF_ADD (3.1.5.10).
    pub fn conf_add(&mut self, name: &[u8], dict: Value<'static>) -> Result<(), SchedError> {
        if self.collections.contains_key(name) {
            return self.conf_update(name, dict);
        }
        let c = self.open_collection(name, dict, 0)?;
        let servers = ppdup_servers(&c.dict);
        self.collections.insert(name.to_vec(), c);
        self.save(name)?;
        for s in &servers {
            self.dups.entry(s.clone()).or_default();
        }
        let connected: Vec<String> = servers
            .into_iter()
            .filter(|s| self.dups.get(s).is_some_and(|d| d.connected))
            .collect();
        self.send_set_config(name, &connected);
        if self.opts.standalone {
            // A standalone node is its own multinode scheduler: it queues the start URIs.
            self.requeue_start_uris(name)?;
        }
        info!("collection {} added", show(name));
        Ok(())
    }

    /// 3.1.5.11.
    pub fn conf_update(&mut self, name: &[u8], dict: Value<'static>) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!(
                "CMD_ADM_CONF_UPDATE for unknown collection {} ignored",
                show(name)
            );
            return Ok(());
        };
        c.policy = RefreshPolicy::of(name, &dict);
        c.count_documents();
        c.dict = dict;
        let servers = ppdup_servers(&c.dict);
        self.save(name)?;
        for s in &servers {
            self.dups.entry(s.clone()).or_default();
        }
        self.send_set_config(name, &servers);
        self.requeue_start_uris(name)?;
        info!("collection {} updated", show(name));
        Ok(())
    }

    fn requeue_start_uris(&mut self, name: &[u8]) -> Result<(), SchedError> {
        let uris = self
            .collections
            .get(name)
            .map(|c| start_uris(&c.dict))
            .unwrap_or_default();
        for u in uris {
            self.add_uri(name, &start_uri_entry(&u), false)?;
        }
        Ok(())
    }

    /// 3.1.5.12, its five steps.
    fn conf_remove(&mut self, name: &[u8]) -> Result<(), SchedError> {
        if !self.collections.contains_key(name) {
            warn!("CMD_ADM_CONF_REMOVE for unknown collection {}", show(name));
            self.send_multinode(
                Priority::Normal,
                &Message::CmdUmDeleteOk(CollectionOnly {
                    collection: owned(name),
                }),
            );
            return Ok(());
        }
        // 1. Stop crawling every active site.
        self.stop_sites(name, |_| true, false)?;
        // 2. Remove everything about the collection.
        let mut c = self.collections.remove(name).expect("checked above");
        c.queue.clear()?;
        c.quarantine_queue.clear()?;
        let servers = ppdup_servers(&c.dict);
        drop(c);
        self.routing.drop_collection(name);
        self.routing.sync()?;
        self.dirs.remove(name)?;
        self.local_ip_locks.retain(|_, n| n != name);
        // 3. PPDUP_CONF_REMOVE at the front of each duplicate server's queue.
        let m = Message::PpdupConfRemove(PpdupConfRemove {
            collection: owned(name),
            ppdup_id: None,
        });
        self.send_dups(&servers, Priority::High, &m);
        // 4. PPDUP_CONF_REMOVE2 at the back.
        let m = Message::PpdupConfRemove2(CollectionOnly {
            collection: owned(name),
        });
        self.send_dups(&servers, Priority::Normal, &m);
        // 5. CMD_UM_DELETE_OK.
        self.send_multinode(
            Priority::Normal,
            &Message::CmdUmDeleteOk(CollectionOnly {
                collection: owned(name),
            }),
        );
        info!("collection {} removed", show(name));
        Ok(())
    }

    /// CMD_ADM_CONF_REFRESH (2.2.3.10 bitmask).
    pub fn refresh(
        &mut self,
        name: &[u8],
        subcollection: Option<&[u8]>,
        options: i64,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("refresh of unknown collection {}", show(name));
            return Ok(());
        };
        let scratch = c.policy.mode == crate::config::RefreshMode::Scratch;
        if scratch || options & refresh_options::TRUNCATE_AND_RESTART != 0 {
            c.queue.clear()?;
            c.quarantine_queue.clear()?;
            for r in c.ready.drain(..) {
                c.inflight.done(r.seq)?;
            }
            for (_, w) in c.waiting.drain() {
                for (seq, _) in w.records {
                    c.inflight.done(seq)?;
                }
            }
        }
        c.refresh_cycle += 1;
        c.seen.clear()?;
        let cycle = c.refresh_cycle;
        let mut uris = start_uris(&c.dict);
        if let (Some(sub), true) = (
            subcollection,
            options & refresh_options::REFRESH_SUBCOLLECTION != 0,
        ) {
            // A subcollection's own start URIs (its dict under "subdomains").
            uris = c
                .dict
                .get(b"subdomains")
                .and_then(|s| s.get(sub))
                .map(start_uris)
                .unwrap_or_default();
        }
        info!(
            "collection {}: refresh cycle {cycle} (options {options:#x}, {} start URIs)",
            show(name),
            uris.len()
        );
        // START_URIS_ONLY, and a subcollection's refresh, queue the start URIs alone.
        let everything = options & refresh_options::START_URIS_ONLY == 0
            && options & refresh_options::REFRESH_SUBCOLLECTION == 0;
        self.start_cycle(name, cycle, uris, everything, unix_now())?;
        self.save(name)
    }

    /// Stops the sites of `name` that `which` selects: their pending entries go back to the
    /// front (or, `front` false, the back) of the crawl queue, their IP addresses are released.
    fn stop_sites(
        &mut self,
        name: &[u8],
        which: impl Fn(&str) -> bool,
        front: bool,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
        let waiting: Vec<String> = c.waiting.keys().filter(|s| which(s)).cloned().collect();
        for s in waiting {
            if let Some(w) = c.waiting.remove(&s) {
                records.extend(w.records);
            }
        }
        let mut kept = VecDeque::new();
        for r in c.ready.drain(..) {
            if which(&r.site) {
                records.push((r.seq, r.record));
            } else {
                kept.push_back(r);
            }
        }
        c.ready = kept;
        let stopped: Vec<String> = c.active.keys().filter(|s| which(s)).cloned().collect();
        if front {
            for (_, r) in records.iter().rev() {
                c.queue.push_front(r)?;
            }
        } else {
            for (_, r) in &records {
                c.queue.push_back(r)?;
            }
        }
        for (seq, _) in &records {
            c.inflight.done(*seq)?;
        }
        for s in stopped {
            self.release_site(name, &s);
        }
        Ok(())
    }

    /// A site ends: out of the active list, its IP released when no other site uses it
    /// (CMD_UM_STOP_CRAWL_IP, 2.2.4.12).
    fn release_site(&mut self, name: &[u8], site: &str) {
        let Some(c) = self.collections.get_mut(name) else {
            return;
        };
        let Some(ip) = c.active.remove(site) else {
            return;
        };
        let last = match c.ip_sites.get_mut(&ip) {
            Some(set) => {
                set.remove(site);
                set.is_empty()
            }
            None => true,
        };
        if last {
            c.ip_sites.remove(&ip);
            if self.opts.standalone {
                self.local_ip_locks.remove(&ip);
            } else {
                let m = Message::CmdUmStopCrawlIp(StopCrawlIp {
                    collection: owned(name),
                    ip: owned(ip.as_bytes()),
                    site: owned(site.as_bytes()),
                });
                self.send_multinode(Priority::Normal, &m);
            }
        }
    }

    /// The crawl engine finished `site`.
    pub fn site_done(&mut self, name: &[u8], site: &str) {
        self.release_site(name, site);
    }

    /// Drops queued entries (and checksums) of `name` that `hit(site, uri)` selects.
    fn delete_matching(
        &mut self,
        name: &[u8],
        hit: impl Fn(&str, &[u8]) -> bool,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("delete in unknown collection {}", show(name));
            return Ok(());
        };
        let matches = |rec: &[u8]| {
            parse_record(rec).is_ok_and(|(e, _)| {
                let site = crawl_site(&e.uri.uri).unwrap_or_default();
                hit(&site, &e.uri.uri)
            })
        };
        let mut dropped = 0u64;
        for q in [&mut c.queue, &mut c.quarantine_queue] {
            let n = q.len();
            for _ in 0..n {
                let Some(rec) = q.pop_front()? else { break };
                if matches(&rec) {
                    dropped += 1;
                } else {
                    q.push_back(&rec)?;
                }
            }
        }
        let mut finished = Vec::new();
        c.ready.retain(|r| {
            let m = matches(&r.record);
            dropped += u64::from(m);
            if m {
                finished.push(r.seq);
            }
            !m
        });
        for w in c.waiting.values_mut() {
            w.records.retain(|(seq, r)| {
                let m = matches(r);
                dropped += u64::from(m);
                if m {
                    finished.push(*seq);
                }
                !m
            });
        }
        for seq in finished {
            c.inflight.done(seq)?;
        }
        c.counters.uris_dropped += dropped;
        // Stored documents: a delete fed for each, their checksums released.
        let deleted = self.delete_stored_matching(name, &|s, u| hit(s, u))?;
        info!(
            "collection {}: {deleted} stored documents deleted",
            show(name)
        );
        info!(
            "collection {}: {dropped} queued entries deleted",
            show(name)
        );
        Ok(())
    }

    /// 3.1.5.17 / 3.1.5.18.
    fn quarantine(
        &mut self,
        name: &[u8],
        site: &[u8],
        seconds: i64,
        requeue: bool,
        now: i64,
    ) -> Result<(), SchedError> {
        let site = String::from_utf8_lossy(site).into_owned();
        if !self.collections.contains_key(name) {
            warn!("quarantine in unknown collection {}", show(name));
            return Ok(());
        }
        // 1. Stop crawling it; its pending entries wait in the quarantine queue.
        self.stop_sites(name, |s| s == site, true)?;
        let c = self.collections.get_mut(name).expect("checked above");
        // 2. On the quarantine list until the period ends.
        c.quarantine
            .insert(site.clone(), now.saturating_add(seconds.max(0)));
        if requeue {
            // 3.1.5.18: the site goes to the front of the crawl queue (it waits in the
            // quarantine queue until the quarantine ends, then comes back first).
            let mut e = start_uri_entry(format!("http://{site}/").as_bytes());
            e.uri_flags = uri_flags::URIF_SITEURI;
            c.queue.push_front(&record(&e, true))?;
        }
        info!(
            "collection {}: site {site} quarantined for {seconds} s",
            show(name)
        );
        Ok(())
    }

    // ---- the site manager -------------------------------------------------------------------------

    /// Takes entries from the crawl queues of active collections until `capacity` entries are
    /// ready or waiting: entries of allowed sites become ready, new sites are resolved and asked
    /// for (CMD_UM_START_CRAWL_IP), quarantined or blocked ones set aside.
    pub fn dispatch(&mut self, capacity: usize, now: i64) -> Result<(), SchedError> {
        let names: Vec<Vec<u8>> = self
            .collections
            .iter()
            .filter(|(_, c)| c.state == conf_state::ACTIVE)
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            let c = self.collections.get_mut(&name).expect("listed above");
            let refresh_only = c.refresh_only().is_some();
            if !refresh_only && !c.new_held.is_empty() {
                // New content may be crawled again: what was held goes back to the queue.
                let mut n = 0u64;
                while let Some(rec) = c.new_held.pop_front()? {
                    c.queue.push_back(&rec)?;
                    n += 1;
                }
                info!(
                    "collection {}: {n} new URIs held while refreshing only are queued",
                    show(&name)
                );
            }
            loop {
                let c = self.collections.get_mut(&name).expect("listed above");
                let held: usize = c.waiting.values().map(|w| w.records.len()).sum();
                if c.ready.len() + held >= capacity {
                    break;
                }
                let Some(rec) = c.queue.pop_front()? else {
                    break;
                };
                let parsed = parse_record(&rec).ok();
                // FSCADM 2.2.10.2: while refreshing only, nothing outside the crawl store is
                // downloaded; new URIs wait in `new_held`.
                if refresh_only
                    && parsed
                        .as_ref()
                        .is_some_and(|(e, _)| c.store.get(&e.uri.uri).is_none())
                {
                    c.new_held.push_back(&rec)?;
                    c.counters.uris_held_refresh_only += 1;
                    continue;
                }
                let site = parsed.and_then(|(e, _)| crawl_site(&e.uri.uri));
                let Some(site) = site else {
                    c.counters.uris_dropped += 1;
                    warn!(
                        "collection {}: entry without a crawl site dropped",
                        show(&name)
                    );
                    continue;
                };
                if c.quarantine.get(&site).is_some_and(|&t| t > now)
                    || c.blocked.get(&site).is_some_and(|&t| t > now)
                {
                    c.quarantine_queue.push_back(&rec)?;
                    c.counters.uris_quarantined += 1;
                    continue;
                }
                // From here the entry lives in memory: journaled until it is finished.
                let seq = c.inflight.add(&rec)?;
                if let Some(ip) = c.active.get(&site) {
                    let ip = ip.clone();
                    c.ready.push_back(Ready {
                        collection: name.clone(),
                        site,
                        ip,
                        record: rec,
                        seq,
                        conditional: Vec::new(),
                    });
                    continue;
                }
                if let Some(w) = c.waiting.get_mut(&site) {
                    w.records.push((seq, rec));
                    continue;
                }
                let host = site_host(&site).to_string();
                c.waiting.insert(
                    site.clone(),
                    Waiting {
                        host: host.clone(),
                        ip: None,
                        records: vec![(seq, rec)],
                    },
                );
                self.resolve_site(&name, &site, &host, now)?;
            }
        }
        Ok(())
    }

    /// Entries the crawl engine may fetch now (at most `max`).
    pub fn take_ready(&mut self, max: usize) -> Vec<Ready> {
        let mut out = Vec::new();
        for c in self.collections.values_mut() {
            while out.len() < max {
                match c.ready.pop_front() {
                    Some(mut r) => {
                        r.conditional = conditional(c, &r.record);
                        out.push(r);
                    }
                    None => break,
                }
            }
        }
        out
    }

    fn resolve_site(
        &mut self,
        name: &[u8],
        site: &str,
        host: &str,
        now: i64,
    ) -> Result<(), SchedError> {
        if host.parse::<std::net::IpAddr>().is_ok() {
            return self.ask_permission(name, site, host);
        }
        let ip = self.dns.get(host.as_bytes(), now).map(|e| {
            e.addrinfo
                .as_ref()
                .and_then(|a| a.first())
                .map(|a| String::from_utf8_lossy(&a.address).into_owned())
        });
        match ip {
            Some(Some(ip)) => self.ask_permission(name, site, &ip),
            Some(None) => {
                self.fail_site(name, site, "the name does not resolve");
                Ok(())
            }
            None => {
                if self.dns_pending.insert(host.to_string()) {
                    if self.opts.standalone {
                        self.out.lookups.push(host.to_string());
                    } else {
                        let m = Message::CmdUmDnsRequest(crate::msg::DnsRequest {
                            collection: owned(name),
                            host: owned(host.as_bytes()),
                        });
                        self.send_multinode(Priority::Normal, &m);
                    }
                }
                Ok(())
            }
        }
    }

    fn fail_site(&mut self, name: &[u8], site: &str, why: &str) {
        if let Some(c) = self.collections.get_mut(name) {
            if let Some(w) = c.waiting.remove(site) {
                c.counters.uris_dropped += w.records.len() as u64;
                for (seq, _) in &w.records {
                    if let Err(e) = c.inflight.done(*seq) {
                        warn!("collection {}: {e}", show(name));
                    }
                }
                warn!(
                    "collection {}: site {site}: {why}; {} entries dropped",
                    show(name),
                    w.records.len()
                );
            }
        }
    }

    /// An answer to a name lookup (CMD_UM_DNS_REPLY, 3.1.5.19, or the shell's own lookup when
    /// standalone).
    pub fn dns_answer(&mut self, host: &str, e: DnsEntry, now: i64) -> Result<(), SchedError> {
        self.dns_pending.remove(host);
        let ip = e
            .addrinfo
            .as_ref()
            .and_then(|a| a.first())
            .map(|a| String::from_utf8_lossy(&a.address).into_owned());
        self.dns.insert(host.as_bytes(), e, now);
        let sites: Vec<(Vec<u8>, String)> = self
            .collections
            .iter()
            .flat_map(|(n, c)| {
                c.waiting
                    .iter()
                    .filter(|(_, w)| w.host == host && w.ip.is_none())
                    .map(move |(s, _)| (n.clone(), s.clone()))
            })
            .collect();
        for (name, site) in sites {
            match &ip {
                Some(ip) => self.ask_permission(&name, &site, ip)?,
                None => self.fail_site(&name, &site, "the name does not resolve"),
            }
        }
        Ok(())
    }

    fn ask_permission(&mut self, name: &[u8], site: &str, ip: &str) -> Result<(), SchedError> {
        if let Some(w) = self
            .collections
            .get_mut(name)
            .and_then(|c| c.waiting.get_mut(site))
        {
            w.ip = Some(ip.to_string());
        }
        if self.opts.standalone {
            let allowed = match self.local_ip_locks.get(ip) {
                Some(owner) => owner == name,
                None => {
                    self.local_ip_locks.insert(ip.to_string(), name.to_vec());
                    true
                }
            };
            return self.on_start_crawl_ip(name, ip, site, allowed, 0);
        }
        let m = Message::CmdUmStartCrawlIp(StartCrawlIp {
            collection: owned(name),
            ip: owned(ip.as_bytes()),
            site: owned(site.as_bytes()),
            store_id: 0,
        });
        self.send_multinode(Priority::Normal, &m);
        Ok(())
    }

    /// 3.1.5.21.
    fn on_start_crawl_ip(
        &mut self,
        name: &[u8],
        ip: &str,
        site: &str,
        allowed: bool,
        now: i64,
    ) -> Result<(), SchedError> {
        let max = self.opts.max_sites_per_ip;
        let block = self.opts.block_seconds;
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let Some(w) = c.waiting.remove(site) else {
            debug!("START_CRAWL_IP answer for {site}, which is not waiting");
            return Ok(());
        };
        let over = allowed && {
            let set = c.ip_sites.entry(ip.to_string()).or_default();
            set.insert(site.to_string());
            set.len() > max
        };
        if !allowed || over {
            if over {
                if let Some(set) = c.ip_sites.get_mut(ip) {
                    set.remove(site);
                }
            }
            // Blocked for 30 minutes, its entries at the front of the crawl queue.
            c.blocked
                .insert(site.to_string(), now.saturating_add(block));
            c.counters.sites_blocked += 1;
            for (_, r) in w.records.iter().rev() {
                c.queue.push_front(r)?;
            }
            for (seq, _) in &w.records {
                c.inflight.done(*seq)?;
            }
            info!(
                "collection {}: site {site} ({ip}) blocked for {block} s ({})",
                show(name),
                if over {
                    "too many sites on the IP"
                } else {
                    "IP crawled by another node"
                }
            );
            return Ok(());
        }
        c.active.insert(site.to_string(), ip.to_string());
        c.counters.sites_started += 1;
        for (seq, r) in w.records {
            c.ready.push_back(Ready {
                collection: name.to_vec(),
                site: site.to_string(),
                ip: ip.to_string(),
                record: r,
                seq,
                conditional: Vec::new(),
            });
        }
        Ok(())
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
        c.pending_adds.insert(uri.to_vec(), checksum);
        let m = Message::PpdupAdd(PpdupChecksum {
            collection: owned(name),
            node_id: owned(&self.opts.node_id),
            uri: owned(uri),
            checksum,
            ppdup_id: None,
            dbname: None,
        });
        self.send_dups(&servers, Priority::Normal, &m);
        true
    }

    // ---- timers -----------------------------------------------------------------------------------

    /// Multinode Scheduler Keep-Alive timer (3.1.6).
    pub fn multinode_keepalive_tick(&mut self) {
        if self.opts.standalone || !self.multinode_connected {
            return;
        }
        if self.multinode_keepalive_pending {
            warn!("the multinode scheduler did not answer the last CMD_UM_KEEPALIVE");
        }
        self.multinode_keepalive_pending = true;
        self.send_multinode(Priority::Normal, &Message::CmdUmKeepalive);
    }

    /// Duplicate Server Keep-Alive timer (3.1.6).
    pub fn dup_keepalive_tick(&mut self) {
        let addrs: Vec<String> = self
            .dups
            .iter()
            .filter(|(_, d)| d.connected)
            .map(|(a, _)| a.clone())
            .collect();
        for a in addrs {
            let d = self.dups.get_mut(&a).expect("listed above");
            if d.keepalive_pending {
                warn!("duplicate server {a} did not answer the last PPDUP_KEEPALIVE");
            }
            d.keepalive_pending = true;
            self.out
                .send(Dest::Dup(a), Priority::Normal, &Message::PpdupKeepalive);
        }
    }

    /// Quarantine timer (3.1.6): ends expired quarantines and blocks; the set-aside entries of
    /// freed sites return to the front of the crawl queue.
    pub fn quarantine_tick(&mut self, now: i64) -> Result<(), SchedError> {
        for (name, c) in self.collections.iter_mut() {
            let before = c.quarantine.len() + c.blocked.len();
            c.quarantine.retain(|_, &mut t| t > now);
            c.blocked.retain(|_, &mut t| t > now);
            let expired = before != c.quarantine.len() + c.blocked.len();
            if !expired || c.quarantine_queue.is_empty() {
                continue;
            }
            let n = c.quarantine_queue.len();
            let mut free = Vec::new();
            for _ in 0..n {
                let Some(rec) = c.quarantine_queue.pop_front()? else {
                    break;
                };
                let site = parse_record(&rec)
                    .ok()
                    .and_then(|(e, _)| crawl_site(&e.uri.uri))
                    .unwrap_or_default();
                if c.quarantine.contains_key(&site) || c.blocked.contains_key(&site) {
                    c.quarantine_queue.push_back(&rec)?;
                } else {
                    free.push(rec);
                }
            }
            for r in free.iter().rev() {
                c.queue.push_front(r)?;
            }
            debug!(
                "collection {}: {} entries back from quarantine",
                show(name),
                free.len()
            );
        }
        Ok(())
    }

    /// Statistics timer (3.1.6): CMD_UM_STAT with the delta since the last one.
    pub fn stats_tick(&mut self) {
        let mut msgs = Vec::new();
        for (name, c) in self.collections.iter_mut() {
            let cur = c.counters;
            let s = c.sent;
            let delta = NodeCounters {
                uris_queued: cur.uris_queued - s.uris_queued,
                uris_forwarded: cur.uris_forwarded - s.uris_forwarded,
                uris_quarantined: cur.uris_quarantined - s.uris_quarantined,
                uris_dropped: cur.uris_dropped - s.uris_dropped,
                sites_started: cur.sites_started - s.sites_started,
                sites_blocked: cur.sites_blocked - s.sites_blocked,
                uris_seen: cur.uris_seen - s.uris_seen,
                uris_held_refresh_only: cur.uris_held_refresh_only - s.uris_held_refresh_only,
            };
            c.sent = cur;
            let mut stats = delta.to_value();
            let crawl = std::mem::replace(&mut c.crawl_delta, Value::Dict(Vec::new()));
            super::multinode::merge_stats(&mut stats, &crawl);
            msgs.push(Message::CmdUmStat(Stat {
                collection: owned(name),
                stats,
            }));
        }
        for m in msgs {
            self.send_multinode(Priority::Normal, &m);
        }
    }

    /// Sends a line to one of the collection's log files at the multinode scheduler
    /// (CMD_UM_LOG: "si", "ur", "sc" or "dk").
    pub fn log(&mut self, name: &[u8], logfile: &[u8], message: &[u8]) {
        let m = Message::CmdUmLog(Log {
            collection: owned(name),
            logfile: owned(logfile),
            message: owned(message),
        });
        self.send_multinode(Priority::Normal, &m);
    }

    /// Makes queues and routes durable (the shell's sync timer).
    pub fn sync(&mut self) -> Result<(), SchedError> {
        self.routing.sync()?;
        for c in self.collections.values_mut() {
            c.queue.sync()?;
            c.quarantine_queue.sync()?;
            c.new_held.sync()?;
            c.seen.sync()?;
            Self::sync_store(c)?;
            c.inflight.sync()?;
        }
        Ok(())
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
