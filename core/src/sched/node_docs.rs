//! The node scheduler's side of document duplicate detection (MS-FSCMT 3.1.5.23): a fetched
//! document's checksum goes to the collection's duplicate servers as PPDUP_ADD, and the
//! PPDUP_ADD_OK answer (PKT_OWNURI) says whether this URI owns it. Without duplicate servers
//! the node's own checksum database decides at once.

use crate::msg::Checksum;

use super::store::Fate;
use super::NodeScheduler;
use crate::sched::multinode::SchedError;

/// What became of a fetched document (the answer to its duplicate check, or the crawl
/// store's comparison).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The collection.
    pub collection: Vec<u8>,
    /// The document's URI.
    pub uri: Vec<u8>,
    /// The document's checksum.
    pub checksum: Checksum,
    /// The URI that owns the checksum when a duplicate check decided (`uri` itself when the
    /// document is unique); empty otherwise.
    pub owner: Vec<u8>,
    /// Fed, unchanged, duplicate or deleted.
    pub fate: Fate,
}

impl Verdict {
    /// True when another URI owns the checksum (document skip code `cs`).
    pub fn is_duplicate(&self) -> bool {
        self.fate == Fate::Duplicate
    }
}

impl NodeScheduler {
    /// Queues the statistics structure of MS-FSCADM 2.2.5 the next CMD_UM_STAT carries
    /// (MS-FSCMT 2.2.4.6; one per refresh cycle that gathered something since the last).
    pub fn add_stat_report(&mut self, name: &[u8], report: crate::marshal::Value<'static>) {
        if let Some(c) = self.collections.get_mut(name) {
            // Not sent for a long while (no multinode scheduler): the oldest go.
            if c.stat_reports.len() >= 64 {
                c.stat_reports.remove(0);
            }
            c.stat_reports.push(report);
        }
    }

    /// Unique document checksums in the collection's checksum database (MS-FSCADM 2.2.4.10
    /// PPChecksums).
    pub fn checksums(&self, name: &[u8]) -> Option<usize> {
        self.collections.get(name).map(|c| c.dedup.checksums.len())
    }

    /// Refresh cycles begun over all collections since the node started: a change tells the
    /// statistics to start a cycle.
    pub fn cycles_begun(&self) -> u64 {
        self.cycles_begun
    }

    /// Verdicts that arrived from duplicate servers since the last call.
    pub fn take_verdicts(&mut self) -> Vec<Verdict> {
        std::mem::take(&mut self.verdicts)
    }

    /// The crawl engine finished the entry `seq` of [`super::Ready`] (crawled or skipped): it
    /// no longer comes back after a restart once the next [`NodeScheduler::sync`] made what
    /// came of it durable (after a kill; after a power loss, once the sync after that made its
    /// mark durable too, or the node stopped cleanly).
    pub fn entry_done(&mut self, name: &[u8], seq: u64) -> Result<(), SchedError> {
        if let Some(c) = self.collections.get_mut(name) {
            c.finished.push(seq);
        }
        Ok(())
    }

    /// True when the collection's crawl queues and the site manager hold nothing (and its crawl
    /// is not paused for a full disk, with what it fetched still unwritten).
    pub fn is_drained(&self, name: &[u8]) -> bool {
        self.collections.get(name).is_none_or(|c| {
            c.queue.is_empty()
                && !c.has_spill()
                && !c.is_disk_full()
                && c.sites.ready.is_empty()
                && c.sites.visit.is_empty()
                && c.sites.waiting.values().all(|w| w.records.is_empty())
                && c.dedup.pending_adds.is_empty()
                && c.dedup.pending_docs.is_empty()
                && c.inflight.len() <= c.finished.len()
        })
    }
}
