//! The modification log of the served tree (draft-cosmo 3.2, 3.3.4): New, Change and Delete of
//! file paths with their dates, persisted on the record log, kept MaxQuerySpan long.
//!
//! The log also keeps what the server last saw of every file (modification time and size),
//! so that a restart, or the periodic rescan, compares the tree with it and logs what changed
//! meanwhile, even while the server was down. Records:
//!
//! - `Base(path, mtime, size)`: a file as seen, with no change to report (what compaction
//!   writes for the files whose last change is older than the span);
//! - `Entry(seq, kind, date, path, mtime, size)`: a change, numbered.
//!
//! [`ModLog::expire`] drops the changes older than the span from memory at once (GetIndex and
//! the reports never see them), and compacts the file (the files' state and the changes still
//! within the span) once as many dropped records as live ones have piled up.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

use super::report::{Change, ChangeKind};
use crate::recordlog::{put_bytes, Cur, Format, LogError, LogWriter, Options};

/// The log's file in the data directory.
pub const FILE: &str = "rup-modlog.log";

const FORMAT: Format = Format {
    magic: b"CFRUPMOD1\n",
    name: "RUP modification log",
    max_record: 1 << 16,
};

const BASE: u8 = 1;
const ENTRY: u8 = 2;

/// What the server sees of a file: the change test compares both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStat {
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: i64,
    /// Size in bytes.
    pub size: u64,
}

/// The modification log and the files' last seen state.
#[derive(Debug)]
pub struct ModLog {
    /// By percent-encoded path relative to the root.
    files: BTreeMap<String, FileStat>,
    changes: VecDeque<Change>,
    next_seq: u64,
    /// Records in the file that are neither a file's state nor a live change.
    dead: u64,
    log: LogWriter,
}

fn kind_byte(k: ChangeKind) -> u8 {
    match k {
        ChangeKind::New => 0,
        ChangeKind::Change => 1,
        ChangeKind::Delete => 2,
    }
}

fn put_stat(out: &mut Vec<u8>, s: FileStat) {
    out.extend_from_slice(&s.mtime_ns.to_le_bytes());
    out.extend_from_slice(&s.size.to_le_bytes());
}

fn get_stat(c: &mut Cur<'_>) -> Option<FileStat> {
    Some(FileStat {
        mtime_ns: c.u64()? as i64,
        size: c.u64()?,
    })
}

fn encode_entry(out: &mut Vec<u8>, ch: &Change, stat: FileStat) {
    out.push(ENTRY);
    out.extend_from_slice(&ch.seq.to_le_bytes());
    out.push(kind_byte(ch.kind));
    out.extend_from_slice(&ch.date.to_le_bytes());
    put_bytes(out, ch.path.as_bytes());
    put_stat(out, stat);
}

impl ModLog {
    /// Opens (creating) the log in `dir`.
    pub fn open(dir: &Path) -> Result<ModLog, LogError> {
        let mut files = BTreeMap::new();
        let mut changes = VecDeque::new();
        let mut next_seq = 1;
        let (log, rec) = LogWriter::open(&dir.join(FILE), Options::new(FORMAT), |p| {
            let mut c = Cur(p);
            let ok = (|| {
                match c.u8()? {
                    BASE => {
                        let path = String::from_utf8(c.bytes()?.to_vec()).ok()?;
                        let stat = get_stat(&mut c)?;
                        files.insert(path, stat);
                    }
                    ENTRY => {
                        let seq = c.u64()?;
                        let kind = match c.u8()? {
                            0 => ChangeKind::New,
                            1 => ChangeKind::Change,
                            2 => ChangeKind::Delete,
                            _ => return None,
                        };
                        let date = c.u64()? as i64;
                        let path = String::from_utf8(c.bytes()?.to_vec()).ok()?;
                        let stat = get_stat(&mut c)?;
                        if seq < next_seq {
                            return None;
                        }
                        next_seq = seq + 1;
                        if kind == ChangeKind::Delete {
                            files.remove(&path);
                        } else {
                            files.insert(path.clone(), stat);
                        }
                        changes.push_back(Change {
                            seq,
                            kind,
                            date,
                            path,
                        });
                    }
                    _ => return None,
                }
                c.is_empty().then_some(())
            })();
            ok.is_some()
        })?;
        let live = files.len() as u64 + changes.len() as u64;
        Ok(ModLog {
            files,
            changes,
            next_seq,
            dead: rec.records.saturating_sub(live),
            log,
        })
    }

    /// The number of the last change logged (0: none yet).
    pub fn head(&self) -> u64 {
        self.next_seq - 1
    }

    /// The files as last seen, by percent-encoded path.
    pub fn files(&self) -> &BTreeMap<String, FileStat> {
        &self.files
    }

    /// The changes still kept, oldest first.
    pub fn changes(&self) -> &VecDeque<Change> {
        &self.changes
    }

    /// The changes numbered after `seq`, oldest first.
    pub fn since(&self, seq: u64) -> impl Iterator<Item = &Change> {
        let start = self.changes.partition_point(|c| c.seq <= seq);
        self.changes.range(start..)
    }

    /// The changes dated `from` or later, oldest first.
    pub fn dated_from(&self, from: i64) -> impl Iterator<Item = &Change> {
        self.changes.iter().filter(move |c| c.date >= from)
    }

    /// Records what the server sees now of `path` (`None`: it is gone) and queues the change,
    /// if there is one, dated `now`; [`ModLog::commit`] makes it durable. Returns the change's
    /// kind.
    pub fn observe(&mut self, path: &str, seen: Option<FileStat>, now: i64) -> Option<ChangeKind> {
        let before = self.files.get(path).copied();
        let kind = match (before, seen) {
            (None, None) => return None,
            (Some(a), Some(b)) if a == b => return None,
            (None, Some(_)) => ChangeKind::New,
            (Some(_), Some(_)) => ChangeKind::Change,
            (Some(_), None) => ChangeKind::Delete,
        };
        let ch = Change {
            seq: self.next_seq,
            kind,
            date: now,
            path: path.to_owned(),
        };
        let stat = seen.or(before).unwrap_or(FileStat {
            mtime_ns: 0,
            size: 0,
        });
        self.log.append_with(|out| encode_entry(out, &ch, stat));
        self.next_seq += 1;
        match seen {
            Some(s) => self.files.insert(ch.path.clone(), s),
            None => self.files.remove(&ch.path),
        };
        self.changes.push_back(ch);
        Some(kind)
    }

    /// Logs a change the caller knows of (a server that learns of changes rather than
    /// comparing files, as the synthetic web of `crawlfleet up` does): `kind` of `path`, dated
    /// `date`, the file now as `stat` (ignored for Delete). [`ModLog::commit`] makes it durable.
    pub fn note(&mut self, path: &str, kind: ChangeKind, stat: FileStat, date: i64) {
        let ch = Change {
            seq: self.next_seq,
            kind,
            date,
            path: path.to_owned(),
        };
        self.log.append_with(|out| encode_entry(out, &ch, stat));
        self.next_seq += 1;
        match kind {
            ChangeKind::Delete => self.files.remove(path),
            _ => self.files.insert(ch.path.clone(), stat),
        };
        self.changes.push_back(ch);
    }

    /// Writes and syncs the queued changes.
    pub fn commit(&mut self) -> Result<(), LogError> {
        if self.log.has_pending() {
            self.log.commit()?;
        }
        Ok(())
    }

    /// Forgets the changes dated before `oldest`, except those numbered after `unreported`
    /// (a report still owes them to a robot whose latency is longer than the span);
    /// compacts the file once the records it holds for nothing outnumber the live ones (at
    /// least 1,024 of them). Returns how many changes were dropped.
    pub fn expire(&mut self, oldest: i64, unreported: u64) -> Result<usize, LogError> {
        let mut dropped = 0;
        while self
            .changes
            .front()
            .is_some_and(|c| c.date < oldest && c.seq <= unreported)
        {
            self.changes.pop_front();
            dropped += 1;
        }
        self.dead += dropped as u64;
        let live = self.files.len() as u64 + self.changes.len() as u64;
        if self.dead >= 1024 && self.dead >= live {
            self.compact()?;
        }
        Ok(dropped)
    }

    /// Rewrites the file with the files' state and the live changes.
    pub fn compact(&mut self) -> Result<(), LogError> {
        self.commit()?;
        // A file whose last change is live is restored by that change; the others get a Base.
        let mut last: BTreeMap<&str, &Change> = BTreeMap::new();
        for c in &self.changes {
            last.insert(&c.path, c);
        }
        let (files, changes) = (&self.files, &self.changes);
        self.log.compact(|w| {
            for (path, stat) in files {
                if !last.contains_key(path.as_str()) {
                    w.record(|out| {
                        out.push(BASE);
                        put_bytes(out, path.as_bytes());
                        put_stat(out, *stat);
                    })?;
                }
            }
            // Replayed in order, the live changes end each file in its current state: the
            // state each one carries is the file's after it, except for the last of a path,
            // which carries the current one.
            for c in changes {
                let is_last = last.get(c.path.as_str()).is_some_and(|l| l.seq == c.seq);
                let stat = match files.get(&c.path) {
                    Some(s) if is_last || c.kind != ChangeKind::Delete => *s,
                    _ => FileStat {
                        mtime_ns: 0,
                        size: 0,
                    },
                };
                w.record(|out| encode_entry(out, c, stat))?;
            }
            Ok(())
        })?;
        self.dead = 0;
        Ok(())
    }
}
