//! The master/backup election of MS-FSCDFT 3 and the master's dispatcher node registry
//! (3.1.1), as a state machine that talks to the name server and the other distributors only
//! through [`Cluster`]: the shell implements it with blocking calls on a worker thread, a test
//! with a fake name server and fake distributors.
//!
//! - Start (3, 3.4.3, 3.5.3): bind this node's dispatcher_node, then resolve session_factory.
//!   Nothing bound -> become master. A binding whose object answers `__ping` -> become a backup
//!   and register with the master (3.2.4.1). A binding whose object does not answer -> unbind
//!   that object (by its object id, so a late racer cannot remove a winner's fresh binding),
//!   then become master.
//! - Becoming master (3, 3.3.3, 3.1.3): bind session_factory, then master_dispatcher, taking
//!   the dead master's master_dispatcher binding over with the name server's `replaces`. A
//!   session_factory bind refused means another node won: register with it as a backup
//!   (3.4.3).
//! - The backup's check-for-master timer (3.4.5): `__ping` the master's session_factory; after
//!   three failures in a row resolve again and ping what it returns; only when that fails too
//!   unbind the old session_factory by its object id and become master. A backup the master
//!   does not list registers again.
//! - The master's check-master-status timer (3.3.5): resolve session_factory; another object
//!   bound there demotes this node (it stops serving session_factory and master_dispatcher) and
//!   it registers as a backup with the master it found. Nothing bound (a name server that came
//!   back empty) -> bind again. An unreachable name server demotes no one.

use std::collections::BTreeMap;

use crate::nameserver::{Aor, Triple};

use super::{
    dispatcher_node_name, object_id, Serving, DISPATCHER_NAME, DISPATCHER_NODE, MASTER_DISPATCHER,
    SESSION_FACTORY,
};

/// Failed pings in a row after which a backup looks for a new master (MS-FSCDFT 3.4.5).
pub const PING_FAILURES: u32 = 3;

/// Why a call through the [`Cluster`] did not return a result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// resolve of an unbound triple (resolve_exception).
    NotBound,
    /// The callee answered with an exception (bind_exception, unbind_exception, ...).
    Refused(String),
    /// No answer: connection refused, timed out, broken.
    Unreachable(String),
}

/// The calls the election makes. Every call is bounded in time by the implementation.
pub trait Cluster {
    /// Name server `resolve`.
    fn resolve(&mut self, triple: &Triple) -> Result<Aor, Fault>;
    /// Name server `bind`, taking over the binding of object `replaces` if named.
    fn bind(&mut self, aor: &Aor, replaces: Option<&str>) -> Result<(), Fault>;
    /// Name server `unbind` of the binding only when `object_id` is the object bound.
    fn unbind(&mut self, triple: &Triple, object_id: &str) -> Result<(), Fault>;
    /// `__ping` on the object `target` names.
    fn ping(&mut self, target: &Aor) -> Result<(), Fault>;
    /// master_dispatcher `register_dispatcher(node_id)` on `master` (MS-FSCDFT 3.2.4.1).
    fn register_dispatcher(&mut self, master: &Aor, node_id: i64) -> Result<(), Fault>;
    /// master_dispatcher `list_dispatchers()` on `master` (ours): the registered node ids.
    fn list_dispatchers(&mut self, master: &Aor) -> Result<Vec<i64>, Fault>;
    /// dispatcher_node `get_load()` and `get_sessions()` on `node` (MS-FSCDFT 3.5.4.6-7).
    fn node_status(&mut self, node: &Aor) -> Result<(i64, Vec<i64>), Fault>;
    /// Starts or stops serving the master's objects, at once: a node activates
    /// session_factory before it binds it (MS-FSCDFT 3: "binds and activates"), so a racer
    /// that resolves the fresh binding finds it answering `__ping`; a demoted master stops
    /// answering it (3.3.5).
    fn activate(&mut self, serving: Serving);
}

/// The triple of `interface` under the dispatcher name.
pub fn triple(interface: (&str, &str)) -> Triple {
    Triple {
        name: DISPATCHER_NAME.to_owned(),
        interface_type: interface.0.to_owned(),
        interface_version: interface.1.to_owned(),
    }
}

/// This node's role.
// One value per node, never held in bulk: boxing the references would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not yet known: the name server could not be reached.
    Undecided,
    /// The master: serves session_factory and master_dispatcher.
    Master,
    /// A backup of the master whose session_factory is `factory`.
    Backup {
        /// The master's session_factory, pinged by the check-for-master timer.
        factory: Aor,
        /// The master_dispatcher registered with, once registered.
        registered: Option<Aor>,
    },
}

/// One registered dispatcher node in the master's state (MS-FSCDFT 3.1.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    /// Its dispatcher_node proxy, as resolved (3.1.4.1).
    pub proxy: Aor,
    /// Its load, from the last get_load.
    pub load: i64,
    /// The sessions it holds, from the last get_sessions (a new master rebuilds which node
    /// holds which session so).
    pub sessions: Vec<i64>,
}

/// The election state of one distributor.
#[derive(Debug)]
pub struct Election {
    node_id: i64,
    host: String,
    port: u16,
    role: Role,
    failures: u32,
    node_bound: bool,
    registry: BTreeMap<i64, NodeEntry>,
    /// Times this node became master (the log and `distributors` show it).
    terms: u64,
}

/// What a step changed, for the shell's log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing worth a line.
    None,
    /// Became master.
    BecameMaster,
    /// Registered as a backup with the master whose master_dispatcher is this.
    RegisteredWith(Aor),
    /// A master saw another object bound to session_factory and stepped down (3.3.5).
    Demoted(Aor),
}

impl Election {
    /// A node serving its objects at `host`:`port` (base port + 390).
    pub fn new(node_id: i64, host: &str, port: u16) -> Election {
        Election {
            node_id,
            host: host.to_owned(),
            port,
            role: Role::Undecided,
            failures: 0,
            node_bound: false,
            registry: BTreeMap::new(),
            terms: 0,
        }
    }

    /// The role now.
    pub fn role(&self) -> &Role {
        &self.role
    }

    /// Which of the master's objects to serve now.
    pub fn serving(&self) -> Serving {
        let master = self.role == Role::Master;
        Serving {
            session_factory: master,
            master_dispatcher: master,
        }
    }

    /// The master's registry (empty on a backup).
    pub fn registry(&self) -> &BTreeMap<i64, NodeEntry> {
        &self.registry
    }

    /// Pings failed in a row (a backup's).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    fn aor(&self, name: &str, interface: (&str, &str)) -> Aor {
        Aor {
            name: name.to_owned(),
            object_id: object_id(self.node_id, interface),
            host: self.host.clone(),
            port: self.port,
            interface_type: interface.0.to_owned(),
            interface_version: interface.1.to_owned(),
        }
    }

    fn my_factory(&self) -> Aor {
        self.aor(DISPATCHER_NAME, SESSION_FACTORY)
    }

    /// Start, and every tick of the check timer (check-for-master on a backup, 3.4.5;
    /// check-master-status on the master, 3.3.5; the election itself while undecided).
    pub fn on_check_timer(&mut self, c: &mut dyn Cluster) -> Change {
        // MS-FSCDFT 3.5.3: every distributor binds its dispatcher_node; again on every tick,
        // so a name server that came back empty has it (the same reference again is answered
        // without a write).
        let aor = self.aor(&dispatcher_node_name(self.node_id), DISPATCHER_NODE);
        self.node_bound = c.bind(&aor, None).is_ok();
        match self.role.clone() {
            Role::Undecided => self.elect(c),
            Role::Master => self.on_check_master_status(c),
            Role::Backup {
                factory,
                registered,
            } => self.on_check_for_master(c, factory, registered),
        }
    }

    /// MS-FSCDFT 3 and 3.4.3: locate the master; none, or a dead one, -> become master.
    fn elect(&mut self, c: &mut dyn Cluster) -> Change {
        match c.resolve(&triple(SESSION_FACTORY)) {
            Err(Fault::NotBound) => self.become_master(c),
            Err(_) => Change::None,
            // Our own binding from before a restart, not taken over: still ours.
            Ok(sf) if sf.object_id == self.my_factory().object_id => self.become_master(c),
            Ok(sf) => match c.ping(&sf) {
                Ok(()) => self.become_backup(c, sf),
                Err(_) => self.take_over(c, &sf),
            },
        }
    }

    /// MS-FSCDFT 3.4.5: unbind the dead master's session_factory by its object id, then become
    /// master. An unbind refused means another node moved first: follow whoever is bound.
    fn take_over(&mut self, c: &mut dyn Cluster, dead: &Aor) -> Change {
        match c.unbind(&triple(SESSION_FACTORY), &dead.object_id) {
            Ok(()) => self.become_master(c),
            Err(Fault::Refused(_)) => self.follow_winner(c),
            Err(_) => Change::None,
        }
    }

    /// Another node won a race (3.4.3): register with it if it answers; otherwise decide on
    /// the next tick.
    fn follow_winner(&mut self, c: &mut dyn Cluster) -> Change {
        match c.resolve(&triple(SESSION_FACTORY)) {
            Ok(sf) if sf.object_id != self.my_factory().object_id && c.ping(&sf).is_ok() => {
                self.become_backup(c, sf)
            }
            _ => {
                self.role = Role::Undecided;
                Change::None
            }
        }
    }

    /// MS-FSCDFT 3, 3.3.3, 3.1.3: bind session_factory, then master_dispatcher.
    fn become_master(&mut self, c: &mut dyn Cluster) -> Change {
        let sf = self.my_factory();
        let master = Serving {
            session_factory: true,
            master_dispatcher: true,
        };
        c.activate(master);
        match c.bind(&sf, None) {
            Ok(()) => {}
            Err(Fault::Refused(_)) => {
                c.activate(Serving::default());
                return self.follow_winner(c);
            }
            Err(_) => {
                c.activate(Serving::default());
                self.role = Role::Undecided;
                return Change::None;
            }
        }
        self.role = Role::Master;
        self.failures = 0;
        self.terms += 1;
        self.registry.clear();
        self.bind_master_dispatcher(c);
        // 3.1.4.1: the master registers too; it resolves and keeps its own proxy directly
        // (a failure is retried by the check-master-status tick).
        let _ = self.on_register_dispatcher(c, self.node_id);
        Change::BecameMaster
    }

    /// Binds master_dispatcher, taking over whatever object is bound there now (a dead
    /// master's: docs/nameserver.md "Take-over").
    fn bind_master_dispatcher(&mut self, c: &mut dyn Cluster) {
        let md = self.aor(DISPATCHER_NAME, MASTER_DISPATCHER);
        let replaces = match c.resolve(&triple(MASTER_DISPATCHER)) {
            Ok(old) => Some(old.object_id),
            Err(_) => None,
        };
        // A refusal (it changed between resolve and bind) is retried on the next tick.
        let _ = c.bind(&md, replaces.as_deref());
    }

    /// Becomes a backup of the master whose session_factory is `factory` and registers with it.
    fn become_backup(&mut self, c: &mut dyn Cluster, factory: Aor) -> Change {
        self.role = Role::Backup {
            factory,
            registered: None,
        };
        self.failures = 0;
        self.registry.clear();
        self.register(c)
    }

    /// MS-FSCDFT 3.2.3, 3.2.4.1: resolve master_dispatcher and call register_dispatcher.
    fn register(&mut self, c: &mut dyn Cluster) -> Change {
        let Ok(md) = c.resolve(&triple(MASTER_DISPATCHER)) else {
            return Change::None;
        };
        if c.register_dispatcher(&md, self.node_id).is_err() {
            return Change::None;
        }
        if let Role::Backup { registered, .. } = &mut self.role {
            *registered = Some(md.clone());
        }
        Change::RegisteredWith(md)
    }

    /// MS-FSCDFT 3.4.5, the backup's check-for-master timer.
    fn on_check_for_master(
        &mut self,
        c: &mut dyn Cluster,
        factory: Aor,
        registered: Option<Aor>,
    ) -> Change {
        if c.ping(&factory).is_ok() {
            self.failures = 0;
            return match registered {
                None => self.register(c),
                // A master that dropped us (or lost its list) gets us again.
                Some(md) => match c.list_dispatchers(&md) {
                    Ok(ids) if !ids.contains(&self.node_id) => self.register(c),
                    Ok(_) => Change::None,
                    Err(_) => self.register(c),
                },
            };
        }
        self.failures = self.failures.saturating_add(1);
        if self.failures < PING_FAILURES {
            return Change::None;
        }
        // Three in a row: resolve again, in case another backup is master already.
        match c.resolve(&triple(SESSION_FACTORY)) {
            Err(Fault::NotBound) => self.become_master(c),
            Err(_) => Change::None,
            Ok(sf) if sf.object_id == self.my_factory().object_id => self.become_master(c),
            Ok(sf) => match c.ping(&sf) {
                Ok(()) => self.become_backup(c, sf),
                Err(_) => self.take_over(c, &sf),
            },
        }
    }

    /// MS-FSCDFT 3.3.5, the master's check-master-status timer; then the registry is refreshed
    /// (get_load and get_sessions of every registered node; one that does not answer is
    /// dropped, and registers again when it sees itself missing).
    fn on_check_master_status(&mut self, c: &mut dyn Cluster) -> Change {
        let mine = self.my_factory();
        match c.resolve(&triple(SESSION_FACTORY)) {
            Ok(sf) if sf.object_id == mine.object_id => {
                if c.resolve(&triple(MASTER_DISPATCHER)).map(|md| md.object_id)
                    != Ok(object_id(self.node_id, MASTER_DISPATCHER))
                {
                    self.bind_master_dispatcher(c);
                }
            }
            Ok(other) => {
                c.activate(Serving::default());
                self.role = Role::Backup {
                    factory: other.clone(),
                    registered: None,
                };
                self.registry.clear();
                self.failures = 0;
                let _ = self.register(c);
                return Change::Demoted(other);
            }
            // The name server came back empty: bind again (ours; the spec is silent).
            Err(Fault::NotBound) => {
                if c.bind(&mine, None).is_ok() {
                    self.bind_master_dispatcher(c);
                }
            }
            // An unreachable name server demotes no one.
            Err(_) => {}
        }
        self.refresh_registry(c);
        if !self.registry.contains_key(&self.node_id) {
            let _ = self.on_register_dispatcher(c, self.node_id);
        }
        Change::None
    }

    fn refresh_registry(&mut self, c: &mut dyn Cluster) {
        let mut dead = Vec::new();
        for (id, entry) in self.registry.iter_mut() {
            match c.node_status(&entry.proxy) {
                Ok((load, sessions)) => {
                    entry.load = load;
                    entry.sessions = sessions;
                }
                Err(_) => dead.push(*id),
            }
        }
        for id in dead {
            self.registry.remove(&id);
        }
    }

    /// master_dispatcher `register_dispatcher(node_id)` (MS-FSCDFT 3.1.4.1): resolve the
    /// node's dispatcher_node proxy and keep it. Ok(false) when this node is not the master.
    pub fn on_register_dispatcher(
        &mut self,
        c: &mut dyn Cluster,
        node_id: i64,
    ) -> Result<bool, Fault> {
        if self.role != Role::Master {
            return Ok(false);
        }
        let t = Triple {
            name: dispatcher_node_name(node_id),
            interface_type: DISPATCHER_NODE.0.to_owned(),
            interface_version: DISPATCHER_NODE.1.to_owned(),
        };
        let proxy = c.resolve(&t)?;
        let (load, sessions) = c.node_status(&proxy).unwrap_or((0, Vec::new()));
        self.registry.insert(
            node_id,
            NodeEntry {
                proxy,
                load,
                sessions,
            },
        );
        Ok(true)
    }

    /// The node holding session `id`, from the registry (MS-FSCDFT 3.6).
    pub fn holder_of(&self, id: i64) -> Option<&NodeEntry> {
        self.registry.values().find(|e| e.sessions.contains(&id))
    }

    /// The registered nodes in the order a new session tries them (MS-FSCDFT 3.6): least load
    /// first, then fewest sessions, then node id.
    pub fn by_load(&self) -> Vec<(i64, Aor)> {
        let mut v: Vec<_> = self.registry.iter().collect();
        v.sort_by_key(|(id, e)| (e.load, e.sessions.len(), **id));
        v.into_iter()
            .map(|(id, e)| (*id, e.proxy.clone()))
            .collect()
    }

    /// Records that node `node_id` now holds session `id` (after a forwarded create), so the
    /// next pick sees it before the next refresh.
    pub fn note_session(&mut self, node_id: i64, id: i64, held: bool) {
        for (n, e) in self.registry.iter_mut() {
            e.sessions.retain(|&s| s != id);
            if *n == node_id && held {
                e.sessions.push(id);
            }
        }
    }

    /// Whether the last bind of this node's dispatcher_node succeeded.
    pub fn node_bound(&self) -> bool {
        self.node_bound
    }

    /// Times this node became master.
    pub fn terms(&self) -> u64 {
        self.terms
    }
}
