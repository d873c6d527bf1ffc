//! Sitemaps in the node scheduler (sitemaps.org; docs/sitemaps.md): what a collection with
//! `sitemaps` on does with the sitemaps its sites offer.
//!
//! - A site's robots.txt read, the crawl engine names the sitemaps it offers
//!   ([`NodeScheduler::sitemaps_offered`]); each is queued as a crawl queue entry of the site
//!   (once per refresh cycle, like any URI), so robots.txt and the collection's politeness
//!   apply to it.
//! - A sitemap read ([`NodeScheduler::sitemap_read`]): an index queues its sitemaps; a URL set
//!   queues its URLs like links. The sitemaps read are remembered per site, on the record log
//!   (`sitemaps.log` in the collection's directory, committed as each one is first read or
//!   refused), so a restarted node's refresh cycles read them again as before. The pages'
//!   side of the lastmod test, each page's last fetch, is in the crawl store.
//! - A refresh cycle ([`NodeScheduler::hold_for_sitemaps`]) holds the stored URIs of every site
//!   with a remembered sitemap and queues the sitemaps instead. Each held URI the sitemaps list
//!   is fetched (conditionally, as before) when its `<lastmod>` is newer than its last fetch, or
//!   when it has none; one whose `<lastmod>` is not newer is not fetched in this cycle (it counts
//!   as seen, so a link to it does not queue it either). Once every sitemap of the site is
//!   answered, the held URIs no sitemap listed are queued as before; a sitemap refused (failed
//!   fetch, over the limits, bad XML) lists nothing. A hold not resolved in [`HOLD_SECONDS`]
//!   (a site blocked or quarantined meanwhile) is released the same way.
//!
//! A `<lastmod>` equal to the last fetch (both to the second) is not newer: a page changed in
//! the very second it was fetched is caught at the next change, or by the next cycle without a
//! sitemap.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use hashbrown::HashTable;
use log::{debug, info};
use xxhash_rust::xxh3::xxh3_64;

use super::{start_uri_entry, NodeScheduler};
use crate::crawl::sitemaps::{self, Found};
use crate::recordlog::{put_bytes, Cur, Format, LogError, LogWriter, Options};
use crate::routing::crawl_site_ref;
use crate::sched::collections::StoreError;
use crate::sched::multinode::SchedError;
use crate::sched::show;
use crate::sitemap::{Kind, Sitemap};
use crate::store::UriState;

/// Stored URIs with their last fetch (Unix seconds).
pub(super) type Stored = Vec<(u64, Vec<u8>)>;

/// Seconds a refresh cycle waits for a site's sitemaps before refreshing its held URIs as if
/// it had none.
pub const HOLD_SECONDS: i64 = 600;

/// The file in a collection's directory that keeps each site's sitemaps.
pub const FILE: &str = "sitemaps.log";

const FORMAT: Format = Format {
    magic: b"CFSITEMAPS1\n",
    name: "sitemaps",
    max_record: 1 << 16,
};

/// A site's sitemap read: site, URL, where it was found.
const PUT: u8 = 1;
/// A site's sitemap refused: site, URL.
const REMOVE: u8 = 2;

/// A collection's sitemaps, by crawl site.
#[derive(Default)]
pub(super) struct SiteMaps {
    sites: HashMap<String, SiteMap>,
    /// Sites with a hold (so that [`SiteMaps::holds`] costs nothing outside a cycle's start).
    holding: usize,
    /// What `known` holds, on the record log (`None`: not kept, as in tests of the scheduler's
    /// pure side).
    log: Option<LogWriter>,
}

fn found_byte(f: Found) -> u8 {
    match f {
        Found::Robots => 0,
        Found::File => 1,
    }
}

fn encode_put(out: &mut Vec<u8>, site: &str, url: &str, found: Found) {
    out.push(PUT);
    put_bytes(out, site.as_bytes());
    put_bytes(out, url.as_bytes());
    out.push(found_byte(found));
}

fn log_error(e: LogError) -> SchedError {
    SchedError::Store(StoreError {
        disk_full: e.is_no_space(),
        error: format!("{}: {}", e.action, e.error),
        path: e.path,
    })
}

impl SiteMaps {
    /// Opens (creating) the sitemaps kept in the collection directory `dir`, and compacts
    /// their log.
    pub(super) fn open(dir: &Path) -> Result<SiteMaps, SchedError> {
        let mut sites: HashMap<String, SiteMap> = HashMap::new();
        let (log, _) = LogWriter::open(&dir.join(FILE), Options::new(FORMAT), |p| {
            let mut c = Cur(p);
            let ok = (|| {
                let kind = c.u8()?;
                let site = String::from_utf8(c.bytes()?.to_vec()).ok()?;
                let url = String::from_utf8(c.bytes()?.to_vec()).ok()?;
                match kind {
                    PUT => {
                        let found = match c.u8()? {
                            0 => Found::Robots,
                            1 => Found::File,
                            _ => return None,
                        };
                        sites.entry(site).or_default().known.insert(url, found);
                    }
                    REMOVE => {
                        if let Some(s) = sites.get_mut(&site) {
                            s.known.remove(&url);
                        }
                    }
                    _ => return None,
                }
                c.is_empty().then_some(())
            })();
            ok.is_some()
        })
        .map_err(log_error)?;
        sites.retain(|_, s| !s.known.is_empty());
        let mut maps = SiteMaps {
            sites,
            holding: 0,
            log: Some(log),
        };
        let sites = &maps.sites;
        if let Some(log) = &mut maps.log {
            log.compact(|w| {
                for (site, s) in sites {
                    for (url, found) in &s.known {
                        w.record(|out| encode_put(out, site, url, *found))?;
                    }
                }
                Ok(())
            })
            .map_err(log_error)?;
        }
        Ok(maps)
    }

    /// Writes durably that `url` of `site` was read (`Some`) or refused (`None`).
    fn keep(&mut self, site: &str, url: &str, found: Option<Found>) -> Result<(), SchedError> {
        let Some(log) = &mut self.log else {
            return Ok(());
        };
        log.append_with(|out| match found {
            Some(f) => encode_put(out, site, url, f),
            None => {
                out.push(REMOVE);
                put_bytes(out, site.as_bytes());
                put_bytes(out, url.as_bytes());
            }
        });
        let r = log.commit();
        if r.is_err() {
            log.discard_pending();
        }
        r.map_err(log_error)
    }
}

#[derive(Default)]
struct SiteMap {
    /// The site's own sitemaps (not an index's) read without error last time, and where each
    /// was found: what a refresh cycle reads again.
    known: BTreeMap<String, Found>,
    /// Sitemaps named by an index of the site.
    children: HashSet<String>,
    /// A refresh cycle's held URIs.
    hold: Option<Hold>,
}

/// Stored URIs of a site waiting for its sitemaps in a refresh cycle.
struct Hold {
    /// The URIs, by their xxh3 hash (as the crawl store keeps them).
    uris: HashTable<Box<[u8]>>,
    /// Sitemaps queued for the hold and not answered yet.
    pending: usize,
    /// When the hold began (Unix seconds).
    since: i64,
}

impl Hold {
    fn contains(&self, uri: &[u8]) -> bool {
        self.uris.find(xxh3_64(uri), |u| **u == *uri).is_some()
    }

    /// Takes `uri` out; false when it was not held.
    fn remove(&mut self, uri: &[u8]) -> bool {
        match self.uris.find_entry(xxh3_64(uri), |u| **u == *uri) {
            Ok(e) => {
                e.remove();
                true
            }
            Err(_) => false,
        }
    }
}

impl SiteMaps {
    /// True when `uri` waits for its site's sitemaps.
    pub(super) fn holds(&self, uri: &[u8]) -> bool {
        self.holding > 0
            && crawl_site_ref(uri)
                .and_then(|s| self.sites.get(&*s))
                .and_then(|s| s.hold.as_ref())
                .is_some_and(|h| h.contains(uri))
    }
}

/// The scheme and authority of `uri` when they are written plainly: `http://` or `https://`,
/// then only lower-case letters, digits, `.`, `-` and `:` up to the first `/`, `?` or `#` (or
/// the end). The URL parser reads the authority of every URI that starts with the same such
/// prefix, followed by one of those or by nothing, the same way: they have one crawl site.
fn plain_authority(uri: &[u8]) -> Option<&[u8]> {
    let start = if uri.starts_with(b"http://") {
        7
    } else if uri.starts_with(b"https://") {
        8
    } else {
        return None;
    };
    let mut i = start;
    while let Some(&b) = uri.get(i) {
        match b {
            b'/' | b'?' | b'#' => break,
            b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b':' => i += 1,
            _ => return None,
        }
    }
    Some(&uri[..i])
}

/// What one sitemap did, for the crawl counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SitemapTally {
    /// The sitemap was read (not refused).
    pub read: bool,
    /// URIs (pages or, from an index, sitemaps) queued.
    pub queued: u64,
    /// Held URIs not fetched: their `<lastmod>` is not newer than their last fetch.
    pub skipped: u64,
}

impl NodeScheduler {
    /// The sitemaps `site`'s robots.txt offers (the crawl engine's `Action::Sitemaps`): each is
    /// queued, once per refresh cycle. A site held by a refresh cycle reads those it read last
    /// time (queued with the hold).
    pub fn sitemaps_offered(
        &mut self,
        name: &[u8],
        site: &str,
        urls: &[(String, Found)],
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        if !c.settings.sitemaps {
            return Ok(());
        }
        let cycle = c.refresh.cycle;
        let s = c.sitemaps.sites.entry(site.to_string()).or_default();
        if s.hold.is_some() {
            return Ok(());
        }
        for (url, found) in urls {
            self.add_uri(name, &sitemaps::entry(url, *found, cycle), false)?;
        }
        Ok(())
    }

    /// A fetched sitemap of `site` (the crawl engine's `Action::Sitemap`), read or refused.
    pub fn sitemap_read(
        &mut self,
        name: &[u8],
        site: &str,
        url: &str,
        found: Found,
        result: Result<Box<Sitemap>, String>,
    ) -> Result<SitemapTally, SchedError> {
        let mut tally = SitemapTally::default();
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(tally);
        };
        let cycle = c.refresh.cycle;
        let this_cycle = c.cycle();
        let dbswitch = c.refresh.policy.dbswitch;
        let s = c.sitemaps.sites.entry(site.to_string()).or_default();
        let child = s.children.contains(url);
        let map = match result {
            Ok(m) => m,
            Err(reason) => {
                crate::warn_limited!(
                    "sitemap refused",
                    "collection {}: sitemap {url} refused: {reason}",
                    show(name)
                );
                if s.known.remove(url).is_some() {
                    c.sitemaps.keep(site, url, None)?;
                }
                self.sitemap_answered(name, site)?;
                return Ok(tally);
            }
        };
        tally.read = true;
        if !child && s.known.insert(url.to_string(), found) != Some(found) {
            c.sitemaps.keep(site, url, Some(found))?;
        }
        let s = c.sitemaps.sites.entry(site.to_string()).or_default();
        let mut queue = Vec::new();
        match map.kind {
            Kind::Index => {
                for e in &map.entries {
                    if s.children.insert(e.loc.clone()) && !c.seen.contains(e.loc.as_bytes()) {
                        if let Some(h) = &mut s.hold {
                            h.pending += 1;
                        }
                        queue.push(sitemaps::entry(&e.loc, found, cycle));
                    }
                }
            }
            Kind::UrlSet => {
                for e in &map.entries {
                    let uri = e.loc.as_bytes();
                    let held = s.hold.as_mut().is_some_and(|h| h.remove(uri));
                    let rec = c.store.get(uri).filter(|r| r.state == UriState::Stored);
                    if let (true, Some(t), Some(rec)) = (held, e.lastmod, rec) {
                        if t <= rec.last_crawl as i64 {
                            tally.skipped += 1;
                            c.seen.insert(uri)?;
                            // Not fetched, yet not stale: the record joins this cycle when it
                            // would otherwise count as unseen for `dbswitch` cycles.
                            if dbswitch > 0 && rec.cycle.saturating_add(dbswitch) <= this_cycle {
                                let mut rec = rec.clone();
                                rec.cycle = this_cycle;
                                c.store.put(uri, rec)?;
                            }
                            continue;
                        }
                    }
                    let mut entry = start_uri_entry(uri);
                    entry.refresh_cycle = cycle;
                    entry.referrer = crate::msg::UriStructure::unparsed(std::borrow::Cow::Owned(
                        url.as_bytes().to_vec(),
                    ));
                    queue.push(entry);
                }
            }
        }
        tally.queued = queue.len() as u64;
        for e in &queue {
            self.add_uri(name, e, false)?;
        }
        debug!(
            "collection {}: sitemap {url}: {} entries ({} out of scope), {} queued, {} skipped",
            show(name),
            map.entries.len(),
            map.out_of_scope,
            tally.queued,
            tally.skipped
        );
        self.sitemap_answered(name, site)?;
        Ok(tally)
    }

    /// One sitemap of a held site answered: the last one releases what no sitemap listed.
    fn sitemap_answered(&mut self, name: &[u8], site: &str) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let Some(s) = c.sitemaps.sites.get_mut(site) else {
            return Ok(());
        };
        let Some(h) = &mut s.hold else {
            return Ok(());
        };
        h.pending = h.pending.saturating_sub(1);
        if h.pending == 0 {
            self.release_hold(name, site)?;
        }
        Ok(())
    }

    /// Queues what `site` still holds, as a refresh without sitemaps would have.
    fn release_hold(&mut self, name: &[u8], site: &str) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let cycle = c.refresh.cycle;
        let Some(h) = c.sitemaps.sites.get_mut(site).and_then(|s| s.hold.take()) else {
            return Ok(());
        };
        c.sitemaps.holding = c.sitemaps.holding.saturating_sub(1);
        let mut rest: Vec<Box<[u8]>> = h.uris.into_iter().collect();
        rest.sort();
        if !rest.is_empty() {
            info!(
                "collection {}: {} stored URIs of {site} that no sitemap listed refreshed as before",
                show(name),
                rest.len()
            );
        }
        for u in rest {
            let mut e = start_uri_entry(&u);
            e.refresh_cycle = cycle;
            self.add_uri(name, &e, false)?;
        }
        Ok(())
    }

    /// A new refresh cycle `cycle` of `name` that refreshes its stored documents: holds the
    /// stored URIs of every site with a sitemap read before and queues those sitemaps, in one
    /// pass over the crawl store. Returns the start URIs `uris` that are not held, and the
    /// stored URIs that are not (with their last fetch), in the store's order.
    pub(super) fn hold_for_sitemaps(
        &mut self,
        name: &[u8],
        uris: Vec<Vec<u8>>,
        cycle: i64,
        now: i64,
    ) -> Result<(Vec<Vec<u8>>, Stored), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok((uris, Vec::new()));
        };
        // What an unfinished hold of the last cycle kept is among the stored URIs again.
        for s in c.sitemaps.sites.values_mut() {
            s.hold = None;
            s.children.clear();
        }
        c.sitemaps.holding = 0;
        let stored = c.store.iter().filter(|(_, r)| r.state == UriState::Stored);
        if !c.settings.sitemaps || c.sitemaps.sites.values().all(|s| s.known.is_empty()) {
            let rest = stored.map(|(u, r)| (r.last_crawl, u.to_vec())).collect();
            return Ok((uris, rest));
        }
        // Each stored URI's site, found once per plainly written authority (a URI written
        // otherwise is read whole), as an index into `groups`.
        let mut by_prefix: HashMap<&[u8], usize> = HashMap::new();
        let mut by_site: HashMap<String, usize> = HashMap::new();
        let mut groups: Vec<(Option<String>, usize)> = Vec::new();
        let mut order: Vec<(usize, u64, &[u8])> = Vec::new();
        let mut group_of_site = |site: Option<Cow<'_, str>>| -> usize {
            let key = site.map(Cow::into_owned);
            match &key {
                Some(k) => {
                    if let Some(&g) = by_site.get(k) {
                        return g;
                    }
                    by_site.insert(k.clone(), groups.len());
                }
                None => {
                    if let Some(g) = groups.iter().position(|(s, _)| s.is_none()) {
                        return g;
                    }
                }
            }
            groups.push((key, 0));
            groups.len() - 1
        };
        for (u, r) in stored {
            let g = match plain_authority(u) {
                Some(p) => match by_prefix.get(p) {
                    Some(&g) => g,
                    None => {
                        let g = group_of_site(crawl_site_ref(p));
                        by_prefix.insert(p, g);
                        g
                    }
                },
                None => group_of_site(crawl_site_ref(u)),
            };
            order.push((g, r.last_crawl, u));
        }
        for (g, _, _) in &order {
            groups[*g].1 += 1;
        }
        // The sites that hold: those with sitemaps read before.
        let sites = &mut c.sitemaps.sites;
        let held: Vec<bool> = groups
            .iter()
            .map(|(site, n)| {
                let Some(s) = site.as_deref().and_then(|k| sites.get_mut(k)) else {
                    return false;
                };
                if s.known.is_empty() {
                    return false;
                }
                s.hold = Some(Hold {
                    uris: HashTable::with_capacity(*n),
                    pending: s.known.len(),
                    since: now,
                });
                true
            })
            .collect();
        let mut rest = Vec::new();
        for (g, last_crawl, u) in order {
            if !held[g] {
                rest.push((last_crawl, u.to_vec()));
                continue;
            }
            let site = groups[g].0.as_deref().expect("a held group has a site");
            if let Some(h) = sites.get_mut(site).and_then(|s| s.hold.as_mut()) {
                h.uris.insert_unique(xxh3_64(u), u.into(), |k| xxh3_64(k));
            }
        }
        let mut queue = Vec::new();
        for s in sites.values() {
            if s.hold.is_some() {
                queue.extend(s.known.iter().map(|(u, f)| sitemaps::entry(u, *f, cycle)));
            }
        }
        c.sitemaps.holding = held.iter().filter(|h| **h).count();
        let uris: Vec<Vec<u8>> = uris.into_iter().filter(|u| !c.sitemaps.holds(u)).collect();
        for e in &queue {
            self.add_uri(name, e, false)?;
        }
        Ok((uris, rest))
    }

    /// Releases the holds older than [`HOLD_SECONDS`] (the refresh timer).
    pub(super) fn release_stale_holds(&mut self, now: i64) -> Result<(), SchedError> {
        let mut stale = Vec::new();
        for (name, c) in &self.collections {
            for (site, s) in &c.sitemaps.sites {
                if s.hold
                    .as_ref()
                    .is_some_and(|h| now - h.since >= HOLD_SECONDS)
                {
                    stale.push((name.clone(), site.clone()));
                }
            }
        }
        for (name, site) in stale {
            info!(
                "collection {}: the sitemaps of {site} did not come in {HOLD_SECONDS} s",
                show(&name)
            );
            self.release_hold(&name, &site)?;
        }
        Ok(())
    }
}
