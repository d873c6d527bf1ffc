//! The per-site tally as it was first written, kept as the tests' reference: it compares the
//! collection's counters before and after each operation and books the difference. The
//! journal's bookings (`site_tally.rs`) must equal these.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::crawl::counters::CrawlCounters;
use crate::crawl::engine::CrawlEngine;
use crate::crawl::types::Request;
use crate::routing::crawl_site;
use crate::stats::sites::{add_cell, continuous_index, histogram_index, SiteDelta};

/// Pending sites beyond which new ones are not tallied (the statistics take the pending ones
/// every few hundred milliseconds; this only bounds a stall).
const MAX_PENDING: usize = 200_000;

/// What the tally saw last of a collection's counters.
#[derive(Clone, Debug, Default)]
struct Shadow {
    continuous: Vec<(&'static str, f64)>,
    http_response: BTreeMap<u16, u64>,
    uri_skip: BTreeMap<&'static str, u64>,
    doc_skip: BTreeMap<&'static str, u64>,
    mime_type: BTreeMap<String, u64>,
}

/// One increase of a histogram bucket: (histogram, bucket, by).
type Rise = (&'static str, String, u64);

fn rises<K: Ord + Clone>(
    name: &'static str,
    now: &BTreeMap<K, u64>,
    seen: &mut BTreeMap<K, u64>,
    shown: impl Fn(&K) -> String,
    out: &mut Vec<Rise>,
) {
    for (k, v) in now {
        let old = seen.get(k).copied().unwrap_or(0);
        if *v > old {
            out.push((name, shown(k), v - old));
            seen.insert(k.clone(), *v);
        } else if *v < old {
            // The counters started again (the collection was removed and added).
            seen.insert(k.clone(), *v);
        }
    }
}

impl Shadow {
    /// Brings the copy up to `c`, returning the continuous and histogram increases.
    fn catch_up(&mut self, c: &CrawlCounters) -> (Vec<(&'static str, f64)>, Vec<Rise>) {
        let mut cont = Vec::new();
        for (name, v) in c.continuous() {
            match self.continuous.iter_mut().find(|(n, _)| *n == name) {
                Some((_, old)) => {
                    if v > *old {
                        cont.push((name, v - *old));
                    }
                    *old = v;
                }
                None => {
                    if v > 0.0 {
                        cont.push((name, v));
                    }
                    self.continuous.push((name, v));
                }
            }
        }
        let mut hist = Vec::new();
        rises(
            "HTTPResponse",
            &c.http_response,
            &mut self.http_response,
            u16::to_string,
            &mut hist,
        );
        let code = |k: &&'static str| (*k).to_string();
        rises("URISkip", &c.uri_skip, &mut self.uri_skip, code, &mut hist);
        rises("DocSkip", &c.doc_skip, &mut self.doc_skip, code, &mut hist);
        rises(
            "MimeType",
            &c.mime_type,
            &mut self.mime_type,
            String::clone,
            &mut hist,
        );
        (cont, hist)
    }
}

/// The per-site tally of one node's crawl engine.
#[derive(Debug, Default)]
pub(super) struct Diffed {
    shadows: HashMap<Vec<u8>, Shadow>,
    pending: HashMap<(Vec<u8>, String), SiteDelta>,
    /// Sites being crawled.
    active: HashSet<(Vec<u8>, String)>,
}

/// Whether a request is the engine's own robots.txt fetch, not a crawl queue entry.
fn is_robots(r: &Request) -> bool {
    r.url.ends_with("/robots.txt") && r.url.matches('/').count() == 3
}

impl Diffed {
    /// An empty tally.
    pub(super) fn new() -> Diffed {
        Diffed::default()
    }

    fn delta(&mut self, coll: &[u8], site: &str, now: i64) -> Option<&mut SiteDelta> {
        let key = (coll.to_vec(), site.to_string());
        if !self.pending.contains_key(&key) && self.pending.len() >= MAX_PENDING {
            return None;
        }
        let d = self.pending.entry(key).or_default();
        d.at = d.at.max(now);
        Some(d)
    }

    /// Takes in a collection's counters without booking the change to any site.
    pub(super) fn sync(&mut self, coll: &[u8], c: &CrawlCounters) {
        self.shadows.entry(coll.to_vec()).or_default().catch_up(c);
    }

    /// Takes in every collection's counters without booking (after the engine scheduled many
    /// sites at once).
    pub(super) fn sync_all(&mut self, engine: &CrawlEngine) {
        for (name, c) in engine.all_counters() {
            self.sync(name, c);
        }
    }

    /// Before an operation on one site of `coll`: the counters as they stand are not its.
    pub(super) fn before(&mut self, engine: &CrawlEngine, coll: &[u8]) {
        if let Some(c) = engine.counters(coll) {
            self.sync(coll, c);
        }
    }

    /// After an operation on `site` of `coll`: what the counters gained is the site's.
    pub(super) fn after(&mut self, engine: &CrawlEngine, coll: &[u8], site: &str, now: i64) {
        let Some(c) = engine.counters(coll) else {
            return;
        };
        let (cont, hist) = self.shadows.entry(coll.to_vec()).or_default().catch_up(c);
        if cont.is_empty() && hist.is_empty() {
            return;
        }
        let Some(d) = self.delta(coll, site, now) else {
            return;
        };
        for (name, v) in cont {
            if let Some(i) = continuous_index(name) {
                // DLTime in microseconds, the rest are whole numbers.
                let v = if name == "DLTime" { v * 1e6 } else { v };
                add_cell(&mut d.cells, i, v.round() as u64);
            }
        }
        for (name, bucket, n) in hist {
            if let Some(i) = histogram_index(name) {
                let n = u32::try_from(n).unwrap_or(u32::MAX);
                match d.hist.iter_mut().find(|(a, b, _)| *a == i && *b == bucket) {
                    Some(x) => x.2 = x.2.saturating_add(n),
                    None => d.hist.push((i, bucket, n)),
                }
            }
        }
    }

    /// [`Self::after`] for the site of `uri`.
    pub(super) fn after_uri(&mut self, engine: &CrawlEngine, coll: &[u8], uri: &[u8], now: i64) {
        match crawl_site(uri) {
            Some(site) => self.after(engine, coll, &site, now),
            None => self.before(engine, coll),
        }
    }

    /// Requests the engine just started: each crawl queue entry counts as Processed on its
    /// site and is its LastUri; what the engine counted while scheduling is taken in.
    pub(super) fn requested(&mut self, engine: &CrawlEngine, reqs: &[Request], now: i64) {
        let processed = continuous_index("Processed").unwrap_or(0);
        for r in reqs {
            if is_robots(r) {
                continue;
            }
            let (Some(coll), Some(site)) =
                (engine.collection_of(r.id), crawl_site(r.url.as_bytes()))
            else {
                continue;
            };
            let coll = coll.to_vec();
            if let Some(d) = self.delta(&coll, &site, now) {
                add_cell(&mut d.cells, processed, 1);
                d.last_uri = Some(r.url.clone());
            }
        }
        self.sync_all(engine);
    }

    /// A crawl of `site` begins (its first entry handed to the engine since it was last
    /// released); nothing when it is going on.
    pub(super) fn started(&mut self, coll: &[u8], site: &str, now: i64) {
        if !self.active.insert((coll.to_vec(), site.to_string())) {
            return;
        }
        if let Some(d) = self.delta(coll, site, now) {
            d.starts = d.starts.saturating_add(1);
            d.started = Some(now);
            d.ended = None;
        }
    }

    /// The crawl of `site` ended (the engine released it).
    pub(super) fn ended(&mut self, coll: &[u8], site: &str, now: i64) {
        if !self.active.remove(&(coll.to_vec(), site.to_string())) {
            return;
        }
        if let Some(d) = self.delta(coll, site, now) {
            d.ended = Some(now);
        }
    }

    /// What was tallied since the last call, by (collection, site).
    pub(super) fn take(&mut self) -> Vec<((Vec<u8>, String), SiteDelta)> {
        self.pending.drain().collect()
    }
}
