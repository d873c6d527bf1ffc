//! What the administrative methods need from a scheduler core, for the node scheduler
//! (operations applied to its own state, as if the multinode scheduler had sent the CMD_ADM_* /
//! CMD_UM_* message) and the multinode scheduler (operations relayed to the nodes).

use crawlfleet_core::marshal::Value as M;
use crawlfleet_core::msg::types::conf_state;
use crawlfleet_core::msg::{CollectionOnly, CrawlQueueEntry, Message};
use crawlfleet_core::routing::routing_attribute;
use crawlfleet_core::sched::multinode::Multinode;
use crawlfleet_core::sched::node::{Dest, NodeScheduler, RefreshOnly};

/// Where a site is routed: the node id and its XML-RPC (host, port) when known.
pub type Route = (Vec<u8>, Option<(String, i64)>);

/// A scheduler core as the administrative methods see it. Errors are fault strings.
pub trait Role {
    /// IsMultiNodeScheduler (2.2.8.5).
    fn is_multinode(&self) -> bool;
    /// IsDistributed (2.2.8.4).
    fn is_distributed(&self) -> bool;
    /// Collections and their states (2.2.3.3 codes).
    fn collections(&self) -> Vec<(Vec<u8>, i64)>;
    /// A collection's configuration dict.
    fn config(&self, name: &[u8]) -> Option<M<'static>>;
    /// Adds or updates a collection with a complete configuration.
    fn put_collection(&mut self, name: &[u8], dict: M<'static>, new: bool) -> Result<(), String>;
    /// Starts deleting a collection.
    fn delete_collection(&mut self, name: &[u8], now: i64) -> Result<(), String>;
    /// Applies (node) or relays (multinode) a collection operation.
    fn apply(&mut self, m: Message<'_>, now: i64) -> Result<(), String>;
    /// Queues an entry: false if the collection is unknown.
    fn add_uri(
        &mut self,
        name: &[u8],
        e: &CrawlQueueEntry<'_>,
        urgent: bool,
    ) -> Result<bool, String>;
    /// The node a site is routed to and its XML-RPC (host, port) when known.
    fn route(&self, name: &[u8], site: &str) -> Option<Route>;
    /// The registered nodes' XML-RPC addresses (multinode only).
    fn node_ports(&self) -> Vec<(String, i64)>;
    /// Entries queued for a collection.
    fn queued(&self, name: &[u8]) -> u64;
    /// Entries of a collection held in memory and an estimate of their heap bytes (node
    /// only: `NodeScheduler::queued_in_memory`).
    fn queued_in_memory(&self, _name: &[u8]) -> Option<(u64, u64)> {
        None
    }
    /// Sites being crawled.
    fn active_sites(&self, name: &[u8]) -> i64;
    /// The refresh cycle.
    fn refresh_cycle(&self, name: &[u8]) -> i64;
    /// The CrawlMode string (FSCADM 2.2.3.6): why the collection only refreshes, or empty.
    fn crawl_mode(&self, name: &[u8]) -> String;
    /// Feeding suspended on the core (node): (all, destinations).
    fn feeding(&self, name: &[u8]) -> Option<(bool, Vec<Vec<u8>>)>;
    /// Counters to fold into the statistics: FSCADM attribute name -> running total.
    fn counters(&self, name: &[u8]) -> Vec<(String, f64)>;
    /// Discrete sums over nodes (SumActiveSites, SumPPChecksums; multinode only).
    fn node_sums(&self, name: &[u8]) -> Vec<(&'static str, f64)>;
    /// Histogram buckets to fold into the statistics: (attribute, bucket, running total).
    fn histograms(&self, name: &[u8]) -> Vec<(String, String, f64)>;
    /// The registered nodes (multinode only; a node has none): id, XML-RPC address, and from
    /// their CMD_UM_STAT over every collection, pages fetched and sites being crawled.
    fn node_rows(&self) -> Vec<NodeRow> {
        Vec::new()
    }
}

/// A node scheduler as the multinode scheduler knows it (the dashboard's node table).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeRow {
    /// Its node id.
    pub id: String,
    /// Its XML-RPC address, when it reported one.
    pub admin: Option<String>,
    /// Pages fetched (Downloaded), every collection.
    pub pages: f64,
    /// Sites being crawled (ActiveSites), every collection.
    pub sites: f64,
}

fn err(e: impl std::fmt::Display) -> String {
    format!("the scheduler cannot store this change: {e}")
}

impl Role for NodeScheduler {
    fn is_multinode(&self) -> bool {
        false
    }

    fn is_distributed(&self) -> bool {
        !self.is_standalone()
    }

    fn collections(&self) -> Vec<(Vec<u8>, i64)> {
        // A collection paused for a full disk reads as state 5, "Disk full".
        NodeScheduler::collections(self)
            .into_iter()
            .map(|(n, s)| {
                let s = self.reported_state(&n).unwrap_or(s);
                (n, s)
            })
            .collect()
    }

    fn config(&self, name: &[u8]) -> Option<M<'static>> {
        self.collection_config(name).cloned()
    }

    fn put_collection(&mut self, name: &[u8], dict: M<'static>, new: bool) -> Result<(), String> {
        if new {
            self.conf_add(name, dict).map_err(err)
        } else {
            self.conf_update(name, dict).map_err(err)
        }
    }

    fn delete_collection(&mut self, name: &[u8], now: i64) -> Result<(), String> {
        let m = Message::CmdAdmConfRemove(CollectionOnly {
            collection: name.to_vec().into(),
        });
        self.handle_message(&Dest::Multinode, m, now).map_err(err)
    }

    fn apply(&mut self, m: Message<'_>, now: i64) -> Result<(), String> {
        // As if the multinode scheduler had sent it (FSCMT 3.1.5).
        self.handle_message(&Dest::Multinode, m, now).map_err(err)
    }

    fn add_uri(
        &mut self,
        name: &[u8],
        e: &CrawlQueueEntry<'_>,
        urgent: bool,
    ) -> Result<bool, String> {
        NodeScheduler::add_uri(self, name, e, urgent).map_err(err)
    }

    fn route(&self, name: &[u8], site: &str) -> Option<Route> {
        let mine = || {
            let (h, p) = self.xmlrpc_addr();
            Some((String::from_utf8_lossy(&h).into_owned(), p))
        };
        if self.is_standalone() {
            return Some((self.node_id().to_vec(), mine()));
        }
        let node = self
            .routing()
            .get(name, routing_attribute(site).as_bytes())?
            .to_vec();
        let addr = if node == self.node_id() { mine() } else { None };
        Some((node, addr))
    }

    fn node_ports(&self) -> Vec<(String, i64)> {
        Vec::new()
    }

    fn queued(&self, name: &[u8]) -> u64 {
        NodeScheduler::queued(self, name).map_or(0, |(q, _)| q)
    }

    fn queued_in_memory(&self, name: &[u8]) -> Option<(u64, u64)> {
        NodeScheduler::queued_in_memory(self, name)
    }

    fn active_sites(&self, name: &[u8]) -> i64 {
        NodeScheduler::active_site_count(self, name) as i64
    }

    fn refresh_cycle(&self, name: &[u8]) -> i64 {
        NodeScheduler::refresh_cycle(self, name).unwrap_or(0)
    }

    fn crawl_mode(&self, name: &[u8]) -> String {
        self.refresh_only(name)
            .map_or("", RefreshOnly::crawl_mode)
            .to_string()
    }

    fn feeding(&self, name: &[u8]) -> Option<(bool, Vec<Vec<u8>>)> {
        NodeScheduler::feeding(self, name)
    }

    fn counters(&self, name: &[u8]) -> Vec<(String, f64)> {
        NodeScheduler::counters(self, name)
            .map(|c| vec![("NodeSchedulerFwd".to_string(), c.uris_forwarded as f64)])
            .unwrap_or_default()
    }

    fn node_sums(&self, _name: &[u8]) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    fn histograms(&self, _name: &[u8]) -> Vec<(String, String, f64)> {
        Vec::new()
    }
}

/// The numbers of a merged CMD_UM_STAT structure (a dict; non-numbers skipped).
fn numbers(v: Option<&M<'static>>) -> Vec<(String, f64)> {
    v.and_then(M::as_dict)
        .map(|d| {
            d.iter()
                .filter_map(|(k, v)| {
                    let n = v.as_f64().or_else(|| v.as_i64().map(|i| i as f64))?;
                    Some((String::from_utf8_lossy(k.as_bytes()?).into_owned(), n))
                })
                .collect()
        })
        .unwrap_or_default()
}

impl Role for Multinode {
    fn is_multinode(&self) -> bool {
        true
    }

    fn is_distributed(&self) -> bool {
        true
    }

    fn collections(&self) -> Vec<(Vec<u8>, i64)> {
        // While a full disk pauses routing, an active collection reads as state 5, "Disk full";
        // while a variable_delay period suspends its crawl, as state 8 (the nodes do the same).
        let paused = self.disk_paused();
        let suspended = |n: &[u8]| {
            self.collection_settings(n)
                .is_some_and(|c| c.current_delay().is_none())
        };
        Multinode::collections(self)
            .into_iter()
            .map(|(n, s)| match s {
                conf_state::ACTIVE if paused => (n, conf_state::SUSPENDED_DISK),
                conf_state::ACTIVE if suspended(&n) => (n, conf_state::SUSPENDED_VARIABLE_DELAY),
                _ => (n, s),
            })
            .collect()
    }

    fn config(&self, name: &[u8]) -> Option<M<'static>> {
        self.collection_config(name).cloned()
    }

    fn put_collection(&mut self, name: &[u8], dict: M<'static>, new: bool) -> Result<(), String> {
        if new {
            self.add_collection(name, dict).map_err(err)
        } else {
            self.update_collection(name, dict).map_err(err)
        }
    }

    fn delete_collection(&mut self, name: &[u8], _now: i64) -> Result<(), String> {
        self.remove_collection(name).map(|_| ()).map_err(err)
    }

    fn apply(&mut self, m: Message<'_>, _now: i64) -> Result<(), String> {
        match m {
            Message::CmdAdmConfSuspend(s) => self
                .set_suspended(&s.collection, Some(s.state))
                .map(|_| ())
                .map_err(err),
            Message::CmdAdmConfResume(c) => self
                .set_suspended(&c.collection, None)
                .map(|_| ())
                .map_err(err),
            m => {
                if self.relay(&m) {
                    Ok(())
                } else {
                    Err(format!("{} cannot be relayed", m.command().name()))
                }
            }
        }
    }

    fn add_uri(
        &mut self,
        name: &[u8],
        e: &CrawlQueueEntry<'_>,
        urgent: bool,
    ) -> Result<bool, String> {
        Multinode::add_uri(self, name, e, urgent).map_err(err)
    }

    fn route(&self, name: &[u8], site: &str) -> Option<Route> {
        let node = self
            .routing()
            .get(name, routing_attribute(site).as_bytes())?
            .to_vec();
        let addr = self
            .nodes()
            .into_iter()
            .find(|(n, _)| *n == node)
            .and_then(|(_, a)| a)
            .map(|(h, p)| (String::from_utf8_lossy(&h).into_owned(), p));
        Some((node, addr))
    }

    fn node_ports(&self) -> Vec<(String, i64)> {
        self.nodes()
            .into_iter()
            .filter_map(|(_, a)| a)
            .map(|(h, p)| (String::from_utf8_lossy(&h).into_owned(), p))
            .collect()
    }

    fn queued(&self, name: &[u8]) -> u64 {
        Multinode::queued(self, name).map_or(0, |(q, d)| q + d)
    }

    fn active_sites(&self, name: &[u8]) -> i64 {
        // The sum of the nodes' latest (as SumActiveSites, FSCADM 2.2.4.10).
        self.node_sums(name)
            .into_iter()
            .find(|(k, _)| *k == "SumActiveSites")
            .map_or(0, |(_, v)| v as i64)
    }

    fn refresh_cycle(&self, name: &[u8]) -> i64 {
        // The latest refresh cycle (Epoch) the nodes reported.
        self.statistics(name)
            .and_then(|s| s.get(b"Epoch"))
            .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
            .unwrap_or(0)
    }

    fn crawl_mode(&self, name: &[u8]) -> String {
        // `limits.max_doc` is counted by each node; the user's switch is the collection's.
        let on = self
            .collection_settings(name)
            .is_some_and(|c| c.refresh_only);
        if on {
            RefreshOnly::User.crawl_mode()
        } else {
            ""
        }
        .to_string()
    }

    fn feeding(&self, _name: &[u8]) -> Option<(bool, Vec<Vec<u8>>)> {
        None
    }

    fn counters(&self, _name: &[u8]) -> Vec<(String, f64)> {
        // The nodes' CMD_UM_STAT structures go to the statistics each in its refresh cycle
        // (Admin::apply_reports), not as running totals.
        Vec::new()
    }

    fn node_sums(&self, name: &[u8]) -> Vec<(&'static str, f64)> {
        let mut active = 0.0;
        let mut checksums = 0.0;
        for (node, _) in self.nodes() {
            for (k, v) in numbers(self.node_statistics(name, &node)) {
                match k.as_str() {
                    "ActiveSites" => active += v,
                    "PPChecksums" => checksums += v,
                    _ => {}
                }
            }
        }
        vec![("SumActiveSites", active), ("SumPPChecksums", checksums)]
    }

    fn histograms(&self, _name: &[u8]) -> Vec<(String, String, f64)> {
        // As `counters`: with the CMD_UM_STAT structures.
        Vec::new()
    }

    fn node_rows(&self) -> Vec<NodeRow> {
        let names: Vec<Vec<u8>> = self.collections().into_iter().map(|(n, _)| n).collect();
        self.nodes()
            .into_iter()
            .map(|(id, addr)| {
                let (mut pages, mut sites) = (0.0, 0.0);
                for name in &names {
                    for (k, v) in numbers(self.node_statistics(name, &id)) {
                        match k.as_str() {
                            "Downloaded" => pages += v,
                            "ActiveSites" => sites += v,
                            _ => {}
                        }
                    }
                }
                NodeRow {
                    id: String::from_utf8_lossy(&id).into_owned(),
                    admin: addr.map(|(h, p)| format!("{}:{p}", String::from_utf8_lossy(&h))),
                    pages,
                    sites,
                }
            })
            .collect()
    }
}

/// The FSCADM 2.2.3.4 string of a 2.2.3.3 state.
pub fn status_string(state: i64) -> &'static str {
    match state {
        conf_state::REMOVING => "zombie",
        conf_state::SUSPENDED_USER
        | conf_state::SUSPENDED_DISK
        | conf_state::SUSPENDED_VARIABLE_DELAY => "suspended",
        conf_state::COMPACTION_INITIATED | conf_state::COMPACTING => "compacting",
        _ => "crawling",
    }
}

/// The Status of the flattened structure (2.2.5).
pub fn status_word(state: i64) -> &'static str {
    match state {
        conf_state::REMOVING => "Zombie",
        conf_state::SUSPENDED_USER => "Suspended",
        conf_state::SUSPENDED_DISK => "Disk full",
        conf_state::SUSPENDED_VARIABLE_DELAY => "Variable delay suspended",
        conf_state::COMPACTION_INITIATED | conf_state::COMPACTING => "Compacting",
        _ => "Crawling",
    }
}

/// Whether a state is one of the suspended states (4, 5, 8).
pub fn is_suspended(state: i64) -> bool {
    matches!(
        state,
        conf_state::SUSPENDED_USER
            | conf_state::SUSPENDED_DISK
            | conf_state::SUSPENDED_VARIABLE_DELAY
    )
}
