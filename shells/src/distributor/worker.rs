//! The distributor's worker thread: the election (`core::distributor::election`) on the check
//! timer's ticks, and the calls that need the cluster, over blocking connections each bounded
//! by the call timeout (why a thread: the module doc of `super`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crawlfleet_core::distributor::election::{Change, Cluster, Election, Fault, Role};
use crawlfleet_core::distributor::ids::SessionIds;
use crawlfleet_core::distributor::{MasterCall, Outcome, Serving, SessionSpec};
use crawlfleet_core::marshal::Value;
use crawlfleet_core::nameserver::{Aor, Exception, Raised, Reply, Triple};
use crawlfleet_net::{ConnId, Handle, Priority};
use crossbeam_channel::Receiver;
use log::{info, warn};

use super::Shared;
use crate::nsclient::{ClientError, NsClient};

/// What the worker needs to know.
pub(crate) struct Config {
    pub node_id: i64,
    pub host: String,
    pub port: u16,
    pub nameserver: SocketAddr,
    pub timeout: Duration,
}

/// A job for the worker.
pub(crate) enum Job {
    /// The check timer fired (or the distributor started).
    Tick,
    /// A request only the cluster can answer: reply on `conn` with `id`.
    Forward {
        conn: ConnId,
        id: i64,
        call: MasterCall,
    },
}

/// Answers a job the worker's full queue could not take.
pub(crate) fn busy(job: &Job, out: &mut Vec<u8>) {
    if let Job::Forward { id, .. } = job {
        raise(*id, Exception::Unavailable, "the distributor is busy").encode_frame(out);
    }
}

fn raise(id: i64, exception: Exception, what: &str) -> Reply {
    Reply {
        id: Some(id),
        outcome: Err(Raised {
            exception,
            what: what.to_owned(),
        }),
    }
}

/// Starts the worker thread.
pub(crate) fn spawn(
    cfg: Config,
    ids: SessionIds,
    shared: Arc<Mutex<Shared>>,
    handle: Handle,
    jobs: Receiver<Job>,
    tick_queued: Arc<AtomicBool>,
) -> Result<(), String> {
    let mut w = Worker {
        election: Election::new(cfg.node_id, &cfg.host, cfg.port),
        net: Net {
            nameserver: cfg.nameserver,
            timeout: cfg.timeout,
            ns: None,
            shared: Some(Arc::clone(&shared)),
        },
        cfg,
        ids,
        shared,
    };
    std::thread::Builder::new()
        .name("distributor-election".into())
        .spawn(move || {
            while let Ok(job) = jobs.recv() {
                match job {
                    Job::Tick => {
                        tick_queued.store(false, Ordering::Release);
                        w.tick();
                    }
                    Job::Forward { conn, id, call } => {
                        let reply = Reply {
                            id: Some(id),
                            outcome: w.forward(call),
                        };
                        let mut out = Vec::new();
                        reply.encode_frame(&mut out);
                        if handle.send(conn, Priority::Normal, out).is_err() {
                            return;
                        }
                    }
                }
            }
        })
        .map(drop)
        .map_err(|e| format!("cannot start the election thread: {e}"))
}

struct Worker {
    cfg: Config,
    election: Election,
    net: Net,
    ids: SessionIds,
    shared: Arc<Mutex<Shared>>,
}

impl Worker {
    fn tick(&mut self) {
        let started = Instant::now();
        let change = self.election.on_check_timer(&mut self.net);
        let node = self.cfg.node_id;
        match &change {
            Change::None => {}
            Change::BecameMaster => info!(
                "distributor {node}: became master (term {})",
                self.election.terms()
            ),
            Change::RegisteredWith(md) => {
                info!("distributor {node}: registered as a backup with {}", md.object_id)
            }
            Change::Demoted(sf) => warn!(
                "distributor {node}: {} is bound as session_factory; no longer master (MS-FSCDFT 3.3.5)",
                sf.object_id
            ),
        }
        if !self.election.node_bound() {
            crawlfleet_core::warn_limited!(
                "distributor-bind",
                "distributor {node}: cannot bind its dispatcher_node at the name server {}",
                self.cfg.nameserver
            );
        }
        if let Ok(mut sh) = self.shared.lock() {
            sh.serving = self.election.serving();
            sh.role = match self.election.role() {
                Role::Master => "master",
                Role::Backup { .. } => "backup",
                Role::Undecided => "undecided",
            };
        }
        log::debug!("distributor {node}: tick took {:?}", started.elapsed());
    }

    fn forward(&mut self, call: MasterCall) -> Outcome {
        if self.election.role() != &Role::Master {
            return Err(unavailable("this distributor is not the master"));
        }
        match call {
            MasterCall::RegisterDispatcher(n) => {
                match self.election.on_register_dispatcher(&mut self.net, n) {
                    Ok(true) => Ok(Value::None),
                    Ok(false) => Err(unavailable("this distributor is not the master")),
                    Err(f) => Err(unavailable(&format!(
                        "cannot resolve the dispatcher_node of {n}: {f:?}"
                    ))),
                }
            }
            MasterCall::ListDispatchers => Ok(self.list()),
            MasterCall::Create(mut spec) => {
                spec.id = self
                    .ids
                    .next_id()
                    .map_err(|e| raised(Exception::Storage, e.to_string()))?;
                self.place(&spec, "create")
            }
            MasterCall::Recreate(spec) => {
                // 3.6: to the node holding the session; a new master knows it from
                // get_sessions. An id no node holds is created anew.
                let holder = self.election.holder_of(spec.id).map(|e| e.proxy.clone());
                if let Some(proxy) = holder {
                    if let Ok(v) = self.net.call(&proxy, "recreate", spec.to_args()) {
                        return Ok(v);
                    }
                }
                self.place(&spec, "recreate")
            }
            MasterCall::DestroySession(id) => {
                let holder = self
                    .election
                    .registry()
                    .iter()
                    .find(|(_, e)| e.sessions.contains(&id))
                    .map(|(n, e)| (*n, e.proxy.clone()));
                if let Some((n, proxy)) = holder {
                    let args = Value::Dict(vec![(Value::bytes(b"id"), Value::int(id))]);
                    self.net
                        .call(&proxy, "destroy_session", args)
                        .map_err(|e| unavailable(&format!("distributor {n}: {e}")))?;
                    self.election.note_session(n, id, false);
                }
                Ok(Value::None)
            }
        }
    }

    /// Places a session on the least loaded registered node that holds its collection (3.6).
    fn place(&mut self, spec: &SessionSpec, method: &str) -> Outcome {
        let mut last = unavailable("no registered distributor answered");
        for (n, proxy) in self.election.by_load() {
            match self.net.call(&proxy, method, spec.to_args()) {
                Ok(v) => {
                    self.election.note_session(n, spec.id, true);
                    return Ok(v);
                }
                Err(ClientError::Raised(r)) if r.exception == Exception::UnknownCollection => {
                    last = r
                }
                Err(ClientError::Raised(r)) => return Err(r),
                Err(_) => {}
            }
        }
        Err(last)
    }

    fn list(&self) -> Value<'static> {
        let k = |s: &'static str| Value::bytes(s.as_bytes());
        let s = |v: &str| Value::owned_bytes(v.as_bytes().to_vec());
        Value::List(
            self.election
                .registry()
                .iter()
                .map(|(n, e)| {
                    Value::Dict(vec![
                        (k("node_id"), Value::int(*n)),
                        (k("object_id"), s(&e.proxy.object_id)),
                        (k("host"), s(&e.proxy.host)),
                        (k("port"), Value::int(e.proxy.port.into())),
                        (k("load"), Value::int(e.load)),
                        (
                            k("sessions"),
                            Value::List(e.sessions.iter().map(|&i| Value::int(i)).collect()),
                        ),
                    ])
                })
                .collect(),
        )
    }
}

fn raised(exception: Exception, what: String) -> Raised {
    Raised { exception, what }
}

fn unavailable(what: &str) -> Raised {
    raised(Exception::Unavailable, what.to_owned())
}

/// The cluster over the network: one kept connection to the name server, a fresh one per call
/// to another distributor's object (a dead peer shows as a refused or timed-out connection).
pub(crate) struct Net {
    nameserver: SocketAddr,
    timeout: Duration,
    ns: Option<NsClient>,
    /// What the frame-answering thread serves (None for `crawlfleet distributors`).
    shared: Option<Arc<Mutex<Shared>>>,
}

fn fault(e: ClientError) -> Fault {
    match e {
        ClientError::Raised(r) if r.exception == Exception::Resolve => Fault::NotBound,
        ClientError::Raised(r) => Fault::Refused(r.to_string()),
        other => Fault::Unreachable(other.to_string()),
    }
}

impl Net {
    /// A client for `crawlfleet distributors`.
    pub(crate) fn for_status(nameserver: SocketAddr, timeout: Duration) -> Net {
        Net {
            nameserver,
            timeout,
            ns: None,
            shared: None,
        }
    }

    fn ns<T>(
        &mut self,
        f: impl FnOnce(&mut NsClient) -> Result<T, ClientError>,
    ) -> Result<T, Fault> {
        if self.ns.is_none() {
            let c = NsClient::connect(self.nameserver, self.timeout).map_err(fault)?;
            self.ns = Some(c);
        }
        let Some(c) = self.ns.as_mut() else {
            return Err(Fault::Unreachable("no connection".into()));
        };
        let r = f(c);
        if matches!(r, Err(ClientError::Io(_) | ClientError::Protocol(_))) {
            // Out of step or gone: the next call reconnects.
            self.ns = None;
        }
        r.map_err(fault)
    }

    /// Calls `method` on the object `target` names.
    pub(crate) fn call(
        &mut self,
        target: &Aor,
        method: &str,
        args: Value<'static>,
    ) -> Result<Value<'static>, ClientError> {
        let addr = (target.host.as_str(), target.port)
            .to_socket_addrs()
            .map_err(ClientError::Io)?
            .next()
            .ok_or_else(|| ClientError::Protocol(format!("{} has no address", target.host)))?;
        let mut c = NsClient::connect(addr, self.timeout)?;
        c.call_method(&target.object_id, method, args)
    }
}

fn empty() -> Value<'static> {
    Value::Dict(Vec::new())
}

impl Cluster for Net {
    fn activate(&mut self, serving: Serving) {
        if let Some(Ok(mut sh)) = self.shared.as_ref().map(|s| s.lock()) {
            sh.serving = serving;
        }
    }

    fn resolve(&mut self, triple: &Triple) -> Result<Aor, Fault> {
        self.ns(|c| c.resolve(triple.clone()))
    }

    fn bind(&mut self, aor: &Aor, replaces: Option<&str>) -> Result<(), Fault> {
        self.ns(|c| c.bind(aor.clone(), replaces.map(str::to_owned)))
    }

    fn unbind(&mut self, triple: &Triple, object_id: &str) -> Result<(), Fault> {
        self.ns(|c| c.unbind(triple.clone(), Some(object_id.to_owned())))
            .map(drop)
    }

    fn ping(&mut self, target: &Aor) -> Result<(), Fault> {
        self.call(target, "__ping", empty())
            .map(drop)
            .map_err(fault)
    }

    fn register_dispatcher(&mut self, master: &Aor, node_id: i64) -> Result<(), Fault> {
        let args = Value::Dict(vec![(Value::bytes(b"node_id"), Value::int(node_id))]);
        self.call(master, "register_dispatcher", args)
            .map(drop)
            .map_err(fault)
    }

    fn list_dispatchers(&mut self, master: &Aor) -> Result<Vec<i64>, Fault> {
        match self
            .call(master, "list_dispatchers", empty())
            .map_err(fault)?
        {
            Value::List(items) => Ok(items
                .iter()
                .filter_map(|d| match d {
                    Value::Dict(d) => match crawlfleet_core::marshal::dict_get(d, b"node_id") {
                        Some(Value::Int(i, _)) => Some(*i),
                        _ => None,
                    },
                    _ => None,
                })
                .collect()),
            other => Err(Fault::Refused(format!(
                "list_dispatchers returned a {}",
                other.type_name()
            ))),
        }
    }

    fn node_status(&mut self, node: &Aor) -> Result<(i64, Vec<i64>), Fault> {
        let load = match self.call(node, "get_load", empty()).map_err(fault)? {
            Value::Int(i, _) => i,
            other => {
                return Err(Fault::Refused(format!(
                    "get_load returned a {}",
                    other.type_name()
                )))
            }
        };
        let sessions = match self.call(node, "get_sessions", empty()).map_err(fault)? {
            Value::List(items) => items
                .iter()
                .filter_map(|v| match v {
                    Value::Int(i, _) => Some(*i),
                    _ => None,
                })
                .collect(),
            other => {
                return Err(Fault::Refused(format!(
                    "get_sessions returned a {}",
                    other.type_name()
                )))
            }
        };
        Ok((load, sessions))
    }
}
