//! What the crawl engine did to each crawl site, for the per-site statistics
//! (`stats::SiteStats`, FSCADM 2.2.4.9): the engine counts per collection
//! ([`CrawlCounters`](super::CrawlCounters)), each count also written to the collection's
//! journal ([`Journal`]); the tally clears the journal before one operation on one site (a
//! fetch outcome, a document's verdict) and books what it holds after to that site, so a
//! site's numbers are exactly its share of the collection's. Changes made between such
//! operations (the engine's scheduling of many sites at once) are cleared unbooked by
//! [`SiteTally::sync_all`]. Requests are booked as they start (Processed, LastUri), crawls of a
//! site as they begin and end.
//!
//! Booking costs what the operation counted (a page: a dozen attributes, two or three
//! buckets), not a comparison of every counter and histogram of the collection; a test holds
//! the bookings equal to those of that comparison over a scripted crawl.
//!
//! Memory: the sites being crawled, and the sites touched since the last [`SiteTally::take`]
//! (a few hundred milliseconds).

use foldhash::fast::RandomState;
use hashbrown::{HashMap, HashSet};

use super::counted::{Bucket, Journal};
use super::engine::CrawlEngine;
use super::types::{Action, Outcome, Request};
use crate::routing::crawl_site_ref;
use crate::stats::sites::{add_cell, add_cells, continuous_index, SiteDelta};

/// Pending sites beyond which new ones are not tallied (the statistics take the pending ones
/// every few hundred milliseconds; this only bounds a stall).
const MAX_PENDING: usize = 200_000;

/// Index of DLTime in `stats::sites::CONTINUOUS` (kept in microseconds per site).
const DLTIME: u8 = 10;

type Map<K, V> = HashMap<K, V, RandomState>;

/// The per-site tally of one node's crawl engine.
#[derive(Debug, Default)]
pub struct SiteTally {
    /// What each site got since the last [`Self::take`], by collection and site.
    pending: Map<Vec<u8>, Map<String, SiteDelta>>,
    /// Sites in `pending`, all collections.
    pending_sites: usize,
    /// Sites being crawled, by collection.
    active: Map<Vec<u8>, HashSet<String, RandomState>>,
}

/// Adds what `j` holds to `d`: each attribute that rose one update of its rise (DLTime in
/// microseconds, the rest whole numbers), each bucket its count.
fn book(d: &mut SiteDelta, j: &mut Journal) {
    // In attribute order, as the cells are kept.
    let rises = j.continuous().map(|(i, v)| {
        let v = if i == DLTIME { v * 1e6 } else { v };
        (i, v.round() as u64)
    });
    add_cells(&mut d.cells, rises);
    for (attr, bucket, n) in j.histograms() {
        let n = u32::try_from(*n).unwrap_or(u32::MAX);
        let mut digits = [0u8; 5];
        let name = bucket_name(bucket, &mut digits);
        match d
            .hist
            .iter_mut()
            .find(|(a, b, _)| a == attr && b.as_str() == name)
        {
            Some(x) => x.2 = x.2.saturating_add(n),
            None => d.hist.push((*attr, name.to_string(), n)),
        }
    }
}

/// A bucket as the statistics name it (an HTTP status in decimal), written into `digits` when
/// it is a number.
fn bucket_name<'a>(b: &'a Bucket, digits: &'a mut [u8; 5]) -> &'a str {
    match b {
        Bucket::Status(s) => {
            let mut v = *s;
            let mut i = digits.len();
            loop {
                i -= 1;
                digits[i] = b'0' + (v % 10) as u8;
                v /= 10;
                if v == 0 {
                    break;
                }
            }
            // ASCII digits only.
            std::str::from_utf8(&digits[i..]).unwrap_or("")
        }
        Bucket::Code(c) => c,
        Bucket::Mime(m) => m,
    }
}

impl SiteTally {
    /// An empty tally.
    pub fn new() -> SiteTally {
        SiteTally::default()
    }

    fn delta(&mut self, coll: &[u8], site: &str, now: i64) -> Option<&mut SiteDelta> {
        let sites = self.pending.entry_ref(coll).or_default();
        let d = match sites.entry_ref(site) {
            hashbrown::hash_map::EntryRef::Occupied(d) => d.into_mut(),
            hashbrown::hash_map::EntryRef::Vacant(_) if self.pending_sites >= MAX_PENDING => {
                return None
            }
            hashbrown::hash_map::EntryRef::Vacant(v) => {
                self.pending_sites += 1;
                v.insert(SiteDelta::default())
            }
        };
        d.at = d.at.max(now);
        Some(d)
    }

    /// Clears every collection's journal without booking (after the engine scheduled many
    /// sites at once).
    pub fn sync_all(&mut self, engine: &mut CrawlEngine) {
        engine.clear_journals();
    }

    /// Before an operation on one site of `coll`: what the journal holds is not its.
    pub fn before(&mut self, engine: &mut CrawlEngine, coll: &[u8]) {
        if let Some(j) = engine.journal(coll) {
            j.clear();
        }
    }

    /// After an operation on `site` of `coll`: what the journal gained is the site's.
    pub fn after(&mut self, engine: &mut CrawlEngine, coll: &[u8], site: &str, now: i64) {
        let Some(j) = engine.journal(coll) else {
            return;
        };
        if j.is_empty() {
            return;
        }
        if let Some(d) = self.delta(coll, site, now) {
            book(d, j);
        }
        j.clear();
    }

    /// [`Self::after`] for the site of `uri`.
    pub fn after_uri(&mut self, engine: &mut CrawlEngine, coll: &[u8], uri: &[u8], now: i64) {
        match crawl_site_ref(uri) {
            Some(site) => self.after(engine, coll, &site, now),
            None => self.before(engine, coll),
        }
    }

    /// [`CrawlEngine::complete`], what it counts booked to the request's site.
    pub fn complete(
        &mut self,
        engine: &mut CrawlEngine,
        o: Outcome,
        engine_now: f64,
        now: i64,
    ) -> Vec<Action> {
        let Some((key, _)) = engine.flight_site(o.id) else {
            return engine.complete(o, engine_now);
        };
        self.before(engine, &key.0);
        let actions = engine.complete(o, engine_now);
        self.after(engine, &key.0, &key.1, now);
        actions
    }

    /// Requests the engine just started: each crawl queue entry counts as Processed on its
    /// site and is its LastUri; what the engine counted while scheduling is cleared.
    pub fn requested(&mut self, engine: &mut CrawlEngine, reqs: &[Request], now: i64) {
        let processed = continuous_index("Processed").unwrap_or(0);
        for r in reqs {
            // The engine's own robots.txt fetches are not crawl queue entries.
            let Some((key, false)) = engine.flight_site(r.id) else {
                continue;
            };
            if let Some(d) = self.delta(&key.0, &key.1, now) {
                add_cell(&mut d.cells, processed, 1);
                match &mut d.last_uri {
                    Some(u) => {
                        u.clear();
                        u.push_str(&r.url);
                    }
                    None => d.last_uri = Some(r.url.clone()),
                }
            }
        }
        self.sync_all(engine);
    }

    /// A crawl of `site` begins (its first entry handed to the engine since it was last
    /// released); nothing when it is going on.
    pub fn started(&mut self, coll: &[u8], site: &str, now: i64) {
        let active = self.active.entry_ref(coll).or_default();
        if active.contains(site) {
            return;
        }
        active.insert(site.to_string());
        if let Some(d) = self.delta(coll, site, now) {
            d.starts = d.starts.saturating_add(1);
            d.started = Some(now);
            d.ended = None;
        }
    }

    /// The crawl of `site` ended (the engine released it).
    pub fn ended(&mut self, coll: &[u8], site: &str, now: i64) {
        if !self
            .active
            .get_mut(coll)
            .is_some_and(|sites| sites.remove(site))
        {
            return;
        }
        if let Some(d) = self.delta(coll, site, now) {
            d.ended = Some(now);
        }
    }

    /// Forgets a removed collection.
    pub fn remove_collection(&mut self, coll: &[u8]) {
        self.active.remove(coll);
        if let Some(sites) = self.pending.remove(coll) {
            self.pending_sites -= sites.len();
        }
    }

    /// What was tallied since the last call, by (collection, site).
    pub fn take(&mut self) -> Vec<((Vec<u8>, String), SiteDelta)> {
        let mut out = Vec::with_capacity(self.pending_sites);
        for (coll, sites) in self.pending.drain() {
            out.extend(sites.into_iter().map(|(s, d)| ((coll.clone(), s), d)));
        }
        self.pending_sites = 0;
        out
    }
}

#[cfg(test)]
#[path = "site_tally_tests.rs"]
mod tests;
