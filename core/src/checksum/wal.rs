//! The duplicate server's write-ahead log: the state changes of its checksum stores, appended and
//! made durable in groups before any acknowledgement of the group is sent.
//!
//! A record is the project's checked record (`crate::recordlog`: `[u32 length][u32 check]
//! [payload]`), the payload an operation byte and its fields. The log records results, not requests: `Set` (a checksum now
//! belongs to this URI and node) and `Delete`, so replaying records in order over any older state
//! gives the newest state. That is what lets a snapshot be written shard by shard while the server
//! keeps running: records logged during the snapshot are replayed over it.
//!
//! Recovery reads records until the first one that is truncated or fails its hash (a torn write at
//! the moment of a crash) and cuts the file there; nothing acknowledged is beyond that point,
//! because acknowledgements are sent only after [`Wal::commit`] returned.
//!
//! The file is grown ahead of the records in steps of zeros ([`PREALLOC_STEP`]) and records are
//! written over them, so that the fdatasync of a group has only data to flush: appending changed
//! the file size every time, and ext4 then commits its journal too (measured on this machine:
//! 230-290 us per 32 KiB fdatasync against 370-440 us, and a third less system time). A zero
//! header is never a record (no payload is empty), so the zeros read as the end of the log.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufReader};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::msg::Checksum;
use crate::recordlog::{begin, put_bytes, read_next, seal, Cur, Next, HEADER};

/// One logged state change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A collection exists, with this configuration (marshal bytes of its PPDUP_SET_CONFIG dict).
    Collection {
        /// The collection name.
        name: Vec<u8>,
        /// The configuration, marshal-encoded.
        config: Vec<u8>,
    },
    /// A collection and its store are gone.
    DropCollection {
        /// The collection name.
        name: Vec<u8>,
    },
    /// `checksum` now belongs to `uri` on `node`.
    Set {
        /// The collection name.
        collection: Vec<u8>,
        /// The checksum.
        checksum: Checksum,
        /// The owner URI.
        uri: Vec<u8>,
        /// The owner node identifier.
        node: Vec<u8>,
    },
    /// `checksum` has no owner.
    Delete {
        /// The collection name.
        collection: Vec<u8>,
        /// The checksum.
        checksum: Checksum,
    },
}

const OP_COLLECTION: u8 = 1;
const OP_DROP: u8 = 2;
const OP_SET: u8 = 3;
const OP_DELETE: u8 = 4;

/// Largest record accepted when reading (a URI is at most 64 KiB; configurations are small).
const MAX_RECORD: usize = 16 << 20;

/// A log file that could not be used.
#[derive(Debug)]
pub enum WalError {
    /// An I/O failure, with the file concerned.
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        error: io::Error,
    },
}

impl fmt::Display for WalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalError::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for WalError {}

fn set_payload(out: &mut Vec<u8>, collection: &[u8], cs: &Checksum, uri: &[u8], node: &[u8]) {
    out.push(OP_SET);
    put_bytes(out, collection);
    out.extend_from_slice(&cs.0);
    put_bytes(out, uri);
    put_bytes(out, node);
}

fn delete_payload(out: &mut Vec<u8>, collection: &[u8], cs: &Checksum) {
    out.push(OP_DELETE);
    put_bytes(out, collection);
    out.extend_from_slice(&cs.0);
}

impl Record {
    /// Appends the framed record to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = begin(out);
        match self {
            Record::Collection { name, config } => {
                out.push(OP_COLLECTION);
                put_bytes(out, name);
                put_bytes(out, config);
            }
            Record::DropCollection { name } => {
                out.push(OP_DROP);
                put_bytes(out, name);
            }
            Record::Set {
                collection,
                checksum,
                uri,
                node,
            } => set_payload(out, collection, checksum, uri, node),
            Record::Delete {
                collection,
                checksum,
            } => delete_payload(out, collection, checksum),
        }
        seal(out, start);
    }

    /// Appends a framed `Set` record from borrowed fields (no intermediate copies).
    pub fn encode_set(
        out: &mut Vec<u8>,
        collection: &[u8],
        cs: &Checksum,
        uri: &[u8],
        node: &[u8],
    ) {
        let start = begin(out);
        set_payload(out, collection, cs, uri, node);
        seal(out, start);
    }

    /// Appends a framed `Delete` record from borrowed fields.
    pub fn encode_delete(out: &mut Vec<u8>, collection: &[u8], cs: &Checksum) {
        let start = begin(out);
        delete_payload(out, collection, cs);
        seal(out, start);
    }

    /// Decodes one payload (without the 8-byte header); `None` if malformed.
    fn decode_payload(p: &[u8]) -> Option<Record> {
        let mut r = Cur(p);
        let bytes = |r: &mut Cur<'_>| r.bytes().map(<[u8]>::to_vec);
        let rec = match r.u8()? {
            OP_COLLECTION => Record::Collection {
                name: bytes(&mut r)?,
                config: bytes(&mut r)?,
            },
            OP_DROP => Record::DropCollection {
                name: bytes(&mut r)?,
            },
            OP_SET => Record::Set {
                collection: bytes(&mut r)?,
                checksum: Checksum(r.array()?),
                uri: bytes(&mut r)?,
                node: bytes(&mut r)?,
            },
            OP_DELETE => Record::Delete {
                collection: bytes(&mut r)?,
                checksum: Checksum(r.array()?),
            },
            _ => return None,
        };
        r.is_empty().then_some(rec)
    }
}

/// Reads every intact record of the file at `path`, in order, and returns them with the byte
/// length of the intact prefix. A missing file has no records.
pub fn read_records(path: &Path, mut each: impl FnMut(Record)) -> Result<u64, WalError> {
    let err = |error| WalError::Io {
        path: path.to_owned(),
        error,
    };
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(err(e)),
    };
    let size = file.metadata().map_err(err)?.len();
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut good: u64 = 0;
    let mut payload = Vec::new();
    // A torn record ends the log, and so do the zeros the file was grown with past the last
    // record (a zero length with a zero check is never a record: no payload is empty).
    while let Next::Record =
        read_next(&mut r, size - good, MAX_RECORD, &mut payload).map_err(err)?
    {
        let Some(rec) = Record::decode_payload(&payload) else {
            break;
        };
        each(rec);
        good += (HEADER + payload.len()) as u64;
    }
    Ok(good)
}

/// How far ahead of its records the log file is grown with zeros.
pub const PREALLOC_STEP: u64 = 16 << 20;

/// What the log file is grown with.
static ZEROS: [u8; 64 << 10] = [0; 64 << 10];

/// An append-only log file with group commit.
///
/// A commit is two steps that may run on different threads: [`Wal::write_pending`] writes the
/// queued records to the file (no waiting for the disk) and returns a [`SyncPoint`];
/// [`SyncPoint::sync`] (fdatasync) makes them durable. The owner of the log can go on with the
/// next group while another thread waits for the disk, and several groups written meanwhile
/// share one fdatasync. [`Wal::commit`] does both at once.
pub struct Wal {
    path: Arc<PathBuf>,
    file: Arc<File>,
    pending: Vec<u8>,
    /// Bytes of records written to the file (durable once a [`SyncPoint`] covering them was
    /// synced); the next record goes at this offset.
    written_len: u64,
    /// The file's size: records, then zeros up to here.
    allocated: u64,
    /// Bytes [`Wal::commit`] made durable (a [`SyncPoint`] synced elsewhere is not counted).
    committed_len: u64,
}

/// The log file and how many of its bytes were written when it was taken: once
/// [`SyncPoint::sync`] returns, every record written up to then is durable and may be
/// acknowledged.
#[derive(Clone)]
pub struct SyncPoint {
    path: Arc<PathBuf>,
    file: Arc<File>,
    len: u64,
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
    pub fn sync(&self) -> Result<(), WalError> {
        self.file.sync_data().map_err(|error| WalError::Io {
            path: self.path.to_path_buf(),
            error,
        })
    }
}

impl Wal {
    /// Opens (creating if needed) the log at `path`, cutting it to `intact_len` bytes (the
    /// intact prefix [`read_records`] found) so a torn tail is not appended after.
    pub fn open(path: &Path, intact_len: u64) -> Result<Wal, WalError> {
        let err = |error| WalError::Io {
            path: path.to_owned(),
            error,
        };
        let file = OpenOptions::new()
            .create(true)
            .read(true)
            .write(true)
            .truncate(false)
            .open(path)
            .map_err(err)?;
        file.set_len(intact_len).map_err(err)?;
        file.sync_all().map_err(err)?;
        sync_parent(path).map_err(err)?;
        Ok(Wal {
            path: Arc::new(path.to_owned()),
            file: Arc::new(file),
            pending: Vec::with_capacity(1 << 16),
            written_len: intact_len,
            allocated: intact_len,
            committed_len: intact_len,
        })
    }

    /// Queues a record for the next commit.
    pub fn append(&mut self, rec: &Record) {
        rec.encode(&mut self.pending);
    }

    /// Queues a `Set` record for the next commit.
    pub fn append_set(&mut self, collection: &[u8], cs: &Checksum, uri: &[u8], node: &[u8]) {
        Record::encode_set(&mut self.pending, collection, cs, uri, node);
    }

    /// Queues a `Delete` record for the next commit.
    pub fn append_delete(&mut self, collection: &[u8], cs: &Checksum) {
        Record::encode_delete(&mut self.pending, collection, cs);
    }

    /// True when records wait for a commit.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Makes sure the file has room for `need` more bytes of records beyond those written and
    /// queued, growing it (with zeros, a step ahead) now if not. An error (the disk is full,
    /// say) leaves the log as it was: the caller refuses the operation instead of queueing its
    /// record, and [`Wal::write_pending`] never has to grow the file for what was admitted. The
    /// usual case is one comparison.
    pub fn make_room(&mut self, need: u64) -> Result<(), WalError> {
        let end = self.written_len + self.pending.len() as u64 + need;
        if end <= self.allocated {
            return Ok(());
        }
        self.grow_to(end)
    }

    /// Grows the file with zeros to the step past `end`. On an error the allocated size stays
    /// what it was (zeros written past it read as the end of the log, and are overwritten).
    fn grow_to(&mut self, end: u64) -> Result<(), WalError> {
        let target = end.div_ceil(PREALLOC_STEP) * PREALLOC_STEP;
        let mut at = self.allocated;
        while at < target {
            let n = (target - at).min(ZEROS.len() as u64) as usize;
            self.file
                .write_all_at(&ZEROS[..n], at)
                .map_err(|error| WalError::Io {
                    path: self.path.to_path_buf(),
                    error,
                })?;
            at += n as u64;
        }
        self.allocated = target;
        Ok(())
    }

    /// Writes the queued records to the file without waiting for the disk; the returned point
    /// is what a later [`SyncPoint::sync`] makes durable. Acknowledge the records only after
    /// that sync returned.
    pub fn write_pending(&mut self) -> Result<SyncPoint, WalError> {
        if !self.pending.is_empty() {
            let end = self.written_len + self.pending.len() as u64;
            if end > self.allocated {
                // Grow the file with zeros, a step past what this write needs. The size change
                // becomes durable with the next sync, as an append's did.
                self.grow_to(end)?;
            }
            self.file
                .write_all_at(&self.pending, self.written_len)
                .map_err(|error| WalError::Io {
                    path: self.path.to_path_buf(),
                    error,
                })?;
            self.written_len = end;
            self.pending.clear();
        }
        Ok(self.sync_point())
    }

    /// The point covering every byte written so far.
    pub fn sync_point(&self) -> SyncPoint {
        SyncPoint {
            path: self.path.clone(),
            file: self.file.clone(),
            len: self.written_len,
        }
    }

    /// Writes the queued records and waits until they are on disk (fdatasync). Only after this
    /// returns may the operations be acknowledged.
    pub fn commit(&mut self) -> Result<(), WalError> {
        if self.pending.is_empty() && self.committed_len == self.written_len {
            return Ok(());
        }
        self.write_pending()?.sync()?;
        self.committed_len = self.written_len;
        Ok(())
    }

    /// Bytes written to the file (see [`Wal::write_pending`]).
    pub fn len(&self) -> u64 {
        self.written_len
    }

    /// True when the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.written_len == 0
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Makes a file's creation or rename in its directory durable.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => File::open(dir)?.sync_all(),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    /// A scratch directory (removed when the guard drops) and the log's path in it.
    fn tmp(name: &str) -> (TempDir, PathBuf) {
        let dir = TempDir::with_prefix(format!("crawlfleet-wal-{name}-")).unwrap();
        let path = dir.path().join("wal");
        (dir, path)
    }

    fn sample(i: u8) -> Record {
        Record::Set {
            collection: b"example".to_vec(),
            checksum: Checksum([i; 16]),
            uri: format!("http://a/{i}").into_bytes(),
            node: b"n1".to_vec(),
        }
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_cut() {
        let (_dir, path) = tmp("torn");
        let mut wal = Wal::open(&path, 0).unwrap();
        let recs = vec![
            Record::Collection {
                name: b"example".to_vec(),
                config: b"{0".to_vec(),
            },
            sample(1),
            Record::Delete {
                collection: b"example".to_vec(),
                checksum: Checksum([1; 16]),
            },
            sample(2),
            Record::DropCollection {
                name: b"other".to_vec(),
            },
        ];
        for r in &recs {
            wal.append(r);
        }
        wal.commit().unwrap();
        let full = wal.len();
        drop(wal);
        // A torn write: half of one more record, after the last one.
        let mut extra = Vec::new();
        sample(3).encode(&mut extra);
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all_at(&extra[..extra.len() / 2], full).unwrap();
        drop(f);
        let mut got = Vec::new();
        let intact = read_records(&path, |r| got.push(r)).unwrap();
        assert_eq!(got, recs);
        assert_eq!(intact, full);
        // Reopening cuts the tail; new records follow the intact ones.
        let mut wal = Wal::open(&path, intact).unwrap();
        wal.append(&sample(4));
        wal.commit().unwrap();
        let mut got = Vec::new();
        read_records(&path, |r| got.push(r)).unwrap();
        assert_eq!(got.len(), recs.len() + 1);
        assert_eq!(got.last(), Some(&sample(4)));
    }

    #[test]
    fn a_corrupted_record_ends_the_log() {
        let (_dir, path) = tmp("corrupt");
        let mut wal = Wal::open(&path, 0).unwrap();
        for i in 0..3 {
            wal.append(&sample(i));
        }
        wal.commit().unwrap();
        let one = wal.len() as usize / 3;
        drop(wal);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[one + 12] ^= 0xff; // inside the second record's payload
        std::fs::write(&path, &bytes).unwrap();
        let mut got = Vec::new();
        let intact = read_records(&path, |r| got.push(r)).unwrap();
        assert_eq!(got, vec![sample(0)]);
        assert_eq!(intact as usize, one);
    }

    #[test]
    fn written_records_become_durable_through_a_sync_point_on_another_thread() {
        let (_dir, path) = tmp("syncpoint");
        let mut wal = Wal::open(&path, 0).unwrap();
        wal.append(&sample(1));
        let first = wal.write_pending().unwrap();
        assert_eq!(first.len(), wal.len());
        wal.append(&sample(2));
        let second = wal.write_pending().unwrap();
        assert!(first.covered_by(&second) && !second.covered_by(&first));
        std::thread::spawn(move || second.sync().unwrap())
            .join()
            .unwrap();
        let mut got = Vec::new();
        read_records(&path, |r| got.push(r)).unwrap();
        assert_eq!(got, vec![sample(1), sample(2)]);
        // A new file's points are never covered by another file's.
        let (_other_dir, other_path) = tmp("syncpoint-other");
        let other = Wal::open(&other_path, 0).unwrap().sync_point();
        assert!(!other.covered_by(&first) && !other.same_file(&first));
    }

    #[test]
    fn the_zeros_the_log_is_grown_with_read_as_its_end() {
        let (_dir, path) = tmp("grown");
        let mut wal = Wal::open(&path, 0).unwrap();
        // Records across more than one step of growth.
        let big = |i: u8| Record::Collection {
            name: vec![i],
            config: vec![i; 3 << 20],
        };
        for i in 0..6 {
            wal.append(&big(i));
            wal.commit().unwrap();
        }
        let written = wal.len();
        assert!(written > PREALLOC_STEP);
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size > written && size.is_multiple_of(PREALLOC_STEP));
        drop(wal);
        let mut got = Vec::new();
        let intact = read_records(&path, |r| got.push(r)).unwrap();
        assert_eq!(intact, written);
        assert_eq!(got, (0..6).map(big).collect::<Vec<_>>());
        // Reopened (as after a crash): the zeros are cut and new records follow the old ones.
        let mut wal = Wal::open(&path, intact).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), intact);
        wal.append(&sample(9));
        wal.commit().unwrap();
        let mut got = Vec::new();
        assert_eq!(read_records(&path, |r| got.push(r)).unwrap(), wal.len());
        assert_eq!(got.len(), 7);
        assert_eq!(got.last(), Some(&sample(9)));
    }

    #[test]
    fn missing_file_has_no_records() {
        let (_dir, path) = tmp("missing");
        let path = path.with_file_name("absent");
        assert_eq!(read_records(&path, |_| panic!("no records")).unwrap(), 0);
    }
}
