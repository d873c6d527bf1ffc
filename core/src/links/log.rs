//! The link store's log: one append-only file per application and collection holding every
//! acknowledged data message as received (MS-FSWASDR 3.2.5: "stored on disk, sorted by
//! application and collection").
//!
//! The file is a [`crate::recordlog`] log without magic: checked records (`[u32 length][u32
//! check][payload]`), the payload the marshal dict of one message, without its terminator.
//! Messages are appended in groups and made durable with one fdatasync per group
//! ([`LinkLog::commit`]); the store answers `ack\n` only after that
//! returned. A failed write or sync cuts the file back to its last durable length, so a failed
//! group leaves nothing behind that a later group could be appended after.
//!
//! Reading stops at the first record that is truncated or fails its check (a torn write at the
//! moment of a crash); opening for append cuts the file there. Nothing acknowledged lies beyond
//! that point.

use std::io;
use std::path::{Path, PathBuf};

pub use crate::recordlog::LogError;
use crate::recordlog::{Format, LogWriter, Options};

/// The log's records: no magic, and no limit but the file's size (the store refused longer
/// messages before appending them).
const FORMAT: Format = Format::plain("link store log", usize::MAX);

/// What reading a log found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveredLog {
    /// Intact records.
    pub messages: u64,
    /// Bytes of the intact prefix.
    pub intact_len: u64,
    /// Bytes after it (a torn or corrupt tail).
    pub torn_bytes: u64,
}

impl From<crate::recordlog::Recovered> for RecoveredLog {
    fn from(r: crate::recordlog::Recovered) -> Self {
        RecoveredLog {
            messages: r.records,
            intact_len: r.intact_len,
            torn_bytes: r.torn_bytes,
        }
    }
}

/// Reads every intact record of the log at `path`, in order, calling `each` with its payload.
/// A missing file has no records.
pub fn read_log(path: &Path, mut each: impl FnMut(&[u8])) -> Result<RecoveredLog, LogError> {
    let found = crate::recordlog::read_log(path, &FORMAT, |p| {
        each(p);
        true
    })?;
    Ok(found.into())
}

/// An open log, appended to in groups.
#[derive(Debug)]
pub struct LinkLog {
    log: LogWriter,
}

impl LinkLog {
    /// Opens (creating if needed) the log at `path` for appending: reads it, cuts a torn tail,
    /// and makes the file's existence durable. The directory must exist.
    pub fn open(path: &Path) -> Result<(LinkLog, RecoveredLog), LogError> {
        // Read again by queries and at the next opening, not soon after the sync: its pages
        // leave the cache once synced.
        let (log, recovered) = LogWriter::open(path, Options::new(FORMAT).drop_synced(), |_| true)?;
        Ok((LinkLog { log }, recovered.into()))
    }

    /// Queues one message (its marshal bytes) for the next commit.
    pub fn append(&mut self, payload: &[u8]) {
        self.log.append(payload);
    }

    /// Messages queued since the last commit.
    pub fn pending_messages(&self) -> usize {
        self.log.pending_records()
    }

    /// Writes the queued messages and waits until they are on disk (fdatasync). On success
    /// they may be acknowledged. On failure none of them is stored: the file is cut back to
    /// its last durable length and the queue is emptied, so the caller answers `failed\n` for
    /// each and the log stays usable.
    pub fn commit(&mut self) -> Result<(), LogError> {
        let result = self.log.commit();
        self.log.discard_pending();
        result
    }

    /// Bytes durable in the file.
    pub fn durable_len(&self) -> u64 {
        self.log.committed_len()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.log.path()
    }
}

/// Where the log of `application` and `collection` lives under the store's data directory:
/// `<dir>/<application>/<collection>.log`, the collection name with every byte outside
/// `A-Z a-z 0-9 - _` written as `%XX` (so no name can climb out of the directory), and the
/// empty name as `%`.
pub fn log_path(dir: &Path, application: super::Application, collection: &[u8]) -> PathBuf {
    let mut name = String::with_capacity(collection.len() + 4);
    for &c in collection {
        if c.is_ascii_alphanumeric() || c == b'-' || c == b'_' {
            name.push(c as char);
        } else {
            name.push_str(&format!("%{c:02X}"));
        }
    }
    if name.is_empty() {
        name.push('%');
    }
    name.push_str(".log");
    dir.join(application.name()).join(name)
}

/// The collection name of a log file name written by [`log_path`]; `None` for other files.
fn collection_of(file_name: &str) -> Option<Vec<u8>> {
    let stem = file_name.strip_suffix(".log")?;
    if stem == "%" {
        return Some(Vec::new());
    }
    crate::percent::percent_decode(stem)
}

/// Every log under the data directory `dir`: application, collection and path, sorted. A
/// missing directory holds none.
pub fn stored_logs(dir: &Path) -> Result<Vec<(super::Application, Vec<u8>, PathBuf)>, LogError> {
    let mut out = Vec::new();
    for app in super::Application::ALL {
        let sub = dir.join(app.name());
        let entries = match std::fs::read_dir(&sub) {
            Ok(e) => e,
            // No directory, or something else in its place: no logs of this application.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                continue
            }
            Err(error) => return Err(LogError::new(&sub, "list", error)),
        };
        for entry in entries {
            let entry = entry.map_err(|error| LogError::new(&sub, "list", error))?;
            let name = entry.file_name();
            if let Some(coll) = name.to_str().and_then(collection_of) {
                out.push((app, coll, entry.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::links::Application;

    #[test]
    fn collection_names_map_to_safe_file_names_and_back() {
        let dir = Path::new("/d");
        for name in [&b"sp"[..], b"", b"../x", b"a b%\xff", b"Web_Crawl-1"] {
            let p = log_path(dir, Application::SharePoint, name);
            assert_eq!(p.parent(), Some(Path::new("/d/sharepoint")));
            let file = p.file_name().unwrap().to_str().unwrap();
            assert!(!file.contains('/') && !file.starts_with('.'), "{file}");
            assert_eq!(collection_of(file).as_deref(), Some(name));
        }
        assert_eq!(collection_of("x.tmp"), None);
        assert_eq!(collection_of("%zz.log"), None);
    }
}
