//! The node scheduler's links to the multinode scheduler and the duplicate servers (MS-FSCMT
//! 3.1.5.1, 3.1.6): registration, what is asked again after a reconnection, and which
//! duplicate servers to connect to.

use super::*;

impl NodeScheduler {
    /// The link to the multinode scheduler is up. The shell sends [`Self::init_frame`] on the
    /// new connection before anything else (3.2.5.1: the first frame must be CMD_UM_INIT).
    pub fn multinode_connected(&mut self) {
        self.multinode_connected = true;
        self.multinode_keepalive_pending = false;
        // Keep-alives of the connection that closed are answered on it or not at all.
        self.keepalive_acks_owed = 0;
        let again = std::mem::take(&mut self.resend);
        if !again.is_empty() {
            info!(
                "forwarding the {} URIs of the {:?} before the connection closed to the multinode scheduler again",
                again.len(),
                FORWARD_RESEND_WINDOW
            );
        }
        for frame in again {
            self.out
                .sends
                .push((Dest::Multinode, Priority::Normal, frame));
        }
        self.ask_again();
    }

    /// After (re)connecting: questions the multinode scheduler may have taken down with it are
    /// asked again. START_CRAWL_IP for every site waiting for its answer (the sites active
    /// when the connection closed among them, [`Self::drop_claims`]) and for every active site
    /// (a refusal stops it, 3.1.5.21), and CMD_UM_DNS_REQUEST for every name still
    /// unanswered. A multinode scheduler that did answer answers again the same way.
    fn ask_again(&mut self) {
        if self.opts.standalone {
            return;
        }
        let mut asks: Vec<Message<'static>> = Vec::new();
        let mut hosts: BTreeSet<String> = BTreeSet::new();
        for (name, c) in &self.collections {
            let start = |site: &str, ip: &str| {
                Message::CmdUmStartCrawlIp(StartCrawlIp {
                    collection: owned(name),
                    ip: owned(ip.as_bytes()),
                    site: owned(site.as_bytes()),
                    store_id: 0,
                })
            };
            for (site, ip) in &c.sites.active {
                asks.push(start(site, ip));
            }
            for (site, w) in &c.sites.waiting {
                match &w.ip {
                    Some(ip) => asks.push(start(site, ip)),
                    None if self.dns_pending.contains(&w.host) && hosts.insert(w.host.clone()) => {
                        asks.push(Message::CmdUmDnsRequest(crate::msg::DnsRequest {
                            collection: owned(name),
                            host: owned(w.host.as_bytes()),
                        }));
                    }
                    None => {}
                }
            }
        }
        for m in asks {
            self.send_multinode(Priority::Normal, &m);
        }
    }

    /// The CMD_UM_INIT frame that registers this node (2.2.4.1).
    pub fn init_frame(&self) -> Vec<u8> {
        let init = Message::CmdUmInit(Init {
            node_id: owned(&self.opts.node_id),
            xmlrpc_host: owned(&self.opts.xmlrpc.0),
            xmlrpc_port: self.opts.xmlrpc.1,
        });
        let mut out = Vec::new();
        crate::frame::encode_message(&init, Priority::Normal, &mut out);
        out
    }

    /// The link to the multinode scheduler is down (the shell reconnects). The IP addresses
    /// it granted went with it: every site stops until it is granted again
    /// ([`Self::drop_claims`]), so that a restarted multinode scheduler that grants an address
    /// to another node never sees two nodes crawl it (one node per IP, 3.2.5.11).
    pub fn multinode_closed(&mut self) {
        self.multinode_connected = false;
        // What the multinode scheduler may not have synced goes again on the next connection
        // (what is forwarded meanwhile the shell holds until then).
        let lately = self.forwarded.drain(..).map(|(_, f)| f);
        self.resend.extend(lately);
        while self.resend.len() > FORWARD_RESEND_MAX {
            self.resend.pop_front();
        }
        if !self.opts.standalone {
            self.drop_claims();
        }
    }

    /// Whether the multinode scheduler is connected.
    pub fn is_multinode_connected(&self) -> bool {
        self.multinode_connected
    }

    /// The duplicate servers any collection names, for the shell to connect to.
    pub fn dup_servers(&self) -> Vec<String> {
        self.dups.keys().cloned().collect()
    }

    /// A duplicate server connected: send it the configuration of every collection that uses it.
    pub fn dup_connected(&mut self, addr: &str) {
        self.dups.entry(addr.to_string()).or_default().connected = true;
        let names: Vec<Vec<u8>> = self
            .collections
            .iter()
            .filter(|(_, c)| ppdup_servers(&c.dict).iter().any(|s| s == addr))
            .map(|(n, _)| n.clone())
            .collect();
        for n in names {
            self.send_set_config(&n, &[addr.to_string()]);
            self.send_pending_adds(&n, addr);
        }
    }

    /// The PPDUP_ADDs of collection `name` not answered yet, sent again to `addr` after its
    /// SET_CONFIG: those sent on a connection that closed (or to the replica a node failed over
    /// to) would otherwise never be answered, and their documents never fed. A duplicate server
    /// answers an add whose checksum it has with the owner it holds (MS-FSCMT 3.3.5.4), and an
    /// answer for a URI no longer pending is ignored (3.1.5.23).
    fn send_pending_adds(&mut self, name: &[u8], addr: &str) {
        let Some(c) = self.collections.get(name) else {
            return;
        };
        let mut adds: Vec<(&Vec<u8>, &Checksum)> = c.dedup.pending_adds.iter().collect();
        adds.sort();
        let frames: Vec<Message<'static>> = adds
            .into_iter()
            .map(|(uri, checksum)| {
                Message::PpdupAdd(PpdupChecksum {
                    collection: owned(name),
                    node_id: owned(&self.opts.node_id),
                    uri: owned(uri),
                    checksum: *checksum,
                    ppdup_id: None,
                    dbname: None,
                })
            })
            .collect();
        if !frames.is_empty() {
            info!(
                "sending the {} unanswered PPDUP_ADDs of {} to {addr} again",
                frames.len(),
                show(name)
            );
        }
        for m in frames {
            self.out
                .send(Dest::Dup(addr.to_string()), Priority::Normal, &m);
        }
    }

    /// The replica to fail over to from duplicate server `addr`: the entry of a collection's
    /// `ppdup.replicas` list at the position `addr` has in its `dupservers` list.
    pub fn dup_replica(&self, addr: &str) -> Option<String> {
        self.collections.values().find_map(|c| {
            let at = ppdup_servers(&c.dict).iter().position(|s| s == addr)?;
            let list = c.dict.get(b"ppdup")?.get(b"replicas")?;
            let list = list.as_list().or_else(|| list.as_tuple())?;
            let r = list.get(at)?.as_bytes()?;
            Some(String::from_utf8_lossy(r).into_owned())
        })
    }

    /// A duplicate server connection is gone.
    pub fn dup_closed(&mut self, addr: &str) {
        if let Some(d) = self.dups.get_mut(addr) {
            d.connected = false;
            d.updated = false;
            d.keepalive_pending = false;
        }
    }

    /// 3.1.5.11: PPDUP_SET_CONFIG with the ppdup section and the next vector clock.
    pub(super) fn send_set_config(&mut self, name: &[u8], servers: &[String]) {
        let Some(c) = self.collections.get(name) else {
            return;
        };
        let section = c
            .dict
            .get(b"ppdup")
            .cloned()
            .unwrap_or(Value::Dict(Vec::new()));
        for s in servers {
            let d = self.dups.entry(s.clone()).or_default();
            d.vclock += 1;
            d.updated = false;
            let m = Message::PpdupSetConfig(PpdupSetConfig {
                config: Value::Dict(vec![(Value::owned_bytes(name.to_vec()), section.clone())]),
                vclock: d.vclock,
                collection: Some(owned(name)),
            });
            self.out.send(Dest::Dup(s.clone()), Priority::Normal, &m);
        }
    }
}
