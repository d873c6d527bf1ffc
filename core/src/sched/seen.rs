//! The URIs a node scheduler has queued in the current refresh cycle, so that a link found on
//! many pages is crawled once (URI skip code `ic`, MS-FSCADM 2.2.3.1).
//!
//! In memory a set of 64-bit xxh3 hashes of the URI bytes (`seen_table.rs`); on disk a
//! [`crate::recordlog`] log (magic `CFSEEN02`), each record the hashes (8 bytes each,
//! little-endian) inserted between two syncs, synced with the crawl queue and replayed on open
//! (a torn or damaged record ends it and is cut). A new refresh cycle empties it.
//!
//! The first format was the bare hashes, unchecked, without a header. A file that does not start
//! with the magic is of that format: opening reads it (a torn last hash ignored) and replaces it
//! with the same hashes in the current format (temporary file, fdatasync, rename), so a crash
//! during the migration leaves one or the other. (An old file whose first hash happens to spell
//! the magic is a 1-in-2^64 event.) Two URIs colliding
//! in 64 bits is a 1-in-2^64 event per pair: at 10^9 URIs the chance of any collision is about
//! 3%, and the cost of one is one URI not crawled in one cycle.

use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

use super::collections::{io_err, StoreError};
use super::seen_table::Hashes;
use crate::recordlog::{
    begin, earlier_format, seal, write_atomic, Commit, Format, LogWriter, Options,
};

/// The seen set's file: a magic saying the format's version, then records of hashes.
const FORMAT: Format = Format {
    magic: b"CFSEEN02",
    name: "seen-URI set",
    max_record: 1 << 20,
};
/// Bytes of hashes queued that are written (without waiting for the disk) as one record.
const WRITE_CHUNK: usize = 64 << 10;

/// The seen-URI set of one collection.
pub struct SeenSet {
    set: Hashes,
    /// The file: a record that finds no room (a full disk) waits queued in memory, in order,
    /// until a write finds room.
    log: LogWriter,
    /// Hashes inserted since the last record, little-endian.
    batch: Vec<u8>,
}

/// Replaces a file of the first format (bare hashes) at `path` with the same hashes in the
/// current one; the torn last hash of a crash is dropped.
fn migrate(path: &Path, old: &[u8]) -> Result<(), StoreError> {
    let whole = old.len() / 8 * 8;
    let mut out = FORMAT.magic.to_vec();
    for chunk in old[..whole].chunks(WRITE_CHUNK) {
        let start = begin(&mut out);
        out.extend_from_slice(chunk);
        seal(&mut out, start);
    }
    write_atomic(path, &out).map_err(io_err(path))?;
    log::info!(
        "{}: seen-URI set of {} URIs moved to the checked format",
        path.display(),
        whole / 8
    );
    Ok(())
}

impl SeenSet {
    /// Opens (or creates) the set stored at `path`; a file of the first format is migrated.
    pub fn open(path: &Path) -> Result<SeenSet, StoreError> {
        if let Some(old) = earlier_format(path, &FORMAT)? {
            migrate(path, &old)?;
        }
        let mut set = Hashes::default();
        // Read again only at the next opening: its pages leave the cache once synced.
        let (log, _) = LogWriter::open(path, Options::new(FORMAT).drop_synced(), |p| {
            if p.len() % 8 != 0 {
                return false;
            }
            for c in p.chunks_exact(8) {
                set.insert(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
            }
            true
        })?;
        Ok(SeenSet {
            set,
            log,
            batch: Vec::new(),
        })
    }

    /// Asks the CPU to bring the place of `uri` in the set into the cache, so that an insert
    /// or lookup of it soon after does not wait for memory: a caller with several URIs to ask
    /// for prefetches them all first. Changes nothing the set holds.
    #[inline]
    pub fn prefetch(&self, uri: &[u8]) {
        self.set.prefetch(xxh3_64(uri));
    }

    /// Records `uri`; false when it was already there.
    pub fn insert(&mut self, uri: &[u8]) -> Result<bool, StoreError> {
        let h = xxh3_64(uri);
        if !self.set.insert(h) {
            return Ok(false);
        }
        self.batch.extend_from_slice(&h.to_le_bytes());
        if self.batch.len() >= WRITE_CHUNK {
            self.queue_batch();
            self.log.write_over(WRITE_CHUNK)?;
        }
        Ok(true)
    }

    /// Queues the hashes inserted since the last record as one record.
    fn queue_batch(&mut self) {
        if !self.batch.is_empty() {
            self.log.append(&self.batch);
            self.batch.clear();
        }
    }

    /// True when `uri` was recorded.
    pub fn contains(&self, uri: &[u8]) -> bool {
        self.set.contains(xxh3_64(uri))
    }

    /// URIs recorded.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Writes what was recorded since the last write to the file (no fdatasync): from there it
    /// outlives the process, as the crawl queue's pushes it goes with do at once.
    pub fn write(&mut self) -> Result<(), StoreError> {
        self.queue_batch();
        self.log.write_pending()?;
        Ok(())
    }

    /// Writes and syncs what was recorded since the last sync.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        let mut c = self.sync_begin()?;
        c.iter_mut().for_each(Commit::run);
        self.sync_end(c)
    }

    /// [`SeenSet::sync`] in two halves: writes what was recorded and returns the commit to
    /// run ([`crate::recordlog::run_commits`]), settled by [`SeenSet::sync_end`].
    pub fn sync_begin(&mut self) -> Result<Option<Commit>, StoreError> {
        self.queue_batch();
        Ok(self.log.commit_begin()?)
    }

    /// Settles the commit of [`SeenSet::sync_begin`].
    pub fn sync_end(&mut self, c: Option<Commit>) -> Result<(), StoreError> {
        if let Some(c) = c {
            self.log.commit_end(c)?;
        }
        Ok(())
    }

    /// Forgets everything (a new refresh cycle): the file is cut back to an empty log, which
    /// needs no room.
    pub fn clear(&mut self) -> Result<(), StoreError> {
        self.batch.clear();
        self.log.clear()?;
        self.set.clear();
        Ok(())
    }
}

impl Drop for SeenSet {
    /// A clean close writes what was recorded (a failure is logged: nothing else can be done
    /// with it here).
    fn drop(&mut self) {
        self.queue_batch();
        if let Err(e) = self.log.write_pending() {
            log::warn!("closing the seen-URI set: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    use std::fs::OpenOptions;

    /// A set of the first format as its code wrote it: `http://a/` and `http://b/` (the
    /// xxh3-64 of each, little-endian), then three bytes of a hash torn by a crash.
    const FIRST_FORMAT: [u8; 19] = [
        0x36, 0xd5, 0x07, 0x03, 0x48, 0xff, 0xcb, 0x28, 0x93, 0xd8, 0x18, 0xbf, 0x75, 0xfa, 0xe6,
        0xa6, 1, 2, 3,
    ];

    #[test]
    fn a_set_of_the_first_format_opens_and_is_migrated() {
        let dir = tempfile::TempDir::with_prefix("cf-seen-old-").unwrap();
        let p = dir.path().join("seen");
        std::fs::write(&p, FIRST_FORMAT).unwrap();
        let mut s = SeenSet::open(&p).unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.contains(b"http://a/") && s.contains(b"http://b/"));
        let migrated = std::fs::read(&p).unwrap();
        assert!(migrated.starts_with(FORMAT.magic), "{migrated:?}");
        assert!(!dir.path().join("seen.tmp").exists());
        assert!(s.insert(b"http://c/").unwrap());
        s.sync().unwrap();
        drop(s);
        let s = SeenSet::open(&p).unwrap();
        assert_eq!(s.len(), 3);
        assert!(s.contains(b"http://a/") && s.contains(b"http://c/"));
        // An empty file of the first format is an empty set.
        std::fs::write(&p, b"").unwrap();
        assert!(SeenSet::open(&p).unwrap().is_empty());
        assert!(std::fs::read(&p).unwrap().starts_with(FORMAT.magic));
    }

    #[test]
    fn survives_reopen_and_a_torn_tail() {
        let dir = std::env::temp_dir().join(format!("cf-seen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("seen");
        let mut s = SeenSet::open(&p).unwrap();
        assert!(s.insert(b"http://a/").unwrap());
        assert!(!s.insert(b"http://a/").unwrap());
        assert!(s.insert(b"http://b/").unwrap());
        s.sync().unwrap();
        drop(s);
        // A crash in the middle of a record.
        let synced = std::fs::metadata(&p).unwrap().len();
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        drop(f);
        let mut s = SeenSet::open(&p).unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.contains(b"http://b/"));
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            synced,
            "torn tail cut"
        );
        assert!(s.insert(b"http://c/").unwrap());
        s.sync().unwrap();
        // The magic, one record of two hashes, one of one.
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 8 + (8 + 16) + (8 + 8));
        s.clear().unwrap();
        assert!(s.is_empty());
        drop(s);
        assert!(SeenSet::open(&p).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
