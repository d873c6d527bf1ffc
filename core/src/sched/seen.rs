//! The URIs a node scheduler has queued in the current refresh cycle, so that a link found on
//! many pages is crawled once (URI skip code `ic`, MS-FSCADM 2.2.3.1).
//!
//! In memory a set of 64-bit xxh3 hashes of the URI bytes; on disk an append-only file of the
//! same hashes (8 bytes each, little-endian), flushed and synced with the crawl queue, replayed
//! on open (a torn last record is ignored). A new refresh cycle empties it. Two URIs colliding
//! in 64 bits is a 1-in-2^64 event per pair: at 10^9 URIs the chance of any collision is about
//! 3%, and the cost of one is one URI not crawled in one cycle.

use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use xxhash_rust::xxh3::xxh3_64;

use super::collections::{io_err, StoreError};
use crate::diskfull::Appender;

/// The keys are xxh3 hashes already: hashing them again would only cost time.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

type Hashes = HashSet<u64, BuildHasherDefault<Identity>>;

/// The seen-URI set of one collection.
pub struct SeenSet {
    path: PathBuf,
    set: Hashes,
    /// The file: a record that finds no room (a full disk) waits queued in memory, in order,
    /// until a sync finds room.
    file: Appender,
    dirty: bool,
}

impl SeenSet {
    /// Opens (or creates) the set stored at `path`.
    pub fn open(path: &Path) -> Result<SeenSet, StoreError> {
        let mut set = Hashes::default();
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io_err(path))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io_err(path))?;
        let whole = bytes.len() / 8 * 8;
        for c in bytes[..whole].chunks_exact(8) {
            set.insert(u64::from_le_bytes(c.try_into().expect("8-byte chunk")));
        }
        if whole != bytes.len() {
            // A torn record from a crash: cut it so later appends stay aligned.
            file.set_len(whole as u64).map_err(io_err(path))?;
        }
        Ok(SeenSet {
            path: path.to_path_buf(),
            set,
            file: Appender::new(file, whole as u64, 64 << 10),
            dirty: false,
        })
    }

    /// Records `uri`; false when it was already there.
    pub fn insert(&mut self, uri: &[u8]) -> Result<bool, StoreError> {
        let h = xxh3_64(uri);
        if !self.set.insert(h) {
            return Ok(false);
        }
        self.file
            .push(&h.to_le_bytes())
            .map_err(io_err(&self.path))?;
        self.dirty = true;
        Ok(true)
    }

    /// True when `uri` was recorded.
    pub fn contains(&self, uri: &[u8]) -> bool {
        self.set.contains(&xxh3_64(uri))
    }

    /// URIs recorded.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Writes and syncs what was recorded since the last sync.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        if !self.dirty {
            return Ok(());
        }
        self.file.sync().map_err(io_err(&self.path))?;
        self.dirty = false;
        Ok(())
    }

    /// Forgets everything (a new refresh cycle).
    pub fn clear(&mut self) -> Result<(), StoreError> {
        self.file.clear().map_err(io_err(&self.path))?;
        self.set.clear();
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        drop(f);
        let mut s = SeenSet::open(&p).unwrap();
        assert_eq!(s.len(), 2);
        assert!(s.contains(b"http://b/"));
        assert!(s.insert(b"http://c/").unwrap());
        s.sync().unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 24);
        s.clear().unwrap();
        assert!(s.is_empty());
        drop(s);
        assert!(SeenSet::open(&p).unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
