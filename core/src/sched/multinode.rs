//! The multinode scheduler as a state machine (MS-FSCMT 3.2), free of sockets: the role shell
//! feeds it frames from node schedulers, timer ticks and DNS answers, and sends what it returns.
//!
//! Durability: every collection's crawl queue and the routing database are files in the data
//! directory, synced on [`Multinode::sync`] (the shell's sync timer, 100 ms by default). A
//! restart resumes the queues where the last sync left them and keeps every routing decision.
//! The message handlers (3.2.5, one `on_<message>` each) are in `multinode/handlers.rs`, the
//! routing path (CMD_UM_URI into the queues, the pump that routes and forwards them) in
//! `multinode/route.rs`, the internal API the administration interface drives in
//! `multinode/admin.rs`.
//!
//! Decisions where the spec is silent:
//! - The crawl routing attribute is the registrable domain of the site's host
//!   ([`crate::routing::routing_attribute`]); a new attribute goes to the connected node with the
//!   fewest routes (ties: the smallest node id), so sites spread evenly.
//! - CMD_UM_ADD_ROUTE carries the addresses from the DNS cache when the multinode scheduler has
//!   resolved the site; otherwise None with a TTL of 0, and the node asks with
//!   CMD_UM_DNS_REQUEST when it needs them. A lookup is started at routing time so the cache is
//!   warm by then.
//! - An entry whose node is not connected waits in the collection's persistent `deferred` queue
//!   and goes back to the crawl queue when a node registers.
//! - The first time a node id registers after the multinode scheduler started, it is asked for
//!   its routes (CMD_UM_ASK_ROUTE, 2.2.3.9) for every collection; new routing decisions for a
//!   collection wait until every node asked has answered CMD_UM_LAST_ROUTE (3.2.5.10), so a
//!   multinode scheduler that lost its routing database never routes a site twice.
//! - Routes a node reports (2.2.4.9) fill gaps in the routing database; an existing route of a
//!   different node is kept (first decision wins) and the conflict is logged.
//! - CMD_ADM_CONF_REMOVE: the collection enters state 3 (removing) and is deleted once every node
//!   it was sent to answered CMD_UM_DELETE_OK, or closed its connection (3.2.5.14).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use log::{info, warn};

use super::collections::{meta, CollectionDirs, StoreError};
use super::dns::{DnsCache, DnsEntry};
use super::{file_name, show, start_uri_entry, start_uris, Outbox, PeerId};
use crate::config::CollectionConfig;
use crate::frame::{self, Priority};
use crate::marshal::Value;
use crate::msg::types::conf_state;
use crate::msg::{Bytes, DnsReply, Message};
use crate::queue::{CrawlQueue, QueueError, QueueOptions, SyncPolicy};
use crate::routing::{RoutingDb, RoutingError};

mod admin;
mod diskfull;
mod handlers;
mod retain;
mod route;
mod sitepeers;

/// The XML-RPC (host, port) a node reported in CMD_UM_INIT.
pub type XmlRpcAddr = (Vec<u8>, i64);

/// Settings of the multinode scheduler.
#[derive(Clone, Debug)]
pub struct MultinodeOptions {
    /// Seconds a successful lookup is cached (the system resolver does not tell the record TTL).
    pub dns_ttl: i64,
    /// Seconds a failed lookup is cached.
    pub dns_negative_ttl: i64,
    /// Hosts kept in the DNS cache.
    pub dns_cache_size: usize,
    /// Entries routed per collection per [`Multinode::pump`] call (fairness between collections).
    pub pump_budget: usize,
    /// Segment size of the crawl queues.
    pub queue_segment_bytes: u64,
}

impl Default for MultinodeOptions {
    fn default() -> Self {
        MultinodeOptions {
            dns_ttl: 3600,
            dns_negative_ttl: 60,
            dns_cache_size: 1 << 20,
            pump_budget: 4096,
            queue_segment_bytes: 16 << 20,
        }
    }
}

/// An error that stops the role: its data directory cannot be used.
#[derive(Debug)]
pub enum SchedError {
    /// A crawl queue file.
    Queue(QueueError),
    /// The routing database.
    Routing(RoutingError),
    /// A collection directory or log file.
    Store(StoreError),
    /// The document feed.
    Feed(crate::feed::FeedError),
}

impl std::fmt::Display for SchedError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchedError::Queue(e) => write!(f, "crawl queue: {e}"),
            SchedError::Routing(e) => e.fmt(f),
            SchedError::Store(e) => e.fmt(f),
            SchedError::Feed(e) => write!(f, "document feed: {e}"),
        }
    }
}

impl std::error::Error for SchedError {}

impl SchedError {
    /// True when a store found no room on its file system ([`crate::diskfull::is_full`]): a
    /// node pauses the collection's crawl until space returns instead of stopping.
    pub fn is_disk_full(&self) -> bool {
        match self {
            SchedError::Queue(e) => e.is_disk_full(),
            SchedError::Routing(e) => crate::diskfull::is_full(&e.error),
            SchedError::Store(e) => e.disk_full,
            SchedError::Feed(e) => e.is_disk_full(),
        }
    }
}

impl From<QueueError> for SchedError {
    fn from(e: QueueError) -> Self {
        SchedError::Queue(e)
    }
}
impl From<RoutingError> for SchedError {
    fn from(e: RoutingError) -> Self {
        SchedError::Routing(e)
    }
}
impl From<StoreError> for SchedError {
    fn from(e: StoreError) -> Self {
        SchedError::Store(e)
    }
}

/// A collection as the multinode scheduler keeps it.
struct Collection {
    dict: Value<'static>,
    /// `dict` parsed once ([`Multinode::collection_settings`]).
    settings: Arc<CollectionConfig>,
    state: i64,
    queue: CrawlQueue,
    /// Entries whose node is not connected.
    deferred: CrawlQueue,
    /// Nodes asked for their routes that have not answered CMD_UM_LAST_ROUTE yet.
    awaiting_routes: BTreeSet<Vec<u8>>,
    /// While removing: the nodes that have not answered CMD_UM_DELETE_OK yet.
    removing: Option<BTreeSet<Vec<u8>>>,
    /// The statistics deltas of CMD_UM_STAT merged (3.2.5.6), each MS-FSCADM 2.2.5 key as
    /// what it measures ([`crate::stats::aggregate_report`]); ActiveSites and PPChecksums
    /// are the sums of the nodes' latest.
    stats: Value<'static>,
    /// Per node: the deltas merged, for per-node views.
    node_stats: BTreeMap<Vec<u8>, Value<'static>>,
    /// CMD_UM_STAT structures received and not yet taken into the statistics by refresh
    /// cycle ([`Multinode::take_stat_reports`]).
    reports: std::collections::VecDeque<Value<'static>>,
}

/// CMD_UM_STAT structures kept per collection until taken (the oldest go beyond).
const MAX_PENDING_REPORTS: usize = 4096;

/// A connection from a node scheduler.
#[derive(Default)]
struct Peer {
    node: Option<Vec<u8>>,
    xmlrpc: Option<(Vec<u8>, i64)>,
    /// The number of the last keep-alive the Keep-Alive timer sent (`retain.rs` numbers every
    /// keep-alive of the connection).
    keepalive_timer_sent: u64,
}

/// Statistics of the multinode scheduler itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MultinodeCounters {
    /// CMD_UM_URI / _URG received (an entry taken in again after its node's connection closed,
    /// `uris_requeued`, counts once more).
    pub uris_received: u64,
    /// Entries forwarded to nodes.
    pub uris_forwarded: u64,
    /// Entries that could not be routed (no host, undecodable) and were dropped with a log line.
    pub uris_unroutable: u64,
    /// Routing decisions made.
    pub routes_made: u64,
    /// Forwarded entries taken in again because their node's connection closed before the
    /// node confirmed it held them (`retain.rs`).
    pub uris_requeued: u64,
    /// Frames that could not be decoded.
    pub bad_frames: u64,
}

/// An IP address granted to a node (3.2.1): the node, and the (collection, site) pairs it was
/// granted the address for.
type IpLock = (Vec<u8>, BTreeSet<(Vec<u8>, Vec<u8>)>);

/// The multinode scheduler.
pub struct Multinode {
    opts: MultinodeOptions,
    data_dir: PathBuf,
    dirs: CollectionDirs,
    routing: RoutingDb,
    collections: BTreeMap<Vec<u8>, Collection>,
    /// Looked up for every frame, as is `peer_cache`: hashed with foldhash.
    peers: HashMap<PeerId, Peer, foldhash::fast::RandomState>,
    /// Registered node ids and their connections (3.2.1 node scheduler list).
    nodes: BTreeMap<Vec<u8>, PeerId>,
    /// Node ids that registered since this process started (asked for routes once).
    seen_nodes: BTreeSet<Vec<u8>>,
    dns: DnsCache,
    /// Hosts being resolved and who asked.
    dns_waiting: HashMap<String, Vec<PeerId>, foldhash::fast::RandomState>,
    /// Crawl site IP addresses (3.2.1): IP -> the node crawling it and the (collection, site)
    /// pairs it was granted the address for; the address is free once each START_CRAWL_IP
    /// was closed by its STOP_CRAWL_IP (or the node went away).
    ip_locks: HashMap<Vec<u8>, IpLock>,
    logs: HashMap<(Vec<u8>, &'static str), BufWriter<File>>,
    /// Crawl site -> routing attribute (the public suffix lookup is worth remembering).
    attr_cache: HashMap<String, String, foldhash::fast::RandomState>,
    counters: MultinodeCounters,
    /// `uris_received` at the end of the last [`Multinode::pump`]: a pump takes at least what
    /// came in since, so the queue (and what each sync writes) stays as short as the load allows.
    received_at_pump: u64,
    /// A queue record being written (kept for its capacity: the hot path allocates nothing per
    /// entry).
    record: Vec<u8>,
    /// Records taken from a crawl queue by one pump step, back to back, and where each ends.
    chunk: (Vec<u8>, Vec<usize>),
    /// Per collection, crawl site -> the connection of the node it is routed to: one lookup per
    /// routed entry instead of the routing database's and the node list's. Routes
    /// only ever get added while a collection lives, so this is emptied only when the node list
    /// changes (a node's connection comes or goes) or a collection's routes are dropped.
    peer_cache: HashMap<Vec<u8>, route::PeerCache, foldhash::fast::RandomState>,
    /// The hasher of every `peer_cache` table: a frame's site is hashed once, before the
    /// table is looked up.
    site_hasher: foldhash::fast::RandomState,
    out: Outbox<PeerId>,
    /// The disk-full pause of routing.
    disk: diskfull::DiskPause,
    /// Per connection of a node, the entries forwarded and not yet confirmed (`retain.rs`).
    retained: Vec<(PeerId, retain::Retained)>,
}

fn queue_opts(segment: u64) -> QueueOptions {
    QueueOptions {
        segment_bytes: segment,
        // The shell syncs every queue on its own timer, together with the routing database.
        sync: SyncPolicy::Manual,
    }
}

fn owned(b: &[u8]) -> Bytes<'static> {
    Cow::Owned(b.to_vec())
}

/// The log file names of CMD_UM_LOG (2.2.4.8).
fn log_file(code: &[u8]) -> Option<&'static str> {
    Some(match code {
        b"si" => "site.log",
        b"ur" => "screened.log",
        b"sc" => "schedule.log",
        b"dk" => "fetch.log",
        _ => return None,
    })
}

/// Adds a statistics delta into an accumulated structure: numbers add, dicts merge key by key,
/// lists and tuples add element-wise when their lengths agree, anything else is replaced.
pub fn merge_stats(acc: &mut Value<'static>, delta: &Value<'_>) {
    match (&mut *acc, delta) {
        (Value::Int(a, _), Value::Int(b, _)) => *a = a.saturating_add(*b),
        (Value::Float(a), d) if d.as_f64().is_some() => *a += d.as_f64().unwrap_or(0.0),
        (Value::Int(a, _), Value::Float(b)) => *acc = Value::Float(*a as f64 + b),
        (Value::Dict(pairs), Value::Dict(dp)) => {
            for (k, v) in dp {
                match pairs.iter_mut().find(|(pk, _)| pk == k) {
                    Some((_, pv)) => merge_stats(pv, v),
                    None => pairs.push((k.clone().into_owned(), v.clone().into_owned())),
                }
            }
        }
        (Value::List(a), Value::List(b)) | (Value::Tuple(a), Value::Tuple(b))
            if a.len() == b.len() =>
        {
            for (x, y) in a.iter_mut().zip(b) {
                merge_stats(x, y);
            }
        }
        (a, d) => *a = d.clone().into_owned(),
    }
}

impl Multinode {
    /// Opens the data directory: collections, their queues and the routing database.
    pub fn open(data_dir: &Path, opts: MultinodeOptions) -> Result<Multinode, SchedError> {
        fs::create_dir_all(data_dir).map_err(|e| StoreError {
            path: data_dir.to_path_buf(),
            disk_full: crate::diskfull::is_full(&e),
            error: e.to_string(),
        })?;
        let dirs = CollectionDirs::open(&data_dir.join("collections"))?;
        let routing = RoutingDb::open(&data_dir.join("routes"))?;
        let mut m = Multinode {
            dns: DnsCache::new(opts.dns_cache_size),
            opts,
            data_dir: data_dir.to_path_buf(),
            dirs,
            routing,
            collections: BTreeMap::new(),
            peers: HashMap::default(),
            nodes: BTreeMap::new(),
            seen_nodes: BTreeSet::new(),
            dns_waiting: HashMap::default(),
            ip_locks: HashMap::new(),
            logs: HashMap::new(),
            attr_cache: HashMap::default(),
            counters: MultinodeCounters::default(),
            received_at_pump: 0,
            record: Vec::new(),
            chunk: Default::default(),
            disk: Default::default(),
            peer_cache: HashMap::default(),
            site_hasher: foldhash::fast::RandomState::default(),
            out: Outbox::new(),
            retained: Vec::new(),
        };
        for meta in m.dirs.load_all()? {
            let Some(name) = meta
                .get(b"name")
                .and_then(Value::as_bytes)
                .map(<[u8]>::to_vec)
            else {
                continue;
            };
            let dict = meta
                .get(b"dspec")
                .cloned()
                .unwrap_or(Value::Dict(Vec::new()));
            let state = meta
                .get(b"state")
                .and_then(Value::as_i64)
                .unwrap_or(conf_state::ACTIVE);
            let c = m.open_collection(&name, dict, state)?;
            info!(
                "collection {}: state {state}, {} queued, {} deferred, {} routes",
                show(&name),
                c.queue.len(),
                c.deferred.len(),
                m.routing.count(&name)
            );
            m.collections.insert(name, c);
        }
        Ok(m)
    }

    fn open_collection(
        &self,
        name: &[u8],
        dict: Value<'static>,
        state: i64,
    ) -> Result<Collection, SchedError> {
        let dir = self.dirs.dir(name)?;
        let seg = self.opts.queue_segment_bytes;
        Ok(Collection {
            settings: crate::config::parsed(name, &dict),
            dict,
            state,
            queue: CrawlQueue::open(&dir.join("queue"), queue_opts(seg))?,
            deferred: CrawlQueue::open(&dir.join("deferred"), queue_opts(seg))?,
            awaiting_routes: BTreeSet::new(),
            removing: None,
            stats: Value::Dict(Vec::new()),
            node_stats: BTreeMap::new(),
            reports: Default::default(),
        })
    }

    fn save(&self, name: &[u8]) -> Result<(), SchedError> {
        let Some(c) = self.collections.get(name) else {
            return Ok(());
        };
        let m = meta(vec![
            ("name", Value::owned_bytes(name.to_vec())),
            ("dspec", c.dict.clone()),
            ("state", Value::int(c.state)),
        ]);
        Ok(self.dirs.save(name, &m)?)
    }

    /// What the shell must do now (frames, closes, lookups); empties the outbox.
    pub fn take_output(&mut self) -> Outbox<PeerId> {
        std::mem::replace(&mut self.out, Outbox::new())
    }

    /// Counters of the scheduler itself.
    pub fn counters(&self) -> MultinodeCounters {
        self.counters
    }

    /// The registered node ids and the XML-RPC (host, port) each reported in CMD_UM_INIT.
    pub fn nodes(&self) -> Vec<(Vec<u8>, Option<XmlRpcAddr>)> {
        self.nodes
            .iter()
            .map(|(n, p)| (n.clone(), self.peers.get(p).and_then(|p| p.xmlrpc.clone())))
            .collect()
    }

    /// The routing database.
    pub fn routing(&self) -> &RoutingDb {
        &self.routing
    }

    /// The collections and their states.
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
    /// where its dict does not parse).
    pub fn collection_settings(&self, name: &[u8]) -> Option<Arc<CollectionConfig>> {
        self.collections.get(name).map(|c| Arc::clone(&c.settings))
    }

    /// Entries waiting in a collection's crawl queue and deferred queue.
    pub fn queued(&self, name: &[u8]) -> Option<(u64, u64)> {
        self.collections
            .get(name)
            .map(|c| (c.queue.len(), c.deferred.len()))
    }

    /// The merged statistics of a collection (3.2.5.6).
    pub fn statistics(&self, name: &[u8]) -> Option<&Value<'static>> {
        self.collections.get(name).map(|c| &c.stats)
    }

    /// The CMD_UM_STAT structures received since the last call: (collection, structure), in
    /// the order they came (MS-FSCMT 3.2.5.6; the administrative statistics add each to the
    /// refresh cycle its Epoch names).
    pub fn take_stat_reports(&mut self) -> Vec<(Vec<u8>, Value<'static>)> {
        let mut out = Vec::new();
        for (name, c) in self.collections.iter_mut() {
            out.extend(c.reports.drain(..).map(|r| (name.clone(), r)));
        }
        out
    }

    /// The merged statistics of a collection from one node.
    pub fn node_statistics(&self, name: &[u8], node: &[u8]) -> Option<&Value<'static>> {
        self.collections
            .get(name)
            .and_then(|c| c.node_stats.get(node))
    }

    /// Which node crawls IP `ip` now.
    pub fn ip_owner(&self, ip: &[u8]) -> Option<&[u8]> {
        self.ip_locks.get(ip).map(|(n, _)| n.as_slice())
    }

    fn send(&mut self, peer: PeerId, m: &Message<'_>) {
        self.out.send(peer, Priority::Normal, m);
    }

    fn broadcast(&mut self, m: &Message<'_>) {
        let mut bytes = Vec::with_capacity(128);
        frame::encode_message(m, Priority::Normal, &mut bytes);
        for &p in self.nodes.values() {
            self.out.sends.push((p, Priority::Normal, bytes.clone()));
        }
    }

    // ---- connections ----------------------------------------------------------------------------

    /// A connection was accepted.
    pub fn peer_connected(&mut self, peer: PeerId) {
        self.peers.insert(peer, Peer::default());
    }

    /// A connection is gone: its node is unregistered and its IP addresses released.
    pub fn peer_closed(&mut self, peer: PeerId) -> Result<(), SchedError> {
        let Some(p) = self.peers.remove(&peer) else {
            return Ok(());
        };
        for w in self.dns_waiting.values_mut() {
            w.retain(|&q| q != peer);
        }
        let Some(node) = p.node else {
            return Ok(());
        };
        if self.nodes.get(&node) == Some(&peer) {
            self.nodes.remove(&node);
            self.peer_cache.clear();
        }
        info!("node {} disconnected", show(&node));
        self.requeue_unconfirmed(peer, &node)?;
        self.ip_locks.retain(|_, (n, _)| *n != node);
        let names: Vec<Vec<u8>> = self.collections.keys().cloned().collect();
        for name in names {
            if let Some(c) = self.collections.get_mut(&name) {
                c.awaiting_routes.remove(&node);
                if let Some(r) = c.removing.as_mut() {
                    r.remove(&node);
                }
            }
            self.finish_removal(&name)?;
        }
        Ok(())
    }

    // ---- timers -----------------------------------------------------------------------------------

    /// The Node Scheduler Keep-Alive timer (3.2.6): logs nodes that did not answer the previous
    /// keep-alive and sends a new one to every node.
    pub fn keepalive_tick(&mut self) {
        let peers: Vec<PeerId> = self.nodes.values().copied().collect();
        for peer in peers {
            let Some(p) = self.peers.get(&peer) else {
                continue;
            };
            if self.keepalive_unanswered(peer, p.keepalive_timer_sent) {
                warn!(
                    "node {} did not answer the last CMD_UM_KEEPALIVE",
                    show(p.node.as_deref().unwrap_or_default())
                );
            }
            self.send_keepalive(peer);
            let sent = self.keepalives_sent(peer);
            if let Some(p) = self.peers.get_mut(&peer) {
                p.keepalive_timer_sent = sent;
            }
        }
    }
}
fn dns_reply(host: &[u8], e: &DnsEntry) -> Message<'static> {
    Message::CmdUmDnsReply(DnsReply {
        // 2.2.3.20: PKT_DSPECNAME must be the empty string.
        collection: Cow::Borrowed(b""),
        host: owned(host),
        addrinfo: e.addrinfo.clone(),
        resolved_at: e.resolved_at,
        ttl: e.ttl,
    })
}
