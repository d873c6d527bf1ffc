//! The checksum stores of every collection of a duplicate server, made durable: a write-ahead log
//! with group commit, and snapshots written a few shards at a time so the server never stops.
//!
//! Files in the data directory:
//! - `wal-<gen>`: state-change records ([`super::wal`]) logged while generation `gen` was current.
//! - `snapshot-<gen>`: every collection and entry, taken while `wal-<gen>` was being written
//!   (a "fuzzy" snapshot: it may already hold some of `wal-<gen>`'s changes).
//!   `snapshot-<gen>.tmp` is one being written; it is ignored and removed at start-up.
//!
//! Recovery loads the newest complete snapshot, then replays `wal-<gen>` and later logs in order.
//! Because records are results (`Set`, `Delete`) rather than requests, replaying them over the
//! fuzzy snapshot yields exactly the state at the crash, for every record that was committed.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::wal::{read_records, sync_parent, Record, SyncPoint, Wal, WalError};
use super::{AddOutcome, ChecksumStore, StoreError};
use crate::msg::Checksum;

/// One collection's configuration and store.
pub struct CollectionState {
    /// The configuration dict of its PPDUP_SET_CONFIG, marshal-encoded.
    pub config: Vec<u8>,
    /// The checksum store.
    pub store: ChecksumStore,
}

/// Why a store operation was refused.
#[derive(Debug)]
pub enum DupError {
    /// No PPDUP_SET_CONFIG added this collection.
    UnknownCollection,
    /// The store refused the entry.
    Store(StoreError),
    /// The log has no room for the change (the disk is full, say): nothing was changed, and
    /// the change may be asked again once there is room.
    NoRoom(String),
}

/// Log room to ask for before a record of these fields: the fields and a generous allowance
/// for the record's framing (header, operation byte, length prefixes, the 16-byte checksum).
pub(crate) fn record_room(collection: &[u8], uri: &[u8], node: &[u8]) -> u64 {
    (collection.len() + uri.len() + node.len() + 64) as u64
}

impl fmt::Display for DupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DupError::UnknownCollection => f.write_str("unknown collection"),
            DupError::Store(e) => e.fmt(f),
            DupError::NoRoom(why) => write!(f, "cannot store the change: {why}"),
        }
    }
}

impl std::error::Error for DupError {}

/// What start-up found and how long it took.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recovery {
    /// Generation of the snapshot loaded, if any.
    pub snapshot_gen: Option<u64>,
    /// Log records replayed after the snapshot.
    pub records_replayed: u64,
    /// Entries in all stores after recovery.
    pub entries: usize,
    /// Collections after recovery.
    pub collections: usize,
    /// Time taken.
    pub elapsed: Duration,
}

struct SnapshotJob {
    gen: u64,
    tmp: PathBuf,
    out: BufWriter<File>,
    /// (collection, shard) pairs still to write.
    todo: Vec<(Vec<u8>, usize)>,
    buf: Vec<u8>,
}

/// Every collection's store, with its log and snapshots.
pub struct DupStores {
    dir: PathBuf,
    shards: usize,
    collections: BTreeMap<Vec<u8>, CollectionState>,
    wal: Wal,
    gen: u64,
    job: Option<SnapshotJob>,
}

fn io_err<'a>(path: &'a Path, action: &'static str) -> impl Fn(std::io::Error) -> WalError + 'a {
    move |error| WalError::new(path, action, error)
}

/// Files `prefix<gen>` in `dir`, sorted by generation.
fn generations(dir: &Path, prefix: &str) -> Result<Vec<u64>, WalError> {
    let mut gens = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir, "list"))? {
        let entry = entry.map_err(io_err(dir, "list"))?;
        let name = entry.file_name();
        if let Some(g) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|g| g.parse::<u64>().ok())
        {
            gens.push(g);
        }
    }
    gens.sort_unstable();
    Ok(gens)
}

impl DupStores {
    /// Opens the stores in `dir` (created if missing), recovering what the files hold. Stores
    /// created from now on have `shards` shards.
    pub fn open(dir: &Path, shards: usize) -> Result<(DupStores, Recovery), WalError> {
        let started = Instant::now();
        fs::create_dir_all(dir).map_err(io_err(dir, "create"))?;
        // Unfinished snapshots are worthless.
        for entry in fs::read_dir(dir).map_err(io_err(dir, "list"))?.flatten() {
            if entry.file_name().to_string_lossy().ends_with(".tmp") {
                let _ = fs::remove_file(entry.path());
            }
        }
        let mut collections = BTreeMap::new();
        let mut rec = Recovery::default();
        let snap_gen = generations(dir, "snapshot-")?.last().copied();
        if let Some(g) = snap_gen {
            read_records(&dir.join(format!("snapshot-{g}")), |r| {
                apply(&mut collections, shards, r)
            })?;
            rec.snapshot_gen = Some(g);
        }
        let first = snap_gen.unwrap_or(0);
        let wal_gens: Vec<u64> = generations(dir, "wal-")?;
        let mut intact = 0;
        let mut last_gen = first;
        for &g in wal_gens.iter().filter(|&&g| g >= first) {
            let mut n = 0u64;
            intact = read_records(&dir.join(format!("wal-{g}")), |r| {
                n += 1;
                apply(&mut collections, shards, r)
            })?;
            rec.records_replayed += n;
            last_gen = g;
        }
        // Logs older than the snapshot are covered by it.
        for &g in wal_gens.iter().filter(|&&g| g < first) {
            let _ = fs::remove_file(dir.join(format!("wal-{g}")));
        }
        if !wal_gens.contains(&last_gen) {
            intact = 0;
        }
        let wal = Wal::open(&dir.join(format!("wal-{last_gen}")), intact)?;
        rec.collections = collections.len();
        rec.entries = collections.values().map(|c| c.store.len()).sum();
        rec.elapsed = started.elapsed();
        Ok((
            DupStores {
                dir: dir.to_owned(),
                shards,
                collections,
                wal,
                gen: last_gen,
                job: None,
            },
            rec,
        ))
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A collection's state.
    pub fn collection(&self, name: &[u8]) -> Option<&CollectionState> {
        self.collections.get(name)
    }

    /// Names of every collection.
    pub fn collection_names(&self) -> impl Iterator<Item = &[u8]> {
        self.collections.keys().map(Vec::as_slice)
    }

    /// Makes sure the log has room for `need` more bytes of records (see [`Wal::make_room`]):
    /// asked before a change whose record is not covered by [`DupStores::add`]'s own check.
    pub fn make_room(&mut self, need: u64) -> Result<(), DupError> {
        self.wal
            .make_room(need)
            .map_err(|e| DupError::NoRoom(e.to_string()))
    }

    /// Adds a collection, or replaces its configuration keeping its entries.
    pub fn set_collection(&mut self, name: &[u8], config: Vec<u8>) {
        self.wal.append(&Record::Collection {
            name: name.to_vec(),
            config: config.clone(),
        });
        let shards = self.shards;
        self.collections
            .entry(name.to_vec())
            .and_modify(|c| c.config = config.clone())
            .or_insert_with(|| CollectionState {
                config,
                store: ChecksumStore::new(shards),
            });
    }

    /// Deletes a collection and its store; returns whether it existed.
    pub fn drop_collection(&mut self, name: &[u8]) -> bool {
        let existed = self.collections.remove(name).is_some();
        if existed {
            self.wal.append(&Record::DropCollection {
                name: name.to_vec(),
            });
        }
        existed
    }

    /// Adds `cs` for `uri` on `node` unless it has an owner (MS-FSCMT 3.3.5.4). With no room in
    /// the log for a new mapping, [`DupError::NoRoom`] and nothing changes (an existing owner is
    /// still answered).
    pub fn add(
        &mut self,
        collection: &[u8],
        cs: Checksum,
        uri: &[u8],
        node: &[u8],
    ) -> Result<AddOutcome<'_>, DupError> {
        // Disjoint borrows of the log and the store: one probe of the table either way.
        let wal = &mut self.wal;
        let c = self
            .collections
            .get_mut(collection)
            .ok_or(DupError::UnknownCollection)?;
        if let Err(e) = wal.make_room(record_room(collection, uri, node)) {
            // No room for a new record: a checksum with an owner needs none and is answered.
            return match c.store.get(&cs) {
                Some((owner_uri, owner_node)) => Ok(AddOutcome::Exists {
                    owner_uri,
                    owner_node,
                }),
                None => Err(DupError::NoRoom(e.to_string())),
            };
        }
        let outcome = c.store.add(cs, uri, node).map_err(DupError::Store)?;
        if outcome == AddOutcome::Added {
            wal.append_set(collection, &cs, uri, node);
        }
        Ok(outcome)
    }

    /// Sets the owner of `cs`, replacing any (the replica's add, MS-FSCMT 3.4.5.3).
    pub fn put(
        &mut self,
        collection: &[u8],
        cs: Checksum,
        uri: &[u8],
        node: &[u8],
    ) -> Result<(), DupError> {
        let c = self
            .collections
            .get_mut(collection)
            .ok_or(DupError::UnknownCollection)?;
        self.wal
            .make_room(record_room(collection, uri, node))
            .map_err(|e| DupError::NoRoom(e.to_string()))?;
        c.store.put(cs, uri, node).map_err(DupError::Store)?;
        self.wal.append_set(collection, &cs, uri, node);
        Ok(())
    }

    /// Removes `cs`; returns whether it had an owner.
    pub fn remove(&mut self, collection: &[u8], cs: &Checksum) -> Result<bool, DupError> {
        let c = self
            .collections
            .get_mut(collection)
            .ok_or(DupError::UnknownCollection)?;
        self.wal
            .make_room(record_room(collection, b"", b""))
            .map_err(|e| DupError::NoRoom(e.to_string()))?;
        let removed = c.store.remove(cs);
        if removed {
            self.wal.append_delete(collection, cs);
        }
        Ok(removed)
    }

    /// Makes every change so far durable (group commit). Acknowledge only after this.
    pub fn commit(&mut self) -> Result<(), WalError> {
        self.wal.commit()
    }

    /// Writes every change so far to the log without waiting for the disk. Acknowledge them
    /// only after the returned point's [`SyncPoint::sync`] (on any thread) has returned.
    pub fn write_log(&mut self) -> Result<SyncPoint, WalError> {
        self.wal.write_pending()
    }

    /// Bytes in the current log.
    pub fn wal_len(&self) -> u64 {
        self.wal.len()
    }

    /// True while a snapshot is being written.
    pub fn snapshot_in_progress(&self) -> bool {
        self.job.is_some()
    }

    /// Starts a snapshot: later changes go to a new log generation, and [`Self::snapshot_step`]
    /// writes the stores shard by shard.
    pub fn start_snapshot(&mut self) -> Result<(), WalError> {
        if self.job.is_some() {
            return Ok(());
        }
        self.wal.commit()?;
        let gen = self.gen + 1;
        self.wal = Wal::open(&self.dir.join(format!("wal-{gen}")), 0)?;
        self.gen = gen;
        let tmp = self.dir.join(format!("snapshot-{gen}.tmp"));
        let file = File::create(&tmp).map_err(io_err(&tmp, "create"))?;
        let mut buf = Vec::new();
        let mut todo = Vec::new();
        for (name, c) in &self.collections {
            Record::Collection {
                name: name.clone(),
                config: c.config.clone(),
            }
            .encode(&mut buf);
            todo.extend((0..c.store.shard_count()).map(|s| (name.clone(), s)));
        }
        todo.reverse();
        self.job = Some(SnapshotJob {
            gen,
            tmp,
            out: BufWriter::with_capacity(1 << 20, file),
            todo,
            buf,
        });
        Ok(())
    }

    /// Writes up to `shards` more shards of the running snapshot; finishes it (fsync, rename,
    /// older files removed) when none are left. Returns true when no snapshot is running anymore.
    pub fn snapshot_step(&mut self, shards: usize) -> Result<bool, WalError> {
        let Some(job) = self.job.as_mut() else {
            return Ok(true);
        };
        for _ in 0..shards {
            let Some((name, shard)) = job.todo.pop() else {
                break;
            };
            // A collection dropped since the start has its DropCollection in the new log.
            if let Some(c) = self.collections.get(&name) {
                for (cs, uri, node) in c.store.iter_shard(shard) {
                    Record::encode_set(&mut job.buf, &name, &cs, uri, node);
                }
            }
            job.out
                .write_all(&job.buf)
                .map_err(io_err(&job.tmp, "write"))?;
            job.buf.clear();
        }
        if !job.buf.is_empty() {
            job.out
                .write_all(&job.buf)
                .map_err(io_err(&job.tmp, "write"))?;
            job.buf.clear();
        }
        if !job.todo.is_empty() {
            return Ok(false);
        }
        let job = self.job.take().expect("checked above");
        let tmp = job.tmp.clone();
        let file = job
            .out
            .into_inner()
            .map_err(|e| io_err(&tmp, "write")(e.into_error()))?;
        file.sync_all().map_err(io_err(&tmp, "sync"))?;
        let done = self.dir.join(format!("snapshot-{}", job.gen));
        fs::rename(&tmp, &done).map_err(io_err(&done, "rename"))?;
        sync_parent(&done).map_err(io_err(&done, "sync directory"))?;
        for g in generations(&self.dir, "snapshot-")?
            .into_iter()
            .filter(|&g| g < job.gen)
        {
            let _ = fs::remove_file(self.dir.join(format!("snapshot-{g}")));
        }
        for g in generations(&self.dir, "wal-")?
            .into_iter()
            .filter(|&g| g < job.gen)
        {
            let _ = fs::remove_file(self.dir.join(format!("wal-{g}")));
        }
        Ok(true)
    }

    /// Takes a whole snapshot now.
    pub fn snapshot_now(&mut self) -> Result<(), WalError> {
        self.start_snapshot()?;
        while !self.snapshot_step(usize::MAX)? {}
        Ok(())
    }

    /// Entries in all stores.
    pub fn entries(&self) -> usize {
        self.collections.values().map(|c| c.store.len()).sum()
    }
}

fn apply(collections: &mut BTreeMap<Vec<u8>, CollectionState>, shards: usize, r: Record) {
    match r {
        Record::Collection { name, config } => {
            collections
                .entry(name)
                .and_modify(|c| c.config = config.clone())
                .or_insert_with(|| CollectionState {
                    config,
                    store: ChecksumStore::new(shards),
                });
        }
        Record::DropCollection { name } => {
            collections.remove(&name);
        }
        Record::Set {
            collection,
            checksum,
            uri,
            node,
        } => {
            if let Some(c) = collections.get_mut(&collection) {
                // Logged entries passed the same limits when first stored.
                let _ = c.store.put(checksum, &uri, &node);
            }
        }
        Record::Delete {
            collection,
            checksum,
        } => {
            if let Some(c) = collections.get_mut(&collection) {
                c.store.remove(&checksum);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn dir(name: &str) -> TempDir {
        TempDir::with_prefix(format!("crawlfleet-dup-{name}-")).unwrap()
    }

    fn cs(i: u32) -> Checksum {
        let mut c = [0u8; 16];
        c[..4].copy_from_slice(&i.to_le_bytes());
        c[4] = 0x5a;
        Checksum(c)
    }

    fn uri(i: u32) -> Vec<u8> {
        format!("http://h{}/p{i}", i % 13).into_bytes()
    }

    #[test]
    fn committed_changes_survive_reopen_and_uncommitted_ones_do_not() {
        let d = dir("reopen");
        let (mut s, rec) = DupStores::open(d.path(), 4).unwrap();
        assert_eq!(rec.entries, 0);
        s.set_collection(b"c", b"{0".to_vec());
        for i in 0..1000 {
            s.add(b"c", cs(i), &uri(i), b"n1").unwrap();
        }
        for i in 0..100 {
            assert!(s.remove(b"c", &cs(i)).unwrap());
        }
        s.commit().unwrap();
        s.add(b"c", cs(5000), b"lost", b"n1").unwrap(); // never committed
        drop(s);
        let (s, rec) = DupStores::open(d.path(), 4).unwrap();
        assert_eq!(rec.entries, 900);
        assert_eq!(s.collection(b"c").unwrap().store.get(&cs(5000)), None);
        assert_eq!(
            s.collection(b"c").unwrap().store.get(&cs(500)),
            Some((&uri(500)[..], &b"n1"[..]))
        );
    }

    #[test]
    fn snapshot_with_concurrent_changes_recovers_exactly() {
        let d = dir("snapshot");
        let (mut s, _) = DupStores::open(d.path(), 8).unwrap();
        s.set_collection(b"a", b"{0".to_vec());
        s.set_collection(b"b", b"{0".to_vec());
        for i in 0..5000 {
            s.add(b"a", cs(i), &uri(i), b"n1").unwrap();
            s.add(b"b", cs(i), &uri(i), b"n2").unwrap();
        }
        s.commit().unwrap();
        s.start_snapshot().unwrap();
        let mut i = 0;
        // Interleave changes with snapshot steps: removes, re-adds with new owners, a drop.
        while !s.snapshot_step(1).unwrap() {
            s.remove(b"a", &cs(i)).unwrap();
            s.put(b"a", cs(i + 1), b"moved", b"n9").unwrap();
            s.add(b"a", cs(100_000 + i), &uri(i), b"n3").unwrap();
            s.commit().unwrap();
            i += 2;
        }
        s.drop_collection(b"b");
        s.set_collection(b"c", b"{0".to_vec());
        s.add(b"c", cs(1), b"x", b"n1").unwrap();
        s.commit().unwrap();
        let expect: Vec<_> = s
            .collection(b"a")
            .unwrap()
            .store
            .iter()
            .map(|(c, u, n)| (c, u.to_vec(), n.to_vec()))
            .collect();
        drop(s);
        assert!(d.path().join("snapshot-1").exists());
        assert!(
            !d.path().join("wal-0").exists(),
            "the log the snapshot covers is gone"
        );
        let (s, rec) = DupStores::open(d.path(), 8).unwrap();
        assert_eq!(rec.snapshot_gen, Some(1));
        assert!(s.collection(b"b").is_none());
        assert_eq!(s.collection(b"c").unwrap().store.len(), 1);
        let a = &s.collection(b"a").unwrap().store;
        assert_eq!(a.len(), expect.len());
        for (c, u, n) in expect {
            assert_eq!(a.get(&c), Some((&u[..], &n[..])));
        }
    }

    #[test]
    fn unknown_collection_is_refused() {
        let d = dir("unknown");
        let (mut s, _) = DupStores::open(d.path(), 1).unwrap();
        assert!(matches!(
            s.add(b"nope", cs(1), b"u", b"n"),
            Err(DupError::UnknownCollection)
        ));
    }
}
