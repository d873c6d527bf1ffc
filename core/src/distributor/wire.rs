//! The distributor's served objects on the wire (docs/distributor.md): requests in the name
//! server's shape (`object`, `method`, `id`, `args`; docs/nameserver.md), `object` naming one
//! of this node's objects, and the Cheetah entities of MS-FSCDFT 2.2 in our encoding.
//!
//! Requests the node answers from its own state (dispatcher_node, 3.5.4; `__ping`) are
//! answered here; those that need the cluster (register_dispatcher, 3.1.4.1, which resolves a
//! proxy; the session_factory calls the master forwards, 3.6) come back as
//! [`Handled::Forward`] for the shell to carry out off its event loop.

use crate::frame;
use crate::marshal::{dict_get, Limits, Value};
use crate::nameserver::{Answer, Aor, Exception, Raised, Reply, MAX_FIELD_LEN};

use super::feed::{self, MAX_SESSION_REQUEST};
use super::{
    object_id, DispatcherNode, Outcome, DISPATCHER_NODE, MASTER_DISPATCHER, NODE_ALIAS,
    SESSION_FACTORY,
};

/// Largest body of a request to any object but a session (a few short strings and a
/// guarantee_set); a session's may reach [`MAX_SESSION_REQUEST`].
pub const MAX_REQUEST: usize = 64 << 10;

/// The limits a distributor's frames are cut and decoded with: a session's request is the
/// largest; [`DispatcherNode::handle_frame`] holds the others to [`MAX_REQUEST`].
pub fn frame_limits() -> Limits {
    Limits {
        max_size: MAX_SESSION_REQUEST,
        ..Limits::default()
    }
}

/// The Cheetah checksum of every entity of MS-FSCDFT 2.2.
pub const CHEETAH_CHECKSUM: i64 = -1_479_218_033;
/// Cheetah type identifier of cht::core::guarantee (MS-FSCDFT 2.2).
pub const GUARANTEE_TYPE: i64 = 3;
/// Cheetah type identifier of cht::core::feeding_priority (MS-FSCDFT 2.2).
pub const FEEDING_PRIORITY_TYPE: i64 = 7;
/// Cheetah type identifier of cht::core::guarantee_set (MS-FSCDFT 2.2).
pub const GUARANTEE_SET_TYPE: i64 = 9;
/// Most guarantees a guarantee_set may carry on the wire.
pub const MAX_GUARANTEES: usize = 64;

/// One element of a guarantee_set (MS-FSCDFT 2.2.1, 2.2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guarantee {
    /// A bare cht::core::guarantee.
    Plain,
    /// cht::core::feeding_priority with its priority attribute.
    FeedingPriority(i64),
}

/// cht::core::guarantee_set (MS-FSCDFT 2.2.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GuaranteeSet(pub Vec<Guarantee>);

impl GuaranteeSet {
    /// Our encoding: `{"type": 9, "checksum": -1479218033, "guarantees": [entity...]}`, each
    /// entity `{"type": 7, "checksum": -1479218033, "priority": P}` (or type 3 without
    /// attributes).
    pub fn to_value(&self) -> Value<'static> {
        let k = |k: &'static str| Value::bytes(k.as_bytes());
        let entity = |t: i64| {
            vec![
                (k("type"), Value::int(t)),
                (k("checksum"), Value::int(CHEETAH_CHECKSUM)),
            ]
        };
        let items = self
            .0
            .iter()
            .map(|g| match g {
                Guarantee::Plain => Value::Dict(entity(GUARANTEE_TYPE)),
                Guarantee::FeedingPriority(p) => {
                    let mut d = entity(FEEDING_PRIORITY_TYPE);
                    d.push((k("priority"), Value::int(*p)));
                    Value::Dict(d)
                }
            })
            .collect();
        let mut d = entity(GUARANTEE_SET_TYPE);
        d.push((k("guarantees"), Value::List(items)));
        Value::Dict(d)
    }

    /// Reads our encoding; a wrong type identifier or checksum is a malformed argument.
    pub fn from_value(v: &Value<'_>, at: &str) -> Result<GuaranteeSet, String> {
        let f = Args::of(v, at)?;
        f.entity(GUARANTEE_SET_TYPE)?;
        let Value::List(items) = f.req("guarantees")? else {
            return Err(format!("field {at}.guarantees: expected list"));
        };
        if items.len() > MAX_GUARANTEES {
            return Err(format!(
                "field {at}.guarantees: {} entities, over the limit of {MAX_GUARANTEES}",
                items.len()
            ));
        }
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let g = Args::of(item, &format!("{at}.guarantees[{i}]"))?;
            match g.int("type")? {
                GUARANTEE_TYPE => {
                    g.entity(GUARANTEE_TYPE)?;
                    out.push(Guarantee::Plain);
                }
                FEEDING_PRIORITY_TYPE => {
                    g.entity(FEEDING_PRIORITY_TYPE)?;
                    out.push(Guarantee::FeedingPriority(g.int("priority")?));
                }
                t => return Err(format!("field {}.type: {t} is not a guarantee", g.at)),
            }
        }
        Ok(GuaranteeSet(out))
    }

    /// What we support (MS-FSCDFT 2.2.2, 2.2.5, 3.5.4.1): no guarantee, or exactly one
    /// feeding_priority, its priority and the `priority` argument both 0.
    pub fn check_supported(&self, priority: i64) -> Result<(), Raised> {
        let ok = priority == 0 && matches!(self.0.as_slice(), [] | [Guarantee::FeedingPriority(0)]);
        if ok {
            return Ok(());
        }
        Err(Raised {
            exception: Exception::UnsupportedGuaranteeSet,
            what: format!(
                "supported: no guarantee or one feeding_priority of 0, and priority 0; got {:?} and priority {priority}",
                self.0
            ),
        })
    }
}

/// The arguments of create, recreate (MS-FSCDFT 3.5.4.2-3) and create_session (3.5.4.1, whose
/// session is never external).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSpec {
    /// The session id (chosen by the master for the session_factory create it forwards).
    pub id: i64,
    /// The content collection.
    pub collection: String,
    /// The guarantees.
    pub guarantees: GuaranteeSet,
    /// Must be 0.
    pub priority: i64,
    /// Serve it on base port + 391 instead of + 390.
    pub external_client: bool,
}

impl SessionSpec {
    /// The `args` dict of a create or recreate call.
    pub fn to_args(&self) -> Value<'static> {
        let k = |k: &'static str| Value::bytes(k.as_bytes());
        Value::Dict(vec![
            (k("id"), Value::int(self.id)),
            (
                k("collection"),
                Value::owned_bytes(self.collection.as_bytes().to_vec()),
            ),
            (k("guarantees"), self.guarantees.to_value()),
            (k("priority"), Value::int(self.priority)),
            (k("external_client"), Value::Bool(self.external_client)),
        ])
    }

    fn read(a: &Args<'_, '_>, with_id: bool) -> Result<SessionSpec, String> {
        Ok(SessionSpec {
            id: if with_id { a.int("id")? } else { 0 },
            collection: a.string("collection")?,
            guarantees: GuaranteeSet::from_value(a.req("guarantees")?, "args.guarantees")?,
            priority: a.int("priority")?,
            external_client: match a.get("external_client") {
                None => false,
                Some(_) => a.bool("external_client")?,
            },
        })
    }
}

/// A call only the master can carry out, or one that needs the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterCall {
    /// master_dispatcher `register_dispatcher(node_id)` (MS-FSCDFT 3.1.4.1).
    RegisterDispatcher(i64),
    /// master_dispatcher `list_dispatchers()` (ours): the registered nodes.
    ListDispatchers,
    /// session_factory `create(collection, guarantees, priority, external_client)` (ours,
    /// MS-FSCF's place): the master picks the id and the node (3.6).
    Create(SessionSpec),
    /// session_factory `recreate(id, ...)`: forwarded to the node holding the id (3.6).
    Recreate(SessionSpec),
    /// session_factory `destroy_session(id)`: forwarded to the node holding the id (3.6).
    DestroySession(i64),
}

/// What the shell does with a frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Handled {
    /// Send this answer (and close when it says so).
    Answer(Answer),
    /// Carry out `call` for the request `id` and send its reply.
    Forward {
        /// The request's id.
        id: i64,
        /// The call.
        call: MasterCall,
    },
    /// Apply a `feed` request to the index, and reply when its ops are durable.
    Feed(super::Feed),
}

/// Which of the master's objects this node serves now (MS-FSCDFT 3: only the master activates
/// session_factory and master_dispatcher; a demoted master stops, 3.3.5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Serving {
    /// session_factory answers (`__ping` included).
    pub session_factory: bool,
    /// master_dispatcher answers.
    pub master_dispatcher: bool,
}

impl DispatcherNode {
    /// Decodes one frame body addressed to this node's objects and answers it, or hands it
    /// back as a [`Handled::Forward`]. Broken or hostile input is answered with its exception
    /// and marked for closing.
    pub fn handle_frame(
        &mut self,
        body: &[u8],
        limits: &Limits,
        serving: Serving,
        role: &str,
    ) -> Handled {
        let frame = match frame::decode_body(body, limits) {
            Ok(f) => f,
            Err(e) => return closing(None, Exception::BadFrame, format!("undecodable frame: {e}")),
        };
        let top = Args {
            pairs: &frame.message,
            at: "request".into(),
        };
        let id = top.int("id").ok();
        let head = (|| -> Result<(i64, String, String, Args<'_, '_>), String> {
            Ok((
                top.int("id")?,
                top.string("object")?,
                top.string("method")?,
                Args::of(top.req("args")?, "args")?,
            ))
        })();
        let (id, object, method, args) = match head {
            Ok(h) => h,
            Err(why) => return closing(id, Exception::BadRequest, why),
        };
        let node = self.node_id();
        if let Some(session) = feed::session_of(&object, node) {
            return self.handle_session(id, session, &object, &method, top.req("args"));
        }
        if body.len() > MAX_REQUEST {
            return closing(
                Some(id),
                Exception::BadRequest,
                format!(
                    "a request of {} bytes to {object:?}: over the limit of {MAX_REQUEST}",
                    body.len()
                ),
            );
        }
        let which = [SESSION_FACTORY, MASTER_DISPATCHER, DISPATCHER_NODE]
            .into_iter()
            .find(|i| {
                object_id(node, *i) == object || (*i == DISPATCHER_NODE && object == NODE_ALIAS)
            });
        let served = match which {
            Some(i) if i == SESSION_FACTORY => serving.session_factory,
            Some(i) if i == MASTER_DISPATCHER => serving.master_dispatcher,
            Some(_) => true,
            None => false,
        };
        let Some(which) = which.filter(|_| served) else {
            return closing(
                Some(id),
                Exception::UnknownObject,
                format!("no object {object:?} is served here"),
            );
        };
        let unknown = || {
            closing(
                Some(id),
                Exception::UnknownMethod,
                format!("{} has no method {method:?}", which.0),
            )
        };
        let result = if method == "__ping" {
            Ok(Ok(Value::Bool(true)))
        } else if which == DISPATCHER_NODE {
            match self.dispatch_node(&method, &args, role) {
                Some(r) => r,
                None => return unknown(),
            }
        } else {
            let call = match (which == SESSION_FACTORY, method.as_str()) {
                (false, "register_dispatcher") => {
                    args.int("node_id").map(MasterCall::RegisterDispatcher)
                }
                (false, "list_dispatchers") => Ok(MasterCall::ListDispatchers),
                (true, "create") => SessionSpec::read(&args, false).map(MasterCall::Create),
                (true, "recreate") => SessionSpec::read(&args, true).map(MasterCall::Recreate),
                (true, "destroy_session") => args.session_id().map(MasterCall::DestroySession),
                _ => return unknown(),
            };
            match call {
                Ok(call) => return Handled::Forward { id, call },
                Err(why) => Err(why),
            }
        };
        match result {
            Ok(outcome) => Handled::Answer(Answer {
                reply: Reply {
                    id: Some(id),
                    outcome,
                },
                close: None,
            }),
            Err(why) => closing(Some(id), Exception::BadRequest, why),
        }
    }

    /// A request to session `session` (docs/distributor.md "Feeding sessions"): `feed`,
    /// `close`, `__ping`. An id this node does not hold is an unknown object.
    fn handle_session(
        &mut self,
        id: i64,
        session: Result<i64, ()>,
        object: &str,
        method: &str,
        args: Result<&Value<'_>, String>,
    ) -> Handled {
        let held = session.ok().filter(|s| self.session(*s).is_some());
        let Some(session) = held else {
            return closing(
                Some(id),
                Exception::UnknownObject,
                format!("no session {object:?} is held here"),
            );
        };
        let answer = |outcome| {
            Handled::Answer(Answer {
                reply: Reply {
                    id: Some(id),
                    outcome,
                },
                close: None,
            })
        };
        match method {
            "__ping" => answer(Ok(Value::Bool(true))),
            "close" => answer(Ok(self.on_close(session))),
            "feed" => match args.and_then(feed::read_ops) {
                Ok(ops) => Handled::Feed(self.on_feed(id, session, ops)),
                Err(why) => closing(Some(id), Exception::BadRequest, why),
            },
            _ => closing(
                Some(id),
                Exception::UnknownMethod,
                format!("processing::session has no method {method:?}"),
            ),
        }
    }

    /// The dispatcher_node methods (MS-FSCDFT 3.5.4) and ours; None for an unknown method,
    /// Err for malformed arguments.
    fn dispatch_node(
        &mut self,
        method: &str,
        a: &Args<'_, '_>,
        role: &str,
    ) -> Option<Result<Outcome, String>> {
        Some(match method {
            "create_session" => SessionSpec::read(a, true).and_then(|spec| {
                let callback = match a.get("callback") {
                    None | Some(Value::None) => None,
                    Some(v) => {
                        Some(Aor::from_value(v, "args.callback").map_err(|e| e.to_string())?)
                    }
                };
                Ok(self.on_create_session(
                    &SessionSpec {
                        external_client: false,
                        ..spec
                    },
                    callback,
                ))
            }),
            "create" => SessionSpec::read(a, true).map(|s| self.on_create(&s)),
            "recreate" => SessionSpec::read(a, true).map(|s| self.on_recreate(&s)),
            "destroy_session" => a.session_id().map(|id| Ok(self.on_destroy_session(id))),
            "remove_sessions" => a
                .string("coll")
                .or_else(|_| a.string("collection"))
                .map(|c| Ok(self.on_remove_sessions(&c))),
            "get_sessions" => Ok(Ok(self.on_get_sessions())),
            "get_load" => Ok(Ok(self.on_get_load())),
            "add_collection" => a.string("collection").map(|c| self.on_add_collection(&c)),
            "get_status" => Ok(Ok(self.on_get_status(role))),
            _ => return None,
        })
    }
}

fn closing(id: Option<i64>, exception: Exception, what: String) -> Handled {
    Handled::Answer(Answer {
        reply: Reply {
            id,
            outcome: Err(Raised {
                exception,
                what: what.clone(),
            }),
        },
        close: Some(what),
    })
}

/// Typed access to one dict; errors name `at.key`.
pub(crate) struct Args<'d, 'a> {
    pairs: &'d [(Value<'a>, Value<'a>)],
    at: String,
}

impl<'d, 'a> Args<'d, 'a> {
    pub(crate) fn of(v: &'d Value<'a>, at: &str) -> Result<Self, String> {
        match v {
            Value::Dict(d) => Ok(Args {
                pairs: d,
                at: at.to_owned(),
            }),
            other => Err(format!(
                "field {at}: expected dict, found {}",
                other.type_name()
            )),
        }
    }

    fn path(&self, key: &str) -> String {
        if self.at == "request" {
            key.to_owned()
        } else {
            format!("{}.{key}", self.at)
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'d Value<'a>> {
        dict_get(self.pairs, key.as_bytes())
    }

    pub(crate) fn req(&self, key: &str) -> Result<&'d Value<'a>, String> {
        self.get(key)
            .ok_or_else(|| format!("missing field {}", self.path(key)))
    }

    pub(crate) fn int(&self, key: &str) -> Result<i64, String> {
        match self.req(key)? {
            Value::Int(i, _) => Ok(*i),
            other => Err(format!(
                "field {}: expected int, found {}",
                self.path(key),
                other.type_name()
            )),
        }
    }

    fn bool(&self, key: &str) -> Result<bool, String> {
        match self.req(key)? {
            Value::Bool(b) => Ok(*b),
            Value::Int(i @ (0 | 1), _) => Ok(*i == 1),
            other => Err(format!(
                "field {}: expected bool, found {}",
                self.path(key),
                other.type_name()
            )),
        }
    }

    pub(crate) fn string(&self, key: &str) -> Result<String, String> {
        match self.req(key)? {
            Value::Bytes(b, _) if b.len() > MAX_FIELD_LEN => Err(format!(
                "field {}: {} bytes, over the limit of {MAX_FIELD_LEN}",
                self.path(key),
                b.len()
            )),
            Value::Bytes(b, _) => std::str::from_utf8(b)
                .map(str::to_owned)
                .map_err(|_| format!("field {}: not UTF-8", self.path(key))),
            other => Err(format!(
                "field {}: expected string, found {}",
                self.path(key),
                other.type_name()
            )),
        }
    }

    /// `id` of destroy_session: at least 0 (MS-FSCDFT 3.5.4.4).
    fn session_id(&self) -> Result<i64, String> {
        match self.int("id")? {
            id if id >= 0 => Ok(id),
            id => Err(format!("field {}: {id} is below 0", self.path("id"))),
        }
    }

    /// Checks the Cheetah type identifier and checksum of an entity (MS-FSCDFT 2.2).
    fn entity(&self, type_id: i64) -> Result<(), String> {
        let t = self.int("type")?;
        let c = self.int("checksum")?;
        if t != type_id {
            return Err(format!(
                "field {}: {t}, expected {type_id}",
                self.path("type")
            ));
        }
        if c != CHEETAH_CHECKSUM {
            return Err(format!(
                "field {}: {c}, expected {CHEETAH_CHECKSUM}",
                self.path("checksum")
            ));
        }
        Ok(())
    }
}
