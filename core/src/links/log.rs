//! The link store's log: one append-only file per application and collection holding every
//! acknowledged data message as received (MS-FSWASDR 3.2.5: "stored on disk, sorted by
//! application and collection").
//!
//! A record is the project's checked record (`crate::recordlog`: `[u32 length][u32 check]
//! [payload]`), the payload the marshal dict of one message, without its terminator. Messages are appended in groups and made durable with
//! one fdatasync per group ([`LinkLog::commit`]); the store answers `ack\n` only after that
//! returned. A failed write or sync cuts the file back to its last durable length, so a failed
//! group leaves nothing behind that a later group could be appended after.
//!
//! Reading stops at the first record that is truncated or fails its check (a torn write at the
//! moment of a crash); opening for append cuts the file there. Nothing acknowledged lies beyond
//! that point.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};

use crate::recordlog::{begin, read_next, seal, Next, HEADER};

/// A log file that could not be read or written.
#[derive(Debug)]
pub struct LogError {
    /// The file.
    pub path: PathBuf,
    /// What was being done.
    pub action: &'static str,
    /// The failure.
    pub error: io::Error,
}

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.path.display(),
            self.action,
            self.error
        )
    }
}

impl std::error::Error for LogError {}

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

/// Reads every intact record of the log at `path`, in order, calling `each` with its payload.
/// A missing file has no records.
pub fn read_log(path: &Path, mut each: impl FnMut(&[u8])) -> Result<RecoveredLog, LogError> {
    let err = |action, error| LogError {
        path: path.to_owned(),
        action,
        error,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(RecoveredLog::default()),
        Err(e) => return Err(err("open", e)),
    };
    let size = file.metadata().map_err(|e| err("stat", e))?.len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut out = RecoveredLog::default();
    let mut payload = Vec::new();
    // Nothing is allocated beyond what the file holds.
    while let Next::Record = read_next(&mut r, size - out.intact_len, usize::MAX, &mut payload)
        .map_err(|e| err("read", e))?
    {
        each(&payload);
        out.messages += 1;
        out.intact_len += (HEADER + payload.len()) as u64;
    }
    out.torn_bytes = size - out.intact_len;
    Ok(out)
}

/// An open log, appended to in groups.
#[derive(Debug)]
pub struct LinkLog {
    path: PathBuf,
    file: File,
    pending: Vec<u8>,
    pending_messages: usize,
    /// Bytes known durable; the file is cut back to this after a failed commit.
    durable_len: u64,
    /// A failed commit could not cut the file back: the next commit must first.
    needs_cut: bool,
}

impl LinkLog {
    /// Opens (creating if needed) the log at `path` for appending: reads it, cuts a torn tail,
    /// and makes the file's existence durable. The directory must exist.
    pub fn open(path: &Path) -> Result<(LinkLog, RecoveredLog), LogError> {
        let recovered = read_log(path, |_| {})?;
        let err = |action, error| LogError {
            path: path.to_owned(),
            action,
            error,
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| err("open", e))?;
        if recovered.torn_bytes > 0 {
            log::warn!(
                "{}: cutting a torn tail of {} bytes after {} messages",
                path.display(),
                recovered.torn_bytes,
                recovered.messages
            );
            file.set_len(recovered.intact_len)
                .map_err(|e| err("truncate", e))?;
        }
        file.sync_all().map_err(|e| err("sync", e))?;
        crate::checksum::wal::sync_parent(path).map_err(|e| err("sync directory", e))?;
        Ok((
            LinkLog {
                path: path.to_owned(),
                file,
                pending: Vec::with_capacity(1 << 16),
                pending_messages: 0,
                durable_len: recovered.intact_len,
                needs_cut: false,
            },
            recovered,
        ))
    }

    /// Queues one message (its marshal bytes) for the next commit.
    pub fn append(&mut self, payload: &[u8]) {
        let start = begin(&mut self.pending);
        self.pending.extend_from_slice(payload);
        seal(&mut self.pending, start);
        self.pending_messages += 1;
    }

    /// Messages queued since the last commit.
    pub fn pending_messages(&self) -> usize {
        self.pending_messages
    }

    /// Writes the queued messages and waits until they are on disk (fdatasync). On success
    /// they may be acknowledged. On failure none of them is stored: the file is cut back to
    /// its last durable length and the queue is emptied, so the caller answers `failed\n` for
    /// each and the log stays usable.
    pub fn commit(&mut self) -> Result<(), LogError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let n = self.pending.len() as u64;
        let result = self.write_and_sync();
        self.pending.clear();
        self.pending_messages = 0;
        match result {
            Ok(()) => {
                self.durable_len += n;
                Ok(())
            }
            Err(e) => {
                self.cut_back();
                Err(e)
            }
        }
    }

    fn write_and_sync(&mut self) -> Result<(), LogError> {
        let err = |action, error| LogError {
            path: self.path.clone(),
            action,
            error,
        };
        if self.needs_cut {
            self.file
                .set_len(self.durable_len)
                .map_err(|e| err("truncate", e))?;
            self.needs_cut = false;
        }
        (&self.file)
            .write_all(&self.pending)
            .map_err(|e| err("write", e))?;
        self.file.sync_data().map_err(|e| err("sync", e))
    }

    /// After a failed write or sync: remove whatever part of the group reached the file.
    fn cut_back(&mut self) {
        let cut = self
            .file
            .set_len(self.durable_len)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = cut {
            log::error!(
                "{}: cannot cut back to {} bytes after a failed commit: {e}; retrying before \
                 the next commit",
                self.path.display(),
                self.durable_len
            );
            self.needs_cut = true;
        }
    }

    /// Bytes durable in the file.
    pub fn durable_len(&self) -> u64 {
        self.durable_len
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
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
    let b = stem.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
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
            Err(error) => {
                return Err(LogError {
                    path: sub,
                    action: "list",
                    error,
                })
            }
        };
        for entry in entries {
            let entry = entry.map_err(|error| LogError {
                path: sub.clone(),
                action: "list",
                error,
            })?;
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
