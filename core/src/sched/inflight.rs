//! Crawl queue entries a node scheduler has taken from its queue and not finished: the site
//! manager's ready and waiting entries and the crawl engine's, which live in memory. Each is
//! journaled when taken (`+`) and when finished (`-`); a restart puts what was taken and not
//! finished back at the front of the crawl queue, so a SIGKILL loses no entry: the queue's
//! pop of an entry is published only after its `+` is written (no fdatasync: a killed process's
//! writes stay in the page cache), once per dispatch (`node_sites.rs`). An entry whose
//! `-` was not synced before the kill is crawled again: the re-fetch window is the sync
//! interval (100 ms by default).
//!
//! The journal is a [`crate::recordlog`] log (magic `CFINFL02`) of checked records, each `+` seq
//! (u64 LE) entry bytes, `-` seq, or `P` generation (u64 LE) seq... (u64 LE each): entries put
//! back in the crawl queue ([`Inflight::put_back`]), finished only if the queue's live cursor
//! reached that generation, the publication of their pushes. A torn or damaged record ends it
//! and is cut.
//!
//! A put-back's record goes to the file before the queue publishes the pushes: a kill before
//! or during its write, or between the write and the publication, leaves the entries
//! outstanding here and not in the queue (the restart queues them again once); a kill after
//! the publication finds them queued and finished. Written after the publication, as `-`
//! records, a SIGKILL that cut the write of a large put-back (Linux stops a regular-file write
//! between pages at a fatal signal) left the tail of the batch both queued and outstanding:
//! thousands of pages fetched twice after the restart (docs/performance.md, "The third window,
//! narrowed"). The file is
//! rewritten with only the outstanding entries (temporary file, fdatasync, rename) when it grows
//! past [`COMPACT_BYTES`]; their records are read back from the file for it, so the journal
//! keeps only each outstanding entry's length in memory (the entry itself holds the record).
//!
//! The first format was unchecked and had no header: `+` seq len (u32 LE) entry, or `-` seq,
//! a torn last record ignored. A file that does not start with the magic is of that format:
//! opening reads it and replaces it with its outstanding entries in the current format, so a
//! crash during the migration leaves one or the other.

use std::collections::BTreeMap;
use std::path::Path;

use super::collections::{io_err, StoreError};
use crate::recordlog::{
    begin, earlier_format, read_log, seal, write_atomic, Commit, Cur, Format, LogError, LogWriter,
    Options, HEADER,
};

/// Journal size that triggers a rewrite.
pub const COMPACT_BYTES: u64 = 32 << 20;
/// The journal's file: a magic saying the format's version, then records.
const FORMAT: Format = Format {
    magic: b"CFINFL02",
    name: "in-flight journal",
    max_record: usize::MAX,
};
/// Bytes of records queued that are written (without waiting for the disk) at once.
const WRITE_CHUNK: usize = 256 << 10;
/// Bytes the journal allocates ahead at a time ([`Inflight::reserve`]).
const RESERVE_CHUNK: u64 = 1 << 20;

/// The journal of one collection.
pub struct Inflight {
    /// The journal file: a record that finds no room (a full disk) waits queued in memory, in
    /// order, until a write finds room; nothing half-written stays in the file.
    log: LogWriter,
    /// The entries taken and not finished: sequence number -> length of the record. The
    /// records themselves are the caller's (the site manager's and the crawl engine's
    /// entries); a rewrite reads them back from the file ([`Inflight::rewrite`]), so that an
    /// entry in memory holds its record once, not twice.
    outstanding: BTreeMap<u64, u32>,
    /// Bytes of the records of `outstanding`.
    bytes: u64,
    next: u64,
    /// The journal's length past which the next sync rewrites it: [`COMPACT_BYTES`], or
    /// [`COMPACT_BYTES`] beyond where a rewrite failed (a damaged record in the file): the
    /// journal goes on appending meanwhile, and a rewrite is not tried at every sync.
    rewrite_at: u64,
}

fn taken_payload(out: &mut Vec<u8>, seq: u64, rec: &[u8]) {
    out.push(b'+');
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(rec);
}

fn done_payload(out: &mut Vec<u8>, seq: u64) {
    out.push(b'-');
    out.extend_from_slice(&seq.to_le_bytes());
}

fn put_back_payload(out: &mut Vec<u8>, generation: u64, seqs: &[u64]) {
    out.reserve(9 + 8 * seqs.len());
    out.push(b'P');
    out.extend_from_slice(&generation.to_le_bytes());
    for s in seqs {
        out.extend_from_slice(&s.to_le_bytes());
    }
}

/// Applies one record of the current format, a put-back's only if `published` (the queue's
/// generation at the restart) reached its generation; false when it is malformed.
fn apply(map: &mut BTreeMap<u64, Vec<u8>>, payload: &[u8], published: u64) -> bool {
    let mut c = Cur(payload);
    let (Some(op), Some(first)) = (c.u8(), c.u64()) else {
        return false;
    };
    match op {
        b'+' => {
            map.insert(first, c.0.to_vec());
        }
        b'-' if c.is_empty() => {
            map.remove(&first);
        }
        b'P' if c.0.len() % 8 == 0 => {
            if first <= published {
                while let Some(seq) = c.u64() {
                    map.remove(&seq);
                }
            }
        }
        _ => return false,
    }
    true
}

/// The outstanding entries of a journal of the first format.
fn replay_first_format(bytes: &[u8]) -> BTreeMap<u64, Vec<u8>> {
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

/// Replaces a journal of the first format at `path` with its outstanding entries in the
/// current one.
fn migrate(path: &Path, old: &[u8]) -> Result<(), StoreError> {
    let entries = replay_first_format(old);
    let mut out = FORMAT.magic.to_vec();
    for (seq, rec) in &entries {
        let start = begin(&mut out);
        taken_payload(&mut out, *seq, rec);
        seal(&mut out, start);
    }
    write_atomic(path, &out).map_err(io_err(path))?;
    log::info!(
        "{}: in-flight journal of {} entries moved to the checked format",
        path.display(),
        entries.len()
    );
    Ok(())
}

impl Inflight {
    /// Opens the journal at `path` and returns the entries taken and not finished by the last
    /// run, oldest first; `published` is the crawl queue's generation at its open
    /// ([`crate::queue::CrawlQueue::resumed_generation`]), which says which put-backs' pushes
    /// outlived the last run. The caller puts the entries back in its queue, syncs it, then
    /// calls [`Inflight::reset`]. A journal of the first format is migrated.
    pub fn open(path: &Path, published: u64) -> Result<(Inflight, Vec<Vec<u8>>), StoreError> {
        if let Some(old) = earlier_format(path, &FORMAT)? {
            migrate(path, &old)?;
        }
        let mut last = BTreeMap::new();
        // Read again only at the next opening and by a rewrite (every 32 MiB): its pages leave
        // the cache once synced.
        let (log, _) = LogWriter::open(path, Options::new(FORMAT).drop_synced(), |p| {
            apply(&mut last, p, published)
        })?;
        Ok((
            Inflight {
                log,
                outstanding: BTreeMap::new(),
                bytes: 0,
                next: 1,
                rewrite_at: COMPACT_BYTES,
            },
            last.into_values().collect(),
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
        self.log.append_with(|out| taken_payload(out, seq, rec));
        // A queue record is far shorter than 4 GiB (a segment bounds it); the length is only
        // counted, and the same figure is taken off when the entry is finished.
        let len = u32::try_from(rec.len()).unwrap_or(u32::MAX);
        self.outstanding.insert(seq, len);
        self.bytes += u64::from(len);
        self.write_if_full()?;
        Ok(seq)
    }

    /// Journals that entry `seq` is finished (crawled, skipped, or back in a queue).
    pub fn done(&mut self, seq: u64) -> Result<(), StoreError> {
        if let Some(len) = self.outstanding.remove(&seq) {
            self.bytes -= u64::from(len);
            self.log.append_with(|out| done_payload(out, seq));
        }
        self.write_if_full()
    }

    /// Finishes entries `seqs` put back in the crawl queue by pushes not yet published, as one
    /// record naming `generation`, the queue's generation once it publishes them
    /// ([`crate::queue::CrawlQueue::next_publish_generation`]): a restart finishes them only
    /// if the queue reached it. Queued in memory; the caller writes it ([`Inflight::write`])
    /// and then publishes the pushes. Entries not outstanding are left out.
    pub fn put_back(&mut self, seqs: &[u64], generation: u64) {
        let mut finished = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            if let Some(len) = self.outstanding.remove(&seq) {
                self.bytes -= u64::from(len);
                finished.push(seq);
            }
        }
        if !finished.is_empty() {
            self.log
                .append_with(|out| put_back_payload(out, generation, &finished));
        }
    }

    fn write_if_full(&mut self) -> Result<(), StoreError> {
        Ok(self.log.write_over(WRITE_CHUNK)?)
    }

    /// Makes sure the journal can take an entry of up to `need` bytes without room from the
    /// file system (allocating ahead): call before taking the entry from its queue. The pop is
    /// published (outlives the process) only after [`Inflight::write`] has written the record
    /// (`NodeScheduler::dispatch`). A full disk fails here, with the entry still in its queue.
    pub fn reserve(&mut self, need: u64) -> Result<(), StoreError> {
        // The record: its header, `+`, the sequence number, the entry.
        let record = (HEADER + 9) as u64 + need;
        Ok(self.log.reserve(record, RESERVE_CHUNK)?)
    }

    /// Writes the queued records to the file (no fdatasync): from there they outlive the
    /// process.
    pub fn write(&mut self) -> Result<(), StoreError> {
        self.log.write_pending()?;
        Ok(())
    }

    /// Entries taken and not finished.
    pub fn len(&self) -> usize {
        self.outstanding.len()
    }

    /// Bytes of the entries taken and not finished (their records, as taken).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True when every entry taken is finished.
    pub fn is_empty(&self) -> bool {
        self.outstanding.is_empty()
    }

    /// Makes the journal durable; rewrites it when it has grown large.
    pub fn sync(&mut self) -> Result<(), StoreError> {
        let c = self.sync_begin()?;
        self.sync_end(c)
    }

    /// [`Inflight::sync`] in two halves: rewrites the journal when it has grown large (which
    /// leaves nothing to sync) or writes what was journaled and returns the commit to run
    /// ([`crate::recordlog::run_commits`]), settled by [`Inflight::sync_end`].
    ///
    /// A rewrite that fails for another reason than a full disk (a record of the file that
    /// cannot be read back) is logged and the journal goes on as it is: its syncs still make
    /// each new record durable, and the rewrite is tried again after another
    /// [`COMPACT_BYTES`].
    pub fn sync_begin(&mut self) -> Result<Option<Commit>, StoreError> {
        if self.log.len() > self.rewrite_at {
            match self.rewrite() {
                Ok(()) => {
                    self.rewrite_at = COMPACT_BYTES;
                    return Ok(None);
                }
                // No room for the new file: appending may still find some.
                Err(e) if e.disk_full => {}
                Err(e) => {
                    self.rewrite_at = self.log.len().saturating_add(COMPACT_BYTES);
                    log::error!(
                        "in-flight journal not rewritten, it goes on growing (next try past \
                         {} MiB): {e}",
                        self.rewrite_at >> 20
                    );
                }
            }
        }
        Ok(self.log.commit_begin()?)
    }

    /// Settles the commit of [`Inflight::sync_begin`].
    pub fn sync_end(&mut self, c: Option<Commit>) -> Result<(), StoreError> {
        if let Some(c) = c {
            self.log.commit_end(c)?;
        }
        Ok(())
    }

    /// Writes only the outstanding entries to a new file that replaces the journal. Their
    /// records are read back from the journal (every `+` record of an outstanding entry is
    /// there once: sequence numbers are not reused within a file), after what is queued is
    /// written. A journal that does not give back every outstanding entry (a damaged record
    /// ends the reading) is left as it is, the error returned: the rewrite would lose them.
    fn rewrite(&mut self) -> Result<(), StoreError> {
        if self.outstanding.is_empty() {
            // Nothing to read back (the reset at every opening): the file keeps its magic only.
            self.log.compact(|_| Ok(()))?;
            return Ok(());
        }
        self.log.write_pending()?;
        let path = self.log.path().to_path_buf();
        let outstanding = &self.outstanding;
        self.log.compact(|c| {
            let mut copied = 0usize;
            let mut failed = None;
            read_log(&path, &FORMAT, |p| {
                let mut cur = Cur(p);
                let (Some(b'+'), Some(seq)) = (cur.u8(), cur.u64()) else {
                    return true;
                };
                if outstanding.contains_key(&seq) {
                    if let Err(e) = c.record(|out| out.extend_from_slice(p)) {
                        failed = Some(e);
                        return false;
                    }
                    copied += 1;
                }
                true
            })?;
            if let Some(e) = failed {
                return Err(e);
            }
            if copied != outstanding.len() {
                let why = format!(
                    "{copied} of {} outstanding entries read back for the rewrite",
                    outstanding.len()
                );
                return Err(LogError::new(
                    &path,
                    "read",
                    std::io::Error::new(std::io::ErrorKind::InvalidData, why),
                ));
            }
            Ok(())
        })?;
        Ok(())
    }
}

impl Drop for Inflight {
    /// A clean close makes what was journaled durable (a node's last sync leaves the marks of
    /// the entries it finished written, not synced: see `Collection::sync_all`); a failure is
    /// logged, as nothing else can be done with it here.
    fn drop(&mut self) {
        if let Err(e) = self.log.commit() {
            log::warn!("closing the in-flight journal: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A journal of the first format as its code wrote it: `a` (seq 1), `bb` (2), `ccc` (3)
    /// taken, 1 and 3 done, then the first bytes of a `+` torn by a crash.
    const FIRST_FORMAT: &[u8] = b"+\x01\0\0\0\0\0\0\0\x01\0\0\0a\
        +\x02\0\0\0\0\0\0\0\x02\0\0\0bb\
        +\x03\0\0\0\0\0\0\0\x03\0\0\0ccc\
        -\x01\0\0\0\0\0\0\0\
        -\x03\0\0\0\0\0\0\0\
        +\x09\0\0";

    #[test]
    fn a_journal_of_the_first_format_opens_and_is_migrated() {
        let dir = tempfile::TempDir::with_prefix("cf-inflight-old-").unwrap();
        let p = dir.path().join("inflight");
        fs::write(&p, FIRST_FORMAT).unwrap();
        let (j, pending) = Inflight::open(&p, 0).unwrap();
        assert_eq!(pending, vec![b"bb".to_vec()]);
        drop(j);
        let migrated = fs::read(&p).unwrap();
        assert!(migrated.starts_with(FORMAT.magic), "{migrated:?}");
        assert!(!dir.path().join("inflight.tmp").exists());
        // Reopened: the same entry, from the current format.
        let (mut j, pending) = Inflight::open(&p, 0).unwrap();
        assert_eq!(pending, vec![b"bb".to_vec()]);
        assert_eq!(fs::read(&p).unwrap(), migrated);
        j.reset().unwrap();
        drop(j);
        assert!(Inflight::open(&p, 0).unwrap().1.is_empty());
    }

    #[test]
    fn unfinished_entries_come_back_and_finished_ones_do_not() {
        let dir = std::env::temp_dir().join(format!("cf-inflight-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("inflight");
        let (mut j, pending) = Inflight::open(&p, 0).unwrap();
        assert!(pending.is_empty());
        let a = j.add(b"a").unwrap();
        let _b = j.add(b"bb").unwrap();
        let c = j.add(b"ccc").unwrap();
        assert_eq!((j.len(), j.bytes()), (3, 6));
        j.done(a).unwrap();
        j.done(a).unwrap(); // twice: counted once
        assert_eq!((j.len(), j.bytes()), (2, 5));
        j.sync().unwrap();
        j.done(c).unwrap(); // not synced: may or may not survive; here the drop flushes it
        drop(j);
        let mut bytes = fs::read(&p).unwrap();
        bytes.extend_from_slice(b"+\x09\0\0"); // a torn record
        fs::write(&p, &bytes).unwrap();
        let (mut j, pending) = Inflight::open(&p, 0).unwrap();
        assert_eq!(pending, vec![b"bb".to_vec()]);
        j.reset().unwrap();
        drop(j);
        let (_, pending) = Inflight::open(&p, 0).unwrap();
        assert!(pending.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    /// A put-back's record finishes its entries only when the queue's generation at the
    /// restart reached the one it names (its pushes were published); a torn one finishes none.
    #[test]
    fn a_put_back_counts_once_the_queue_reached_its_generation() {
        let dir = tempfile::TempDir::with_prefix("cf-inflight-putback-").unwrap();
        let p = dir.path().join("inflight");
        let (mut j, _) = Inflight::open(&p, 0).unwrap();
        let a = j.add(b"a").unwrap();
        let b = j.add(b"bb").unwrap();
        let c = j.add(b"ccc").unwrap();
        j.put_back(&[a, c, 99], 7);
        assert_eq!((j.len(), j.bytes()), (1, 2));
        j.write().unwrap();
        std::mem::forget(j);
        for (published, want) in [
            (6, vec![&b"a"[..], b"bb", b"ccc"]),
            (7, vec![&b"bb"[..]]),
            (8, vec![&b"bb"[..]]),
        ] {
            let (j, pending) = Inflight::open(&p, published).unwrap();
            assert_eq!(pending, want, "queue at generation {published}");
            std::mem::forget(j);
        }
        // Torn: the record's last byte missing.
        let len = fs::metadata(&p).unwrap().len();
        fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len - 1)
            .unwrap();
        let (_, pending) = Inflight::open(&p, 8).unwrap();
        assert_eq!(pending, vec![&b"a"[..], b"bb", b"ccc"]);
        let _ = b;
    }

    /// The records a rewrite writes are the outstanding entries' own, read back from the file:
    /// a restart after it gets them byte for byte, in order, whether they were written before
    /// the rewrite or were still queued in memory.
    #[test]
    fn a_rewrite_reads_the_outstanding_records_back_from_the_file() {
        let dir = tempfile::TempDir::with_prefix("cf-inflight-back-").unwrap();
        let p = dir.path().join("inflight");
        let (mut j, _) = Inflight::open(&p, 0).unwrap();
        let first: Vec<u8> = (0..200u8).collect();
        j.add(&first).unwrap();
        for i in 0..5000u32 {
            let s = j.add(&i.to_le_bytes().repeat(20)).unwrap();
            j.done(s).unwrap();
        }
        j.write().unwrap();
        // Queued in memory, not written yet, when the rewrite starts.
        j.add(b"last").unwrap();
        assert_eq!((j.len(), j.bytes()), (2, 204));
        j.rewrite().unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().len(),
            8 + (8 + 9 + 200) + (8 + 9 + 4)
        );
        drop(j);
        let (_, pending) = Inflight::open(&p, 0).unwrap();
        assert_eq!(pending, vec![first, b"last".to_vec()]);
    }

    /// A journal damaged before an outstanding entry's record cannot give it back: the rewrite
    /// fails and leaves the file as it was, rather than replace it without the entry.
    #[test]
    fn a_rewrite_that_cannot_read_every_outstanding_record_keeps_the_journal() {
        let dir = tempfile::TempDir::with_prefix("cf-inflight-damaged-").unwrap();
        let p = dir.path().join("inflight");
        let (mut j, _) = Inflight::open(&p, 0).unwrap();
        j.add(b"lost-if-rewritten").unwrap();
        j.write().unwrap();
        let mut bytes = fs::read(&p).unwrap();
        let at = bytes.len() - 3;
        bytes[at] ^= 0xff;
        fs::write(&p, &bytes).unwrap();
        let e = j.rewrite().unwrap_err();
        assert!(e.to_string().contains("0 of 1 outstanding"), "{e}");
        assert_eq!(fs::read(&p).unwrap(), bytes, "left as it was");
        // A sync that comes to the rewrite goes on: the new entry is in the file after it.
        j.rewrite_at = 0;
        j.add(b"taken-after").unwrap();
        j.sync().unwrap();
        assert!(
            j.rewrite_at > COMPACT_BYTES,
            "tried again only after growing"
        );
        let after = fs::read(&p).unwrap();
        assert!(after.starts_with(&bytes) && after.len() > bytes.len());
        assert!(after.windows(11).any(|w| w == b"taken-after"));
    }

    #[test]
    fn a_rewrite_keeps_only_the_outstanding() {
        let dir = std::env::temp_dir().join(format!("cf-inflight2-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("inflight");
        let (mut j, _) = Inflight::open(&p, 0).unwrap();
        let keep = j.add(b"keep").unwrap();
        for _ in 0..1000 {
            let s = j.add(&[7u8; 100]).unwrap();
            j.done(s).unwrap();
        }
        j.rewrite().unwrap();
        // The magic and one record: header, `+`, seq, the 4 bytes of the entry.
        assert_eq!(fs::metadata(&p).unwrap().len(), 8 + 8 + 9 + 4);
        j.done(keep).unwrap();
        j.sync().unwrap();
        drop(j);
        let (_, pending) = Inflight::open(&p, 0).unwrap();
        assert!(pending.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
