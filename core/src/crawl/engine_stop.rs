//! The crawl engine forgetting a collection or stopping sites: the entries it held go back to
//! the node scheduler (MS-FSCMT 3.1.5.4, 3.1.5.12, 3.1.5.13, 3.1.5.17).

use super::{Action, CrawlEngine, SiteKey};

impl CrawlEngine {
    /// Forgets a collection: its entries held here are dropped and its sites released.
    pub fn remove_collection(&mut self, name: &[u8]) -> Vec<Action> {
        self.configs.remove(name);
        let mut out = Vec::new();
        let keys: Vec<SiteKey> = self.sites.keys().filter(|k| k.0 == name).cloned().collect();
        for k in keys {
            if let Some(s) = self.sites.remove(&k) {
                self.queued -= s.queue.len();
                self.done
                    .extend(s.queue.into_iter().map(|h| (k.0.clone(), h.seq)));
            }
            out.push(Action::SiteDone {
                collection: k.0.clone(),
                site: k.1.clone(),
            });
        }
        out
    }

    /// Stops `sites` of collection `name` (the node scheduler stopped crawling them: MS-FSCMT
    /// 3.1.5.4, 3.1.5.13, 3.1.5.17): no new request starts for them, and the entries held here
    /// come back, as (in-flight sequence number, record), for the node scheduler to queue
    /// again. Requests already open finish; their outcomes are read as usual. `None` stops
    /// every site of the collection.
    pub fn withdraw(&mut self, name: &[u8], sites: Option<&[String]>) -> Vec<(u64, Vec<u8>)> {
        let keys: Vec<SiteKey> = self
            .sites
            .keys()
            .filter(|k| k.0 == name && sites.is_none_or(|s| s.contains(&k.1)))
            .cloned()
            .collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(s) = self.sites.remove(&k) {
                self.queued -= s.queue.len();
                out.extend(s.queue.into_iter().map(|h| (h.seq, h.record)));
            }
        }
        out
    }
}
