//! The `store-fed` mark of a collection ([`super::FED_MARK`]): the first document-log sequence
//! number whose document the crawl store may not hold yet, written after every store sync.
//!
//! The file holds two slots of 20 bytes (at offsets 0 and 20): a generation (u64 LE), the mark
//! (u64 LE), and the xxh3 check of those 16 bytes (u32 LE). A save writes the mark with the
//! next generation in place, into the slot of that generation's parity (one `pwrite` on a
//! file kept open), so the slot written last and the one before alternate. Reading takes the
//! valid slot of the higher generation (the generation, not the larger mark, so that a mark
//! that went down is not undone by the older slot).
//!
//! Why this is as safe as the temporary file and rename it replaces:
//! - The mark is saved after the store's sync, so any value that reaches the disk is one the
//!   store already holds: an older value (a save lost or not yet written back) only means a
//!   longer replay at startup, never a document missing from the store.
//! - A killed process leaves a `pwrite` done (in the page cache, which outlives it) or not
//!   begun.
//! - A machine that stops mid-write can tear only the slot being written (the write covers
//!   its 20 bytes and no other): its check fails and the other slot, the previous mark, is
//!   read. Both slots damaged, or the file missing, gives 0: the whole log is replayed.
//! - A file that is not yet two slots (missing, damaged, or of the first format: 12 bytes, the
//!   mark and its check) gets both slots written at its first save, so no stale bytes are
//!   ever read as a slot.
//!
//! No fsync, as before: the store it describes is synced, and a lost mark costs only a
//! replay.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use log::warn;

use crate::recordlog::check;

/// Bytes of one slot: generation, mark, check.
const SLOT: usize = 20;
/// Bytes of the file of the first format: the mark and its check.
const FIRST_FORMAT: usize = 12;

/// A collection's saved mark, and the file it is saved in.
pub(in crate::sched) struct FedMark {
    path: PathBuf,
    /// Opened at the first save and kept; dropped after a failed write (opened again).
    file: Option<File>,
    /// The generation of the last slot read or written.
    generation: u64,
    /// Both slots hold valid records (the file is in the two-slot layout).
    two_slots: bool,
    /// The mark as last read or saved (or set after a replay, [`FedMark::set`]).
    seq: u64,
}

/// The slot bytes of `(generation, seq)`.
fn slot(generation: u64, seq: u64) -> [u8; SLOT] {
    let mut b = [0u8; SLOT];
    b[..8].copy_from_slice(&generation.to_le_bytes());
    b[8..16].copy_from_slice(&seq.to_le_bytes());
    let ck = check(&b[..16]);
    b[16..].copy_from_slice(&ck.to_le_bytes());
    b
}

/// The (generation, seq) of a slot, if its check holds.
fn read_slot(b: &[u8]) -> Option<(u64, u64)> {
    let b: &[u8; SLOT] = b.get(..SLOT)?.try_into().ok()?;
    if check(&b[..16]).to_le_bytes() != b[16..] {
        return None;
    }
    let word = |r: std::ops::Range<usize>| u64::from_le_bytes(b[r].try_into().unwrap_or([0; 8]));
    Some((word(0..8), word(8..16)))
}

/// The (generation, seq, both slots valid) the bytes of a mark file say; `None` when no
/// record in it is valid.
fn parse(b: &[u8]) -> Option<(u64, u64, bool)> {
    if b.len() == FIRST_FORMAT {
        let (seq, ck) = b.split_at(8);
        let seq = u64::from_le_bytes(seq.try_into().ok()?);
        return (check(&seq.to_le_bytes()).to_le_bytes() == ck).then_some((0, seq, false));
    }
    let a = b.get(..SLOT).and_then(read_slot);
    let z = b.get(SLOT..).and_then(read_slot);
    let both = a.is_some() && z.is_some() && b.len() == 2 * SLOT;
    let (generation, seq) = match (a, z) {
        (Some(a), Some(z)) => a.max(z),
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => return None,
    };
    Some((generation, seq, both))
}

impl FedMark {
    /// The mark saved in `dir`; 0 (replay the whole log) when missing or damaged (logged).
    pub fn read(dir: &Path) -> FedMark {
        let path = dir.join(super::FED_MARK);
        let (generation, seq, two_slots) = match std::fs::read(&path) {
            Ok(b) => parse(&b).unwrap_or_else(|| {
                warn!(
                    "{}: damaged, the whole document log is replayed",
                    path.display()
                );
                (0, 0, false)
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (0, 0, false),
            Err(e) => {
                warn!(
                    "{}: {e}; the whole document log is replayed",
                    path.display()
                );
                (0, 0, false)
            }
        };
        FedMark {
            path,
            file: None,
            generation,
            two_slots,
            seq,
        }
    }

    /// The mark in memory: the last read or saved, or set.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Takes `seq` as the mark in memory without saving it (the store already holds what a
    /// replay recorded; the saved mark, older, stays valid).
    pub fn set(&mut self, seq: u64) {
        self.seq = seq;
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Saves `seq` in the next slot (both, the first time; see the module doc).
    pub fn save(&mut self, seq: u64) -> io::Result<()> {
        let generation = self.generation + 1;
        let rec = slot(generation, seq);
        let file = match &mut self.file {
            Some(f) => f,
            none => none.insert(
                OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .open(&self.path)?,
            ),
        };
        let written = if self.two_slots {
            file.write_all_at(&rec, (generation % 2) * SLOT as u64)
        } else {
            let mut both = [0u8; 2 * SLOT];
            both[..SLOT].copy_from_slice(&rec);
            both[SLOT..].copy_from_slice(&rec);
            file.write_all_at(&both, 0)
                .and_then(|()| file.set_len(2 * SLOT as u64))
        };
        if let Err(e) = written {
            self.file = None;
            return Err(e);
        }
        self.two_slots = true;
        self.generation = generation;
        self.seq = seq;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn saved(dir: &Path) -> u64 {
        FedMark::read(dir).seq()
    }

    #[test]
    fn each_save_is_read_back_and_kept_in_place() {
        let dir = tempfile::TempDir::with_prefix("cf-fedmark-").unwrap();
        assert_eq!(saved(dir.path()), 0, "no file: the whole log");
        let mut m = FedMark::read(dir.path());
        for seq in [5, 9, 9, 120, 4, 1 << 40] {
            m.save(seq).unwrap();
            assert_eq!(m.seq(), seq);
            assert_eq!(saved(dir.path()), seq, "a mark that went down is read too");
            assert_eq!(fs::metadata(m.path()).unwrap().len(), 2 * SLOT as u64);
        }
        // Saves go on from the generation read.
        let mut again = FedMark::read(dir.path());
        again.save(77).unwrap();
        assert_eq!(saved(dir.path()), 77);
        again.set(80);
        assert_eq!(
            (again.seq(), saved(dir.path())),
            (80, 77),
            "set saves nothing"
        );
    }

    #[test]
    fn a_torn_slot_gives_the_previous_mark_and_two_give_zero() {
        let dir = tempfile::TempDir::with_prefix("cf-fedmark-torn-").unwrap();
        let mut m = FedMark::read(dir.path());
        m.save(10).unwrap();
        m.save(20).unwrap();
        m.save(30).unwrap(); // generation 3: slot 1; slot 0 holds 20 (generation 2)
        let path = m.path().to_path_buf();
        drop(m);
        let good = fs::read(&path).unwrap();
        for cut in 0..SLOT {
            // The last write torn after `cut` of its bytes: the rest still the older slot's
            // bytes (generation 1, mark 10).
            let mut b = good.clone();
            let older = slot(1, 10);
            b[SLOT + cut..].copy_from_slice(&older[cut..]);
            fs::write(&path, &b).unwrap();
            assert_eq!(saved(dir.path()), 20, "cut {cut}");
        }
        // A damaged byte anywhere in the slot written last.
        for i in SLOT..2 * SLOT {
            let mut b = good.clone();
            b[i] ^= 0x40;
            fs::write(&path, &b).unwrap();
            assert_eq!(saved(dir.path()), 20, "byte {i}");
        }
        // Both damaged, or cut short: the whole log.
        let mut b = good.clone();
        b[3] ^= 1;
        b[SLOT + 3] ^= 1;
        fs::write(&path, &b).unwrap();
        assert_eq!(saved(dir.path()), 0);
        fs::write(&path, &good[..SLOT - 1]).unwrap();
        assert_eq!(saved(dir.path()), 0);
        fs::write(&path, &good[..SLOT + 5]).unwrap();
        assert_eq!(saved(dir.path()), 20, "slot 0 whole");
        // A save after damage writes both slots: the damaged one is not left behind.
        fs::write(&path, &b).unwrap();
        let mut m = FedMark::read(dir.path());
        m.save(40).unwrap();
        let after = fs::read(&path).unwrap();
        assert_eq!(read_slot(&after[..SLOT]), Some((1, 40)));
        assert_eq!(read_slot(&after[SLOT..]), Some((1, 40)));
    }

    #[test]
    fn a_mark_of_the_first_format_is_read_and_replaced_whole() {
        let dir = tempfile::TempDir::with_prefix("cf-fedmark-old-").unwrap();
        let path = dir.path().join(super::super::FED_MARK);
        let mut old = 1234u64.to_le_bytes().to_vec();
        old.extend_from_slice(&check(&1234u64.to_le_bytes()).to_le_bytes());
        fs::write(&path, &old).unwrap();
        assert_eq!(saved(dir.path()), 1234);
        let mut bad = old.clone();
        bad[0] ^= 1;
        fs::write(&path, &bad).unwrap();
        assert_eq!(saved(dir.path()), 0, "damaged");
        fs::write(&path, &old).unwrap();
        let mut m = FedMark::read(dir.path());
        m.save(1300).unwrap();
        let b = fs::read(&path).unwrap();
        assert_eq!(b.len(), 2 * SLOT);
        assert_eq!(parse(&b), Some((1, 1300, true)));
        m.save(1400).unwrap();
        assert_eq!(parse(&fs::read(&path).unwrap()), Some((2, 1400, true)));
    }

    #[test]
    fn a_failed_save_keeps_the_mark_in_memory_and_opens_again() {
        let dir = tempfile::TempDir::with_prefix("cf-fedmark-fail-").unwrap();
        let mut m = FedMark::read(&dir.path().join("missing"));
        assert!(m.save(3).is_err(), "no directory");
        assert_eq!(m.seq(), 0);
        fs::create_dir_all(dir.path().join("missing")).unwrap();
        m.save(3).unwrap();
        assert_eq!(saved(&dir.path().join("missing")), 3);
    }
}
