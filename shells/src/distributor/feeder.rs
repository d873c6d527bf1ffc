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
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crawlfleet_core::distributor::feed::{self, Feed, OpResult};
use crawlfleet_core::distributor::index::Index;
use crawlfleet_core::recordlog::LogError;
use crawlfleet_net::{ConnId, Handle, Priority};
use crossbeam_channel::{Receiver, Sender, TrySendError};
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

/// Bytes of ops waiting for the index thread past which a request is answered `unavailable`
/// at once instead of queued.
pub(crate) const MAX_QUEUED_BYTES: usize = 64 << 20;

/// The bytes of ops handed to the index thread and not yet answered.
#[derive(Clone, Default)]
pub(crate) struct Queue(Arc<AtomicUsize>);

/// About the memory a request's ops hold.
fn weight(feed: &Feed) -> usize {
    let op = |o: &crawlfleet_core::distributor::index::Op| {
        let h: usize = o.headers.iter().map(|(k, v)| k.len() + v.len()).sum();
        128 + o.doc.len() + o.body.len() + h
    };
    feed.ops.iter().map(|r| r.as_ref().map_or(64, op)).sum()
}

impl Queue {
    /// Hands `job` to the index thread unless that would pass [`MAX_QUEUED_BYTES`] (one
    /// request alone always goes) or the channel is full: then the job comes back.
    pub(crate) fn offer(&self, tx: &Sender<Job>, job: Job) -> Result<(), Job> {
        let w = weight(&job.feed);
        self.offer_weighed(tx, job, w)
    }

    fn offer_weighed<T>(&self, tx: &Sender<T>, job: T, w: usize) -> Result<(), T> {
        let before = self.0.fetch_add(w, Ordering::AcqRel);
        if before > 0 && before + w > MAX_QUEUED_BYTES {
            self.0.fetch_sub(w, Ordering::AcqRel);
            return Err(job);
        }
        match tx.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
                self.0.fetch_sub(w, Ordering::AcqRel);
                Err(job)
            }
        }
    }

    fn done(&self, w: usize) {
        self.0.fetch_sub(w, Ordering::AcqRel);
    }
}

/// The reply to a request the queue could not take: every op `failed` `unavailable` (the
/// client sends them again later); the load no longer counts them.
pub(crate) fn busy(job: Job, shared: &Mutex<Shared>) -> (ConnId, Vec<u8>) {
    let why = "unavailable: the distributor's index is busy; send again later";
    let results: Vec<(i64, OpResult)> = job
        .feed
        .ops
        .iter()
        .map(|r| match r {
            Ok(op) => (op.seq as i64, OpResult::Failed(why.to_owned())),
            Err((seq, reason)) => (*seq, OpResult::Failed(reason.clone())),
        })
        .collect();
    shared
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .node
        .ops_done(results.len() as i64);
    let mut out = Vec::new();
    feed::reply(job.feed.id, &results).encode_frame(&mut out);
    (job.conn, out)
}

/// Opens the index of `collection`: the one place an index is opened (at the start, or on the
/// first op of a collection added while running), where an [`ApplyHook`] is set on it.
///
/// [`ApplyHook`]: crawlfleet_core::distributor::index::ApplyHook
fn open_index(
    data_dir: &std::path::Path,
    collection: &str,
) -> Result<(Index, crawlfleet_core::recordlog::Recovered), LogError> {
    Index::open(data_dir, collection)
}

/// Opens the index of every collection in `collections`, before anything is served.
pub(crate) fn open_all(
    data_dir: &std::path::Path,
    collections: &[String],
) -> Result<BTreeMap<String, Index>, String> {
    let mut out = BTreeMap::new();
    for c in collections {
        let (ix, rec) = open_index(data_dir, c).map_err(|e| e.to_string())?;
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

/// Starts the index thread; it ends when `jobs` closes, after answering the groups taken.
pub(crate) fn spawn(
    queue: Queue,
    data_dir: PathBuf,
    indexes: BTreeMap<String, Index>,
    shared: Arc<Mutex<Shared>>,
    handle: Handle,
    jobs: Receiver<Job>,
    search: Search,
) -> Result<std::thread::JoinHandle<()>, String> {
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
                let w: usize = group.iter().map(|j| weight(&j.feed)).sum();
                let replies = f.group(group);
                queue.done(w);
                for (conn, bytes) in replies {
                    if handle.send(conn, Priority::Normal, bytes).is_err() {
                        return;
                    }
                }
            }
        })
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
            let (mut ix, _) = open_index(&self.data_dir, collection)
                .map_err(|e| format!("unavailable: cannot open the index: {e}"))?;
            self.search.attach_or_log(collection, &mut ix);
            self.indexes.insert(collection.to_owned(), ix);
        }
        self.indexes
            .get_mut(collection)
            .ok_or_else(|| "unavailable: no index".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_by_bytes_and_by_requests() {
        let q = Queue::default();
        let (tx, rx) = crossbeam_channel::bounded::<u32>(3);
        // One request alone goes whatever its size.
        assert_eq!(q.offer_weighed(&tx, 1, MAX_QUEUED_BYTES * 2), Ok(()));
        assert_eq!(q.offer_weighed(&tx, 2, 1), Err(2), "over the byte bound");
        q.done(MAX_QUEUED_BYTES * 2);
        assert_eq!(q.offer_weighed(&tx, 3, 10), Ok(()));
        assert_eq!(q.offer_weighed(&tx, 4, 10), Ok(()));
        assert_eq!(q.offer_weighed(&tx, 5, 10), Err(5), "the channel is full");
        assert_eq!(
            q.0.load(Ordering::Acquire),
            20,
            "a refused request is not counted"
        );
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), [1, 3, 4]);
    }
}
