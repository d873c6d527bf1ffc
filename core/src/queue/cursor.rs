//! The cursor file: where the back log's head and tail and the front stack's top are.
//!
//! One page, mapped, laid out as:
//!
//! | offset | bytes | field |
//! |-------:|------:|-------|
//! | 0      | 8     | magic `CFQCURS1` |
//! | 8      | 16    | boot id of the machine that last wrote the live slots |
//! | 64     | 1     | which live slot is current (0 or 1) |
//! | 128    | 2x64  | live slots, rewritten by every push and pop |
//! | 256    | 2x64  | synced slots, rewritten by every sync |
//!
//! A slot is seven little-endian u64 ([`State`] with a generation number) and a 64-bit check of
//! them. A live update writes the slot that is not current, then flips the one-byte
//! index: a single byte store, so a process killed at any instruction leaves one complete slot
//! current. A sync writes the older synced slot and msyncs the page: a torn page (power loss
//! mid-write) leaves the other synced slot intact, and the newest valid one wins.
//!
//! The live slots are only trusted when the boot id matches the running kernel's: then the page
//! cache that held every store the killed process made is still the file's content. After a
//! reboot they may have reached the disk in any state, so recovery uses the synced slots.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{compiler_fence, Ordering};

use memmap2::{MmapMut, MmapOptions};

use super::QueueError;

const MAGIC: &[u8; 8] = b"CFQCURS1";
const SIZE: usize = 4096;
const BOOT_ID: usize = 8;
const ACTIVE: usize = 64;
const LIVE: usize = 128;
const SYNCED: usize = 256;
const SLOT: usize = 64;

/// Positions of a queue; logical byte positions name a byte of a segment (see
/// [`super::segment`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct State {
    /// Back log: position of the next record to pop.
    pub head_pos: u64,
    /// Back log: sequence number of the next record to pop.
    pub head_seq: u64,
    /// Back log: position where the next record is written.
    pub tail_pos: u64,
    /// Back log: sequence number of the next record pushed.
    pub tail_seq: u64,
    /// Front stack: position just past the top record's footer; 0 when empty.
    pub top: u64,
    /// Front stack: records in it.
    pub front_len: u64,
}

/// Where [`CursorFile::open`] found the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Source {
    /// The live slot: same boot, exact state at the last push or pop.
    Live,
    /// The newest synced slot: state at the last sync.
    Synced,
}

/// The mapped cursor file.
pub(crate) struct CursorFile {
    path: PathBuf,
    map: MmapMut,
    /// Index of the current live slot (mirrors the byte at [`ACTIVE`]).
    active: u8,
    live_gen: u64,
    synced_gen: u64,
}

fn encode_slot(gen: u64, s: &State, out: &mut [u8]) {
    let fields = [
        gen,
        s.head_pos,
        s.head_seq,
        s.tail_pos,
        s.tail_seq,
        s.top,
        s.front_len,
    ];
    for (i, f) in fields.iter().enumerate() {
        out[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
    }
    out[56..64].copy_from_slice(&slot_check(&fields).to_le_bytes());
}

/// The check of a slot's seven fields: a multiply-rotate mix, which catches a torn or garbage
/// slot as surely as a hash here and costs a third of xxh3 on every push and pop.
#[inline]
fn slot_check(fields: &[u64; 7]) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for f in fields {
        h = (h ^ f).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
    h ^ (h >> 31)
}

/// The generation and state of a slot whose check holds.
fn decode_slot(b: &[u8]) -> Option<(u64, State)> {
    let u = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    if slot_check(&[u(0), u(1), u(2), u(3), u(4), u(5), u(6)]) != u(7) {
        return None;
    }
    Some((
        u(0),
        State {
            head_pos: u(1),
            head_seq: u(2),
            tail_pos: u(3),
            tail_seq: u(4),
            top: u(5),
            front_len: u(6),
        },
    ))
}

fn map(path: &Path, file: &File) -> Result<MmapMut, QueueError> {
    // SAFETY: the cursor file belongs to the one CrawlQueue that owns the directory (see
    // `super::segment`), and was checked to be exactly SIZE bytes; nothing else resizes it
    // while mapped.
    unsafe { MmapOptions::new().len(SIZE).map_mut(file) }
        .map_err(|e| QueueError::io(path, "mapping the cursor file", e))
}

impl CursorFile {
    /// Creates the cursor file of an empty queue atomically (written to `cursor.tmp`, synced,
    /// renamed), so a crash during creation leaves either no cursor or a complete one.
    pub fn create(path: &Path, state: &State) -> Result<CursorFile, QueueError> {
        let tmp = path.with_extension("tmp");
        let mut page = vec![0u8; SIZE];
        page[..8].copy_from_slice(MAGIC);
        encode_slot(0, state, &mut page[LIVE..LIVE + SLOT]);
        encode_slot(0, state, &mut page[SYNCED..SYNCED + SLOT]);
        let mut f =
            File::create(&tmp).map_err(|e| QueueError::io(&tmp, "creating the cursor", e))?;
        f.write_all(&page)
            .and_then(|()| f.sync_all())
            .map_err(|e| QueueError::io(&tmp, "writing the cursor", e))?;
        fs::rename(&tmp, path).map_err(|e| QueueError::io(path, "renaming the cursor", e))?;
        sync_dir(path)?;
        Ok(Self::open(path)?.0)
    }

    /// Opens the cursor file and reads the state to resume from.
    pub fn open(path: &Path) -> Result<(CursorFile, State, Source), QueueError> {
        let corrupt = |what: &str| QueueError::Corrupt {
            path: path.to_owned(),
            offset: 0,
            what: what.to_owned(),
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| QueueError::io(path, "opening the cursor", e))?;
        let len = file
            .metadata()
            .map_err(|e| QueueError::io(path, "reading the cursor's size", e))?
            .len();
        if len != SIZE as u64 {
            return Err(corrupt(&format!(
                "cursor file is {len} bytes, not {SIZE} (truncated or not a queue cursor)"
            )));
        }
        let map = map(path, &file)?;
        if &map[..8] != MAGIC {
            return Err(corrupt("cursor file has a bad magic (not a queue cursor)"));
        }
        let synced = [0, 1]
            .into_iter()
            .filter_map(|i| decode_slot(&map[SYNCED + i * SLOT..SYNCED + (i + 1) * SLOT]))
            .max_by_key(|(gen, _)| *gen);
        let active = map[ACTIVE] & 1;
        let live = decode_slot(&map[LIVE + active as usize * SLOT..][..SLOT]);
        let same_boot = crate::sys::boot_id().is_some_and(|id| map[BOOT_ID..BOOT_ID + 16] == id);
        let (state, source, live_gen) = match (live, synced) {
            (Some((lg, s)), _) if same_boot => (s, Source::Live, lg),
            (_, Some((_, s))) => (s, Source::Synced, 0),
            (Some(_), None) => {
                return Err(corrupt(
                    "both synced slots of the cursor fail their check (the live one is from \
                     another boot)",
                ))
            }
            (None, None) => return Err(corrupt("every slot of the cursor fails its check")),
        };
        if same_boot && source == Source::Synced {
            log::warn!(
                "{}: live cursor slot fails its check; resuming from the last sync",
                path.display()
            );
        }
        let synced_gen = synced.map_or(0, |(g, _)| g);
        Ok((
            CursorFile {
                path: path.to_owned(),
                map,
                active,
                live_gen,
                synced_gen,
            },
            state,
            source,
        ))
    }

    /// The generation of the live slot written last: each [`CursorFile::write_live`] adds one.
    /// 0 after a resume from a synced slot (the live slots untrusted) or a creation.
    pub fn live_gen(&self) -> u64 {
        self.live_gen
    }

    /// Records the running kernel's boot id, so that the live slots written from now on are
    /// trusted by a restart on this boot.
    pub fn stamp_boot_id(&mut self) {
        let id = crate::sys::boot_id().unwrap_or([0; 16]);
        self.map[BOOT_ID..BOOT_ID + 16].copy_from_slice(&id);
    }

    /// Publishes `s` as the live state: every push and pop ends here. The caller has written the
    /// record bytes `s` refers to before this call.
    #[inline]
    pub fn write_live(&mut self, s: &State) {
        let next = self.active ^ 1;
        self.live_gen = self.live_gen.wrapping_add(1);
        let off = LIVE + next as usize * SLOT;
        encode_slot(self.live_gen, s, &mut self.map[off..off + SLOT]);
        // The slot (and the records written before this call) must be in memory before the
        // index names it: a process killed between the stores then leaves the old slot current.
        // Stores to a shared file mapping reach the page cache in program order on a process
        // kill; only the compiler could reorder them.
        compiler_fence(Ordering::SeqCst);
        self.map[ACTIVE] = next;
        self.active = next;
    }

    /// Writes `s` to the older synced slot and makes the page durable. Every record `s` refers to
    /// is durable before this is called.
    pub fn write_synced(&mut self, s: &State) -> Result<(), QueueError> {
        self.synced_gen += 1;
        let mut older = None;
        for i in 0..2 {
            let slot = &self.map[SYNCED + i * SLOT..SYNCED + (i + 1) * SLOT];
            let gen = decode_slot(slot).map_or(0, |(g, _)| g);
            if older.is_none_or(|(_, g)| gen < g) {
                older = Some((i, gen));
            }
        }
        let i = older.map_or(0, |(i, _)| i);
        encode_slot(
            self.synced_gen,
            s,
            &mut self.map[SYNCED + i * SLOT..SYNCED + (i + 1) * SLOT],
        );
        self.map
            .flush()
            .map_err(|e| QueueError::io(&self.path, "syncing the cursor", e))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Makes creations, renames and deletions in the directory of `path` durable.
pub(crate) fn sync_dir(path: &Path) -> Result<(), QueueError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| QueueError::io(dir, "syncing the directory", e))
}

/// The size of the cursor file.
pub(crate) const FILE_BYTES: u64 = SIZE as u64;
