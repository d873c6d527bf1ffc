//! The content index of one content collection on a distributor (docs/distributor.md
//! "Feeding sessions"): a durable, append-only log of the operations fed to it, written through
//! the project's one record log ([`crate::recordlog::LogWriter`]: group commit, torn-tail cut,
//! compaction), and in memory the latest version of every document id, whether it is live or
//! removed, and where its record sits in the log.
//!
//! Applying an op is idempotent: an op whose version (time, seq) is not newer than the one kept
//! for its document writes nothing ([`Applied::Kept`]), so a client's resend after a failover is
//! applied once and an old copy never overwrites a newer one. A remove writes a tombstone, kept
//! through compaction, so that an older add sent late cannot bring a removed document back.
//!
//! Only the distributor writes the log, holding its data directory's lock; [`reader`] reads it
//! without the lock while the distributor runs (a consistent prefix: it stops at a torn or
//! half-written tail, as opening does).

pub mod reader;
pub mod record;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::recordlog::{Format, LogError, LogWriter, Options, Recovered, HEADER};

pub use record::{Head, Op, OpKind, Version};

/// The directory of the index logs in a distributor's data directory.
pub const INDEX_DIR: &str = "index";

/// The index log's format: its magic, and the largest record (one op of a 16 MiB request).
pub const FORMAT: Format = Format {
    magic: b"CFINDEX1",
    name: "content index",
    max_record: 17 << 20,
};

/// Compaction runs when the log is past this many bytes and more than half of it is dead.
pub const COMPACT_MIN_BYTES: u64 = 64 << 20;

/// Blocks reserved ahead of the records at a time ([`LogWriter::reserve`]): a full disk fails
/// an op before it is applied.
const RESERVE_CHUNK: u64 = 1 << 20;

/// The file of `collection`'s index log under a data directory: `index/<name>.log`, the name
/// with every byte outside `[A-Za-z0-9_-]` (and a leading `.`) written `%XX`.
pub fn log_path(data_dir: &Path, collection: &str) -> PathBuf {
    let mut name = String::with_capacity(collection.len() + 4);
    for (i, b) in collection.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            name.push(b as char);
        } else {
            name.push_str(&format!("%{b:02X}"));
        }
    }
    name.push_str(".log");
    data_dir.join(INDEX_DIR).join(name)
}

/// What the index keeps of a document id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The latest version applied.
    pub version: Version,
    /// False when that version is a remove.
    pub live: bool,
    /// Offset of its record (header included) in the log.
    pub at: u64,
    /// Bytes of its record's payload.
    pub len: u32,
}

/// What applying an op did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// Its record is queued: durable after the next [`Index::commit`].
    Written,
    /// A version at least as new is kept: nothing written (durable once what was queued before
    /// is committed).
    Kept,
}

/// Told of every op the index applies (the full-text index hooks in here).
pub trait ApplyHook: Send {
    /// `op` was applied; its record ends at `end` in the log. The record is durable after the
    /// next commit; a hook that keeps its own state records `end` to know where to resume
    /// ([`reader::scan`] from there).
    fn applied(&mut self, op: &Op, end: u64);

    /// The log was compacted into a new file of `len` bytes: earlier positions are void.
    fn compacted(&mut self, len: u64) {
        let _ = len;
    }
}

/// The content index of one collection.
pub struct Index {
    writer: LogWriter,
    docs: HashMap<String, Entry>,
    live: u64,
    /// Bytes of the records the map points at (the rest of the log is dead).
    kept_bytes: u64,
    compact_min: u64,
    hook: Option<Box<dyn ApplyHook>>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("path", &self.writer.path())
            .field("docs", &self.docs.len())
            .field("live", &self.live)
            .finish()
    }
}

impl Index {
    /// Opens (creating it and its directory if needed) the index of `collection` under the
    /// data directory `data_dir`, whose lock the caller holds: rebuilds the map from the log
    /// and cuts a torn tail.
    pub fn open(data_dir: &Path, collection: &str) -> Result<(Index, Recovered), LogError> {
        let path = log_path(data_dir, collection);
        Index::open_path(&path)
    }

    /// Opens the index log at `path`.
    pub fn open_path(path: &Path) -> Result<(Index, Recovered), LogError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| LogError::new(dir, "create", e))?;
        }
        let mut docs: HashMap<String, Entry> = HashMap::new();
        let mut at = FORMAT.magic.len() as u64;
        let (writer, rec) = LogWriter::open(path, Options::new(FORMAT), |payload| {
            let Some(op) = Op::decode(payload) else {
                return false;
            };
            let entry = Entry {
                version: op.version(),
                live: op.is_live(),
                at,
                len: payload.len() as u32,
            };
            at += (HEADER + payload.len()) as u64;
            match docs.get_mut(&op.doc) {
                Some(e) if e.version >= entry.version => {}
                Some(e) => *e = entry,
                None => {
                    docs.insert(op.doc, entry);
                }
            }
            true
        })?;
        let live = docs.values().filter(|e| e.live).count() as u64;
        let kept_bytes = docs.values().map(|e| HEADER as u64 + e.len as u64).sum();
        let index = Index {
            writer,
            docs,
            live,
            kept_bytes,
            compact_min: COMPACT_MIN_BYTES,
            hook: None,
        };
        Ok((index, rec))
    }

    /// Sets the hook told of every applied op.
    pub fn set_hook(&mut self, hook: Box<dyn ApplyHook>) {
        self.hook = Some(hook);
    }

    /// Sets the size past which a mostly dead log is compacted (tests use a small one).
    pub fn set_compact_min(&mut self, bytes: u64) {
        self.compact_min = bytes;
    }

    /// Applies `op`: queues its record when its version is newer than the one kept for its
    /// document. An error (a full disk: [`LogError::is_no_space`]) leaves the index as it was.
    pub fn apply(&mut self, op: &Op) -> Result<Applied, LogError> {
        if let Some(e) = self.docs.get(&op.doc) {
            if e.version >= op.version() {
                return Ok(Applied::Kept);
            }
        }
        let len = op.encoded_len();
        self.writer.reserve((HEADER + len) as u64, RESERVE_CHUNK)?;
        let at = self.writer.len() + self.writer.pending_bytes() as u64;
        self.writer.append_with(|out| op.encode(out));
        let entry = Entry {
            version: op.version(),
            live: op.is_live(),
            at,
            len: len as u32,
        };
        let size = (HEADER + len) as u64;
        self.kept_bytes += size;
        let old = self.docs.insert(op.doc.clone(), entry);
        if let Some(old) = old {
            self.kept_bytes -= HEADER as u64 + old.len as u64;
            self.live -= old.live as u64;
        }
        self.live += entry.live as u64;
        if let Some(h) = &mut self.hook {
            h.applied(op, at + size);
        }
        Ok(Applied::Written)
    }

    /// Writes the queued records and waits until they are on disk; only then may the ops
    /// applied since the last commit (written or kept) be acknowledged. On an error the records
    /// stay queued ([`LogWriter::commit`]) and the next commit writes them once.
    pub fn commit(&mut self) -> Result<(), LogError> {
        self.writer.commit()
    }

    /// True when records wait for a commit.
    pub fn has_pending(&self) -> bool {
        self.writer.has_pending() || self.writer.committed_len() != self.writer.len()
    }

    /// Live documents.
    pub fn live(&self) -> u64 {
        self.live
    }

    /// Document ids known (live or removed).
    pub fn docs(&self) -> usize {
        self.docs.len()
    }

    /// What is kept of `doc`.
    pub fn get(&self, doc: &str) -> Option<Entry> {
        self.docs.get(doc).copied()
    }

    /// Bytes of the log written so far.
    pub fn log_len(&self) -> u64 {
        self.writer.len()
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        self.writer.path()
    }

    /// True when the log is past the compaction size and more than half of it is dead.
    pub fn wants_compaction(&self) -> bool {
        let len = self.writer.len() + self.writer.pending_bytes() as u64;
        len >= self.compact_min && self.kept_bytes * 2 < len
    }

    /// Compacts when [`Index::wants_compaction`]; returns whether it did.
    pub fn maybe_compact(&mut self) -> Result<bool, LogError> {
        if !self.wants_compaction() {
            return Ok(false);
        }
        self.compact()?;
        Ok(true)
    }

    /// Rewrites the log with the latest record of every document id, live or removed (the
    /// tombstones stay: they keep an older add from coming back), in log order; a crash leaves
    /// the old or the new file ([`LogWriter::compact`]). What is queued is committed first.
    pub fn compact(&mut self) -> Result<u64, LogError> {
        self.commit()?;
        let path = self.writer.path().to_path_buf();
        let old = File::open(&path).map_err(|e| LogError::new(&path, "open", e))?;
        let mut order: Vec<(u64, u32, String)> = self
            .docs
            .iter()
            .map(|(d, e)| (e.at, e.len, d.clone()))
            .collect();
        order.sort_unstable();
        let mut moved: Vec<(String, u64)> = Vec::with_capacity(order.len());
        let len = self.writer.compact(|c| {
            let mut at = FORMAT.magic.len() as u64;
            let mut buf = Vec::new();
            for (from, len, doc) in order {
                buf.resize(len as usize, 0);
                old.read_exact_at(&mut buf, from + HEADER as u64)
                    .map_err(|e| LogError::new(&path, "read", e))?;
                c.record(|out| out.extend_from_slice(&buf))?;
                moved.push((doc, at));
                at += HEADER as u64 + len as u64;
            }
            Ok(())
        })?;
        for (doc, at) in moved {
            if let Some(e) = self.docs.get_mut(&doc) {
                e.at = at;
            }
        }
        if let Some(h) = &mut self.hook {
            h.compacted(len);
        }
        Ok(len)
    }

    /// Reads the record of `doc`'s kept version (committed records only).
    pub fn read(&self, doc: &str) -> Result<Option<Op>, LogError> {
        let Some(e) = self.docs.get(doc) else {
            return Ok(None);
        };
        let path = self.writer.path();
        let f = File::open(path).map_err(|err| LogError::new(path, "open", err))?;
        let mut buf = vec![0u8; e.len as usize];
        f.read_exact_at(&mut buf, e.at + HEADER as u64)
            .map_err(|err| LogError::new(path, "read", err))?;
        Ok(Op::decode(&buf))
    }
}
