//! The internal API the administration interface drives (MS-FSCADM, multinode role): collections
//! added, updated, removed, suspended and resumed here are relayed to every node scheduler as the
//! CMD_ADM_* messages of MS-FSCMT 2.2.3, and site and URI operations to the node a site is routed
//! to.

use std::collections::BTreeSet;

use log::{info, warn};

use super::{owned, show, start_uri_entry, start_uris, Multinode, SchedError};
use crate::marshal::Value;
use crate::msg::types::conf_state;
use crate::msg::{
    CollectionOnly, ConfRefresh, ConfSpec, ConfSuspend, CrawlQueueEntry, DeleteSite, DeleteUris,
    FeedingSuspend, Message, PreemptSite, Quarantine, ReprocessSite,
};
use crate::routing::routing_attribute;

impl Multinode {
    /// Adds a collection, or updates it when it exists (CollectionAdd). New collections go to
    /// every node as CMD_ADM_CONF_ADD and their start URIs are queued; existing ones are updated
    /// (CMD_ADM_CONF_UPDATE).
    pub fn add_collection(&mut self, name: &[u8], dict: Value<'static>) -> Result<(), SchedError> {
        if let Some(c) = self.collections.get(name) {
            if c.removing.is_none() {
                return self.update_collection(name, dict);
            }
            warn!(
                "collection {} is being removed; it can be added again once removal completes",
                show(name)
            );
            return Ok(());
        }
        let c = self.open_collection(name, dict, conf_state::ACTIVE)?;
        self.collections.insert(name.to_vec(), c);
        self.save(name)?;
        let c = &self.collections[name];
        let m = Message::CmdAdmConfAdd(ConfSpec {
            collection: owned(name),
            config: c.dict.clone(),
            epoch: None,
        });
        self.broadcast(&m);
        self.queue_start_uris(name)?;
        info!("collection {} added", show(name));
        Ok(())
    }

    /// Replaces a collection's configuration and sends CMD_ADM_CONF_UPDATE to every node.
    pub fn update_collection(
        &mut self,
        name: &[u8],
        dict: Value<'static>,
    ) -> Result<(), SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            warn!("update of unknown collection {} ignored", show(name));
            return Ok(());
        };
        c.settings = crate::config::parsed(name, &dict);
        c.dict = dict;
        self.save(name)?;
        let m = Message::CmdAdmConfUpdate(ConfSpec {
            collection: owned(name),
            config: self.collections[name].dict.clone(),
            epoch: None,
        });
        self.broadcast(&m);
        info!("collection {} updated", show(name));
        Ok(())
    }

    fn queue_start_uris(&mut self, name: &[u8]) -> Result<(), SchedError> {
        let Some(c) = self.collections.get(name) else {
            return Ok(());
        };
        for uri in start_uris(&c.dict) {
            self.add_uri(name, &start_uri_entry(&uri), false)?;
        }
        Ok(())
    }

    /// Starts removing a collection (CollectionDelete): state 3, CMD_ADM_CONF_REMOVE to every
    /// node, deleted when they all answered CMD_UM_DELETE_OK.
    pub fn remove_collection(&mut self, name: &[u8]) -> Result<bool, SchedError> {
        let nodes: BTreeSet<Vec<u8>> = self.nodes.keys().cloned().collect();
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(false);
        };
        if c.removing.is_some() {
            return Ok(true);
        }
        c.state = conf_state::REMOVING;
        c.removing = Some(nodes);
        self.save(name)?;
        self.broadcast(&Message::CmdAdmConfRemove(CollectionOnly {
            collection: owned(name),
        }));
        self.finish_removal(name)?;
        Ok(true)
    }

    pub(super) fn finish_removal(&mut self, name: &[u8]) -> Result<(), SchedError> {
        let done = self
            .collections
            .get(name)
            .and_then(|c| c.removing.as_ref())
            .is_some_and(BTreeSet::is_empty);
        if done {
            if let Some(mut c) = self.collections.remove(name) {
                c.queue.clear()?;
                c.deferred.clear()?;
            }
            self.routing.drop_collection(name);
            self.peer_cache.remove(name);
            self.routing.sync()?;
            self.logs.retain(|(c, _), _| c != name);
            self.dirs.remove(name)?;
            info!("collection {} removed", show(name));
        }
        Ok(())
    }

    /// Sets the state of a collection on every node (CollectionSuspend: CMD_ADM_CONF_SUSPEND
    /// with 4, 5 or 8; CollectionResume: CMD_ADM_CONF_RESUME).
    pub fn set_suspended(&mut self, name: &[u8], state: Option<i64>) -> Result<bool, SchedError> {
        let Some(c) = self.collections.get_mut(name) else {
            return Ok(false);
        };
        if c.removing.is_some() {
            return Ok(false);
        }
        c.state = state.unwrap_or(conf_state::ACTIVE);
        self.save(name)?;
        let m = match state {
            Some(s) => Message::CmdAdmConfSuspend(ConfSuspend {
                collection: owned(name),
                state: s,
            }),
            None => Message::CmdAdmConfResume(CollectionOnly {
                collection: owned(name),
            }),
        };
        self.broadcast(&m);
        Ok(true)
    }

    /// Relays a collection operation to the nodes: to the node the site is routed to when the
    /// message names a site, otherwise to every node. False if the collection is unknown.
    pub fn relay(&mut self, m: &Message<'_>) -> bool {
        let (collection, site): (&[u8], Option<&[u8]>) = match m {
            Message::CmdAdmConfRefresh(ConfRefresh { collection, .. })
            | Message::CmdAdmConfFeedingSuspend(FeedingSuspend { collection, .. })
            | Message::CmdUmDeleteUris(DeleteUris { collection, .. }) => (collection, None),
            Message::CmdAdmPreemptSite(PreemptSite {
                collection, site, ..
            })
            | Message::CmdUmReprocessSite(ReprocessSite {
                collection, site, ..
            })
            | Message::CmdUmDeleteSite(DeleteSite { collection, site })
            | Message::CmdUmQuarantineSite(Quarantine {
                collection, site, ..
            })
            | Message::CmdUmQuarantineSiteRequeue(Quarantine {
                collection, site, ..
            }) => (collection, Some(site)),
            _ => {
                warn!("{} is not relayed to nodes", m.command().name());
                return false;
            }
        };
        if !self.collections.contains_key::<[u8]>(collection) {
            return false;
        }
        let target = site
            .and_then(|s| std::str::from_utf8(s).ok())
            .and_then(|s| {
                self.routing
                    .get(collection, routing_attribute(s).as_bytes())
            })
            .and_then(|n| self.nodes.get(n).copied());
        match target {
            Some(p) => self.send(p, m),
            None => self.broadcast(m),
        }
        true
    }

    /// Queues a crawl queue entry (AddURIs: back, or front when urgent).
    pub fn add_uri(
        &mut self,
        name: &[u8],
        entry: &CrawlQueueEntry<'_>,
        urgent: bool,
    ) -> Result<bool, SchedError> {
        if !self.collections.contains_key(name) {
            return Ok(false);
        }
        self.queue_entry(name, entry, urgent)?;
        Ok(true)
    }
}
