//! What the per-site tally (`site_tally.rs`) reads of the engine: the journal of each
//! collection's counters, and the site of an open request.

use super::super::counted::Journal;
use super::{CrawlEngine, SiteKey};

impl CrawlEngine {
    /// The journal of a collection's counters (`counted.rs`).
    pub fn journal(&mut self, coll: &[u8]) -> Option<&mut Journal> {
        self.counters.get_mut(coll).map(|c| c.journal_mut())
    }

    /// Clears every collection's journal.
    pub fn clear_journals(&mut self) {
        for c in self.counters.values_mut() {
            c.journal_mut().clear();
        }
    }

    /// The (collection, crawl site) of an open request, and whether it is the site's
    /// robots.txt rather than a crawl queue entry.
    pub fn flight_site(&self, id: u64) -> Option<(SiteKey, bool)> {
        self.flights
            .get(&id)
            .map(|f| (f.key.clone(), f.record.is_none()))
    }
}
