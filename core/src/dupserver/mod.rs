//! The duplicate server and its replica as a state machine (MS-FSCMT 3.3 and 3.4), free of
//! sockets: the role shell feeds it frames from peers and sends what it returns.
//!
//! Durability: every state change goes to the write-ahead log of [`DupStores`]; replies are held
//! in an outbox until the log is committed (group commit: [`DupServer::flush`], or
//! [`DupServer::write_log`] with the fdatasync left to another thread), so nothing is
//! acknowledged before it is on disk. With a replica, a node's PPDUP_ADD or PPDUP_REMOVE that
//! changes the store is answered only after the replica's _OK (3.3.5.4, 3.3.5.5), and later
//! messages for the same checksum wait for it. Frames to the replica do not wait for the local
//! commit: the forward leaves at once, so the replica's fdatasync overlaps ours, and the node is
//! answered once both are done (the answer is released by the _OK into an outbox that itself
//! waits for the commit).
//!
//! Decisions where the spec is silent:
//! - A PPDUP_REMOVE removes the mapping only when its URI is the owner URI (the spec calls PKT_URI
//!   "the owner URI to remove"); otherwise it is answered and changes nothing, and no
//!   PPDUP_PROMOTE_REQ is sent.
//! - While a configured replica is not connected, the server keeps serving alone (logging it);
//!   when the replica connects it is resynchronized in full: PPDUP_CONF_REMOVE and
//!   PPDUP_SET_CONFIG for every collection, then every entry as a forwarded PPDUP_ADD.
//! - A replica also accepts PPDUP_ADD / PPDUP_REMOVE straight from node schedulers (no
//!   PKT_PPDUP_ID): it then acts as the duplicate server, which is how node schedulers fail over.
//!   It then holds checksums the server lacks, so the server's resync (PPDUP_CONF_REMOVE, then
//!   the entries) no longer deletes a collection: the entries join what the replica holds.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::time::Instant;

use log::{debug, warn};

use crate::checksum::durable::{record_room, DupError, DupStores};
use crate::checksum::wal::{SyncPoint, WalError};
use crate::checksum::AddOutcome;
use crate::frame::{self, FrameError, MessageFrameError, Priority};
use crate::marshal::{self, dict_get};
use crate::msg::{
    encode_add_ok_frame, peek_checksum, read_ppdup, read_ppdup_command, AddBytes, Bytes, Checksum,
    ChecksumRef, CollectionOnly, Command, Message, PpdupAddOk, PpdupConfRemove, PpdupConfigAck,
    PpdupError, PpdupPromoteReq, PpdupRef, PpdupRemoveOk, PpdupSetConfig,
};

mod counters;
mod inflight;
mod outbox;
mod replica;

pub use counters::DupCounters;

use inflight::InFlight;
use outbox::{push_add_ok, push_frame, push_with, Queue};
use replica::ReplicaLink;

/// Frames whose checksum slots are asked for ahead of their handling ([`DupServer::handle_frames`]):
/// a window of adds arrives at once, and each add's probe of a table that outgrew the cache
/// is a wait for memory; asked this far ahead, the waits overlap (about as many as a core
/// keeps in flight) and the slots are still in the cache when their frames come.
const PREFETCH_AHEAD: usize = 16;

/// A connected peer, as the role shell numbers its connections.
pub type PeerId = u64;

/// Which side of MS-FSCMT 3.3 / 3.4 this is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The duplicate server (3.3), with or without a replica.
    Server,
    /// The duplicate server replica (3.4).
    Replica,
}

fn owned(b: &[u8]) -> Bytes<'static> {
    Cow::Owned(b.to_vec())
}

/// The duplicate server or replica.
pub struct DupServer {
    mode: Mode,
    node_id: Vec<u8>,
    stores: DupStores,
    replica: Option<ReplicaLink>,
    /// Collections between PPDUP_CONF_REMOVE and PPDUP_CONF_REMOVE2 (3.3.5.2).
    removing: HashSet<Vec<u8>>,
    /// The peer and collection [`DupServer::check_collection`] last admitted: a node's window
    /// of checksum messages names one collection, so the next message from the same peer for
    /// the same collection is admitted on one comparison. Forgotten whenever a collection or a
    /// peer comes or goes.
    admitted: Option<(PeerId, Vec<u8>)>,
    /// Connected peers (node schedulers, or the server seen from the replica): the collections
    /// each has spoken about (for PPDUP_PROMOTE_REQ) and its keep-alive state.
    /// Looked up for every message, so hashed with foldhash (seeded per map) rather than SipHash:
    /// the keys are the shell's connection numbers, not the peers' input.
    peers: HashMap<PeerId, Peer, foldhash::fast::RandomState>,
    /// Checksum messages forwarded to the replica, in order (it answers in the order it was
    /// sent to, over one connection), with the held answers and what waits behind them.
    flight: InFlight,
    /// Our vector clock toward the replica (PKT_VCLOCK of forwarded SET_CONFIGs).
    vclock: i64,
    /// Frames to send once the log is committed, consecutive frames to one peer in one buffer.
    outbox: Queue,
    /// Answers released by the replica's _OK: each waits only for the log batch that holds its
    /// message's record, `(batch, peer, frames)`.
    released: Vec<(u64, PeerId, Vec<u8>)>,
    /// Log batches written so far ([`DupServer::write_log`] calls): the number of the batch the
    /// records of the messages handled now go to.
    batch: u64,
    /// Frames to the replica, which may leave before the commit (module docs).
    direct: Queue,
    /// Frames to the replica left this batch through [`DupServer::take_direct`].
    forwarded: bool,
    /// Bytes a new output buffer starts with while a socket read's frames are handled (see
    /// [`DupServer::handle_frames`]); 0 otherwise.
    room: usize,
    /// The last collection forwarded and its PKT_DBNAME.
    dbname_of: Option<(Vec<u8>, Vec<u8>)>,
    /// A replica that has answered a node scheduler's checksum message itself (module docs).
    served_nodes: bool,
    counters: DupCounters,
    /// When the events being handled arrived ([`DupServer::set_clock`]): the time forwards
    /// are stamped with for the replica's lag.
    clock: Instant,
}

/// What [`DupServer::write_log`] hands over: frames to send now, and frames to send only once
/// `sync` is durable. Each entry holds one or more whole frames for one peer; entries keep the
/// order the frames were produced in.
pub struct Outgoing {
    /// Frames to the replica: send at once.
    pub now: Vec<(PeerId, Vec<u8>)>,
    /// Everything else: send only after [`SyncPoint::sync`] of `sync` has returned.
    pub after_sync: Vec<(PeerId, Vec<u8>)>,
    /// Answers the replica's _OK released, `(batch, peer, frames)`: each may leave once the sync
    /// point of that earlier batch is durable (their records were written then; waiting for
    /// `sync` would only add a disk flush to every replicated answer).
    pub after_batch: Vec<(u64, PeerId, Vec<u8>)>,
    /// The log written so far.
    pub sync: SyncPoint,
    /// The number of this batch: `sync` is its sync point.
    pub batch: u64,
    /// Frames went to the replica in this batch (in `now`, or taken earlier by
    /// [`DupServer::take_direct`]): `sync` must be made durable even when no answer waits for
    /// it, since the answers the replica's _OKs release for this batch wait for it.
    pub forwarded: bool,
}

#[derive(Default)]
struct Peer {
    collections: HashSet<Vec<u8>>,
    /// The collection of the peer's last message, in `collections` (spares a lookup per add).
    last: Option<Vec<u8>>,
    keepalive_pending: bool,
}

impl DupServer {
    /// A server (or replica) over `stores`, naming itself `node_id` in PKT_PPDUP_ID. A server
    /// with `with_replica` forwards to a replica once [`Self::replica_connected`] is called.
    pub fn new(mode: Mode, node_id: &[u8], stores: DupStores, with_replica: bool) -> Self {
        DupServer {
            mode,
            node_id: node_id.to_vec(),
            stores,
            replica: (mode == Mode::Server && with_replica).then(ReplicaLink::default),
            removing: HashSet::new(),
            admitted: None,
            peers: HashMap::default(),
            flight: InFlight::default(),
            vclock: 0,
            outbox: Vec::new(),
            released: Vec::new(),
            batch: 0,
            direct: Vec::new(),
            forwarded: false,
            room: 0,
            dbname_of: None,
            served_nodes: false,
            counters: DupCounters::default(),
            clock: Instant::now(),
        }
    }

    /// The stores.
    pub fn stores(&self) -> &DupStores {
        &self.stores
    }

    /// The messages counted so far.
    pub fn counters(&self) -> DupCounters {
        self.counters
    }

    /// The time of the events handled from now on (the shell sets it once per batch of events,
    /// so that a forward costs no clock reading): forwards are stamped with it.
    pub fn set_clock(&mut self, now: Instant) {
        self.clock = now;
    }

    /// The stores, for snapshot steps.
    pub fn stores_mut(&mut self) -> &mut DupStores {
        // Whatever the caller changes, the collection admitted last is checked again.
        self.admitted = None;
        &mut self.stores
    }

    fn send(&mut self, to: PeerId, m: &Message<'_>) {
        let room = self.room;
        push_frame(self.queue_for(to), to, m, room);
    }

    /// The queue of frames to `to`: those to the replica leave before the commit.
    fn queue_for(&mut self, to: PeerId) -> &mut Queue {
        if Some(to) == self.replica_peer() {
            &mut self.direct
        } else {
            &mut self.outbox
        }
    }

    /// A node scheduler (or, for a replica, the server) connected.
    pub fn peer_connected(&mut self, peer: PeerId) {
        self.admitted = None;
        self.peers.insert(peer, Peer::default());
    }

    /// A peer's connection closed.
    pub fn peer_closed(&mut self, peer: PeerId) {
        self.admitted = None;
        self.peers.remove(&peer);
        if let Some(r) = self.replica.as_mut() {
            if r.peer == Some(peer) {
                warn!("replica connection lost: serving alone until it is back");
                r.peer = None;
                // What waited for the replica is answered now (the local log has it), in the
                // order it was forwarded, and the messages queued behind it are handled.
                while let Some(released) = self.flight.pop() {
                    self.release(released);
                }
                self.flight.clear();
            }
        }
    }

    /// The path PKT_DBNAME names for a collection.
    fn dbname(&self, collection: &[u8]) -> String {
        format!(
            "{}/{}",
            self.stores.dir().display(),
            String::from_utf8_lossy(collection)
        )
    }

    /// Handles the frame bodies of one socket read from `peer`, `bytes` long in all (their
    /// answers start in a buffer of about that size), until one is not a valid frame: that
    /// error is returned, and the frames after it are not handled.
    pub fn handle_frames<'b>(
        &mut self,
        peer: PeerId,
        bodies: impl IntoIterator<Item = &'b [u8]>,
        bytes: usize,
    ) -> Result<(), FrameError> {
        // A PPDUP_ADD_OK is a little longer than its PPDUP_ADD (PKT_OWNURI for PKT_CSUM).
        self.room = bytes + bytes / 2;
        // The frames are handled in order, each as `handle_frame` alone would; the checksum
        // slots of the next PREFETCH_AHEAD are asked for meanwhile (a ring of the bodies read
        // ahead, the oldest at `head`).
        let mut bodies = bodies.into_iter();
        let mut ahead: [&[u8]; PREFETCH_AHEAD] = [&[]; PREFETCH_AHEAD];
        let mut queued = 0;
        for body in bodies.by_ref().take(PREFETCH_AHEAD) {
            self.prefetch_slot(body);
            ahead[queued] = body;
            queued += 1;
        }
        let mut head = 0;
        let r = loop {
            if queued == 0 {
                break Ok(());
            }
            let body = ahead[head];
            match bodies.next() {
                Some(next) => {
                    self.prefetch_slot(next);
                    ahead[head] = next;
                }
                None => queued -= 1,
            }
            head = (head + 1) % PREFETCH_AHEAD;
            if let Err(e) = self.handle_frame(peer, body) {
                break Err(e);
            }
        };
        self.room = 0;
        r
    }

    /// Asks for the table slot of the checksum a PPDUP_ADD or PPDUP_REMOVE body names, to be
    /// in the cache when the body is handled; a hint, with no effect on what is stored.
    #[inline]
    fn prefetch_slot(&self, body: &[u8]) {
        if let Some((collection, cs)) = peek_checksum(body) {
            if let Some(c) = self.stores.collection(collection) {
                c.store.prefetch(&cs);
            }
        }
    }

    /// Handles one frame body from `peer` (as cut by its length header alone: each body is read
    /// once, here). A body that is not a valid FSCMT frame (MS-FSCMT 2.2.1: a marshal
    /// `(dict, 0|1)`) is the error returned, for the shell to close the connection on, as a
    /// framing that checks the body would; a valid frame that is not a message this role takes
    /// is answered with PPDUP_ERROR and the connection kept.
    pub fn handle_frame(&mut self, peer: PeerId, body: &[u8]) -> Result<(), FrameError> {
        let limits = Default::default();
        // The replica's _OKs release the oldest forward: their command is all that is read.
        if Some(peer) == self.replica_peer() {
            match read_ppdup_command(body, &limits) {
                Some((_, Command::PpdupAddOk)) => {
                    self.on_ppdup_add_ok();
                    return Ok(());
                }
                Some((_, Command::PpdupRemoveOk)) => {
                    self.on_ppdup_remove_ok();
                    return Ok(());
                }
                _ => {}
            }
        }
        // PPDUP_ADD and its kin straight to their handler, borrowed from the body.
        if let Some((_, m)) = read_ppdup(body, &limits) {
            match m {
                PpdupRef::Add(add) => self.on_ppdup_add(peer, &add, AddBytes::of(body, &add)),
                PpdupRef::Remove(rm) => self.on_ppdup_remove(peer, &rm),
                PpdupRef::AddOk(_) if Some(peer) == self.replica_peer() => self.on_ppdup_add_ok(),
                m => self.handle_message(peer, m.into_message()),
            }
            return Ok(());
        }
        match frame::decode_message(body, &limits) {
            Ok((_, m)) => self.handle_message(peer, m),
            Err(MessageFrameError::Frame(e)) => return Err(e),
            Err(e) => {
                let collection = frame::decode_body(body, &limits)
                    .ok()
                    .and_then(|f| {
                        dict_get(&f.message, b"dn")
                            .and_then(|v| v.as_bytes())
                            .map(<[u8]>::to_vec)
                    })
                    .unwrap_or_default();
                crate::warn_limited!("dupserver-refused", "peer {peer}: refusing a message: {e}");
                self.error(peer, &collection, &e.to_string());
            }
        }
        Ok(())
    }

    fn error(&mut self, peer: PeerId, collection: &[u8], why: &str) {
        self.send(
            peer,
            &Message::PpdupError(PpdupError {
                collection: owned(collection),
                why: owned(why.as_bytes()),
            }),
        );
    }

    fn note_collection(&mut self, peer: PeerId, collection: &[u8]) {
        if let Some(p) = self.peers.get_mut(&peer) {
            if p.last.as_deref() != Some(collection) {
                p.collections.insert(collection.to_vec());
                p.last = Some(collection.to_vec());
            }
        }
    }

    /// Handles one typed message from `peer` (3.3.5 / 3.4.5): each to its `on_<message>`
    /// handler.
    pub fn handle_message(&mut self, peer: PeerId, m: Message<'_>) {
        match m {
            Message::PpdupKeepalive => self.on_ppdup_keepalive(peer),
            Message::PpdupKeepaliveAck => self.on_ppdup_keepalive_ack(peer),
            Message::PpdupSetConfig(sc) => self.on_ppdup_set_config(peer, sc),
            Message::PpdupConfigAck(ack) => self.on_ppdup_config_ack(peer, ack),
            Message::PpdupConfRemove(cr) => self.on_ppdup_conf_remove(peer, cr),
            Message::PpdupConfRemove2(c) => self.on_ppdup_conf_remove2(&c),
            Message::PpdupAdd(add) => self.on_ppdup_add(peer, &ChecksumRef::of(&add), None),
            Message::PpdupRemove(rm) => self.on_ppdup_remove(peer, &ChecksumRef::of(&rm)),
            // Only the replica answers with _OK (3.3.5.7, 3.3.5.9).
            Message::PpdupAddOk(_) if Some(peer) == self.replica_peer() => self.on_ppdup_add_ok(),
            Message::PpdupRemoveOk(_) if Some(peer) == self.replica_peer() => {
                self.on_ppdup_remove_ok()
            }
            other => {
                warn!(
                    "peer {peer}: {} is not for a duplicate server",
                    other.command()
                );
                let collection = collection_of(&other).unwrap_or_default();
                let why = format!("{} is not handled by a duplicate server", other.command());
                self.error(peer, &collection, &why);
            }
        }
    }

    /// PPDUP_KEEPALIVE, following MS-FSCMT 3.3.5.6 "Receiving a PPDUP_KEEPALIVE Message":
    /// answered with PPDUP_KEEPALIVE_ACK.
    fn on_ppdup_keepalive(&mut self, peer: PeerId) {
        self.send(peer, &Message::PpdupKeepaliveAck);
    }

    /// PPDUP_KEEPALIVE_ACK, following MS-FSCMT 3.3.5.10 "Receiving a PPDUP_KEEPALIVE_ACK
    /// Message" (and 3.4.5.5 on the replica): the peer's pending keep-alive is cleared.
    fn on_ppdup_keepalive_ack(&mut self, peer: PeerId) {
        if let Some(p) = self.peers.get_mut(&peer) {
            p.keepalive_pending = false;
        }
        if let Some(r) = self.replica.as_mut().filter(|r| r.peer == Some(peer)) {
            r.keepalive_pending = false;
        }
    }

    /// PPDUP_SET_CONFIG, following MS-FSCMT 3.3.5.1 "Receiving a PPDUP_SET_CONFIG Message" (and
    /// 3.4.5.1 on the replica): every configuration is added and acknowledged at once
    /// (PPDUP_CONFIG_ACK); the server sends it on to its replica before the next checksum
    /// message.
    fn on_ppdup_set_config(&mut self, peer: PeerId, sc: PpdupSetConfig<'_>) {
        // PKT_DATA maps collection names to their configurations (2.2.2.3); with PKT_DSPECNAME
        // only that collection is meant.
        let mut added = Vec::new();
        for (k, v) in sc.config.as_dict().unwrap_or_default() {
            let Some(name) = k.as_bytes() else { continue };
            if sc.collection.as_deref().is_some_and(|dn| dn != name) {
                continue;
            }
            added.push((name.to_vec(), marshal::to_bytes(v)));
        }
        if added.is_empty() {
            if let Some(dn) = &sc.collection {
                added.push((dn.to_vec(), marshal::to_bytes(&sc.config)));
            }
        }
        let need = added.iter().map(|(n, c)| record_room(n, c, b"")).sum();
        if let Err(e) = self.stores.make_room(need) {
            // Nothing was changed; the node asks again (its configuration stays unacknowledged).
            let collection = sc.collection.as_deref().unwrap_or_default().to_vec();
            crate::warn_limited!("dupserver-no-room", "PPDUP_SET_CONFIG refused: {e}");
            self.error(peer, &collection, &e.to_string());
            return;
        }
        self.admitted = None;
        for (name, config) in &added {
            self.removing.remove(name);
            self.stores.set_collection(name, config.clone());
            self.note_collection(peer, name);
        }
        self.send(
            peer,
            &Message::PpdupConfigAck(PpdupConfigAck { vclock: sc.vclock }),
        );
        if let Some(r) = self.replica.as_mut() {
            r.transition.extend(added);
        }
    }

    /// PPDUP_CONF_REMOVE, following MS-FSCMT 3.3.5.2 "Receiving a PPDUP_CONF_REMOVE Message"
    /// (and 3.4.5.2 on the replica): the collection's store is deleted, and the server discards
    /// the collection's messages until PPDUP_CONF_REMOVE2 and forwards the removal to its
    /// replica.
    fn on_ppdup_conf_remove(&mut self, peer: PeerId, cr: PpdupConfRemove<'_>) {
        if self.mode == Mode::Replica && self.served_nodes && cr.ppdup_id.is_some() {
            let why = "kept, node schedulers failed over to this replica";
            crate::warn_limited!("replica-keeps", "the server resyncs a collection: {why}");
            return;
        }
        if let Err(e) = self.stores.make_room(record_room(&cr.collection, b"", b"")) {
            crate::warn_limited!("dupserver-no-room", "PPDUP_CONF_REMOVE refused: {e}");
            self.error(peer, &cr.collection, &e.to_string());
            return;
        }
        self.admitted = None;
        self.stores.drop_collection(&cr.collection);
        if self.mode == Mode::Server {
            self.removing.insert(cr.collection.to_vec());
        }
        self.flight.cancel_collection(&cr.collection);
        if let Some(r) = self.replica.as_mut() {
            r.transition.retain(|(c, _)| c[..] != cr.collection[..]);
        }
        if let Some(rp) = self.replica_peer() {
            let fwd = Message::PpdupConfRemove(PpdupConfRemove {
                collection: cr.collection.clone(),
                ppdup_id: Some(owned(&self.node_id)),
            });
            self.send(rp, &fwd);
        }
        debug!("peer {peer}: collection removed");
    }

    /// PPDUP_CONF_REMOVE2, following MS-FSCMT 3.3.5.3 "Receiving a PPDUP_CONF_REMOVE2
    /// Message": the removal is complete; the name may be configured again.
    fn on_ppdup_conf_remove2(&mut self, c: &CollectionOnly<'_>) {
        self.admitted = None;
        self.removing.remove(&c.collection[..]);
    }

    /// Whether a message for `collection` is to be dropped (3.3.5.2), or refused as unknown.
    fn check_collection(&mut self, peer: PeerId, collection: &[u8]) -> bool {
        if let Some((p, c)) = &self.admitted {
            if *p == peer && c[..] == *collection {
                return true;
            }
        }
        if !self.removing.is_empty() && self.removing.contains(collection) {
            debug!("discarding a message for collection being removed");
            return false;
        }
        if self.stores.collection(collection).is_none() {
            self.error(peer, collection, "unknown collection");
            return false;
        }
        self.note_collection(peer, collection);
        match &mut self.admitted {
            Some((p, c)) => {
                *p = peer;
                c.clear();
                c.extend_from_slice(collection);
            }
            None => self.admitted = Some((peer, collection.to_vec())),
        }
        true
    }

    /// PPDUP_ADD, following MS-FSCMT 3.3.5.4 "Receiving a PPDUP_ADD Message" (a node's: the
    /// first URI to add a checksum owns it, PPDUP_ADD_OK names the owner; with a replica a new
    /// mapping is answered only after the replica's PPDUP_ADD_OK) and 3.4.5.3 (forwarded to the
    /// replica: overwrite, answer with the same pairs). `raw`: the add's frame body, when it was
    /// read from one, whose bytes the answers and the forward are made of.
    fn on_ppdup_add(&mut self, peer: PeerId, add: &ChecksumRef<'_>, raw: Option<AddBytes<'_>>) {
        let forwarded = add.ppdup_id.is_some();
        if !self.check_collection(peer, add.collection) {
            return;
        }
        self.counters.adds += 1;
        if self.mode == Mode::Replica && forwarded {
            // 3.4.5.3: overwrite, then answer with the same pairs.
            if let Err(e) = self
                .stores
                .put(add.collection, add.checksum, add.uri, add.node_id)
            {
                self.error(peer, add.collection, &e.to_string());
                return;
            }
            let room = self.room;
            match raw {
                Some(raw) => push_with(self.queue_for(peer), peer, room, |out| {
                    raw.echo_add_ok(out);
                }),
                None => {
                    let ok = PpdupAddOk {
                        owner_uri: None,
                        ..add_ok(add)
                    };
                    push_add_ok(self.queue_for(peer), peer, &ok, room);
                }
            }
            return;
        }
        self.served_nodes |= self.mode == Mode::Replica;
        // A checksum whose forward awaits the replica's _OK waits behind it (3.3.5.4 step 5).
        // Such a checksum is in the store unless the forward was a remove: with no remove in
        // flight, the store's probe comes first, and only a checksum it holds is looked up in
        // the set in flight (an add that adds cannot be waiting for anything). The store's add
        // of a checksum it holds changes nothing, so looking after it is the same as before.
        let looked = self.flight.removes() > 0;
        if looked && self.wait_behind(peer, add, false) {
            return;
        }
        // The answer is written straight into its buffer; an owner's URI is read in place.
        let rp = self.replica_peer();
        let room = self.room;
        let added = match self
            .stores
            .add(add.collection, add.checksum, add.uri, add.node_id)
        {
            Ok(AddOutcome::Added) => Ok(()),
            Ok(AddOutcome::Exists { owner_uri, .. }) => {
                if !looked {
                    if let Some(key) = self.flight.busy_key(add.collection, add.checksum) {
                        let msg = Message::PpdupAdd(add.to_message()).into_owned();
                        self.flight.queue(key, peer, msg);
                        return;
                    }
                }
                // Nothing changed: answered once the log is committed, with no forward.
                let ok = PpdupAddOk {
                    owner_uri: Some(Cow::Borrowed(owner_uri)),
                    ppdup_id: None,
                    dbname: None,
                    ..add_ok(add)
                };
                let q = if Some(peer) == rp {
                    &mut self.direct
                } else {
                    &mut self.outbox
                };
                push_add_ok(q, peer, &ok, room);
                return;
            }
            Err(DupError::UnknownCollection) => Err("unknown collection".to_string()),
            Err(e) => Err(e.to_string()),
        };
        if let Err(why) = added {
            self.error(peer, add.collection, &why);
            return;
        }
        // Spliced from the add's own bytes when it was read from a frame (and carries no
        // PKT_PPDUP_ID or PKT_DBNAME), else encoded.
        let answer = |out: &mut Vec<u8>| {
            if !raw.is_some_and(|raw| raw.fresh_add_ok(out)) {
                let reply = PpdupAddOk {
                    ppdup_id: None,
                    dbname: None,
                    ..add_ok(add)
                };
                encode_add_ok_frame(&reply, Priority::Normal, out);
            }
        };
        match rp {
            // A new mapping with a replica: forward, answer after its PPDUP_ADD_OK.
            Some(rp) => self.forward(rp, peer, (add, raw), false, answer),
            None => push_with(self.queue_for(peer), peer, room, answer),
        }
    }

    /// PPDUP_REMOVE, following MS-FSCMT 3.3.5.5 "Receiving a PPDUP_REMOVE Message" (the owner
    /// URI's mapping is removed, every node of the collection asked to re-crawl the checksum
    /// with PPDUP_PROMOTE_REQ; with a replica after its PPDUP_REMOVE_OK) and 3.4.5.4 (forwarded
    /// to the replica: delete if present, answer with the same pairs).
    fn on_ppdup_remove(&mut self, peer: PeerId, rm: &ChecksumRef<'_>) {
        let forwarded = rm.ppdup_id.is_some();
        if !self.check_collection(peer, rm.collection) {
            return;
        }
        self.counters.removes += 1;
        fn reply_to<'m>(rm: &ChecksumRef<'m>, pi: bool) -> Message<'m> {
            Message::PpdupRemoveOk(PpdupRemoveOk {
                collection: Cow::Borrowed(rm.collection),
                uri: Cow::Borrowed(rm.uri),
                node_id: Some(Cow::Borrowed(rm.node_id)),
                ppdup_id: rm.ppdup_id.filter(|_| pi).map(Cow::Borrowed),
                dbname: rm.dbname.filter(|_| pi).map(Cow::Borrowed),
            })
        }
        if self.mode == Mode::Replica && forwarded {
            // 3.4.5.4: delete if present, answer with the same pairs.
            let _ = self.stores.remove(rm.collection, &rm.checksum);
            self.send(peer, &reply_to(rm, true));
            return;
        }
        self.served_nodes |= self.mode == Mode::Replica;
        if self.wait_behind(peer, rm, true) {
            return;
        }
        let is_owner = self
            .stores
            .collection(rm.collection)
            .and_then(|c| c.store.get(&rm.checksum))
            .is_some_and(|(uri, _)| uri == rm.uri);
        if !is_owner {
            self.send(peer, &reply_to(rm, false));
            return;
        }
        let _ = self.stores.remove(rm.collection, &rm.checksum);
        let reply = reply_to(rm, false);
        match self.replica_peer() {
            Some(rp) => self.forward(rp, peer, (rm, None), true, |held| {
                frame::encode_message(&reply, Priority::Normal, held)
            }),
            None => {
                self.promote(rm.collection, rm.checksum);
                self.send(peer, &reply);
            }
        }
    }

    /// 3.3.5.5 step 5: every connected node scheduler of the collection re-crawls the checksum.
    fn promote(&mut self, collection: &[u8], checksum: Checksum) {
        let rp = self.replica_peer();
        let targets: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(id, p)| Some(**id) != rp && p.collections.contains(collection))
            .map(|(id, _)| *id)
            .collect();
        let m = Message::PpdupPromoteReq(PpdupPromoteReq {
            collection: owned(collection),
            checksum,
        });
        for t in targets {
            self.send(t, &m);
        }
    }

    /// The Keep-Alive timer (3.3.6 / 3.4.6): log who did not answer the last keep-alive, send
    /// a new one to every peer.
    pub fn keepalive_tick(&mut self) {
        let ids: Vec<PeerId> = self.peers.keys().copied().collect();
        for id in ids {
            let p = self.peers.get_mut(&id).expect("listed above");
            if p.keepalive_pending {
                warn!("peer {id} did not answer the last PPDUP_KEEPALIVE");
            }
            p.keepalive_pending = true;
            self.send(id, &Message::PpdupKeepalive);
        }
        if let Some(rp) = self.replica_peer() {
            let r = self.replica.as_mut().expect("has a peer");
            if r.keepalive_pending {
                warn!("the replica did not answer the last PPDUP_KEEPALIVE");
            }
            r.keepalive_pending = true;
            self.send(rp, &Message::PpdupKeepalive);
        }
    }

    /// Commits the log (fdatasync on this thread), then hands over every frame to send:
    /// `(peer, one or more encoded frames)`, those to the replica first.
    pub fn flush(&mut self) -> Result<Vec<(PeerId, Vec<u8>)>, WalError> {
        self.stores.commit()?;
        self.batch += 1;
        let mut out = std::mem::take(&mut self.direct);
        out.extend(self.released.drain(..).map(|(_, p, b)| (p, b)));
        out.append(&mut self.outbox);
        Ok(out)
    }

    /// The frames to the replica produced so far, to send at once: the shell takes them after
    /// every event, so the replica works on one node's window while this server handles the
    /// next, instead of waiting for the whole batch.
    pub fn take_direct(&mut self) -> Vec<(PeerId, Vec<u8>)> {
        self.forwarded |= !self.direct.is_empty();
        std::mem::take(&mut self.direct)
    }

    /// Writes the log without waiting for the disk and hands over the frames: those to the
    /// replica to send now, the others to send once the returned point is synced. Pipelined group
    /// commit: the caller syncs on another thread while this one handles the next events.
    pub fn write_log(&mut self) -> Result<Outgoing, WalError> {
        let sync = self.stores.write_log()?;
        let batch = self.batch;
        self.batch += 1;
        let now = std::mem::take(&mut self.direct);
        let forwarded = std::mem::take(&mut self.forwarded) || !now.is_empty();
        Ok(Outgoing {
            now,
            forwarded,
            after_sync: std::mem::take(&mut self.outbox),
            after_batch: std::mem::take(&mut self.released),
            sync,
            batch,
        })
    }
}

/// The PPDUP_ADD_OK answering `add` with its own pairs (3.3.5.4, 3.4.5.3), borrowed from it;
/// PKT_OWNURI its own URI.
fn add_ok<'m>(add: &ChecksumRef<'m>) -> PpdupAddOk<'m> {
    PpdupAddOk {
        collection: Cow::Borrowed(add.collection),
        node_id: Cow::Borrowed(add.node_id),
        uri: Cow::Borrowed(add.uri),
        owner_uri: Some(Cow::Borrowed(add.uri)),
        ppdup_id: add.ppdup_id.map(Cow::Borrowed),
        dbname: add.dbname.map(Cow::Borrowed),
    }
}

fn collection_of(m: &Message<'_>) -> Option<Vec<u8>> {
    let dict = m.to_dict();
    dict_get(&dict, b"dn")
        .and_then(|v| v.as_bytes())
        .map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_flight;
#[cfg(test)]
mod tests_window;
