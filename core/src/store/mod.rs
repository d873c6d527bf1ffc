//! The crawl store: one per collection on each node scheduler, persisted. For every URI crawled
//! it keeps a [`UriRecord`]: the document's checksum, when it was first and last crawled, the
//! HTTP validators for a conditional GET on refresh, its state and refresh cycle (FSCADM 3.3.1's
//! minimum — which URIs were crawled, checksum, when — is the floor).
//!
//! ```
//! use crawlfleet_core::store::{CrawlStore, UriRecord, UriState};
//!
//! let dir = std::env::temp_dir().join(format!("cf-store-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let mut store = CrawlStore::open(&dir).unwrap();
//! let rec = UriRecord::stored([7; 16], 1_700_000_000, 200, 1, 5120);
//! assert_eq!(store.put(b"http://example.com/a", rec.clone()).unwrap(), None);
//! store.sync().unwrap(); // durable from here
//! drop(store);
//! let store = CrawlStore::open(&dir).unwrap();
//! assert_eq!(store.get(b"http://example.com/a"), Some(&rec));
//! assert_eq!(store.uris_of_site("example.com"), vec![b"http://example.com/a".to_vec()]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
//!
//! On disk (`<collection dir>/store/`, see [`store_dir`]): one file, `crawl.log`, a
//! [`crate::recordlog`] log (8-byte magic `CFSTORE1`, then checked records with [`record`]
//! payloads), each a
//! result — put this record for this URI, or remove this URI — so replaying them in order gives
//! the newest state. [`CrawlStore::put`] and [`CrawlStore::remove`] only queue a record;
//! [`CrawlStore::sync`] writes and fdatasyncs them (group commit: everything before a sync that
//! returned survives a crash; what came after may or may not). When the file has grown to more
//! than [`StoreOptions::compact_ratio`] times the live data, a sync rewrites it with the live
//! records only (temporary file, fdatasync, rename, directory fsync), so a crash leaves the old
//! or the new file, never a mix. Opening replays the file and cuts it at the first torn or
//! damaged record, with a warning.
//!
//! In memory, a hash table of boxed URIs (xxh3-64 of the URI bytes) to records: a lookup hashes
//! the borrowed URI once and allocates nothing.

pub mod record;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hashbrown::hash_table::{Entry as TableEntry, HashTable};
use log::{info, warn};
use xxhash_rust::xxh3::xxh3_64;

use crate::recordlog::{sync_dir, Commit, Format, LogError, LogWriter, Options, HEADER};
use crate::routing::crawl_site;
use crate::sched::collections::StoreError;
pub use record::{UriRecord, UriState, MAX_FIELD};

/// The first bytes of `crawl.log`.
const MAGIC: &[u8; 8] = b"CFSTORE1";
/// `crawl.log`'s format.
const FORMAT: Format = Format {
    magic: MAGIC,
    name: "crawl store",
    max_record: record::MAX_RECORD,
};
/// The log file's name in the store directory.
pub const LOG_FILE: &str = "crawl.log";
/// Queued record bytes that are written to the file (without waiting for the disk) at once.
const WRITE_CHUNK: usize = 1 << 20;

/// The crawl store's directory inside a collection's directory
/// (`core::sched::node::collection_dir`): `<collection dir>/store`.
pub fn store_dir(collection_dir: &Path) -> PathBuf {
    collection_dir.join("store")
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> StoreError + '_ {
    move |e| StoreError {
        path: path.to_path_buf(),
        disk_full: crate::diskfull::is_full(&e),
        error: e.to_string(),
    }
}

impl From<LogError> for StoreError {
    fn from(e: LogError) -> Self {
        StoreError {
            disk_full: e.is_no_space(),
            path: e.path,
            error: format!("{}: {}", e.action, e.error),
        }
    }
}

/// When the log is rewritten with the live records only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// No compaction while the file is smaller than this.
    pub compact_min_bytes: u64,
    /// Compact when the file is more than this many times the size of the live records.
    pub compact_ratio: u64,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            compact_min_bytes: 16 << 20,
            compact_ratio: 2,
        }
    }
}

/// What opening the store found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Records replayed.
    pub records: u64,
    /// Bytes cut from a torn or damaged tail.
    pub truncated: u64,
    /// Time taken.
    pub elapsed: Duration,
}

struct Entry {
    uri: Box<[u8]>,
    rec: UriRecord,
}

/// The URIs and their records.
#[derive(Default)]
struct Table {
    entries: HashTable<Entry>,
    /// Bytes the live records take in a compacted file (header excluded).
    live_bytes: u64,
}

impl Table {
    fn put(&mut self, uri: &[u8], rec: UriRecord) -> Option<UriRecord> {
        self.live_bytes += encoded_len(uri, &rec);
        let hash = xxh3_64(uri);
        let prev = match self
            .entries
            .entry(hash, |e| &*e.uri == uri, |e| xxh3_64(&e.uri))
        {
            TableEntry::Occupied(mut e) => Some(std::mem::replace(&mut e.get_mut().rec, rec)),
            TableEntry::Vacant(v) => {
                v.insert(Entry {
                    uri: uri.into(),
                    rec,
                });
                None
            }
        };
        if let Some(p) = &prev {
            self.live_bytes -= encoded_len(uri, p);
        }
        prev
    }

    fn remove(&mut self, uri: &[u8]) -> Option<UriRecord> {
        let hash = xxh3_64(uri);
        let e = self.entries.find_entry(hash, |e| &*e.uri == uri).ok()?;
        let (e, _) = e.remove();
        self.live_bytes -= encoded_len(uri, &e.rec);
        Some(e.rec)
    }

    /// Applies one record read from the log; false when it is malformed.
    fn apply(&mut self, payload: &[u8]) -> bool {
        match record::decode(payload) {
            Some(record::Op::Put(uri, rec)) => {
                self.put(uri, rec);
            }
            Some(record::Op::Remove(uri)) => {
                self.remove(uri);
            }
            None => return false,
        }
        true
    }
}

/// The crawl store of one collection; see the module documentation.
pub struct CrawlStore {
    /// `crawl.log`, records queued and written.
    log: LogWriter,
    table: Table,
    opts: StoreOptions,
    recovery: Recovery,
}

/// Bytes a put record of `uri` and `rec` takes in the file, framing included.
fn encoded_len(uri: &[u8], rec: &UriRecord) -> u64 {
    let field = |f: &Option<Vec<u8>>| f.as_ref().map_or(0, |f| 4 + f.len());
    let owner = match &rec.state {
        UriState::Duplicate { owner } => field(owner),
        _ => 0,
    };
    (HEADER + 1 + 4 + uri.len() + 16 + 8 + 8 + 2 + 4 + 4 + 1 + owner + 1) as u64
        + field(&rec.etag) as u64
        + field(&rec.last_modified) as u64
}

impl CrawlStore {
    /// Opens (creating) the store in `dir` (normally [`store_dir`] of the collection's
    /// directory) with the default [`StoreOptions`].
    pub fn open(dir: &Path) -> Result<CrawlStore, StoreError> {
        CrawlStore::open_with(dir, StoreOptions::default())
    }

    /// Opens (creating) the store in `dir`: replays `crawl.log`, cutting a torn tail.
    pub fn open_with(dir: &Path, opts: StoreOptions) -> Result<CrawlStore, StoreError> {
        let started = Instant::now();
        let created = !dir.exists();
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        if created {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent).map_err(io_err(parent))?;
            }
        }
        let path = dir.join(LOG_FILE);
        // A compaction that did not reach its rename: the log itself is intact.
        let tmp = path.with_extension("tmp");
        if tmp.exists() {
            fs::remove_file(&tmp).map_err(io_err(&tmp))?;
        }
        let mut table = Table::default();
        // Read again only at the next opening (a compaction writes from the table): its pages
        // leave the cache once synced.
        let log_opts = Options::new(FORMAT).drop_synced();
        let (log, found) = LogWriter::open(&path, log_opts, |p| table.apply(p))?;
        let mut store = CrawlStore {
            log,
            table,
            opts,
            recovery: Recovery {
                records: found.records,
                truncated: found.torn_bytes,
                elapsed: Duration::ZERO,
            },
        };
        store.recovery.elapsed = started.elapsed();
        if store.recovery.records > 0 {
            info!(
                "{}: {} URIs from {} records in {:?}",
                store.path().display(),
                store.len(),
                store.recovery.records,
                store.recovery.elapsed
            );
        }
        Ok(store)
    }

    /// The record of `uri`.
    pub fn get(&self, uri: &[u8]) -> Option<&UriRecord> {
        self.table
            .entries
            .find(xxh3_64(uri), |e| &*e.uri == uri)
            .map(|e| &e.rec)
    }

    fn refuse(&self, what: &str, len: usize) -> StoreError {
        StoreError {
            path: self.path().to_path_buf(),
            error: format!("{what} of {len} bytes is over the {MAX_FIELD}-byte limit"),
            disk_full: false,
        }
    }

    /// Sets the record of `uri`; returns the one it replaces. Durable after the next
    /// [`CrawlStore::sync`]. A URI or field over [`MAX_FIELD`] bytes is refused.
    pub fn put(&mut self, uri: &[u8], rec: UriRecord) -> Result<Option<UriRecord>, StoreError> {
        if uri.len() > MAX_FIELD {
            return Err(self.refuse("URI", uri.len()));
        }
        if let Some((what, len)) = rec.oversized() {
            return Err(self.refuse(what, len));
        }
        self.log
            .append_with(|out| record::encode_put(out, uri, &rec));
        let prev = self.table.put(uri, rec);
        self.write_if_full()?;
        Ok(prev)
    }

    /// Forgets `uri` (FSCMT 3.1.5.15-16: delete site, delete URIs); returns its record.
    /// Durable after the next [`CrawlStore::sync`].
    pub fn remove(&mut self, uri: &[u8]) -> Result<Option<UriRecord>, StoreError> {
        let Some(prev) = self.table.remove(uri) else {
            return Ok(None);
        };
        self.log.append_with(|out| record::encode_remove(out, uri));
        self.write_if_full()?;
        Ok(Some(prev))
    }

    /// Writes the queued records once they reach [`WRITE_CHUNK`]. A full disk leaves them
    /// queued: the put or remove has taken effect and the next [`CrawlStore::sync`] reports the
    /// failure (and tries again), so the caller's operation is never cut in half by it.
    fn write_if_full(&mut self) -> Result<(), StoreError> {
        // Written without waiting for the disk; a failed write is cut off the file again and
        // the records stay queued.
        self.log.write_over(WRITE_CHUNK)?;
        Ok(())
    }

    /// Makes every put and remove so far durable (write, fdatasync); then compacts the file if
    /// it has grown past [`StoreOptions::compact_ratio`] times the live records.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        let mut c = self.sync_begin()?;
        c.iter_mut().for_each(Commit::run);
        self.sync_end(c)
    }

    /// [`CrawlStore::sync`] in two halves: writes the queued records and returns the commit to
    /// run ([`crate::recordlog::run_commits`]), settled by [`CrawlStore::sync_end`].
    pub fn sync_begin(&mut self) -> Result<Option<Commit>, StoreError> {
        Ok(self.log.commit_begin()?)
    }

    /// Settles the commit of [`CrawlStore::sync_begin`], then compacts as
    /// [`CrawlStore::sync`] does.
    pub fn sync_end(&mut self, c: Option<Commit>) -> Result<(), StoreError> {
        if let Some(c) = c {
            self.log.commit_end(c)?;
        }
        self.after_sync()
    }

    /// After a sync: compacts the file if it has grown past [`StoreOptions::compact_ratio`]
    /// times the live records.
    fn after_sync(&mut self) -> Result<(), StoreError> {
        let file_len = self.log.len();
        let live = MAGIC.len() as u64 + self.table.live_bytes;
        if file_len > self.opts.compact_min_bytes
            && file_len > live.saturating_mul(self.opts.compact_ratio)
        {
            match self.compact() {
                // Everything is durable already; the rewrite waits for room (next sync).
                Err(e) if e.disk_full => {
                    warn!("{}: not compacted: {}", self.path().display(), e.error)
                }
                r => r?,
            }
        }
        Ok(())
    }

    /// Rewrites the file with the live records only (also durable for every queued record):
    /// a temporary file, fdatasync, rename over `crawl.log`, directory fsync.
    pub fn compact(&mut self) -> Result<(), StoreError> {
        let started = Instant::now();
        let before = self.log_bytes();
        let table = &self.table;
        let written = self.log.compact(|c| {
            for e in table.entries.iter() {
                c.record(|out| record::encode_put(out, &e.uri, &e.rec))?;
            }
            Ok(())
        })?;
        info!(
            "{}: compacted {before} bytes to {written} ({} URIs) in {:?}",
            self.path().display(),
            self.len(),
            started.elapsed()
        );
        Ok(())
    }

    /// URIs in the store.
    pub fn len(&self) -> usize {
        self.table.entries.len()
    }

    /// True when the store holds no URI.
    pub fn is_empty(&self) -> bool {
        self.table.entries.is_empty()
    }

    /// Every URI and its record, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &UriRecord)> + '_ {
        self.table.entries.iter().map(|e| (&*e.uri, &e.rec))
    }

    /// The URIs whose record satisfies `keep`, sorted.
    fn uris_where(&self, mut keep: impl FnMut(&[u8], &UriRecord) -> bool) -> Vec<Vec<u8>> {
        let mut out: Vec<Vec<u8>> = self
            .iter()
            .filter(|(u, r)| keep(u, r))
            .map(|(u, _)| u.to_vec())
            .collect();
        out.sort_unstable();
        out
    }

    /// The URIs of crawl site `site` (FSCMT 3.1.5.15 delete site, 3.1.5.14 reprocess site),
    /// sorted. A site is named as `routing::crawl_site` names it: the lower-cased host, with
    /// `:port` when the port is not the scheme's default (`example.com`, `example.com:8080`).
    pub fn uris_of_site(&self, site: &str) -> Vec<Vec<u8>> {
        let site = site.to_ascii_lowercase();
        self.uris_where(|u, _| crawl_site(u).is_some_and(|s| s == site))
    }

    /// The URIs starting with `prefix` (reprocess site and prefix, FSCMT 2.2.3.15), sorted.
    pub fn uris_with_prefix(&self, prefix: &[u8]) -> Vec<Vec<u8>> {
        self.uris_where(|u, _| u.starts_with(prefix))
    }

    /// The URIs whose document has `checksum` (PPDUP_PROMOTE_REQ names a checksum whose owner
    /// is gone), sorted.
    pub fn uris_with_checksum(&self, checksum: &[u8; 16]) -> Vec<Vec<u8>> {
        self.uris_where(|_, r| &r.checksum == checksum)
    }

    /// The stored URIs (state [`UriState::Stored`]) last crawled before refresh cycle `cycle`,
    /// sorted: at the end of a refresh cycle, the documents that were not seen again (deletion
    /// detection). Other states are found with [`CrawlStore::iter`].
    pub fn stale(&self, cycle: u32) -> Vec<Vec<u8>> {
        self.uris_where(|_, r| r.state == UriState::Stored && r.cycle < cycle)
    }

    /// What opening the store found.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Bytes of the log file, written and queued.
    pub fn log_bytes(&self) -> u64 {
        self.log.len() + self.log.pending_bytes() as u64
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        self.log.path()
    }
}

impl Drop for CrawlStore {
    /// A clean close makes everything durable; a failure is logged (nothing else can be done
    /// with it here).
    fn drop(&mut self) {
        if let Err(e) = self.log.commit() {
            warn!("closing the crawl store: {e}");
        }
    }
}

#[cfg(test)]
mod tests;
