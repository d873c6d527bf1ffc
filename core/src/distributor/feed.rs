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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distributor::wire::{frame_limits, Handled, Serving, MAX_REQUEST};
    use crate::distributor::{DispatcherNode, GuaranteeSet, SessionSpec};
    use crate::frame::{self, Priority};
    use crate::nameserver::Exception;

    fn k(s: &str) -> Value<'static> {
        Value::owned_bytes(s.as_bytes().to_vec())
    }

    fn request(object: &str, method: &str, args: Vec<(&str, Value<'static>)>) -> Vec<u8> {
        let args = Value::Dict(args.into_iter().map(|(a, v)| (k(a), v)).collect());
        let dict = vec![
            (k("object"), k(object)),
            (k("method"), k(method)),
            (k("id"), Value::int(3)),
            (k("args"), args),
        ];
        let mut out = Vec::new();
        frame::encode_dict(&dict, Priority::Normal, &mut out);
        out.split_off(frame::HEADER_LEN)
    }

    fn op(pairs: Vec<(&str, Value<'static>)>) -> Value<'static> {
        Value::Dict(pairs.into_iter().map(|(a, v)| (k(a), v)).collect())
    }

    fn add(seq: i64) -> Value<'static> {
        op(vec![
            ("seq", Value::int(seq)),
            ("op", k("add")),
            ("doc", k("http://a/")),
            ("time", Value::int(9)),
            ("checksum", Value::owned_bytes(vec![7; 16])),
            ("status", Value::int(200)),
            (
                "headers",
                Value::List(vec![Value::List(vec![k("server"), k("x")])]),
            ),
            ("body", k("<p>")),
        ])
    }

    fn node_with_session() -> DispatcherNode {
        let mut n = DispatcherNode::new(4, "127.0.0.1", 13000, &["web".to_string()]);
        let spec = SessionSpec {
            id: 70,
            collection: "web".into(),
            guarantees: GuaranteeSet(Vec::new()),
            priority: 0,
            external_client: false,
        };
        n.on_create(&spec).unwrap();
        n
    }

    fn handle(n: &mut DispatcherNode, body: &[u8]) -> Handled {
        n.handle_frame(body, &frame_limits(), Serving::default(), "backup")
    }

    fn exception(h: Handled) -> (Exception, bool) {
        match h {
            Handled::Answer(a) => (a.reply.outcome.unwrap_err().exception, a.close.is_some()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_feed_reads_its_ops_each_alone_and_counts_them_in_the_load() {
        let mut n = node_with_session();
        let no_time = op(vec![
            ("seq", Value::int(2)),
            ("op", k("remove")),
            ("doc", k("http://b/")),
        ]);
        let body = request(
            "dispatcher/4/session/70",
            "feed",
            vec![("ops", Value::List(vec![add(1), no_time, Value::int(5)]))],
        );
        let Handled::Feed(f) = handle(&mut n, &body) else {
            panic!("not a feed")
        };
        assert_eq!((f.id, f.session, f.collection.as_str()), (3, 70, "web"));
        let first = f.ops[0].as_ref().unwrap();
        assert_eq!((first.seq, first.kind, first.time), (1, OpKind::Add, 9));
        assert_eq!(first.headers, [("server".to_string(), b"x".to_vec())]);
        assert_eq!(
            f.ops[1],
            Err((2, "malformed: missing field ops[1].time".into()))
        );
        assert_eq!(
            f.ops[2],
            Err((0, "malformed: ops[2]: expected dict".into()))
        );
        assert_eq!(n.load(), 3);
        n.ops_done(3);
        assert_eq!(n.load(), 0);
        let r = reply(
            3,
            &[
                (1, OpResult::Ok),
                (2, OpResult::Failed("disk_full: x".into())),
            ],
        );
        let want = Value::List(vec![
            Value::List(vec![Value::int(1), k("ok")]),
            Value::List(vec![Value::int(2), k("failed"), k("disk_full: x")]),
        ]);
        assert_eq!(r.outcome, Ok(want));
    }

    #[test]
    fn session_requests_are_checked_and_others_keep_their_64_kib_limit() {
        let mut n = node_with_session();
        let s = "dispatcher/4/session/70";
        let empty = request(s, "feed", vec![("ops", Value::List(Vec::new()))]);
        assert_eq!(
            exception(handle(&mut n, &empty)),
            (Exception::BadRequest, true)
        );
        let unknown = request(
            "dispatcher/4/session/71",
            "feed",
            vec![("ops", Value::List(vec![add(1)]))],
        );
        assert_eq!(
            exception(handle(&mut n, &unknown)),
            (Exception::UnknownObject, true)
        );
        let junk = request("dispatcher/4/session/x", "__ping", Vec::new());
        assert_eq!(
            exception(handle(&mut n, &junk)),
            (Exception::UnknownObject, true)
        );
        let other = request(s, "rename", Vec::new());
        assert_eq!(
            exception(handle(&mut n, &other)),
            (Exception::UnknownMethod, true)
        );
        let pad = vec![("pad", Value::owned_bytes(vec![b'y'; MAX_REQUEST]))];
        let big = request("dispatcher/4/dispatcher_node", "get_load", pad.clone());
        assert_eq!(
            exception(handle(&mut n, &big)),
            (Exception::BadRequest, true)
        );
        let mut ops = vec![add(1)];
        ops.extend(std::iter::repeat_n(add(2), 100));
        let mut big_feed = pad;
        big_feed.push(("ops", Value::List(ops)));
        assert!(matches!(
            handle(&mut n, &request(s, "feed", big_feed)),
            Handled::Feed(_)
        ));
        // close removes the session.
        assert!(matches!(
            handle(&mut n, &request(s, "close", Vec::new())),
            Handled::Answer(_)
        ));
        assert!(n.session(70).is_none());
        let ping = request(s, "__ping", Vec::new());
        assert_eq!(
            exception(handle(&mut n, &ping)),
            (Exception::UnknownObject, true)
        );
    }

    #[test]
    fn the_session_holder_survives_a_reopen_on_another_base_port() {
        let dir = tempfile::tempdir().unwrap();
        let web = ["web".to_string()];
        let mut n = DispatcherNode::open(dir.path(), 4, "h", 13000, &web).unwrap();
        for (id, external_client) in [(70, false), (71, true), (72, false)] {
            let spec = SessionSpec {
                id,
                collection: "web".into(),
                guarantees: GuaranteeSet(Vec::new()),
                priority: 0,
                external_client,
            };
            n.on_create(&spec).unwrap();
        }
        n.on_destroy_session(72);
        drop(n);
        let n = DispatcherNode::open(dir.path(), 4, "h", 14000, &[]).unwrap();
        let held: Vec<(i64, u16, &str)> = n
            .sessions()
            .map(|s| (s.id, s.port, s.collection.as_str()))
            .collect();
        assert_eq!(held, [(70, 14390, "web"), (71, 14391, "web")]);
    }
}
