//! Growing a log file ahead of its records on a thread of its own ([`Options::grow_step`]).
//!
//! A log grown ahead has its records written over zeros already on disk, so that the fdatasync
//! of a group flushes the records only (no block allocation, no size change, no ext4 journal
//! commit). Writing a step of zeros on the thread that writes the records made the next
//! fdatasync flush the whole step too: with 16 MiB steps, a 20-40 ms stall of every
//! acknowledgement. Here a grower thread writes the zeros well before the records reach them,
//! a chunk at a time, each chunk synced before it is handed over ([`Grower::ready`]), so the
//! records' fdatasync finds at most one chunk of zeros under way and none dirty.
//!
//! The writer never writes a record at or past [`Grower::ready`]: what lies there may still be
//! the grower's to write. Zeros the grower wrote past the last record read as the end of the
//! log (a zero header is never a record), whether synced or not, so a crash at any moment
//! leaves a log that reads to its last record.
//!
//! [`Options::grow_step`]: super::Options::grow_step

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use super::LogError;

/// What the file is grown with.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// Bytes of zeros written and synced at a time: the most a record fdatasync may find being
/// written back by the grower (1 MiB: about 2 ms on the disk these figures come from, against
/// 20-40 ms for a whole 16 MiB step).
pub(super) const CHUNK: u64 = 1 << 20;

/// The state the writer and the grower thread share.
#[derive(Debug, Default)]
struct State {
    /// Grow the file with zeros up to here.
    target: u64,
    /// The thread is writing zeros at or past `ready`: the file must not be cut meanwhile.
    busy: bool,
    /// The last growth failed (the disk is full, say); the thread waits for a new request.
    error: Option<io::Error>,
    stop: bool,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signalled on every change of `state` or `ready`, both ways.
    cond: Condvar,
    /// The file holds zeros, written and synced, from the records' end up to here.
    ready: AtomicU64,
    file: Arc<File>,
    path: Arc<PathBuf>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, g: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.cond.wait(g).unwrap_or_else(PoisonError::into_inner)
    }
}

/// The grower of one log file: its thread is started at the first request and stopped (after
/// the chunk under way) when the grower is dropped.
#[derive(Debug)]
pub(super) struct Grower {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// The target last asked for (the writer's copy: it asks again only past it).
    asked: u64,
}

impl Grower {
    /// A grower of `file`, whose records and zeros end at `len` now.
    pub(super) fn new(file: Arc<File>, path: Arc<PathBuf>, len: u64) -> Grower {
        Grower {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    target: len,
                    ..State::default()
                }),
                cond: Condvar::new(),
                ready: AtomicU64::new(len),
                file,
                path,
            }),
            thread: None,
            asked: len,
        }
    }

    /// Where records may be written up to (exclusive): zeros, synced, below it.
    pub(super) fn ready(&self) -> u64 {
        self.shared.ready.load(Ordering::Acquire)
    }

    /// The target last asked for.
    pub(super) fn asked(&self) -> u64 {
        self.asked
    }

    /// Asks the thread to grow the file up to `target` (starting it if need be). A failure
    /// left from an earlier request is dropped: it is tried again.
    pub(super) fn ask(&mut self, target: u64) -> Result<(), LogError> {
        if target <= self.asked {
            return Ok(());
        }
        if self.thread.is_none() {
            let shared = self.shared.clone();
            let thread = std::thread::Builder::new()
                .name("log-grow".into())
                .spawn(move || run(&shared))
                .map_err(|e| LogError::new(&self.shared.path, "grow", e))?;
            self.thread = Some(thread);
        }
        let mut g = self.shared.lock();
        g.target = g.target.max(target);
        g.error = None;
        self.asked = g.target;
        drop(g);
        self.shared.cond.notify_all();
        Ok(())
    }

    /// Waits until records may be written up to `end` (asked for already), or the growth
    /// failed: then its error, and the next [`Grower::ask`] tries again.
    pub(super) fn wait_ready(&mut self, end: u64) -> Result<(), LogError> {
        let mut g = self.shared.lock();
        loop {
            if self.ready() >= end {
                return Ok(());
            }
            if let Some(e) = g.error.take() {
                // Asked again from where it stopped.
                let ready = self.ready();
                g.target = ready;
                self.asked = ready;
                return Err(LogError::new(&self.shared.path, "grow", e));
            }
            g = self.shared.wait(g);
        }
    }

    /// Stops the growth under way (after its chunk) and says that the file holds records and
    /// zeros up to `len` only: the caller is about to cut it there.
    pub(super) fn reset(&mut self, len: u64) {
        let mut g = self.shared.lock();
        g.target = 0;
        while g.busy {
            g = self.shared.wait(g);
        }
        g.target = len;
        g.error = None;
        self.shared.ready.store(len, Ordering::Release);
        self.asked = len;
    }

    /// Waits until the thread has nothing under way (tests: the file's size is then settled).
    #[cfg(test)]
    pub(super) fn settle(&self) {
        let mut g = self.shared.lock();
        while g.busy || (g.error.is_none() && self.ready() < g.target) {
            g = self.shared.wait(g);
        }
    }
}

impl Drop for Grower {
    fn drop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.shared.lock().stop = true;
        self.shared.cond.notify_all();
        // The chunk under way is finished first: nothing writes the file once the writer that
        // owns it is gone (a log reopened at once must not see zeros land over its records).
        let _ = thread.join();
    }
}

/// The grower thread: writes and syncs zeros, a chunk at a time, while `ready` is short of the
/// target.
fn run(shared: &Shared) {
    let mut g = shared.lock();
    loop {
        if g.stop {
            return;
        }
        let ready = shared.ready.load(Ordering::Acquire);
        if ready >= g.target || g.error.is_some() {
            g.busy = false;
            shared.cond.notify_all();
            g = shared.wait(g);
            continue;
        }
        g.busy = true;
        let end = (ready + CHUNK).min(g.target);
        drop(g);
        let r = zero_fill(&shared.file, ready, end);
        g = shared.lock();
        match r {
            // The writer may have reset meanwhile: it waited for `busy` to clear, so nothing
            // moved `ready` under this chunk.
            Ok(()) => shared.ready.store(end, Ordering::Release),
            Err(e) => {
                // Asked again at every write while the disk is full: a line a second.
                crate::warn_limited!(
                    "log-grow",
                    "{}: cannot grow the log past {ready} bytes: {e}",
                    shared.path.display()
                );
                g.error = Some(e);
            }
        }
        shared.cond.notify_all();
    }
}

/// Writes zeros over `[from, to)` of `file` and makes them durable (fdatasync: the blocks'
/// allocation and the file's size too).
fn zero_fill(file: &File, from: u64, to: u64) -> io::Result<()> {
    let mut at = from;
    while at < to {
        let n = (to - at).min(ZEROS.len() as u64) as usize;
        file.write_all_at(&ZEROS[..n], at)?;
        at += n as u64;
    }
    file.sync_data()
}
