//! The node scheduler's session sink (`crawlfleet node --nameserver HOST:PORT`): feeds every
//! collection's document log into content distributor sessions (docs/distributor.md "Feeding
//! sessions"; MS-FSCDFT 3.6 for how sessions are placed).
//!
//! One thread of the node, with a blocking client whose every call is bounded, so the node's
//! event loop never waits for it. Per (collection, destination) it tails the collection's
//! document log from a cursor kept on disk ([`FeedCursor`]) and sends only documents the node
//! has made durable: the node publishes each collection's durable sequence number after every
//! sync of its document log ([`SessionSink::publish`]), because a document read before its
//! sync can vanish in a crash and its sequence number be given to another one.
//!
//! A session is made by resolving session_factory (`esp/subsystems/processing/dispatcher`,
//! processing::session_factory 5.1) and calling its `create` with an empty guarantee_set,
//! priority 0 and external_client false (MS-FSCDFT 3.5.4.2, 2.2.2). One batch is in flight per
//! destination; its answer moves the cursor past the acknowledged operations and those refused
//! for good, and transient failures are sent again after a backoff. When the session's
//! distributor does not answer (connect error, timeout, closed connection), the sink resolves
//! session_factory again (there may be a new master), calls `recreate` with the session's id and
//! sends everything after the cursor again; the index applies each operation once. A node
//! restarted goes on from its cursors with new sessions. A suspended destination (FSCMT 3.1.5.6)
//! is not fed and its cursor does not move. Without a name server or a distributor the sink
//! waits (a line a second at most) and the document log keeps everything.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::distributor::election::triple;
use crawlfleet_core::distributor::wire::{GuaranteeSet, SessionSpec};
use crawlfleet_core::distributor::SESSION_FACTORY;
use crawlfleet_core::feed::session::{
    destinations, parse_result, Destination, FeedCursor, OpBatch,
};
use crawlfleet_core::feed::{DocLogReader, FeedDoc, FeedError, DOCS_DIR};
use crawlfleet_core::nameserver::{Aor, Exception};
use crawlfleet_core::sched::node::{collection_dir, NodeScheduler};
use crawlfleet_core::stats::Stats;
use crawlfleet_core::warn_limited;
use log::info;
use parking_lot::Mutex;

use crate::crawl::NodeStatus;
use crate::nsclient::{ClientError, NsClient};

/// Bound of a call to the name server or the master.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound of a `feed` call: the distributor answers once the batch is durable.
const FEED_TIMEOUT: Duration = Duration::from_secs(10);
/// Sleep of the thread when no destination has anything to send.
const IDLE: Duration = Duration::from_millis(20);
/// First and longest wait before trying a destination again after a failure.
const BACKOFF_MIN: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// What the node publishes of one collection.
#[derive(Clone, Debug)]
struct CollectionView {
    dir: PathBuf,
    durable: u64,
    destinations: Vec<Destination>,
    all_suspended: bool,
    suspended: BTreeSet<Vec<u8>>,
}

/// Documents of one collection the sink has handled, over its destinations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeedCounters {
    /// Operations sent (each once, however often it was sent again).
    pub fed: u64,
    /// Operations the distributors acknowledged (durable in their index).
    pub acked: u64,
    /// Operations refused for good.
    pub failed: u64,
    /// Durable documents of the log not settled yet, over the destinations (a gauge).
    pub pending: u64,
}

#[derive(Default)]
struct Shared {
    views: Mutex<BTreeMap<String, CollectionView>>,
    counters: Mutex<BTreeMap<String, FeedCounters>>,
    stop: AtomicBool,
}

/// The session sink of a node: its thread, and what the node shares with it.
pub struct SessionSink {
    shared: Arc<Shared>,
    data_dir: PathBuf,
    /// The counters as last added to the statistics.
    reported: BTreeMap<String, FeedCounters>,
}

impl SessionSink {
    /// Starts the sink's thread, feeding through the name server at `nameserver`.
    pub fn start(nameserver: SocketAddr, data_dir: &Path) -> Result<SessionSink, String> {
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("session-sink".into())
            .spawn(move || Sink::new(nameserver, s).run())
            .map_err(|e| format!("cannot start the session sink: {e}"))?;
        info!("feeding the document logs through the name server at {nameserver}");
        Ok(SessionSink {
            shared,
            data_dir: data_dir.to_path_buf(),
            reported: BTreeMap::new(),
        })
    }

    /// Publishes the collections, their durable documents and feeding state: called by the
    /// node after each sync.
    pub fn publish(&self, sm: &NodeScheduler) {
        let mut views = BTreeMap::new();
        for (name, _) in sm.collections() {
            let (Some(dict), Some(durable), Some((all, suspended))) = (
                sm.collection_config(&name),
                sm.feed_durable(&name),
                sm.feeding(&name),
            ) else {
                continue;
            };
            let text = String::from_utf8_lossy(&name).into_owned();
            views.insert(
                text.clone(),
                CollectionView {
                    dir: collection_dir(&self.data_dir, &name),
                    durable,
                    destinations: destinations(&text, dict),
                    all_suspended: all,
                    suspended: suspended.into_iter().collect(),
                },
            );
        }
        *self.shared.views.lock() = views;
    }

    /// The counters of every collection fed so far.
    pub fn counters(&self) -> BTreeMap<String, FeedCounters> {
        self.shared.counters.lock().clone()
    }

    /// Puts the counters into a node status (for `up` and the multinode display).
    pub fn fill_status(&self, st: &mut NodeStatus) {
        let counters = self.shared.counters.lock();
        for (name, c) in st.collections.iter_mut() {
            c.feed = counters.get(name).copied().unwrap_or_default();
        }
    }

    /// Adds what was fed since the last call to the statistics (MS-FSCADM 2.2.4.9 PPFed,
    /// PPSucceeded, PPFailed) and to the next CMD_UM_STAT to the multinode scheduler.
    pub fn feed_stats(&mut self, stats: &mut Stats) {
        let now = self.counters();
        for (name, c) in &now {
            let old = self.reported.get(name).copied().unwrap_or_default();
            let delta = [
                ("PPFed", c.fed - old.fed.min(c.fed)),
                ("PPSucceeded", c.acked - old.acked.min(c.acked)),
                ("PPFailed", c.failed - old.failed.min(c.failed)),
            ];
            if delta.iter().all(|(_, v)| *v == 0) {
                continue;
            }
            if stats.collection(name.as_bytes()).is_none() {
                stats.add_collection(name.as_bytes(), crate::multinode::now_secs());
            }
            // The node's CMD_UM_STAT is made from the same statistics.
            for (key, v) in delta {
                if v > 0 {
                    stats.add(name.as_bytes(), key, v as f64);
                }
            }
        }
        self.reported = now;
    }
}

impl Drop for SessionSink {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
    }
}

/// An open session.
struct Session {
    id: i64,
    object: String,
    conn: NsClient,
}

/// One destination of one collection.
struct Dest {
    dest: Destination,
    cursor: FeedCursor,
    /// The operations sent and not settled, or about to be sent.
    batch: OpBatch,
    /// The sequence number after the batch's last operation.
    batch_end: u64,
    reader: Option<DocLogReader>,
    /// A document read and not yet in the batch (not durable yet, or no room).
    peek: Option<(u64, FeedDoc)>,
    /// The id of the session, kept across a failover for `recreate`.
    session_id: Option<i64>,
    session: Option<Session>,
    /// Operations up to here were counted as fed.
    counted: u64,
    retry_at: Option<Instant>,
    backoff: Duration,
}

struct Sink {
    nameserver: SocketAddr,
    shared: Arc<Shared>,
    dests: BTreeMap<(String, String), Dest>,
}

/// Why a step of a destination stopped.
enum Trouble {
    /// The name server, the master or the session's distributor did not answer: find the
    /// session again.
    Session(String),
    /// Operations to send again later.
    Retry(String),
    /// The log or the cursor could not be used.
    Local(FeedError),
}

impl Sink {
    fn new(nameserver: SocketAddr, shared: Arc<Shared>) -> Sink {
        Sink {
            nameserver,
            shared,
            dests: BTreeMap::new(),
        }
    }

    fn run(mut self) {
        while !self.shared.stop.load(Ordering::Acquire) {
            let views = self.shared.views.lock().clone();
            let mut busy = false;
            for (name, view) in &views {
                let mut pending = 0;
                for d in &view.destinations {
                    busy |= self.turn(name, view, d, &mut pending);
                }
                self.shared
                    .counters
                    .lock()
                    .entry(name.clone())
                    .or_default()
                    .pending = pending;
            }
            if !busy {
                std::thread::sleep(IDLE);
            }
        }
    }

    /// One turn of one destination; true when it sent something.
    fn turn(
        &mut self,
        name: &str,
        view: &CollectionView,
        d: &Destination,
        pending: &mut u64,
    ) -> bool {
        let key = (name.to_owned(), d.name.clone());
        if !self.dests.contains_key(&key) {
            match FeedCursor::open(&view.dir, &d.name) {
                Ok(cursor) => {
                    let start = cursor.next();
                    let session_id = cursor.session();
                    self.dests.insert(
                        key.clone(),
                        Dest {
                            dest: d.clone(),
                            cursor,
                            batch: OpBatch::new(),
                            batch_end: start,
                            reader: None,
                            peek: None,
                            session_id,
                            session: None,
                            counted: start,
                            retry_at: None,
                            backoff: BACKOFF_MIN,
                        },
                    );
                }
                Err(e) => {
                    warn_limited!("sessionsink-cursor", "collection {name}: {e}");
                    return false;
                }
            }
        }
        let nameserver = self.nameserver;
        let Some(dest) = self.dests.get_mut(&key) else {
            return false;
        };
        // Sequence numbers start at 1.
        *pending += view.durable.saturating_sub(dest.cursor.next().max(1));
        if d.is_suspended(view.all_suspended, &view.suspended) {
            return false;
        }
        if dest.retry_at.is_some_and(|t| Instant::now() < t) {
            return false;
        }
        let mut fed = 0;
        let r = dest.step(name, view, nameserver, &mut fed);
        let mut counters = self.shared.counters.lock();
        let c = counters.entry(name.to_owned()).or_default();
        c.fed += fed;
        match r {
            Ok(None) => false,
            Ok(Some((acked, failed, retry))) => {
                c.acked += acked;
                c.failed += failed;
                // A transient failure keeps the backoff the step set.
                if !retry {
                    dest.retry_at = None;
                    dest.backoff = BACKOFF_MIN;
                }
                !retry
            }
            Err(t) => {
                drop(counters);
                dest.trouble(name, t);
                false
            }
        }
    }
}

impl Dest {
    /// Fills the batch with durable documents after the cursor, sends it and settles the
    /// answer: `Ok(None)` when there was nothing to send, else (acknowledged, refused, some to
    /// send again after the backoff).
    fn step(
        &mut self,
        name: &str,
        view: &CollectionView,
        nameserver: SocketAddr,
        fed: &mut u64,
    ) -> Result<Option<(u64, u64, bool)>, Trouble> {
        self.fill(view, fed).map_err(Trouble::Local)?;
        if self.batch.is_empty() {
            return Ok(None);
        }
        if self.session.is_none() {
            self.session = Some(self.open_session(nameserver)?);
        }
        let Some(s) = self.session.as_mut() else {
            return Ok(None);
        };
        let seqs = self.batch.seqs();
        let answer = match s.conn.call_method(&s.object, "feed", self.batch.to_args()) {
            Ok(v) => v,
            Err(ClientError::Raised(r)) if r.exception != Exception::UnknownObject => {
                return Err(Trouble::Retry(format!("feed raised {r}")))
            }
            Err(e) => return Err(Trouble::Session(format!("session {}: {e}", s.id))),
        };
        let outcomes = parse_result(&answer, &seqs)
            .map_err(|e| Trouble::Session(format!("session {}: {e}", s.id)))?;
        let settled = self.batch.settle(&outcomes, self.batch_end);
        if let Some((seq, why)) = &settled.first_failure {
            warn_limited!(
                "sessionsink-failed",
                "collection {name} -> {}: {} documents refused for good, the first ({seq}): {why}",
                self.dest.collection,
                settled.failed
            );
        }
        self.cursor.advance(settled.next).map_err(Trouble::Local)?;
        let retry = settled.retry.is_some();
        if let Some(why) = settled.retry {
            // The settled ones count; the rest goes again after a backoff.
            self.retry_at = Some(Instant::now() + self.backoff);
            self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            warn_limited!(
                "sessionsink-retry",
                "collection {name} -> {}: {} documents to send again: {why}",
                self.dest.collection,
                self.batch.len()
            );
        }
        Ok(Some((settled.acked, settled.failed, retry)))
    }

    /// Adds durable documents after the batch to it, up to its limits.
    fn fill(&mut self, view: &CollectionView, fed: &mut u64) -> Result<(), FeedError> {
        while !self.batch.is_full() {
            let next = match self.peek.take() {
                Some(p) => Some(p),
                None => self.read(view)?,
            };
            let Some((seq, doc)) = next else { break };
            if seq >= view.durable || !self.batch.fits(&doc) {
                self.peek = Some((seq, doc));
                break;
            }
            self.batch.push(seq, &doc);
            self.batch_end = seq + 1;
            if seq >= self.counted {
                *fed += 1;
                self.counted = seq + 1;
            }
        }
        Ok(())
    }

    /// The next document of the log after the batch, following the log as it grows.
    fn read(&mut self, view: &CollectionView) -> Result<Option<(u64, FeedDoc)>, FeedError> {
        if self.batch_end >= view.durable {
            return Ok(None);
        }
        let reader = match &mut self.reader {
            Some(r) => r,
            None => self.reader.insert(DocLogReader::open_from(
                &view.dir.join(DOCS_DIR),
                self.batch_end,
            )?),
        };
        match reader.next() {
            Some(r) => r.map(Some),
            None => {
                reader.follow()?;
                reader.next().transpose()
            }
        }
    }

    /// Finds the master through the name server and creates the session, or recreates the
    /// one this destination had (MS-FSCDFT 3.6: the master forwards it to the distributor
    /// that holds it, or places it anew).
    fn open_session(&mut self, nameserver: SocketAddr) -> Result<Session, Trouble> {
        let down = |what: &str, e: ClientError| Trouble::Session(format!("{what}: {e}"));
        let mut ns = NsClient::connect(nameserver, CALL_TIMEOUT)
            .map_err(|e| down(&format!("name server {nameserver}"), e))?;
        let factory = ns
            .resolve(triple(SESSION_FACTORY))
            .map_err(|e| down("resolving session_factory", e))?;
        let mut master = NsClient::connect(addr_of(&factory)?, CALL_TIMEOUT)
            .map_err(|e| down(&format!("master {}:{}", factory.host, factory.port), e))?;
        let spec = SessionSpec {
            id: self.session_id.unwrap_or(0),
            collection: self.dest.collection.clone(),
            guarantees: GuaranteeSet(Vec::new()),
            priority: 0,
            external_client: false,
        };
        let method = if self.session_id.is_some() {
            "recreate"
        } else {
            "create"
        };
        let v = master
            .call_method(&factory.object_id, method, spec.to_args())
            .map_err(|e| down(&format!("session_factory {method}"), e))?;
        let proxy = Aor::from_value(&v, "result")
            .map_err(|e| Trouble::Session(format!("session_factory {method}: {e}")))?;
        let id = proxy
            .object_id
            .rsplit('/')
            .next()
            .and_then(|i| i.parse().ok())
            .ok_or_else(|| Trouble::Session(format!("session proxy {:?}", proxy.object_id)))?;
        let conn = NsClient::connect(addr_of(&proxy)?, FEED_TIMEOUT)
            .map_err(|e| down(&format!("session {id} at {}:{}", proxy.host, proxy.port), e))?;
        info!(
            "{method}d session {id} for content collection {} at {}:{}",
            self.dest.collection, proxy.host, proxy.port
        );
        self.session_id = Some(id);
        if let Err(e) = self.cursor.set_session(id) {
            // Only a restart's recreate needs it: the next restart opens a new session.
            warn_limited!("sessionsink-cursor", "keeping session {id}: {e}");
        }
        Ok(Session {
            id,
            object: proxy.object_id,
            conn,
        })
    }

    /// After a failure: drop the session (and resend from the cursor) when it is the session
    /// that failed, and wait before the next try.
    fn trouble(&mut self, name: &str, t: Trouble) {
        let why = match t {
            Trouble::Session(why) => {
                self.session = None;
                why
            }
            Trouble::Retry(why) => why,
            Trouble::Local(e) => {
                // Read the log again from the batch's end.
                self.reader = None;
                self.peek = None;
                e.to_string()
            }
        };
        warn_limited!(
            "sessionsink-wait",
            "collection {name} -> {}: feeding waits ({} documents after the cursor {} in hand): {why}",
            self.dest.collection,
            self.batch.len(),
            self.cursor.next()
        );
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
    }
}

fn addr_of(a: &Aor) -> Result<SocketAddr, Trouble> {
    (a.host.as_str(), a.port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut i| i.next())
        .ok_or_else(|| Trouble::Session(format!("{}:{} does not resolve", a.host, a.port)))
}

#[cfg(test)]
#[path = "sessionsink_tests.rs"]
mod tests;
