//! Feeding a collection's document log into content distributor sessions (docs/distributor.md
//! "Feeding sessions"): the parts without sockets.
//!
//! - [`destinations`]: where a crawl collection's documents go — the content collection of its
//!   own name, or those its configuration's `feeding` section names (MS-FSCCFG 2.2.4.9 as
//!   FSCADM 2.2.2.3 `contentdest` refers to it).
//! - [`FeedCursor`]: per (collection, destination), the sequence number of the first document
//!   not acknowledged yet, kept on disk (written atomically). A document is behind the cursor
//!   only after the distributor acknowledged it, or refused it for good.
//! - [`OpBatch`]: the operations of one `feed` request (at most [`MAX_BATCH_OPS`] operations and
//!   about [`MAX_BATCH_BYTES`]), kept until they are answered, sent again after a failover.
//! - [`parse_result`] and [`OpBatch::settle`]: what an answer does to the batch and the cursor.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use super::{io_err, FeedDoc, FeedError, FeedOp};
use crate::marshal::Value;
use crate::recordlog::{check, write_atomic, Cur};

/// The directory of the cursors in a collection's directory.
pub const CURSORS_DIR: &str = "feed-cursors";
/// Operations in one `feed` request at most (the wire allows 4096).
pub const MAX_BATCH_OPS: usize = 1024;
/// Bytes of operations in one `feed` request at most (one larger document goes alone; the
/// wire allows 16 MiB).
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// The destination a collection without a `feeding` section feeds (FSCADM 2.2.2.3).
pub const DEFAULT_DESTINATION: &str = "default";

/// Where a crawl collection's documents go.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Destination {
    /// Its name (a member of the `feeding` section, or `default`).
    pub name: String,
    /// The content collection its sessions feed.
    pub collection: String,
}

impl Destination {
    /// True when feeding to this destination is suspended (CMD_ADM_CONF_FEEDING_SUSPEND,
    /// MS-FSCMT 2.2.3.7 / 3.1.5.6): for every destination, or for this one by its name or as
    /// `default:<content collection>` (FSCADM 2.2.2.3 contentdest).
    pub fn is_suspended(&self, all: bool, suspended: &BTreeSet<Vec<u8>>) -> bool {
        all || suspended.contains(self.name.as_bytes())
            || suspended.contains(format!("default:{}", self.collection).as_bytes())
    }
}

/// The destinations of crawl collection `name` with configuration `dict`: one per member of
/// its `feeding` section (`{dest: {collection: CONTENT_COLLECTION}}`, the collection defaulting
/// to the member's name; MS-FSCCFG 2.2.4.9), or [`DEFAULT_DESTINATION`] feeding the content
/// collection of the crawl collection's own name.
pub fn destinations(name: &str, dict: &Value<'_>) -> Vec<Destination> {
    let mut out = Vec::new();
    if let Some(members) = dict.get(b"feeding").and_then(Value::as_dict) {
        for (k, v) in members {
            let Some(dest) = k.as_bytes().and_then(|b| std::str::from_utf8(b).ok()) else {
                continue;
            };
            let collection = v
                .get(b"collection")
                .and_then(Value::as_bytes)
                .and_then(|b| std::str::from_utf8(b).ok())
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .unwrap_or(dest);
            out.push(Destination {
                name: dest.to_owned(),
                collection: collection.to_owned(),
            });
        }
    }
    if out.is_empty() {
        out.push(Destination {
            name: DEFAULT_DESTINATION.to_owned(),
            collection: name.to_owned(),
        });
    }
    out.sort();
    out.dedup_by(|a, b| a.name == b.name);
    out
}

/// The acknowledged position of one destination of a collection: the sequence number of the
/// first document of the log not acknowledged (nor refused for good) yet.
#[derive(Debug)]
pub struct FeedCursor {
    path: PathBuf,
    next: u64,
    /// The session this destination feeds through, kept so that a restarted node recreates
    /// it (MS-FSCDFT 3.6) instead of leaving it behind on a distributor.
    session: Option<i64>,
}

impl FeedCursor {
    /// The file of destination `dest` in the collection directory `collection_dir`.
    fn path(collection_dir: &Path, dest: &str) -> PathBuf {
        let hex: String = dest.bytes().map(|b| format!("{b:02x}")).collect();
        collection_dir
            .join(CURSORS_DIR)
            .join(format!("{hex}.cursor"))
    }

    /// Reads the cursor of `dest` (0, the log's start, when there is none yet).
    pub fn open(collection_dir: &Path, dest: &str) -> Result<FeedCursor, FeedError> {
        let path = Self::path(collection_dir, dest);
        // The sequence number and a check word, or (since sessions are kept) the sequence
        // number, the session id and a check word over both.
        let (next, session) = match fs::read(&path) {
            Ok(bytes) => {
                let mut c = Cur(&bytes);
                let parsed = match bytes.len() {
                    12 => match (c.u64(), c.u32()) {
                        (Some(n), Some(ck)) if check(&bytes[..8]) == ck => Some((n, None)),
                        _ => None,
                    },
                    20 => match (c.u64(), c.u64(), c.u32()) {
                        (Some(n), Some(id), Some(ck)) if check(&bytes[..16]) == ck => {
                            Some((n, Some(id as i64)))
                        }
                        _ => None,
                    },
                    _ => None,
                };
                match parsed {
                    Some(p) => p,
                    None => {
                        return Err(FeedError::Corrupt {
                            path,
                            offset: 0,
                            what: "damaged feed cursor",
                        })
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (0, None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        Ok(FeedCursor {
            path,
            next,
            session,
        })
    }

    /// The first sequence number not acknowledged.
    pub fn next(&self) -> u64 {
        self.next
    }

    /// The session id kept with the cursor, if any.
    pub fn session(&self) -> Option<i64> {
        self.session
    }

    /// Moves the cursor to `next` (never back), durably: a crash leaves the old or the new one.
    pub fn advance(&mut self, next: u64) -> Result<(), FeedError> {
        if next <= self.next {
            return Ok(());
        }
        self.write(next, self.session)
    }

    /// Keeps `id` as the destination's session, durably.
    pub fn set_session(&mut self, id: i64) -> Result<(), FeedError> {
        if self.session == Some(id) {
            return Ok(());
        }
        self.write(self.next, Some(id))
    }

    fn write(&mut self, next: u64, session: Option<i64>) -> Result<(), FeedError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        if !dir.exists() {
            fs::create_dir_all(dir).map_err(io_err(dir))?;
            crate::recordlog::sync_parent(dir).map_err(io_err(dir))?;
        }
        let mut bytes = next.to_le_bytes().to_vec();
        if let Some(id) = session {
            bytes.extend_from_slice(&(id as u64).to_le_bytes());
        }
        let ck = check(&bytes);
        bytes.extend_from_slice(&ck.to_le_bytes());
        write_atomic(&self.path, &bytes).map_err(io_err(&self.path))?;
        self.next = next;
        self.session = session;
        Ok(())
    }
}

/// An operation of a `feed` request, as docs/distributor.md "Feeding sessions" shapes it:
/// `{seq, op, doc, time}` and for add/update `checksum`, `status`, `headers`, `body`.
pub fn op_value(seq: u64, doc: &FeedDoc) -> Value<'static> {
    let k = |k: &'static str| Value::bytes(k.as_bytes());
    let s = |v: &str| Value::owned_bytes(v.as_bytes().to_vec());
    let op = match doc.op {
        FeedOp::Add => "add",
        FeedOp::Update => "update",
        FeedOp::Delete => "remove",
    };
    let mut pairs = vec![
        (k("seq"), Value::int(i64::try_from(seq).unwrap_or(i64::MAX))),
        (k("op"), s(op)),
        (k("doc"), Value::owned_bytes(doc.uri.clone())),
        (
            k("time"),
            Value::int(i64::try_from(doc.time).unwrap_or(i64::MAX)),
        ),
    ];
    if doc.op != FeedOp::Delete {
        let headers = doc
            .headers
            .iter()
            .map(|(n, v)| Value::list(vec![s(n), Value::owned_bytes(v.clone())]))
            .collect();
        pairs.extend([
            (k("checksum"), Value::owned_bytes(doc.checksum.to_vec())),
            (k("status"), Value::int(i64::from(doc.status))),
            (k("headers"), Value::list(headers)),
            (k("body"), Value::owned_bytes(doc.body.clone())),
        ]);
    }
    Value::Dict(pairs)
}

/// Roughly the encoded size of an operation.
fn op_size(doc: &FeedDoc) -> usize {
    let headers: usize = doc
        .headers
        .iter()
        .map(|(n, v)| n.len() + v.len() + 16)
        .sum();
    96 + doc.uri.len() + headers + doc.body.len()
}

/// What the distributor answered for one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpOutcome {
    /// Durable in the index.
    Ok,
    /// Refused for good (`malformed: ...`, `unknown_collection: ...`, or a kind this client
    /// does not know): counted failed, not sent again.
    Failed(String),
    /// Not done now (`disk_full: ...`, `unavailable: ...`): sent again later.
    Transient(String),
}

/// Reads the result of a `feed` request for the operations `seqs`: one `[seq, "ok"]` or
/// `[seq, "failed", reason]` per operation, in order.
pub fn parse_result(v: &Value<'_>, seqs: &[u64]) -> Result<Vec<OpOutcome>, String> {
    let items = v
        .as_list()
        .ok_or_else(|| format!("feed returned a {}, not a list", v.type_name()))?;
    if items.len() != seqs.len() {
        return Err(format!(
            "feed answered {} operations of {}",
            items.len(),
            seqs.len()
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    for (item, &seq) in items.iter().zip(seqs) {
        let parts = item
            .as_list()
            .ok_or_else(|| format!("operation {seq}: answer is not a list"))?;
        let got = parts.first().and_then(Value::as_i64);
        if got != i64::try_from(seq).ok() {
            return Err(format!("operation {seq}: answered as {got:?}"));
        }
        let word = parts.get(1).and_then(Value::as_bytes).unwrap_or_default();
        out.push(match word {
            b"ok" => OpOutcome::Ok,
            b"failed" => {
                let reason = parts
                    .get(2)
                    .and_then(Value::as_bytes)
                    .map(|r| String::from_utf8_lossy(r).into_owned())
                    .unwrap_or_default();
                if reason.starts_with("disk_full") || reason.starts_with("unavailable") {
                    OpOutcome::Transient(reason)
                } else {
                    OpOutcome::Failed(reason)
                }
            }
            other => {
                return Err(format!(
                    "operation {seq}: unknown outcome {:?}",
                    String::from_utf8_lossy(other)
                ))
            }
        });
    }
    Ok(out)
}

/// The operations of one `feed` request, kept until answered.
#[derive(Debug, Default)]
pub struct OpBatch {
    /// (sequence number, operation, its size).
    ops: Vec<(u64, Value<'static>, usize)>,
    bytes: usize,
}

/// What an answer settled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// The cursor: the first sequence number not settled (the first operation to send again,
    /// or the one after the last of the batch).
    pub next: u64,
    /// Operations acknowledged.
    pub acked: u64,
    /// Operations refused for good, with the first reason.
    pub failed: u64,
    /// The first permanent failure: (sequence number, reason).
    pub first_failure: Option<(u64, String)>,
    /// The first transient failure's reason, when operations stay to be sent again.
    pub retry: Option<String>,
}

impl OpBatch {
    /// An empty batch.
    pub fn new() -> OpBatch {
        OpBatch::default()
    }

    /// Operations in the batch.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// True when no more operation goes in (an empty batch always takes one).
    pub fn is_full(&self) -> bool {
        self.ops.len() >= MAX_BATCH_OPS || self.bytes >= MAX_BATCH_BYTES
    }

    /// True when `doc` fits (an empty batch takes any document).
    pub fn fits(&self, doc: &FeedDoc) -> bool {
        self.ops.is_empty()
            || (self.ops.len() < MAX_BATCH_OPS && self.bytes + op_size(doc) <= MAX_BATCH_BYTES)
    }

    /// Adds document `seq`; the caller checked [`OpBatch::fits`].
    pub fn push(&mut self, seq: u64, doc: &FeedDoc) {
        let size = op_size(doc);
        self.ops.push((seq, op_value(seq, doc), size));
        self.bytes += size;
    }

    /// The sequence numbers, in order.
    pub fn seqs(&self) -> Vec<u64> {
        self.ops.iter().map(|(s, _, _)| *s).collect()
    }

    /// The `args` of the `feed` request: `{"ops": [op, ...]}`.
    pub fn to_args(&self) -> Value<'static> {
        Value::Dict(vec![(
            Value::bytes(b"ops"),
            Value::list(self.ops.iter().map(|(_, v, _)| v.clone()).collect()),
        )])
    }

    /// Applies the answer `outcomes` (one per operation, in order): the operations before the
    /// first transient failure are settled (acknowledged, or refused for good) and leave the
    /// batch; the rest stay, to be sent again. `next_after` is the sequence number after the
    /// batch's last operation (where the cursor goes when everything is settled).
    pub fn settle(&mut self, outcomes: &[OpOutcome], next_after: u64) -> Settled {
        let mut s = Settled {
            next: next_after,
            ..Settled::default()
        };
        let mut settled = 0;
        for ((seq, _, _), o) in self.ops.iter().zip(outcomes) {
            match o {
                OpOutcome::Ok => s.acked += 1,
                OpOutcome::Failed(why) => {
                    s.failed += 1;
                    if s.first_failure.is_none() {
                        s.first_failure = Some((*seq, why.clone()));
                    }
                }
                OpOutcome::Transient(why) => {
                    s.next = *seq;
                    s.retry = Some(why.clone());
                    break;
                }
            }
            settled += 1;
        }
        let gone: usize = self.ops[..settled].iter().map(|(_, _, n)| n).sum();
        self.ops.drain(..settled);
        self.bytes -= gone;
        s
    }
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
