//! The document feed: where a node scheduler sends every add, update and delete of a crawled
//! document (the "content-indexing process" of FSCMT 3.1.5.14-16). [`FeedSink`] is the interface;
//! [`DocLog`] is the durable document log of a collection that implements it, [`DocLogReader`]
//! reads it back, and [`Feeder`] holds documents while feeding is suspended
//! (CMD_ADM_CONF_FEEDING_SUSPEND, FSCMT 2.2.3.7 and 3.1.5.6). [`session`] holds what the node's
//! session sink needs to feed the log's durable documents into content distributor sessions.
//!
//! ```
//! use crawlfleet_core::feed::{DocLog, DocLogReader, FeedDoc, FeedOp, FeedSink};
//!
//! let dir = std::env::temp_dir().join(format!("cf-feed-doc-{}", std::process::id()));
//! # let _ = std::fs::remove_dir_all(&dir);
//! let mut log = DocLog::open(&dir).unwrap();
//! let doc = FeedDoc {
//!     op: FeedOp::Add,
//!     uri: b"http://example.com/".to_vec(),
//!     checksum: [1; 16],
//!     time: 1_700_000_000,
//!     status: 200,
//!     headers: vec![("content-type".into(), b"text/html".to_vec())],
//!     body: b"<html></html>".to_vec(),
//! };
//! assert_eq!(log.feed(&doc).unwrap(), 1);
//! log.sync().unwrap(); // durable from here
//! let read: Vec<_> = DocLogReader::open(&dir).unwrap().collect::<Result<_, _>>().unwrap();
//! assert_eq!(read, vec![(1, doc)]);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod held;
mod log;
pub mod session;

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::recordlog::{put_bytes, Cur};
pub use held::{FeedCommit, Feeder, Resume, DOCS_DIR, HELD_DIR};
pub use log::{DocCommit, DocLog, DocLogOptions, DocLogReader};

/// What a fed document does to the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedOp {
    /// A document crawled for the first time.
    Add,
    /// A document crawled again with new content.
    Update,
    /// A document that is gone (404/410 on refresh, deleted site or URIs, FSCMT 3.1.5.15-16).
    Delete,
}

impl FeedOp {
    /// The lower-case name (`add`, `update`, `delete`).
    pub fn name(self) -> &'static str {
        match self {
            FeedOp::Add => "add",
            FeedOp::Update => "update",
            FeedOp::Delete => "delete",
        }
    }

    fn code(self) -> u8 {
        match self {
            FeedOp::Add => 1,
            FeedOp::Update => 2,
            FeedOp::Delete => 3,
        }
    }

    fn from_code(c: u8) -> Option<FeedOp> {
        Some(match c {
            1 => FeedOp::Add,
            2 => FeedOp::Update,
            3 => FeedOp::Delete,
            _ => return None,
        })
    }
}

/// One document operation sent to the feed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedDoc {
    /// Add, update or delete.
    pub op: FeedOp,
    /// The document's URI.
    pub uri: Vec<u8>,
    /// MD5 of the body (of the deleted document for a delete).
    pub checksum: [u8; 16],
    /// When it was crawled (or deleted), unix seconds.
    pub time: u64,
    /// The HTTP status of the fetch.
    pub status: u16,
    /// The response headers, names as received. Empty for a delete.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The document body. Empty for a delete.
    pub body: Vec<u8>,
}

/// Largest URI accepted (64 KiB).
pub const MAX_URI: usize = 64 << 10;
/// Largest total of header names and values accepted (8 MiB).
pub const MAX_HEADERS: usize = 8 << 20;
/// Largest body accepted (256 MiB).
pub const MAX_BODY: usize = 256 << 20;
/// Largest record payload a reader accepts.
pub(crate) const MAX_RECORD: usize = MAX_URI + MAX_HEADERS + MAX_BODY + (1 << 20);

/// Why the feed refused a document or could not go on.
#[derive(Debug)]
pub enum FeedError {
    /// A file or directory could not be used.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        error: io::Error,
    },
    /// A file is damaged where no crash can have left it so (not at the end of the newest
    /// segment), or is not a document log.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where, in bytes from its start.
        offset: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// A field of the document is over its limit.
    TooLarge {
        /// The field.
        field: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A delete came with headers or a body.
    DeleteWithContent,
}

impl fmt::Display for FeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeedError::Io { path, error } => write!(f, "{}: {error}", path.display()),
            FeedError::Corrupt { path, offset, what } => {
                write!(f, "{}: {what} at offset {offset}", path.display())
            }
            FeedError::TooLarge { field, len, limit } => {
                write!(
                    f,
                    "document {field} of {len} bytes is over the {limit}-byte limit"
                )
            }
            FeedError::DeleteWithContent => f.write_str("a delete carries no headers or body"),
        }
    }
}

impl std::error::Error for FeedError {}

impl FeedError {
    /// True when the file system had no room ([`crate::diskfull::is_full`]): the same write
    /// can succeed once space returns.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, FeedError::Io { error, .. } if crate::diskfull::is_full(error))
    }
}

/// Maps an I/O error on `path` to a [`FeedError`].
pub(crate) fn io_err(path: &std::path::Path) -> impl Fn(io::Error) -> FeedError + '_ {
    move |error| FeedError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// Where documents go: the document log now, content distributor sessions later.
pub trait FeedSink {
    /// Accepts one document; returns its sequence number in the sink. Durable only after
    /// [`FeedSink::sync`] returned.
    fn feed(&mut self, doc: &FeedDoc) -> Result<u64, FeedError>;

    /// Makes every document accepted so far durable.
    fn sync(&mut self) -> Result<(), FeedError>;
}

impl FeedDoc {
    /// Refuses a document the log cannot hold.
    pub fn validate(&self) -> Result<(), FeedError> {
        let too = |field, len, limit| {
            if len > limit {
                Err(FeedError::TooLarge { field, len, limit })
            } else {
                Ok(())
            }
        };
        too("uri", self.uri.len(), MAX_URI)?;
        too("body", self.body.len(), MAX_BODY)?;
        too("headers", self.headers_len(), MAX_HEADERS)?;
        if self.op == FeedOp::Delete && (!self.headers.is_empty() || !self.body.is_empty()) {
            return Err(FeedError::DeleteWithContent);
        }
        Ok(())
    }

    /// Bytes the headers take in the record: each name and value with its u32 length.
    fn headers_len(&self) -> usize {
        self.headers
            .iter()
            .map(|(n, v)| n.len() + v.len() + 8)
            .sum()
    }

    /// The length of the payload [`FeedDoc::encode`] appends.
    pub(crate) fn encoded_len(&self) -> usize {
        8 + 1 + 2 + 8 + 16 + 4 + self.uri.len() + 4 + self.headers_len() + 4 + self.body.len()
    }

    /// Appends the payload of the record of this document as number `seq`:
    /// seq u64, op u8, status u16, time u64, checksum (16 bytes), uri, header count u32, each
    /// header's name and value, body (byte strings with a u32 length prefix, little-endian).
    pub(crate) fn encode(&self, seq: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&seq.to_le_bytes());
        out.push(self.op.code());
        out.extend_from_slice(&self.status.to_le_bytes());
        out.extend_from_slice(&self.time.to_le_bytes());
        out.extend_from_slice(&self.checksum);
        put_bytes(out, &self.uri);
        out.extend_from_slice(&(self.headers.len() as u32).to_le_bytes());
        for (name, value) in &self.headers {
            put_bytes(out, name.as_bytes());
            put_bytes(out, value);
        }
        put_bytes(out, &self.body);
    }

    /// Decodes a record payload; `None` when malformed.
    pub(crate) fn decode(p: &[u8]) -> Option<(u64, FeedDoc)> {
        let mut c = Cur(p);
        let seq = c.u64()?;
        let op = FeedOp::from_code(c.u8()?)?;
        let status = c.u16()?;
        let time = c.u64()?;
        let checksum = c.array::<16>()?;
        let uri = c.bytes()?.to_vec();
        let n = c.u32()? as usize;
        // Each header takes at least 8 bytes: a count beyond that is damage, not a reason to
        // allocate.
        if n > c.0.len() / 8 {
            return None;
        }
        let mut headers = Vec::with_capacity(n);
        for _ in 0..n {
            let name = String::from_utf8(c.bytes()?.to_vec()).ok()?;
            headers.push((name, c.bytes()?.to_vec()));
        }
        let body = c.bytes()?.to_vec();
        let doc = FeedDoc {
            op,
            uri,
            checksum,
            time,
            status,
            headers,
            body,
        };
        c.is_empty().then_some((seq, doc))
    }
}

#[cfg(test)]
mod tests;
