//! The node scheduler's message processing (MS-FSCMT 3.1.5): the dispatch of every message from
//! the multinode scheduler and the duplicate servers, and one `on_<message>` handler per message,
//! each following the section of 3.1.5 named in its doc. The collection operations several of
//! them share (stop, delete, quarantine sites; add, update, refresh collections) are in
//! `node_ops.rs`.

use super::*;
use crate::msg::{
    ConfRefresh, ConfSpec, ConfState, ConfSuspend, DeleteSite, DeleteUris, DnsReply,
    FeedingSuspend, PpdupAddOk, PpdupConfigAck, PpdupError, PpdupPromoteReq, PpdupRemoveOk,
    PreemptSite, Quarantine, ReprocessSite,
};

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

    /// One message (3.1.5): each to its `on_<message>` handler.
    pub fn handle_message(
        &mut self,
        from: &Dest,
        m: Message<'_>,
        now: i64,
    ) -> Result<(), SchedError> {
        match m {
            Message::CmdUmKeepalive => self.on_cmd_um_keepalive(),
            Message::CmdUmKeepaliveAck => self.on_cmd_um_keepalive_ack(),
            Message::CmdUmUri(u) => self.on_cmd_um_uri(&u)?,
            Message::CmdUmUriUrg(u) => self.on_cmd_um_uri_urg(&u)?,
            Message::CmdAdmConfSuspend(s) => self.on_cmd_adm_conf_suspend(&s)?,
            Message::CmdAdmConfResume(c) => self.on_cmd_adm_conf_resume(&c)?,
            Message::CmdAdmConfFeedingSuspend(f) => self.on_cmd_adm_conf_feeding_suspend(&f)?,
            Message::CmdUmAddRoute(r) => self.on_cmd_um_add_route(&r, now),
            Message::CmdUmAskRoute(c) => self.on_cmd_um_ask_route(&c),
            Message::CmdAdmConfRefresh(r) => self.on_cmd_adm_conf_refresh(&r)?,
            Message::CmdAdmConfAdd(c) => self.on_cmd_adm_conf_add(c)?,
            Message::CmdAdmConfUpdate(c) => self.on_cmd_adm_conf_update(c)?,
            Message::CmdAdmConfRemove(c) => self.on_cmd_adm_conf_remove(&c)?,
            Message::CmdAdmPreemptSite(p) => self.on_cmd_adm_preempt_site(&p)?,
            Message::CmdUmReprocessSite(r) => self.on_cmd_um_reprocess_site(&r)?,
            Message::CmdUmDeleteSite(d) => self.on_cmd_um_delete_site(&d)?,
            Message::CmdUmDeleteUris(d) => self.on_cmd_um_delete_uris(&d)?,
            Message::CmdUmQuarantineSite(q) => self.on_cmd_um_quarantine_site(&q, now)?,
            Message::CmdUmQuarantineSiteRequeue(q) => {
                self.on_cmd_um_quarantine_site_requeue(&q, now)?
            }
            Message::CmdUmDnsReply(r) => self.on_cmd_um_dns_reply(r, now)?,
            Message::CmdUmConfState(s) => self.on_cmd_um_conf_state(&s)?,
            // The answer to this node's CMD_UM_START_CRAWL_IP (2.2.3.22); its handler is beside
            // the site dispatch that asks (node_sites.rs).
            Message::CmdUmStartCrawlIpReply(r) => self.on_cmd_um_start_crawl_ip(
                &r.collection,
                &String::from_utf8_lossy(&r.ip),
                &String::from_utf8_lossy(&r.site),
                r.allowed,
                now,
            )?,
            Message::PpdupConfigAck(a) => self.on_ppdup_config_ack(from, a),
            Message::PpdupAddOk(ok) => self.on_ppdup_add_ok(&ok)?,
            Message::PpdupRemoveOk(ok) => self.on_ppdup_remove_ok(&ok),
            Message::PpdupPromoteReq(p) => self.on_ppdup_promote_req(&p)?,
            Message::PpdupError(e) => self.on_ppdup_error(from, &e),
            Message::PpdupKeepalive => self.on_ppdup_keepalive(from),
            Message::PpdupKeepaliveAck => self.on_ppdup_keepalive_ack(from),
            other => warn!(
                "{from:?}: {} is not a node scheduler message; ignored",
                other.command().name()
            ),
        }
        Ok(())
    }

    // ---- from the multinode scheduler ----------------------------------------------------------

    /// CMD_UM_KEEPALIVE, following MS-FSCMT 3.1.5.1 "Receiving a CMD_UM_KEEPALIVE Message":
    /// answered with CMD_UM_KEEPALIVE_ACK, once the next sync has made every CMD_UM_URI
    /// received before it durable (`sync_at`; within the sync interval, 100 ms by default).
    fn on_cmd_um_keepalive(&mut self) {
        self.keepalive_acks_owed = self.keepalive_acks_owed.saturating_add(1);
    }

    /// CMD_UM_KEEPALIVE_ACK, the answer the Multinode Scheduler Keep-Alive timer waits for
    /// (MS-FSCMT 3.1.6 "Timer Events"): the pending keep-alive is cleared.
    fn on_cmd_um_keepalive_ack(&mut self) {
        self.multinode_keepalive_pending = false;
    }

    /// CMD_UM_URI, following MS-FSCMT 3.1.5.2 "Receiving a CMD_UM_URI Message": the entry goes
    /// to the back of the collection's crawl queue.
    fn on_cmd_um_uri(&mut self, u: &UriMsg<'_>) -> Result<(), SchedError> {
        self.queue_uri_message(u, false)
    }

    /// CMD_UM_URI_URG, following MS-FSCMT 3.1.5.3 "Receiving a CMD_UM_URI_URG Message": the
    /// entry goes to the front of the collection's crawl queue.
    fn on_cmd_um_uri_urg(&mut self, u: &UriMsg<'_>) -> Result<(), SchedError> {
        self.queue_uri_message(u, true)
    }

    /// The entry of a CMD_UM_URI (`urgent`: CMD_UM_URI_URG) into the local crawl queue.
    fn queue_uri_message(&mut self, u: &UriMsg<'_>, urgent: bool) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(u.collection.as_ref()) else {
            warn!(
                "CMD_UM_URI for unknown collection {} dropped",
                show(&u.collection)
            );
            return Ok(());
        };
        queue_local(c, &u.entry, urgent)
    }

    /// CMD_ADM_CONF_SUSPEND, following MS-FSCMT 3.1.5.4 "Receiving a CMD_ADM_CONF_SUSPEND
    /// Message": the collection takes the state (4, 5 or 8) and every one of its sites stops.
    fn on_cmd_adm_conf_suspend(&mut self, s: &ConfSuspend<'_>) -> Result<(), SchedError> {
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
        Ok(())
    }

    /// CMD_ADM_CONF_RESUME, following MS-FSCMT 3.1.5.5 "Receiving a CMD_ADM_CONF_RESUME
    /// Message": the collection is active again.
    fn on_cmd_adm_conf_resume(&mut self, c: &CollectionOnly<'_>) -> Result<(), SchedError> {
        self.set_state(&c.collection, conf_state::ACTIVE)?;
        Ok(())
    }

    /// CMD_ADM_CONF_FEEDING_SUSPEND, following MS-FSCMT 3.1.5.6 "Receiving a
    /// CMD_ADM_CONF_FEEDING_SUSPEND Message": feeding to all destinations, or to those named
    /// (2.2.3.7), is suspended or resumed; the document log is the default destination.
    fn on_cmd_adm_conf_feeding_suspend(
        &mut self,
        f: &FeedingSuspend<'_>,
    ) -> Result<(), SchedError> {
        if let Some(c) = self.collections.get_mut(f.collection.as_ref()) {
            match &f.destinations {
                None => {
                    c.feeding.all_suspended = f.suspend;
                    if !f.suspend {
                        c.feeding.suspended.clear();
                    }
                }
                Some(ds) => {
                    for d in ds {
                        if f.suspend {
                            c.feeding.suspended.insert(d.to_vec());
                        } else {
                            c.feeding.suspended.remove(d.as_ref());
                        }
                    }
                }
            }
            // The document log is the default destination.
            let held = c.feeding.all_suspended || c.feeding.suspended.contains(&b"default"[..]);
            self.save(&f.collection)?;
            self.set_feeding(&f.collection, held)?;
        }
        Ok(())
    }

    /// CMD_UM_ADD_ROUTE, following MS-FSCMT 3.1.5.7 "Receiving a CMD_UM_ADD_ROUTE Message": the
    /// route goes into the routing database, and the site's addresses into the DNS cache when
    /// the site is routed to this node.
    fn on_cmd_um_add_route(&mut self, r: &AddRoute<'_>, now: i64) {
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

    /// CMD_UM_ASK_ROUTE, following MS-FSCMT 3.1.5.8 "Receiving a CMD_UM_ASK_ROUTE Message":
    /// every route, in CMD_UM_ADD_ROUTE lists of at most 256, then CMD_UM_LAST_ROUTE.
    fn on_cmd_um_ask_route(&mut self, c: &CollectionOnly<'_>) {
        let name: &[u8] = &c.collection;
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

    /// CMD_ADM_CONF_REFRESH, following MS-FSCMT 3.1.5.9 "Receiving a CMD_ADM_CONF_REFRESH
    /// Message": a refresh of the collection or subcollection, as its bitmask says (2.2.3.10).
    fn on_cmd_adm_conf_refresh(&mut self, r: &ConfRefresh<'_>) -> Result<(), SchedError> {
        self.refresh(&r.collection, r.subcollection.as_deref(), r.options)
    }

    /// CMD_ADM_CONF_ADD, following MS-FSCMT 3.1.5.10 "Receiving a CMD_ADM_CONF_ADD Message":
    /// the collection is set up ([`NodeScheduler::conf_add`]), or updated when it exists.
    fn on_cmd_adm_conf_add(&mut self, c: ConfSpec<'_>) -> Result<(), SchedError> {
        self.conf_add(&c.collection, c.config.into_owned())
    }

    /// CMD_ADM_CONF_UPDATE, following MS-FSCMT 3.1.5.11 "Receiving a CMD_ADM_CONF_UPDATE
    /// Message": the configuration is replaced, PPDUP_SET_CONFIG goes to its duplicate servers
    /// and the start URIs are queued again ([`NodeScheduler::conf_update`]).
    fn on_cmd_adm_conf_update(&mut self, c: ConfSpec<'_>) -> Result<(), SchedError> {
        self.conf_update(&c.collection, c.config.into_owned())
    }

    /// CMD_ADM_CONF_REMOVE, following MS-FSCMT 3.1.5.12 "Receiving a CMD_ADM_CONF_REMOVE
    /// Message", its five steps.
    fn on_cmd_adm_conf_remove(&mut self, c: &CollectionOnly<'_>) -> Result<(), SchedError> {
        let name: &[u8] = &c.collection;
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

    /// CMD_ADM_PREEMPT_SITE, following MS-FSCMT 3.1.5.13 "Receiving a CMD_ADM_PREEMPT_SITE
    /// Message": ignored unless the site is being crawled; otherwise it stops and its entries go
    /// to the front (requeue) or back of the crawl queue.
    fn on_cmd_adm_preempt_site(&mut self, p: &PreemptSite<'_>) -> Result<(), SchedError> {
        let site = String::from_utf8_lossy(&p.site).into_owned();
        let active = self
            .collections
            .get(p.collection.as_ref())
            .is_some_and(|c| {
                c.sites.active.contains_key(&site) || c.sites.waiting.contains_key(&site)
            });
        // 3.1.5.13: ignored unless the site is being crawled.
        if active {
            self.stop_sites(&p.collection, |s| s == site, p.requeue)?;
        }
        Ok(())
    }

    /// CMD_UM_REPROCESS_SITE, following MS-FSCMT 3.1.5.14 "Receiving a CMD_UM_REPROCESS_SITE
    /// Message": the stored documents that match are fed again (2.2.3.15).
    fn on_cmd_um_reprocess_site(&mut self, r: &ReprocessSite<'_>) -> Result<(), SchedError> {
        let site = String::from_utf8_lossy(&r.site).into_owned();
        self.reprocess(&r.collection, &site, &r.prefix, r.exact)?;
        Ok(())
    }

    /// CMD_UM_DELETE_SITE, following MS-FSCMT 3.1.5.15 "Receiving a CMD_UM_DELETE_SITE
    /// Message": everything stored for the site is deleted and its documents removed from the
    /// index.
    fn on_cmd_um_delete_site(&mut self, d: &DeleteSite<'_>) -> Result<(), SchedError> {
        let site = String::from_utf8_lossy(&d.site).into_owned();
        self.delete_matching(&d.collection, |s, _| s == site)
    }

    /// CMD_UM_DELETE_URIS, following MS-FSCMT 3.1.5.16 "Receiving a CMD_UM_DELETE_URIS
    /// Message": the URIs are deleted and their documents removed from the index.
    fn on_cmd_um_delete_uris(&mut self, d: &DeleteUris<'_>) -> Result<(), SchedError> {
        let uris: BTreeSet<Vec<u8>> = d
            .uris
            .iter()
            .flat_map(|(_, l)| l.iter().map(|u| u.to_vec()))
            .collect();
        self.delete_matching(&d.collection, |_, u| uris.contains(u))
    }

    /// CMD_UM_QUARANTINE_SITE, following MS-FSCMT 3.1.5.17 "Receiving a CMD_UM_QUARANTINE_SITE
    /// Message": the site stops and is not crawled until the period ends.
    fn on_cmd_um_quarantine_site(
        &mut self,
        q: &Quarantine<'_>,
        now: i64,
    ) -> Result<(), SchedError> {
        self.quarantine(&q.collection, &q.site, q.seconds, now)
    }

    /// CMD_UM_QUARANTINE_SITE_REQUEUE, following MS-FSCMT 3.1.5.18 "Receiving a
    /// CMD_UM_QUARANTINE_SITE_REQUEUE Message": as CMD_UM_QUARANTINE_SITE, and the site goes to
    /// the front of the crawl queue.
    fn on_cmd_um_quarantine_site_requeue(
        &mut self,
        q: &Quarantine<'_>,
        now: i64,
    ) -> Result<(), SchedError> {
        self.quarantine(&q.collection, &q.site, q.seconds, now)
    }

    /// CMD_UM_DNS_REPLY, following MS-FSCMT 3.1.5.19 "Receiving a CMD_UM_DNS_REPLY Message":
    /// the answer goes into the DNS cache and the sites waiting for it go on.
    fn on_cmd_um_dns_reply(&mut self, r: DnsReply<'_>, now: i64) -> Result<(), SchedError> {
        let e = DnsEntry {
            addrinfo: r
                .addrinfo
                .map(|v| v.into_iter().map(|a| a.into_owned()).collect()),
            resolved_at: r.resolved_at,
            ttl: r.ttl,
        };
        self.dns_answer(&String::from_utf8_lossy(&r.host), e, now)
    }

    /// CMD_UM_CONF_STATE, following MS-FSCMT 3.1.5.20 "Receiving a CMD_UM_CONF_STATE Message":
    /// the collection takes the state the message names.
    fn on_cmd_um_conf_state(&mut self, s: &ConfState<'_>) -> Result<(), SchedError> {
        self.set_state(&s.collection, s.state)?;
        Ok(())
    }

    // ---- from the duplicate servers ------------------------------------------------------------

    /// PPDUP_CONFIG_ACK, following MS-FSCMT 3.1.5.22 "Receiving a PPDUP_CONFIG_ACK Message":
    /// the duplicate server counts as updated only if this answers the latest PPDUP_SET_CONFIG
    /// (same vector clock); a stale one is discarded.
    fn on_ppdup_config_ack(&mut self, from: &Dest, a: PpdupConfigAck) {
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

    /// PPDUP_ADD_OK, following MS-FSCMT 3.1.5.23 "Receiving a PPDUP_ADD_OK Message": the URI
    /// goes into the checksum database, and the document waiting for the answer is fed or
    /// dropped as a duplicate of the owner URI.
    fn on_ppdup_add_ok(&mut self, ok: &PpdupAddOk<'_>) -> Result<(), SchedError> {
        let pending = self
            .collections
            .get_mut(ok.collection.as_ref())
            .and_then(|c| c.dedup.pending_adds.remove(ok.uri.as_ref()));
        if pending.is_some() {
            let owner = ok.owner_uri.as_deref().unwrap_or(&ok.uri).to_vec();
            if let Some(v) = self.resolve_document(&ok.collection, &ok.uri, &owner)? {
                self.verdicts.push(v);
            }
        }
        Ok(())
    }

    /// PPDUP_REMOVE_OK, following MS-FSCMT 3.1.5.24 "Receiving a PPDUP_REMOVE_OK Message": the
    /// URI leaves the checksum database.
    fn on_ppdup_remove_ok(&mut self, ok: &PpdupRemoveOk<'_>) {
        // 3.1.5.24: the URI leaves the checksum database, under the checksum its
        // PPDUP_REMOVE named (taken out already when it was sent; unless the URI holds
        // that checksum again since, as its stored copy says).
        if let Some(c) = self.collections.get_mut(ok.collection.as_ref()) {
            let uri = ok.uri.as_ref();
            let cs = c
                .dedup
                .pending_removes
                .get_mut(uri)
                .and_then(VecDeque::pop_front);
            if c.dedup
                .pending_removes
                .get(uri)
                .is_some_and(VecDeque::is_empty)
            {
                c.dedup.pending_removes.remove(uri);
            }
            let holds = |cs: &Checksum| {
                c.store
                    .get(uri)
                    .is_some_and(|r| r.state == UriState::Stored && r.checksum == cs.0)
            };
            if let Some(cs) = cs.filter(|cs| !holds(cs)) {
                if let Some(owners) = c.dedup.checksums.get_mut(&cs) {
                    owners.remove(uri);
                    if owners.is_empty() {
                        c.dedup.checksums.remove(&cs);
                    }
                }
            }
        }
    }

    /// PPDUP_PROMOTE_REQ, following MS-FSCMT 3.1.5.25 "Receiving a PPDUP_PROMOTE_REQ Message":
    /// every URI with the checksum is crawled again (2.2.5.8).
    fn on_ppdup_promote_req(&mut self, p: &PpdupPromoteReq<'_>) -> Result<(), SchedError> {
        let uris = self.checksum_owners(&p.collection, &p.checksum);
        for u in uris {
            let mut e = start_uri_entry(&u);
            e.uri_flags = uri_flags::URIF_PROMOTE;
            self.add_uri(&p.collection, &e, true)?;
        }
        Ok(())
    }

    /// PPDUP_ERROR, following MS-FSCMT 3.1.5.26 "Receiving a PPDUP_ERROR Message": logged.
    fn on_ppdup_error(&mut self, from: &Dest, e: &PpdupError<'_>) {
        warn!(
            "{from:?}: PPDUP_ERROR for collection {}: {}",
            show(&e.collection),
            show(&e.why)
        )
    }

    /// PPDUP_KEEPALIVE, following MS-FSCMT 3.1.5.27 "Receiving a PPDUP_KEEPALIVE Message":
    /// answered with PPDUP_KEEPALIVE_ACK.
    fn on_ppdup_keepalive(&mut self, from: &Dest) {
        if let Dest::Dup(a) = from {
            self.out.send(
                Dest::Dup(a.clone()),
                Priority::Normal,
                &Message::PpdupKeepaliveAck,
            );
        }
    }

    /// PPDUP_KEEPALIVE_ACK, the answer the Duplicate Server Keep-Alive timer waits for
    /// (MS-FSCMT 3.1.6 "Timer Events"): the server's pending keep-alive is cleared.
    fn on_ppdup_keepalive_ack(&mut self, from: &Dest) {
        if let Dest::Dup(a) = from {
            if let Some(d) = self.dups.get_mut(a) {
                d.keepalive_pending = false;
            }
        }
    }
}
