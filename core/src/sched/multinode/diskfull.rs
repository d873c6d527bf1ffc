//! A full disk pauses the multinode scheduler's routing instead of stopping it (issue "Disk
//! full": an answer, never an exit), as [`crate::sched::node`] pauses a node's collection.
//!
//! - A crawl queue cannot queue without room (its segments are allocated before a record is
//!   copied in): an entry it refuses (a CMD_UM_URI from a node, an entry waiting for a node)
//!   waits in the *spill*, in arrival order, and every later entry goes behind it, so a
//!   collection's queue order is kept. The spill is bounded ([`MAX_SPILL`]); past it an entry
//!   is dropped and counted in the log line, so a node flooding a scheduler whose disk stays
//!   full cannot exhaust its memory.
//! - The routing database keeps the decisions it could not write queued in memory and reports
//!   the failure at its sync. A routing decision persists before anyone hears of it (MS-FSCMT
//!   3.2.5.5 step 2.1), so while the disk is full no entry is taken from a crawl queue and no
//!   new decision is made. The frames of the batch whose sync failed are still sent: a node
//!   reports its routes again when asked (CMD_UM_ASK_ROUTE, 2.2.3.9), so a decision lost in a
//!   crash during the pause is made whole, never made twice.
//! - Every sync tick tries the writes again: the spill first, then the routing database and the
//!   queues. When a whole sync succeeds routing resumes by itself, with one log line.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use log::{info, warn};

use super::{show, Multinode, SchedError};
use crate::queue::CrawlQueue;

/// Entries kept in memory while the crawl queues have no room; past it an entry is dropped (and
/// counted in the log).
pub const MAX_SPILL: usize = 1 << 20;
/// Least time between two log lines about the pause.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Which queue of a collection an entry goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Target {
    /// The crawl queue, at its back.
    Back,
    /// The crawl queue, at its front (an urgent entry).
    Front,
    /// The entries waiting for a node to connect.
    Deferred,
}

struct Spilled {
    collection: Vec<u8>,
    to: Target,
    rec: Vec<u8>,
}

/// The scheduler's disk-full pause.
#[derive(Default)]
pub(super) struct DiskPause {
    /// Since when routing is paused, and why.
    paused: Option<(Instant, String)>,
    spill: VecDeque<Spilled>,
    /// Entries dropped because the spill was full, since the last log line.
    dropped: u64,
    logged: Option<Instant>,
}

impl DiskPause {
    /// True while routing is paused.
    pub(super) fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    fn pause(&mut self, why: &SchedError) {
        if self.paused.is_none() {
            warn!("disk full, routing paused until space returns: {why}");
            self.paused = Some((Instant::now(), why.to_string()));
            self.logged = Some(Instant::now());
        } else {
            self.log_repeat(why);
        }
    }

    fn log_repeat(&mut self, why: &dyn std::fmt::Display) {
        if self.logged.is_some_and(|t| t.elapsed() < LOG_EVERY) {
            return;
        }
        self.logged = Some(Instant::now());
        let dropped = std::mem::take(&mut self.dropped);
        warn!(
            "disk still full ({why}); {} entries wait in memory, {dropped} dropped since the last line",
            self.spill.len()
        );
    }
}

fn push(q: &mut CrawlQueue, to: Target, rec: &[u8]) -> Result<(), crate::queue::QueueError> {
    match to {
        Target::Front => q.push_front(rec),
        Target::Back | Target::Deferred => q.push_back(rec),
    }
}

impl Multinode {
    /// Queues `rec` in the collection `name`'s queue `to`; a queue without room keeps it in
    /// the spill (pausing routing) instead of failing. Any other error stops the role.
    pub(super) fn queue_record(
        &mut self,
        name: &[u8],
        to: Target,
        rec: &[u8],
    ) -> Result<(), SchedError> {
        if self.disk.spill.is_empty() {
            let Some(c) = self.collections.get_mut(name) else {
                return Ok(());
            };
            let q = match to {
                Target::Deferred => &mut c.deferred,
                _ => &mut c.queue,
            };
            match push(q, to, rec) {
                Ok(()) => return Ok(()),
                Err(e) if e.is_disk_full() => self.disk.pause(&SchedError::Queue(e)),
                Err(e) => return Err(e.into()),
            }
        }
        if self.disk.spill.len() >= MAX_SPILL {
            self.disk.dropped += 1;
            self.disk
                .log_repeat(&format_args!("an entry of {} dropped", show(name)));
            return Ok(());
        }
        self.disk.spill.push_back(Spilled {
            collection: name.to_vec(),
            to,
            rec: rec.to_vec(),
        });
        Ok(())
    }

    /// True while a full disk holds routing (nothing is taken from the crawl queues).
    pub fn disk_paused(&self) -> bool {
        self.disk.is_paused()
    }

    /// Entries waiting in memory for room in the crawl queues.
    pub fn spilled(&self) -> usize {
        self.disk.spill.len()
    }

    /// Moves the entries of collection `name` that waited for a node back to its crawl queue;
    /// stops (leaving the rest waiting) when the queue has no room, and goes on when the pause
    /// ends.
    pub(super) fn requeue_deferred(&mut self, name: &[u8]) -> Result<(), SchedError> {
        while !self.disk.is_paused() {
            let Some(c) = self.collections.get_mut(name) else {
                return Ok(());
            };
            let Some(rec) = c.deferred.pop_front()? else {
                return Ok(());
            };
            self.queue_record(name, Target::Back, &rec)?;
        }
        Ok(())
    }

    /// Moves spilled entries into their queues, in order, until one finds no room.
    fn drain_spill(&mut self) -> Result<(), SchedError> {
        while let Some(s) = self.disk.spill.front() {
            if let Some(c) = self.collections.get_mut(&s.collection) {
                let q = match s.to {
                    Target::Deferred => &mut c.deferred,
                    _ => &mut c.queue,
                };
                push(q, s.to, &s.rec)?;
            }
            self.disk.spill.pop_front();
        }
        Ok(())
    }

    /// Makes queues, routes and log lines durable (the shell's sync timer). A full disk pauses
    /// routing instead of failing; the first sync that succeeds whole resumes it.
    pub fn sync(&mut self) -> Result<(), SchedError> {
        // Entries forwarded since the last tick get a keep-alive behind them (`retain.rs`).
        self.confirm_tick();
        match self.drain_spill().and_then(|()| self.sync_stores()) {
            Ok(()) => {
                let Some((since, _)) = self.disk.paused.take() else {
                    return Ok(());
                };
                info!(
                    "disk has room again: routing resumed after {:.1} s",
                    since.elapsed().as_secs_f64()
                );
                if self.nodes.is_empty() {
                    return Ok(());
                }
                // Entries left waiting for a node when the pause began.
                let names: Vec<Vec<u8>> = self.collections.keys().cloned().collect();
                for name in names {
                    self.requeue_deferred(&name)?;
                }
                Ok(())
            }
            Err(e) if e.is_disk_full() => {
                self.disk.pause(&e);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// The routing database's sync at the end of a pump step: a full disk pauses routing.
    pub(super) fn sync_routes(&mut self) -> Result<(), SchedError> {
        match self.routing.sync() {
            Ok(()) => Ok(()),
            Err(e) => {
                let e = SchedError::from(e);
                if !e.is_disk_full() {
                    return Err(e);
                }
                self.disk.pause(&e);
                Ok(())
            }
        }
    }

    fn sync_stores(&mut self) -> Result<(), SchedError> {
        self.routing.sync()?;
        for c in self.collections.values_mut() {
            c.queue.sync()?;
            c.deferred.sync()?;
        }
        for ((c, f), w) in self.logs.iter_mut() {
            if let Err(e) = std::io::Write::flush(w) {
                warn!("log file {f} of {}: {e}", show(c));
            }
        }
        Ok(())
    }
}
