//! The collection operations of the node scheduler that the messages of MS-FSCMT 3.1.5 carry
//! (their handlers are in `node_frames.rs`) and that the shell calls directly: add, update and
//! refresh a collection, queue an entry, stop, release, delete and quarantine sites.

use super::diskfull::Target;
use super::*;

/// Entries of links taken into their site's visit ([`NodeScheduler::add_link_on_visit`]) that
/// may wait for the crawl engine at once; beyond, links go to the crawl queue.
pub const VISIT_READY_MAX: usize = 4096;

/// Takes the entries of `q` whose site `which` selects out of it, in their order, into `out`
/// as (in-flight sequence number, record); the others stay in theirs.
fn take_entries(
    q: &mut VecDeque<Ready>,
    which: impl Fn(&str) -> bool,
    out: &mut Vec<(u64, Vec<u8>)>,
) {
    q.retain_mut(|r| {
        if which(&r.site) {
            out.push((r.seq, std::mem::take(&mut r.record)));
            false
        } else {
            true
        }
    });
}

impl NodeScheduler {
    pub(super) fn set_state(&mut self, name: &[u8], state: i64) -> Result<bool, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("state {state} for unknown collection {}", show(name));
            return Ok(false);
        };
        c.state = state;
        self.save(name)?;
        Ok(true)
    }

    /// Queues an entry found on this node (a start URI, a forward link, a promoted URI): to the
    /// local crawl queue when its site is routed here (or the node is standalone), else to the
    /// multinode scheduler (3.1 "forward links").
    pub fn add_uri(
        &mut self,
        name: &[u8],
        entry: &CrawlQueueEntry<'_>,
        urgent: bool,
    ) -> Result<bool, SchedError> {
        self.add_uri_at(name, entry, None, urgent)
    }

    /// Prefetches the place of `uri` in collection `name`'s seen set (a hint, see
    /// [`SeenSet::prefetch`]): the crawler calls it for each link of a page before it queues
    /// them, so that their seen-set lookups wait for memory together rather than in turn.
    ///
    /// [`SeenSet::prefetch`]: super::seen::SeenSet::prefetch
    pub fn prefetch_seen(&self, name: &[u8], uri: &[u8]) {
        if let Some(c) = self.collections.get(name) {
            c.seen.prefetch(uri);
        }
    }

    /// [`Self::add_uri`] with the entry's crawl site when the caller knows it (the crawl
    /// engine does for a link to the page's own site): it must be `crawl_site` of the URI.
    pub fn add_uri_at(
        &mut self,
        name: &[u8],
        entry: &CrawlQueueEntry<'_>,
        site: Option<&str>,
        urgent: bool,
    ) -> Result<bool, SchedError> {
        if !self.collections.contains_key(name) {
            return Ok(false);
        }
        debug_assert!(site.is_none() || crawl_site_ref(&entry.uri.uri).as_deref() == site);
        let local = self.routed_here(name, &entry.uri.uri, site);
        let c = self.collections.get_mut(name).expect("checked above");
        if local {
            queue_local(c, entry, urgent)?;
        } else {
            c.counters.uris_forwarded += 1;
            let m = UriMsg {
                collection: Cow::Borrowed(name),
                entry: entry.clone(),
            }
            .into_message(urgent);
            self.send_multinode(Priority::Normal, &m);
            self.remember_forward();
        }
        Ok(true)
    }

    /// True when the crawl site of `uri` (`site` when the caller knows it) is routed to this
    /// node, or the node is standalone.
    fn routed_here(&mut self, name: &[u8], uri: &[u8], site: Option<&str>) -> bool {
        self.opts.standalone || {
            let site = match site {
                Some(s) => Some(Cow::Borrowed(s)),
                None => crawl_site_ref(uri),
            };
            site.is_some_and(|site| {
                let attr = self.attr_memo.get(&site);
                self.routing.get(name, attr.as_bytes()) == Some(&self.opts.node_id[..])
            })
        }
    }

    /// [`Self::add_uri_at`] for a link of a page to the page's own crawl site `site`, which
    /// the crawl engine is crawling and can hold `room` more entries of: while the site is
    /// active here, a new URI joins the site's visit at once (journaled in flight and handed to
    /// the engine before any entry still in the crawl queue, [`Self::take_ready`]) instead of
    /// going to the back of the crawl queue, behind every other site's entries. `room` counts
    /// down for each one taken.
    ///
    /// Why: a node crawling thousands of sites met each site's entries only as the queue came
    /// round to them, a few at a time, and every few pages a site's keep-alive connection had
    /// been closed in between and was opened again (160,914 connections for a million pages on
    /// 10,000 hosts against 201 on 100: docs/performance.md, "Eighteenth round"). Politeness is
    /// the engine's as before; the URI is recorded as seen as before, and its entry outlives a
    /// kill like any entry taken from the queue (the in-flight journal puts it back at the
    /// front of the queue on restart).
    pub fn add_link_on_visit(
        &mut self,
        name: &[u8],
        entry: &CrawlQueueEntry<'_>,
        site: &str,
        room: &mut usize,
    ) -> Result<bool, SchedError> {
        let insists = entry.uri_flags & (uri_flags::URIF_PROMOTE | uri_flags::URIF_FORCE) != 0;
        let open = match insists {
            true => None,
            false => self.visit_open(name, &entry.uri.uri, site, *room),
        };
        let Some(ip) = open else {
            return self.add_uri_at(name, entry, Some(site), false);
        };
        let c = self.collections.get_mut(name).expect("visit_open found it");
        // `queue_local`'s checks, in the order a kill needs: the URI is recorded as seen only
        // once its entry's record is in the journal's file. The seen set writes its records
        // as they come (64 KiB at a time), so a URI recorded as seen first could reach the file
        // alone and, after a SIGKILL, be skipped for the rest of the cycle; an entry queued the
        // old way is in the memory-mapped crawl queue at once.
        let uri = &entry.uri.uri;
        if c.sitemaps.holds(uri) || c.seen.contains(uri) {
            c.counters.uris_seen += 1;
            return Ok(true);
        }
        let rec = record(entry, false);
        let seq = c.inflight.add(&rec)?;
        c.inflight.write()?;
        c.seen.insert(uri)?;
        c.sites.visit.push_back(Ready {
            collection: name.to_vec(),
            site: site.to_string(),
            ip,
            record: rec,
            seq,
            conditional: Vec::new(),
        });
        c.counters.uris_queued += 1;
        *room -= 1;
        Ok(true)
    }

    /// The IP address `site` is crawled at when a link to it may join its visit
    /// ([`Self::add_link_on_visit`]): there is room, the site is routed here and active, its
    /// collection is crawling (not suspended, not paused for a full disk, not refreshing only),
    /// fewer than [`VISIT_READY_MAX`] entries wait for the engine, and the in-flight journal
    /// has room for the entry.
    fn visit_open(&mut self, name: &[u8], uri: &[u8], site: &str, room: usize) -> Option<String> {
        if room == 0 || !self.routed_here(name, uri, Some(site)) {
            return None;
        }
        let c = self.collections.get_mut(name)?;
        if c.state != conf_state::ACTIVE
            || c.is_disk_full()
            || c.has_spill()
            || c.refresh_only().is_some()
            || c.sites.visit.len() >= VISIT_READY_MAX
        {
            return None;
        }
        let ip = c.sites.active.get(site)?.clone();
        c.inflight.reserve(super::diskfull::ENTRY_RESERVE).ok()?;
        Some(ip)
    }

    /// Keeps the frame just queued for the multinode scheduler for [`FORWARD_RESEND_WINDOW`].
    pub(super) fn remember_forward(&mut self) {
        if !self.multinode_connected {
            return;
        }
        let Some((Dest::Multinode, _, frame)) = self.out.sends.last() else {
            return;
        };
        let now = std::time::Instant::now();
        while self.forwarded.front().is_some_and(|(t, _)| {
            now.duration_since(*t) > FORWARD_RESEND_WINDOW
                || self.forwarded.len() >= FORWARD_RESEND_MAX
        }) {
            self.forwarded.pop_front();
        }
        self.forwarded.push_back((now, frame.clone()));
    }

    /// Adds a collection locally (standalone `--config`) or from CMD_ADM_CONF_ADD (3.1.5.10).
    pub fn conf_add(&mut self, name: &[u8], dict: Value<'static>) -> Result<(), SchedError> {
        if self.collections.contains_key(name) {
            return self.conf_update(name, dict);
        }
        let c = self.open_collection(name, dict, 0)?;
        let servers = ppdup_servers(&c.dict);
        self.collections.insert(name.to_vec(), c);
        self.save(name)?;
        for s in &servers {
            self.dups.entry(s.clone()).or_default();
        }
        let connected: Vec<String> = servers
            .into_iter()
            .filter(|s| self.dups.get(s).is_some_and(|d| d.connected))
            .collect();
        self.send_set_config(name, &connected);
        if self.opts.standalone {
            // A standalone node is its own multinode scheduler: it queues the start URIs.
            self.requeue_start_uris(name)?;
        }
        info!("collection {} added", show(name));
        Ok(())
    }

    /// 3.1.5.11.
    pub fn conf_update(&mut self, name: &[u8], dict: Value<'static>) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!(
                "CMD_ADM_CONF_UPDATE for unknown collection {} ignored",
                show(name)
            );
            return Ok(());
        };
        c.settings = crate::config::parsed(name, &dict);
        c.refresh.policy = RefreshPolicy::of(&c.settings);
        c.count_documents();
        c.dict = dict;
        let servers = ppdup_servers(&c.dict);
        self.save(name)?;
        for s in &servers {
            self.dups.entry(s.clone()).or_default();
        }
        self.send_set_config(name, &servers);
        self.requeue_start_uris(name)?;
        info!("collection {} updated", show(name));
        Ok(())
    }

    pub(super) fn requeue_start_uris(&mut self, name: &[u8]) -> Result<(), SchedError> {
        let uris = self
            .collections
            .get(name)
            .map(|c| start_uris(&c.dict))
            .unwrap_or_default();
        for u in uris {
            self.add_uri(name, &start_uri_entry(&u), false)?;
        }
        Ok(())
    }

    /// CMD_ADM_CONF_REFRESH (2.2.3.10 bitmask).
    pub fn refresh(
        &mut self,
        name: &[u8],
        subcollection: Option<&[u8]>,
        options: i64,
    ) -> Result<(), SchedError> {
        if !self.collections.contains_key(name) {
            warn!("refresh of unknown collection {}", show(name));
            return Ok(());
        }
        // PKT_DATA[0] names a subcollection: only its URIs, within the current cycle (the
        // entire collection is None, 2.2.3.10).
        if let Some(sub) = subcollection.filter(|s| !s.is_empty()) {
            return self.refetch_subcollection(name, sub);
        }
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let scratch = c.refresh.policy.mode == crate::config::RefreshMode::Scratch;
        if scratch || options & refresh_options::TRUNCATE_AND_RESTART != 0 {
            c.queue.clear()?;
            c.quarantine_queue.clear()?;
            c.sites.fold_visits();
            for r in c.sites.ready.drain(..) {
                c.inflight.done(r.seq)?;
            }
            for (_, w) in c.sites.waiting.drain() {
                for (seq, _) in w.records {
                    c.inflight.done(seq)?;
                }
            }
        }
        c.refresh.cycle += 1;
        self.cycles_begun += 1;
        c.seen.clear()?;
        let cycle = c.refresh.cycle;
        let uris = start_uris(&c.dict);
        info!(
            "collection {}: refresh cycle {cycle} (options {options:#x}, {} start URIs)",
            show(name),
            uris.len()
        );
        // START_URIS_ONLY queues the start URIs alone.
        let everything = options & refresh_options::START_URIS_ONLY == 0;
        self.start_cycle(name, cycle, uris, everything, self.opts.clock.now())?;
        self.save(name)
    }

    /// Stops the sites of `name` that `which` selects: their pending entries go back to the
    /// front (or, `front` false, the back) of the crawl queue, their IP addresses are released.
    pub(super) fn stop_sites(
        &mut self,
        name: &[u8],
        which: impl Fn(&str) -> bool,
        front: bool,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
        let waiting: Vec<String> = c
            .sites
            .waiting
            .keys()
            .filter(|s| which(s))
            .cloned()
            .collect();
        for s in waiting {
            if let Some(w) = c.sites.waiting.remove(&s) {
                records.extend(w.records);
            }
        }
        c.sites.fold_visits();
        take_entries(&mut c.sites.ready, &which, &mut records);
        let stopped: Vec<String> = c
            .sites
            .active
            .keys()
            .filter(|s| which(s))
            .cloned()
            .collect();
        // Each finished in the journal once it is back in the queue.
        c.put_back(&records, front)?;
        c.sites.stopped.extend(stopped.iter().cloned());
        for s in stopped {
            self.release_site(name, &s);
        }
        Ok(())
    }

    /// The sites stopped since the last call, by collection: the crawl engine starts no new
    /// request for them and hands back what it holds ([`Self::give_back`]).
    pub fn take_stopped(&mut self) -> Vec<(Vec<u8>, Vec<String>)> {
        self.collections
            .iter_mut()
            .filter(|(_, c)| !c.sites.stopped.is_empty())
            .map(|(n, c)| (n.clone(), std::mem::take(&mut c.sites.stopped)))
            .collect()
    }

    /// Entries the crawl engine held for stopped sites, (in-flight sequence number, record)
    /// in the order it would have fetched them: back to the front of the crawl queue, in that
    /// order, each finished in the journal once queued.
    pub fn give_back(&mut self, name: &[u8], held: Vec<(u64, Vec<u8>)>) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        c.put_back(&held, true)
    }

    /// The multinode scheduler is gone, and with it the IP addresses it granted (it keeps
    /// them in memory only, MS-FSCMT 3.2.1): every active site stops (3.1.5.21: a site is
    /// crawled only while its IP is granted) and waits for its address to be granted again,
    /// with the entries that were ready for it; [`Self::ask_again`] claims it on the next
    /// connection, and a refusal blocks it like any refused site. No CMD_UM_STOP_CRAWL_IP goes
    /// out: the multinode scheduler that granted the addresses is gone.
    pub(in crate::sched) fn drop_claims(&mut self) {
        for c in self.collections.values_mut() {
            c.sites.ip_sites.clear();
            let active: Vec<(String, String)> = c.sites.active.drain().collect();
            for (site, ip) in &active {
                c.sites.waiting.insert(
                    site.clone(),
                    Waiting {
                        host: site_host(site).to_string(),
                        ip: Some(ip.clone()),
                        records: Vec::new(),
                    },
                );
            }
            c.sites.fold_visits();
            let mut kept = VecDeque::new();
            for r in c.sites.ready.drain(..) {
                match c.sites.waiting.get_mut(&r.site) {
                    Some(w) => w.records.push((r.seq, r.record)),
                    None => kept.push_back(r),
                }
            }
            c.sites.ready = kept;
            c.sites.stopped.extend(active.into_iter().map(|(s, _)| s));
        }
    }

    /// A site ends: out of the active list, its IP released when no other site uses it
    /// (CMD_UM_STOP_CRAWL_IP, 2.2.4.12).
    pub(super) fn release_site(&mut self, name: &[u8], site: &str) {
        let Some(c) = self.collections.get_mut(name) else {
            return;
        };
        let Some(ip) = c.sites.active.remove(site) else {
            return;
        };
        let last = match c.sites.ip_sites.get_mut(&ip) {
            Some(set) => {
                set.remove(site);
                set.is_empty()
            }
            None => true,
        };
        if last {
            c.sites.ip_sites.remove(&ip);
            if self.opts.standalone {
                self.local_ip_locks.remove(&ip);
            }
        }
        self.send_stop_crawl_ip(name, &ip, site);
    }

    /// CMD_UM_STOP_CRAWL_IP (MS-FSCMT 2.2.4.12): this node stopped crawling `site` at `ip`.
    /// Sent for every site whose START_CRAWL_IP was granted, each START closed by its STOP;
    /// the multinode scheduler frees the address once no site of this node holds it.
    pub(super) fn send_stop_crawl_ip(&mut self, name: &[u8], ip: &str, site: &str) {
        let m = Message::CmdUmStopCrawlIp(StopCrawlIp {
            collection: owned(name),
            ip: owned(ip.as_bytes()),
            site: owned(site.as_bytes()),
        });
        self.send_multinode(Priority::Normal, &m);
    }

    /// The crawl engine finished `site`.
    ///
    /// Entries of the site not yet handed to the engine (a visit's, or ready ones left for a
    /// later step, or all of them while the collection is paused for a full disk) go back to
    /// the front of the crawl queue first, in their order: handed out after the release, they
    /// would be fetched at an address no longer granted (MS-FSCMT 3.1.5.21).
    ///
    /// The site is released even when that put-back fails (the error returned): the entries
    /// stay outstanding in the in-flight journal, which puts them back at the next start.
    pub fn site_done(&mut self, name: &[u8], site: &str) -> Result<(), SchedError> {
        let mut result = Ok(());
        if let Some(c) = self.collections.get_mut(name) {
            let mut back: Vec<(u64, Vec<u8>)> = Vec::new();
            take_entries(&mut c.sites.visit, |s| s == site, &mut back);
            take_entries(&mut c.sites.ready, |s| s == site, &mut back);
            if !back.is_empty() {
                debug!(
                    "collection {}: site {site} done with {} entries not yet crawled: back to \
                     the crawl queue",
                    show(name),
                    back.len()
                );
                result = c.put_back(&back, true);
            }
        }
        self.release_site(name, site);
        result
    }

    /// Drops queued entries (and checksums) of `name` that `hit(site, uri)` selects.
    pub(super) fn delete_matching(
        &mut self,
        name: &[u8],
        hit: impl Fn(&str, &[u8]) -> bool,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("delete in unknown collection {}", show(name));
            return Ok(());
        };
        let matches = |rec: &[u8]| {
            parse_record(rec).is_ok_and(|(e, _)| {
                let site = crawl_site(&e.uri.uri).unwrap_or_default();
                hit(&site, &e.uri.uri)
            })
        };
        let mut dropped = 0u64;
        for to in [Target::Queue, Target::Quarantine] {
            let n = c.queue_of(to).len();
            for _ in 0..n {
                // Published by the push that puts it back (or at the end, when dropped): a kill
                // in between leaves it queued.
                let Some(rec) = c.queue_of(to).pop_front_unpublished()? else {
                    break;
                };
                if matches(&rec) {
                    dropped += 1;
                } else {
                    c.enqueue(to, false, &rec, None)?;
                }
            }
            c.queue_of(to).publish()?;
        }
        let mut finished = Vec::new();
        c.sites.fold_visits();
        c.sites.ready.retain(|r| {
            let m = matches(&r.record);
            dropped += u64::from(m);
            if m {
                finished.push(r.seq);
            }
            !m
        });
        for w in c.sites.waiting.values_mut() {
            w.records.retain(|(seq, r)| {
                let m = matches(r);
                dropped += u64::from(m);
                if m {
                    finished.push(*seq);
                }
                !m
            });
        }
        for seq in finished {
            c.inflight.done(seq)?;
        }
        c.counters.uris_dropped += dropped;
        // Stored documents: a delete fed for each, their checksums released.
        let deleted = self.delete_stored_matching(name, &|s, u| hit(s, u))?;
        info!(
            "collection {}: {deleted} stored documents deleted",
            show(name)
        );
        info!(
            "collection {}: {dropped} queued entries deleted",
            show(name)
        );
        Ok(())
    }

    /// 3.1.5.17 / 3.1.5.18.
    pub(super) fn quarantine(
        &mut self,
        name: &[u8],
        site: &[u8],
        seconds: i64,
        now: i64,
    ) -> Result<(), SchedError> {
        let site = String::from_utf8_lossy(site).into_owned();
        if !self.collections.contains_key(name) {
            warn!("quarantine in unknown collection {}", show(name));
            return Ok(());
        }
        // 1. Stop crawling it; its pending entries go to the front of the crawl queue and wait
        // in the quarantine queue until the quarantine ends. That is also the final step of
        // CMD_UM_QUARANTINE_SITE_REQUEUE (3.1.5.18): the site's own entries are the site
        // queued at the front; nothing else (such as its root page) is added.
        self.stop_sites(name, |s| s == site, true)?;
        let c = self.collections.get_mut(name).expect("checked above");
        // 2. On the quarantine list until the period ends.
        c.sites
            .quarantine
            .insert(site.clone(), now.saturating_add(seconds.max(0)));
        info!(
            "collection {}: site {site} quarantined for {seconds} s",
            show(name)
        );
        Ok(())
    }
}
