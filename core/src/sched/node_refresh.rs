//! Refresh cycles of the node scheduler: the refresh timer (`refresh` minutes per cycle), what
//! each `refresh_mode` does with the crawl queue, and the deletion of documents that were not
//! seen for `dbswitch` cycles (docs/collection-config.md describes the modes).

use log::{info, warn};

use super::{queue_local, start_uri_entry, NodeScheduler};
use crate::config::{CollectionConfig, RefreshMode};
use crate::msg::types::uri_flags;
use crate::routing::{crawl_site, routing_attribute};
use crate::sched::multinode::SchedError;
use crate::sched::show;
use crate::store::UriState;

/// What a collection's configuration says about refresh cycles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RefreshPolicy {
    /// Seconds per cycle; 0 or less: no timer.
    pub interval: f64,
    /// What a new cycle does with the queue.
    pub mode: RefreshMode,
    /// Cycles a document may go unseen before it is deleted; 0 = never.
    pub dbswitch: u32,
    /// Only URIs already in the crawl store are fetched (`refresh_only`).
    pub refresh_only: bool,
    /// Stored documents after which only URIs already in the store are fetched.
    pub max_doc: Option<u64>,
    /// Percent of free disk below which only URIs already in the store are fetched; 0 = off.
    pub disk_free: u32,
}

impl RefreshPolicy {
    /// The policy of a collection's parsed configuration.
    pub fn of(c: &CollectionConfig) -> RefreshPolicy {
        RefreshPolicy {
            interval: c.refresh * 60.0,
            mode: c.refresh_mode,
            dbswitch: c.dbswitch,
            refresh_only: c.refresh_only,
            max_doc: c.max_doc,
            disk_free: c.disk_free,
        }
    }
}

/// Percent of the file system holding `dir` that is free for unprivileged users (statvfs);
/// `None` when it cannot be read (logged).
fn free_percent(dir: &std::path::Path) -> Option<f64> {
    crate::sys::free_percent(dir)
        .map_err(|e| log::warn!("{}: cannot read the free disk space: {e}", dir.display()))
        .ok()
        .flatten()
}

/// Why a collection fetches only URIs already in its crawl store (FSCADM 2.2.3.6 CrawlMode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefreshOnly {
    /// CollectionEnableRefreshOnly (`refresh_only`).
    User,
    /// `limits.max_doc` stored documents reached.
    MaxDoc,
    /// Less than `limits.disk_free` percent of the data directory's file system is free.
    DiskFree,
}

impl RefreshOnly {
    /// The CrawlMode string of FSCADM 2.2.3.6.
    pub fn crawl_mode(self) -> &'static str {
        match self {
            RefreshOnly::User => "Refreshing(limit=user)",
            RefreshOnly::MaxDoc => "Refreshing(limit=max_doc)",
            RefreshOnly::DiskFree => "Refreshing(limit=disk_free)",
        }
    }
}

impl super::Collection {
    /// Counts the stored documents again (for `limits.max_doc`), and the free space of the
    /// collection's file system (for `limits.disk_free`).
    /// Neither is read when its limit is off (the count is a scan of the store).
    pub(super) fn count_documents(&mut self) {
        if self.refresh.policy.max_doc.is_some() {
            self.refresh.doc_count = self
                .store
                .iter()
                .filter(|(_, r)| r.state == UriState::Stored)
                .count() as u64;
        }
        if self.refresh.policy.disk_free > 0 {
            self.refresh.disk_free_pct = free_percent(&self.dir);
        }
    }

    /// Whether, and why, only URIs already in the crawl store may be fetched.
    pub(super) fn refresh_only(&self) -> Option<RefreshOnly> {
        if self.refresh.policy.refresh_only {
            Some(RefreshOnly::User)
        } else if self
            .refresh
            .policy
            .max_doc
            .is_some_and(|m| self.refresh.doc_count >= m)
        {
            Some(RefreshOnly::MaxDoc)
        } else if self
            .refresh
            .disk_free_pct
            .is_some_and(|p| p < f64::from(self.refresh.policy.disk_free))
        {
            Some(RefreshOnly::DiskFree)
        } else {
            None
        }
    }
}

impl NodeScheduler {
    /// Whether, and why, collection `name` fetches only URIs already in its crawl store.
    pub fn refresh_only(&self, name: &[u8]) -> Option<RefreshOnly> {
        self.collections.get(name).and_then(|c| c.refresh_only())
    }

    /// The refresh timer: starts a new cycle of every collection whose cycle began `refresh`
    /// minutes ago or more (a `soft` collection waits until its queue is empty).
    pub fn refresh_tick(&mut self, now: i64) -> Result<(), SchedError> {
        for c in self.collections.values_mut() {
            c.count_documents();
        }
        self.release_stale_holds(now)?;
        let due: Vec<Vec<u8>> = self
            .collections
            .iter()
            .filter(|(_, c)| {
                c.refresh.policy.interval > 0.0
                    && (now - c.refresh.cycle_started) as f64 >= c.refresh.policy.interval
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            let soft = self.collections[&name].refresh.policy.mode == RefreshMode::Soft;
            if soft && !self.is_drained(&name) {
                continue;
            }
            self.refresh(&name, None, 0)?;
        }
        Ok(())
    }

    /// Starts cycle `cycle` of collection `name` as its refresh mode says (after the queue
    /// was truncated if asked): deletes the documents unseen for `dbswitch` cycles, queues
    /// the start URIs `uris`, then (`stored_too`) every stored document.
    pub(super) fn start_cycle(
        &mut self,
        name: &[u8],
        cycle: i64,
        uris: Vec<Vec<u8>>,
        stored_too: bool,
        now: i64,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        c.refresh.cycle_started = now;
        let policy = c.refresh.policy;
        if policy.dbswitch > 0 {
            // Not crawled in any of the last `dbswitch` cycles before this one.
            let before = u32::try_from(cycle).unwrap_or(u32::MAX);
            let before = before.saturating_sub(policy.dbswitch);
            // A site a RUP server keeps current is not stale: its reports say what went.
            let mut stale = c.store.stale(before);
            stale.retain(|u| !self.rup_covers(name, u));
            if !stale.is_empty() {
                let n = stale.len();
                let set: std::collections::HashSet<Vec<u8>> = stale.into_iter().collect();
                self.delete_stored_matching(name, &|_, u| set.contains(u))?;
                info!(
                    "collection {}: {n} documents unseen for {} cycles deleted",
                    show(name),
                    policy.dbswitch
                );
            }
        }
        // Sites with sitemaps refresh by their <lastmod>s (node_sitemap.rs); the stored URIs
        // of the others are refreshed after the start URIs.
        let (uris, stored) = match stored_too {
            true => self.hold_for_sitemaps(name, uris, cycle, now)?,
            false => (uris, Vec::new()),
        };
        let urgent = policy.mode == RefreshMode::Prepend;
        // Prepending puts each URI in front of the previous one: go backwards to keep order.
        let ordered: Vec<Vec<u8>> = if urgent {
            uris.into_iter().rev().collect()
        } else {
            uris
        };
        // The sites a RUP server keeps current are fetched as its reports say (node_rup.rs).
        let ordered: Vec<Vec<u8>> = ordered
            .into_iter()
            .filter(|u| !self.rup_covers(name, u))
            .collect();
        for u in ordered {
            let mut e = start_uri_entry(&u);
            e.refresh_cycle = cycle;
            self.add_uri(name, &e, urgent)?;
        }
        if !stored_too {
            return Ok(());
        }
        // Every document this node stored is crawled again in the new cycle (conditionally):
        // a page answered 304 has no body to take links from, so its links would otherwise go
        // unvisited. `adaptive` takes those crawled longest ago first.
        let mut stored = stored;
        stored.retain(|(_, u)| !self.rup_covers(name, u));
        if policy.mode == RefreshMode::Adaptive {
            stored.sort();
        }
        for (_, u) in stored {
            let mut e = start_uri_entry(&u);
            e.refresh_cycle = cycle;
            self.add_uri(name, &e, false)?;
        }
        Ok(())
    }

    /// A refresh of one subcollection (CMD_ADM_CONF_REFRESH with PKT_DATA[0] naming it,
    /// MS-FSCMT 2.2.3.10 / 3.1.5.9; MS-FSCADM 2.2.9.13 CollectionRefetch): every URI of the
    /// crawl store its rules take in (all but the deleted) and its start URIs are fetched
    /// again, whole (URIF_FORCE: queued again within the cycle, no conditional request). The
    /// rest of the collection is left alone and no new refresh cycle begins. A name the
    /// configuration does not have refreshes nothing: a warning, and a line to the multinode
    /// scheduler's schedule log (CMD_UM_LOG "sc", 2.2.4.8).
    pub(super) fn refetch_subcollection(
        &mut self,
        name: &[u8],
        sub: &[u8],
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get(name) else {
            return Ok(());
        };
        let wanted = String::from_utf8_lossy(sub);
        let Some(sd) = c.settings.subdomains.iter().find(|s| s.name == wanted) else {
            let line = format!(
                "refresh of subcollection {wanted:?} ignored: collection {} has no such subcollection",
                show(name)
            );
            warn!("{line}");
            self.log(name, b"sc", line.as_bytes());
            return Ok(());
        };
        let cycle = c.refresh.cycle;
        let stored: Vec<Vec<u8>> = c
            .store
            .iter()
            .filter(|(u, r)| {
                r.state != UriState::Deleted && std::str::from_utf8(u).is_ok_and(|u| sd.contains(u))
            })
            .map(|(u, _)| u.to_vec())
            .collect();
        let start: Vec<Vec<u8>> = sd
            .start_uris
            .iter()
            .map(|u| u.as_bytes().to_vec())
            .filter(|u| !stored.contains(u))
            .collect();
        info!(
            "collection {}: subcollection {wanted:?} fetched again ({} stored URIs, {} start URIs)",
            show(name),
            stored.len(),
            start.len()
        );
        let entry = |u: &[u8]| {
            let mut e = start_uri_entry(u);
            e.refresh_cycle = cycle;
            e.uri_flags |= uri_flags::URIF_FORCE;
            e
        };
        // The crawl store holds this node's URIs: queued here whatever the routes say.
        let c = self.collections.get_mut(name).expect("looked up above");
        for u in &stored {
            queue_local(c, &entry(u), false)?;
        }
        // A start URI is fetched again where its site is routed: here, forced; another node's
        // goes to the multinode scheduler unforced, for every node forwards it (fetched there
        // if it was not in this cycle).
        for u in &start {
            let mut e = entry(u);
            let here = self.opts.standalone
                || crawl_site(u).is_some_and(|site| {
                    self.routing.get(name, routing_attribute(&site).as_bytes())
                        == Some(&self.opts.node_id[..])
                });
            if !here {
                e.uri_flags &= !uri_flags::URIF_FORCE;
            }
            self.add_uri(name, &e, false)?;
        }
        Ok(())
    }
}
