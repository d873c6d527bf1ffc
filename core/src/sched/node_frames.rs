//! The node scheduler's message handlers (MS-FSCMT 3.1.5): every message from the multinode
//! scheduler and the duplicate servers, and the collection operations they carry (add, update,
//! remove, refresh, suspend, site and URI operations, routes).

use super::*;

impl NodeScheduler {
    /// One frame from the multinode scheduler or a duplicate server.
    pub fn handle_frame(&mut self, from: &Dest, body: &[u8], now: i64) -> Result<(), SchedError> {
        match crate::frame::decode_message(body, &Limits::default()) {
            Ok((_, m)) => self.handle_message(from, m, now),
            Err(e) => {
                warn!("{from:?}: undecodable frame ignored: {e}");
                Ok(())
            }
        }
    }

    /// One message (3.1.5).
    pub fn handle_message(
        &mut self,
        from: &Dest,
        m: Message<'_>,
        now: i64,
    ) -> Result<(), SchedError> {
        match m {
            Message::CmdUmKeepalive => {
                self.send_multinode(Priority::Normal, &Message::CmdUmKeepaliveAck)
            }
            Message::CmdUmKeepaliveAck => self.multinode_keepalive_pending = false,
            Message::CmdUmUri(u) => self.on_uri(&u, false)?,
            Message::CmdUmUriUrg(u) => self.on_uri(&u, true)?,
            Message::CmdAdmConfSuspend(s) => {
                if !matches!(
                    s.state,
                    conf_state::SUSPENDED_USER
                        | conf_state::SUSPENDED_DISK
                        | conf_state::SUSPENDED_VARIABLE_DELAY
                ) {
                    warn!(
                        "CMD_ADM_CONF_SUSPEND with state {}: not 4, 5 or 8; ignored",
                        s.state
                    );
                } else if self.set_state(&s.collection, s.state)? {
                    // 3.1.5.4: stop crawling every site of the collection.
                    self.stop_sites(&s.collection, |_| true, true)?;
                }
            }
            Message::CmdAdmConfResume(c) => {
                self.set_state(&c.collection, conf_state::ACTIVE)?;
            }
            Message::CmdAdmConfFeedingSuspend(f) => {
                if let Some(c) = self.collections.get_mut(f.collection.as_ref()) {
                    match &f.destinations {
                        None => {
                            c.feeding_all_suspended = f.suspend;
                            if !f.suspend {
                                c.feeding_suspended.clear();
                            }
                        }
                        Some(ds) => {
                            for d in ds {
                                if f.suspend {
                                    c.feeding_suspended.insert(d.to_vec());
                                } else {
                                    c.feeding_suspended.remove(d.as_ref());
                                }
                            }
                        }
                    }
                    // The document log is the default destination.
                    let held =
                        c.feeding_all_suspended || c.feeding_suspended.contains(&b"default"[..]);
                    self.save(&f.collection)?;
                    self.set_feeding(&f.collection, held)?;
                }
            }
            Message::CmdUmAddRoute(r) => self.on_add_route(&r, now),
            Message::CmdUmAskRoute(c) => self.on_ask_route(&c.collection),
            Message::CmdAdmConfRefresh(r) => {
                self.refresh(&r.collection, r.subcollection.as_deref(), r.options)?
            }
            Message::CmdAdmConfAdd(c) => self.conf_add(&c.collection, c.config.into_owned())?,
            Message::CmdAdmConfUpdate(c) => {
                self.conf_update(&c.collection, c.config.into_owned())?
            }
            Message::CmdAdmConfRemove(c) => self.conf_remove(&c.collection)?,
            Message::CmdAdmPreemptSite(p) => {
                let site = String::from_utf8_lossy(&p.site).into_owned();
                let active = self
                    .collections
                    .get(p.collection.as_ref())
                    .is_some_and(|c| c.active.contains_key(&site) || c.waiting.contains_key(&site));
                // 3.1.5.13: ignored unless the site is being crawled.
                if active {
                    self.stop_sites(&p.collection, |s| s == site, p.requeue)?;
                }
            }
            Message::CmdUmReprocessSite(r) => {
                let site = String::from_utf8_lossy(&r.site).into_owned();
                self.reprocess(&r.collection, &site, &r.prefix, r.exact)?;
            }
            Message::CmdUmDeleteSite(d) => {
                let site = String::from_utf8_lossy(&d.site).into_owned();
                self.delete_matching(&d.collection, |s, _| s == site)?;
            }
            Message::CmdUmDeleteUris(d) => {
                let uris: BTreeSet<Vec<u8>> = d
                    .uris
                    .iter()
                    .flat_map(|(_, l)| l.iter().map(|u| u.to_vec()))
                    .collect();
                self.delete_matching(&d.collection, |_, u| uris.contains(u))?;
            }
            Message::CmdUmQuarantineSite(q) => {
                self.quarantine(&q.collection, &q.site, q.seconds, false, now)?
            }
            Message::CmdUmQuarantineSiteRequeue(q) => {
                self.quarantine(&q.collection, &q.site, q.seconds, true, now)?
            }
            Message::CmdUmDnsReply(r) => {
                let e = DnsEntry {
                    addrinfo: r
                        .addrinfo
                        .map(|v| v.into_iter().map(|a| a.into_owned()).collect()),
                    resolved_at: r.resolved_at,
                    ttl: r.ttl,
                };
                self.dns_answer(&String::from_utf8_lossy(&r.host), e, now)?;
            }
            Message::CmdUmConfState(s) => {
                self.set_state(&s.collection, s.state)?;
            }
            Message::CmdUmStartCrawlIpReply(r) => self.on_start_crawl_ip(
                &r.collection,
                &String::from_utf8_lossy(&r.ip),
                &String::from_utf8_lossy(&r.site),
                r.allowed,
                now,
            )?,
            Message::PpdupConfigAck(a) => {
                if let Dest::Dup(addr) = from {
                    if let Some(d) = self.dups.get_mut(addr) {
                        if a.vclock == d.vclock {
                            d.updated = true;
                        } else {
                            // 3.1.5.22: not the reply to the latest SET_CONFIG.
                            debug!(
                                "{addr}: stale PPDUP_CONFIG_ACK ({} != {})",
                                a.vclock, d.vclock
                            );
                        }
                    }
                }
            }
            Message::PpdupAddOk(ok) => {
                let pending = self
                    .collections
                    .get_mut(ok.collection.as_ref())
                    .and_then(|c| c.pending_adds.remove(ok.uri.as_ref()));
                if pending.is_some() {
                    let owner = ok.owner_uri.as_deref().unwrap_or(&ok.uri).to_vec();
                    if let Some(v) = self.resolve_document(&ok.collection, &ok.uri, &owner)? {
                        self.verdicts.push(v);
                    }
                }
            }
            Message::PpdupRemoveOk(ok) => {
                // 3.1.5.24: the URI leaves the checksum database, under the checksum its
                // PPDUP_REMOVE named (taken out already when it was sent; unless the URI holds
                // that checksum again since, as its stored copy says).
                if let Some(c) = self.collections.get_mut(ok.collection.as_ref()) {
                    let uri = ok.uri.as_ref();
                    let cs = c.pending_removes.get_mut(uri).and_then(VecDeque::pop_front);
                    if c.pending_removes.get(uri).is_some_and(VecDeque::is_empty) {
                        c.pending_removes.remove(uri);
                    }
                    let holds = |cs: &Checksum| {
                        c.store
                            .get(uri)
                            .is_some_and(|r| r.state == UriState::Stored && r.checksum == cs.0)
                    };
                    if let Some(cs) = cs.filter(|cs| !holds(cs)) {
                        if let Some(owners) = c.checksums.get_mut(&cs) {
                            owners.remove(uri);
                            if owners.is_empty() {
                                c.checksums.remove(&cs);
                            }
                        }
                    }
                }
            }
            Message::PpdupPromoteReq(p) => {
                // 3.1.5.25: re-crawl every URI with that checksum.
                let uris = self.checksum_owners(&p.collection, &p.checksum);
                for u in uris {
                    let mut e = start_uri_entry(&u);
                    e.uri_flags = uri_flags::URIF_PROMOTE;
                    self.add_uri(&p.collection, &e, true)?;
                }
            }
            Message::PpdupError(e) => warn!(
                "{from:?}: PPDUP_ERROR for collection {}: {}",
                show(&e.collection),
                show(&e.why)
            ),
            Message::PpdupKeepalive => {
                if let Dest::Dup(a) = from {
                    self.out.send(
                        Dest::Dup(a.clone()),
                        Priority::Normal,
                        &Message::PpdupKeepaliveAck,
                    );
                }
            }
            Message::PpdupKeepaliveAck => {
                if let Dest::Dup(a) = from {
                    if let Some(d) = self.dups.get_mut(a) {
                        d.keepalive_pending = false;
                    }
                }
            }
            other => warn!(
                "{from:?}: {} is not a node scheduler message; ignored",
                other.command().name()
            ),
        }
        Ok(())
    }

    fn set_state(&mut self, name: &[u8], state: i64) -> Result<bool, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("state {state} for unknown collection {}", show(name));
            return Ok(false);
        };
        c.state = state;
        self.save(name)?;
        Ok(true)
    }

    /// 3.1.5.2 / 3.1.5.3.
    fn on_uri(&mut self, u: &UriMsg<'_>, urgent: bool) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(u.collection.as_ref()) else {
            warn!(
                "CMD_UM_URI for unknown collection {} dropped",
                show(&u.collection)
            );
            return Ok(());
        };
        queue_local(c, &u.entry, urgent)
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
        if !self.collections.contains_key(name) {
            return Ok(false);
        }
        let local = self.opts.standalone
            || crawl_site(&entry.uri.uri).is_some_and(|site| {
                self.routing.get(name, routing_attribute(&site).as_bytes())
                    == Some(&self.opts.node_id[..])
            });
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

    /// Keeps the frame just queued for the multinode scheduler for [`FORWARD_RESEND_WINDOW`].
    fn remember_forward(&mut self) {
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

    /// 3.1.5.7.
    fn on_add_route(&mut self, r: &AddRoute<'_>, now: i64) {
        self.routing.set(&r.collection, &r.routing_attr, &r.node_id);
        if r.node_id.as_ref() == self.opts.node_id && r.addrinfo.is_some() {
            let host = site_host(&String::from_utf8_lossy(&r.site)).to_string();
            let e = DnsEntry {
                addrinfo: r
                    .addrinfo
                    .clone()
                    .map(|v| v.into_iter().map(|a| a.into_owned()).collect()),
                resolved_at: now,
                ttl: r.ttl,
            };
            self.dns.insert(host.as_bytes(), e, now);
        }
    }

    /// 3.1.5.8: every route in CMD_UM_ADD_ROUTE lists of at most 256, then CMD_UM_LAST_ROUTE.
    fn on_ask_route(&mut self, name: &[u8]) {
        let routes: Vec<(Bytes<'static>, Bytes<'static>)> = self
            .routing
            .routes(name)
            .map(|(a, n)| (owned(a), owned(n)))
            .collect();
        for chunk in routes.chunks(RouteList::MAX_ROUTES) {
            let m = Message::CmdUmAddRoutes(RouteList {
                collection: owned(name),
                routes: chunk.to_vec(),
            });
            self.send_multinode(Priority::Normal, &m);
        }
        self.send_multinode(
            Priority::Normal,
            &Message::CmdUmLastRoute(CollectionOnly {
                collection: owned(name),
            }),
        );
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
        c.policy = RefreshPolicy::of(name, &dict);
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

    fn requeue_start_uris(&mut self, name: &[u8]) -> Result<(), SchedError> {
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

    /// 3.1.5.12, its five steps.
    fn conf_remove(&mut self, name: &[u8]) -> Result<(), SchedError> {
        if !self.collections.contains_key(name) {
            warn!("CMD_ADM_CONF_REMOVE for unknown collection {}", show(name));
            self.send_multinode(
                Priority::Normal,
                &Message::CmdUmDeleteOk(CollectionOnly {
                    collection: owned(name),
                }),
            );
            return Ok(());
        }
        // 1. Stop crawling every active site.
        self.stop_sites(name, |_| true, false)?;
        // 2. Remove everything about the collection.
        let mut c = self.collections.remove(name).expect("checked above");
        c.queue.clear()?;
        c.quarantine_queue.clear()?;
        let servers = ppdup_servers(&c.dict);
        drop(c);
        self.routing.drop_collection(name);
        self.routing.sync()?;
        self.dirs.remove(name)?;
        self.local_ip_locks.retain(|_, n| n != name);
        // 3. PPDUP_CONF_REMOVE at the front of each duplicate server's queue.
        let m = Message::PpdupConfRemove(PpdupConfRemove {
            collection: owned(name),
            ppdup_id: None,
        });
        self.send_dups(&servers, Priority::High, &m);
        // 4. PPDUP_CONF_REMOVE2 at the back.
        let m = Message::PpdupConfRemove2(CollectionOnly {
            collection: owned(name),
        });
        self.send_dups(&servers, Priority::Normal, &m);
        // 5. CMD_UM_DELETE_OK.
        self.send_multinode(
            Priority::Normal,
            &Message::CmdUmDeleteOk(CollectionOnly {
                collection: owned(name),
            }),
        );
        info!("collection {} removed", show(name));
        Ok(())
    }

    /// CMD_ADM_CONF_REFRESH (2.2.3.10 bitmask).
    pub fn refresh(
        &mut self,
        name: &[u8],
        subcollection: Option<&[u8]>,
        options: i64,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("refresh of unknown collection {}", show(name));
            return Ok(());
        };
        let scratch = c.policy.mode == crate::config::RefreshMode::Scratch;
        if scratch || options & refresh_options::TRUNCATE_AND_RESTART != 0 {
            c.queue.clear()?;
            c.quarantine_queue.clear()?;
            for r in c.ready.drain(..) {
                c.inflight.done(r.seq)?;
            }
            for (_, w) in c.waiting.drain() {
                for (seq, _) in w.records {
                    c.inflight.done(seq)?;
                }
            }
        }
        c.refresh_cycle += 1;
        c.seen.clear()?;
        let cycle = c.refresh_cycle;
        let mut uris = start_uris(&c.dict);
        if let (Some(sub), true) = (
            subcollection,
            options & refresh_options::REFRESH_SUBCOLLECTION != 0,
        ) {
            // A subcollection's own start URIs (its dict under "subdomains").
            uris = c
                .dict
                .get(b"subdomains")
                .and_then(|s| s.get(sub))
                .map(start_uris)
                .unwrap_or_default();
        }
        info!(
            "collection {}: refresh cycle {cycle} (options {options:#x}, {} start URIs)",
            show(name),
            uris.len()
        );
        // START_URIS_ONLY, and a subcollection's refresh, queue the start URIs alone.
        let everything = options & refresh_options::START_URIS_ONLY == 0
            && options & refresh_options::REFRESH_SUBCOLLECTION == 0;
        self.start_cycle(name, cycle, uris, everything, unix_now())?;
        self.save(name)
    }

    /// Stops the sites of `name` that `which` selects: their pending entries go back to the
    /// front (or, `front` false, the back) of the crawl queue, their IP addresses are released.
    fn stop_sites(
        &mut self,
        name: &[u8],
        which: impl Fn(&str) -> bool,
        front: bool,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let mut records: Vec<(u64, Vec<u8>)> = Vec::new();
        let waiting: Vec<String> = c.waiting.keys().filter(|s| which(s)).cloned().collect();
        for s in waiting {
            if let Some(w) = c.waiting.remove(&s) {
                records.extend(w.records);
            }
        }
        let mut kept = VecDeque::new();
        for r in c.ready.drain(..) {
            if which(&r.site) {
                records.push((r.seq, r.record));
            } else {
                kept.push_back(r);
            }
        }
        c.ready = kept;
        let stopped: Vec<String> = c.active.keys().filter(|s| which(s)).cloned().collect();
        if front {
            for (_, r) in records.iter().rev() {
                c.queue.push_front(r)?;
            }
        } else {
            for (_, r) in &records {
                c.queue.push_back(r)?;
            }
        }
        for (seq, _) in &records {
            c.inflight.done(*seq)?;
        }
        for s in stopped {
            self.release_site(name, &s);
        }
        Ok(())
    }

    /// A site ends: out of the active list, its IP released when no other site uses it
    /// (CMD_UM_STOP_CRAWL_IP, 2.2.4.12).
    fn release_site(&mut self, name: &[u8], site: &str) {
        let Some(c) = self.collections.get_mut(name) else {
            return;
        };
        let Some(ip) = c.active.remove(site) else {
            return;
        };
        let last = match c.ip_sites.get_mut(&ip) {
            Some(set) => {
                set.remove(site);
                set.is_empty()
            }
            None => true,
        };
        if last {
            c.ip_sites.remove(&ip);
            if self.opts.standalone {
                self.local_ip_locks.remove(&ip);
            } else {
                let m = Message::CmdUmStopCrawlIp(StopCrawlIp {
                    collection: owned(name),
                    ip: owned(ip.as_bytes()),
                    site: owned(site.as_bytes()),
                });
                self.send_multinode(Priority::Normal, &m);
            }
        }
    }

    /// The crawl engine finished `site`.
    pub fn site_done(&mut self, name: &[u8], site: &str) {
        self.release_site(name, site);
    }

    /// Drops queued entries (and checksums) of `name` that `hit(site, uri)` selects.
    fn delete_matching(
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
        for q in [&mut c.queue, &mut c.quarantine_queue] {
            let n = q.len();
            for _ in 0..n {
                let Some(rec) = q.pop_front()? else { break };
                if matches(&rec) {
                    dropped += 1;
                } else {
                    q.push_back(&rec)?;
                }
            }
        }
        let mut finished = Vec::new();
        c.ready.retain(|r| {
            let m = matches(&r.record);
            dropped += u64::from(m);
            if m {
                finished.push(r.seq);
            }
            !m
        });
        for w in c.waiting.values_mut() {
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
    fn quarantine(
        &mut self,
        name: &[u8],
        site: &[u8],
        seconds: i64,
        requeue: bool,
        now: i64,
    ) -> Result<(), SchedError> {
        let site = String::from_utf8_lossy(site).into_owned();
        if !self.collections.contains_key(name) {
            warn!("quarantine in unknown collection {}", show(name));
            return Ok(());
        }
        // 1. Stop crawling it; its pending entries wait in the quarantine queue.
        self.stop_sites(name, |s| s == site, true)?;
        let c = self.collections.get_mut(name).expect("checked above");
        // 2. On the quarantine list until the period ends.
        c.quarantine
            .insert(site.clone(), now.saturating_add(seconds.max(0)));
        if requeue {
            // 3.1.5.18: the site goes to the front of the crawl queue (it waits in the
            // quarantine queue until the quarantine ends, then comes back first).
            let mut e = start_uri_entry(format!("http://{site}/").as_bytes());
            e.uri_flags = uri_flags::URIF_SITEURI;
            c.queue.push_front(&record(&e, true))?;
        }
        info!(
            "collection {}: site {site} quarantined for {seconds} s",
            show(name)
        );
        Ok(())
    }
}
