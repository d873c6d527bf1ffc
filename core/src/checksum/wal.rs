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
//! The log is a [`crate::recordlog::LogWriter`] grown ahead of the records in steps of zeros
//! ([`PREALLOC_STEP`]), records written over them, so that the fdatasync of a group has only data to flush: appending changed
//! the file size every time, and ext4 then commits its journal too (measured on this machine:
//! 230-290 us per 32 KiB fdatasync against 370-440 us, and a third less system time). A zero
//! header is never a record (no payload is empty), so the zeros read as the end of the log. The
//! zeros are written and synced ahead of need by the writer's grower thread, 1 MiB at a time:
//! written on the main thread, a step's 16 MiB made the next group's fdatasync a 20-40 ms stall.

use std::path::Path;

use crate::msg::Checksum;
use crate::recordlog::{begin, put_bytes, read_log, seal, Cur, Format, LogWriter, Options};
pub use crate::recordlog::{sync_parent, LogError as WalError, SyncPoint};

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

/// The log's records: no magic, payloads up to [`MAX_RECORD`].
const FORMAT: Format = Format::plain("duplicate server log", MAX_RECORD);

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
        self.encode_payload(out);
        seal(out, start);
    }

    /// Appends the record's payload (operation and fields) to `out`.
    fn encode_payload(&self, out: &mut Vec<u8>) {
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
/// length of the intact prefix. A missing file has no records. A torn record ends the log, and
/// so do the zeros the file was grown with past the last record (a zero length with a zero
/// check is never a record: no payload is empty).
pub fn read_records(path: &Path, mut each: impl FnMut(Record)) -> Result<u64, WalError> {
    let found = read_log(path, &FORMAT, |p| match Record::decode_payload(p) {
        Some(rec) => {
            each(rec);
            true
        }
        None => false,
    })?;
    Ok(found.intact_len)
}

/// How far ahead of its records the log file is grown with zeros.
pub const PREALLOC_STEP: u64 = 16 << 20;

/// An append-only log file with group commit.
///
/// A commit is two steps that may run on different threads: [`Wal::write_pending`] writes the
/// queued records to the file (no waiting for the disk) and returns a [`SyncPoint`];
/// [`SyncPoint::sync`] (fdatasync) makes them durable. The owner of the log can go on with the
/// next group while another thread waits for the disk, and several groups written meanwhile
/// share one fdatasync. [`Wal::commit`] does both at once.
pub struct Wal {
    log: LogWriter,
}

impl Wal {
    /// Opens (creating if needed) the log at `path`, cutting it to `intact_len` bytes (the
    /// intact prefix [`read_records`] found) so a torn tail is not appended after.
    pub fn open(path: &Path, intact_len: u64) -> Result<Wal, WalError> {
        // Read again only when the server opens it: its pages leave the cache once synced.
        let opts = Options {
            grow_step: PREALLOC_STEP,
            ..Options::new(FORMAT).drop_synced()
        };
        Ok(Wal {
            log: LogWriter::open_at(path, intact_len, opts)?,
        })
    }

    /// Queues a record for the next commit.
    pub fn append(&mut self, rec: &Record) {
        self.log.append_with(|out| rec.encode_payload(out));
    }

    /// Queues a `Set` record for the next commit.
    pub fn append_set(&mut self, collection: &[u8], cs: &Checksum, uri: &[u8], node: &[u8]) {
        self.log
            .append_with(|out| set_payload(out, collection, cs, uri, node));
    }

    /// Queues a `Delete` record for the next commit.
    pub fn append_delete(&mut self, collection: &[u8], cs: &Checksum) {
        self.log
            .append_with(|out| delete_payload(out, collection, cs));
    }

    /// True when records wait for a commit.
    pub fn has_pending(&self) -> bool {
        self.log.has_pending()
    }

    /// Makes sure the file has room for `need` more bytes of records beyond those written and
    /// queued, growing it now if not ([`LogWriter::make_room`]). An error (the disk is full,
    /// say) leaves the log as it was: the caller refuses the operation instead of queueing its
    /// record. The usual case is one comparison.
    pub fn make_room(&mut self, need: u64) -> Result<(), WalError> {
        self.log.make_room(need)
    }

    /// Writes the queued records to the file without waiting for the disk; the returned point
    /// is what a later [`SyncPoint::sync`] makes durable. Acknowledge the records only after
    /// that sync returned.
    pub fn write_pending(&mut self) -> Result<SyncPoint, WalError> {
        self.log.write_pending()
    }

    /// The point covering every byte written so far.
    pub fn sync_point(&self) -> SyncPoint {
        self.log.sync_point()
    }

    /// Writes the queued records and waits until they are on disk (fdatasync). Only after this
    /// returns may the operations be acknowledged.
    pub fn commit(&mut self) -> Result<(), WalError> {
        self.log.commit()
    }

    /// Bytes written to the file (see [`Wal::write_pending`]).
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// True when the file holds no record.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.log.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::OpenOptions;
    use std::os::unix::fs::FileExt;
    use std::path::PathBuf;
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
        wal.log.settle_growth();
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(size > written && size.is_multiple_of(PREALLOC_STEP));
        drop(wal);
        let mut got = Vec::new();
        let intact = read_records(&path, |r| got.push(r)).unwrap();
        assert_eq!(intact, written);
        assert_eq!(got, (0..6).map(big).collect::<Vec<_>>());
        // Reopened (as after a crash): the file is cut to its records and grown again with
        // zeros from there, and new records follow the old ones.
        let before = std::fs::read(&path).unwrap();
        let mut wal = Wal::open(&path, intact).unwrap();
        wal.log.settle_growth();
        let after = std::fs::read(&path).unwrap();
        assert_eq!(after[..intact as usize], before[..intact as usize]);
        assert!(after[intact as usize..].iter().all(|&b| b == 0));
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
