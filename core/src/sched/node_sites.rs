//! The node scheduler's site manager (MS-FSCMT 3.1.1, 3.1.5.21): crawl queue entries become
//! ready for the crawl engine once their site may be crawled, after its name is resolved
//! (through the multinode scheduler, or locally when standalone) and the multinode scheduler
//! allowed its IP address (CMD_UM_START_CRAWL_IP); quarantined and blocked sites wait.

use super::*;

/// Entries a dispatch takes from a crawl queue between two publications of its pops.
const PUBLISH_EVERY: usize = 128;

#[cfg(test)]
thread_local! {
    /// Makes a dispatch "killed" at its n-th entry taken (0: never), for `tests_kill.rs`.
    pub(in crate::sched) static KILL_IN_DISPATCH_AT: std::cell::Cell<usize> =
        const { std::cell::Cell::new(0) };
    /// Set by that kill: the dispatch returns without writing or publishing anything more.
    pub(in crate::sched) static KILLED_IN_DISPATCH: std::cell::Cell<bool> =
        const { std::cell::Cell::new(false) };
}

impl NodeScheduler {
    /// Takes entries from the crawl queues of active collections until `capacity` entries are
    /// ready or waiting: entries of allowed sites become ready, new sites are resolved and asked
    /// for (CMD_UM_START_CRAWL_IP), quarantined or blocked ones set aside.
    pub fn dispatch(&mut self, capacity: usize, now: i64) -> Result<(), SchedError> {
        let names: Vec<Vec<u8>> = self
            .collections
            .iter()
            .filter(|(_, c)| c.state == conf_state::ACTIVE && !c.is_disk_full())
            .map(|(n, _)| n.clone())
            .collect();
        for name in names {
            let taken = self.dispatch_collection(&name, capacity, now);
            #[cfg(test)]
            if KILLED_IN_DISPATCH.get() {
                // A test's kill inside the dispatch: nothing more is written or published.
                return Ok(());
            }
            // What the dispatch took since its last publication, once per turn.
            let Some(c) = self.collections.get_mut(&name) else {
                continue;
            };
            c.publish_taken()?;
            taken?;
        }
        Ok(())
    }

    /// [`NodeScheduler::dispatch`] for collection `name`; the pops of its crawl queue are left
    /// for the caller to publish.
    fn dispatch_collection(
        &mut self,
        name: &[u8],
        capacity: usize,
        now: i64,
    ) -> Result<(), SchedError> {
        let c = self.collections.get_mut(name).expect("listed above");
        let refresh_only = c.refresh_only().is_some();
        if !refresh_only && !c.refresh.new_held.is_empty() {
            // New content may be crawled again: what was held goes back to the queue.
            let mut n = 0u64;
            while !c.is_disk_full() {
                let Some(rec) = c.refresh.new_held.pop_front_unpublished()? else {
                    break;
                };
                c.enqueue(diskfull::Target::Queue, false, &rec, None)?;
                // Taken from `new_held` once it is in the crawl queue.
                c.refresh.new_held.publish()?;
                n += 1;
            }
            info!(
                "collection {}: {n} new URIs held while refreshing only are queued",
                show(name)
            );
        }
        // Entries of sites waiting for an address or a grant, counted once here and kept up
        // to date below (counting them for every entry taken made a dispatch cost the
        // number of waiting sites per entry: quadratic when many new sites start at once).
        let mut held: usize = c.sites.waiting.values().map(|w| w.records.len()).sum();
        // Pops taken since the last publication.
        let mut unpublished = 0usize;
        #[cfg(test)]
        let mut taken = 0usize;
        loop {
            let c = self.collections.get_mut(name).expect("listed above");
            if c.sites.ready.len() + held >= capacity || c.is_disk_full() {
                break;
            }
            if unpublished >= PUBLISH_EVERY {
                // The pops so far are published once the journal's records of the entries
                // taken are written: a kill in a long dispatch (the journal writes its records
                // every 256 KiB as they come) leaves at most this many entries both queued and
                // journaled, crawled twice after the restart; published only at the end of a
                // dispatch of 16,000 entries, a kill in it left thousands in both.
                if !c.publish_taken()? {
                    break;
                }
                unpublished = 0;
            }
            // The entry is journaled once taken: no room for that, no entry taken.
            if let Err(e) = c.inflight.reserve(diskfull::ENTRY_RESERVE) {
                let e = SchedError::from(e);
                if !e.is_disk_full() {
                    return Err(e);
                }
                c.pause_disk_full(&e, std::time::Instant::now());
                break;
            }
            let Some(rec) = c.queue.pop_front_unpublished()? else {
                break;
            };
            unpublished += 1;
            #[cfg(test)]
            {
                taken += 1;
                if KILL_IN_DISPATCH_AT.get() == taken {
                    // The journal's records of what was taken so far on disk (the writes of
                    // 256 KiB a dispatch makes as it goes, at their latest), then the kill.
                    let _ = c.inflight.write();
                    KILLED_IN_DISPATCH.set(true);
                    return Ok(());
                }
            }
            // The URI alone is read here (the entry is decoded where it is fetched).
            let peeked = peek_record(&rec).ok();
            // FSCADM 2.2.10.2: while refreshing only, nothing outside the crawl store is
            // downloaded; new URIs wait in `new_held`.
            if refresh_only
                && peeked
                    .as_ref()
                    .is_some_and(|(uri, _)| c.store.get(uri).is_none())
                && parse_record(&rec)
                    .is_ok_and(|(e, _)| crate::crawl::sitemaps::entry_kind(&e).is_none())
            {
                c.enqueue(diskfull::Target::NewHeld, false, &rec, None)?;
                c.counters.uris_held_refresh_only += 1;
                continue;
            }
            let site = peeked.and_then(|(uri, _)| crawl_site(&uri));
            let Some(site) = site else {
                c.counters.uris_dropped += 1;
                warn!(
                    "collection {}: entry without a crawl site dropped",
                    show(name)
                );
                continue;
            };
            if c.sites.quarantine.get(&site).is_some_and(|&t| t > now)
                || c.sites.blocked.get(&site).is_some_and(|&t| t > now)
            {
                c.enqueue(diskfull::Target::Quarantine, false, &rec, None)?;
                c.counters.uris_quarantined += 1;
                continue;
            }
            // From here the entry lives in memory: journaled until it is finished.
            let seq = c.inflight.add(&rec)?;
            if let Some(ip) = c.sites.active.get(&site) {
                let ip = ip.clone();
                c.sites.ready.push_back(Ready {
                    collection: name.to_vec(),
                    site,
                    ip,
                    record: rec,
                    seq,
                    conditional: Vec::new(),
                });
                continue;
            }
            held += 1;
            if let Some(w) = c.sites.waiting.get_mut(&site) {
                w.records.push((seq, rec));
                continue;
            }
            let host = site_host(&site).to_string();
            c.sites.waiting.insert(
                site.clone(),
                Waiting {
                    host: host.clone(),
                    ip: None,
                    records: vec![(seq, rec)],
                },
            );
            self.resolve_site(name, &site, &host, now)?;
            // Answered at once (standalone, or a failed name): its one entry left waiting.
            let c = self.collections.get(name).expect("listed above");
            if !c.sites.waiting.contains_key(&site) {
                held -= 1;
            }
        }
        Ok(())
    }

    /// Entries the crawl engine may fetch now: every entry that joined its site's visit
    /// ([`Self::add_link_on_visit`], at most [`super::ops::VISIT_READY_MAX`] a collection), then entries
    /// from the crawl queue until there are `max` in all.
    ///
    /// The visits' entries are not held to `max`: the engine's window is mostly entries of
    /// sites waiting for a place among the `max_sites` started, and a started site whose new
    /// links waited behind them found its queue empty at the next poll, gave up its place, and
    /// started again later on a new connection.
    pub fn take_ready(&mut self, max: usize) -> Vec<Ready> {
        let mut out = Vec::new();
        // A collection paused for a full disk hands out nothing: its fetches would only grow
        // what waits in memory.
        for c in self.collections.values_mut().filter(|c| !c.is_disk_full()) {
            for mut r in std::mem::take(&mut c.sites.visit) {
                r.conditional = conditional(c, &r.record);
                out.push(r);
            }
        }
        for c in self.collections.values_mut().filter(|c| !c.is_disk_full()) {
            while out.len() < max {
                match c.sites.ready.pop_front() {
                    Some(mut r) => {
                        r.conditional = conditional(c, &r.record);
                        out.push(r);
                    }
                    None => break,
                }
            }
        }
        out
    }

    pub(super) fn resolve_site(
        &mut self,
        name: &[u8],
        site: &str,
        host: &str,
        now: i64,
    ) -> Result<(), SchedError> {
        if host.parse::<std::net::IpAddr>().is_ok() {
            return self.ask_permission(name, site, host);
        }
        let ip = self.dns.get(host.as_bytes(), now).map(|e| {
            e.addrinfo
                .as_ref()
                .and_then(|a| a.first())
                .map(|a| String::from_utf8_lossy(&a.address).into_owned())
        });
        match ip {
            Some(Some(ip)) => self.ask_permission(name, site, &ip),
            Some(None) => {
                self.fail_site(name, site, "the name does not resolve");
                Ok(())
            }
            None => {
                if self.dns_pending.insert(host.to_string()) {
                    if self.opts.standalone {
                        self.out.lookups.push(host.to_string());
                    } else {
                        let m = Message::CmdUmDnsRequest(crate::msg::DnsRequest {
                            collection: owned(name),
                            host: owned(host.as_bytes()),
                        });
                        self.send_multinode(Priority::Normal, &m);
                    }
                }
                Ok(())
            }
        }
    }

    pub(super) fn fail_site(&mut self, name: &[u8], site: &str, why: &str) {
        if let Some(c) = self.collections.get_mut(name) {
            if let Some(w) = c.sites.waiting.remove(site) {
                c.counters.uris_dropped += w.records.len() as u64;
                for (seq, _) in &w.records {
                    if let Err(e) = c.inflight.done(*seq) {
                        warn!("collection {}: {e}", show(name));
                    }
                }
                warn!(
                    "collection {}: site {site}: {why}; {} entries dropped",
                    show(name),
                    w.records.len()
                );
            }
        }
    }

    /// An answer to a name lookup (CMD_UM_DNS_REPLY, 3.1.5.19, or the shell's own lookup when
    /// standalone).
    pub fn dns_answer(&mut self, host: &str, e: DnsEntry, now: i64) -> Result<(), SchedError> {
        self.dns_pending.remove(host);
        let ip = e
            .addrinfo
            .as_ref()
            .and_then(|a| a.first())
            .map(|a| String::from_utf8_lossy(&a.address).into_owned());
        self.dns.insert(host.as_bytes(), e, now);
        let sites: Vec<(Vec<u8>, String)> = self
            .collections
            .iter()
            .flat_map(|(n, c)| {
                c.sites
                    .waiting
                    .iter()
                    .filter(|(_, w)| w.host == host && w.ip.is_none())
                    .map(move |(s, _)| (n.clone(), s.clone()))
            })
            .collect();
        for (name, site) in sites {
            match &ip {
                Some(ip) => self.ask_permission(&name, &site, ip)?,
                None => self.fail_site(&name, &site, "the name does not resolve"),
            }
        }
        Ok(())
    }

    pub(super) fn ask_permission(
        &mut self,
        name: &[u8],
        site: &str,
        ip: &str,
    ) -> Result<(), SchedError> {
        if let Some(w) = self
            .collections
            .get_mut(name)
            .and_then(|c| c.sites.waiting.get_mut(site))
        {
            w.ip = Some(ip.to_string());
        }
        if self.opts.standalone {
            let allowed = match self.local_ip_locks.get(ip) {
                Some(owner) => owner == name,
                None => {
                    self.local_ip_locks.insert(ip.to_string(), name.to_vec());
                    true
                }
            };
            return self.on_cmd_um_start_crawl_ip(name, ip, site, allowed, 0);
        }
        let m = Message::CmdUmStartCrawlIp(StartCrawlIp {
            collection: owned(name),
            ip: owned(ip.as_bytes()),
            site: owned(site.as_bytes()),
            store_id: 0,
        });
        self.send_multinode(Priority::Normal, &m);
        Ok(())
    }

    /// CMD_UM_START_CRAWL_IP, the multinode scheduler's answer (2.2.3.22), following MS-FSCMT
    /// 3.1.5.21 "Receiving a CMD_UM_START_CRAWL_IP Message": a site refused, or over 10 sites on
    /// the IP address, is blocked for 30 minutes with its entries at the front of the crawl
    /// queue; an allowed site becomes active and its entries ready. A standalone node answers
    /// its own request through this same handler.
    pub(super) fn on_cmd_um_start_crawl_ip(
        &mut self,
        name: &[u8],
        ip: &str,
        site: &str,
        allowed: bool,
        now: i64,
    ) -> Result<(), SchedError> {
        let max = self.opts.max_sites_per_ip;
        let block = self.opts.block_seconds;
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        let Some(w) = c.sites.waiting.remove(site) else {
            if !allowed && c.sites.active.get(site).is_some_and(|a| a == ip) {
                // A re-claim of an active site refused (its IP went to another node while the
                // multinode scheduler was away): the site stops here, blocked like any refused
                // site, its entries at the front of the crawl queue (one node per IP).
                c.sites
                    .blocked
                    .insert(site.to_string(), now.saturating_add(block));
                c.counters.sites_blocked += 1;
                info!(
                    "collection {}: site {site} ({ip}) stopped: the IP is crawled by another node",
                    show(name)
                );
                return self.stop_sites(name, |s| s == site, true);
            }
            debug!("START_CRAWL_IP answer for {site}, which is not waiting");
            return Ok(());
        };
        let over = allowed && {
            let set = c.sites.ip_sites.entry(ip.to_string()).or_default();
            set.insert(site.to_string());
            set.len() > max
        };
        if !allowed || over {
            if over {
                if let Some(set) = c.sites.ip_sites.get_mut(ip) {
                    set.remove(site);
                }
            }
            let granted = allowed;
            // Blocked for 30 minutes, its entries at the front of the crawl queue.
            c.sites
                .blocked
                .insert(site.to_string(), now.saturating_add(block));
            c.counters.sites_blocked += 1;
            c.put_back(&w.records, true)?;
            info!(
                "collection {}: site {site} ({ip}) blocked for {block} s ({})",
                show(name),
                if over {
                    "too many sites on the IP"
                } else {
                    "IP crawled by another node"
                }
            );
            if granted && !self.opts.standalone {
                // Granted but not crawled: the START closed by its STOP (2.2.4.12).
                self.send_stop_crawl_ip(name, ip, site);
            }
            return Ok(());
        }
        c.sites.active.insert(site.to_string(), ip.to_string());
        c.counters.sites_started += 1;
        if let Some((_, r)) = w.records.first() {
            // The RUP robot looks at the site's /rupinfo.txt (node_rup.rs).
            let r = r.clone();
            self.rup_site_started(name, &r);
        }
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(());
        };
        for (seq, r) in w.records {
            c.sites.ready.push_back(Ready {
                collection: name.to_vec(),
                site: site.to_string(),
                ip: ip.to_string(),
                record: r,
                seq,
                conditional: Vec::new(),
            });
        }
        Ok(())
    }
}
