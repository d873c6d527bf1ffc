//! The name server's state machine: bindings of abstract object references keyed by
//! (name, interface_type, interface_version), the handlers of its methods, and the file that
//! keeps the bindings across a restart. No sockets: `shells/src/nameserver.rs` feeds it frames.
//!
//! MS-FSMW (the middleware) is not among our specs, so the methods and their rules are ours,
//! shaped by what MS-FSCDFT asks of a name server (docs/nameserver.md has the wire format):
//!
//! - A binding is keyed by the triple: session_factory (3.3.3) and master_dispatcher (3.1.3)
//!   are both bound under `esp/subsystems/processing/dispatcher`.
//! - resolve of an unbound triple raises resolve_exception (3.4.3).
//! - The name server does not probe objects: a binding is live until it is unbound or replaced.
//!   bind of a triple bound to another object raises bind_exception, unless the caller names
//!   that object's id in `replaces` (a take-over: compare and swap). Binding the same object id
//!   again updates its host and port. A distributor taking over a dead master unbinds the dead
//!   session_factory by its object id, then binds (3.4.5); of two racing, one unbind or the
//!   other's bind fails, so exactly one becomes master.
//! - unbind may name the object id it expects to remove; when another object is bound there
//!   it raises unbind_exception, so a late racer cannot unbind the winner's fresh binding.
//!
//! A change is made durable (the whole table rewritten with [`crate::recordlog`]'s crash-safe
//! replacement: a restart finds the old table or the new one) before it is answered; when that
//! fails, the change is undone and storage_exception raised.

mod wire;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use crate::marshal::{Limits, Value};
use crate::recordlog::{self, Cur};

pub use wire::{
    Aor, Call, Exception, Raised, Reply, Request, Triple, WireError, MAX_FIELD_LEN,
    NAMESERVER_OBJECT,
};

/// Most bindings a name server holds; a bind past it raises bind_exception. A distributor
/// binds three objects at most (MS-FSCDFT 3.1.3, 3.3.3, 3.5.3), so this is far beyond any
/// cluster; it bounds what a hostile client can make the server hold (at most 5 KiB a
/// binding) and rewrite on every change.
pub const MAX_BINDINGS: usize = 4096;

/// The file in the data directory that holds the bindings.
pub const BINDINGS_FILE: &str = "bindings";

/// Version byte at the start of every bindings record.
const RECORD_V1: u8 = 1;

/// Longest bindings record: six fields at most [`MAX_FIELD_LEN`] with their prefixes.
const MAX_RECORD: usize = 1 + 6 * (4 + MAX_FIELD_LEN);

/// The bindings and the file that keeps them.
#[derive(Debug)]
pub struct NameServer {
    bindings: BTreeMap<Triple, Aor>,
    /// Where the bindings are kept; None for a name server that forgets (tests).
    file: Option<PathBuf>,
    max_bindings: usize,
}

/// What opening a data directory found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// Bindings read.
    pub bindings: usize,
    /// Why reading stopped before the end of the file, if it did (a damaged file: the
    /// replacement is crash-safe, so no crash leaves one).
    pub damaged: Option<&'static str>,
}

/// What the shell does with a frame's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// The reply to send.
    pub reply: Reply,
    /// The input was hostile or broken: log `why`, send the reply, then close the connection.
    pub close: Option<String>,
}

impl NameServer {
    /// A name server keeping nothing on disk.
    pub fn in_memory() -> NameServer {
        NameServer {
            bindings: BTreeMap::new(),
            file: None,
            max_bindings: MAX_BINDINGS,
        }
    }

    /// Opens the bindings kept in `dir` (none when the file does not exist yet). The caller
    /// holds the directory's lock.
    pub fn open(dir: &Path) -> io::Result<(NameServer, Recovery)> {
        let path = dir.join(BINDINGS_FILE);
        let mut ns = NameServer {
            file: Some(path.clone()),
            ..NameServer::in_memory()
        };
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok((
                    ns,
                    Recovery {
                        bindings: 0,
                        damaged: None,
                    },
                ))
            }
            Err(e) => return Err(e),
        };
        let mut remaining = file.metadata()?.len();
        let mut r = BufReader::new(file);
        let mut payload = Vec::new();
        let mut damaged = None;
        loop {
            match recordlog::read_next(&mut r, remaining, MAX_RECORD, &mut payload)? {
                recordlog::Next::End => break,
                recordlog::Next::Torn(why) => {
                    damaged = Some(why);
                    break;
                }
                recordlog::Next::Record => {
                    remaining -= (recordlog::HEADER + payload.len()) as u64;
                    match read_record(&payload) {
                        Some(aor) => {
                            ns.bindings.insert(aor.triple(), aor);
                        }
                        None => {
                            damaged = Some("bindings record malformed");
                            break;
                        }
                    }
                }
            }
        }
        let bindings = ns.bindings.len();
        Ok((ns, Recovery { bindings, damaged }))
    }

    /// Caps the number of bindings (tests; [`MAX_BINDINGS`] otherwise).
    pub fn set_max_bindings(&mut self, max: usize) {
        self.max_bindings = max;
    }

    /// Every binding, ordered by triple.
    pub fn bindings(&self) -> impl Iterator<Item = &Aor> {
        self.bindings.values()
    }

    /// Decodes one frame body and answers it. A body that is not a request, or a request for
    /// a method or object that does not exist, is answered with the exception and marked for
    /// closing; a request refused by the rules (resolve of an unbound triple, ...) is not.
    pub fn handle_frame(&mut self, body: &[u8], limits: &Limits) -> Answer {
        let request = crate::frame::decode_body(body, limits)
            .map_err(|e| (None, WireError::Frame(e.to_string())))
            .and_then(|f| Request::from_dict(&f.message));
        match request {
            Ok(req) => {
                let close = self.check_object(&req).err();
                let reply = match &close {
                    Some(raised) => Reply {
                        id: Some(req.id),
                        outcome: Err(raised.clone()),
                    },
                    None => self.handle(&req),
                };
                Answer {
                    reply,
                    close: close.map(|r| r.to_string()),
                }
            }
            Err((id, e)) => Answer {
                reply: Reply {
                    id,
                    outcome: Err(Raised {
                        exception: e.exception(),
                        what: e.to_string(),
                    }),
                },
                close: Some(e.to_string()),
            },
        }
    }

    /// The name server serves one object, its own: `__ping` and its methods go to
    /// [`NAMESERVER_OBJECT`].
    fn check_object(&self, req: &Request) -> Result<(), Raised> {
        if req.object == NAMESERVER_OBJECT {
            return Ok(());
        }
        Err(Raised {
            exception: Exception::UnknownObject,
            what: format!("no object {:?} is served here", req.object),
        })
    }

    /// Answers a decoded request addressed to the name server.
    pub fn handle(&mut self, req: &Request) -> Reply {
        let outcome = match &req.call {
            Call::Bind { aor, replaces } => self.on_bind(aor, replaces.as_deref()),
            Call::Resolve(t) => self.on_resolve(t),
            Call::Unbind { triple, object_id } => self.on_unbind(triple, object_id.as_deref()),
            Call::List => Ok(self.on_list()),
            Call::Ping => Ok(self.on___ping()),
        };
        Reply {
            id: Some(req.id),
            outcome,
        }
    }

    /// `bind(aor, replaces)`: binds `aor` under its triple (MS-FSCDFT 3.1.3, 3.3.3, 3.5.3).
    /// A triple bound to another object raises bind_exception unless `replaces` names that
    /// object; the same object binding again updates the reference.
    pub fn on_bind(&mut self, aor: &Aor, replaces: Option<&str>) -> Result<Value<'static>, Raised> {
        let triple = aor.triple();
        let previous = self.bindings.get(&triple).cloned();
        match &previous {
            Some(old) if old.object_id != aor.object_id && replaces != Some(&old.object_id) => {
                return Err(raise(
                    Exception::Bind,
                    format!("{triple} is bound to object {:?}", old.object_id),
                ));
            }
            // The same reference again (a server re-binding by itself): nothing to write.
            Some(old) if old == aor => return Ok(Value::None),
            Some(_) => {}
            None if self.bindings.len() >= self.max_bindings => {
                return Err(raise(
                    Exception::Bind,
                    format!(
                        "the name server holds {} bindings, its limit",
                        self.max_bindings
                    ),
                ));
            }
            None => {}
        }
        self.bindings.insert(triple.clone(), aor.clone());
        if let Err(e) = self.persist() {
            match previous {
                Some(old) => self.bindings.insert(triple, old),
                None => self.bindings.remove(&triple),
            };
            return Err(raise(
                Exception::Storage,
                format!("cannot keep the binding: {e}"),
            ));
        }
        Ok(Value::None)
    }

    /// `resolve(name, interface_type, interface_version)`: the bound reference, or
    /// resolve_exception (MS-FSCDFT 3.2.3, 3.4.3).
    pub fn on_resolve(&self, triple: &Triple) -> Result<Value<'static>, Raised> {
        match self.bindings.get(triple) {
            Some(aor) => Ok(aor.to_value()),
            None => Err(raise(Exception::Resolve, format!("{triple} is not bound"))),
        }
    }

    /// `unbind(name, interface_type, interface_version, object_id)`: removes the binding and
    /// returns it (MS-FSCDFT 3.4.5). When `object_id` is given and another object is bound
    /// there, nothing is removed and unbind_exception raised.
    pub fn on_unbind(
        &mut self,
        triple: &Triple,
        object_id: Option<&str>,
    ) -> Result<Value<'static>, Raised> {
        let Some(bound) = self.bindings.get(triple) else {
            return Err(raise(Exception::Unbind, format!("{triple} is not bound")));
        };
        if let Some(expected) = object_id {
            if bound.object_id != expected {
                return Err(raise(
                    Exception::Unbind,
                    format!(
                        "{triple} is bound to object {:?}, not {expected:?}",
                        bound.object_id
                    ),
                ));
            }
        }
        let Some(removed) = self.bindings.remove(triple) else {
            return Err(raise(Exception::Unbind, format!("{triple} is not bound")));
        };
        if let Err(e) = self.persist() {
            self.bindings.insert(triple.clone(), removed);
            return Err(raise(
                Exception::Storage,
                format!("cannot keep the unbind: {e}"),
            ));
        }
        Ok(removed.to_value())
    }

    /// `list()`: every binding, ordered by triple.
    pub fn on_list(&self) -> Value<'static> {
        Value::List(self.bindings.values().map(Aor::to_value).collect())
    }

    /// `__ping()`: the object is alive (MS-FSCDFT 3.4.4 pings session_factory the same way).
    #[allow(non_snake_case)]
    pub fn on___ping(&self) -> Value<'static> {
        Value::Bool(true)
    }

    /// Rewrites the bindings file with the whole table, crash-safely.
    fn persist(&self) -> io::Result<()> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let mut out = Vec::new();
        for aor in self.bindings.values() {
            let start = recordlog::begin(&mut out);
            out.push(RECORD_V1);
            recordlog::put_bytes(&mut out, aor.name.as_bytes());
            recordlog::put_bytes(&mut out, aor.object_id.as_bytes());
            recordlog::put_bytes(&mut out, aor.host.as_bytes());
            out.extend_from_slice(&aor.port.to_le_bytes());
            recordlog::put_bytes(&mut out, aor.interface_type.as_bytes());
            recordlog::put_bytes(&mut out, aor.interface_version.as_bytes());
            recordlog::seal(&mut out, start);
        }
        recordlog::write_atomic(path, &out)
    }
}

fn raise(exception: Exception, what: String) -> Raised {
    Raised { exception, what }
}

/// One bindings record; None when malformed.
fn read_record(payload: &[u8]) -> Option<Aor> {
    let mut c = Cur(payload);
    if c.u8()? != RECORD_V1 {
        return None;
    }
    let mut s = || String::from_utf8(c.bytes()?.to_vec()).ok();
    let (name, object_id, host) = (s()?, s()?, s()?);
    let port = c.u16()?;
    let mut s = || String::from_utf8(c.bytes()?.to_vec()).ok();
    let (interface_type, interface_version) = (s()?, s()?);
    c.is_empty().then_some(Aor {
        name,
        object_id,
        host,
        port,
        interface_type,
        interface_version,
    })
}

impl fmt::Display for Aor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} {} {}:{}",
            self.name,
            self.interface_type,
            self.interface_version,
            self.object_id,
            self.host,
            self.port
        )
    }
}

#[cfg(test)]
mod tests;
