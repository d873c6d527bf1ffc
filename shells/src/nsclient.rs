//! A blocking client of the name server (docs/nameserver.md), for the command line and the
//! roles that bind and resolve through it, and `crawlfleet nameserver list|resolve|bind|unbind|
//! ping`.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

use crawlfleet_core::frame::{self, Priority, HEADER_LEN};
use crawlfleet_core::marshal::{Dict, Limits, Value};
use crawlfleet_core::nameserver::{Aor, Call, Raised, Reply, Request, Triple, NAMESERVER_OBJECT};
use serde_json::json;

use crate::cli::NameserverCommand;

/// Largest reply frame body accepted (a list of the name server's whole table fits).
const MAX_REPLY: usize = 256 << 20;

/// Why a call did not return a result.
#[derive(Debug)]
pub enum ClientError {
    /// Connecting, sending or receiving failed (or timed out).
    Io(io::Error),
    /// The name server (or object) raised an exception.
    Raised(Raised),
    /// The answer is not a reply to this call.
    Protocol(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Raised(r) => write!(f, "{r}"),
            ClientError::Protocol(why) => write!(f, "bad reply: {why}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        ClientError::Io(e)
    }
}

/// One connection to a name server (or to any object served over its wire format).
pub struct NsClient {
    stream: TcpStream,
    next_id: i64,
}

impl NsClient {
    /// Connects, every later read and write bounded by `timeout`.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<NsClient, ClientError> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        stream.set_nodelay(true)?;
        Ok(NsClient { stream, next_id: 1 })
    }

    /// Calls `call` on `object` and waits for its reply.
    pub fn call(&mut self, object: &str, call: Call) -> Result<Value<'static>, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let dict = Request {
            object: object.to_owned(),
            id,
            call,
        }
        .to_dict();
        self.exchange(id, &dict)
    }

    /// Calls `method` with the `args` dict on `object` (a distributor's methods:
    /// docs/distributor.md) and waits for its reply.
    pub fn call_method(
        &mut self,
        object: &str,
        method: &str,
        args: Value<'static>,
    ) -> Result<Value<'static>, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let s = |v: &str| Value::owned_bytes(v.as_bytes().to_vec());
        let dict = vec![
            (Value::bytes(b"object"), s(object)),
            (Value::bytes(b"method"), s(method)),
            (Value::bytes(b"id"), Value::int(id)),
            (Value::bytes(b"args"), args),
        ];
        self.exchange(id, &dict)
    }

    /// Sends one request dict and reads the reply to it.
    fn exchange(&mut self, id: i64, dict: &Dict<'static>) -> Result<Value<'static>, ClientError> {
        let mut out = Vec::new();
        frame::encode_dict(dict, Priority::Normal, &mut out);
        self.stream.write_all(&out)?;
        let mut header = [0u8; HEADER_LEN];
        self.stream.read_exact(&mut header)?;
        let len = u32::from_be_bytes(header) as usize;
        if len > MAX_REPLY {
            return Err(ClientError::Protocol(format!(
                "reply of {len} bytes, over the limit of {MAX_REPLY}"
            )));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body)?;
        let limits = Limits {
            max_size: MAX_REPLY,
            ..Limits::default()
        };
        let reply =
            Reply::decode_body(&body, &limits).map_err(|e| ClientError::Protocol(e.to_string()))?;
        if reply.id != Some(id) {
            return Err(ClientError::Protocol(format!(
                "reply to request {:?}, not {id}",
                reply.id
            )));
        }
        reply.outcome.map_err(ClientError::Raised)
    }

    /// `bind(aor, replaces)`.
    pub fn bind(&mut self, aor: Aor, replaces: Option<String>) -> Result<(), ClientError> {
        self.call(NAMESERVER_OBJECT, Call::Bind { aor, replaces })
            .map(drop)
    }

    /// `resolve(triple)`: the bound reference.
    pub fn resolve(&mut self, triple: Triple) -> Result<Aor, ClientError> {
        let v = self.call(NAMESERVER_OBJECT, Call::Resolve(triple))?;
        aor_of(&v)
    }

    /// `unbind(triple, object_id)`: the removed reference.
    pub fn unbind(
        &mut self,
        triple: Triple,
        object_id: Option<String>,
    ) -> Result<Aor, ClientError> {
        let v = self.call(NAMESERVER_OBJECT, Call::Unbind { triple, object_id })?;
        aor_of(&v)
    }

    /// `list()`: every binding.
    pub fn list(&mut self) -> Result<Vec<Aor>, ClientError> {
        match self.call(NAMESERVER_OBJECT, Call::List)? {
            Value::List(items) => items.iter().map(aor_of).collect(),
            other => Err(ClientError::Protocol(format!(
                "list returned a {}",
                other.type_name()
            ))),
        }
    }

    /// `__ping()` on `object`.
    pub fn ping(&mut self, object: &str) -> Result<(), ClientError> {
        self.call(object, Call::Ping).map(drop)
    }
}

fn aor_of(v: &Value<'_>) -> Result<Aor, ClientError> {
    Aor::from_value(v, "result").map_err(|e| ClientError::Protocol(e.to_string()))
}

fn aor_json(a: &Aor) -> serde_json::Value {
    json!({
        "name": a.name,
        "object_id": a.object_id,
        "host": a.host,
        "port": a.port,
        "interface_type": a.interface_type,
        "interface_version": a.interface_version,
    })
}

/// Runs one client command of `crawlfleet nameserver`.
pub fn run(cmd: &NameserverCommand) -> Result<ExitCode, String> {
    let (addr, timeout) = match cmd {
        NameserverCommand::List { conn, .. }
        | NameserverCommand::Resolve { conn, .. }
        | NameserverCommand::Bind { conn, .. }
        | NameserverCommand::Unbind { conn, .. }
        | NameserverCommand::Ping { conn, .. } => (
            conn.nameserver,
            Duration::from_secs_f64(conn.timeout.max(0.1)),
        ),
    };
    let mut c = NsClient::connect(addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    let failed = |e: ClientError| format!("{addr}: {e}");
    match cmd {
        NameserverCommand::List { json, .. } => {
            let list = c.list().map_err(failed)?;
            if *json {
                let arr: Vec<_> = list.iter().map(aor_json).collect();
                println!("{}", serde_json::Value::Array(arr));
            } else {
                for a in &list {
                    println!(
                        "{}\t{}\t{}\t{}\t{}:{}",
                        a.name, a.interface_type, a.interface_version, a.object_id, a.host, a.port
                    );
                }
            }
        }
        NameserverCommand::Resolve { triple, json, .. } => {
            let a = c.resolve(triple.triple()).map_err(failed)?;
            if *json {
                println!("{}", aor_json(&a));
            } else {
                println!("{}\t{}:{}", a.object_id, a.host, a.port);
            }
        }
        NameserverCommand::Bind {
            triple,
            object_id,
            host,
            port,
            replaces,
            ..
        } => {
            let t = triple.triple();
            let aor = Aor {
                name: t.name,
                object_id: object_id.clone(),
                host: host.clone(),
                port: *port,
                interface_type: t.interface_type,
                interface_version: t.interface_version,
            };
            c.bind(aor, replaces.clone()).map_err(failed)?;
        }
        NameserverCommand::Unbind {
            triple, object_id, ..
        } => {
            let a = c
                .unbind(triple.triple(), object_id.clone())
                .map_err(failed)?;
            println!("unbound {}", a.object_id);
        }
        NameserverCommand::Ping { object, .. } => {
            c.ping(object).map_err(failed)?;
            println!("{object} answers");
        }
    }
    Ok(ExitCode::SUCCESS)
}
