//! The back log: a FIFO of records appended to consecutive segments and read from the oldest.
//!
//! A record is `[len u32][check u32][bytes]` (little-endian), the check being the xxh3-64 of
//! the bytes mixed with the record's logical position and folded to 32 bits, so a record read
//! at the wrong place fails its check like a torn one. A record never straddles two segments: when one
//! does not fit in the rest of the tail segment, an end marker (`len` = `u32::MAX`) is written if
//! at least 8 bytes remain, and the record goes to a new segment that starts where the old one
//! ends. A segment the head has left is released at the next sync (once the cursor that no longer
//! needs it is durable): kept as a spare for reuse as a new segment, or deleted.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64;

use super::cursor::State;
use super::segment::{self, Kind, Segment, HEADER};
use super::QueueError;

/// Bytes before a record's bytes.
pub(crate) const RECORD_HEADER: u64 = 8;
/// Consumed segments kept for reuse: enough for the segments a busy queue goes through between
/// two syncs; an idle queue deletes them.
pub(crate) const MAX_SPARES: usize = 4;
/// Idle syncs before a spare is deleted (about a second under the default policy).
const IDLE_SYNCS: u32 = 10;
/// `len` of the end-of-segment marker.
const END_MARKER: u32 = u32::MAX;

#[inline]
fn check(bytes: &[u8], pos: u64) -> u32 {
    // Mixing the position into the hash rather than seeding it: xxh3 with a seed derives a new
    // secret for inputs over 240 bytes, which doubled the cost of a typical entry.
    let h = xxh3_64(bytes) ^ pos.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h ^ (h >> 32)) as u32
}

/// The back log's segments, oldest (the head's) first, newest (the tail's) last.
pub(crate) struct BackLog {
    dir: PathBuf,
    /// Never empty once opened: the tail segment always exists.
    pub segs: VecDeque<Segment>,
    /// Segments the head has left; after the next sync they become spares or are deleted.
    pub released: Vec<Segment>,
    /// Consumed segments kept mapped for reuse as new tail segments (at most [`MAX_SPARES`]).
    pub spares: Vec<Segment>,
    /// Syncs in a row that neither released a segment nor reused a spare: an idle queue gives
    /// its spares back, one per [`IDLE_SYNCS`] syncs.
    idle_syncs: u32,
    /// A segment file was created since the last sync (the directory needs syncing).
    pub dir_changed: bool,
}

impl BackLog {
    /// The back log described by `state` over the segment files found in `dir`. Files the state
    /// does not need (before the head's segment, past the tail's) go to `stale`.
    pub fn open(
        dir: &Path,
        state: &mut State,
        seg_bytes: u64,
        stale: &mut Vec<PathBuf>,
    ) -> Result<BackLog, QueueError> {
        let files = segment::list(dir, Kind::Back)?;
        stale.extend(segment::list(dir, Kind::Spare)?.into_iter().map(|(_, p)| p));
        let mut log = BackLog {
            dir: dir.to_owned(),
            segs: VecDeque::new(),
            released: Vec::new(),
            spares: Vec::new(),
            idle_syncs: 0,
            dir_changed: false,
        };
        // The state of a cursor whose queue never finished its first open (a crash between the
        // cursor's creation and the first sync): whatever segment files exist hold nothing.
        if *state == State::default() {
            stale.extend(files.into_iter().filter(|(s, _)| *s != 0).map(|(_, p)| p));
            // Truncates a leftover segment 0.
            let seg = Segment::create(dir, Kind::Back, 0, seg_bytes, 0)?;
            state.head_pos = HEADER;
            state.tail_pos = HEADER;
            log.segs.push_back(seg);
            log.dir_changed = true;
            return Ok(log);
        }
        let corrupt =
            |path: PathBuf, offset: u64, what: String| QueueError::Corrupt { path, offset, what };
        for (start, path) in files {
            let needed_from = state.head_pos;
            if start >= state.tail_pos {
                stale.push(path);
                continue;
            }
            let seg = Segment::open(Kind::Back, start, path)?;
            if seg.end() < needed_from {
                stale.push(seg.path);
                continue;
            }
            if let Some(prev) = log.segs.back() {
                if prev.end() != seg.start {
                    return Err(corrupt(
                        seg.path,
                        0,
                        format!(
                            "back log has a gap: the previous segment ends at {}, this one \
                             starts at {}",
                            prev.end(),
                            seg.start
                        ),
                    ));
                }
                if seg.first_seq < prev.first_seq || seg.first_seq > state.tail_seq {
                    return Err(corrupt(
                        seg.path,
                        0,
                        format!(
                            "segment's first sequence number {} is out of order",
                            seg.first_seq
                        ),
                    ));
                }
            }
            log.segs.push_back(seg);
        }
        let cursor_err = |what: String| corrupt(dir.join("cursor"), 0, what);
        let (Some(first), Some(last)) = (log.segs.front(), log.segs.back()) else {
            return Err(cursor_err(format!(
                "the cursor's back log head {} and tail {} are in no segment file",
                state.head_pos, state.tail_pos
            )));
        };
        if state.head_pos < first.start + HEADER || state.head_pos > first.end() {
            return Err(cursor_err(format!(
                "back log head {} is not in the oldest segment file [{}, {})",
                state.head_pos,
                first.start,
                first.end()
            )));
        }
        if state.tail_pos > last.end() || state.tail_pos < last.start + HEADER {
            return Err(cursor_err(format!(
                "back log tail {} is not in the newest segment file [{}, {}) (truncated?)",
                state.tail_pos,
                last.start,
                last.end()
            )));
        }
        if state.head_seq > state.tail_seq || first.first_seq > state.head_seq {
            return Err(cursor_err(format!(
                "back log sequence numbers out of order: head {}, tail {}, first in segment {}",
                state.head_seq, state.tail_seq, first.first_seq
            )));
        }
        if state.head_pos > state.tail_pos {
            return Err(cursor_err(format!(
                "back log head {} is past its tail {}",
                state.head_pos, state.tail_pos
            )));
        }
        log.segs.front_mut().expect("checked above").map()?;
        log.segs.back_mut().expect("checked above").map()?;
        Ok(log)
    }

    /// Appends `rec`; `max_seg` is the size of a new segment, which the caller checked `rec`
    /// fits in.
    #[inline]
    pub fn push(&mut self, s: &mut State, rec: &[u8], seg_bytes: u64) -> Result<(), QueueError> {
        let need = RECORD_HEADER + rec.len() as u64;
        let mut tail = self
            .segs
            .back_mut()
            .expect("the tail segment always exists");
        if s.tail_pos + need > tail.end() {
            self.roll_over(s, seg_bytes)?;
            tail = self
                .segs
                .back_mut()
                .expect("the tail segment always exists");
        }
        let pos = s.tail_pos;
        tail.ensure_allocated(pos + need)?;
        let off = (pos - tail.start) as usize;
        let b = tail.bytes_mut();
        b[off + 8..off + 8 + rec.len()].copy_from_slice(rec);
        b[off..off + 4].copy_from_slice(&(rec.len() as u32).to_le_bytes());
        b[off + 4..off + 8].copy_from_slice(&check(rec, pos).to_le_bytes());
        tail.touch(pos);
        s.tail_pos = pos + need;
        s.tail_seq += 1;
        Ok(())
    }

    #[cold]
    fn roll_over(&mut self, s: &mut State, seg_bytes: u64) -> Result<(), QueueError> {
        let old = self
            .segs
            .back_mut()
            .expect("the tail segment always exists");
        let end = old.end();
        if end - s.tail_pos >= RECORD_HEADER {
            old.ensure_allocated(s.tail_pos + RECORD_HEADER)?;
            let off = (s.tail_pos - old.start) as usize;
            old.bytes_mut()[off..off + 4].copy_from_slice(&END_MARKER.to_le_bytes());
            old.touch(s.tail_pos);
        }
        let seg = match self.spares.pop() {
            Some(spare) if spare.len == seg_bytes => {
                self.idle_syncs = 0;
                spare.recycle(&self.dir, Kind::Back, end, s.tail_seq)?
            }
            other => {
                if let Some(spare) = other {
                    spare.remove()?;
                }
                Segment::create(&self.dir, Kind::Back, end, seg_bytes, s.tail_seq)?
            }
        };
        self.segs.push_back(seg);
        self.dir_changed = true;
        s.tail_pos = end + HEADER;
        Ok(())
    }

    /// Pops the oldest record into `f`. A record that fails its check is reported as
    /// [`QueueError::Corrupt`] after the head skipped the rest of its segment (the next pop goes
    /// on from the following segment; the whole log when the damage is in the tail segment).
    #[inline]
    pub fn pop_with<R>(
        &mut self,
        s: &mut State,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, QueueError> {
        loop {
            if s.head_seq == s.tail_seq {
                return Ok(None);
            }
            let seg = self.segs.front().expect("the head segment always exists");
            let left = seg.end() - s.head_pos;
            if left < RECORD_HEADER {
                self.next_segment(s)?;
                continue;
            }
            let off = (s.head_pos - seg.start) as usize;
            let b = seg.bytes();
            let len = u32::from_le_bytes(b[off..off + 4].try_into().expect("4 bytes"));
            if len == END_MARKER {
                self.next_segment(s)?;
                continue;
            }
            let sum = u32::from_le_bytes(b[off + 4..off + 8].try_into().expect("4 bytes"));
            // In the tail segment a record ends at or before the tail; elsewhere in its segment.
            let limit = if self.segs.len() == 1 {
                s.tail_pos
            } else {
                seg.end()
            };
            if s.head_pos + RECORD_HEADER + u64::from(len) > limit {
                return Err(self.skip_damage(s, "record length runs past the written data"));
            }
            let bytes = &b[off + 8..off + 8 + len as usize];
            if check(bytes, s.head_pos) != sum {
                return Err(self.skip_damage(s, "record fails its check"));
            }
            let r = f(bytes);
            s.head_pos += RECORD_HEADER + u64::from(len);
            s.head_seq += 1;
            return Ok(Some(r));
        }
    }

    /// Moves the head to the next segment, releasing the one it leaves.
    fn next_segment(&mut self, s: &mut State) -> Result<(), QueueError> {
        if self.segs.len() < 2 {
            return Err(self.skip_damage(s, "records missing before the tail"));
        }
        let old = self.segs.pop_front().expect("two segments");
        self.released.push(old);
        let next = self.segs.front_mut().expect("two segments");
        next.map()?;
        s.head_pos = next.start + HEADER;
        if next.first_seq != s.head_seq {
            let path = next.path.clone();
            let was = s.head_seq;
            s.head_seq = next.first_seq.min(s.tail_seq);
            log::error!(
                "{}: segment starts at record {} but the head was at record {was}; going on \
                 from the segment",
                path.display(),
                next.first_seq
            );
            return Err(QueueError::Corrupt {
                path,
                offset: 0,
                what: format!(
                    "segment starts at record {} but the head was at record {was}",
                    next.first_seq
                ),
            });
        }
        Ok(())
    }

    /// Drops the rest of the head segment after damage at the head (the rest of the log when it
    /// is the tail segment) and returns the error to report.
    #[cold]
    fn skip_damage(&mut self, s: &mut State, what: &str) -> QueueError {
        let seg = self.segs.front().expect("the head segment always exists");
        let err = QueueError::Corrupt {
            path: seg.path.clone(),
            offset: s.head_pos - seg.start,
            what: what.to_owned(),
        };
        log::error!("{err}; dropping the rest of the segment");
        if self.segs.len() > 1 {
            let old = self.segs.pop_front().expect("two segments");
            self.released.push(old);
            let next = self.segs.front_mut().expect("two segments");
            s.head_pos = next.start + HEADER;
            s.head_seq = next.first_seq.min(s.tail_seq);
            if let Err(e) = next.map() {
                return e;
            }
        } else {
            s.head_pos = s.tail_pos;
            s.head_seq = s.tail_seq;
        }
        err
    }

    /// Makes the live records written since the last sync durable, and unmaps segments that are
    /// neither the head's nor the tail's.
    pub fn flush(&mut self, s: &State) -> Result<(), QueueError> {
        let n = self.segs.len();
        for (i, seg) in self.segs.iter_mut().enumerate() {
            seg.flush(s.head_pos, s.tail_pos)?;
            if i != 0 && i + 1 != n {
                seg.map = None;
            }
        }
        Ok(())
    }

    /// After a sync made the cursor that no longer needs them durable: released segments become
    /// spares (or are deleted beyond [`MAX_SPARES`]); an idle queue deletes its spares.
    pub fn after_sync(&mut self) -> Result<(), QueueError> {
        let released = !self.released.is_empty();
        for mut seg in std::mem::take(&mut self.released) {
            if self.spares.len() < MAX_SPARES {
                let to = segment::path(&self.dir, Kind::Spare, seg.start);
                std::fs::rename(&seg.path, &to)
                    .map_err(|e| QueueError::io(&seg.path, "keeping a spare segment", e))?;
                seg.path = to;
                seg.dirty_from = u64::MAX;
                self.spares.push(seg);
            } else {
                seg.remove()?;
            }
        }
        if released {
            self.idle_syncs = 0;
        } else {
            self.idle_syncs += 1;
            if self.idle_syncs >= IDLE_SYNCS {
                self.idle_syncs = 0;
                if let Some(spare) = self.spares.pop() {
                    spare.remove()?;
                }
            }
        }
        self.dir_changed |= released;
        Ok(())
    }

    /// Deletes the spare segments.
    pub fn remove_spares(&mut self) -> Result<(), QueueError> {
        while let Some(spare) = self.spares.pop() {
            spare.remove()?;
            self.dir_changed = true;
        }
        Ok(())
    }

    /// Drops every record: the head jumps to the tail.
    pub fn clear(&mut self, s: &mut State) -> Result<(), QueueError> {
        while self.segs.len() > 1 {
            let old = self.segs.pop_front().expect("two segments");
            self.released.push(old);
        }
        self.segs.front_mut().expect("the tail segment").map()?;
        s.head_pos = s.tail_pos;
        s.head_seq = s.tail_seq;
        Ok(())
    }

    /// Bytes of the segment files, spares included (their apparent size: files are sparse until
    /// written).
    pub fn file_bytes(&self) -> u64 {
        self.segs
            .iter()
            .chain(&self.released)
            .chain(&self.spares)
            .map(|s| s.len)
            .sum()
    }
}
