//! The link store client (the client side of MS-FSWASDR) for the node scheduler: a
//! [`LinkBatcher`] that collects link data per application and collection, seals a batch when
//! it is large or old enough, and a sender thread that delivers each batch and keeps what the
//! store does not acknowledge in an on-disk [`backlog`] to resend later (3.1.5).
//!
//! ```no_run
//! use crawlfleet_shells::linkclient::{Applications, LinkBatcher, LinkClientConfig, OutLink};
//!
//! let cfg = LinkClientConfig::new("127.0.0.1:13291".parse().unwrap(), "/var/crawl/link-backlog".into());
//! let links = LinkBatcher::start(cfg).unwrap();
//! links.set_applications(b"sp", Applications { webanalyzer: true, sharepoint: true });
//! let now = 1244208852;
//! links.add_links(b"sp", b"http://www.fourthcoffee.com/", &[
//!     OutLink { url: b"http://www.fourthcoffee.com/about.html", anchor: b"about us", intra: true },
//!     OutLink { url: b"http://www.contoso.com/", anchor: b"another example", intra: false },
//! ], now).unwrap();
//! links.add_equivalents(b"sp", b"http://www.fourthcoffee.com/",
//!     &[b"http://www.fourthcoffee.com/index.aspx", b"http://www.fourthcoffee.com/index.html"], now).unwrap();
//! links.uri_add(b"sp", b"http://www.fourthcoffee.com/", &[b"http://www.fourthcoffee.com/index.aspx"], now).unwrap();
//! links.flush(); // optional: batches also leave by size and age
//! ```
//!
//! Every method may be called from any thread. A method never waits for the network; it may
//! wait briefly when sealed batches pile up faster than the sender delivers or backlogs them.

pub mod backlog;
mod sender;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crawlfleet_core::links::{
    Application, LinkError, Message, Operation, SprelBatch, WebAnalyzerBatch,
};
use crossbeam_channel::{bounded, Sender};
use parking_lot::Mutex;

/// Which applications (2.2.1.1) receive a collection's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Applications {
    /// `webanalyzer`: links, urieq, eqrepr, delete, no_links, urimap, sitemap.
    pub webanalyzer: bool,
    /// `sharepoint`: SPRel `uris` lines.
    pub sharepoint: bool,
}

impl Applications {
    fn has(self, app: Application) -> bool {
        match app {
            Application::WebAnalyzer => self.webanalyzer,
            Application::SharePoint => self.sharepoint,
        }
    }
}

/// The client's settings.
#[derive(Clone, Debug)]
pub struct LinkClientConfig {
    /// The link store (base port + 291).
    pub server: SocketAddr,
    /// Directory of the backlog of unacknowledged messages (created if missing).
    pub backlog_dir: PathBuf,
    /// Bound of the backlog; the oldest messages are dropped beyond it.
    pub backlog_max_bytes: u64,
    /// A batch is sealed and sent once its fields hold this many bytes.
    pub max_batch_bytes: usize,
    /// A batch is sealed and sent once its first line is this old.
    pub max_batch_age: Duration,
    /// Connect, write and read timeout: no answer within it counts as a failure.
    pub io_timeout: Duration,
    /// Pause between attempts to resend the backlog.
    pub retry_interval: Duration,
    /// Applications of a collection no [`LinkBatcher::set_applications`] call named.
    pub default_applications: Applications,
}

impl LinkClientConfig {
    /// Defaults: 256 MiB backlog, 4 MiB or 1 s batches, 30 s timeout, 1 s retry, WebAnalyzer
    /// only.
    pub fn new(server: SocketAddr, backlog_dir: PathBuf) -> Self {
        LinkClientConfig {
            server,
            backlog_dir,
            backlog_max_bytes: 256 << 20,
            max_batch_bytes: 4 << 20,
            max_batch_age: Duration::from_secs(1),
            io_timeout: Duration::from_secs(30),
            retry_interval: Duration::from_secs(1),
            default_applications: Applications {
                webanalyzer: true,
                sharepoint: false,
            },
        }
    }
}

/// A hyperlink found in a document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutLink<'a> {
    /// The target URL.
    pub url: &'a [u8],
    /// Its anchor text.
    pub anchor: &'a [u8],
    /// True when the target is on the document's site.
    pub intra: bool,
}

impl OutLink<'_> {
    /// URL, anchor text and same-site flag, as `WebAnalyzerBatch::page_links` reads a link.
    fn parts(&self) -> (&[u8], &[u8], bool) {
        (self.url, self.anchor, self.intra)
    }
}

/// Counters of a [`LinkBatcher`], since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkClientStats {
    /// Messages the store acknowledged.
    pub acked_messages: u64,
    /// Lines in them.
    pub acked_lines: u64,
    /// Attempts that failed (no connection, no answer, `failed\n`).
    pub failed_attempts: u64,
    /// Messages in the backlog now.
    pub backlog_messages: u64,
    /// Bytes in the backlog now.
    pub backlog_bytes: u64,
    /// Messages dropped over the backlog bound.
    pub dropped_messages: u64,
    /// Links skipped because their URL cannot stand in a line.
    pub skipped_links: u64,
}

/// Counters shared with the sender thread.
#[derive(Debug, Default)]
struct Counters {
    acked_messages: AtomicU64,
    acked_lines: AtomicU64,
    failed_attempts: AtomicU64,
    backlog_messages: AtomicU64,
    backlog_bytes: AtomicU64,
    dropped_messages: AtomicU64,
    skipped_links: AtomicU64,
}

/// A sealed message for the sender.
struct Sealed {
    wire: Vec<u8>,
    lines: u64,
}

enum ToSender {
    Send(Sealed),
    /// Reply once everything before this is acknowledged or backlogged.
    Flush(Sender<()>),
}

enum OpenBatch {
    /// Boxed: the WebAnalyzer batch's seven fields and memo are several times the SPRel one.
    Wa(Box<WebAnalyzerBatch>),
    Sp(SprelBatch),
}

impl OpenBatch {
    fn is_empty(&self) -> bool {
        match self {
            OpenBatch::Wa(w) => w.is_empty(),
            OpenBatch::Sp(s) => s.is_empty(),
        }
    }

    /// After a seal: empties a WebAnalyzer batch and says to keep it, so that the next batch
    /// is written into buffers already grown to a batch's size (growing seven fields from
    /// nothing to megabytes again faulted in fresh pages at every doubling, on the node
    /// threads). What is kept is at most one batch's bytes
    /// ([`LinkClientConfig::max_batch_bytes`] and a line) per collection. An SPRel batch (one
    /// field, written by the refresh path) is dropped as before.
    fn reuse(&mut self) -> bool {
        match self {
            OpenBatch::Wa(w) => {
                w.clear();
                true
            }
            OpenBatch::Sp(_) => false,
        }
    }
}

/// A batch being written, or a WebAnalyzer batch kept empty after its seal (then `since` is
/// reset when the first line is written into it).
struct Open {
    batch: OpenBatch,
    since: Instant,
}

/// A collection's applications and open batches: looked up by the collection's name as given,
/// without building a key for every call.
#[derive(Default)]
struct CollectionBatches {
    /// Set by [`LinkBatcher::set_applications`]; the configured default otherwise.
    apps: Option<Applications>,
    webanalyzer: Option<Open>,
    sharepoint: Option<Open>,
}

impl CollectionBatches {
    fn slot(&mut self, app: Application) -> &mut Option<Open> {
        match app {
            Application::WebAnalyzer => &mut self.webanalyzer,
            Application::SharePoint => &mut self.sharepoint,
        }
    }
}

#[derive(Default)]
struct Batches {
    /// By collection name, hashed with foldhash (names are the operator's, not a peer's).
    by_collection: HashMap<Vec<u8>, CollectionBatches, foldhash::fast::RandomState>,
}

struct Shared {
    cfg: LinkClientConfig,
    batches: Mutex<Batches>,
    counters: Counters,
    /// At most [`KEPT_WIRE_BUFFERS`] emptied wire buffers.
    wire_buffers: Mutex<KeptBuffers>,
}

/// Emptied wire buffers kept for the next seals, at most [`KEPT_WIRE_BUFFERS`].
#[derive(Default)]
struct KeptBuffers(Vec<Vec<u8>>);

impl KeptBuffers {
    /// The largest kept buffer (a seal must grow one too small for it), or a new one.
    fn take(&mut self) -> Vec<u8> {
        let kept = &mut self.0;
        let largest = (0..kept.len()).max_by_key(|&i| kept[i].capacity());
        largest.map(|i| kept.swap_remove(i)).unwrap_or_default()
    }

    /// Keeps `wire`, emptied; when all places are taken it replaces the smallest kept buffer
    /// if it is larger (an aged batch's small buffer gives way to a full batch's).
    fn keep(&mut self, mut wire: Vec<u8>) {
        wire.clear();
        let kept = &mut self.0;
        if kept.len() < KEPT_WIRE_BUFFERS {
            kept.push(wire);
        } else if let Some(smallest) = kept.iter_mut().min_by_key(|w| w.capacity()) {
            if smallest.capacity() < wire.capacity() {
                *smallest = wire;
            }
        }
    }
}

/// Wire buffers the sender has finished with, kept for the next seals: a sealed message is
/// megabytes, and a fresh allocation of that size is fresh pages, each faulted in on the node
/// thread that seals (half the page faults of a crawling node before buffers were kept).
const KEPT_WIRE_BUFFERS: usize = 4;

fn seal(app: Application, coll: &[u8], b: &OpenBatch, mut wire: Vec<u8>) -> Sealed {
    let (msg, lines) = match b {
        OpenBatch::Wa(w) => (Message::webanalyzer(coll, w), w.lines()),
        OpenBatch::Sp(s) => (Message::sharepoint(coll, s), s.lines()),
    };
    debug_assert_eq!(msg.application, app);
    wire.clear();
    msg.encode_into(&mut wire);
    Sealed {
        wire,
        lines: lines as u64,
    }
}

impl Shared {
    /// A wire buffer for a seal: one the sender gave back, or a new one.
    fn wire_buffer(&self) -> Vec<u8> {
        self.wire_buffers.lock().take()
    }

    /// Keeps the wire buffer of a message the sender is done with (sent or backlogged), up to
    /// [`KEPT_WIRE_BUFFERS`] of them; a buffer over twice the batch limit (a batch whose last
    /// line was very long) is dropped.
    fn give_back(&self, wire: Vec<u8>) {
        if wire.capacity() > 2 * self.cfg.max_batch_bytes.max(64 << 10) {
            return;
        }
        self.wire_buffers.lock().keep(wire);
    }

    /// Runs `f` on the open batch of `app` for `collection` (if the collection sends to
    /// `app`), then seals it if it has grown to the size limit.
    fn with_batch<T>(
        &self,
        app: Application,
        collection: &[u8],
        f: impl FnOnce(&mut OpenBatch) -> Result<T, LinkError>,
    ) -> Result<Option<Sealed>, LinkError> {
        let mut g = self.batches.lock();
        let known = g.by_collection.get_mut(collection);
        let apps = known
            .as_ref()
            .and_then(|c| c.apps)
            .unwrap_or(self.cfg.default_applications);
        if !apps.has(app) {
            return Ok(None);
        }
        let batches = match known {
            Some(c) => c,
            None => g.by_collection.entry(collection.to_vec()).or_default(),
        };
        let slot = batches.slot(app);
        let open = slot.get_or_insert_with(|| Open {
            batch: match app {
                Application::WebAnalyzer => OpenBatch::Wa(Box::default()),
                Application::SharePoint => OpenBatch::Sp(SprelBatch::default()),
            },
            since: Instant::now(),
        });
        if open.batch.is_empty() {
            // A batch kept from the last seal opens again now.
            open.since = Instant::now();
        }
        f(&mut open.batch)?;
        let size = match &open.batch {
            OpenBatch::Wa(w) => w.byte_len(),
            OpenBatch::Sp(s) => s.byte_len(),
        };
        if size < self.cfg.max_batch_bytes {
            return Ok(None);
        }
        let sealed = seal(app, collection, &open.batch, self.wire_buffer());
        if !open.batch.reuse() {
            *slot = None;
        }
        Ok(Some(sealed))
    }

    /// Seals every open batch at least `age` old (all of them for a zero age).
    fn seal_aged(&self, age: Duration) -> Vec<Sealed> {
        let mut g = self.batches.lock();
        let now = Instant::now();
        let mut sealed = Vec::new();
        for (coll, batches) in g.by_collection.iter_mut() {
            for app in Application::ALL {
                let slot = batches.slot(app);
                if slot
                    .as_ref()
                    .is_none_or(|o| now.duration_since(o.since) < age)
                {
                    continue;
                }
                let Some(o) = slot.as_mut() else { continue };
                if o.batch.is_empty() {
                    // Kept from the last seal, nothing written since: not open.
                    continue;
                }
                sealed.push(seal(app, coll, &o.batch, self.wire_buffer()));
                if !o.batch.reuse() {
                    *slot = None;
                }
            }
        }
        sealed
    }
}

/// Collects link data and ships it to the link store. Dropping it seals what is open, tries to
/// deliver it, and leaves whatever was not acknowledged in the backlog for the next start.
pub struct LinkBatcher {
    shared: Arc<Shared>,
    tx: Option<Sender<ToSender>>,
    thread: Option<JoinHandle<()>>,
}

/// The client could not start.
#[derive(Debug)]
pub struct LinkClientError(pub String);

impl std::fmt::Display for LinkClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LinkClientError {}

impl LinkBatcher {
    /// Opens the backlog (resending what an earlier run left there) and starts the sender.
    pub fn start(cfg: LinkClientConfig) -> Result<LinkBatcher, LinkClientError> {
        let backlog =
            backlog::Backlog::open(&cfg.backlog_dir, cfg.backlog_max_bytes).map_err(|e| {
                LinkClientError(format!("link backlog {}: {e}", cfg.backlog_dir.display()))
            })?;
        let shared = Arc::new(Shared {
            cfg,
            batches: Mutex::new(Batches::default()),
            counters: Counters::default(),
            wire_buffers: Mutex::new(KeptBuffers::default()),
        });
        let (tx, rx) = bounded(16);
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("link-sender".into())
            .spawn(move || sender::run(s, rx, backlog))
            .map_err(|e| LinkClientError(format!("cannot start the link sender: {e}")))?;
        Ok(LinkBatcher {
            shared,
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Sets which applications receive `collection`'s data (per-collection configuration).
    pub fn set_applications(&self, collection: &[u8], apps: Applications) {
        self.shared
            .batches
            .lock()
            .by_collection
            .entry(collection.to_vec())
            .or_default()
            .apps = Some(apps);
    }

    fn submit(&self, sealed: Result<Option<Sealed>, LinkError>) -> Result<(), LinkError> {
        if let Some(s) = sealed? {
            if let Some(tx) = &self.tx {
                // The sender only stops when this batcher is dropped.
                let _ = tx.send(ToSender::Send(s));
            }
        }
        Ok(())
    }

    /// The hyperlinks of the document `from` crawled at `timestamp` (seconds since 1970 UTC):
    /// `links` and `urimap` lines (2.2.1.3.1.1, .6), or a `no_links` line (2.2.1.3.1.5) when
    /// `links` is empty. Links whose URL cannot stand in a line (empty, or holding a space,
    /// LF, CR or NUL) are skipped and counted. Errors only for a bad `from`.
    pub fn add_links(
        &self,
        collection: &[u8],
        from: &[u8],
        links: &[OutLink<'_>],
        timestamp: u64,
    ) -> Result<(), LinkError> {
        let skipped = &self.shared.counters.skipped_links;
        let sealed = self
            .shared
            .with_batch(Application::WebAnalyzer, collection, |b| {
                let OpenBatch::Wa(w) = b else { return Ok(()) };
                w.urimap(from)?;
                let written = w.page_links(from, links, OutLink::parts, timestamp, |e| {
                    log::debug!("skipping a link: {e}");
                    skipped.fetch_add(1, Ordering::Relaxed);
                });
                if written == 0 {
                    w.no_links(from, timestamp)?;
                }
                Ok(())
            });
        self.submit(sealed)
    }

    /// The equivalence class of the document `doc`: the URLs that lead to it (redirects), as
    /// `urieq`, `eqrepr` and `urimap` lines (2.2.1.3.1.2, .3, .6).
    pub fn add_equivalents(
        &self,
        collection: &[u8],
        doc: &[u8],
        class: &[&[u8]],
        timestamp: u64,
    ) -> Result<(), LinkError> {
        self.wa(collection, |w| w.equivalence(doc, class, timestamp))
    }

    /// The document `doc` was deleted (2.2.1.3.1.4).
    pub fn delete(&self, collection: &[u8], doc: &[u8], timestamp: u64) -> Result<(), LinkError> {
        self.wa(collection, |w| w.delete(doc, timestamp))
    }

    /// The document `doc` has no hyperlinks (2.2.1.3.1.5).
    pub fn no_links(&self, collection: &[u8], doc: &[u8], timestamp: u64) -> Result<(), LinkError> {
        self.wa(collection, |w| w.no_links(doc, timestamp))
    }

    /// A URL and its CIDHASH (2.2.1.3.1.6), once per batch.
    pub fn urimap(&self, collection: &[u8], url: &[u8]) -> Result<(), LinkError> {
        self.wa(collection, |w| w.urimap(url))
    }

    /// The site of the document `doc` (2.2.1.3.1.7).
    pub fn sitemap(&self, collection: &[u8], doc: &[u8], site: &[u8]) -> Result<(), LinkError> {
        self.wa(collection, |w| w.sitemap(doc, site))
    }

    fn wa(
        &self,
        collection: &[u8],
        f: impl FnOnce(&mut WebAnalyzerBatch) -> Result<(), LinkError>,
    ) -> Result<(), LinkError> {
        let sealed = self
            .shared
            .with_batch(Application::WebAnalyzer, collection, |b| match b {
                OpenBatch::Wa(w) => f(w),
                OpenBatch::Sp(_) => Ok(()),
            });
        self.submit(sealed)
    }

    fn sp(
        &self,
        collection: &[u8],
        doc: &[u8],
        ts: u64,
        op: Operation,
        class: &[&[u8]],
    ) -> Result<(), LinkError> {
        let sealed = self
            .shared
            .with_batch(Application::SharePoint, collection, |b| match b {
                OpenBatch::Sp(s) => s.uri(doc, ts, op, class),
                OpenBatch::Wa(_) => Ok(()),
            });
        self.submit(sealed)
    }

    /// SPRel: the document `doc` was added to the index, `class` its equivalence class
    /// (2.2.1.3.2.1: one line per member, or one with C7 82 for an empty class).
    pub fn uri_add(
        &self,
        collection: &[u8],
        doc: &[u8],
        class: &[&[u8]],
        timestamp: u64,
    ) -> Result<(), LinkError> {
        self.sp(collection, doc, timestamp, Operation::Add, class)
    }

    /// SPRel: the document `doc` was deleted from the index.
    pub fn uri_del(&self, collection: &[u8], doc: &[u8], timestamp: u64) -> Result<(), LinkError> {
        self.sp(collection, doc, timestamp, Operation::Del, &[])
    }

    /// SPRel: the document `doc` changed its URL scheme (URLSCHCHANGE).
    pub fn uri_schchange(
        &self,
        collection: &[u8],
        doc: &[u8],
        class: &[&[u8]],
        timestamp: u64,
    ) -> Result<(), LinkError> {
        self.sp(collection, doc, timestamp, Operation::UrlSchChange, class)
    }

    /// Seals every open batch and waits until the sender has delivered each or put it in the
    /// backlog (after one attempt to resend the backlog). Returns the counters then.
    pub fn flush(&self) -> LinkClientStats {
        if let Some(tx) = &self.tx {
            for s in self.shared.seal_aged(Duration::ZERO) {
                let _ = tx.send(ToSender::Send(s));
            }
            let (done_tx, done_rx) = bounded(1);
            if tx.send(ToSender::Flush(done_tx)).is_ok() {
                let _ = done_rx.recv();
            }
        }
        self.stats()
    }

    /// The counters.
    pub fn stats(&self) -> LinkClientStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        LinkClientStats {
            acked_messages: get(&c.acked_messages),
            acked_lines: get(&c.acked_lines),
            failed_attempts: get(&c.failed_attempts),
            backlog_messages: get(&c.backlog_messages),
            backlog_bytes: get(&c.backlog_bytes),
            dropped_messages: get(&c.dropped_messages),
            skipped_links: get(&c.skipped_links),
        }
    }
}

impl Drop for LinkBatcher {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            for s in self.shared.seal_aged(Duration::ZERO) {
                let _ = tx.send(ToSender::Send(s));
            }
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_buffers_hand_out_the_largest_and_keep_the_largest() {
        let mut k = KeptBuffers::default();
        assert_eq!(k.take().capacity(), 0, "nothing kept: a new buffer");
        for cap in [10, 4000, 20, 30] {
            k.keep(Vec::with_capacity(cap));
        }
        // All four places taken: a larger buffer replaces the smallest, a smaller one is
        // dropped.
        k.keep(Vec::with_capacity(2000));
        k.keep(Vec::with_capacity(5));
        let mut caps: Vec<usize> = k.0.iter().map(Vec::capacity).collect();
        caps.sort_unstable();
        assert_eq!(caps.len(), KEPT_WIRE_BUFFERS);
        assert!(caps[0] >= 20 && caps[3] >= 4000 && caps.iter().all(|&c| c >= 20));
        let first = k.take();
        assert!(first.capacity() >= 4000 && first.is_empty());
        assert!(k.take().capacity() >= 2000);
        // A buffer kept with bytes in it comes back empty.
        k.keep(b"sent".to_vec());
        assert!(k.0.iter().all(Vec::is_empty));
    }
}
