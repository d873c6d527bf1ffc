//! The content distributor's state machines (MS-FSCDFT 3): the dispatcher_node server state
//! (collection holder, session holder, load: 3.5.1) and its handlers, the master/backup
//! election ([`election`]), the master's registry of dispatcher nodes (3.1.1) and the
//! session ids it hands out ([`ids`]). No sockets: `shells/src/distributor.rs` feeds these
//! frames and timer ticks, and the election talks to the name server and the other
//! distributors through the [`election::Cluster`] trait, which a test fakes.
//!
//! The served objects speak the name server's wire format (docs/nameserver.md; the
//! distributor's methods: docs/distributor.md), `object` naming the served object.

pub mod election;
pub mod feed;
pub mod fulltext;
pub mod ids;
pub mod index;
pub mod sessions;
pub mod wire;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use crate::marshal::Value;
use crate::nameserver::{Aor, Exception, Raised, MAX_FIELD_LEN};
use crate::recordlog::{self, Cur};

pub use feed::{Feed, OpResult};
use sessions::SessionLog;
pub use wire::{Guarantee, GuaranteeSet, Handled, MasterCall, Serving, SessionSpec};

/// The name session_factory and master_dispatcher are bound under (MS-FSCDFT 3.1.3, 3.3.3).
pub const DISPATCHER_NAME: &str = "esp/subsystems/processing/dispatcher";
/// processing::session_factory (MS-FSCDFT 3.3.3).
pub const SESSION_FACTORY: (&str, &str) = ("processing::session_factory", "5.1");
/// processing::master_dispatcher (MS-FSCDFT 3.1.3).
pub const MASTER_DISPATCHER: (&str, &str) = ("processing::master_dispatcher", "5.0");
/// processing::dispatcher_node (MS-FSCDFT 3.5.3).
pub const DISPATCHER_NODE: (&str, &str) = ("processing::dispatcher_node", "5.1");
/// The session proxies dispatcher_node returns (MS-FSCF, not among our specs: ours).
pub const SESSION: (&str, &str) = ("processing::session", "5.1");

/// Another object id of a distributor's dispatcher_node, for a client that knows the
/// distributor's address but not its node id (`crawlfleet distributor add-collection`).
pub const NODE_ALIAS: &str = "dispatcher_node";

/// Offset from the base port of the served objects and of sessions (MS-FSCDFT 3.1.3, 3.5.4.1).
pub const PORT_OFFSET: u16 = 390;
/// Offset from the base port of sessions for external clients (MS-FSCDFT 3.5.4.2).
pub const EXTERNAL_PORT_OFFSET: u16 = 391;

/// Most content collections a distributor holds, and most sessions it keeps: bounds what a
/// hostile client can make it hold.
pub const MAX_COLLECTIONS: usize = 1024;
/// See [`MAX_COLLECTIONS`].
pub const MAX_SESSIONS: usize = 65_536;

/// The file in the data directory that keeps the collection holder.
pub const COLLECTIONS_FILE: &str = "collections";

/// The name a node's dispatcher_node is bound under (MS-FSCDFT 3.5.3; 3.1.4.1 writes
/// "subsystem", a typo against 3.5.3 and 4.2.4).
pub fn dispatcher_node_name(node_id: i64) -> String {
    format!("{DISPATCHER_NAME}/{node_id}")
}

/// The object ids a distributor serves its objects under (MS-FSCDFT leaves them to the
/// implementation: 3.1.3 "object_id").
pub fn object_id(node_id: i64, interface: (&str, &str)) -> String {
    let short = interface.0.rsplit("::").next().unwrap_or(interface.0);
    format!("dispatcher/{node_id}/{short}")
}

/// One session in the session holder (MS-FSCDFT 3.5.1): its id, its content collection and
/// where it is served. The feeding itself is not part of this state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    /// The session id (unique key of the holder).
    pub id: i64,
    /// The content collection fed through it.
    pub collection: String,
    /// Base port + 390, or + 391 for an external client (MS-FSCDFT 3.5.4.2).
    pub port: u16,
    /// The operation_callback proxy given to create_session, if any (MS-FSCDFT 3.5.4.1).
    pub callback: Option<Aor>,
}

/// The dispatcher_node server state of one distributor (MS-FSCDFT 3.5.1).
#[derive(Debug)]
pub struct DispatcherNode {
    node_id: i64,
    host: String,
    base_port: u16,
    collections: BTreeSet<String>,
    sessions: BTreeMap<i64, Session>,
    load: i64,
    /// Operations received since the start (the load's running total).
    ops_received: u64,
    indexed: BTreeMap<String, u64>,
    file: Option<PathBuf>,
    session_log: Option<SessionLog>,
}

impl DispatcherNode {
    /// A node holding `collections`, keeping nothing on disk.
    pub fn new(node_id: i64, host: &str, base_port: u16, collections: &[String]) -> Self {
        DispatcherNode {
            node_id,
            host: host.to_owned(),
            base_port,
            collections: collections.iter().cloned().collect(),
            sessions: BTreeMap::new(),
            load: 0,
            ops_received: 0,
            indexed: BTreeMap::new(),
            file: None,
            session_log: None,
        }
    }

    /// A node whose collection holder is kept in `dir` ([`COLLECTIONS_FILE`]): the collections
    /// kept there and `add` (the `--collection` flags), written back when `add` brought new
    /// ones. The caller holds the directory's lock.
    pub fn open(
        dir: &Path,
        node_id: i64,
        host: &str,
        base_port: u16,
        add: &[String],
    ) -> io::Result<Self> {
        let mut node = DispatcherNode::new(node_id, host, base_port, &[]);
        let path = dir.join(COLLECTIONS_FILE);
        node.file = Some(path.clone());
        match File::open(&path) {
            Ok(f) => {
                let mut remaining = f.metadata()?.len();
                let mut r = BufReader::new(f);
                let mut payload = Vec::new();
                while let recordlog::Next::Record =
                    recordlog::read_next(&mut r, remaining, 4 + MAX_FIELD_LEN, &mut payload)?
                {
                    remaining -= (recordlog::HEADER + payload.len()) as u64;
                    let mut c = Cur(&payload);
                    let name = c.bytes().and_then(|b| std::str::from_utf8(b).ok());
                    match name {
                        Some(n) if c.is_empty() => node.collections.insert(n.to_owned()),
                        _ => break,
                    };
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let before = node.collections.len();
        node.collections.extend(add.iter().cloned());
        if node.collections.len() != before {
            node.persist()?;
        }
        let (log, held) = SessionLog::open(dir, base_port).map_err(io::Error::other)?;
        node.sessions = held;
        node.session_log = Some(log);
        Ok(node)
    }

    /// This node's id (MS-FSCDFT 3.5.1 node_id).
    pub fn node_id(&self) -> i64 {
        self.node_id
    }

    /// The collection holder.
    pub fn collections(&self) -> impl Iterator<Item = &str> {
        self.collections.iter().map(String::as_str)
    }

    /// The session holder, by id.
    pub fn sessions(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values()
    }

    /// The load state.
    pub fn load(&self) -> i64 {
        self.load
    }

    /// Operations received since the start, acknowledged or not.
    pub fn ops_received(&self) -> u64 {
        self.ops_received
    }

    /// The session held under `id`.
    pub fn session(&self, id: i64) -> Option<&Session> {
        self.sessions.get(&id)
    }

    /// True when this node holds the content collection.
    pub fn holds(&self, collection: &str) -> bool {
        self.collections.contains(collection)
    }

    /// `n` ops received: the load counts them until they are acknowledged (3.5.4.7).
    pub fn add_load(&mut self, n: i64) {
        self.load += n;
        self.ops_received += n.max(0) as u64;
    }

    /// `n` ops acknowledged (answered ok or failed).
    pub fn ops_done(&mut self, n: i64) {
        self.load = (self.load - n).max(0);
    }

    /// The live documents in `collection`'s index, for get_status.
    pub fn set_indexed(&mut self, collection: &str, live: u64) {
        match self.indexed.get_mut(collection) {
            Some(n) => *n = live,
            None => {
                self.indexed.insert(collection.to_owned(), live);
            }
        }
    }

    /// The reference of this node's object `interface` on base port + 390.
    pub fn aor(&self, name: &str, interface: (&str, &str)) -> Aor {
        Aor {
            name: name.to_owned(),
            object_id: object_id(self.node_id, interface),
            host: self.host.clone(),
            port: self.base_port.saturating_add(PORT_OFFSET),
            interface_type: interface.0.to_owned(),
            interface_version: interface.1.to_owned(),
        }
    }

    /// The session proxy of `s` (MS-FSCF 3.4's AOR: ours, docs/distributor.md).
    pub fn session_aor(&self, s: &Session) -> Aor {
        Aor {
            name: format!("{}/session/{}", dispatcher_node_name(self.node_id), s.id),
            object_id: format!("dispatcher/{}/session/{}", self.node_id, s.id),
            host: self.host.clone(),
            port: s.port,
            interface_type: SESSION.0.to_owned(),
            interface_version: SESSION.1.to_owned(),
        }
    }

    /// `create_session(id, collection, callback, guarantees, priority)` (MS-FSCDFT 3.5.4.1):
    /// a session on base port + 390, kept under its id.
    pub fn on_create_session(&mut self, spec: &SessionSpec, callback: Option<Aor>) -> Outcome {
        self.check(spec)?;
        let s = Session {
            id: spec.id,
            collection: spec.collection.clone(),
            port: self.base_port.saturating_add(PORT_OFFSET),
            callback,
        };
        self.keep(s)
    }

    /// `create(id, collection, guarantees, priority, external_client)` (MS-FSCDFT 3.5.4.2):
    /// a session on base port + 390, or + 391 for an external client. An id already held is
    /// replaced by the new session (the id is the holder's unique key).
    pub fn on_create(&mut self, spec: &SessionSpec) -> Outcome {
        self.check(spec)?;
        let s = Session {
            id: spec.id,
            collection: spec.collection.clone(),
            port: self.session_port(spec.external_client),
            callback: None,
        };
        self.keep(s)
    }

    /// `recreate(...)` (MS-FSCDFT 3.5.4.3): the session held under the id, or a new one.
    pub fn on_recreate(&mut self, spec: &SessionSpec) -> Outcome {
        self.check(spec)?;
        match self.sessions.get(&spec.id) {
            Some(s) => Ok(self.session_aor(s).to_value()),
            None => self.on_create(spec),
        }
    }

    /// `destroy_session(id)` (MS-FSCDFT 3.5.4.4): removes the session; an unknown id is no
    /// error (no exceptions beyond the middleware's).
    pub fn on_destroy_session(&mut self, id: i64) -> Value<'static> {
        if self.sessions.remove(&id).is_some() {
            self.forget(&[id]);
        }
        Value::None
    }

    /// `remove_sessions(coll)` (MS-FSCDFT 3.5.4.5): removes every session of the collection
    /// and returns their ids.
    pub fn on_remove_sessions(&mut self, collection: &str) -> Value<'static> {
        let ids: Vec<i64> = self
            .sessions
            .values()
            .filter(|s| s.collection == collection)
            .map(|s| s.id)
            .collect();
        for id in &ids {
            self.sessions.remove(id);
        }
        if !ids.is_empty() {
            self.forget(&ids);
        }
        Value::List(ids.into_iter().map(Value::int).collect())
    }

    /// session `feed(ops)` (ours, docs/distributor.md "Feeding sessions"): the ops of request
    /// `id` on session `session`, for the index; the load counts them until they are answered
    /// (3.5.4.7).
    pub fn on_feed(
        &mut self,
        id: i64,
        session: i64,
        ops: Vec<Result<index::Op, feed::Refused>>,
    ) -> Feed {
        let collection = self
            .session(session)
            .map(|s| s.collection.clone())
            .unwrap_or_default();
        self.add_load(ops.len() as i64);
        Feed {
            id,
            session,
            collection,
            ops,
        }
    }

    /// session `close()` (ours): the session is removed as destroy_session removes it.
    pub fn on_close(&mut self, session: i64) -> Value<'static> {
        self.on_destroy_session(session)
    }

    /// `get_sessions()` (MS-FSCDFT 3.5.4.6): every session id held.
    pub fn on_get_sessions(&self) -> Value<'static> {
        Value::List(self.sessions.keys().map(|&id| Value::int(id)).collect())
    }

    /// `get_load()` (MS-FSCDFT 3.5.4.7): the load state.
    pub fn on_get_load(&self) -> Value<'static> {
        Value::int(self.load)
    }

    /// `add_collection(collection)` (ours): adds a content collection to the holder, kept on
    /// disk before the answer.
    pub fn on_add_collection(&mut self, collection: &str) -> Outcome {
        if self.collections.contains(collection) {
            return Ok(Value::None);
        }
        if self.collections.len() >= MAX_COLLECTIONS {
            return Err(Raised {
                exception: Exception::Unavailable,
                what: format!("this distributor holds {MAX_COLLECTIONS} collections, its limit"),
            });
        }
        self.collections.insert(collection.to_owned());
        if let Err(e) = self.persist() {
            self.collections.remove(collection);
            return Err(Raised {
                exception: Exception::Storage,
                what: format!("cannot keep the collection: {e}"),
            });
        }
        Ok(Value::None)
    }

    /// `get_status()` (ours, for `crawlfleet distributors`): node id, collections, sessions
    /// and load.
    pub fn on_get_status(&self, role: &str) -> Value<'static> {
        let s = |v: &str| Value::owned_bytes(v.as_bytes().to_vec());
        let k = |k: &'static str| Value::bytes(k.as_bytes());
        let sessions = self
            .sessions
            .values()
            .map(|x| {
                Value::Dict(vec![
                    (k("id"), Value::int(x.id)),
                    (k("collection"), s(&x.collection)),
                    (k("port"), Value::int(x.port.into())),
                ])
            })
            .collect();
        Value::Dict(vec![
            (k("node_id"), Value::int(self.node_id)),
            (k("role"), s(role)),
            (
                k("collections"),
                Value::List(self.collections.iter().map(|c| s(c)).collect()),
            ),
            (k("sessions"), Value::List(sessions)),
            (k("load"), Value::int(self.load)),
            (
                k("indexed"),
                Value::Dict(
                    self.collections
                        .iter()
                        .map(|c| {
                            let n = self.indexed.get(c).copied().unwrap_or(0);
                            (s(c), Value::int(n as i64))
                        })
                        .collect(),
                ),
            ),
        ])
    }

    fn session_port(&self, external_client: bool) -> u16 {
        let offset = if external_client {
            EXTERNAL_PORT_OFFSET
        } else {
            PORT_OFFSET
        };
        self.base_port.saturating_add(offset)
    }

    /// The two checks of 3.5.4.1-3: the collection is held (2.2.4), the guarantees are ones
    /// we support (2.2.2, 2.2.5).
    fn check(&self, spec: &SessionSpec) -> Result<(), Raised> {
        if !self.collections.contains(&spec.collection) {
            return Err(Raised {
                exception: Exception::UnknownCollection,
                what: format!(
                    "distributor {} holds no content collection {:?}",
                    self.node_id, spec.collection
                ),
            });
        }
        spec.guarantees.check_supported(spec.priority)
    }

    fn keep(&mut self, s: Session) -> Outcome {
        if !self.sessions.contains_key(&s.id) && self.sessions.len() >= MAX_SESSIONS {
            return Err(Raised {
                exception: Exception::UnsupportedGuaranteeSet,
                what: format!("this distributor holds {MAX_SESSIONS} sessions, its limit"),
            });
        }
        let aor = self.session_aor(&s);
        if self.sessions.get(&s.id) != Some(&s) {
            if let Some(log) = &mut self.session_log {
                log.keep(&s).map_err(|e| Raised {
                    exception: Exception::UnsupportedGuaranteeSet,
                    what: format!("cannot create the feeding session: {e}"),
                })?;
            }
        }
        self.sessions.insert(s.id, s);
        Ok(aor.to_value())
    }

    /// Drops `ids` from the holder on disk; a failure is logged (destroy_session and
    /// remove_sessions raise nothing, 3.5.4.4-5): the sessions come back after a restart.
    fn forget(&mut self, ids: &[i64]) {
        if let Some(log) = &mut self.session_log {
            if let Err(e) = log.drop_ids(ids, &self.sessions) {
                log::error!("cannot drop sessions {ids:?} from the holder on disk: {e}");
            }
        }
    }

    fn persist(&self) -> io::Result<()> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let mut out = Vec::new();
        for c in &self.collections {
            let start = recordlog::begin(&mut out);
            recordlog::put_bytes(&mut out, c.as_bytes());
            recordlog::seal(&mut out, start);
        }
        recordlog::write_atomic(path, &out)
    }
}

/// A handler's result: the reply value or the exception raised.
pub type Outcome = Result<Value<'static>, Raised>;

#[cfg(test)]
mod tests;
