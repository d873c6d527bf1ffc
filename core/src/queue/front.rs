//! The front stack: the records of `push_front`, served last-in first-out before the back log.
//!
//! A record is `[bytes][prev u64][len u32][check u32]`: the footer sits at its end, and the top
//! of the stack is the logical position just past the top record's footer, so a pop reads the
//! footer before the top, serves the bytes before it and sets the top to `prev`, the top before
//! that record was pushed. The check is the xxh3-64 of the bytes mixed with the record's end and
//! `prev`, folded to 32 bits.
//!
//! Records are written at `max(top, synced top)`, never below the top of the last sync: the
//! records of the synced state are not overwritten before the next sync, so a restart from the
//! synced slot after a power loss finds them intact. Segments are contiguous from position 0;
//! at each sync those wholly above the top are deleted, but for one kept while pushes go on.

use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64;

use super::cursor::State;
use super::segment::{self, Kind, Segment, HEADER};
use super::QueueError;

/// Bytes after a record's bytes.
pub(crate) const FOOTER: u64 = 16;

#[inline]
fn check(bytes: &[u8], end: u64, prev: u64) -> u32 {
    // Not a seeded xxh3: see the back log's check.
    let h = xxh3_64(bytes) ^ (end ^ prev.rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h ^ (h >> 32)) as u32
}

/// The front stack's segments, contiguous from logical position 0.
pub(crate) struct FrontStack {
    dir: PathBuf,
    segs: Vec<Segment>,
    /// The top at the last sync: nothing below it is written before the next sync.
    pub synced_top: u64,
    /// A segment file was created or deleted since the last sync.
    pub dir_changed: bool,
    /// Syncs in a row with no push: the segment kept above the top is deleted after
    /// [`IDLE_SYNCS`] of them.
    idle_syncs: u32,
    pushed: bool,
}

/// Idle syncs before the segment above the top is deleted.
const IDLE_SYNCS: u32 = 10;

impl FrontStack {
    /// The stack described by `state` over the segment files in `dir`; files above the top's
    /// segment go to `stale`.
    pub fn open(
        dir: &Path,
        state: &mut State,
        stale: &mut Vec<PathBuf>,
    ) -> Result<FrontStack, QueueError> {
        let cursor_err = |what: String| QueueError::Corrupt {
            path: dir.join("cursor"),
            offset: 0,
            what,
        };
        if (state.top == 0) != (state.front_len == 0) {
            return Err(cursor_err(format!(
                "front stack top {} disagrees with its length {}",
                state.top, state.front_len
            )));
        }
        let mut stack = FrontStack {
            dir: dir.to_owned(),
            segs: Vec::new(),
            synced_top: state.top,
            dir_changed: false,
            idle_syncs: 0,
            pushed: false,
        };
        for (start, path) in segment::list(dir, Kind::Front)? {
            let next = stack.segs.last().map_or(0, Segment::end);
            if state.top == 0 || next >= state.top {
                // Wholly above the top.
                stale.push(path);
                continue;
            }
            if start != next {
                return Err(QueueError::Corrupt {
                    path,
                    offset: 0,
                    what: format!("front stack has a gap: a segment should start at {next}"),
                });
            }
            stack.segs.push(Segment::open(Kind::Front, start, path)?);
        }
        if state.top != 0 {
            match stack.segs.last_mut() {
                Some(last) if state.top <= last.end() => last.map()?,
                _ => {
                    return Err(cursor_err(format!(
                        "front stack top {} is in no segment file",
                        state.top
                    )))
                }
            }
        }
        Ok(stack)
    }

    /// Pushes `rec`; the caller checked that it fits in a segment of `seg_bytes`.
    pub fn push(&mut self, s: &mut State, rec: &[u8], seg_bytes: u64) -> Result<(), QueueError> {
        let need = rec.len() as u64 + FOOTER;
        let mut p = s.top.max(self.synced_top);
        loop {
            let i = self.segs.partition_point(|x| x.start <= p);
            if i == 0 || p >= self.segs[i - 1].end() {
                // p is 0 with no segment, or the end of the last one.
                let start = self.segs.last().map_or(0, Segment::end);
                let seg = Segment::create(&self.dir, Kind::Front, start, seg_bytes, 0)?;
                self.segs.push(seg);
                self.dir_changed = true;
                p = start;
                continue;
            }
            let seg = &mut self.segs[i - 1];
            let at = p.max(seg.start + HEADER);
            if at + need > seg.end() {
                p = seg.end();
                continue;
            }
            seg.map()?;
            seg.ensure_allocated(at + need)?;
            let off = (at - seg.start) as usize;
            let end = at + need;
            let prev = s.top;
            let b = seg.bytes_mut();
            b[off..off + rec.len()].copy_from_slice(rec);
            let f = off + rec.len();
            b[f..f + 8].copy_from_slice(&prev.to_le_bytes());
            b[f + 8..f + 12].copy_from_slice(&(rec.len() as u32).to_le_bytes());
            b[f + 12..f + 16].copy_from_slice(&check(rec, end, prev).to_le_bytes());
            seg.touch(at);
            self.pushed = true;
            s.top = end;
            s.front_len += 1;
            return Ok(());
        }
    }

    /// Pops the top record into `f`. A record that fails its check is reported as
    /// [`QueueError::Corrupt`] after the whole stack was dropped (nothing below it can be found).
    pub fn pop_with<R>(
        &mut self,
        s: &mut State,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, QueueError> {
        if s.top == 0 {
            return Ok(None);
        }
        let i = self.segs.partition_point(|x| x.start < s.top);
        let Some(seg) = i.checked_sub(1).and_then(|i| self.segs.get_mut(i)) else {
            return Err(self.damage(s, None, "top is in no segment"));
        };
        if s.top > seg.end() || s.top < seg.start + HEADER + FOOTER {
            let path = seg.path.clone();
            return Err(self.damage(s, Some(path), "top is outside its segment's records"));
        }
        seg.map()?;
        let foot = (s.top - FOOTER - seg.start) as usize;
        let b = seg.bytes();
        let prev = u64::from_le_bytes(b[foot..foot + 8].try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(b[foot + 8..foot + 12].try_into().expect("4 bytes"));
        let sum = u32::from_le_bytes(b[foot + 12..foot + 16].try_into().expect("4 bytes"));
        let room = s.top - FOOTER - seg.start - HEADER;
        if u64::from(len) > room || prev > s.top - FOOTER - u64::from(len) {
            let path = seg.path.clone();
            return Err(self.damage(s, Some(path), "record footer out of range"));
        }
        let bytes = &b[foot - len as usize..foot];
        if check(bytes, s.top, prev) != sum {
            let path = seg.path.clone();
            return Err(self.damage(s, Some(path), "record fails its check"));
        }
        let r = f(bytes);
        s.top = prev;
        s.front_len = s.front_len.saturating_sub(1);
        if (s.top == 0) != (s.front_len == 0) {
            // The records are the truth; the count only serves len().
            let fixed = u64::from(s.top != 0);
            log::error!(
                "{}: front stack length {} disagrees with its top {}; counting {fixed}",
                self.dir.display(),
                s.front_len,
                s.top
            );
            s.front_len = fixed;
        }
        Ok(Some(r))
    }

    #[cold]
    fn damage(&mut self, s: &mut State, path: Option<PathBuf>, what: &str) -> QueueError {
        let err = QueueError::Corrupt {
            path: path.unwrap_or_else(|| self.dir.join("cursor")),
            offset: s.top,
            what: format!("front stack: {what}"),
        };
        log::error!(
            "{err}; dropping the {} record(s) of the front stack",
            s.front_len
        );
        s.top = 0;
        s.front_len = 0;
        err
    }

    /// Makes the records below the top written since the last sync durable.
    pub fn flush(&mut self, s: &State) -> Result<(), QueueError> {
        for seg in &mut self.segs {
            seg.flush(0, s.top)?;
        }
        Ok(())
    }

    /// After a sync: the top is the synced top, and segments wholly above it are deleted, but
    /// for one kept while the stack is in use (a stack that empties and fills again between
    /// syncs would otherwise create a new file each time).
    pub fn after_sync(&mut self, s: &State) -> Result<(), QueueError> {
        self.synced_top = s.top;
        if self.pushed {
            self.idle_syncs = 0;
        } else {
            self.idle_syncs = self.idle_syncs.saturating_add(1);
        }
        self.pushed = false;
        let keep = usize::from(self.idle_syncs < IDLE_SYNCS);
        let above = self.segs.iter().filter(|x| x.start >= s.top).count();
        for _ in keep..above {
            let seg = self.segs.pop().expect("counted above");
            seg.remove()?;
            self.dir_changed = true;
        }
        Ok(())
    }

    /// Deletes every segment file; the stack is empty and synced.
    pub fn remove_all(&mut self) -> Result<(), QueueError> {
        while let Some(seg) = self.segs.pop() {
            seg.remove()?;
            self.dir_changed = true;
        }
        Ok(())
    }

    /// True when a segment wholly above the top is kept (a sync may delete it).
    pub fn has_spare(&self) -> bool {
        self.segs.last().is_some_and(|l| l.start >= self.synced_top)
    }

    /// Bytes of the segment files (apparent size).
    pub fn file_bytes(&self) -> u64 {
        self.segs.iter().map(|s| s.len).sum()
    }
}
