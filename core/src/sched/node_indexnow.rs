//! IndexNow submissions in the node scheduler (docs/indexnow.md): URLs whose key the node's
//! admin port checked are queued at once in every collection that covers their host.

use std::borrow::Cow;

use super::NodeScheduler;
use crate::crawl::engine::rule_skip;
use crate::msg::types::uri_flags;
use crate::msg::{CrawlQueueEntry, UriStructure};
use crate::sched::multinode::SchedError;

impl NodeScheduler {
    /// Queues `urls` (an IndexNow submission accepted by the admin port) at the front of the
    /// crawl queue of each collection covering them: one that names their host in
    /// `include_domains` and whose rules allow them. The submission says they changed, so they
    /// are fetched whole and again even if queued before in this refresh cycle (URIF_FORCE).
    /// Returns how many URLs no collection covers (dropped).
    pub fn indexnow_submitted(&mut self, urls: &[String]) -> Result<u64, SchedError> {
        let mut dropped = 0;
        let names: Vec<Vec<u8>> = self.collections.keys().cloned().collect();
        for url in urls {
            let mut queued = false;
            for name in &names {
                let Some(c) = self.collections.get_mut(name) else {
                    continue;
                };
                let cfg = &c.settings;
                if cfg.include_domains.is_empty() || rule_skip(cfg, url, 0).is_some() {
                    continue;
                }
                c.counters.indexnow_queued += 1;
                let mut e = CrawlQueueEntry::new(UriStructure::unparsed(Cow::Owned(
                    url.as_bytes().to_vec(),
                )));
                e.refresh_cycle = c.refresh.cycle;
                e.uri_flags |= uri_flags::URIF_FORCE;
                self.add_uri(name, &e, true)?;
                queued = true;
            }
            if !queued {
                dropped += 1;
            }
        }
        self.indexnow_dropped += dropped;
        Ok(dropped)
    }

    /// IndexNow URLs dropped since the node started: no collection covers their host.
    pub fn indexnow_dropped(&self) -> u64 {
        self.indexnow_dropped
    }
}
