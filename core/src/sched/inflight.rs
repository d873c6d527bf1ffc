//! Crawl queue entries a node scheduler has taken from its queue and not finished: the site
//! manager's ready and waiting entries and the crawl engine's, which live in memory. Each is
//! journaled when taken (`+`) and when finished (`-`); a restart puts what was taken and not
//! finished back at the front of the crawl queue, so a SIGKILL loses no entry. An entry whose
//! `-` was not synced before the kill is crawled again: the re-fetch window is the sync
//! interval (100 ms by default).
//!
//! Records: `+` seq (u64 LE) len (u32 LE) entry bytes, or `-` seq. A torn last record is
//! ignored. The file is rewritten with only the outstanding entries when it grows past
//! [`COMPACT_BYTES`].

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::collections::{io_err, StoreError};
use crate::diskfull::Appender;

/// Journal size that triggers a rewrite.
pub const COMPACT_BYTES: u64 = 32 << 20;
/// Bytes the journal allocates ahead at a time ([`Inflight::reserve`]).
const RESERVE_CHUNK: u64 = 1 << 20;

/// The journal of one collection.
pub struct Inflight {
    path: PathBuf,
    /// The journal file: a record that finds no room (a full disk) waits queued in memory, in
    /// order, until a sync finds room; nothing half-written stays in the file.
    file: Appender,
    outstanding: BTreeMap<u64, Vec<u8>>,
    next: u64,
    dirty: bool,
}

fn replay(bytes: &[u8]) -> BTreeMap<u64, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i + 9 <= bytes.len() {
        let seq = u64::from_le_bytes(bytes[i + 1..i + 9].try_into().expect("8 bytes"));
        match bytes[i] {
            b'+' => {
                let Some(len) = bytes.get(i + 9..i + 13) else {
                    break;
                };
                let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
                let Some(rec) = bytes.get(i + 13..i + 13 + len) else {
                    break;
                };
                out.insert(seq, rec.to_vec());
                i += 13 + len;
            }
            b'-' => {
                out.remove(&seq);
                i += 9;
            }
            _ => break,
        }
    }
    out
}

impl Inflight {
    /// Opens the journal at `path` and returns the entries taken and not finished by the last
    /// run, oldest first. The caller puts them back in its queue, syncs it, then calls
    /// [`Inflight::reset`].
    pub fn open(path: &Path) -> Result<(Inflight, Vec<Vec<u8>>), StoreError> {
        let mut bytes = Vec::new();
        if let Ok(mut f) = File::open(path) {
            f.read_to_end(&mut bytes).map_err(io_err(path))?;
        }
        let pending: Vec<Vec<u8>> = replay(&bytes).into_values().collect();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_err(path))?;
        Ok((
            Inflight {
                path: path.to_path_buf(),
                file: Appender::new(file, bytes.len() as u64, 256 << 10),
                outstanding: BTreeMap::new(),
                next: 1,
                dirty: false,
            },
            pending,
        ))
    }

    /// Forgets the last run's entries (they are back in the queue).
    pub fn reset(&mut self) -> Result<(), StoreError> {
        self.rewrite()
    }

    /// Journals an entry taken from the queue; returns its sequence number.
    pub fn add(&mut self, rec: &[u8]) -> Result<u64, StoreError> {
        let seq = self.next;
        self.next += 1;
        let len = u32::try_from(rec.len()).map_err(|_| StoreError {
            path: self.path.clone(),
            error: "entry over 4 GiB".into(),
            disk_full: false,
        })?;
        // One record, whole: queued or written together, never a part of it.
        let mut r = Vec::with_capacity(13 + rec.len());
        r.push(b'+');
        r.extend_from_slice(&seq.to_le_bytes());
        r.extend_from_slice(&len.to_le_bytes());
        r.extend_from_slice(rec);
        self.file.push(&r).map_err(io_err(&self.path))?;
        self.outstanding.insert(seq, rec.to_vec());
        self.dirty = true;
        Ok(seq)
    }

    /// Makes sure the journal can take an entry of up to `need` bytes without room from the
    /// file system (allocating ahead): call before taking the entry from its queue, whose pop
    /// outlives the process at once while the journal record waits for the next write. A full
    /// disk fails here, with the entry still in its queue.
    pub fn reserve(&mut self, need: u64) -> Result<(), StoreError> {
        self.file
            .reserve(13 + need, RESERVE_CHUNK)
            .map_err(io_err(&self.path))
    }

    /// Writes the queued records to the file (no fdatasync): from there they outlive the
    /// process.
    pub fn write(&mut self) -> Result<(), StoreError> {
        self.file.write().map_err(io_err(&self.path))
    }

    /// Journals that entry `seq` is finished (crawled, skipped, or back in a queue).
    pub fn done(&mut self, seq: u64) -> Result<(), StoreError> {
        if self.outstanding.remove(&seq).is_none() {
            return Ok(());
        }
        let mut r = [b'-'; 9];
        r[1..].copy_from_slice(&seq.to_le_bytes());
        self.file.push(&r).map_err(io_err(&self.path))?;
        self.dirty = true;
        Ok(())
    }

    /// Entries taken and not finished.
    pub fn len(&self) -> usize {
        self.outstanding.len()
    }

    /// True when every entry taken is finished.
    pub fn is_empty(&self) -> bool {
        self.outstanding.is_empty()
    }

    /// Makes the journal durable; rewrites it when it has grown large.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        if self.file.len() > COMPACT_BYTES {
            match self.rewrite() {
                // No room for the new file: appending may still find some.
                Err(e) if e.disk_full => {}
                r => return r,
            }
        }
        if !self.dirty {
            return Ok(());
        }
        self.file.sync().map_err(io_err(&self.path))?;
        self.dirty = false;
        Ok(())
    }

    /// Writes only the outstanding entries to a new file and renames it over the journal.
    fn rewrite(&mut self) -> Result<(), StoreError> {
        let tmp = self.path.with_extension("new");
        let mut buf = Vec::new();
        for (seq, rec) in &self.outstanding {
            buf.push(b'+');
            buf.extend_from_slice(&seq.to_le_bytes());
            buf.extend_from_slice(&(rec.len() as u32).to_le_bytes());
            buf.extend_from_slice(rec);
        }
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        if let Err(e) = f.write_all(&buf).and_then(|()| f.sync_data()) {
            // A half-written copy (a full disk) is no use and takes room.
            let _ = fs::remove_file(&tmp);
            return Err(io_err(&tmp)(e));
        }
        fs::rename(&tmp, &self.path).map_err(io_err(&self.path))?;
        if let Some(dir) = self.path.parent() {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        let file = OpenOptions::new()
            .append(true)
            .open(&self.path)
            .map_err(io_err(&self.path))?;
        self.file = Appender::new(file, buf.len() as u64, 256 << 10);
        self.dirty = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_entries_come_back_and_finished_ones_do_not() {
        let dir = std::env::temp_dir().join(format!("cf-inflight-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("inflight");
        let (mut j, pending) = Inflight::open(&p).unwrap();
        assert!(pending.is_empty());
        let a = j.add(b"a").unwrap();
        let _b = j.add(b"bb").unwrap();
        let c = j.add(b"ccc").unwrap();
        j.done(a).unwrap();
        j.sync().unwrap();
        j.done(c).unwrap(); // not synced: may or may not survive; here the drop flushes it
        drop(j);
        let mut bytes = fs::read(&p).unwrap();
        bytes.extend_from_slice(b"+\x09\0\0"); // a torn record
        fs::write(&p, &bytes).unwrap();
        let (mut j, pending) = Inflight::open(&p).unwrap();
        assert_eq!(pending, vec![b"bb".to_vec()]);
        j.reset().unwrap();
        drop(j);
        let (_, pending) = Inflight::open(&p).unwrap();
        assert!(pending.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_rewrite_keeps_only_the_outstanding() {
        let dir = std::env::temp_dir().join(format!("cf-inflight2-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("inflight");
        let (mut j, _) = Inflight::open(&p).unwrap();
        let keep = j.add(b"keep").unwrap();
        for _ in 0..1000 {
            let s = j.add(&[7u8; 100]).unwrap();
            j.done(s).unwrap();
        }
        j.rewrite().unwrap();
        assert_eq!(fs::metadata(&p).unwrap().len(), 13 + 4);
        j.done(keep).unwrap();
        j.sync().unwrap();
        drop(j);
        let (_, pending) = Inflight::open(&p).unwrap();
        assert!(pending.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
