//! `crawlfleet docs`: the documents a node scheduler fed for a collection, read from its
//! document log (`<data dir>/collections/<collection>/docs`, see `crawlfleet_core::feed`).
//!
//! One tab-separated line per document: sequence number, operation (add / update / delete),
//! HTTP status, URI, MD5 checksum in hex, body size. With `--json`, one object per line with the
//! time and the response headers too, and with `--body` the body.
//!
//! Given a cluster's data directory instead (the one `crawlfleet up` was given, whose node
//! schedulers live in `node1`, `node2`...), every node's log is listed in turn, each line ending
//! with the node's name (a `node` member in JSON): sequence numbers are per node.

use std::fmt;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use base64::Engine;
use crawlfleet_core::feed::{DocLogReader, FeedDoc, FeedError, DOCS_DIR, HELD_DIR};
use crawlfleet_core::sched::node::collection_dir;
use serde_json::{json, Map, Value};

use crate::cli::DocsArgs;

/// Why the documents could not be listed.
#[derive(Debug)]
pub enum DocsError {
    /// The data directory has no such collection.
    UnknownCollection {
        /// The collection asked for.
        name: String,
        /// The directory that does not exist.
        dir: PathBuf,
        /// The collection directories there are.
        known: Vec<String>,
    },
    /// No node of the cluster in `dir` has the collection.
    UnknownClusterCollection {
        /// The collection asked for.
        name: String,
        /// The cluster's data directory.
        dir: PathBuf,
        /// Its node directories.
        nodes: Vec<String>,
        /// The collections the nodes have.
        known: Vec<String>,
    },
    /// The document log could not be read.
    Feed(FeedError),
    /// Standard output failed.
    Io(io::Error),
}

impl fmt::Display for DocsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocsError::UnknownCollection { name, dir, known } => {
                write!(f, "unknown collection {name:?}: no {}", dir.display())?;
                if known.is_empty() {
                    f.write_str(" (no collections there)")
                } else {
                    write!(f, " (collections there: {})", known.join(", "))
                }
            }
            DocsError::UnknownClusterCollection {
                name,
                dir,
                nodes,
                known,
            } => {
                write!(
                    f,
                    "unknown collection {name:?}: none of the nodes of {} has it ({})",
                    dir.display(),
                    nodes.join(", ")
                )?;
                if known.is_empty() {
                    f.write_str("; they have no collections")
                } else {
                    write!(f, "; collections there: {}", known.join(", "))
                }
            }
            DocsError::Feed(e) => write!(f, "document log: {e}"),
            DocsError::Io(e) => write!(f, "writing the list: {e}"),
        }
    }
}

impl std::error::Error for DocsError {}

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The JSON object of one document.
pub fn doc_json(seq: u64, doc: &FeedDoc, body: bool) -> Value {
    let headers: Vec<Value> = doc
        .headers
        .iter()
        .map(|(n, v)| json!([n, text(v)]))
        .collect();
    let mut o = Map::new();
    o.insert("seq".into(), json!(seq));
    o.insert("op".into(), json!(doc.op.name()));
    o.insert("status".into(), json!(doc.status));
    o.insert("time".into(), json!(doc.time));
    o.insert("uri".into(), json!(text(&doc.uri)));
    o.insert("checksum".into(), json!(hex(&doc.checksum)));
    o.insert("size".into(), json!(doc.body.len()));
    o.insert("headers".into(), Value::Array(headers));
    if body {
        match std::str::from_utf8(&doc.body) {
            Ok(t) => o.insert("body".into(), json!(t)),
            Err(_) => o.insert(
                "body_base64".into(),
                json!(base64::engine::general_purpose::STANDARD.encode(&doc.body)),
            ),
        };
    }
    Value::Object(o)
}

/// The collection directories under `data_dir`.
fn known_collections(data_dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(data_dir.join("collections"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    out.sort();
    out
}

/// The node directories of a cluster's data directory, as `crawlfleet up` makes them (and
/// scripts/netns-cluster.sh): `node` and a number, holding `collections/`, in number order.
pub fn node_dirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(u64, String, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let digits = name.strip_prefix("node")?;
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let n = digits.parse().ok()?;
            let path = e.path();
            path.join("collections").is_dir().then_some((n, name, path))
        })
        .collect();
    out.sort();
    out.into_iter()
        .map(|(_, name, path)| (name, path))
        .collect()
}

/// Lists the documents of the node whose data directory is `--data-dir`, or of every node of
/// the cluster there; an unknown collection or a damaged log is an error (non-zero exit).
pub fn run(args: &DocsArgs) -> Result<ExitCode, DocsError> {
    let nodes = match args.data_dir.join("collections").is_dir() {
        true => Vec::new(),
        false => node_dirs(&args.data_dir),
    };
    let listed = match nodes.is_empty() {
        true => list_node(args),
        false => list_cluster(&nodes, args),
    };
    match listed {
        Err(DocsError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        r => r.map(|()| ExitCode::SUCCESS),
    }
}

/// The log to read in a collection directory.
fn log_dir(coll: &Path, args: &DocsArgs) -> PathBuf {
    coll.join(if args.held { HELD_DIR } else { DOCS_DIR })
}

fn list_node(args: &DocsArgs) -> Result<(), DocsError> {
    let coll = collection_dir(&args.data_dir, args.collection.as_bytes());
    if !coll.is_dir() {
        return Err(DocsError::UnknownCollection {
            name: args.collection.clone(),
            dir: coll,
            known: known_collections(&args.data_dir),
        });
    }
    let dir = log_dir(&coll, args);
    let mut out = BufWriter::new(io::stdout().lock());
    // A known collection that fed nothing yet (or holds nothing): an empty list.
    if dir.is_dir() {
        list(&mut out, &dir, None, args)?;
    }
    out.flush().map_err(DocsError::Io)
}

/// Every node's documents in turn, node1 first; the nodes that do not have the collection (yet)
/// list nothing, and a collection no node has is an error.
fn list_cluster(nodes: &[(String, PathBuf)], args: &DocsArgs) -> Result<(), DocsError> {
    let colls: Vec<(&str, PathBuf)> = nodes
        .iter()
        .map(|(name, dir)| {
            (
                name.as_str(),
                collection_dir(dir, args.collection.as_bytes()),
            )
        })
        .filter(|(_, coll)| coll.is_dir())
        .collect();
    if colls.is_empty() {
        let mut known: Vec<String> = nodes
            .iter()
            .flat_map(|(_, dir)| known_collections(dir))
            .collect();
        known.sort();
        known.dedup();
        return Err(DocsError::UnknownClusterCollection {
            name: args.collection.clone(),
            dir: args.data_dir.clone(),
            nodes: nodes.iter().map(|(name, _)| name.clone()).collect(),
            known,
        });
    }
    let mut out = BufWriter::new(io::stdout().lock());
    for (node, coll) in colls {
        let dir = log_dir(&coll, args);
        if dir.is_dir() {
            list(&mut out, &dir, Some(node), args)?;
        }
    }
    out.flush().map_err(DocsError::Io)
}

/// Writes the documents of one log from `--from`; in a cluster, each names its `node`.
fn list(
    out: &mut impl Write,
    dir: &Path,
    node: Option<&str>,
    args: &DocsArgs,
) -> Result<(), DocsError> {
    for item in DocLogReader::open_from(dir, args.from).map_err(DocsError::Feed)? {
        let (seq, doc) = item.map_err(DocsError::Feed)?;
        if args.json {
            let mut v = doc_json(seq, &doc, args.body);
            if let (Some(node), Value::Object(o)) = (node, &mut v) {
                o.insert("node".into(), json!(node));
            }
            serde_json::to_writer(&mut *out, &v).map_err(|e| DocsError::Io(e.into()))?;
            writeln!(out).map_err(DocsError::Io)?;
            continue;
        }
        write!(
            out,
            "{seq}\t{}\t{}\t{}\t{}\t{}",
            doc.op.name(),
            doc.status,
            text(&doc.uri),
            hex(&doc.checksum),
            doc.body.len()
        )
        .map_err(DocsError::Io)?;
        match node {
            Some(node) => writeln!(out, "\t{node}"),
            None => writeln!(out),
        }
        .map_err(DocsError::Io)?;
    }
    Ok(())
}
