//! The feeding session's methods on the wire (docs/distributor.md "Feeding sessions"; MS-FSCF,
//! which would define them, is not among our specs): `feed`'s ops read from their marshal
//! dicts, and its reply, one `[seq, "ok"]` or `[seq, "failed", reason]` per op.

use crate::marshal::{dict_get, Value};
use crate::nameserver::Reply;

use super::index::{Op, OpKind};

/// Largest body of a request to a session (other objects keep
/// [`super::wire::MAX_REQUEST`]).
pub const MAX_SESSION_REQUEST: usize = 16 << 20;
/// Most ops in one `feed` request.
pub const MAX_OPS: usize = 4096;
/// Longest document id.
pub const MAX_DOC_LEN: usize = 64 << 10;
/// Most headers of one op.
pub const MAX_HEADERS: usize = 1024;

/// An op that cannot be applied: its seq (0 when it has none) and why (`malformed: ...`).
pub type Refused = (i64, String);

/// A `feed` request the shell hands to the index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Feed {
    /// The request id.
    pub id: i64,
    /// The session it came on.
    pub session: i64,
    /// The session's content collection.
    pub collection: String,
    /// Its ops, in order; the malformed ones refused already.
    pub ops: Vec<Result<Op, Refused>>,
}

/// What became of one op.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpResult {
    /// Durable in the index (or a version at least as new is).
    Ok,
    /// Not applied: why, starting with its kind (`disk_full:`, `unavailable:`, `malformed:`,
    /// `unknown_collection:`).
    Failed(String),
}

/// The reply to `feed` request `id`: one entry per op, in order.
pub fn reply(id: i64, results: &[(i64, OpResult)]) -> Reply {
    let ok = Value::bytes(b"ok");
    let failed = Value::bytes(b"failed");
    let items = results
        .iter()
        .map(|(seq, r)| {
            let mut e = vec![Value::int(*seq)];
            match r {
                OpResult::Ok => e.push(ok.clone()),
                OpResult::Failed(why) => {
                    e.push(failed.clone());
                    e.push(Value::owned_bytes(why.as_bytes().to_vec()));
                }
            }
            Value::List(e)
        })
        .collect();
    Reply {
        id: Some(id),
        outcome: Ok(Value::List(items)),
    }
}

/// Reads `feed`'s `args`: Err (the request is refused whole) unless `ops` is a list of 1 to
/// [`MAX_OPS`] entries; each op read on its own, a malformed one refused alone.
pub fn read_ops(args: &Value<'_>) -> Result<Vec<Result<Op, Refused>>, String> {
    let Value::Dict(d) = args else {
        return Err(format!(
            "field args: expected dict, found {}",
            args.type_name()
        ));
    };
    let ops = match dict_get(d, b"ops") {
        Some(Value::List(l) | Value::Tuple(l)) => l,
        Some(other) => {
            return Err(format!(
                "field args.ops: expected list, found {}",
                other.type_name()
            ))
        }
        None => return Err("missing field args.ops".into()),
    };
    if ops.is_empty() || ops.len() > MAX_OPS {
        return Err(format!(
            "field args.ops: {} ops, expected 1 to {MAX_OPS}",
            ops.len()
        ));
    }
    Ok(ops.iter().enumerate().map(|(i, v)| read_op(v, i)).collect())
}

/// Reads op `i` of a request.
fn read_op(v: &Value<'_>, i: usize) -> Result<Op, Refused> {
    let Value::Dict(d) = v else {
        return Err((0, format!("malformed: ops[{i}]: expected dict")));
    };
    let at = |k: &str| format!("ops[{i}].{k}");
    let seq = match dict_get(d, b"seq") {
        Some(Value::Int(s, _)) if *s >= 1 => *s,
        Some(_) => return Err((0, format!("malformed: {}: expected int >= 1", at("seq")))),
        None => return Err((0, format!("malformed: missing field {}", at("seq")))),
    };
    let bad = |why: String| (seq, format!("malformed: {why}"));
    let field =
        |k: &str| dict_get(d, k.as_bytes()).ok_or_else(|| bad(format!("missing field {}", at(k))));
    let bytes = |k: &str| match field(k)? {
        Value::Bytes(b, _) => Ok(b.as_ref()),
        other => Err(bad(format!(
            "{}: expected bytes, found {}",
            at(k),
            other.type_name()
        ))),
    };
    let int = |k: &str| match field(k)? {
        Value::Int(n, _) => Ok(*n),
        other => Err(bad(format!(
            "{}: expected int, found {}",
            at(k),
            other.type_name()
        ))),
    };
    let kind = OpKind::from_name(bytes("op")?)
        .ok_or_else(|| bad(format!("{}: expected add, update or remove", at("op"))))?;
    let doc = bytes("doc")?;
    if doc.is_empty() || doc.len() > MAX_DOC_LEN {
        return Err(bad(format!("{}: 1 to {MAX_DOC_LEN} bytes", at("doc"))));
    }
    let doc = std::str::from_utf8(doc)
        .map_err(|_| bad(format!("{}: not UTF-8", at("doc"))))?
        .to_owned();
    let mut op = Op {
        seq: seq as u64,
        kind,
        doc,
        time: int("time")?,
        checksum: [0; 16],
        status: 0,
        headers: Vec::new(),
        body: Vec::new(),
    };
    if kind == OpKind::Remove {
        return Ok(op);
    }
    op.checksum = bytes("checksum")?
        .try_into()
        .map_err(|_| bad(format!("{}: expected 16 bytes", at("checksum"))))?;
    op.status = int("status")?;
    let headers = match field("headers")? {
        Value::List(l) | Value::Tuple(l) if l.len() <= MAX_HEADERS => l,
        _ => {
            return Err(bad(format!(
                "{}: expected a list of at most {MAX_HEADERS} [name, value]",
                at("headers")
            )))
        }
    };
    for (j, h) in headers.iter().enumerate() {
        let pair = match h {
            Value::List(p) | Value::Tuple(p) => p.as_slice(),
            _ => &[],
        };
        let [Value::Bytes(k, _), Value::Bytes(v, _)] = pair else {
            return Err(bad(format!(
                "{}[{j}]: expected [name, value]",
                at("headers")
            )));
        };
        let k = std::str::from_utf8(k)
            .map_err(|_| bad(format!("{}[{j}]: name not UTF-8", at("headers"))))?;
        op.headers.push((k.to_owned(), v.to_vec()));
    }
    op.body = bytes("body")?.to_vec();
    Ok(op)
}

/// The session id of a session object id `dispatcher/<node_id>/session/<id>` of node
/// `node_id`; None for another object.
pub fn session_of(object: &str, node_id: i64) -> Option<Result<i64, ()>> {
    let rest = object.strip_prefix("dispatcher/")?;
    let (node, id) = rest.split_once("/session/")?;
    if node.parse::<i64>().ok()? != node_id {
        return None;
    }
    Some(id.parse().map_err(|_| ()))
}
