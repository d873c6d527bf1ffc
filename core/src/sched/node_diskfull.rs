//! A full disk pauses a collection's crawl on the node instead of stopping the node (issue
//! "Disk full": an answer, never an exit).
//!
//! - The stores never cut an operation in half for lack of room: the crawl store, the document
//!   log, the in-flight journal and the seen set keep what they could not write queued in
//!   memory (cut back off the file, [`crate::diskfull`]) and report the failure at their sync.
//!   A crawl queue cannot queue without room (its segments are allocated before a record is
//!   copied in), so an entry it refuses waits in the collection's *spill*, in order, with the
//!   in-flight entry it replaces still journaled.
//! - The first such failure pauses the collection: no entry is taken from its queues and none
//!   of its ready entries is handed to the crawl engine; fetches under way finish into memory.
//!   Its state reads as 5, "Disk full" (MS-FSCADM 2.2.3.3, MS-FSCMT 2.2.3.21), in the
//!   administrative status; the node logs one line (rate-limited when repeated).
//! - Every second the sync timer tries the collection's writes again: the spill first, then
//!   the syncs in their usual order (feed, crawl store, then the finished entries). Nothing is
//!   finished while anything before it failed, so a SIGKILL during the pause loses only what no
//!   one was told was done: those entries are fetched again after the restart. When a whole
//!   sync succeeds the crawl resumes by itself.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use log::{debug, info};

use super::{show, Collection, NodeScheduler, SchedError};
use crate::msg::types::conf_state;
use crate::queue::CrawlQueue;
use crate::recordlog::{run_commits, Commit};

/// Room the in-flight journal keeps allocated for one more entry before one is taken from a
/// queue (a crawl queue entry: URI, flags and the like; a larger one still goes, unreserved).
pub(super) const ENTRY_RESERVE: u64 = 128 << 10;
/// How often a paused collection's writes are tried again.
pub const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Entries kept in memory per collection while its queues have no room; past it an entry is
/// dropped (and logged), so a multinode scheduler sending on cannot exhaust the memory.
const MAX_SPILL: usize = 1 << 20;

/// One of a collection's crawl queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The crawl queue.
    Queue,
    /// The quarantine queue.
    Quarantine,
    /// New URIs held while the collection only refreshes.
    NewHeld,
}

/// An entry a crawl queue had no room for.
struct Spilled {
    to: Target,
    front: bool,
    rec: Vec<u8>,
    /// The in-flight entry it came from: finished once the entry is back in a queue.
    done: Option<u64>,
}

/// A collection's disk-full pause.
#[derive(Default)]
pub(super) struct DiskPause {
    /// Why the crawl is paused, since when, when to try again.
    full: Option<(String, Instant, Instant)>,
    spill: VecDeque<Spilled>,
}

#[cfg(test)]
thread_local! {
    /// Makes [`Collection::put_back`] stop after writing the journal's record and before
    /// publishing its pushes, where a test then "kills" the scheduler (`tests_kill.rs`).
    pub(in crate::sched) static KILL_BEFORE_PUT_BACK_PUBLISHED: std::cell::Cell<bool> =
        const { std::cell::Cell::new(false) };
}

impl Collection {
    pub(super) fn queue_of(&mut self, to: Target) -> &mut CrawlQueue {
        match to {
            Target::Queue => &mut self.queue,
            Target::Quarantine => &mut self.quarantine_queue,
            Target::NewHeld => &mut self.refresh.new_held,
        }
    }

    fn push_to(&mut self, to: Target, front: bool, rec: &[u8]) -> Result<(), SchedError> {
        // A push publishes the pops taken before it without publishing (the site manager's,
        // `dispatch`): the journal records of the entries they took are written first.
        if matches!(to, Target::Queue) && self.queue.has_unpublished() {
            self.inflight.write()?;
        }
        let q = self.queue_of(to);
        if front {
            q.push_front(rec)?;
        } else {
            q.push_back(rec)?;
        }
        Ok(())
    }

    /// Puts `rec` in queue `to` (front or back); `done` is the in-flight entry it came from,
    /// finished once it is queued. Without room it waits in the spill (and the crawl pauses);
    /// while the spill holds anything, later entries wait behind it, keeping their order.
    pub(super) fn enqueue(
        &mut self,
        to: Target,
        front: bool,
        rec: &[u8],
        done: Option<u64>,
    ) -> Result<(), SchedError> {
        if self.disk.spill.is_empty() {
            match self.push_to(to, front, rec) {
                Ok(()) => {
                    if let Some(seq) = done {
                        self.inflight.done(seq)?;
                    }
                    return Ok(());
                }
                Err(e) if e.is_disk_full() => self.pause_disk_full(&e, Instant::now()),
                Err(e) => return Err(e),
            }
        }
        if self.disk.spill.len() >= MAX_SPILL {
            // Still journaled when it came from the in-flight journal: back after a restart.
            self.counters.uris_dropped += 1;
            crate::warn_limited!(
                "node-spill-full",
                "collection {}: disk full and {MAX_SPILL} entries waiting in memory: an entry dropped",
                show(&self.name)
            );
            return Ok(());
        }
        self.disk.spill.push_back(Spilled {
            to,
            front,
            rec: rec.to_vec(),
            done,
        });
        Ok(())
    }

    /// Publishes the crawl queue's pops taken unpublished once the journal's records of the
    /// entries taken are written (no fdatasync): a kill before that leaves the entries queued
    /// (and maybe journaled too: fetched twice), never in neither place. Without room the
    /// records wait in memory and the pops stay unpublished (false); a sync writes them, the
    /// journal before the queue.
    pub(super) fn publish_taken(&mut self) -> Result<bool, SchedError> {
        let written = self.inflight.write();
        if !self.written_or_paused(written)? {
            return Ok(false);
        }
        self.queue.publish()?;
        Ok(true)
    }

    /// Takes the outcome of a write the crawl can wait for: `Ok(true)` when it succeeded,
    /// `Ok(false)` when the disk is full (the collection pauses and what was not written
    /// waits for a later write), any other failure as the error.
    pub(super) fn written_or_paused<E: Into<SchedError>>(
        &mut self,
        r: Result<(), E>,
    ) -> Result<bool, SchedError> {
        match r {
            Ok(()) => Ok(true),
            Err(e) => {
                let e = e.into();
                if !e.is_disk_full() {
                    return Err(e);
                }
                self.pause_disk_full(&e, Instant::now());
                Ok(false)
            }
        }
    }

    /// Puts entries taken from the crawl queue back in it, `entries` (in-flight sequence
    /// number, record) in the order they are to be crawled, at the front (`front`) or the
    /// back, each finished in the in-flight journal. The pushes are made unpublished, the
    /// journal's record finishing them all written (naming the queue generation that publishes
    /// them, [`Inflight::put_back`]), then the pushes published: a kill before the publication,
    /// even one that cuts the record's write, leaves the entries journaled only (queued again
    /// once by the restart), a kill after it finds them queued and finished. (Pushed and
    /// finished one by one, with the `-` records in memory until the next sync, a kill while
    /// thousands went back left each in both; with the `-` records written after the
    /// publication, a kill that cut that write left the rest of the batch in both.)
    ///
    /// [`Inflight::put_back`]: super::inflight::Inflight::put_back
    pub(super) fn put_back(
        &mut self,
        entries: &[(u64, Vec<u8>)],
        front: bool,
    ) -> Result<(), SchedError> {
        if self.disk.spill.is_empty() && self.queue.has_unpublished() {
            // Pops the site manager took without publishing: their `+` records first.
            self.publish_taken()?;
        }
        let mut together = self.disk.spill.is_empty() && !self.queue.has_unpublished();
        let ordered: Vec<&(u64, Vec<u8>)> = if front {
            entries.iter().rev().collect()
        } else {
            entries.iter().collect()
        };
        let mut pushed: Vec<u64> = Vec::new();
        for (seq, rec) in ordered {
            if together {
                match self.queue.push_unpublished(rec, front) {
                    Ok(()) => {
                        pushed.push(*seq);
                        continue;
                    }
                    Err(e) => {
                        // What was pushed is published before anything else is written.
                        self.publish_put_back(&pushed)?;
                        pushed.clear();
                        let e = SchedError::from(e);
                        if !e.is_disk_full() {
                            return Err(e);
                        }
                        together = false;
                    }
                }
            }
            // One at a time (a full disk: the spill).
            self.enqueue(Target::Queue, front, rec, Some(*seq))?;
        }
        self.publish_put_back(&pushed)?;
        self.write_journal()
    }

    /// Finishes entries `seqs`, pushed back in the crawl queue unpublished, in the journal
    /// (one record naming the generation of the publication), writes it, then publishes the
    /// pushes. Without room for the record the pushes are published anyway: a kill before the
    /// record is written then finds the entries queued and outstanding (fetched twice, none
    /// lost).
    fn publish_put_back(&mut self, seqs: &[u64]) -> Result<(), SchedError> {
        let written = match seqs {
            [] => Ok(true),
            _ => {
                let generation = self.queue.next_publish_generation();
                self.inflight.put_back(seqs, generation);
                let written = self.inflight.write();
                self.written_or_paused(written)
            }
        };
        #[cfg(test)]
        if KILL_BEFORE_PUT_BACK_PUBLISHED.get() {
            // A test's kill right here: the caller forgets the scheduler.
            return written.map(drop);
        }
        self.queue.publish()?;
        written.map(drop)
    }

    /// Writes the seen set's and the in-flight journal's records of this turn (no fdatasync:
    /// the sync timer's). The crawl queue's pushes outlive a kill at once (a mapped file): a
    /// URI queued whose seen record stayed in memory was queued a second time when a page
    /// fetched again after the restart linked to it, and crawled twice. One write of each
    /// per turn, after the pushes (the other order could lose a URI: seen, never queued).
    pub(super) fn write_turn(&mut self) -> Result<(), SchedError> {
        let written = self.seen.write();
        self.written_or_paused(written)?;
        self.write_journal()
    }

    /// Writes the in-flight journal's queued records (no fdatasync: the sync timer's) after
    /// entries went back to a queue through [`Collection::enqueue`] with their journal entry:
    /// the queue's push outlives a kill at once, and so must their `-`, or the restart queues
    /// them again from the journal and each is crawled twice. One write for all the entries
    /// put back. Without room the collection pauses and the records wait for the next sync.
    pub(super) fn write_journal(&mut self) -> Result<(), SchedError> {
        let written = self.inflight.write();
        self.written_or_paused(written).map(drop)
    }

    /// Queues what waited in the spill, oldest first; stops at the first refusal.
    fn drain_spill(&mut self) -> Result<(), SchedError> {
        while let Some(s) = self.disk.spill.front() {
            let (to, front, done) = (s.to, s.front, s.done);
            let rec = std::mem::take(&mut self.disk.spill[0].rec);
            if let Err(e) = self.push_to(to, front, &rec) {
                self.disk.spill[0].rec = rec;
                return Err(e);
            }
            self.disk.spill.pop_front();
            if let Some(seq) = done {
                self.inflight.done(seq)?;
            }
        }
        Ok(())
    }

    /// Pauses the crawl for a full disk (logged once; the next try in [`RETRY_EVERY`]).
    ///
    /// A visit's entries waiting for the engine join the ready ones: they wait through the
    /// pause, counted by the dispatch's capacity and handed out at most `max` at a time like
    /// them, where the engine's room for visits ([`crate::crawl::CrawlEngine::visit_room`])
    /// would no longer count them once the next step began.
    pub(super) fn pause_disk_full(&mut self, e: &SchedError, now: Instant) {
        self.sites.fold_visits();
        match &mut self.disk.full {
            Some((_, _, next)) => {
                *next = now + RETRY_EVERY;
                debug!("collection {}: still no room: {e}", show(&self.name));
            }
            None => {
                crate::warn_limited!(
                    "node-disk-full",
                    "collection {}: crawl paused, the disk is full: {e}; trying again every {} s",
                    show(&self.name),
                    RETRY_EVERY.as_secs()
                );
                self.disk.full = Some((e.to_string(), now, now + RETRY_EVERY));
            }
        }
    }

    /// True when entries wait in memory for room in the queues.
    pub(super) fn has_spill(&self) -> bool {
        !self.disk.spill.is_empty()
    }

    /// True while the crawl is paused for a full disk.
    pub(super) fn is_disk_full(&self) -> bool {
        self.disk.full.is_some()
    }

    /// Every write of the collection, in the order that finishes nothing before what it
    /// depends on is durable (see `node_store.rs`).
    ///
    /// The files are made durable at once rather than one after another (the node's thread
    /// would otherwise wait for each device flush in turn): the seen set's, the in-flight
    /// journal's and the document log's fdatasyncs each on a helper thread, the crawl store's
    /// after the document log's on the same helper (its last records are written only once the
    /// feed is durable, as before), the crawl queues' msyncs on this thread. What waits for a
    /// sync still waits for it: the finished entries are marked done only after the feed and
    /// the store are durable; those marks reach the disk with the journal's next sync, as a
    /// kill before it would find them missing and fetch the entries again.
    fn sync_all(&mut self) -> Result<(), SchedError> {
        // First the journal of the entries taken from the queues (into room reserved for
        // them): the queue's sync publishes any pop not published yet, and a published pop
        // outlives a kill, so must its record.
        self.inflight.write()?;
        let spilled = self.has_spill();
        self.drain_spill()?;
        if spilled {
            // The journal's marks of the entries the spill put back in the queues may reach the
            // disk only after those queues: they are synced first, alone (the spill is only
            // ever drained when a full disk has room again).
            self.queue.sync()?;
            self.quarantine_queue.sync()?;
            self.refresh.new_held.sync()?;
        }
        // A log that cannot write its records (a full disk) does not keep the queues from
        // being synced: its failure is returned after theirs, as when the logs synced in turn.
        let mut seen = self.seen.sync_begin();
        let mut inflight = self.inflight.sync_begin();
        let mut feed = self.feeding.feeder.sync_begin();
        let mut store = None;
        let Collection {
            queue,
            quarantine_queue,
            refresh,
            store: crawl_store,
            ..
        } = self;
        let queues = run_commits(
            seen.iter_mut()
                .flatten()
                .chain(inflight.iter_mut().flatten()),
            || {
                let Ok(feed) = &mut feed else {
                    return;
                };
                let mut fed = true;
                for c in feed.commits_mut() {
                    c.run();
                    fed &= !c.failed();
                }
                // Nothing more of the store is written while the feed is not durable.
                if fed {
                    store = Some(crawl_store.sync_begin().map(|mut c| {
                        c.iter_mut().for_each(Commit::run);
                        c
                    }));
                }
            },
            || -> Result<(), SchedError> {
                queue.sync()?;
                quarantine_queue.sync()?;
                refresh.new_held.sync()?;
                Ok(())
            },
        );
        // Every commit is settled (a failed one takes its records back to write them again)
        // before the first failure, in the order above, is returned.
        let seen = seen.and_then(|c| self.seen.sync_end(c));
        let inflight = inflight.and_then(|c| self.inflight.sync_end(c));
        let fed = feed.and_then(|c| self.feeding.feeder.sync_end(c));
        let stored = match store {
            Some(Ok(c)) => self.store.sync_end(c),
            Some(Err(e)) => Err(e),
            None => Ok(()),
        };
        queues?;
        seen?;
        fed?;
        stored?;
        NodeScheduler::finish_stored(self)?;
        inflight?;
        // Room for the next entry taken, or the crawl would pause again at once.
        self.inflight.reserve(ENTRY_RESERVE)?;
        Ok(())
    }
}

impl NodeScheduler {
    /// Ends an event loop turn: what the turn recorded in the seen sets and in-flight journals
    /// is written (no fdatasync), so a kill after the turn finds each URI it queued recorded as
    /// seen, and each entry it put back finished ([`Collection::write_turn`]).
    pub fn end_turn(&mut self) -> Result<(), SchedError> {
        for c in self.collections.values_mut() {
            if c.disk.full.is_none() {
                c.write_turn()?;
            }
        }
        Ok(())
    }

    /// Makes queues, routes, feed and stores durable (the shell's sync timer). A store without
    /// room pauses its collection (the routing database: every collection); a paused
    /// collection is tried again every [`RETRY_EVERY`] and resumes when everything is written.
    /// Only other failures are returned.
    pub fn sync(&mut self) -> Result<(), SchedError> {
        self.sync_at(Instant::now())
    }

    /// [`NodeScheduler::sync`] at `now`.
    pub fn sync_at(&mut self, now: Instant) -> Result<(), SchedError> {
        let routes = match self.routing.sync() {
            Ok(()) => None,
            Err(e) => {
                let e = SchedError::from(e);
                if !e.is_disk_full() {
                    return Err(e);
                }
                Some(e)
            }
        };
        for c in self.collections.values_mut() {
            if let Some(e) = &routes {
                c.pause_disk_full(e, now);
            }
            if c.disk.full.as_ref().is_some_and(|(_, _, next)| now < *next) {
                continue;
            }
            match c.sync_all() {
                Ok(()) => {
                    if let Some((why, since, _)) = c.disk.full.take() {
                        info!(
                            "collection {}: room again, crawl resumed after {:.1} s paused ({why})",
                            show(&c.name),
                            now.duration_since(since).as_secs_f64()
                        );
                    }
                }
                Err(e) if e.is_disk_full() => c.pause_disk_full(&e, now),
                Err(e) => return Err(e),
            }
        }
        // Everything received is durable unless a collection is paused (its spill is in
        // memory): only then do the keep-alives received so far get their answers.
        if routes.is_none() && !self.collections.values().any(|c| c.disk.full.is_some()) {
            for _ in 0..std::mem::take(&mut self.keepalive_acks_owed) {
                self.send_multinode(
                    crate::frame::Priority::Normal,
                    &crate::msg::Message::CmdUmKeepaliveAck,
                );
            }
        }
        Ok(())
    }

    /// A store found no room in the middle of an operation the node could not finish: every
    /// collection pauses until a sync writes everything again.
    pub fn disk_full(&mut self, e: &SchedError) {
        let now = Instant::now();
        for c in self.collections.values_mut() {
            c.pause_disk_full(e, now);
        }
    }

    /// Why collection `name`'s crawl is paused for a full disk, if it is.
    pub fn disk_full_reason(&self, name: &[u8]) -> Option<&str> {
        self.collections
            .get(name)
            .and_then(|c| c.disk.full.as_ref())
            .map(|(why, _, _)| why.as_str())
    }

    /// Entries of `name` waiting in memory for room in its queues.
    pub fn spilled(&self, name: &[u8]) -> usize {
        self.collections.get(name).map_or(0, |c| c.disk.spill.len())
    }

    /// The state the administrative status reports for `name`: its state, or 5 (suspended,
    /// disk full: MS-FSCADM 2.2.3.3, "Disk full" in 2.2.5) while an active collection is paused
    /// for a full disk, or 8 (suspended by a variable delay configuration) while a
    /// `variable_delay` period suspends it.
    pub fn reported_state(&self, name: &[u8]) -> Option<i64> {
        self.collections.get(name).map(|c| {
            if c.state == conf_state::ACTIVE && c.is_disk_full() {
                conf_state::SUSPENDED_DISK
            } else if c.state == conf_state::ACTIVE && c.settings.current_delay().is_none() {
                conf_state::SUSPENDED_VARIABLE_DELAY
            } else {
                c.state
            }
        })
    }
}
