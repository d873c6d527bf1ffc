//! The name server's wire shapes (docs/nameserver.md): requests and replies carried in the
//! FSCMT frame layout (MS-FSCMT 2.2.1: a 4-byte big-endian length, then a marshal
//! `(dict, 0)`), with keys of our own since MS-FSMW is not among our specs.
//!
//! A request dict holds `object` (the object addressed), `method`, `id` (echoed in the reply)
//! and `args` (a dict of named arguments). A reply dict holds `id` and either `result` or
//! `exception` and `what`. Each shape reads itself from a [`Fields`] reader whose errors name
//! the field at fault (`args.aor.port`), in the manner of the FSCMT message model.

use std::fmt;

use crate::frame::{self, Priority};
use crate::marshal::{dict_get, Dict, Limits, Value};

/// The object id under which the name server serves its own methods and `__ping`.
pub const NAMESERVER_OBJECT: &str = "nameserver";

/// Longest string field an AOR or a request may carry, in bytes.
pub const MAX_FIELD_LEN: usize = 1024;

/// An abstract object reference (the AOR of MS-FSCDFT 3.1.3, 3.3.3).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Aor {
    /// The name it is bound under, e.g. `esp/subsystems/processing/dispatcher`.
    pub name: String,
    /// The object's id, chosen by the server that binds it.
    pub object_id: String,
    /// Where the object is served.
    pub host: String,
    /// Its port.
    pub port: u16,
    /// E.g. `processing::session_factory`.
    pub interface_type: String,
    /// E.g. `5.1`.
    pub interface_version: String,
}

/// What a binding is keyed by: (name, interface_type, interface_version) (MS-FSCDFT 3.2.3,
/// 3.4.3, 3.4.5).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Triple {
    /// The bound name.
    pub name: String,
    /// The interface type.
    pub interface_type: String,
    /// The interface version.
    pub interface_version: String,
}

impl Aor {
    /// The key this reference is bound under.
    pub fn triple(&self) -> Triple {
        Triple {
            name: self.name.clone(),
            interface_type: self.interface_type.clone(),
            interface_version: self.interface_version.clone(),
        }
    }

    /// As a marshal dict (the `result` of resolve, an element of list's).
    pub fn to_value(&self) -> Value<'static> {
        let s = |k: &'static str, v: &str| (Value::bytes(k.as_bytes()), owned(v));
        Value::Dict(vec![
            s("name", &self.name),
            s("object_id", &self.object_id),
            s("host", &self.host),
            (Value::bytes(b"port"), Value::int(self.port.into())),
            s("interface_type", &self.interface_type),
            s("interface_version", &self.interface_version),
        ])
    }

    /// Reads an AOR dict found at `at` (a field path, for errors).
    pub fn from_value(v: &Value<'_>, at: &'static str) -> Result<Aor, WireError> {
        let f = Fields::of(v, at)?;
        Ok(Aor {
            name: f.string("name")?,
            object_id: f.string("object_id")?,
            host: f.string("host")?,
            port: f.port("port")?,
            interface_type: f.string("interface_type")?,
            interface_version: f.string("interface_version")?,
        })
    }
}

impl fmt::Display for Triple {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} {})",
            self.name, self.interface_type, self.interface_version
        )
    }
}

/// A name server method and its arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    /// `bind(aor, replaces)`: `replaces` names the object id of a binding this one may take
    /// over.
    Bind {
        /// The reference to bind.
        aor: Aor,
        /// The object id the caller expects to replace, if any.
        replaces: Option<String>,
    },
    /// `resolve(name, interface_type, interface_version)`.
    Resolve(Triple),
    /// `unbind(name, interface_type, interface_version, object_id)`: `object_id`, when given,
    /// must be the bound one.
    Unbind {
        /// The binding to remove.
        triple: Triple,
        /// The object id the caller expects to remove, if any.
        object_id: Option<String>,
    },
    /// `list()`.
    List,
    /// `__ping()`, on any served object.
    Ping,
}

impl Call {
    /// The method name on the wire.
    pub fn method(&self) -> &'static str {
        match self {
            Call::Bind { .. } => "bind",
            Call::Resolve(_) => "resolve",
            Call::Unbind { .. } => "unbind",
            Call::List => "list",
            Call::Ping => "__ping",
        }
    }

    /// The `args` dict.
    fn args(&self) -> Value<'static> {
        let triple = |t: &Triple| {
            vec![
                (Value::bytes(b"name"), owned(&t.name)),
                (Value::bytes(b"interface_type"), owned(&t.interface_type)),
                (
                    Value::bytes(b"interface_version"),
                    owned(&t.interface_version),
                ),
            ]
        };
        let opt = |v: &Option<String>| v.as_deref().map_or(Value::None, owned);
        Value::Dict(match self {
            Call::Bind { aor, replaces } => vec![
                (Value::bytes(b"aor"), aor.to_value()),
                (Value::bytes(b"replaces"), opt(replaces)),
            ],
            Call::Resolve(t) => triple(t),
            Call::Unbind {
                triple: t,
                object_id,
            } => {
                let mut d = triple(t);
                d.push((Value::bytes(b"object_id"), opt(object_id)));
                d
            }
            Call::List | Call::Ping => Vec::new(),
        })
    }
}

/// One request: the object it addresses, its id and the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The object addressed ([`NAMESERVER_OBJECT`] for the name server's methods).
    pub object: String,
    /// Echoed in the reply, so a client may pipeline.
    pub id: i64,
    /// The method and its arguments.
    pub call: Call,
}

impl Request {
    /// Reads a request dict. The id, when it could be read, comes with the error so that the
    /// answer can carry it.
    pub fn from_dict(dict: &[(Value<'_>, Value<'_>)]) -> Result<Request, (Option<i64>, WireError)> {
        let f = Fields::new(dict, "request");
        let id = f.int("id").ok();
        let read = || -> Result<Request, WireError> {
            let id = f.int("id")?;
            let object = f.string("object")?;
            let method = f.string("method")?;
            let args = Fields::of(f.req("args")?, "args")?;
            let triple = || -> Result<Triple, WireError> {
                Ok(Triple {
                    name: args.string("name")?,
                    interface_type: args.string("interface_type")?,
                    interface_version: args.string("interface_version")?,
                })
            };
            let call = match method.as_str() {
                "bind" => Call::Bind {
                    aor: Aor::from_value(args.req("aor")?, "args.aor")?,
                    replaces: args.opt_string("replaces")?,
                },
                "resolve" => Call::Resolve(triple()?),
                "unbind" => Call::Unbind {
                    triple: triple()?,
                    object_id: args.opt_string("object_id")?,
                },
                "list" => Call::List,
                "__ping" => Call::Ping,
                _ => return Err(WireError::UnknownMethod(method)),
            };
            Ok(Request { object, id, call })
        };
        read().map_err(|e| (id, e))
    }

    /// The request dict.
    pub fn to_dict(&self) -> Dict<'static> {
        vec![
            (Value::bytes(b"object"), owned(&self.object)),
            (Value::bytes(b"method"), owned(self.call.method())),
            (Value::bytes(b"id"), Value::int(self.id)),
            (Value::bytes(b"args"), self.call.args()),
        ]
    }

    /// Appends the whole frame (length header included).
    pub fn encode_frame(&self, out: &mut Vec<u8>) {
        frame::encode_dict(&self.to_dict(), Priority::Normal, out);
    }
}

/// The exceptions a name server raises; `what` says why in words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exception {
    /// resolve of an unbound triple (MS-FSCDFT 3.4.3 names it).
    Resolve,
    /// bind of a triple bound to another object, or a full table.
    Bind,
    /// unbind of an unbound triple, or of one bound to another object than the one named.
    Unbind,
    /// A request whose fields are missing or of the wrong type.
    BadRequest,
    /// A method the object does not have.
    UnknownMethod,
    /// An object this server does not serve.
    UnknownObject,
    /// A frame whose body is not a marshal `(dict, 0|1)`.
    BadFrame,
    /// The binding could not be made durable; nothing changed.
    Storage,
    /// A distributor does not hold the content collection (MS-FSCDFT 2.2.4).
    UnknownCollection,
    /// A distributor cannot create the session with these guarantees (MS-FSCDFT 2.2.5).
    UnsupportedGuaranteeSet,
    /// A distributor cannot carry out a call that needs the cluster now (not the master, or
    /// no registered distributor answered): ours, docs/distributor.md.
    Unavailable,
}

impl Exception {
    /// Every exception.
    pub const ALL: [Exception; 11] = [
        Exception::Resolve,
        Exception::Bind,
        Exception::Unbind,
        Exception::BadRequest,
        Exception::UnknownMethod,
        Exception::UnknownObject,
        Exception::BadFrame,
        Exception::Storage,
        Exception::UnknownCollection,
        Exception::UnsupportedGuaranteeSet,
        Exception::Unavailable,
    ];

    /// The name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Exception::Resolve => "resolve_exception",
            Exception::Bind => "bind_exception",
            Exception::Unbind => "unbind_exception",
            Exception::BadRequest => "bad_request",
            Exception::UnknownMethod => "unknown_method",
            Exception::UnknownObject => "unknown_object",
            Exception::BadFrame => "bad_frame",
            Exception::Storage => "storage_exception",
            Exception::UnknownCollection => "unknown_collection",
            Exception::UnsupportedGuaranteeSet => "unsupported_guarantee_set",
            Exception::Unavailable => "unavailable",
        }
    }

    /// The exception with this wire name.
    pub fn from_name(name: &str) -> Option<Exception> {
        Exception::ALL.into_iter().find(|e| e.name() == name)
    }
}

impl fmt::Display for Exception {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A raised exception: which, and `what` happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Raised {
    /// The exception.
    pub exception: Exception,
    /// Why, in words.
    pub what: String,
}

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.exception, self.what)
    }
}

/// One reply: the request's id (None when the request's id could not be read) and its outcome.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// The request's id.
    pub id: Option<i64>,
    /// The result value, or the exception raised.
    pub outcome: Result<Value<'static>, Raised>,
}

impl Reply {
    /// The reply dict.
    pub fn to_dict(&self) -> Dict<'static> {
        let mut d = vec![(Value::bytes(b"id"), self.id.map_or(Value::None, Value::int))];
        match &self.outcome {
            Ok(v) => d.push((Value::bytes(b"result"), v.clone())),
            Err(r) => {
                d.push((Value::bytes(b"exception"), owned(r.exception.name())));
                d.push((Value::bytes(b"what"), owned(&r.what)));
            }
        }
        d
    }

    /// Appends the whole frame (length header included).
    pub fn encode_frame(&self, out: &mut Vec<u8>) {
        frame::encode_dict(&self.to_dict(), Priority::Normal, out);
    }

    /// Reads a reply dict. An exception name this side does not know is a [`WireError`].
    pub fn from_dict(dict: &[(Value<'_>, Value<'_>)]) -> Result<Reply, WireError> {
        let f = Fields::new(dict, "reply");
        let id = match f.req("id")? {
            Value::None => None,
            _ => Some(f.int("id")?),
        };
        let outcome = match f.get("exception") {
            Some(_) => {
                let name = f.string("exception")?;
                let exception =
                    Exception::from_name(&name).ok_or(WireError::UnknownException(name))?;
                Err(Raised {
                    exception,
                    what: f.string("what")?,
                })
            }
            None => Ok(f.req("result")?.clone().into_owned()),
        };
        Ok(Reply { id, outcome })
    }

    /// Decodes a frame body (the bytes after the length header) into a reply.
    pub fn decode_body(body: &[u8], limits: &Limits) -> Result<Reply, WireError> {
        let f = frame::decode_body(body, limits).map_err(|e| WireError::Frame(e.to_string()))?;
        Reply::from_dict(&f.message)
    }
}

/// Why a request or reply could not be read; the field path names where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The frame body is not a marshal `(dict, 0|1)`.
    Frame(String),
    /// A required field is absent.
    Missing(&'static str),
    /// A field holds a value of the wrong type.
    WrongType {
        /// The field.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it was.
        found: &'static str,
    },
    /// A string field longer than [`MAX_FIELD_LEN`].
    TooLong {
        /// The field.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// A string field that is not UTF-8.
    NotUtf8(&'static str),
    /// A port outside 0..=65535.
    BadPort(i64),
    /// A method the name server does not have.
    UnknownMethod(String),
    /// A reply naming an exception this side does not know.
    UnknownException(String),
}

impl WireError {
    /// The exception a server answers this error with.
    pub fn exception(&self) -> Exception {
        match self {
            WireError::Frame(_) => Exception::BadFrame,
            WireError::UnknownMethod(_) => Exception::UnknownMethod,
            _ => Exception::BadRequest,
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Frame(e) => write!(f, "undecodable frame: {e}"),
            WireError::Missing(field) => write!(f, "missing field {field}"),
            WireError::WrongType {
                field,
                expected,
                found,
            } => write!(f, "field {field}: expected {expected}, found {found}"),
            WireError::TooLong { field, len } => write!(
                f,
                "field {field}: {len} bytes, over the limit of {MAX_FIELD_LEN}"
            ),
            WireError::NotUtf8(field) => write!(f, "field {field}: not UTF-8"),
            WireError::BadPort(p) => write!(f, "field port: {p} is not a port number"),
            WireError::UnknownMethod(m) => write!(f, "unknown method {m:?}"),
            WireError::UnknownException(e) => write!(f, "unknown exception {e:?}"),
        }
    }
}

impl std::error::Error for WireError {}

/// Typed access to the fields of one dict; errors name `at.field`.
struct Fields<'d, 'a> {
    pairs: &'d [(Value<'a>, Value<'a>)],
    at: &'static str,
}

impl<'d, 'a> Fields<'d, 'a> {
    fn new(pairs: &'d [(Value<'a>, Value<'a>)], at: &'static str) -> Self {
        Fields { pairs, at }
    }

    fn of(v: &'d Value<'a>, at: &'static str) -> Result<Self, WireError> {
        match v {
            Value::Dict(d) => Ok(Fields::new(d, at)),
            other => Err(WireError::WrongType {
                field: at,
                expected: "dict",
                found: other.type_name(),
            }),
        }
    }

    /// The path of `key` for errors: `key` itself at the top level, `at.key` below it. The
    /// paths are a closed set, spelled out so that errors stay `&'static str`.
    fn path(&self, key: &'static str) -> &'static str {
        match (self.at, key) {
            ("args", "aor") => "args.aor",
            ("args", "replaces") => "args.replaces",
            ("args", "name") => "args.name",
            ("args", "interface_type") => "args.interface_type",
            ("args", "interface_version") => "args.interface_version",
            ("args", "object_id") => "args.object_id",
            ("args.aor", "name") => "args.aor.name",
            ("args.aor", "object_id") => "args.aor.object_id",
            ("args.aor", "host") => "args.aor.host",
            ("args.aor", "port") => "args.aor.port",
            ("args.aor", "interface_type") => "args.aor.interface_type",
            ("args.aor", "interface_version") => "args.aor.interface_version",
            _ => key,
        }
    }

    fn get(&self, key: &'static str) -> Option<&'d Value<'a>> {
        dict_get(self.pairs, key.as_bytes())
    }

    fn req(&self, key: &'static str) -> Result<&'d Value<'a>, WireError> {
        self.get(key).ok_or(WireError::Missing(self.path(key)))
    }

    fn int(&self, key: &'static str) -> Result<i64, WireError> {
        match self.req(key)? {
            Value::Int(i, _) => Ok(*i),
            other => Err(WireError::WrongType {
                field: self.path(key),
                expected: "int",
                found: other.type_name(),
            }),
        }
    }

    fn port(&self, key: &'static str) -> Result<u16, WireError> {
        let p = self.int(key)?;
        u16::try_from(p).map_err(|_| WireError::BadPort(p))
    }

    fn string(&self, key: &'static str) -> Result<String, WireError> {
        let field = self.path(key);
        match self.req(key)? {
            Value::Bytes(b, _) if b.len() > MAX_FIELD_LEN => Err(WireError::TooLong {
                field,
                len: b.len(),
            }),
            Value::Bytes(b, _) => std::str::from_utf8(b)
                .map(str::to_owned)
                .map_err(|_| WireError::NotUtf8(field)),
            other => Err(WireError::WrongType {
                field,
                expected: "string",
                found: other.type_name(),
            }),
        }
    }

    fn opt_string(&self, key: &'static str) -> Result<Option<String>, WireError> {
        match self.get(key) {
            None | Some(Value::None) => Ok(None),
            Some(_) => self.string(key).map(Some),
        }
    }
}

fn owned(s: &str) -> Value<'static> {
    Value::owned_bytes(s.as_bytes().to_vec())
}
