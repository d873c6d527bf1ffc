//! The multinode scheduler's routing path (MS-FSCMT 3.2.5.5, 3.2.5.7): CMD_UM_URI / _URG into
//! the collection's persistent crawl queue as route records, and the pump that takes them out,
//! decides a new site's node (persisted, CMD_UM_ADD_ROUTE to every node) and forwards the entry's
//! frame as it came. The hot path allocates nothing per entry.

use std::borrow::Cow;
use std::collections::VecDeque;

use log::warn;

use super::diskfull::Target;
use super::{owned, show, Multinode, PeerId, SchedError};
use crate::frame::{self, Priority};
use crate::marshal::Limits;
use crate::msg::{AddRoute, CrawlQueueEntry, Message, UriMsg};
use crate::routing::{crawl_site_ref, routing_attribute, site_host};

/// Sites whose routing attribute is remembered, and routing attributes whose node connection
/// is remembered (per collection).
const ATTR_CACHE_MAX: usize = 1 << 20;
/// Records a pump step takes from a crawl queue before routing them.
const PUMP_CHUNK: u64 = 1024;

/// Crawl site -> the connection of its node, for one collection (see `Multinode::peer_cache`):
/// the pump's lookup for a queued entry, and the whole routing of an entry that arrives while
/// the queue is empty (see `Multinode::on_cmd_um_uri`).
pub(super) type PeerCache = super::sitepeers::SitePeers;

/// CMD_UM_URI frames read ahead of their routing in [`Multinode::handle_frames`].
const LOOKAHEAD: usize = 8;

/// A CMD_UM_URI read ahead: its parts, its crawl site and the site's hash.
struct Ahead<'a> {
    body: &'a [u8],
    collection: &'a [u8],
    uri: &'a [u8],
    urgent: bool,
    site: Option<Cow<'a, str>>,
    hash: u64,
}

/// A record of the multinode scheduler's crawl queues: `[urgent u8][attr len u16][attr]
/// [site len u16][site][frame body]`, so that routing reads no marshal and forwarding copies the
/// frame body as it came.
struct RouteRecord<'a> {
    attr: &'a [u8],
    /// UTF-8 when written; checked only when a new site is routed.
    site: &'a [u8],
    body: &'a [u8],
}

impl<'a> RouteRecord<'a> {
    /// Writes the record into `out` (cleared first).
    fn encode(urgent: bool, attr: &str, site: &str, body: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.reserve(5 + attr.len() + site.len() + body.len());
        out.push(u8::from(urgent));
        for f in [attr, site] {
            // Host names are at most 253 bytes; longer ones were refused by the URL parser.
            out.extend_from_slice(&(f.len().min(u16::MAX as usize) as u16).to_le_bytes());
            out.extend_from_slice(&f.as_bytes()[..f.len().min(u16::MAX as usize)]);
        }
        out.extend_from_slice(body);
    }

    fn parse(rec: &'a [u8]) -> Option<RouteRecord<'a>> {
        let (&_urgent, mut p) = rec.split_first()?;
        let mut field = || -> Option<&'a [u8]> {
            if p.len() < 2 {
                return None;
            }
            let n = u16::from_le_bytes([p[0], p[1]]) as usize;
            let f = p.get(2..2 + n)?;
            p = &p[2 + n..];
            Some(f)
        };
        let attr = field()?;
        let site = field()?;
        Some(RouteRecord {
            attr,
            site,
            body: p,
        })
    }
}

/// The frame (length prefix included) of CMD_UM_URI / CMD_UM_URI_URG carrying `entry`.
pub(super) fn uri_body(collection: &[u8], entry: &CrawlQueueEntry<'_>, urgent: bool) -> Vec<u8> {
    let m = UriMsg {
        collection: Cow::Borrowed(collection),
        entry: entry.clone(),
    }
    .into_message(urgent);
    let mut out = Vec::new();
    frame::encode_message(&m, Priority::Normal, &mut out);
    out
}

impl Multinode {
    /// Frames from `peer`, in order. For a registered node, CMD_UM_URI in the canonical layout
    /// are read a few frames ahead of their routing: the places of their sites in the routing
    /// map are fetched from memory while the frames before them are forwarded. Reading ahead
    /// changes nothing; every frame takes effect in wire order.
    pub fn handle_frames<'a>(
        &mut self,
        peer: PeerId,
        frames: impl IntoIterator<Item = &'a [u8]>,
        now: i64,
    ) -> Result<(), SchedError> {
        let registered = self.peers.get(&peer).is_some_and(|p| p.node.is_some());
        if !registered {
            for body in frames {
                if !self.peers.contains_key(&peer) {
                    break; // Refused (below) or closed: what else it sent is dropped.
                }
                self.handle_frame(peer, body, now)?;
                if self.out.closes.contains(&peer) {
                    // 3.2.5.1: a connection whose first frame is not a CMD_UM_INIT is closed,
                    // and nothing it sent after that frame is handled.
                    self.peers.remove(&peer);
                    break;
                }
            }
            return Ok(());
        }
        let mut ahead: VecDeque<Ahead<'a>> = VecDeque::with_capacity(LOOKAHEAD);
        for body in frames {
            match self.read_ahead(body) {
                Some(a) => {
                    if ahead.len() == LOOKAHEAD {
                        let first = ahead.pop_front().expect("full");
                        self.route_ahead(first)?;
                    }
                    ahead.push_back(a);
                }
                None => {
                    while let Some(a) = ahead.pop_front() {
                        self.route_ahead(a)?;
                    }
                    self.handle_frame(peer, body, now)?;
                }
            }
        }
        while let Some(a) = ahead.pop_front() {
            self.route_ahead(a)?;
        }
        Ok(())
    }

    /// A canonical CMD_UM_URI's parts, crawl site and site hash, with its place in the routing
    /// map prefetched; `None` for any other frame.
    fn read_ahead<'a>(&self, body: &'a [u8]) -> Option<Ahead<'a>> {
        let u = crate::msg::peek_uri(body, &Limits::default())?;
        let site = crawl_site_ref(u.uri);
        let mut hash = 0;
        if let Some(site) = &site {
            hash = PeerCache::hash(&self.site_hasher, site.as_bytes());
            if let Some(t) = self.peer_cache.get(u.collection) {
                t.prefetch(hash);
            }
        }
        Some(Ahead {
            body,
            collection: u.collection,
            uri: u.uri,
            urgent: u.urgent,
            site,
            hash,
        })
    }

    /// A CMD_UM_URI / _URG read ahead: as [`Multinode::on_cmd_um_uri`] /
    /// [`Multinode::on_cmd_um_uri_urg`], with its crawl site and the site's hash already known.
    fn route_ahead(&mut self, a: Ahead<'_>) -> Result<(), SchedError> {
        self.accept_uri_site(a.collection, a.uri, a.site, a.hash, a.urgent, a.body)
    }

    /// CMD_UM_URI from a registered node, following MS-FSCMT 3.2.5.5 "Receiving a CMD_UM_URI
    /// Message": the entry goes to the back of the collection's crawl queue, from which
    /// [`Multinode::pump`] routes and forwards it (step 2). `body` is the message's frame body,
    /// queued and forwarded as it came. (Frames read ahead by [`Multinode::handle_frames`] take
    /// the same path through `accept_uri_site`, their crawl site worked out beforehand.)
    #[inline]
    pub(super) fn on_cmd_um_uri(
        &mut self,
        collection: &[u8],
        uri: &[u8],
        body: &[u8],
    ) -> Result<(), SchedError> {
        self.accept_uri(collection, uri, false, body)
    }

    /// CMD_UM_URI_URG from a registered node, following MS-FSCMT 3.2.5.7 "Receiving a
    /// CMD_UM_URI_URG Message": as CMD_UM_URI, to the front of the crawl queue.
    #[inline]
    pub(super) fn on_cmd_um_uri_urg(
        &mut self,
        collection: &[u8],
        uri: &[u8],
        body: &[u8],
    ) -> Result<(), SchedError> {
        self.accept_uri(collection, uri, true, body)
    }

    /// A CMD_UM_URI (`urgent`: CMD_UM_URI_URG) whose frame body is `body`: its crawl site and
    /// the site's hash worked out, then as `accept_uri_site`.
    pub(super) fn accept_uri(
        &mut self,
        collection: &[u8],
        uri: &[u8],
        urgent: bool,
        body: &[u8],
    ) -> Result<(), SchedError> {
        let site = crawl_site_ref(uri);
        let hash = site
            .as_ref()
            .map_or(0, |s| PeerCache::hash(&self.site_hasher, s.as_bytes()));
        self.accept_uri_site(collection, uri, site, hash, urgent, body)
    }

    /// A CMD_UM_URI / _URG with the URI's crawl site (`None`: it has none) and the site's hash
    /// worked out: queued (3.2.5.5 step 1), or forwarded at once when that is the same sequence.
    fn accept_uri_site(
        &mut self,
        collection: &[u8],
        uri: &[u8],
        site: Option<Cow<'_, str>>,
        hash: u64,
        urgent: bool,
        body: &[u8],
    ) -> Result<(), SchedError> {
        match self.collections.get(collection) {
            None => {
                warn!(
                    "CMD_UM_URI for unknown collection {} dropped",
                    show(collection)
                );
                Ok(())
            }
            Some(c) if c.removing.is_some() => Ok(()),
            Some(c) => {
                let Some(site) = site else {
                    self.unroutable(collection, uri);
                    return Ok(());
                };
                // 3.2.5.5: an entry enqueued at the back of an empty crawl queue is the next one
                // extracted. When the queue is empty and the site's node is known and connected,
                // extracting and forwarding it at once is that same sequence without the copy
                // in and out of the queue file. Anything else (a new site, a node away, routes
                // being rebuilt, entries already waiting) goes through the queue, behind what
                // waits there.
                if c.queue.is_empty() && c.awaiting_routes.is_empty() {
                    let known = self
                        .peer_cache
                        .get(collection)
                        .and_then(|pc| pc.get(site.as_bytes(), hash));
                    if let Some(peer) = known {
                        frame::encode_raw_body(body, self.out.bulk(peer));
                        self.retain(peer, body);
                        self.counters.uris_received += 1;
                        self.counters.uris_forwarded += 1;
                        return Ok(());
                    }
                }
                self.queue_site_entry(collection, &site, urgent, body)
            }
        }
    }

    fn unroutable(&mut self, collection: &[u8], uri: &[u8]) {
        self.counters.uris_unroutable += 1;
        warn!(
            "collection {}: no crawl site in {:?}; dropped",
            show(collection),
            show(uri)
        );
    }

    /// Queues an entry of a known collection: back, or front when urgent.
    pub(super) fn queue_entry(
        &mut self,
        name: &[u8],
        entry: &CrawlQueueEntry<'_>,
        urgent: bool,
    ) -> Result<(), SchedError> {
        match crawl_site_ref(&entry.uri.uri) {
            Some(site) => {
                let body = uri_body(name, entry, urgent);
                self.queue_site_entry(name, &site, urgent, &body[4..])
            }
            None => {
                self.unroutable(name, &entry.uri.uri);
                Ok(())
            }
        }
    }

    /// Queues the frame `body` of an entry whose crawl site is `site`.
    fn queue_site_entry(
        &mut self,
        name: &[u8],
        site: &str,
        urgent: bool,
        body: &[u8],
    ) -> Result<(), SchedError> {
        // The record buffer is kept for its capacity; an error stops the role, so it is not
        // put back on that path.
        let mut rec = std::mem::take(&mut self.record);
        self.route_record(site, urgent, body, &mut rec);
        let to = if urgent { Target::Front } else { Target::Back };
        self.queue_record(name, to, &rec)?;
        self.counters.uris_received += 1;
        self.record = rec;
        Ok(())
    }

    /// Writes the queue record of an entry into `rec`: its crawl site and routing attribute,
    /// worked out once, and the frame body to forward.
    fn route_record(&mut self, site: &str, urgent: bool, body: &[u8], rec: &mut Vec<u8>) {
        if self.attr_cache.len() > ATTR_CACHE_MAX {
            self.attr_cache.clear();
        }
        match self.attr_cache.get(site) {
            Some(attr) => RouteRecord::encode(urgent, attr, site, body, rec),
            None => {
                let attr = routing_attribute(site);
                RouteRecord::encode(urgent, &attr, site, body, rec);
                self.attr_cache.insert(site.to_owned(), attr);
            }
        }
    }

    // ---- routing ----------------------------------------------------------------------------------

    /// Takes entries from the crawl queues and routes them (3.2.5.5 step 2): a routing decision
    /// for a new site (persisted, CMD_UM_ADD_ROUTE to every node), then CMD_UM_URI to the node.
    /// Returns how many entries were taken.
    pub fn pump(&mut self, now: i64) -> Result<usize, SchedError> {
        if self.nodes.is_empty() || self.disk_paused() {
            return Ok(0);
        }
        let names: Vec<Vec<u8>> = self
            .collections
            .iter()
            .filter(|(_, c)| {
                c.removing.is_none() && c.awaiting_routes.is_empty() && !c.queue.is_empty()
            })
            .map(|(n, _)| n.clone())
            .collect();
        let mut taken = 0;
        let routes_before = self.counters.routes_made;
        let came_in = self.counters.uris_received - self.received_at_pump;
        self.received_at_pump = self.counters.uris_received;
        let budget = (self.opts.pump_budget as u64).max(came_in);
        // Taken out for the pump and put back (an error stops the role: nothing to put back).
        let (mut chunk, mut ends) = std::mem::take(&mut self.chunk);
        for name in names {
            let mut cache = self.peer_cache.remove(&name).unwrap_or_default();
            if cache.len() > ATTR_CACHE_MAX {
                cache.clear();
            }
            let mut left = budget;
            while left > 0 {
                // A chunk of records with one collection lookup, then each routed.
                chunk.clear();
                ends.clear();
                let c = self.collections.get_mut(&name).expect("listed above");
                while (ends.len() as u64) < left.min(PUMP_CHUNK)
                    && c.queue
                        .pop_front_with(|r| chunk.extend_from_slice(r))?
                        .is_some()
                {
                    ends.push(chunk.len());
                }
                if ends.is_empty() {
                    break;
                }
                left -= ends.len() as u64;
                taken += ends.len();
                let mut start = 0;
                for &end in &ends {
                    self.route(&name, &chunk[start..end], now, &mut cache)?;
                    start = end;
                }
            }
            self.peer_cache.insert(name, cache);
        }
        self.chunk = (chunk, ends);
        if self.counters.routes_made != routes_before {
            // 3.2.5.5 step 2.1: a routing decision persists before anyone hears of it (the frames
            // of this batch are sent after this returns). A full disk pauses routing from here
            // on (diskfull.rs says why this batch's frames still go).
            self.sync_routes()?;
        }
        Ok(taken)
    }

    fn route(
        &mut self,
        name: &[u8],
        rec: &[u8],
        now: i64,
        cache: &mut PeerCache,
    ) -> Result<(), SchedError> {
        let Some(r) = RouteRecord::parse(rec) else {
            self.counters.uris_unroutable += 1;
            warn!("collection {}: unreadable queue record dropped", show(name));
            return Ok(());
        };
        let hash = PeerCache::hash(&self.site_hasher, r.site);
        if let Some(peer) = cache.get(r.site, hash) {
            frame::encode_raw_body(r.body, self.out.bulk(peer));
            self.retain(peer, r.body);
            self.counters.uris_forwarded += 1;
            return Ok(());
        }
        let attr = r.attr;
        // A known route: the node's connection, if it is connected.
        let known = self
            .routing
            .get(name, attr)
            .map(|n| self.nodes.get(n).copied());
        let peer = match known {
            Some(peer) => peer,
            None => {
                let Ok(site) = std::str::from_utf8(r.site) else {
                    self.counters.uris_unroutable += 1;
                    warn!("collection {}: unreadable queue record dropped", show(name));
                    return Ok(());
                };
                let n = self.choose_node();
                self.routing.set(name, attr, &n);
                self.counters.routes_made += 1;
                let host = site_host(site).to_string();
                let (addrinfo, ttl) = match self.dns.get(host.as_bytes(), now) {
                    Some(e) => (e.addrinfo.clone(), e.ttl_left(now)),
                    // An address needs no lookup (the node uses it as it is).
                    None if host.parse::<std::net::IpAddr>().is_ok() => (None, 0),
                    None => {
                        if !self.dns_waiting.contains_key(&host) {
                            self.dns_waiting.insert(host.clone(), Vec::new());
                            self.out.lookups.push(host.clone());
                        }
                        (None, 0)
                    }
                };
                let m = Message::CmdUmAddRoute(AddRoute {
                    collection: owned(name),
                    node_id: owned(&n),
                    routing_attr: owned(attr),
                    site: owned(site.as_bytes()),
                    addrinfo,
                    ttl,
                });
                self.broadcast(&m);
                self.nodes.get(&n).copied()
            }
        };
        match peer {
            Some(peer) => {
                frame::encode_raw_body(r.body, self.out.bulk(peer));
                self.retain(peer, r.body);
                self.counters.uris_forwarded += 1;
                cache.insert(r.site, hash, peer);
            }
            None => self.queue_record(name, Target::Deferred, rec)?,
        }
        Ok(())
    }

    /// The connected node with the fewest routes (ties: the smallest id). Called with at least
    /// one node registered.
    fn choose_node(&self) -> Vec<u8> {
        self.nodes
            .keys()
            .min_by_key(|n| (self.routing.load(n), (*n).clone()))
            .cloned()
            .unwrap_or_default()
    }
}
