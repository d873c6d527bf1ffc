//! Reading content indexes without their distributor's lock (`crawlfleet index`, the
//! full-text index's rebuild): the log is read as it is on disk, up to its last intact record,
//! so a record being written (torn, half there) ends the read and what is listed is a
//! consistent prefix of what the distributor applied. Nothing is written.

use std::collections::BTreeMap;
use std::path::Path;

use super::record::{Head, Op, OpKind, Version};
use super::{log_path, FORMAT};
use crate::recordlog::{read_log, LogError, Recovered, HEADER};

/// What a reader keeps of a document: its latest version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Doc {
    /// The document id (URI).
    pub doc: String,
    /// What its latest op did.
    pub kind: OpKind,
    /// Its latest version.
    pub version: Version,
    /// Checksum (zeros for a remove).
    pub checksum: [u8; 16],
    /// HTTP status.
    pub status: i64,
    /// Body bytes.
    pub size: u64,
    /// Headers, kept only for the document asked for ([`read_dir`]'s `full`).
    pub headers: Vec<(String, Vec<u8>)>,
    /// Which of the directories read holds this version (its index in the list given).
    pub source: usize,
}

impl Doc {
    /// False for a remove.
    pub fn live(&self) -> bool {
        self.kind != OpKind::Remove
    }
}

/// Calls `each` with every op of the log at `path` whose record ends after `from` (0: all),
/// in order, with the position its record ends at; `each` returns false to stop. Returns what
/// was read; the read ends at a torn tail.
pub fn scan(
    path: &Path,
    from: u64,
    mut each: impl FnMut(&Op, u64) -> bool,
) -> Result<Recovered, LogError> {
    let mut end = FORMAT.magic.len() as u64;
    let mut go = true;
    read_log(path, &FORMAT, |payload| {
        end += (HEADER + payload.len()) as u64;
        if !go || end <= from {
            return Head::decode(payload).is_some();
        }
        match Op::decode(payload) {
            Some(op) => {
                go = each(&op, end);
                true
            }
            None => false,
        }
    })
}

/// Reads the index of `collection` in the data directory `data_dir` (without its lock): the
/// latest version of every document id, removed ones included. `full` names a document whose
/// headers are kept too. `source` tags each entry.
pub fn read_dir(
    data_dir: &Path,
    collection: &str,
    full: Option<&str>,
    source: usize,
) -> Result<(BTreeMap<String, Doc>, Recovered), LogError> {
    let mut docs: BTreeMap<String, Doc> = BTreeMap::new();
    let path = log_path(data_dir, collection);
    let rec = read_log(&path, &FORMAT, |payload| {
        let Some(op) = Op::decode(payload) else {
            return false;
        };
        if docs.get(&op.doc).is_some_and(|d| d.version >= op.version()) {
            return true;
        }
        let headers = if full == Some(op.doc.as_str()) {
            op.headers.clone()
        } else {
            Vec::new()
        };
        let doc = Doc {
            kind: op.kind,
            version: op.version(),
            checksum: op.checksum,
            status: op.status,
            size: op.body.len() as u64,
            headers,
            source,
            doc: op.doc,
        };
        docs.insert(doc.doc.clone(), doc);
        true
    })?;
    Ok((docs, rec))
}

/// Merges indexes read from several distributors by document id: the latest version wins (a
/// newer remove hides an older add). Equal versions are the same op fed twice: the first kept.
pub fn merge(sets: Vec<BTreeMap<String, Doc>>) -> BTreeMap<String, Doc> {
    let mut out: BTreeMap<String, Doc> = BTreeMap::new();
    for set in sets {
        for (k, d) in set {
            match out.get(&k) {
                Some(have) if have.version >= d.version => {}
                _ => {
                    out.insert(k, d);
                }
            }
        }
    }
    out
}
