//! The full-text indexes of the distributor's content collections
//! (`core::distributor::fulltext`), kept up to date with the content indexes: each index's
//! [`ApplyHook`] hands every applied op to its collection's full-text index, a thread commits
//! them on its timer (every [`COMMIT_CHECK`], a commit when [`fulltext::COMMIT_INTERVAL`] has
//! passed since the first uncommitted op or [`fulltext::COMMIT_OPS`] wait), and searches
//! ([`super::xmlrpc`]) share the writers' readers.
//!
//! On open, a full-text index that is missing, unreadable, or covers another log position
//! than its content index's (behind after a crash between two of its commits, beyond after a
//! torn tail was cut from the log) is rebuilt from the log: the ops are read in order and
//! each document's kept version, when live, is added.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crawlfleet_core::distributor::fulltext::{self, Doc, FullText};
use crawlfleet_core::distributor::index::{reader, ApplyHook, Index, Op, OpKind};
use log::{error, info};

use super::xmlrpc::Readers;

/// How often the commit thread looks for a commit due.
pub const COMMIT_CHECK: Duration = Duration::from_millis(200);

/// The distributor's full-text indexes: what the hooks, the commit thread and the searches
/// share.
#[derive(Clone)]
pub(crate) struct Search {
    data_dir: PathBuf,
    /// Readers for the searches.
    pub readers: Readers,
    writers: Arc<Mutex<HashMap<String, Arc<Mutex<FullText>>>>>,
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

/// Hands a content index's applied ops to its full-text index.
struct Hook {
    collection: String,
    ft: Arc<Mutex<FullText>>,
}

impl ApplyHook for Hook {
    fn applied(&mut self, op: &Op, end: u64) {
        let mut ft = self.ft.lock().unwrap_or_else(|p| p.into_inner());
        let r = match op.kind {
            OpKind::Remove => ft.apply(&fulltext::Op::Remove { uri: &op.doc }, end),
            _ => ft.apply(&fulltext::Op::Put(doc_of(op)), end),
        };
        if let Err(e) = r {
            // The content index stays right; this one is rebuilt on the next start (its
            // position no longer matches the log).
            crawlfleet_core::warn_limited!("fulltext-apply", "{}: {e}", self.collection);
        }
    }

    fn compacted(&mut self, len: u64) {
        let mut ft = self.ft.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = ft.moved_to(len) {
            error!("full-text index of {:?}: {e}", self.collection);
        }
    }
}

impl Search {
    /// The full-text indexes of the data directory `data_dir`, and their commit thread.
    pub fn start(data_dir: &Path) -> Result<Search, String> {
        let s = Search {
            data_dir: data_dir.to_owned(),
            readers: Readers::default(),
            writers: Arc::default(),
        };
        let writers = Arc::clone(&s.writers);
        std::thread::Builder::new()
            .name("distributor-search".into())
            .spawn(move || loop {
                std::thread::sleep(COMMIT_CHECK);
                let now = Instant::now();
                let all: Vec<_> = {
                    let w = writers.lock().unwrap_or_else(|p| p.into_inner());
                    w.iter().map(|(c, f)| (c.clone(), Arc::clone(f))).collect()
                };
                for (c, ft) in all {
                    let mut ft = ft.lock().unwrap_or_else(|p| p.into_inner());
                    if let Err(e) = ft.tick(now) {
                        crawlfleet_core::warn_limited!("fulltext-commit", "{c}: {e}");
                    }
                }
            })
            .map_err(|e| format!("cannot start the search thread: {e}"))?;
        Ok(s)
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
        let ft = Arc::new(Mutex::new(ft));
        {
            let reader = ft.lock().unwrap_or_else(|p| p.into_inner()).reader();
            let mut r = self.readers.write().unwrap_or_else(|p| p.into_inner());
            r.insert(collection.to_owned(), reader);
        }
        self.writers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(collection.to_owned(), Arc::clone(&ft));
        ix.set_hook(Box::new(Hook {
            collection: collection.to_owned(),
            ft,
        }));
        Ok(())
    }
}
