//! Feeding suspend (CMD_ADM_CONF_FEEDING_SUSPEND, FSCMT 2.2.3.7 and 3.1.5.6): "holds feeding
//! without losing documents".
//!
//! A collection's directory holds the document log in `docs/` and, while feeding is suspended,
//! a second log in `docs-held/` that takes every document instead. The state is the files:
//! - no `docs-held/`: feeding;
//! - `docs-held/` without `resume`: suspended (it persists across a restart);
//! - `docs-held/resume`: a resume is under way. The file holds the `docs/` sequence number at
//!   which the move began and the first held sequence number. Only moved documents are appended
//!   to `docs/` while it exists, so the documents of `docs/` from that number on are exactly a
//!   prefix of the held ones, in order: after a crash, the intact length of `docs/` says how
//!   many were moved, and the move goes on from the next — nothing lost, nothing twice.
//!
//! When every held document is in `docs/` and synced, `docs-held/` is renamed to
//! `docs-held.done` (atomic) and removed.

use std::fs;
use std::path::{Path, PathBuf};

use log::{info, warn};

use super::log::{DocCommit, DocLog, DocLogOptions, DocLogReader};
use super::{io_err, FeedDoc, FeedError, FeedSink};
use crate::recordlog::{check, sync_dir, write_atomic, Commit, Cur};

/// The document log's directory in a collection's directory.
pub const DOCS_DIR: &str = "docs";
/// The held documents' directory in a collection's directory.
pub const HELD_DIR: &str = "docs-held";
const DONE_DIR: &str = "docs-held.done";
const RESUME_FILE: &str = "resume";
/// Documents moved between two syncs of `docs/` during a resume.
const MOVE_BATCH: usize = 1024;

/// How far a resume got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resume {
    /// Documents moved into the document log by this call.
    pub moved: usize,
    /// True when every held document is in the document log and feeding goes there again.
    pub done: bool,
}

/// A collection's feed: the document log, and the held log while feeding is suspended.
pub struct Feeder {
    collection_dir: PathBuf,
    opts: DocLogOptions,
    log: DocLog,
    held: Option<DocLog>,
}

/// Where a resume started: the `docs/` sequence number and the first held sequence number.
fn read_marker(path: &Path) -> Result<Option<(u64, u64)>, FeedError> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(path)(e)),
    };
    let bad = || FeedError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        what: "damaged resume marker",
    };
    let mut c = Cur(&bytes);
    let (docs_start, held_first, ck) = (c.u64(), c.u64(), c.u32());
    match (docs_start, held_first, ck) {
        (Some(d), Some(h), Some(ck)) if c.is_empty() && check(&bytes[..16]) == ck => {
            Ok(Some((d, h)))
        }
        _ => Err(bad()),
    }
}

impl Feeder {
    /// Opens the feed of the collection whose directory is `collection_dir`, with the default
    /// [`DocLogOptions`]. A resume a crash interrupted is finished first.
    pub fn open(collection_dir: &Path) -> Result<Feeder, FeedError> {
        Feeder::open_with(collection_dir, DocLogOptions::default())
    }

    /// Opens the feed with `opts` for both logs.
    pub fn open_with(collection_dir: &Path, opts: DocLogOptions) -> Result<Feeder, FeedError> {
        let done = collection_dir.join(DONE_DIR);
        if done.exists() {
            fs::remove_dir_all(&done).map_err(io_err(&done))?;
        }
        let log = DocLog::open_with(&collection_dir.join(DOCS_DIR), opts)?;
        let held_dir = collection_dir.join(HELD_DIR);
        let held = if held_dir.exists() {
            Some(DocLog::open_with(&held_dir, opts)?)
        } else {
            None
        };
        let mut f = Feeder {
            collection_dir: collection_dir.to_path_buf(),
            opts,
            log,
            held,
        };
        if f.is_resuming() {
            warn!(
                "{}: finishing a resume of feeding that was interrupted",
                f.collection_dir.display()
            );
            f.resume()?;
        }
        Ok(f)
    }

    /// True while documents are held (suspended, or a resume not finished yet).
    pub fn is_suspended(&self) -> bool {
        self.held.is_some()
    }

    /// True when a resume began and has not finished.
    pub fn is_resuming(&self) -> bool {
        self.held.is_some() && self.held_dir().join(RESUME_FILE).exists()
    }

    /// Documents held, not yet moved.
    pub fn held_len(&self) -> u64 {
        self.held.as_ref().map_or(0, DocLog::len)
    }

    /// The document log.
    pub fn log(&self) -> &DocLog {
        &self.log
    }

    fn held_dir(&self) -> PathBuf {
        self.collection_dir.join(HELD_DIR)
    }

    /// Holds feeding: documents go durably to `docs-held/` until [`Feeder::resume`]. Persists
    /// across a restart. Suspending while suspended does nothing.
    pub fn suspend(&mut self) -> Result<(), FeedError> {
        if self.held.is_none() {
            self.held = Some(DocLog::open_with(&self.held_dir(), self.opts)?);
            info!("{}: feeding suspended", self.collection_dir.display());
        }
        Ok(())
    }

    /// Resumes feeding: moves every held document into the document log in order, then removes
    /// the held log; returns how many were moved. Not suspended: nothing to do.
    pub fn resume(&mut self) -> Result<usize, FeedError> {
        let r = self.resume_step(usize::MAX)?;
        if !r.done {
            // Every held document was read and moved, yet the numbering says more were held.
            return Err(FeedError::Corrupt {
                path: self.held_dir(),
                offset: 0,
                what: "held log shorter than its numbering",
            });
        }
        Ok(r.moved)
    }

    /// Moves at most `max` held documents into the document log (a long resume can be spread
    /// over several calls; documents fed meanwhile are held behind the others). Feeding goes to
    /// the document log again once [`Resume::done`].
    pub fn resume_step(&mut self, max: usize) -> Result<Resume, FeedError> {
        let Some(held) = &mut self.held else {
            return Ok(Resume {
                moved: 0,
                done: true,
            });
        };
        held.sync()?;
        let held_dir = held.dir().to_path_buf();
        let marker = held_dir.join(RESUME_FILE);
        let (docs_start, held_first) = match read_marker(&marker)? {
            Some(m) => m,
            None => {
                let m = (self.log.next_seq(), held.first_seq());
                let mut bytes = m.0.to_le_bytes().to_vec();
                bytes.extend_from_slice(&m.1.to_le_bytes());
                let ck = check(&bytes);
                bytes.extend_from_slice(&ck.to_le_bytes());
                write_atomic(&marker, &bytes).map_err(io_err(&marker))?;
                m
            }
        };
        let Some(already) = self.log.next_seq().checked_sub(docs_start) else {
            return Err(FeedError::Corrupt {
                path: marker,
                offset: 0,
                what: "resume marker ahead of the document log",
            });
        };
        let from = held_first + already;
        let mut moved = 0;
        let mut reader = DocLogReader::open_from(&held_dir, from)?;
        while moved < max {
            let Some(item) = reader.next() else { break };
            let (seq, doc) = item?;
            debug_assert_eq!(seq, from + moved as u64);
            self.log.feed(&doc)?;
            moved += 1;
            if moved.is_multiple_of(MOVE_BATCH) {
                self.log.sync()?;
            }
        }
        self.log.sync()?;
        let done = self.log.next_seq() - docs_start >= held.next_seq() - held_first;
        if done {
            // Every held document is in `docs/` and durable: drop the held log atomically.
            self.held = None;
            let done_dir = self.collection_dir.join(DONE_DIR);
            fs::rename(&held_dir, &done_dir).map_err(io_err(&held_dir))?;
            sync_dir(&self.collection_dir).map_err(io_err(&self.collection_dir))?;
            fs::remove_dir_all(&done_dir).map_err(io_err(&done_dir))?;
            info!(
                "{}: feeding resumed, {} held documents fed",
                self.collection_dir.display(),
                self.log.next_seq() - docs_start
            );
        }
        Ok(Resume { moved, done })
    }
}

impl FeedSink for Feeder {
    /// Feeds the document log, or the held log while suspended: the sequence number returned is
    /// in the log the document went to (a held document gets its document log number when it
    /// is moved).
    fn feed(&mut self, doc: &FeedDoc) -> Result<u64, FeedError> {
        match &mut self.held {
            Some(h) => h.feed(doc),
            None => self.log.feed(doc),
        }
    }

    /// Syncs both logs.
    fn sync(&mut self) -> Result<(), FeedError> {
        self.log.sync()?;
        if let Some(h) = &mut self.held {
            h.sync()?;
        }
        Ok(())
    }
}

/// A sync of the feed begun ([`Feeder::sync_begin`]): one of each log's.
#[derive(Debug)]
pub struct FeedCommit {
    log: DocCommit,
    held: Option<DocCommit>,
}

impl FeedCommit {
    /// The commits to run ([`crate::recordlog::run_commits`]).
    pub fn commits_mut(&mut self) -> impl Iterator<Item = &mut Commit> {
        self.log
            .commit_mut()
            .into_iter()
            .chain(self.held.as_mut().and_then(DocCommit::commit_mut))
    }
}

impl Feeder {
    /// [`FeedSink::sync`] in two halves: writes both logs and returns their commits to run,
    /// settled by [`Feeder::sync_end`].
    pub fn sync_begin(&mut self) -> Result<FeedCommit, FeedError> {
        let log = self.log.sync_begin()?;
        let held = match &mut self.held {
            Some(h) => Some(h.sync_begin()?),
            None => None,
        };
        Ok(FeedCommit { log, held })
    }

    /// Settles the syncs of [`Feeder::sync_begin`] (both, even when the first failed); the
    /// first failure is returned.
    pub fn sync_end(&mut self, c: FeedCommit) -> Result<(), FeedError> {
        let r = self.log.sync_end(c.log);
        let held = match (&mut self.held, c.held) {
            (Some(h), Some(c)) => h.sync_end(c),
            _ => Ok(()),
        };
        r.and(held)
    }
}
