//! The server's side of its replica (MS-FSCMT 3.3.5): the link's state, the full
//! resynchronization when it connects, forwarding a node's checksum message (after any pending
//! PPDUP_SET_CONFIG) with its answer held, and releasing held answers, with the messages that
//! waited behind them, as the replica's _OKs come back in order.

use std::time::Instant;

use log::{debug, info};

use super::inflight::Released;
use super::outbox::{push_encoded, push_frame, push_with};
use super::{owned, DupServer, PeerId};
use crate::frame::Priority;
use crate::marshal::{self, Value};
use crate::msg::{
    encode_checksum_frame, AddBytes, ChecksumRef, Command, Message, PpdupChecksum, PpdupConfRemove,
    PpdupConfigAck, PpdupSetConfig,
};

/// The replica connection as the server sees it.
#[derive(Default)]
pub(super) struct ReplicaLink {
    pub(super) peer: Option<PeerId>,
    /// 3.3.5.1 transition state: a SET_CONFIG must reach the replica before the next checksum
    /// message. Holds the configurations to forward.
    pub(super) transition: Vec<(Vec<u8>, Vec<u8>)>,
    /// The vector clock of the last SET_CONFIG forwarded and not yet acknowledged.
    pub(super) awaiting_ack: Option<i64>,
    pub(super) keepalive_pending: bool,
}

impl DupServer {
    /// A server's link to its replica: `None` without one, else whether it is connected and
    /// how many forwarded checksum messages it has not acknowledged yet (the replica's lag).
    pub fn replica_lag(&self) -> Option<(bool, usize)> {
        let r = self.replica.as_ref()?;
        Some((r.peer.is_some(), self.flight.len()))
    }

    /// When the batch of the oldest checksum message forwarded to the replica and not
    /// acknowledged yet was handled: the replica's lag in time is its age (None: nothing
    /// pending, or no replica).
    pub fn replica_oldest_pending(&self) -> Option<Instant> {
        self.replica.as_ref()?;
        self.flight.oldest()
    }

    pub(super) fn replica_peer(&self) -> Option<PeerId> {
        self.replica.as_ref().and_then(|r| r.peer)
    }

    /// The replica link is up on `peer`: resynchronize it in full (module docs).
    pub fn replica_connected(&mut self, peer: PeerId) {
        if self.replica.is_none() {
            return;
        }
        // Forwards to an earlier connection (answered when it closed, normally) go now.
        while let Some(released) = self.flight.pop() {
            self.release(released);
        }
        self.flight.clear();
        let r = self.replica.as_mut().expect("checked above");
        r.peer = Some(peer);
        r.transition.clear();
        r.awaiting_ack = None;
        r.keepalive_pending = false;
        info!(
            "replica connected: resynchronizing {} entries",
            self.stores.entries()
        );
        let names: Vec<Vec<u8>> = self.stores.collection_names().map(<[u8]>::to_vec).collect();
        let mut frames = Vec::new();
        for name in &names {
            let c = self.stores.collection(name).expect("listed above");
            let mut push = |m: &Message<'_>| push_frame(&mut frames, peer, m, 1 << 16);
            push(&Message::PpdupConfRemove(PpdupConfRemove {
                collection: owned(name),
                ppdup_id: Some(owned(&self.node_id)),
            }));
            let config = marshal::from_bytes(&c.config, &Default::default())
                .unwrap_or(Value::Dict(Vec::new()));
            self.vclock += 1;
            push(&Message::PpdupSetConfig(PpdupSetConfig {
                config: Value::Dict(vec![(Value::bytes(name), config)]),
                vclock: self.vclock,
                collection: Some(owned(name)),
            }));
            for (cs, uri, node) in c.store.iter() {
                self.flight.push_resync(self.clock);
                push(&Message::PpdupAdd(PpdupChecksum {
                    collection: owned(name),
                    node_id: owned(node),
                    uri: owned(uri),
                    checksum: cs,
                    ppdup_id: Some(owned(&self.node_id)),
                    dbname: Some(owned(self.dbname(name).as_bytes())),
                }));
            }
        }
        self.direct.extend(frames);
    }

    /// PPDUP_CONFIG_ACK from the replica, following MS-FSCMT 3.3.5.8 "Receiving a
    /// PPDUP_CONFIG_ACK Message": only the acknowledgement of the newest forwarded SET_CONFIG
    /// counts.
    pub(super) fn on_ppdup_config_ack(&mut self, peer: PeerId, ack: PpdupConfigAck) {
        let Some(r) = self.replica.as_mut().filter(|r| r.peer == Some(peer)) else {
            debug!("peer {peer}: PPDUP_CONFIG_ACK from a peer that is not the replica");
            return;
        };
        // 3.3.5.8: only the acknowledgement of the newest forwarded SET_CONFIG counts.
        if r.awaiting_ack == Some(ack.vclock) {
            r.awaiting_ack = None;
        } else {
            debug!(
                "ignoring a stale PPDUP_CONFIG_ACK (vector clock {})",
                ack.vclock
            );
        }
    }

    /// 3.3.5.1 step 3.2: the first checksum message after a SET_CONFIG sends the SET_CONFIG on.
    pub(super) fn forward_pending_config(&mut self, rp: PeerId) {
        let Some(r) = self.replica.as_mut() else {
            return;
        };
        if r.transition.is_empty() {
            return;
        }
        let pairs = std::mem::take(&mut r.transition);
        self.vclock += 1;
        r.awaiting_ack = Some(self.vclock);
        let config = pairs
            .iter()
            .map(|(name, cfg)| {
                let v = marshal::from_bytes(cfg, &Default::default())
                    .map(Value::into_owned)
                    .unwrap_or(Value::Dict(Vec::new()));
                (Value::owned_bytes(name.clone()), v)
            })
            .collect();
        let m = Message::PpdupSetConfig(PpdupSetConfig {
            config: Value::Dict(config),
            vclock: self.vclock,
            collection: None,
        });
        self.send(rp, &m);
    }

    /// 3.3.5.4 step 5 and 3.3.5.5: a checksum message for a checksum whose forward awaits the
    /// replica's _OK waits behind it. Returns true when it was queued.
    pub(super) fn wait_behind(&mut self, peer: PeerId, m: &ChecksumRef<'_>, remove: bool) -> bool {
        let Some(key) = self.flight.busy_key(m.collection, m.checksum) else {
            return false;
        };
        let msg = if remove {
            Message::PpdupRemove(m.to_message())
        } else {
            Message::PpdupAdd(m.to_message())
        };
        self.flight.queue(key, peer, msg.into_owned());
        true
    }

    /// Forwards a node's PPDUP_ADD or PPDUP_REMOVE to the replica with PKT_PPDUP_ID and
    /// PKT_DBNAME, after any pending SET_CONFIG, and holds the reply (which `reply` appends,
    /// encoded) until the replica's _OK (3.3.5.4 steps 1-4, 3.3.5.5 step 2). `raw`: the frame
    /// body the PPDUP_ADD `m` was read from, whose bytes the forward is then made of.
    pub(super) fn forward(
        &mut self,
        rp: PeerId,
        peer: PeerId,
        (m, raw): (&ChecksumRef<'_>, Option<AddBytes<'_>>),
        remove: bool,
        reply: impl FnOnce(&mut Vec<u8>),
    ) {
        self.forward_pending_config(rp);
        if self
            .dbname_of
            .as_ref()
            .is_none_or(|(c, _)| c[..] != *m.collection)
        {
            let dbname = self.dbname(m.collection).into_bytes();
            self.dbname_of = Some((m.collection.to_vec(), dbname));
        }
        let fwd = ChecksumRef {
            ppdup_id: Some(&self.node_id),
            dbname: self.dbname_of.as_ref().map(|(_, d)| &d[..]),
            ..*m
        };
        let command = if remove {
            Command::PpdupRemove
        } else {
            Command::PpdupAdd
        };
        // `rp` is the replica: its frames go out before the commit (module docs). An add read
        // from a frame is forwarded as its own bytes with PKT_PPDUP_ID and PKT_DBNAME added.
        let (pi, db) = (
            fwd.ppdup_id.unwrap_or_default(),
            fwd.dbname.unwrap_or_default(),
        );
        let spliced = !remove && raw.is_some();
        push_with(&mut self.direct, rp, self.room, |out| {
            if !(spliced && raw.is_some_and(|raw| raw.forward(pi, db, out))) {
                encode_checksum_frame(command, &fwd, Priority::Normal, out);
            }
        });
        let key = (self.flight.collection_index(m.collection), m.checksum);
        let stamp = (remove, self.batch, self.clock);
        self.flight.push(key, peer, stamp, reply);
    }

    /// Sends a held answer (promoting first after a remove, 3.3.5.5 step 5) and handles the
    /// messages that waited behind it.
    pub(super) fn release(&mut self, released: Released) {
        if let Some((to, range, promote, (collection, checksum), batch)) = released.answer {
            if promote {
                let name = self.flight.collection_name(collection).to_vec();
                self.promote(&name, checksum);
            }
            let frames = self.flight.held(range);
            if Some(to) == self.replica_peer() {
                push_encoded(&mut self.direct, to, frames, self.room);
            } else {
                match self.released.last_mut() {
                    Some((b, p, buf)) if *b == batch && *p == to => buf.extend_from_slice(frames),
                    _ => {
                        // Room for the answers a socket read of _OKs releases, as in `outbox`.
                        let mut buf = Vec::with_capacity(self.room.max(frames.len()));
                        buf.extend_from_slice(frames);
                        self.released.push((batch, to, buf));
                    }
                }
            }
        }
        for (from, msg) in released.waiting {
            self.handle_message(from, *msg);
        }
    }

    /// PPDUP_ADD_OK from the replica, following MS-FSCMT 3.3.5.7 "Receiving a PPDUP_ADD_OK
    /// Message": the node's held answer goes out, then what waited behind it.
    pub(super) fn on_ppdup_add_ok(&mut self) {
        self.replica_answered();
    }

    /// PPDUP_REMOVE_OK from the replica, following MS-FSCMT 3.3.5.9 "Receiving a
    /// PPDUP_REMOVE_OK Message": the node's held answer goes out (after PPDUP_PROMOTE_REQ,
    /// 3.3.5.5 step 5), then what waited behind it.
    pub(super) fn on_ppdup_remove_ok(&mut self) {
        self.replica_answered();
    }

    /// The replica's PPDUP_ADD_OK or PPDUP_REMOVE_OK: answer the node, then what waited.
    pub(super) fn replica_answered(&mut self) {
        match self.flight.pop() {
            Some(released) => self.release(released),
            None => debug!("an _OK from the replica with nothing forwarded"),
        }
    }
}
