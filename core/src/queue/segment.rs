//! Segment files: fixed-size, memory-mapped pieces of the back log and the front stack.
//!
//! A segment covers the logical byte range `[start, start + len)` of its queue; its file is named
//! after `start` (`back-<start, 16 hex digits>` or `front-<...>`), so the range a file covers is
//! known without reading it. It opens with a 32-byte header (magic, start, the sequence number of
//! the first record for the back log, and an xxh3 check of those 24 bytes) that [`Segment::open`]
//! verifies. Files are created sparse (`set_len`) and their blocks allocated (fallocate)
//! a megabyte ahead of the writes: a full disk is a typed error from a push, never a fault when
//! a record is written into the mapping, and a nearly empty queue holds little disk.
//!
//! This module holds the queue's system calls and the `unsafe` of mapping a file. The contract is pushed to
//! [`Segment::map`]: a queue directory belongs to one [`super::CrawlQueue`] at a time and nothing
//! else truncates or writes its files (another process shrinking a mapped file would make this
//! process fault, which no Rust code can prevent).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};
use xxhash_rust::xxh3::xxh3_64;

use super::QueueError;

/// Bytes of the segment header; records start this far into a segment.
pub(crate) const HEADER: u64 = 32;

/// Which structure a segment belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The FIFO log of `push_back`.
    Back,
    /// The LIFO stack of `push_front`.
    Front,
    /// A consumed back segment kept to be reused as a new one (its pages are allocated and
    /// cached, which makes writing into it several times cheaper than into a new sparse file).
    Spare,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Back => "back-",
            Kind::Front => "front-",
            Kind::Spare => "spare-",
        }
    }

    fn magic(self) -> &'static [u8; 8] {
        match self {
            Kind::Back => b"CFQBACK1",
            Kind::Front => b"CFQFRNT1",
            Kind::Spare => b"CFQSPARE",
        }
    }
}

/// The file of the segment of `kind` starting at `start`.
pub(crate) fn path(dir: &Path, kind: Kind, start: u64) -> PathBuf {
    dir.join(format!("{}{start:016x}", kind.prefix()))
}

/// Segment files of `kind` in `dir`, sorted by start. Names that do not parse are not ours and are
/// left alone.
pub(crate) fn list(dir: &Path, kind: Kind) -> Result<Vec<(u64, PathBuf)>, QueueError> {
    let rd = fs::read_dir(dir).map_err(|e| QueueError::io(dir, "listing the directory", e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| QueueError::io(dir, "listing the directory", e))?;
        let name = entry.file_name();
        let Some(hex) = name.to_str().and_then(|n| n.strip_prefix(kind.prefix())) else {
            continue;
        };
        if hex.len() != 16 {
            continue;
        }
        if let Ok(start) = u64::from_str_radix(hex, 16) {
            out.push((start, entry.path()));
        }
    }
    out.sort_unstable_by_key(|(s, _)| *s);
    Ok(out)
}

/// One segment file, mapped or not.
pub(crate) struct Segment {
    /// Logical position of the first byte of the file.
    pub start: u64,
    /// File length in bytes.
    pub len: u64,
    /// Back log: sequence number of the first record written in this segment.
    pub first_seq: u64,
    /// The file.
    pub path: PathBuf,
    /// The mapping of the whole file while the queue reads or writes it.
    pub map: Option<MmapMut>,
    /// Lowest logical position written since the last sync, `u64::MAX` when clean.
    pub dirty_from: u64,
    /// Logical position up to which blocks are known to be allocated.
    allocated_to: u64,
}

/// Blocks are allocated ahead of the writes by this much: a full disk is then an error from a
/// push, never a SIGBUS from a write into a hole of the mapping, while an almost empty queue
/// does not hold a whole segment of disk.
const ALLOC_CHUNK: u64 = 1 << 20;

fn header_bytes(kind: Kind, start: u64, first_seq: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..8].copy_from_slice(kind.magic());
    h[8..16].copy_from_slice(&start.to_le_bytes());
    h[16..24].copy_from_slice(&first_seq.to_le_bytes());
    let check = xxh3_64(&h[..24]);
    h[24..].copy_from_slice(&check.to_le_bytes());
    h
}

impl Segment {
    /// Logical position just past the file.
    pub fn end(&self) -> u64 {
        self.start + self.len
    }

    /// Creates (or truncates: a leftover past the recovered end holds nothing live) the segment
    /// file at `start`, `len` bytes, maps it and writes its header. The header reaches the disk
    /// at the next sync, with the records (`dirty_from` = `start`).
    pub fn create(
        dir: &Path,
        kind: Kind,
        start: u64,
        len: u64,
        first_seq: u64,
    ) -> Result<Segment, QueueError> {
        let path = path(dir, kind, start);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| QueueError::io(&path, "creating a segment", e))?;
        let sized = file.set_len(len);
        let mut seg = Segment {
            start,
            len,
            first_seq,
            path,
            map: None,
            dirty_from: start,
            allocated_to: start,
        };
        let made = sized
            .map_err(|e| QueueError::io(&seg.path, "sizing a segment", e))
            .and_then(|()| seg.map_file(&file))
            .and_then(|()| seg.ensure_allocated(start + HEADER));
        if let Err(e) = made {
            // No room for its first blocks (a full disk): a segment without its header would
            // make the queue unreadable at the next open, so it goes again.
            let _ = seg.remove();
            return Err(e);
        }
        let h = header_bytes(kind, start, first_seq);
        seg.bytes_mut()[..HEADER as usize].copy_from_slice(&h);
        Ok(seg)
    }

    /// Renames this (consumed, spare) segment to the segment of `kind` at `start` and writes its
    /// new header; its old content past the header is never read (readers stop at the tail).
    pub fn recycle(
        mut self,
        dir: &Path,
        kind: Kind,
        start: u64,
        first_seq: u64,
    ) -> Result<Segment, QueueError> {
        let to = path(dir, kind, start);
        fs::rename(&self.path, &to)
            .map_err(|e| QueueError::io(&to, "renaming a spare segment", e))?;
        self.path = to;
        self.start = start;
        self.first_seq = first_seq;
        self.dirty_from = start;
        self.allocated_to = start;
        self.map()?;
        self.ensure_allocated(start + HEADER)?;
        let h = header_bytes(kind, start, first_seq);
        self.bytes_mut()[..HEADER as usize].copy_from_slice(&h);
        Ok(self)
    }

    /// Opens an existing segment file without mapping it, checking its header against its name.
    pub fn open(kind: Kind, start: u64, path: PathBuf) -> Result<Segment, QueueError> {
        let corrupt = |what: String| QueueError::Corrupt {
            path: path.clone(),
            offset: 0,
            what,
        };
        let mut file =
            File::open(&path).map_err(|e| QueueError::io(&path, "opening a segment", e))?;
        let len = file
            .metadata()
            .map_err(|e| QueueError::io(&path, "reading a segment's size", e))?
            .len();
        if len < HEADER {
            return Err(corrupt(format!(
                "segment file of {len} bytes is shorter than its {HEADER}-byte header"
            )));
        }
        let mut h = [0u8; HEADER as usize];
        file.read_exact(&mut h)
            .map_err(|e| QueueError::io(&path, "reading a segment header", e))?;
        let first_seq = u64::from_le_bytes(h[16..24].try_into().expect("8 bytes"));
        if h != header_bytes(kind, start, first_seq) {
            return Err(corrupt(
                "segment header: bad magic, start or check (not a queue segment of this name)"
                    .into(),
            ));
        }
        Ok(Segment {
            start,
            len,
            first_seq,
            path,
            map: None,
            dirty_from: u64::MAX,
            allocated_to: start,
        })
    }

    fn map_file(&mut self, file: &File) -> Result<(), QueueError> {
        let len = usize::try_from(self.len).map_err(|_| QueueError::Corrupt {
            path: self.path.clone(),
            offset: 0,
            what: format!(
                "segment of {} bytes does not fit the address space",
                self.len
            ),
        })?;
        // SAFETY: the file is a segment of a queue directory, which one CrawlQueue owns (module
        // doc); nothing else resizes or writes it while it is mapped, so the mapping stays valid
        // for its whole length. All access goes through the returned MmapMut, which borrows
        // checks keep exclusive to this segment.
        let map = unsafe { MmapOptions::new().len(len).map_mut(file) }
            .map_err(|e| QueueError::io(&self.path, "mapping a segment", e))?;
        self.map = Some(map);
        Ok(())
    }

    /// Maps the file if it is not mapped yet.
    pub fn map(&mut self) -> Result<(), QueueError> {
        if self.map.is_some() {
            return Ok(());
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.path)
            .map_err(|e| QueueError::io(&self.path, "opening a segment", e))?;
        self.map_file(&file)
    }

    /// The mapped bytes; empty when the segment is not mapped (callers map first).
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// The mapped bytes, writable; empty when the segment is not mapped.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.map.as_deref_mut().unwrap_or(&mut [])
    }

    /// Makes sure the blocks under the logical positions before `to` are allocated (call before
    /// writing there).
    #[inline]
    pub fn ensure_allocated(&mut self, to: u64) -> Result<(), QueueError> {
        if to <= self.allocated_to {
            return Ok(());
        }
        self.allocate_more(to)
    }

    #[cold]
    fn allocate_more(&mut self, to: u64) -> Result<(), QueueError> {
        let from = self.allocated_to.max(self.start);
        let upto = (to + ALLOC_CHUNK).min(self.end());
        let err = |e| QueueError::io(&self.path, "allocating disk space for a segment", e);
        let file = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(err)?;
        if crate::sys::allocate(&file, from - self.start, upto - from).map_err(err)? {
            self.allocated_to = upto;
        } else {
            // The file system cannot allocate ahead: the file stays sparse.
            self.allocated_to = self.end();
        }
        Ok(())
    }

    /// Notes a write at logical position `pos`.
    #[inline]
    pub fn touch(&mut self, pos: u64) {
        if pos < self.dirty_from {
            self.dirty_from = pos;
        }
    }

    /// Makes the bytes written since the last sync in `[dirty_from, live_end)` durable (msync of
    /// that range only: bytes already consumed need not reach the disk). The header is included
    /// when the segment was created since the last sync.
    pub fn flush(&mut self, live_from: u64, live_end: u64) -> Result<(), QueueError> {
        if self.dirty_from == u64::MAX {
            return Ok(());
        }
        let from = self.dirty_from.max(live_from);
        let to = live_end.min(self.end());
        if let Some(map) = &self.map {
            let err = |e| QueueError::io(&self.path, "syncing a segment", e);
            if self.dirty_from == self.start {
                // Created since the last sync: its header must reach the disk too.
                map.flush_range(0, HEADER as usize).map_err(err)?;
            }
            if from < to {
                map.flush_range((from - self.start) as usize, (to - from) as usize)
                    .map_err(err)?;
            }
        }
        self.dirty_from = u64::MAX;
        Ok(())
    }

    /// Unmaps and deletes the file.
    pub fn remove(mut self) -> Result<(), QueueError> {
        self.map = None;
        remove_file(&self.path)
    }
}

/// Deletes a file; one already gone is fine.
pub(crate) fn remove_file(path: &Path) -> Result<(), QueueError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(QueueError::io(path, "deleting a consumed segment", e)),
    }
}
