//! The node scheduler's side of the RUP robot (draft-cosmo; docs/rup.md "The robot"): the
//! sites of a collection that a RUP server keeps current (their refresh cycles re-fetch
//! nothing: the reports say what changed), the sites started that the robot looks at for a
//! /rupinfo.txt, and what a report does to the crawl: New and Change paths fetched at once,
//! Delete paths removed (crawl store, a delete fed, PPDUP_REMOVE), and one full refresh of a
//! site whose lost reports GetIndex cannot make up for (3.3.3).

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use super::diskfull::Target;
use super::docs::Verdict;
use super::store::Fate;
use super::*;
use crate::msg::UriStructure;

/// What the node keeps for the robot.
#[derive(Default)]
pub(super) struct RupHook {
    /// By collection: the URL bases of the sites registered with (`scheme://host[:port]/`).
    covered: HashMap<Vec<u8>, BTreeSet<String>>,
    /// Sites of RUP collections started and not taken by the robot yet: (collection, URL base).
    started: Vec<(Vec<u8>, String)>,
    /// Every (collection, URL base) put in `started` during this run.
    announced: HashSet<(Vec<u8>, String)>,
}

/// The URL base of a URI: `scheme://host[:port]/`, the port left out when it is the
/// scheme's.
pub fn url_base(uri: &[u8]) -> Option<String> {
    let u = url::Url::parse(std::str::from_utf8(uri).ok()?).ok()?;
    u.host_str()?;
    Some(format!("{}/", u.origin().ascii_serialization()))
}

impl NodeScheduler {
    /// Marks the site at `url_base` as kept current by its RUP server in collection `name`
    /// (`on`: registered), or no longer.
    pub fn rup_cover(&mut self, name: &[u8], url_base: &str, on: bool) {
        let set = self.rup.covered.entry(name.to_vec()).or_default();
        if on {
            set.insert(url_base.to_owned());
        } else {
            set.remove(url_base);
        }
    }

    /// Whether a RUP server keeps `uri` of collection `name` current: refresh cycles leave it
    /// to the reports.
    pub(super) fn rup_covers(&self, name: &[u8], uri: &[u8]) -> bool {
        self.rup
            .covered
            .get(name)
            .is_some_and(|s| s.iter().any(|b| uri.starts_with(b.as_bytes())))
    }

    /// A site of collection `name` started (its first entry's record `rec`): a collection
    /// with RUP on (`rup.robot_email`) has the robot look at the site's /rupinfo.txt, once
    /// per run.
    pub(super) fn rup_site_started(&mut self, name: &[u8], rec: &[u8]) {
        let Some(c) = self.collections.get(name) else {
            return;
        };
        if c.settings.rup.is_none() {
            return;
        }
        let Some(base) = parse_record(rec)
            .ok()
            .and_then(|(e, _)| url_base(&e.uri.uri))
        else {
            return;
        };
        if self.rup.announced.insert((name.to_vec(), base.clone())) {
            self.rup.started.push((name.to_vec(), base));
        }
    }

    /// The URI a report's path stands for in the crawl: a file `.../index.html` is its
    /// directory's URL (`.../`) when the crawl store holds that and not the file's (a server
    /// answers a directory with its index.html, and a report names files).
    fn stored_form(&self, name: &[u8], uri: &[u8]) -> Vec<u8> {
        let dir = uri
            .strip_suffix(b"index.html")
            .filter(|d| d.ends_with(b"/") && !d.ends_with(b"//"));
        match (self.collections.get(name), dir) {
            (Some(c), Some(d)) if c.store.get(uri).is_none() && c.store.get(d).is_some() => {
                d.to_vec()
            }
            _ => uri.to_vec(),
        }
    }

    /// The sites started since the last call that the robot should look at.
    pub fn rup_take_started(&mut self) -> Vec<(Vec<u8>, String)> {
        std::mem::take(&mut self.rup.started)
    }

    /// A report's New and Change URIs (3.2): queued at the front of the crawl queue, even
    /// when queued before in this refresh cycle (they changed since), fetched conditionally
    /// as any stored URI is. Returns how many were queued.
    pub fn rup_fetch(&mut self, name: &[u8], uris: &[Vec<u8>]) -> Result<u64, SchedError> {
        let mut n = 0;
        for u in uris {
            let u = &self.stored_form(name, u);
            let local = self.opts.standalone
                || crawl_site(u).is_some_and(|site| {
                    self.routing.get(name, routing_attribute(&site).as_bytes())
                        == Some(&self.opts.node_id[..])
                });
            let Some(c) = self.collections.get_mut(name) else {
                return Ok(n);
            };
            let mut e = CrawlQueueEntry::new(UriStructure::unparsed(Cow::Owned(u.clone())));
            e.refresh_cycle = c.refresh.cycle;
            if !local {
                // Routed elsewhere since the registration: its node fetches it.
                self.add_uri(name, &e, true)?;
                n += 1;
                continue;
            }
            // In the seen set from now on, so that links met in this cycle do not queue it
            // again; queued whether it was there or not.
            c.seen.insert(u)?;
            c.enqueue(Target::Queue, true, &record(&e, true), None)?;
            c.counters.uris_queued += 1;
            n += 1;
        }
        Ok(n)
    }

    /// A report's Delete URIs (3.2): each stored one is removed from the crawl store, fed as
    /// a delete and its checksum released (PPDUP_REMOVE). Returns how many were stored.
    pub fn rup_delete(&mut self, name: &[u8], uris: &[Vec<u8>]) -> Result<u64, SchedError> {
        let mut n = 0;
        for u in uris {
            let u = &self.stored_form(name, u);
            let Some(c) = self.collections.get_mut(name) else {
                return Ok(n);
            };
            let Some(cs) = c.delete_stored(u, false)? else {
                continue;
            };
            n += 1;
            self.send_ppdup_remove(name, u, cs);
            self.verdicts.push(Verdict {
                collection: name.to_vec(),
                uri: u.clone(),
                checksum: cs,
                owner: Vec::new(),
                fate: Fate::Deleted,
            });
        }
        Ok(n)
    }

    /// One full refresh of the site at `url_base` (3.3.3: its lost reports are past what
    /// GetIndex reaches): its start URIs and every URI of it in the crawl store queued again,
    /// fetched conditionally. Returns how many were queued.
    pub fn rup_refresh_site(&mut self, name: &[u8], url_base: &str) -> Result<u64, SchedError> {
        let Some(c) = self.collections.get(name) else {
            return Ok(0);
        };
        let mut uris: Vec<Vec<u8>> = start_uris(&c.dict)
            .into_iter()
            .filter(|u| u.starts_with(url_base.as_bytes()))
            .collect();
        let stored: Vec<Vec<u8>> = c
            .store
            .iter()
            .filter(|(u, r)| r.state == UriState::Stored && u.starts_with(url_base.as_bytes()))
            .map(|(u, _)| u.to_vec())
            .collect();
        for u in stored {
            if !uris.contains(&u) {
                uris.push(u);
            }
        }
        info!(
            "collection {}: full refresh of {url_base} ({} URIs)",
            show(name),
            uris.len()
        );
        self.rup_fetch(name, &uris)
    }
}
