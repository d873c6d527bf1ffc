//! The durable record log of the project: the checked record every log writes (`framing.rs`:
//! `[u32 length][u32 check][payload]`, the torn-record reader, a payload cursor, crash-safe
//! replacement), and one appending writer, [`LogWriter`], which the duplicate server's log, the
//! link store's logs, the routing database, the crawl store, a node's in-flight journal and seen
//! set, and the document log (one writer per segment) write through (the crawl queue, an mmap
//! ring, is not an append log). The writer offers what the stores need:
//!
//! - group commit: records are queued, [`LogWriter::commit`] writes them and fdatasyncs before
//!   any of them may be acknowledged; or, pipelined, [`LogWriter::write_pending`] writes them and
//!   the returned [`SyncPoint`] is synced on another thread while the next group is built; or
//!   split, [`LogWriter::commit_begin`] writes them, [`run_commits`] runs the fdatasyncs of
//!   several logs' commits at once on helper threads, and [`LogWriter::commit_end`] settles
//!   each as a commit would (a node's sync makes its seen set, journal, document log and crawl
//!   store durable together);
//! - a file grown ahead with zeros ([`Options::grow_step`]), so that a sync flushes data only
//!   (a zero header is never a record: it reads as the end of the log); the zeros are written
//!   and synced a chunk at a time by a thread of the writer's (`grow.rs`), ahead of need, so
//!   that neither the writing thread nor a commit's fdatasync waits for them;
//! - torn-tail truncation on open: [`LogWriter::open`] reads to the last good record, cuts the
//!   rest and says how many bytes it cut ([`Recovered`]);
//! - cut-back on a failed write or sync (ENOSPC, EIO): the file goes back to where the failed
//!   write started, or to the last committed length when the sync failed, so nothing is ever
//!   appended after garbage; the records of a failed write stay queued, in order, those written
//!   since the last commit are read back into the queue when its sync fails, and
//!   [`LogWriter::write_over`] keeps queueing while the disk is full, so that an operation is
//!   never cut in half by it and the next commit writes everything once room returns;
//! - room reserved ahead: [`LogWriter::reserve`] allocates blocks past the end (fallocate,
//!   the size unchanged) so that a full disk fails before the caller acts, not at the write;
//! - segments and compaction: [`LogWriter::segment_full`] and [`LogWriter::rotate`] move on to a
//!   new file past a size limit ([`LogWriter::rotate_to`] to one whose head, made by
//!   [`LogWriter::create`], carries more than the magic: a segment's first sequence number); [`LogWriter::compact`] rewrites the live records, which a
//!   callback gives, into a new file that replaces the log atomically;
//! - one I/O error, [`LogError`] (the file, what was being done, the failure), which each store
//!   maps into its own.
//!
//! An optional magic ([`Format::magic`]) starts the file; the records follow. The stores keep
//! their own payloads and file names, so their files are what they were before this module.

pub(crate) mod framing;
mod grow;
mod writer;

#[cfg(test)]
mod tests;

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};

pub use framing::sync_parent;
pub(crate) use framing::{
    begin, check, put_bytes, read_next, seal, sync_dir, write_atomic, Cur, Next, HEADER,
};
pub use writer::{run_commits, Commit, Compaction, LogWriter, Options, SyncPoint};

/// A log file that could not be read or written.
#[derive(Debug)]
pub struct LogError {
    /// The file.
    pub path: PathBuf,
    /// What was being done ("open", "write", "sync", ...).
    pub action: &'static str,
    /// The failure.
    pub error: io::Error,
}

impl LogError {
    /// An error of `action` on `path`.
    pub fn new(path: &Path, action: &'static str, error: io::Error) -> LogError {
        LogError {
            path: path.to_owned(),
            action,
            error,
        }
    }

    /// True when the file system has no room ([`crate::diskfull::is_full`]: ENOSPC, EDQUOT, or
    /// EFBIG, the process's file size limit), so that the operation may succeed once space
    /// returns.
    pub fn is_no_space(&self) -> bool {
        crate::diskfull::is_full(&self.error)
    }
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

impl std::error::Error for LogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// What a log file looks like: its first bytes and its largest record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Bytes the file starts with (empty: none). A file too short to hold them whose bytes
    /// begin them is a log torn while it was being created, and opens as a new log; any other
    /// start is refused, the file left alone.
    pub magic: &'static [u8],
    /// What the file is, for the refusal of a bad magic ("not a crawl store (bad magic)").
    pub name: &'static str,
    /// Largest payload a reader accepts; a longer one is a damaged record.
    pub max_record: usize,
}

impl Format {
    /// No magic; payloads up to `max_record` bytes.
    pub const fn plain(name: &'static str, max_record: usize) -> Format {
        Format {
            magic: b"",
            name,
            max_record,
        }
    }
}

/// What reading a log found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Intact records.
    pub records: u64,
    /// Bytes of the intact prefix, magic included (0 for a missing file).
    pub intact_len: u64,
    /// Bytes after it: a torn or damaged tail, or the zeros a grown file ends with.
    pub torn_bytes: u64,
    /// Why reading stopped before the end of the file, if it did.
    pub torn: Option<&'static str>,
}

/// The bytes of the file at `path` when it is of an earlier, unversioned format: it exists and
/// does not start with `format`'s magic (nor with a part of it: a log torn while it was being
/// created). `None` for a missing file or a log of `format`. A store that finds some migrates
/// them before opening the log.
pub fn earlier_format(path: &Path, format: &Format) -> Result<Option<Vec<u8>>, LogError> {
    let err = |e| LogError::new(path, "read", e);
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err(e)),
    };
    let mut bytes = Vec::new();
    (&mut file)
        .take(format.magic.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(err)?;
    if format.magic.starts_with(&bytes) {
        return Ok(None);
    }
    file.read_to_end(&mut bytes).map_err(err)?;
    Ok(Some(bytes))
}

/// Reads every intact record of the log at `path`, in order, calling `each` with its payload;
/// `each` returns false for a payload it cannot decode, which ends the log there like a torn
/// record. A missing file has no records; one starting with something else than the format's
/// magic is refused (InvalidData). Nothing is allocated beyond what the file holds.
pub fn read_log(
    path: &Path,
    format: &Format,
    mut each: impl FnMut(&[u8]) -> bool,
) -> Result<Recovered, LogError> {
    let err = |action, e| LogError::new(path, action, e);
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Recovered::default()),
        Err(e) => return Err(err("open", e)),
    };
    let size = file.metadata().map_err(|e| err("stat", e))?.len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut out = Recovered::default();
    let magic_len = format.magic.len() as u64;
    if magic_len > 0 {
        let mut head = vec![0u8; size.min(magic_len) as usize];
        r.read_exact(&mut head).map_err(|e| err("read", e))?;
        if !format.magic.starts_with(&head) {
            let why = format!("not a {} (bad magic)", format.name);
            return Err(err("read", io::Error::new(io::ErrorKind::InvalidData, why)));
        }
        if size < magic_len {
            // Created and torn before its magic was complete: a new log.
            out.torn_bytes = size;
            out.torn = Some("truncated magic");
            return Ok(out);
        }
        out.intact_len = magic_len;
    }
    let mut payload = Vec::new();
    loop {
        let next = read_next(
            &mut r,
            size - out.intact_len,
            format.max_record,
            &mut payload,
        )
        .map_err(|e| err("read", e))?;
        match next {
            Next::End => break,
            Next::Torn(why) => {
                out.torn = Some(why);
                break;
            }
            Next::Record => {}
        }
        if !each(&payload) {
            out.torn = Some("malformed record");
            break;
        }
        out.records += 1;
        out.intact_len += (HEADER + payload.len()) as u64;
    }
    out.torn_bytes = size - out.intact_len;
    Ok(out)
}
