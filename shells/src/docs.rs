//! `crawlfleet docs`: the documents a node scheduler fed for a collection, read from its
//! document log (`<data dir>/collections/<collection>/docs`, see `crawlfleet_core::feed`).
//!
//! One tab-separated line per document: sequence number, operation (add / update / delete),
//! HTTP status, URI, MD5 checksum in hex, body size. With `--json`, one object per line with the
//! time and the response headers too, and with `--body` the body.

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

/// Lists the documents; an unknown collection or a damaged log is an error (non-zero exit).
pub fn run(args: &DocsArgs) -> Result<ExitCode, DocsError> {
    let coll = collection_dir(&args.data_dir, args.collection.as_bytes());
    if !coll.is_dir() {
        return Err(DocsError::UnknownCollection {
            name: args.collection.clone(),
            dir: coll,
            known: known_collections(&args.data_dir),
        });
    }
    let dir = coll.join(if args.held { HELD_DIR } else { DOCS_DIR });
    if !dir.is_dir() {
        // A known collection that fed nothing yet (or holds nothing): an empty list.
        return Ok(ExitCode::SUCCESS);
    }
    match list(&dir, args) {
        Err(DocsError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        r => r.map(|()| ExitCode::SUCCESS),
    }
}

fn list(dir: &Path, args: &DocsArgs) -> Result<(), DocsError> {
    let mut out = BufWriter::new(io::stdout().lock());
    for item in DocLogReader::open_from(dir, args.from).map_err(DocsError::Feed)? {
        let (seq, doc) = item.map_err(DocsError::Feed)?;
        if args.json {
            serde_json::to_writer(&mut out, &doc_json(seq, &doc, args.body))
                .map_err(|e| DocsError::Io(e.into()))?;
            writeln!(out).map_err(DocsError::Io)?;
        } else {
            writeln!(
                out,
                "{seq}\t{}\t{}\t{}\t{}\t{}",
                doc.op.name(),
                doc.status,
                text(&doc.uri),
                hex(&doc.checksum),
                doc.body.len()
            )
            .map_err(DocsError::Io)?;
        }
    }
    out.flush().map_err(DocsError::Io)
}
