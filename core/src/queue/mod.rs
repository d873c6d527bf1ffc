//! The persistent crawl queue: a deque of opaque records (encoded crawl queue entries, MS-FSCMT
//! 2.2.2.2) in one directory, larger than memory, that survives a crash.
//!
//! The schedulers keep one [`CrawlQueue`] per collection (and per site where the crawl needs it)
//! and one more for the collection's quarantined URIs. CMD_UM_URI entries go to the back
//! ([`CrawlQueue::push_back`]); CMD_UM_URI_URG and entries with `QF_PREPEND`
//! (FSCMT 2.2.2.2.3) to the front ([`CrawlQueue::push_front`]), served before everything queued
//! so far, the newest first.
//!
//! ```
//! use crawlfleet_core::queue::{CrawlQueue, QueueOptions};
//!
//! let dir = std::env::temp_dir().join(format!("cfq-doc-{}", std::process::id()));
//! let mut q = CrawlQueue::open(&dir, QueueOptions::default()).unwrap();
//! q.push_back(b"first").unwrap();
//! q.push_back(b"second").unwrap();
//! q.push_front(b"urgent").unwrap();
//! q.sync().unwrap();
//! assert_eq!(q.pop_front().unwrap().as_deref(), Some(&b"urgent"[..]));
//! let len = q.pop_front_with(|rec| rec.len()).unwrap();
//! assert_eq!(len, Some(5));
//! drop(q);
//! let mut q = CrawlQueue::open(&dir, QueueOptions::default()).unwrap();
//! assert_eq!(q.pop_front().unwrap().as_deref(), Some(&b"second"[..]));
//! # drop(q);
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```
//!
//! # Layout
//!
//! - `back-<start>` segments hold the back log, a FIFO (see `back.rs`): records appended at the tail,
//!   read at the head; a segment the head has left is released at the next sync.
//! - `front-<start>` segments hold the front stack, a LIFO (see `front.rs`), so a prepend is O(1);
//!   a pop serves the stack's top while it is not empty, then the back log's head.
//! - `cursor` holds the head, tail and top (see `cursor.rs`): *live* slots rewritten by every push and
//!   pop (a store into a mapped page, no system call), and *synced* slots rewritten by every sync.
//!
//! Records are written straight into memory-mapped segment files: a push or pop is a copy, an
//! xxh3 check and a 64-byte cursor update. Only a sync makes system calls: an msync of the bytes
//! written since the last sync that are still queued, the directory's fsync when files were
//! created, then the synced cursor slot and its msync. Segment files are created sparse; a
//! consumed back segment becomes a `spare-<start>` file that the next new segment reuses (its
//! pages are allocated and cached: writing into a fresh sparse file costs more than the rest of a
//! push), at most 4 of them, deleted after about 10 syncs without use. So disk use follows what
//! is queued, plus at most 4 segments while the queue is busy.
//!
//! # What a crash loses
//!
//! A *sync* is a return from [`CrawlQueue::sync`], a sync made by [`CrawlQueue::tick`] (the
//! [`SyncPolicy`]: by default every 100 ms; `Interval` also checks the clock every 1024
//! operations, so a busy queue syncs without being ticked), one made after every operation under
//! [`SyncPolicy::Always`], or by `open`, `clear` and dropping the queue.
//!
//! - **The process is killed (SIGKILL, panic, abort), the machine keeps running**: nothing is
//!   lost and nothing is served twice. The segment and cursor pages live in the kernel's page
//!   cache, which outlives the process; every push and pop ends with one publishing store to
//!   the cursor page, so a restart (recognised by the kernel's boot id) resumes exactly after the
//!   last push or pop that returned. The only operation in doubt is one that had not returned
//!   when the process died: it took effect completely or not at all.
//! - **The machine loses power or crashes**: the queue restarts exactly as it was at the last
//!   sync. Every entry pushed before it and not popped before it is there, in order, once.
//!   Entries pushed after it are lost; entries popped after it are served again. With the default
//!   policy that is at most the last 100 ms of operations (plus the time a sync takes).
//!   This needs the file system to honour msync/fsync (ext4, xfs do).
//! - Without a boot id (not Linux) every restart is treated like the second case.
//!
//! A record or file that fails its check never causes a panic: [`CrawlQueue::open`] refuses
//! inconsistent files with [`QueueError::Corrupt`] (naming the file), and a pop that meets a
//! damaged record returns [`QueueError::Corrupt`] after skipping the damage (the rest of that
//! back segment, or the whole front stack), with a log line, so the next pop goes on.
//!
//! One directory belongs to one `CrawlQueue` at a time: the files are memory-mapped, and another
//! writer (or something truncating them) would corrupt the queue.

mod back;
mod compact;
mod cursor;
mod front;
mod segment;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::marshal::{self, DecodeError, Limits};
use crate::msg::{CrawlQueueEntry, Key, MessageError};
use back::BackLog;
use cursor::{CursorFile, Source, State};
use front::FrontStack;

/// When pushes and pops are made durable against a power loss (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// After every push and pop: nothing is lost, at the price of system calls per operation.
    Always,
    /// Group sync: at most once per interval, in [`CrawlQueue::tick`] (and on a clock check
    /// every 1024 operations).
    Interval(Duration),
    /// Only when [`CrawlQueue::sync`] is called. Consumed segments are released by a sync only,
    /// so a queue under this policy must still be synced now and then.
    Manual,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        SyncPolicy::Interval(Duration::from_millis(100))
    }
}

/// How a queue is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueOptions {
    /// Size of a segment file created from now on (existing ones keep theirs); it bounds the
    /// largest record: `segment_bytes` - 48. At least 4096.
    pub segment_bytes: u64,
    /// When to sync.
    pub sync: SyncPolicy,
}

impl Default for QueueOptions {
    fn default() -> Self {
        QueueOptions {
            segment_bytes: 64 << 20,
            sync: SyncPolicy::default(),
        }
    }
}

/// Smallest segment accepted.
pub const MIN_SEGMENT_BYTES: u64 = 4096;
/// Bytes of a segment that no record can use (segment header and record framing).
const SEGMENT_OVERHEAD: u64 = segment::HEADER + front::FOOTER;

/// Why a queue operation failed.
#[derive(Debug)]
pub enum QueueError {
    /// A system call on a queue file failed.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The failure.
        error: io::Error,
    },
    /// A file does not hold what the queue wrote there.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where in the file (or the logical position, for the front stack's top).
        offset: u64,
        /// What failed.
        what: String,
    },
    /// A record is larger than a segment can hold.
    RecordTooLarge {
        /// Its length.
        len: usize,
        /// The largest accepted with these options.
        max: usize,
    },
    /// The options cannot be used.
    BadOptions(String),
    /// A record is not a marshal value.
    Decode(DecodeError),
    /// A record is a marshal value but not a crawl queue entry (FSCMT 2.2.2.2).
    Entry(MessageError),
    /// A record in the compact layout ([`encode_entry`]) is damaged: what failed.
    Compact(&'static str),
}

impl QueueError {
    /// True when the file system had no room ([`crate::diskfull::is_full`]): the operation
    /// changed nothing and can succeed once space returns.
    pub fn is_disk_full(&self) -> bool {
        matches!(self, QueueError::Io { error, .. } if crate::diskfull::is_full(error))
    }

    fn io(path: &Path, op: &'static str, error: io::Error) -> Self {
        QueueError::Io {
            path: path.to_owned(),
            op,
            error,
        }
    }
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueError::Io { path, op, error } => {
                write!(f, "{}: {op}: {error}", path.display())
            }
            QueueError::Corrupt { path, offset, what } => {
                write!(f, "{}: corrupt at {offset}: {what}", path.display())
            }
            QueueError::RecordTooLarge { len, max } => write!(
                f,
                "a queue record of {len} bytes exceeds the largest a segment holds ({max})"
            ),
            QueueError::BadOptions(why) => write!(f, "queue options: {why}"),
            QueueError::Decode(e) => write!(f, "queue record: {e}"),
            QueueError::Entry(e) => write!(f, "queue record: {e}"),
            QueueError::Compact(what) => write!(f, "queue record: {what}"),
        }
    }
}

impl std::error::Error for QueueError {}

/// Where [`CrawlQueue::open`] resumed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumed {
    /// A new queue.
    Created,
    /// Exactly after the last push or pop (the process ended on this boot).
    LastOperation,
    /// The last sync (first open after a reboot, or the live cursor failed its check).
    LastSync,
}

/// A persistent deque of opaque records (encoded crawl queue entries), in one directory.
pub struct CrawlQueue {
    dir: PathBuf,
    opts: QueueOptions,
    cursor: CursorFile,
    state: State,
    /// The state of the last sync.
    synced: State,
    back: BackLog,
    front: FrontStack,
    /// Files found at open that the state does not need, deleted after the first sync.
    stale: Vec<PathBuf>,
    last_sync: Instant,
    ops_since_clock: u32,
    resumed: Resumed,
    /// Pops taken with [`CrawlQueue::pop_front_unpublished`] or pushes made with
    /// [`CrawlQueue::push_unpublished`] that the live cursor does not show yet.
    unpublished: bool,
    /// The live cursor's generation the queue resumed from ([`CrawlQueue::resumed_generation`]).
    resumed_gen: u64,
}

impl CrawlQueue {
    /// Opens the queue in `dir`, creating the directory and an empty queue if needed, or
    /// recovering the queue there (see the module doc for the state it resumes), and syncs.
    pub fn open(dir: &Path, opts: QueueOptions) -> Result<CrawlQueue, QueueError> {
        if opts.segment_bytes < MIN_SEGMENT_BYTES || usize::try_from(opts.segment_bytes).is_err() {
            return Err(QueueError::BadOptions(format!(
                "segment_bytes {} is not between {MIN_SEGMENT_BYTES} and the address space",
                opts.segment_bytes
            )));
        }
        if let SyncPolicy::Interval(d) = opts.sync {
            if d.is_zero() {
                return Err(QueueError::BadOptions(
                    "a zero sync interval; use SyncPolicy::Always".into(),
                ));
            }
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| QueueError::io(dir, "creating the queue directory", e))?;
        let cursor_path = dir.join("cursor");
        let (cursor, mut state, resumed) = if cursor_path.exists() {
            let (c, s, src) = CursorFile::open(&cursor_path)?;
            let r = match src {
                Source::Live => Resumed::LastOperation,
                Source::Synced => Resumed::LastSync,
            };
            (c, s, r)
        } else {
            let back = segment::list(dir, segment::Kind::Back)?;
            let front = segment::list(dir, segment::Kind::Front)?;
            if let Some((_, p)) = back.first().or(front.first()) {
                return Err(QueueError::Corrupt {
                    path: cursor_path,
                    offset: 0,
                    what: format!("missing, but segment files such as {} exist", p.display()),
                });
            }
            let s = State::default();
            (CursorFile::create(&cursor_path, &s)?, s, Resumed::Created)
        };
        // Read before this open publishes its own state (which counts as a generation).
        let resumed_gen = cursor.live_gen();
        let mut stale = Vec::new();
        let back = BackLog::open(dir, &mut state, opts.segment_bytes, &mut stale)?;
        let front = FrontStack::open(dir, &mut state, &mut stale)?;
        let mut q = CrawlQueue {
            dir: dir.to_owned(),
            opts,
            cursor,
            state,
            synced: State::default(),
            back,
            front,
            stale,
            last_sync: Instant::now(),
            ops_since_clock: 0,
            resumed,
            unpublished: false,
            resumed_gen,
        };
        if resumed == Resumed::LastSync {
            log::info!(
                "{}: resumed from the last sync ({} entries)",
                dir.display(),
                q.len()
            );
        }
        q.cursor.stamp_boot_id();
        q.cursor.write_live(&q.state);
        q.force_sync()?;
        Ok(q)
    }

    fn check_size(&self, record: &[u8]) -> Result<(), QueueError> {
        let max = (self.opts.segment_bytes - SEGMENT_OVERHEAD).min(u64::from(u32::MAX - 1));
        if record.len() as u64 > max {
            return Err(QueueError::RecordTooLarge {
                len: record.len(),
                max: max as usize,
            });
        }
        Ok(())
    }

    /// Publishes the state after a push or pop and applies the sync policy.
    #[inline]
    fn after_op(&mut self) -> Result<(), QueueError> {
        self.unpublished = false;
        self.cursor.write_live(&self.state);
        match self.opts.sync {
            SyncPolicy::Always => self.sync(),
            SyncPolicy::Interval(_) => {
                self.ops_since_clock += 1;
                if self.ops_since_clock >= 1024 {
                    self.ops_since_clock = 0;
                    self.tick(Instant::now())?;
                }
                Ok(())
            }
            SyncPolicy::Manual => Ok(()),
        }
    }

    /// Appends a record at the back (CMD_UM_URI).
    #[inline]
    pub fn push_back(&mut self, record: &[u8]) -> Result<(), QueueError> {
        self.check_size(record)?;
        self.back
            .push(&mut self.state, record, self.opts.segment_bytes)?;
        self.after_op()
    }

    /// Puts a record at the front (CMD_UM_URI_URG, QF_PREPEND): it is served before everything
    /// queued so far, including earlier front pushes.
    pub fn push_front(&mut self, record: &[u8]) -> Result<(), QueueError> {
        self.check_size(record)?;
        self.front
            .push(&mut self.state, record, self.opts.segment_bytes)?;
        self.after_op()
    }

    /// Puts a record at the front (`front`) or the back without publishing it: the record is
    /// in the mapped files, but the live cursor names it only from the next
    /// [`CrawlQueue::publish`] (or any operation that publishes), so a kill before that drops
    /// it. Lets a caller make many pushes visible at once, after which it writes what must
    /// only outlive the pushes.
    pub fn push_unpublished(&mut self, record: &[u8], front: bool) -> Result<(), QueueError> {
        self.check_size(record)?;
        if front {
            self.front
                .push(&mut self.state, record, self.opts.segment_bytes)?;
        } else {
            self.back
                .push(&mut self.state, record, self.opts.segment_bytes)?;
        }
        self.unpublished = true;
        Ok(())
    }

    /// Takes the first record, copied out. See [`CrawlQueue::pop_front_with`] to avoid the copy.
    pub fn pop_front(&mut self) -> Result<Option<Vec<u8>>, QueueError> {
        self.pop_front_with(<[u8]>::to_vec)
    }

    /// Takes the first record and hands it to `f` in place (no copy, no allocation); returns what
    /// `f` returns, or `None` when the queue is empty.
    #[inline]
    pub fn pop_front_with<R>(
        &mut self,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, QueueError> {
        let r = self.take_front_with(f);
        // Even a failed pop may have moved past damage: publish the state either way.
        let after = self.after_op();
        let r = r?;
        after?;
        Ok(r)
    }

    /// Takes the first record like [`CrawlQueue::pop_front`], without publishing the pop: a
    /// process killed before [`CrawlQueue::publish`] (or the next push or sync, which publish
    /// it too) finds the record still queued. A caller that keeps the record elsewhere (a
    /// journal) writes it there first, then publishes, so a kill at any point leaves the record
    /// in the queue, in both places, or in the other place, never in neither.
    pub fn pop_front_unpublished(&mut self) -> Result<Option<Vec<u8>>, QueueError> {
        let r = self.take_front_with(<[u8]>::to_vec);
        self.unpublished = true;
        r
    }

    /// Takes the first record (the front stack before the back queue) and hands it to `f`,
    /// without publishing the state.
    #[inline]
    fn take_front_with<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Result<Option<R>, QueueError> {
        if self.state.top != 0 {
            self.front.pop_with(&mut self.state, f)
        } else {
            self.back.pop_with(&mut self.state, f)
        }
    }

    /// Publishes the pops taken by [`CrawlQueue::pop_front_unpublished`] and the pushes made
    /// by [`CrawlQueue::push_unpublished`]: from here they outlive the process.
    pub fn publish(&mut self) -> Result<(), QueueError> {
        if std::mem::take(&mut self.unpublished) {
            self.after_op()?;
        }
        Ok(())
    }

    /// The generation the next publication gives the live cursor: every push, pop or
    /// [`CrawlQueue::publish`] that publishes adds one. A caller that writes elsewhere what must
    /// count only once its pushes are published names this generation there, and
    /// [`CrawlQueue::resumed_generation`] tells a restart whether they were.
    pub fn next_publish_generation(&self) -> u64 {
        self.cursor.live_gen().wrapping_add(1)
    }

    /// The generation of the live cursor this open resumed from: every publication up to it
    /// outlived the process, none after it did. 0 when the queue was created, or resumed from
    /// its last sync (after a reboot): then no publication is known to have outlived it.
    pub fn resumed_generation(&self) -> u64 {
        self.resumed_gen
    }

    /// True when pops taken by [`CrawlQueue::pop_front_unpublished`] wait to be published.
    pub fn has_unpublished(&self) -> bool {
        self.unpublished
    }

    /// Records queued.
    pub fn len(&self) -> u64 {
        self.state.tail_seq - self.state.head_seq + self.state.front_len
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes every push and pop so far durable against a power loss, then deletes the segment
    /// files no longer needed. Does nothing when nothing changed since the last sync.
    pub fn sync(&mut self) -> Result<(), QueueError> {
        let idle = self.state == self.synced
            && self.back.released.is_empty()
            && self.back.spares.is_empty()
            && self.stale.is_empty()
            && !self.front.has_spare()
            && !self.back.dir_changed
            && !self.front.dir_changed;
        if idle {
            self.last_sync = Instant::now();
            return Ok(());
        }
        self.force_sync()
    }

    fn force_sync(&mut self) -> Result<(), QueueError> {
        if std::mem::take(&mut self.unpublished) {
            self.cursor.write_live(&self.state);
        }
        self.back.flush(&self.state)?;
        self.front.flush(&self.state)?;
        if self.back.dir_changed || self.front.dir_changed {
            cursor::sync_dir(self.cursor.path())?;
            self.back.dir_changed = false;
            self.front.dir_changed = false;
        }
        self.cursor.write_synced(&self.state)?;
        self.synced = self.state;
        // The durable cursor no longer needs these files.
        let deleted = !self.stale.is_empty();
        for p in self.stale.drain(..) {
            segment::remove_file(&p)?;
        }
        self.back.dir_changed |= deleted;
        self.back.after_sync()?;
        self.front.after_sync(&self.state)?;
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Syncs if the policy's interval has elapsed since the last sync (always under
    /// [`SyncPolicy::Always`], never under [`SyncPolicy::Manual`]); true if it synced.
    pub fn tick(&mut self, now: Instant) -> Result<bool, QueueError> {
        let due = match self.opts.sync {
            SyncPolicy::Always => true,
            SyncPolicy::Interval(d) => now.saturating_duration_since(self.last_sync) >= d,
            SyncPolicy::Manual => false,
        };
        if due {
            self.sync()?;
        }
        Ok(due)
    }

    /// Drops every record (the collection was removed), durably.
    pub fn clear(&mut self) -> Result<(), QueueError> {
        self.back.clear(&mut self.state)?;
        self.state.top = 0;
        self.state.front_len = 0;
        self.cursor.write_live(&self.state);
        self.force_sync()?;
        // Nothing is queued: no file but the tail segment is worth keeping.
        self.front.remove_all()?;
        self.back.remove_spares()
    }

    /// Bytes of the queue's files (apparent sizes; segment files are sparse until written).
    pub fn disk_bytes(&self) -> u64 {
        self.back.file_bytes() + self.front.file_bytes() + cursor::FILE_BYTES
    }

    /// The queue's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where `open` resumed from.
    pub fn resumed(&self) -> Resumed {
        self.resumed
    }
}

impl Drop for CrawlQueue {
    /// A clean close syncs, so the next start resumes exactly even after a reboot.
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            log::error!("{}: sync on close failed: {e}", self.dir.display());
        }
    }
}

/// Record codec for crawl queue entries (FSCMT 2.2.2.2): appends the record of `e` to `out`, in
/// the compact layout of `compact.rs` (the queue's files are private, and a third of the bytes
/// is a third of the page faults and write-back), or, for an entry with extra metadata, the
/// marshal bytes of [`CrawlQueueEntry::to_value`].
pub fn encode_entry(e: &CrawlQueueEntry<'_>, out: &mut Vec<u8>) {
    if !compact::encode(e, out) {
        marshal::encode_into(&e.to_value(), out);
    }
}

/// Decodes a record written by [`encode_entry`], or the marshal record of an entry that queues
/// written before the compact layout hold; the entry borrows its strings from `rec`.
pub fn decode_entry(rec: &[u8]) -> Result<CrawlQueueEntry<'_>, QueueError> {
    if rec.first() == Some(&compact::MAGIC) {
        return compact::decode(rec).map_err(QueueError::Compact);
    }
    // The marshal records of entries without extra metadata are read straight (the same entry
    // the general decoder gives, without building marshal values); anything else takes the
    // general path.
    let limits = Limits::default();
    if let Some(e) = crate::msg::decode_entry_flat(rec, &limits) {
        return Ok(e);
    }
    let v = marshal::from_bytes(rec, &limits).map_err(QueueError::Decode)?;
    CrawlQueueEntry::from_value(Key::Data, &v).map_err(QueueError::Entry)
}

/// The URI and URI flags of a record written by [`encode_entry`], as [`decode_entry`] gives
/// them (the same error for a record it refuses), without building the entry when the record
/// is compact or a marshal one in the layout read straight.
pub fn peek_entry(rec: &[u8]) -> Result<(Cow<'_, [u8]>, i64), QueueError> {
    if rec.first() == Some(&compact::MAGIC) {
        return compact::peek(rec)
            .map(|(uri, flags)| (Cow::Borrowed(uri), flags))
            .map_err(QueueError::Compact);
    }
    if let Some((uri, flags)) = crate::msg::peek_entry_flat(rec, &Limits::default()) {
        return Ok((Cow::Borrowed(uri), flags));
    }
    decode_entry(rec).map(|e| (e.uri.uri, e.uri_flags))
}
