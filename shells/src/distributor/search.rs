//! The full-text indexes of the distributor's content collections
//! (`core::distributor::fulltext`), kept up to date with the content indexes: each index's
//! [`ApplyHook`] sends a copy of every applied op to the search thread, which owns the
//! full-text indexes, applies the ops (text extraction included) and commits (looking every
//! [`COMMIT_CHECK`]; a commit when [`fulltext::COMMIT_INTERVAL`] has passed since the first
//! uncommitted op or [`fulltext::COMMIT_OPS`] wait). So the index thread, which acknowledges
//! the feeding sessions, never waits for a full-text commit; a bounded queue
//! ([`QUEUE`] ops) holds it back only when the search thread falls that far behind. Searches
//! ([`super::xmlrpc`]) share the writers' readers.
//!
//! On open, a full-text index that is missing, unreadable, or covers another log position
//! than its content index's (behind after a crash between two of its commits, beyond after a
//! torn tail was cut from the log) is rebuilt from the log: the ops are read in order and
//! each document's kept version, when live, is added.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::distributor::fulltext::{self, Doc, FullText};
use crawlfleet_core::distributor::index::{reader, ApplyHook, Index, Op, OpKind};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};
use log::{error, info};

use super::xmlrpc::Readers;

/// How often the search thread looks for a commit due.
pub const COMMIT_CHECK: Duration = Duration::from_millis(200);
/// Ops waiting for the search thread at most.
pub const QUEUE: usize = 8192;

/// What the search thread is told.
enum Msg {
    /// A full-text index to keep, from now on.
    Attach(String, Box<FullText>),
    /// An op applied to the collection's content index, and where its record ends.
    Applied(Arc<str>, Op, u64),
    /// The collection's content index was compacted to this length.
    Compacted(Arc<str>, u64),
    /// Commit every index now and answer (a clean stop).
    Flush(Sender<()>),
}

/// The distributor's full-text indexes: what the hooks, the searches and the search thread
/// share.
#[derive(Clone)]
pub(crate) struct Search {
    data_dir: PathBuf,
    /// Readers for the searches.
    pub readers: Readers,
    tx: Sender<Msg>,
}

/// The full-text side of a content op.
fn doc_of(op: &Op) -> Doc<'_> {
    Doc {
        uri: &op.doc,
        time: op.time,
        checksum: &op.checksum,
        content_type: fulltext::content_type(
            op.headers.iter().map(|(n, v)| (n.as_bytes(), v.as_slice())),
        ),
        body: &op.body,
    }
}

/// Sends a content index's applied ops to the search thread.
struct Hook {
    collection: Arc<str>,
    tx: Sender<Msg>,
}

impl ApplyHook for Hook {
    fn applied(&mut self, op: &Op, end: u64) {
        // The search thread gone (it never ends by itself): nothing to keep up to date.
        let _ = self
            .tx
            .send(Msg::Applied(Arc::clone(&self.collection), op.clone(), end));
    }

    fn compacted(&mut self, len: u64) {
        let _ = self
            .tx
            .send(Msg::Compacted(Arc::clone(&self.collection), len));
    }
}

/// The search thread: applies and commits.
fn run(rx: &Receiver<Msg>) {
    let mut indexes: HashMap<Arc<str>, FullText> = HashMap::new();
    loop {
        match rx.recv_timeout(COMMIT_CHECK) {
            Ok(Msg::Attach(c, ft)) => {
                indexes.insert(c.into(), *ft);
            }
            Ok(Msg::Applied(c, op, end)) => {
                let Some(ft) = indexes.get_mut(&c) else {
                    continue;
                };
                let r = match op.kind {
                    OpKind::Remove => ft.apply(&fulltext::Op::Remove { uri: &op.doc }, end),
                    _ => ft.apply(&fulltext::Op::Put(doc_of(&op)), end),
                };
                if let Err(e) = r {
                    // The content index stays right; this one is rebuilt on the next start
                    // (its position no longer matches the log's).
                    crawlfleet_core::warn_limited!("fulltext-apply", "{c}: {e}");
                }
            }
            Ok(Msg::Compacted(c, len)) => {
                if let Some(ft) = indexes.get_mut(&c) {
                    if let Err(e) = ft.moved_to(len) {
                        error!("full-text index of {c:?}: {e}");
                    }
                }
            }
            Ok(Msg::Flush(done)) => {
                for (c, ft) in &mut indexes {
                    if let Err(e) = ft.commit() {
                        error!("full-text index of {c:?}: {e}");
                    }
                }
                let _ = done.send(());
                continue;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        for (c, ft) in &mut indexes {
            if let Err(e) = ft.tick(now) {
                crawlfleet_core::warn_limited!("fulltext-commit", "{c}: {e}");
            }
        }
    }
}

impl Search {
    /// Commits every full-text index (after the ops sent so far), waiting at most `timeout`:
    /// a clean stop leaves nothing for the next start to index again.
    pub fn flush(&self, timeout: Duration) {
        let (done, wait) = bounded(1);
        if self.tx.send(Msg::Flush(done)).is_ok() && wait.recv_timeout(timeout).is_err() {
            log::warn!("the full-text indexes were not committed within {timeout:?}");
        }
    }

    /// The full-text indexes of the data directory `data_dir`, and their thread.
    pub fn start(data_dir: &Path) -> Result<Search, String> {
        let (tx, rx) = bounded(QUEUE);
        std::thread::Builder::new()
            .name("distributor-search".into())
            .spawn(move || run(&rx))
            .map_err(|e| format!("cannot start the search thread: {e}"))?;
        Ok(Search {
            data_dir: data_dir.to_owned(),
            readers: Readers::default(),
            tx,
        })
    }

    /// [`Search::attach`], or an error logged: the collection is fed and listed without its
    /// full-text index (searched from its directory as last committed), rebuilt on the next
    /// start.
    pub fn attach_or_log(&self, collection: &str, ix: &mut Index) {
        if let Err(e) = self.attach(collection, ix) {
            error!("full-text index of {collection:?}: {e}; searching it is off until a restart");
        }
    }

    /// Opens the full-text index of `collection` beside its content index `ix` (rebuilt from
    /// the log when stale) and hooks it to `ix`.
    pub fn attach(&self, collection: &str, ix: &mut Index) -> Result<(), String> {
        let dir = fulltext::dir(&self.data_dir, collection);
        let position = ix.log_len();
        let e = |e: fulltext::Error| format!("{}: {e}", dir.display());
        let (mut ft, stale) = FullText::open(&dir, position).map_err(e)?;
        if let Some(why) = stale {
            let started = Instant::now();
            ft.clear().map_err(e)?;
            let mut n = 0u64;
            let mut failed = None;
            let index: &Index = ix;
            reader::scan(index.path(), 0, |op, _| {
                let kept = index
                    .get(&op.doc)
                    .is_some_and(|k| k.live && k.version == op.version());
                if kept {
                    if let Err(err) = ft.add(&doc_of(op)) {
                        failed = Some(err);
                        return false;
                    }
                    n += 1;
                }
                true
            })
            .map_err(|err| format!("{collection}: reading the content index: {err}"))?;
            if let Some(err) = failed {
                return Err(e(err));
            }
            ft.finish(position).map_err(e)?;
            info!(
                "full-text index of {collection:?} rebuilt ({why}): {n} documents in {:.1?}",
                started.elapsed()
            );
        }
        {
            let mut r = self.readers.write().unwrap_or_else(|p| p.into_inner());
            r.insert(collection.to_owned(), ft.reader());
        }
        self.tx
            .send(Msg::Attach(collection.to_owned(), Box::new(ft)))
            .map_err(|_| "the search thread stopped".to_owned())?;
        ix.set_hook(Box::new(Hook {
            collection: collection.into(),
            tx: self.tx.clone(),
        }));
        Ok(())
    }
}
