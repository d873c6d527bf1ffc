//! The distributor's index thread: applies the ops of the `feed` requests the frame thread
//! hands over to the content indexes (`core::distributor::index`) and replies once they are
//! durable (docs/distributor.md "Feeding sessions").
//!
//! Group commit: the thread takes every request waiting, applies them all, commits each index
//! they touched (one fdatasync per collection for the whole group, whatever the sessions and
//! connections), then sends the replies. While it waits for the disk, new requests queue up for
//! the next group, so neither the event loop nor the frame thread ever waits for an fsync. A
//! commit that fails (a full disk) fails the group's ops of that collection with a transient
//! reason; the index keeps their records queued and writes them once with a later commit, and
//! the client's resend is then answered `ok` without a second record.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crawlfleet_core::distributor::feed::{self, Feed, OpResult};
use crawlfleet_core::distributor::index::Index;
use crawlfleet_core::recordlog::LogError;
use crawlfleet_net::{ConnId, Handle, Priority};
use crossbeam_channel::Receiver;
use log::{error, info};

use super::search::Search;
use super::Shared;

/// A `feed` request and the connection to answer on.
pub(crate) struct Job {
    pub conn: ConnId,
    pub feed: Feed,
}

/// Requests taken into one group at most (their replies wait for its commit).
const MAX_GROUP: usize = 1024;

/// Opens the index of every collection in `collections`, before anything is served.
pub(crate) fn open_all(
    data_dir: &std::path::Path,
    collections: &[String],
) -> Result<BTreeMap<String, Index>, String> {
    let mut out = BTreeMap::new();
    for c in collections {
        let (ix, rec) = Index::open(data_dir, c).map_err(|e| e.to_string())?;
        info!(
            "index of {c:?}: {} records, {} live documents{}",
            rec.records,
            ix.live(),
            match rec.torn {
                Some(why) => format!(", a torn tail of {} bytes cut ({why})", rec.torn_bytes),
                None => String::new(),
            }
        );
        out.insert(c.clone(), ix);
    }
    Ok(out)
}

/// Starts the index thread.
pub(crate) fn spawn(
    data_dir: PathBuf,
    indexes: BTreeMap<String, Index>,
    shared: Arc<Mutex<Shared>>,
    handle: Handle,
    jobs: Receiver<Job>,
    search: Search,
) -> Result<(), String> {
    let mut f = Feeder {
        data_dir,
        indexes,
        shared,
        search,
    };
    std::thread::Builder::new()
        .name("distributor-index".into())
        .spawn(move || {
            while let Ok(first) = jobs.recv() {
                let mut group = vec![first];
                group.extend(jobs.try_iter().take(MAX_GROUP - 1));
                for (conn, bytes) in f.group(group) {
                    if handle.send(conn, Priority::Normal, bytes).is_err() {
                        return;
                    }
                }
            }
        })
        .map(drop)
        .map_err(|e| format!("cannot start the index thread: {e}"))
}

/// A request's results, to send once its collection's commit returned.
struct Answer {
    conn: ConnId,
    id: i64,
    results: Vec<(i64, OpResult)>,
    collection: String,
}

struct Feeder {
    data_dir: PathBuf,
    indexes: BTreeMap<String, Index>,
    shared: Arc<Mutex<Shared>>,
    search: Search,
}

/// The reason an op failed for `e`: transient either way (`disk_full` or `unavailable`).
fn transient(e: &LogError) -> String {
    if e.is_no_space() {
        format!("disk_full: {e}")
    } else {
        format!("unavailable: {e}")
    }
}

impl Feeder {
    /// Applies a group of requests, commits, and returns the replies to send.
    fn group(&mut self, group: Vec<Job>) -> Vec<(ConnId, Vec<u8>)> {
        let held: BTreeSet<String> = {
            let sh = self.shared.lock().unwrap_or_else(|p| p.into_inner());
            group
                .iter()
                .map(|j| &j.feed.collection)
                .filter(|c| sh.node.holds(c))
                .cloned()
                .collect()
        };
        let mut answers: Vec<Answer> = Vec::new();
        let mut ops = 0i64;
        for job in group {
            let Job { conn, feed } = job;
            ops += feed.ops.len() as i64;
            let mut index = if held.contains(&feed.collection) {
                self.index(&feed.collection)
            } else {
                Err(format!(
                    "unknown_collection: this distributor holds no content collection {:?}",
                    feed.collection
                ))
            };
            let results = feed
                .ops
                .into_iter()
                .map(|op| {
                    let op = match op {
                        Err((seq, why)) => return (seq, OpResult::Failed(why)),
                        Ok(op) => op,
                    };
                    let seq = op.seq as i64;
                    match &mut index {
                        Err(why) => (seq, OpResult::Failed(why.clone())),
                        Ok(ix) => match ix.apply(&op) {
                            Ok(_) => (seq, OpResult::Ok),
                            Err(e) => (seq, OpResult::Failed(transient(&e))),
                        },
                    }
                })
                .collect();
            answers.push(Answer {
                conn,
                id: feed.id,
                results,
                collection: feed.collection,
            });
        }
        // The group commit: one fdatasync per index touched.
        let mut failed: BTreeMap<String, String> = BTreeMap::new();
        let mut indexed = Vec::new();
        for c in answers
            .iter()
            .map(|a| &a.collection)
            .collect::<BTreeSet<_>>()
        {
            let Some(ix) = self.indexes.get_mut(c) else {
                continue;
            };
            if let Err(e) = ix.commit() {
                crawlfleet_core::warn_limited!(
                    "distributor-index-commit",
                    "index of {c:?}: {e}; failing the ops of this group"
                );
                failed.insert(c.clone(), transient(&e));
                continue;
            }
            match ix.maybe_compact() {
                Ok(true) => info!("index of {c:?}: compacted to {} bytes", ix.log_len()),
                Ok(false) => {}
                Err(e) => error!("index of {c:?}: compaction: {e}"),
            }
            indexed.push((c.clone(), ix.live()));
        }
        {
            let mut sh = self.shared.lock().unwrap_or_else(|p| p.into_inner());
            sh.node.ops_done(ops);
            for (c, n) in indexed {
                sh.node.set_indexed(&c, n);
            }
        }
        answers
            .into_iter()
            .map(|mut a| {
                if let Some(why) = failed.get(&a.collection) {
                    for r in &mut a.results {
                        if r.1 == OpResult::Ok {
                            r.1 = OpResult::Failed(why.clone());
                        }
                    }
                }
                let mut out = Vec::new();
                feed::reply(a.id, &a.results).encode_frame(&mut out);
                (a.conn, out)
            })
            .collect()
    }

    /// The index of a held collection, opened on first use (a collection added while running).
    fn index(&mut self, collection: &str) -> Result<&mut Index, String> {
        if !self.indexes.contains_key(collection) {
            let (mut ix, _) = Index::open(&self.data_dir, collection)
                .map_err(|e| format!("unavailable: cannot open the index: {e}"))?;
            self.search.attach_or_log(collection, &mut ix);
            self.indexes.insert(collection.to_owned(), ix);
        }
        self.indexes
            .get_mut(collection)
            .ok_or_else(|| "unavailable: no index".to_owned())
    }
}
