//! The appending writer of a record log: group commit (plain or pipelined), a file grown ahead
//! (on a thread of its own, `grow.rs`), torn-tail truncation on open, cut-back after a failed
//! write, rotation and compaction.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::grow::Grower;
use super::{begin, read_log, seal, sync_parent, write_atomic, Format, LogError, Recovered};

/// How a log is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// The file's magic and record limit.
    pub format: Format,
    /// Grow the file with zeros this many bytes at a time ahead of the records (0: append,
    /// the file ending at its last record). Records written over zeros make a sync flush data
    /// only; a growing file makes ext4 commit its journal on every fdatasync too. The zeros are
    /// written and synced by a thread of the writer's, one to two steps ahead of the records
    /// (from the file's opening on), so that neither the writing thread nor a commit's
    /// fdatasync waits for them.
    pub grow_step: u64,
    /// Bytes past which [`LogWriter::segment_full`] says to move on to a new file (0: never).
    pub segment_limit: u64,
    /// After each sync, the file's pages more than this many bytes before its durable end are
    /// dropped from the page cache ([`crate::sys::drop_cached`]; `u64::MAX`: never). For a log
    /// that is written once and read again only when it is opened (or, with a tail kept, read
    /// soon after the sync by a reader that follows it): its pages would otherwise stay cached
    /// until memory runs short, the cache growing by every byte written.
    pub cache_tail: u64,
}

impl Options {
    /// An appended log of `format`, without segments.
    pub const fn new(format: Format) -> Options {
        Options {
            format,
            grow_step: 0,
            segment_limit: 0,
            cache_tail: u64::MAX,
        }
    }

    /// These options for a log read again only when it is opened: its synced pages leave the
    /// page cache but for the last [`SYNCED_TAIL`] bytes.
    pub const fn drop_synced(self) -> Options {
        self.cache_tail(SYNCED_TAIL)
    }

    /// These options with [`Options::cache_tail`] `tail`.
    pub const fn cache_tail(self, tail: u64) -> Options {
        Options {
            cache_tail: tail,
            ..self
        }
    }
}

/// The tail [`Options::drop_synced`] keeps cached: the last syncs' pages, which may still sit
/// in the writing core's page lists, where dropping them would make the kernel drain every
/// core's lists first (a wait of milliseconds on a sync's path).
pub const SYNCED_TAIL: u64 = 1 << 20;

/// An open log, appended to in groups; see the module documentation of [`crate::recordlog`].
#[derive(Debug)]
pub struct LogWriter {
    path: Arc<PathBuf>,
    file: Arc<File>,
    opts: Options,
    pending: Vec<u8>,
    pending_records: usize,
    /// Bytes of records written to the file; the next record goes at this offset.
    written_len: u64,
    /// A log grown ahead ([`Options::grow_step`]): the grower of its file, which says up to
    /// where zeros lie ready for records.
    grower: Option<Grower>,
    /// Bytes [`LogWriter::commit`] made durable (a [`SyncPoint`] synced elsewhere is not
    /// counted).
    committed_len: u64,
    /// Records written after `committed_len`.
    written_records: usize,
    /// A failed write or sync could not cut the file back to this length: the next write must
    /// first.
    cut_to: Option<u64>,
    /// The file's blocks are allocated (without changing its size) up to here
    /// ([`LogWriter::reserve`]).
    reserved_to: u64,
    /// An error the next commit's sync returns instead of syncing.
    #[cfg(test)]
    fail_sync: Option<std::io::Error>,
}

/// The log file and how many of its bytes were written when it was taken: once
/// [`SyncPoint::sync`] returns, every record written up to then is durable and may be
/// acknowledged.
#[derive(Clone, Debug)]
pub struct SyncPoint {
    path: Arc<PathBuf>,
    file: Arc<File>,
    len: u64,
    /// The log's [`Options::cache_tail`].
    cache_tail: u64,
}

impl SyncPoint {
    /// Bytes of the file this point covers.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when the point covers no byte.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when `other` is a point of the same log file.
    pub fn same_file(&self, other: &SyncPoint) -> bool {
        Arc::ptr_eq(&self.file, &other.file)
    }

    /// True when syncing `self` makes nothing durable that syncing `done` did not: same file,
    /// no more bytes.
    pub fn covered_by(&self, done: &SyncPoint) -> bool {
        self.same_file(done) && self.len <= done.len
    }

    /// Waits until every byte this point covers is on disk (fdatasync). fdatasync covers every
    /// write that returned before it was called, so it may run on any thread once the write
    /// that produced this point has returned.
    /// The pages of the log more than [`Options::cache_tail`] before this point are then
    /// dropped from the page cache (clean now: only bytes below the point are dropped).
    pub fn sync(&self) -> Result<(), LogError> {
        self.file
            .sync_data()
            .map_err(|e| LogError::new(&self.path, "sync", e))?;
        // `u64::MAX` (never) is past every length.
        if self.len > self.cache_tail {
            crate::sys::drop_cached(&self.file, self.len - self.cache_tail);
        }
        Ok(())
    }
}

/// A commit begun ([`LogWriter::commit_begin`]): its records are written, the fdatasync that
/// makes them durable is [`Commit::run`], which may run on any thread (so that a store syncs
/// several logs at once), and [`LogWriter::commit_end`] settles it.
#[derive(Debug)]
pub struct Commit {
    point: SyncPoint,
    /// The sync's outcome once run.
    result: Option<Result<(), LogError>>,
}

impl Commit {
    /// Waits until the commit's records are on disk (fdatasync); only the first call syncs.
    pub fn run(&mut self) {
        if self.result.is_none() {
            self.result = Some(self.point.sync());
        }
    }

    /// True when the commit was run and its sync failed.
    pub fn failed(&self) -> bool {
        matches!(self.result, Some(Err(_)))
    }
}

/// Runs `inline` on this thread while the fdatasyncs of `commits`, and `side`, run at once,
/// each on a short-lived thread of its own: a store that makes several files durable waits for
/// the slowest of them instead of their sum (the device takes the writes together, and
/// flushes issued together are merged). A commit whose thread cannot be started is synced by
/// [`LogWriter::commit_end`]; `side` then runs on this thread after `inline`.
pub fn run_commits<'c, R>(
    commits: impl IntoIterator<Item = &'c mut Commit>,
    side: impl FnOnce() + Send,
    inline: impl FnOnce() -> R,
) -> R {
    let spawn = || {
        std::thread::Builder::new()
            .name("log-sync".into())
            .stack_size(64 << 10)
    };
    let side = std::sync::Mutex::new(Some(side));
    let r = std::thread::scope(|s| {
        for c in commits {
            if let Err(e) = spawn().spawn_scoped(s, move || c.run()) {
                crate::warn_limited!(
                    "log-sync-spawn",
                    "cannot start a thread to sync a log ({e}): synced in turn"
                );
            }
        }
        let side = &side;
        if let Err(e) = spawn().spawn_scoped(s, move || run_once(side)) {
            crate::warn_limited!(
                "log-sync-spawn",
                "cannot start a thread to sync a log ({e}): synced in turn"
            );
        }
        inline()
    });
    // A side job no thread could be started for runs here.
    run_once(&side);
    r
}

/// Runs the job in `slot` unless it ran already.
fn run_once<F: FnOnce()>(slot: &std::sync::Mutex<Option<F>>) {
    let job = slot
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some(f) = job {
        f();
    }
}

/// The new file [`LogWriter::compact`] writes the live records into.
pub struct Compaction {
    path: PathBuf,
    out: BufWriter<File>,
    buf: Vec<u8>,
    len: u64,
}

impl Compaction {
    /// Writes one record whose payload `payload` appends to the buffer it is given.
    pub fn record(&mut self, payload: impl FnOnce(&mut Vec<u8>)) -> Result<(), LogError> {
        self.buf.clear();
        let start = begin(&mut self.buf);
        payload(&mut self.buf);
        seal(&mut self.buf, start);
        self.out
            .write_all(&self.buf)
            .map_err(|e| LogError::new(&self.path, "write", e))?;
        self.len += self.buf.len() as u64;
        Ok(())
    }
}

impl LogWriter {
    /// Opens (creating if needed; the directory must exist) the log at `path`: reads every
    /// intact record, in order, calling `each` with its payload (false: a payload it cannot
    /// decode, which ends the log there), cuts the rest of the file, and makes the file and
    /// its length durable. A file torn before its magic was complete becomes a new log; one
    /// with another magic is refused and left alone.
    pub fn open(
        path: &Path,
        opts: Options,
        each: impl FnMut(&[u8]) -> bool,
    ) -> Result<(LogWriter, Recovered), LogError> {
        let recovered = read_log(path, &opts.format, each)?;
        if recovered.torn_bytes > 0 && opts.grow_step == 0 {
            log::warn!(
                "{}: cutting a torn or damaged tail of {} bytes after {} records ({})",
                path.display(),
                recovered.torn_bytes,
                recovered.records,
                recovered.torn.unwrap_or("end of file"),
            );
        }
        let w = LogWriter::open_at(path, recovered.intact_len, opts)?;
        Ok((w, recovered))
    }

    /// Opens (creating if needed) the log at `path` for appending after its first
    /// `intact_len` bytes, which the caller read (with [`read_log`]); the rest is cut.
    pub fn open_at(path: &Path, intact_len: u64, opts: Options) -> Result<LogWriter, LogError> {
        let err = |action, e| LogError::new(path, action, e);
        let magic = opts.format.magic;
        let mut intact_len = intact_len;
        if intact_len < magic.len() as u64 {
            // New, or torn before its magic was complete.
            write_atomic(path, magic).map_err(|e| err("create", e))?;
            intact_len = magic.len() as u64;
        }
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(path)
            .map_err(|e| err("open", e))?;
        let size = file.metadata().map_err(|e| err("stat", e))?.len();
        if size != intact_len {
            file.set_len(intact_len).map_err(|e| err("truncate", e))?;
        }
        file.sync_all().map_err(|e| err("sync", e))?;
        sync_parent(path).map_err(|e| err("sync directory", e))?;
        let path = Arc::new(path.to_owned());
        let file = Arc::new(file);
        let mut grower =
            (opts.grow_step > 0).then(|| Grower::new(file.clone(), path.clone(), intact_len));
        // Grown from the opening on, as the first record would ask: a server taking adds as soon
        // as it starts otherwise writes its first two steps of zeros under them, and the record
        // fdatasyncs that meet the grower's chunks take two to three times as long.
        if let Some(g) = grower.as_mut() {
            g.ask(grow_target(intact_len, opts.grow_step))?;
        }
        Ok(LogWriter {
            path,
            file,
            opts,
            pending: Vec::with_capacity(1 << 16),
            pending_records: 0,
            written_len: intact_len,
            grower,
            committed_len: intact_len,
            written_records: 0,
            cut_to: None,
            reserved_to: intact_len,
            #[cfg(test)]
            fail_sync: None,
        })
    }

    /// Creates the log at `path` anew holding only `head` (the format's magic, then what the
    /// store keeps there: a segment's first sequence number, say), durably: the file appears
    /// whole or not at all, and a failed attempt leaves nothing behind. The records follow
    /// `head`; [`LogWriter::is_empty`] and [`LogWriter::clear`] know only the magic.
    pub fn create(path: &Path, head: &[u8], opts: Options) -> Result<LogWriter, LogError> {
        debug_assert!(head.starts_with(opts.format.magic));
        if let Err(e) = write_atomic(path, head) {
            let _ = std::fs::remove_file(path.with_extension("tmp"));
            return Err(LogError::new(path, "create", e));
        }
        LogWriter::open_at(path, head.len() as u64, opts)
    }

    /// Queues one record with payload `payload` for the next commit.
    pub fn append(&mut self, payload: &[u8]) {
        self.append_with(|out| out.extend_from_slice(payload));
    }

    /// Queues one record whose payload `payload` appends to the buffer it is given (no copy
    /// through an intermediate buffer).
    #[inline]
    pub fn append_with(&mut self, payload: impl FnOnce(&mut Vec<u8>)) {
        let start = begin(&mut self.pending);
        payload(&mut self.pending);
        seal(&mut self.pending, start);
        self.pending_records += 1;
    }

    /// Records queued since the last write.
    pub fn pending_records(&self) -> usize {
        self.pending_records
    }

    /// Bytes queued since the last write.
    pub fn pending_bytes(&self) -> usize {
        self.pending.len()
    }

    /// True when records wait for a commit.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Forgets the queued records (after a failed commit whose records the caller refused).
    pub fn discard_pending(&mut self) {
        self.pending.clear();
        self.pending_records = 0;
    }

    /// Makes sure the file has room for `need` more bytes of records beyond those written and
    /// queued, waiting for the zeros if they are not ready yet (the grower thread keeps one to
    /// two steps ahead, so that is rare). An error (the disk is full, say) leaves the log as it
    /// was: the caller refuses the operation instead of queueing its record, and
    /// [`LogWriter::write_pending`] never has to wait for room for what was admitted. The usual
    /// case is two comparisons. A log not grown ahead has nothing to check.
    #[inline]
    pub fn make_room(&mut self, need: u64) -> Result<(), LogError> {
        let end = self.written_len + self.pending.len() as u64 + need;
        match &self.grower {
            None => Ok(()),
            Some(g) if end <= g.ready() && end + self.opts.grow_step <= g.asked() => Ok(()),
            Some(_) => self.grow_for(end),
        }
    }

    /// Makes sure `need` more bytes of records beyond those written and queued can be written
    /// without room from the file system, allocating their blocks at least `chunk` bytes ahead
    /// (fallocate, the file's size unchanged, [`crate::sys::allocate_ahead`]) when they are not:
    /// a full disk then fails here, before the caller does what the record must be logged for.
    /// The usual case is one comparison. For a log whose records must never wait for room (an
    /// appended log; a log grown ahead has [`LogWriter::make_room`]).
    pub fn reserve(&mut self, need: u64, chunk: u64) -> Result<(), LogError> {
        let queued_end = self.written_len + self.pending.len() as u64;
        let end = queued_end + need;
        if end <= self.reserved_to {
            return Ok(());
        }
        let to = end.max(queued_end + chunk);
        crate::sys::allocate_ahead(&self.file, self.written_len, to - self.written_len)
            .map_err(|e| LogError::new(&self.path, "allocate", e))?;
        self.reserved_to = to;
        Ok(())
    }

    /// Asks the grower for zeros up to the step past `end` and one step more, when it was not
    /// asked for that much yet, and waits until they are ready up to `end`. On an error the
    /// ready length stays what it was (zeros written past it read as the end of the log, and
    /// are overwritten).
    #[cold]
    fn grow_for(&mut self, end: u64) -> Result<(), LogError> {
        let step = self.opts.grow_step;
        let Some(g) = self.grower.as_mut() else {
            return Ok(());
        };
        if end + step > g.asked() {
            g.ask(grow_target(end, step))?;
        }
        if end > g.ready() {
            g.wait_ready(end)?;
        }
        Ok(())
    }

    /// Waits until the grower has nothing under way (the file's size is then settled).
    #[cfg(test)]
    pub(crate) fn settle_growth(&self) {
        if let Some(g) = &self.grower {
            g.settle();
        }
    }

    /// Cuts the file back to `len` bytes (a failed write or sync left garbage or unsynced
    /// records after it). If that fails too, the next write cuts first.
    fn cut_back(&mut self, len: u64) {
        self.written_len = len;
        if let Some(g) = self.grower.as_mut() {
            g.reset(len);
        }
        // The cut releases the blocks allocated ahead too.
        self.reserved_to = len;
        let cut = self.file.set_len(len).and_then(|()| self.file.sync_data());
        match cut {
            Ok(()) => self.cut_to = None,
            Err(e) => {
                log::error!(
                    "{}: cannot cut back to {len} bytes after a failed write: {e}; retrying \
                     before the next write",
                    self.path.display()
                );
                self.cut_to = Some(len);
            }
        }
    }

    /// Writes the queued records to the file without waiting for the disk; the returned point
    /// is what a later [`SyncPoint::sync`] makes durable. Acknowledge the records only after
    /// that sync returned. A failed write is cut off the file again and the records stay
    /// queued.
    pub fn write_pending(&mut self) -> Result<SyncPoint, LogError> {
        if let Some(len) = self.cut_to {
            self.file
                .set_len(len)
                .map_err(|e| LogError::new(&self.path, "truncate", e))?;
            self.cut_to = None;
        }
        if !self.pending.is_empty() {
            let end = self.written_len + self.pending.len() as u64;
            if self.grower.as_ref().is_some_and(|g| end > g.ready()) {
                // Records queued without room asked for: wait for the zeros.
                self.grow_for(end)?;
            }
            if let Err(e) = self.file.write_all_at(&self.pending, self.written_len) {
                self.cut_back(self.written_len);
                return Err(LogError::new(&self.path, "write", e));
            }
            self.written_len = end;
            self.written_records += self.pending_records;
            self.pending.clear();
            self.pending_records = 0;
        }
        Ok(self.sync_point())
    }

    /// Writes the queued records once they reach `limit` bytes (without waiting for the disk).
    /// A full disk ([`LogError::is_no_space`]) leaves them queued, in order, behind nothing
    /// half-written: the next write or [`LogWriter::commit`] tries them again and reports it,
    /// so the operation that queued them is never cut in half. Other failures are returned,
    /// the records still queued.
    pub fn write_over(&mut self, limit: usize) -> Result<(), LogError> {
        if self.pending.len() < limit {
            return Ok(());
        }
        match self.write_pending() {
            Err(e) if !e.is_no_space() => Err(e),
            _ => Ok(()),
        }
    }

    /// The point covering every byte written so far.
    pub fn sync_point(&self) -> SyncPoint {
        SyncPoint {
            path: self.path.clone(),
            file: self.file.clone(),
            len: self.written_len,
            cache_tail: self.opts.cache_tail,
        }
    }

    /// Writes the queued records and waits until they are on disk (fdatasync). Only after this
    /// returns may the records be acknowledged. A failed write leaves the records queued (see
    /// [`LogWriter::write_pending`]). A failed sync leaves them queued too: every record written
    /// since the last commit is read back into the queue, in order, and the file cut back to
    /// its committed length, so that the next commit writes each of them again, once (after a
    /// failed fdatasync the kernel may have dropped the dirty pages' error, and a second sync
    /// of the same pages proves nothing).
    pub fn commit(&mut self) -> Result<(), LogError> {
        match self.commit_begin()? {
            Some(mut c) => {
                c.run();
                self.commit_end(c)
            }
            None => Ok(()),
        }
    }

    /// The first half of [`LogWriter::commit`]: writes the queued records and returns the
    /// commit whose [`Commit::run`] (on any thread) waits for the disk, or `None` when every
    /// record written is committed already. [`LogWriter::commit_end`] settles it; nothing else
    /// may commit, compact or clear this log in between. A commit dropped unsettled leaves its
    /// records written and not committed: the next commit syncs them.
    pub fn commit_begin(&mut self) -> Result<Option<Commit>, LogError> {
        if self.pending.is_empty() && self.committed_len == self.written_len {
            return Ok(None);
        }
        let point = self.write_pending()?;
        // A test can make the sync fail ([`LogWriter::fail_next_sync`]).
        #[cfg(test)]
        let result = self
            .fail_sync
            .take()
            .map(|e| Err(LogError::new(&self.path, "sync", e)));
        #[cfg(not(test))]
        let result = None;
        Ok(Some(Commit { point, result }))
    }

    /// Settles a commit of [`LogWriter::commit_begin`] (syncing it first if it was not run):
    /// its records are committed, or, when the sync failed, read back into the queue as
    /// [`LogWriter::commit`] does, and the failure returned.
    pub fn commit_end(&mut self, c: Commit) -> Result<(), LogError> {
        let Commit { point, result } = c;
        let r = result.unwrap_or_else(|| point.sync());
        debug_assert!(
            point.same_file(&self.sync_point()) && point.len() == self.written_len,
            "the log changed between commit_begin and commit_end"
        );
        if let Err(e) = r {
            self.requeue_unsynced();
            return Err(e);
        }
        self.committed_len = self.written_len;
        self.written_records = 0;
        Ok(())
    }

    /// Makes the next commit's sync fail with `error`, as a failing disk would.
    #[cfg(test)]
    pub(crate) fn fail_next_sync(&mut self, error: std::io::Error) {
        self.fail_sync = Some(error);
    }

    /// After a failed sync: puts the records written since the last commit back at the front
    /// of the queue and cuts the file back to its committed length. Records that cannot be
    /// read back (the read fails too) are lost, and logged.
    fn requeue_unsynced(&mut self) {
        let from = self.committed_len;
        let mut back = vec![0u8; (self.written_len - from) as usize];
        match self.file.read_exact_at(&mut back, from) {
            Ok(()) => {
                back.extend_from_slice(&self.pending);
                self.pending = back;
                self.pending_records += self.written_records;
            }
            Err(e) => log::error!(
                "{}: cannot read back {} records written after a failed sync: {e}; they are \
                 not stored",
                self.path.display(),
                self.written_records
            ),
        }
        self.written_records = 0;
        self.cut_back(from);
    }

    /// True when the file has grown past [`Options::segment_limit`]: time to
    /// [`LogWriter::rotate`].
    pub fn segment_full(&self) -> bool {
        self.opts.segment_limit > 0 && self.written_len >= self.opts.segment_limit
    }

    /// Commits what is queued, then goes on in a new, empty log file at `path` (the next
    /// segment). The old file stays as it is.
    pub fn rotate(&mut self, path: &Path) -> Result<(), LogError> {
        self.commit()?;
        *self = LogWriter::open_at(path, 0, self.opts)?;
        Ok(())
    }

    /// Commits what is queued, then goes on in a new log file at `path` holding `head`
    /// ([`LogWriter::create`]). On an error the log goes on in the old file.
    pub fn rotate_to(&mut self, path: &Path, head: &[u8]) -> Result<(), LogError> {
        self.commit()?;
        *self = LogWriter::create(path, head, self.opts)?;
        Ok(())
    }

    /// Rewrites the log with the live records only: `live` writes them into a new file
    /// (`<path>.tmp`), which is fdatasynced and renamed over the log, the directory synced; a
    /// crash leaves the old or the new file, never a mix. The queued records are dropped:
    /// `live` writes the state they led to. Returns the new file's length.
    pub fn compact(
        &mut self,
        live: impl FnOnce(&mut Compaction) -> Result<(), LogError>,
    ) -> Result<u64, LogError> {
        let tmp = self.path.with_extension("tmp");
        let r = self.compact_into(&tmp, live);
        if r.is_err() {
            // A half-written copy (a full disk) takes room the live file needs; the next
            // compaction starts over.
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }

    fn compact_into(
        &mut self,
        tmp: &Path,
        live: impl FnOnce(&mut Compaction) -> Result<(), LogError>,
    ) -> Result<u64, LogError> {
        let f = File::create(tmp).map_err(|e| LogError::new(tmp, "create", e))?;
        let mut c = Compaction {
            path: tmp.to_owned(),
            out: BufWriter::with_capacity(1 << 20, f),
            buf: Vec::with_capacity(4096),
            len: 0,
        };
        let magic = self.opts.format.magic;
        c.out
            .write_all(magic)
            .map_err(|e| LogError::new(tmp, "write", e))?;
        c.len = magic.len() as u64;
        live(&mut c)?;
        let len = c.len;
        let f = c
            .out
            .into_inner()
            .map_err(|e| LogError::new(tmp, "write", e.into_error()))?;
        f.sync_data().map_err(|e| LogError::new(tmp, "sync", e))?;
        drop(f);
        std::fs::rename(tmp, &*self.path).map_err(|e| LogError::new(&self.path, "rename", e))?;
        sync_parent(&self.path).map_err(|e| LogError::new(&self.path, "sync directory", e))?;
        let path = self.path.to_path_buf();
        *self = LogWriter::open_at(&path, len, self.opts)?;
        Ok(len)
    }

    /// Empties the log, in place and durably: the queued records are dropped and the file is
    /// cut back to its magic (truncation needs no room, so a full disk does not stop it; a
    /// crash leaves the old log or the empty one).
    pub fn clear(&mut self) -> Result<(), LogError> {
        let len = self.opts.format.magic.len() as u64;
        self.discard_pending();
        // The grower stops first: nothing may write zeros past the cut.
        if let Some(g) = self.grower.as_mut() {
            g.reset(len);
        }
        let cut = self.file.set_len(len).and_then(|()| self.file.sync_data());
        if let Err(e) = cut {
            // The records are still there: zeros go after them only.
            let written = self.written_len;
            if let Some(g) = self.grower.as_mut() {
                g.reset(written);
            }
            return Err(LogError::new(&self.path, "truncate", e));
        }
        self.written_len = len;
        self.committed_len = len;
        self.written_records = 0;
        self.reserved_to = len;
        self.cut_to = None;
        Ok(())
    }

    /// Bytes written to the file (records and magic; see [`LogWriter::write_pending`]).
    pub fn len(&self) -> u64 {
        self.written_len
    }

    /// True when the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.written_len == self.opts.format.magic.len() as u64
    }

    /// Bytes [`LogWriter::commit`] made durable.
    pub fn committed_len(&self) -> u64 {
        self.committed_len
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// How far a log grown in steps of `step` is grown for records up to `end`: to the step past
/// `end` and one step more.
fn grow_target(end: u64, step: u64) -> u64 {
    (end.div_ceil(step) + 1) * step
}
