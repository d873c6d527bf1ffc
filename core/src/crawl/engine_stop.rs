//! The crawl engine forgetting a collection or stopping sites: the entries it held go back to
//! the node scheduler (MS-FSCMT 3.1.5.4, 3.1.5.12, 3.1.5.13, 3.1.5.17); and the room sites
//! hold while they are crawled.
//!
//! A site started holds its `max_site_connections` of the engine's room (`max_in_flight`, the
//! fetcher's socket limit) until it is released, and counts against its collection's
//! `max_sites` (the sites a node scheduler crawls at once); a site that finds no room, or whose
//! collection has `max_sites` started, is parked, its entries held, until a released site frees
//! some. Without this, a node with more sites ready
//! than sockets spread its requests over all of them, and each request closed another site's
//! idle keep-alive connection to open its own: a new connection for nearly every page once a
//! node had more than a few hundred sites going (98,887 connections for 100,000 pages on 2,000
//! hosts, against 325 on 100 hosts). Politeness is the same: a parked site makes no request.

use std::collections::VecDeque;

use super::{Action, CrawlEngine, Site, SiteKey};

impl CrawlEngine {
    /// Forgets a collection: its entries held here are dropped and its sites released.
    pub fn remove_collection(&mut self, name: &[u8]) -> Vec<Action> {
        self.configs.remove(name);
        self.capped.remove(name);
        let mut out = Vec::new();
        let keys: Vec<SiteKey> = self.sites.keys().filter(|k| k.0 == name).cloned().collect();
        for k in keys {
            if let Some(s) = self.drop_site(&k) {
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
            if let Some(s) = self.drop_site(&k) {
                self.queued -= s.queue.len();
                out.extend(s.queue.into_iter().map(|h| (h.seq, h.record)));
            }
        }
        out
    }

    /// The sites of collection `name` holding room now.
    pub fn sites_started(&self, name: &[u8]) -> u32 {
        self.started.get(name).copied().unwrap_or(0)
    }

    /// The most sites of collection `name` started at once (`max_sites`, at least 1).
    fn max_sites(&self, name: &[u8]) -> u32 {
        self.configs
            .get(name)
            .map_or(u32::MAX, |c| c.max_sites.max(1))
    }

    /// True when a site waits for room, or for a place among collection `name`'s
    /// `max_sites`.
    pub(super) fn others_waiting(&self, name: &[u8]) -> bool {
        !self.slots.1.is_empty() || self.capped.get(name).is_some_and(|q| !q.is_empty())
    }

    /// Gives `key` `need` of the engine's room; false (the site parked until room or a place
    /// is free) when its collection has `max_sites` sites started, or other sites hold all
    /// the room.
    pub(super) fn take_slot(&mut self, key: &SiteKey, need: u32) -> bool {
        if self.sites_started(&key.0) >= self.max_sites(&key.0) {
            self.park(key, true);
            return false;
        }
        let used = self.slots.0;
        if used > 0 && used + need as usize > self.opts.max_in_flight {
            self.park(key, false);
            return false;
        }
        self.slots.0 += need as usize;
        *self.started.entry_ref(key.0.as_slice()).or_default() += 1;
        if let Some(site) = self.sites.get_mut(key) {
            site.slot = need;
        }
        true
    }

    /// Queues `key` to wait for a place of its collection (`capped`) or for room (`slots.1`),
    /// unless a copy of it waits already (it is looked at again when that copy comes up).
    fn park(&mut self, key: &SiteKey, for_place: bool) {
        let Some(site) = self.sites.get_mut(key) else {
            return;
        };
        if std::mem::replace(&mut site.parked, true) {
            return;
        }
        match for_place {
            true => self
                .capped
                .entry_ref(key.0.as_slice())
                .or_default()
                .push_back(key.clone()),
            false => self.slots.1.push_back(key.clone()),
        }
    }

    /// Ends the turn of `key` (max_inter_docs): its room and its place go to the sites waiting
    /// for them (at the next poll) and it is parked behind them, its entries held.
    pub(super) fn yield_turn(&mut self, key: &SiteKey) {
        let same_collection_waits = self.capped.get(&key.0).is_some_and(|q| !q.is_empty());
        self.release_slot(key);
        self.park(key, same_collection_waits);
    }

    /// Removes a site; its room and place go to parked sites at the next poll.
    pub(super) fn drop_site(&mut self, key: &SiteKey) -> Option<Site> {
        let site = self.sites.remove(key)?;
        self.free_room(&key.0, site.slot);
        Some(site)
    }

    /// Gives the room of `key`, idle and lingering, to the sites parked for room or for its
    /// collection's places: a site idle while others wait holds none (it takes room again when
    /// entries come, [`Self::take_slot`]). Held through the linger, the room of a wave of sites
    /// that finished together kept the next wave parked for the whole linger: half a second to
    /// a second with nothing fetched, every few seconds of a crawl of thousands of hosts
    /// (docs/performance.md, "Waves of sites").
    pub(super) fn lend_room(&mut self, key: &SiteKey) {
        if self.others_waiting(&key.0) {
            self.release_slot(key);
        }
    }

    /// Takes the room and place `key` holds from it (it takes them again before its next
    /// request).
    pub(super) fn release_slot(&mut self, key: &SiteKey) {
        let Some(site) = self.sites.get_mut(key) else {
            return;
        };
        let slot = std::mem::take(&mut site.slot);
        site.turn = 0;
        self.free_room(&key.0, slot);
    }

    /// Returns `slot` of the engine's room and a place among its `max_sites`, held by a site
    /// of collection `name`. Parked sites get them at the next [`Self::unpark`].
    fn free_room(&mut self, name: &[u8], slot: u32) {
        if slot == 0 {
            return;
        }
        self.slots.0 -= slot as usize;
        if let Some(n) = self.started.get_mut(name) {
            *n = n.saturating_sub(1);
        }
    }

    /// The parked site `k` taken off its queue: true when it still waits (it exists, holds no
    /// room and has entries); keys of sites since removed, started or idle are dropped.
    fn unqueued(&mut self, k: &SiteKey) -> bool {
        let Some(site) = self.sites.get_mut(k) else {
            return false;
        };
        site.parked = false;
        site.slot == 0 && !site.queue.is_empty()
    }

    /// Wakes parked sites for the places and room free now, once a poll: for each collection
    /// under its `max_sites`, as many sites parked for a place as it has places free; then as
    /// many sites parked for room as the room takes, a site whose collection has its places
    /// taken (counting the sites woken here) moving to its collection's queue. Each key taken
    /// off a queue is either woken, moved once, or dropped, so the work is bounded by what is
    /// free; a woken site that cannot start after all parks again and is looked at the next
    /// poll, so no site waits on a wake that went to a site since removed.
    pub(super) fn unpark(&mut self) {
        let need_of = |e: &CrawlEngine, k: &SiteKey| {
            e.configs
                .get(&k.0)
                .map_or(1, |c| c.max_site_connections.max(1) as usize)
        };
        // Sites woken here, by collection.
        let mut woken: Vec<(Vec<u8>, u32)> = Vec::new();
        let mut room = self.opts.max_in_flight.saturating_sub(self.slots.0);
        if self.capped.values().any(|q| !q.is_empty()) {
            let names: Vec<Vec<u8>> = self
                .capped
                .iter()
                .filter(|(_, q)| !q.is_empty())
                .map(|(n, _)| n.clone())
                .collect();
            for name in names {
                let free = self
                    .max_sites(&name)
                    .saturating_sub(self.sites_started(&name));
                let mut n = 0;
                while n < free && room > 0 {
                    let Some(k) = self.capped.get_mut(&name).and_then(VecDeque::pop_front) else {
                        break;
                    };
                    if !self.unqueued(&k) {
                        continue;
                    }
                    n += 1;
                    room = room.saturating_sub(need_of(self, &k));
                    self.wake(&k);
                }
                woken.push((name, n));
            }
        }
        let mut left = self.slots.1.len();
        while room > 0 && left > 0 {
            left -= 1;
            let Some(k) = self.slots.1.pop_front() else {
                break;
            };
            if !self.unqueued(&k) {
                continue;
            }
            let w = match woken.iter().position(|(c, _)| *c == k.0) {
                Some(i) => i,
                None => {
                    woken.push((k.0.clone(), 0));
                    woken.len() - 1
                }
            };
            if self.sites_started(&k.0) + woken[w].1 >= self.max_sites(&k.0) {
                self.park(&k, true);
                continue;
            }
            woken[w].1 += 1;
            room = room.saturating_sub(need_of(self, &k));
            self.wake(&k);
        }
    }
}
