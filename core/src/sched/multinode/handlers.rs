//! The multinode scheduler's message processing (MS-FSCMT 3.2.5): the dispatch of a node
//! scheduler's frames and one `on_<message>` handler per message it receives, each following the
//! section of 3.2.5 named in its doc. CMD_UM_URI and CMD_UM_URI_URG are handled in `route.rs`,
//! beside the crawl queues they fill.

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use log::{debug, info, warn};

use super::route::uri_body;
use super::{
    dns_reply, file_name, log_file, owned, show, DnsEntry, Multinode, PeerId, SchedError,
    StoreError, MAX_PENDING_REPORTS,
};
use crate::frame;
use crate::marshal::{Limits, Value};
use crate::msg::types::conf_state;
use crate::msg::{
    AddrInfo, CollectionOnly, ConfSpec, ConfState, ConfSuspend, DnsRequest, Init, Log, Message,
    StartCrawlIp, StartCrawlIpReply, Stat, StopCrawlIp,
};
use crate::stats::aggregate_report;

impl Multinode {
    /// One frame from `peer`.
    pub fn handle_frame(&mut self, peer: PeerId, body: &[u8], now: i64) -> Result<(), SchedError> {
        let limits = Limits::default();
        let registered = self.peers.get(&peer).is_some_and(|p| p.node.is_some());
        // The hot path: the frame body is queued as it came and forwarded as it is. A canonical
        // CMD_UM_URI is routed by its collection and URI alone, without building its entry.
        if registered {
            if let Some(u) = crate::msg::peek_uri(body, &limits) {
                return if u.urgent {
                    self.on_cmd_um_uri_urg(u.collection, u.uri, body)
                } else {
                    self.on_cmd_um_uri(u.collection, u.uri, body)
                };
            }
        }
        let m = match frame::decode_message(body, &limits) {
            Ok((_, m)) => m,
            Err(e) => {
                self.counters.bad_frames += 1;
                if registered {
                    warn!("connection {peer}: undecodable frame ignored: {e}");
                } else {
                    // 3.2.5.1: the first frame must be a CMD_UM_INIT.
                    warn!("connection {peer}: first frame is not a CMD_UM_INIT ({e}); closing");
                    self.out.closes.push(peer);
                }
                return Ok(());
            }
        };
        match m {
            // Any other layout of the two: forwarded as it came all the same.
            Message::CmdUmUri(ref u) if registered => {
                self.on_cmd_um_uri(&u.collection, &u.entry.uri.uri, body)
            }
            Message::CmdUmUriUrg(ref u) if registered => {
                self.on_cmd_um_uri_urg(&u.collection, &u.entry.uri.uri, body)
            }
            m => self.handle_message(peer, m, now),
        }
    }

    /// One message from `peer` (3.2.5): each to its `on_<message>` handler.
    pub fn handle_message(
        &mut self,
        peer: PeerId,
        m: Message<'_>,
        now: i64,
    ) -> Result<(), SchedError> {
        let Some(p) = self.peers.get(&peer) else {
            return Ok(());
        };
        let registered = p.node.clone();
        let node = match (registered, m) {
            (None, Message::CmdUmInit(init)) => return self.on_cmd_um_init(peer, init),
            (None, m) => {
                warn!(
                    "connection {peer}: first frame is {}, not CMD_UM_INIT; closing (3.2.5.1)",
                    m.command().name()
                );
                self.out.closes.push(peer);
                return Ok(());
            }
            (Some(n), m) => (n, m),
        };
        let (node, m) = node;
        match m {
            Message::CmdUmInit(_) => {
                warn!("node {}: second CMD_UM_INIT ignored", show(&node));
            }
            Message::CmdUmKeepalive => self.on_cmd_um_keepalive(peer),
            Message::CmdUmKeepaliveAck => self.on_cmd_um_keepalive_ack(peer),
            Message::CmdUmDnsRequest(r) => self.on_cmd_um_dns_request(peer, &r, now),
            // A message without its frame body: the body is encoded to be queued and forwarded.
            Message::CmdUmUri(u) => {
                let body = uri_body(&u.collection, &u.entry, false);
                self.on_cmd_um_uri(&u.collection, &u.entry.uri.uri, &body[4..])?
            }
            Message::CmdUmUriUrg(u) => {
                let body = uri_body(&u.collection, &u.entry, true);
                self.on_cmd_um_uri_urg(&u.collection, &u.entry.uri.uri, &body[4..])?
            }
            Message::CmdUmStat(s) => self.on_cmd_um_stat(&node, &s),
            Message::CmdUmLog(l) => self.on_cmd_um_log(&node, &l)?,
            Message::CmdUmAddRoutes(r) => self.on_cmd_um_add_route(
                &node,
                &r.collection,
                r.routes.iter().map(|(a, n)| (a.as_ref(), n.as_ref())),
            ),
            // A node speaking the node-side shape (2.2.3.8): one route.
            Message::CmdUmAddRoute(r) => self.on_cmd_um_add_route(
                &node,
                &r.collection,
                [(r.routing_attr.as_ref(), r.node_id.as_ref())],
            ),
            Message::CmdUmLastRoute(c) => self.on_cmd_um_last_route(&node, &c),
            Message::CmdUmStartCrawlIp(s) => self.on_cmd_um_start_crawl_ip(peer, &node, s),
            Message::CmdUmStopCrawlIp(s) => self.on_cmd_um_stop_crawl_ip(&node, &s),
            Message::CmdUmConfStateRequest(c) => self.on_cmd_um_conf_state(peer, &node, c),
            Message::CmdUmDeleteOk(c) => self.on_cmd_um_delete_ok(&node, &c)?,
            other => warn!(
                "node {}: {} is not a multinode scheduler message; ignored",
                show(&node),
                other.command().name()
            ),
        }
        Ok(())
    }

    /// CMD_UM_INIT, following MS-FSCMT 3.2.5.1 "Receiving a CMD_UM_INIT Message": a node id
    /// already registered closes the connection; otherwise the node is registered and sent a
    /// CMD_ADM_CONF_ADD (and its state) for every collection, and, the first time its id is
    /// seen, asked for its routes (CMD_UM_ASK_ROUTE).
    fn on_cmd_um_init(&mut self, peer: PeerId, init: Init<'_>) -> Result<(), SchedError> {
        let node = init.node_id.to_vec();
        if self.nodes.contains_key(&node) {
            warn!(
                "connection {peer}: node id {} is already registered; closing (3.2.5.1)",
                show(&node)
            );
            self.out.closes.push(peer);
            return Ok(());
        }
        info!(
            "node {} registered (admin at {}:{})",
            show(&node),
            show(&init.xmlrpc_host),
            init.xmlrpc_port
        );
        if let Some(p) = self.peers.get_mut(&peer) {
            p.node = Some(node.clone());
            p.xmlrpc = Some((init.xmlrpc_host.to_vec(), init.xmlrpc_port));
        }
        self.nodes.insert(node.clone(), peer);
        self.peer_cache.clear();
        let first_time = self.seen_nodes.insert(node.clone());
        let names: Vec<Vec<u8>> = self.collections.keys().cloned().collect();
        for name in names {
            let c = self.collections.get_mut(&name).expect("listed above");
            if c.removing.is_some() {
                continue;
            }
            let m = Message::CmdAdmConfAdd(ConfSpec {
                collection: owned(&name),
                config: c.dict.clone(),
                epoch: None,
            });
            let state = c.state;
            self.send(peer, &m);
            if state != conf_state::ACTIVE {
                let m = if matches!(
                    state,
                    conf_state::SUSPENDED_USER
                        | conf_state::SUSPENDED_DISK
                        | conf_state::SUSPENDED_VARIABLE_DELAY
                ) {
                    Message::CmdAdmConfSuspend(ConfSuspend {
                        collection: owned(&name),
                        state,
                    })
                } else {
                    Message::CmdUmConfState(ConfState {
                        collection: owned(&name),
                        state,
                    })
                };
                self.send(peer, &m);
            }
            if first_time {
                let c = self.collections.get_mut(&name).expect("listed above");
                c.awaiting_routes.insert(node.clone());
                self.send(
                    peer,
                    &Message::CmdUmAskRoute(CollectionOnly {
                        collection: owned(&name),
                    }),
                );
            }
            // Entries that waited for a node go back to the crawl queue.
            self.requeue_deferred(&name)?;
        }
        Ok(())
    }

    /// CMD_UM_KEEPALIVE, following MS-FSCMT 3.2.5.2 "Receiving a CMD_UM_KEEPALIVE Message":
    /// answered with CMD_UM_KEEPALIVE_ACK.
    fn on_cmd_um_keepalive(&mut self, peer: PeerId) {
        self.send(peer, &Message::CmdUmKeepaliveAck);
    }

    /// CMD_UM_KEEPALIVE_ACK, following MS-FSCMT 3.2.5.3 "Receiving a CMD_UM_KEEPALIVE_ACK
    /// Message": the oldest keep-alive of the connection still unanswered is answered, which
    /// also confirms the entries forwarded before it (`retain.rs`).
    fn on_cmd_um_keepalive_ack(&mut self, peer: PeerId) {
        self.keepalive_answered(peer);
    }

    /// CMD_UM_DNS_REQUEST, following MS-FSCMT 3.2.5.4 "Receiving a CMD_UM_DNS_REQUEST Message":
    /// answered from the DNS cache when the entry is fresh; otherwise the shell resolves the host
    /// (one lookup per host at a time) and [`Multinode::dns_resolved`] answers everyone who
    /// asked.
    fn on_cmd_um_dns_request(&mut self, peer: PeerId, r: &DnsRequest<'_>, now: i64) {
        let host: &[u8] = &r.host;
        if let Some(e) = self.dns.get(host, now) {
            let reply = dns_reply(host, e);
            self.send(peer, &reply);
            return;
        }
        let Ok(h) = std::str::from_utf8(host) else {
            let e = DnsEntry {
                addrinfo: None,
                resolved_at: now,
                ttl: self.opts.dns_negative_ttl,
            };
            self.send(peer, &dns_reply(host, &e));
            return;
        };
        // A host in `dns_waiting` has a lookup under way (routing starts one with nobody
        // waiting yet): one lookup per host at a time.
        if !self.dns_waiting.contains_key(h) {
            self.out.lookups.push(h.to_string());
        }
        self.dns_waiting
            .entry(h.to_string())
            .or_default()
            .push(peer);
    }

    /// The answer of a lookup the shell made (None: it failed).
    pub fn dns_resolved(&mut self, host: &str, addrs: Option<Vec<AddrInfo<'static>>>, now: i64) {
        let ttl = if addrs.is_some() {
            self.opts.dns_ttl
        } else {
            self.opts.dns_negative_ttl
        };
        let e = DnsEntry {
            addrinfo: addrs,
            resolved_at: now,
            ttl,
        };
        let reply = dns_reply(host.as_bytes(), &e);
        self.dns.insert(host.as_bytes(), e, now);
        for peer in self.dns_waiting.remove(host).unwrap_or_default() {
            self.send(peer, &reply);
        }
    }

    /// CMD_UM_STAT, following MS-FSCMT 3.2.5.6 "Receiving a CMD_UM_STAT Message": the
    /// statistics delta is merged into the collection's statistics and the node's own.
    fn on_cmd_um_stat(&mut self, node: &[u8], s: &Stat<'_>) {
        if let Some(c) = self.collections.get_mut(s.collection.as_ref()) {
            aggregate_report(&mut c.stats, &s.stats);
            let n = c
                .node_stats
                .entry(node.to_vec())
                .or_insert_with(|| Value::Dict(Vec::new()));
            aggregate_report(n, &s.stats);
            // A discrete value per node: the collection's is their sum (FSCADM 2.2.4.10
            // SumActiveSites, SumPPChecksums).
            for key in ["ActiveSites", "PPChecksums"] {
                if s.stats.get(key.as_bytes()).is_none() {
                    continue;
                }
                let sum: f64 = c
                    .node_stats
                    .values()
                    .filter_map(|v| v.get(key.as_bytes()))
                    .filter_map(|v| v.as_f64().or_else(|| v.as_i64().map(|i| i as f64)))
                    .sum();
                if let Value::Dict(d) = &mut c.stats {
                    if let Some((_, v)) = d
                        .iter_mut()
                        .find(|(k, _)| k.as_bytes() == Some(key.as_bytes()))
                    {
                        *v = Value::Float(sum);
                    }
                }
            }
            if c.reports.len() >= MAX_PENDING_REPORTS {
                c.reports.pop_front();
                crate::warn_limited!(
                    "stat-reports",
                    "collection {}: statistics not taken; the oldest dropped",
                    show(&s.collection)
                );
            }
            c.reports.push_back(s.stats.clone().into_owned());
        } else {
            debug!("statistics of unknown collection {}", show(&s.collection));
        }
    }

    /// CMD_UM_LOG, following MS-FSCMT 3.2.5.8 "Receiving a CMD_UM_LOG Message": the line is
    /// appended to the collection's log file the message names (2.2.4.8).
    fn on_cmd_um_log(&mut self, node: &[u8], l: &Log<'_>) -> Result<(), SchedError> {
        let (collection, code, message): (&[u8], &[u8], &[u8]) =
            (&l.collection, &l.logfile, &l.message);
        let Some(file) = log_file(code) else {
            warn!(
                "node {}: CMD_UM_LOG to unknown log file {:?} ignored",
                show(node),
                show(code)
            );
            return Ok(());
        };
        if !self.collections.contains_key(collection) {
            debug!("log line for unknown collection {}", show(collection));
            return Ok(());
        }
        let key = (collection.to_vec(), file);
        if !self.logs.contains_key(&key) {
            let dir = self.data_dir.join("logs").join(file_name(collection));
            let path = dir.join(file);
            let f = fs::create_dir_all(&dir)
                .and_then(|()| OpenOptions::new().create(true).append(true).open(&path))
                .map_err(|e| StoreError {
                    path: path.clone(),
                    disk_full: crate::diskfull::is_full(&e),
                    error: e.to_string(),
                })?;
            self.logs.insert(key.clone(), BufWriter::new(f));
        }
        let w = self.logs.get_mut(&key).expect("inserted above");
        let r = w.write_all(message).and_then(|()| {
            if message.ends_with(b"\n") {
                Ok(())
            } else {
                w.write_all(b"\n")
            }
        });
        if let Err(e) = r {
            warn!("log file {file} of {}: {e}", show(collection));
        }
        Ok(())
    }

    /// The path of a collection's log file ("si", "ur", "sc" or "dk").
    pub fn log_path(&self, collection: &[u8], code: &[u8]) -> Option<PathBuf> {
        log_file(code).map(|f| {
            self.data_dir
                .join("logs")
                .join(file_name(collection))
                .join(f)
        })
    }

    /// CMD_UM_ADD_ROUTE, following MS-FSCMT 3.2.5.9 "Receiving a CMD_UM_ADD_ROUTE Message":
    /// the routes a node reports, as (routing attribute, node id) pairs, fill gaps in the
    /// routing database; a route already there for a different node is kept (first decision
    /// wins) and the conflict logged. Nodes send the list shape (2.2.4.9) in answer to
    /// CMD_UM_ASK_ROUTE; the single-route shape of 2.2.3.8 comes here as a list of one.
    fn on_cmd_um_add_route<'r>(
        &mut self,
        node: &[u8],
        collection: &[u8],
        routes: impl IntoIterator<Item = (&'r [u8], &'r [u8])>,
    ) {
        for (attr, n) in routes {
            match self.routing.get(collection, attr) {
                None => {
                    self.routing.set(collection, attr, n);
                }
                Some(have) if have != n => warn!(
                    "collection {}: node {} reports {} routed to {}, kept at {}",
                    show(collection),
                    show(node),
                    show(attr),
                    show(n),
                    show(have)
                ),
                Some(_) => {}
            }
        }
    }

    /// CMD_UM_LAST_ROUTE, following MS-FSCMT 3.2.5.10 "Receiving a CMD_UM_LAST_ROUTE Message":
    /// the node has sent all its routes; once every node asked has, routing of the collection
    /// resumes.
    fn on_cmd_um_last_route(&mut self, node: &[u8], c: &CollectionOnly<'_>) {
        if let Some(col) = self.collections.get_mut(c.collection.as_ref()) {
            col.awaiting_routes.remove(node);
            if col.awaiting_routes.is_empty() {
                info!(
                    "collection {}: routes rebuilt ({} routes); routing resumes",
                    show(&c.collection),
                    self.routing.count(&c.collection)
                );
            }
        }
    }

    /// CMD_UM_START_CRAWL_IP, following MS-FSCMT 3.2.5.11 "Receiving a CMD_UM_START_CRAWL_IP
    /// Message": one node per IP address; the answer (2.2.3.22) says whether the asking node may
    /// crawl it.
    fn on_cmd_um_start_crawl_ip(&mut self, peer: PeerId, node: &[u8], s: StartCrawlIp<'_>) {
        let (owner, sites) = self
            .ip_locks
            .entry(s.ip.to_vec())
            .or_insert_with(|| (node.to_vec(), BTreeSet::new()));
        let allowed = *owner == node;
        if allowed {
            sites.insert((s.collection.to_vec(), s.site.to_vec()));
        }
        let reply = Message::CmdUmStartCrawlIpReply(StartCrawlIpReply {
            collection: s.collection,
            ip: s.ip,
            site: s.site,
            store_id: s.store_id,
            allowed,
        });
        self.send(peer, &reply);
    }

    /// CMD_UM_STOP_CRAWL_IP, following MS-FSCMT 3.2.5.12 "Receiving a CMD_UM_STOP_CRAWL_IP
    /// Message": the record of the site is removed; the node's hold on the IP address ends
    /// with its last site.
    fn on_cmd_um_stop_crawl_ip(&mut self, node: &[u8], s: &StopCrawlIp<'_>) {
        let Some((owner, sites)) = self.ip_locks.get_mut(s.ip.as_ref()) else {
            return;
        };
        if owner.as_slice() != node {
            return;
        }
        sites.remove(&(s.collection.to_vec(), s.site.to_vec()));
        if sites.is_empty() {
            self.ip_locks.remove(s.ip.as_ref());
        }
    }

    /// CMD_UM_CONF_STATE, following MS-FSCMT 3.2.5.13 "Receiving a CMD_UM_CONF_STATE Message":
    /// answered with a CMD_UM_CONF_STATE carrying the collection's current state.
    fn on_cmd_um_conf_state(&mut self, peer: PeerId, node: &[u8], c: CollectionOnly<'_>) {
        match self.collections.get(c.collection.as_ref()) {
            Some(col) => {
                let reply = Message::CmdUmConfState(ConfState {
                    collection: c.collection,
                    state: col.state,
                });
                self.send(peer, &reply);
            }
            None => warn!(
                "node {}: CMD_UM_CONF_STATE for unknown collection {}",
                show(node),
                show(&c.collection)
            ),
        }
    }

    /// CMD_UM_DELETE_OK, following MS-FSCMT 3.2.5.14 "Receiving a CMD_UM_DELETE_OK Message":
    /// the node has removed the collection; once every node has, so does the multinode
    /// scheduler.
    fn on_cmd_um_delete_ok(
        &mut self,
        node: &[u8],
        c: &CollectionOnly<'_>,
    ) -> Result<(), SchedError> {
        if let Some(col) = self.collections.get_mut(c.collection.as_ref()) {
            if let Some(r) = col.removing.as_mut() {
                r.remove(node);
            }
        }
        self.finish_removal(&c.collection)
    }
}
