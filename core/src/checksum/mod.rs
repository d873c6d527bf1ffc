//! The checksum store of a duplicate server (MS-FSCMT 3.3.1): for one crawl collection, a map
//! from a 16-byte document checksum to the URI and node identifier that own it.
//!
//! The store is split into a power-of-two number of shards chosen by the xxh3 hash of the
//! checksum. Each shard keeps its entries in an open-addressing table of 24-byte slots (checksum,
//! URI location, URI length and node; [`table`]) and the URI bytes in an arena of 1 MiB chunks,
//! so an entry costs 24 bytes of slot, the table's load-factor slack, and its URI bytes.
//! Removed URIs leave garbage in the arena that is compacted shard by shard. A caller that
//! knows its next checksums ([`ChecksumStore::prefetch`]) has their slots brought into the
//! cache while it works on the ones before.
//!
//! ```
//! use crawlfleet_core::checksum::{AddOutcome, ChecksumStore};
//! use crawlfleet_core::msg::Checksum;
//!
//! let mut store = ChecksumStore::new(16);
//! let cs = Checksum([7; 16]);
//! assert_eq!(store.add(cs, b"http://a/", b"node1").unwrap(), AddOutcome::Added);
//! match store.add(cs, b"http://b/", b"node2").unwrap() {
//!     AddOutcome::Exists { owner_uri, .. } => assert_eq!(owner_uri, b"http://a/"),
//!     other => panic!("{other:?}"),
//! }
//! ```

pub mod durable;
mod table;
pub mod wal;

use std::fmt;

use xxhash_rust::xxh3::xxh3_64;

use table::{Place, Table};

use crate::msg::Checksum;

/// Arena chunk size; a URI never spans two chunks.
const CHUNK: usize = 1 << 20;
/// Longest URI accepted (bytes).
pub const MAX_URI_LEN: usize = 64 * 1024;
/// Most distinct node identifiers one store tracks (they are few: one per node scheduler).
pub const MAX_NODES: usize = 1 << (32 - LEN_BITS);

/// Why an entry was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The URI is longer than [`MAX_URI_LEN`].
    UriTooLong(usize),
    /// More than [`MAX_NODES`] distinct node identifiers.
    TooManyNodes,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::UriTooLong(n) => {
                write!(f, "URI of {n} bytes exceeds the limit of {MAX_URI_LEN}")
            }
            StoreError::TooManyNodes => write!(f, "more than {MAX_NODES} node identifiers"),
        }
    }
}

impl std::error::Error for StoreError {}

/// What [`ChecksumStore::add`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddOutcome<'s> {
    /// The checksum was new: the adder owns it now.
    Added,
    /// The checksum was there already, owned by this URI and node (maybe the adder itself).
    Exists {
        /// The owner URI.
        owner_uri: &'s [u8],
        /// The owner node identifier.
        owner_node: &'s [u8],
    },
}

/// One slot: 24 bytes.
#[derive(Clone, Copy)]
struct Slot {
    checksum: [u8; 16],
    /// Chunk index (high 12 bits) and offset within the chunk (low 20 bits).
    uri_at: u32,
    /// URI length (low 17 bits, enough for MAX_URI_LEN) and node index (high 15 bits).
    len_node: u32,
}

const LEN_BITS: u32 = 17;
const LEN_MASK: u32 = (1 << LEN_BITS) - 1;

impl Slot {
    fn uri_len(&self) -> usize {
        (self.len_node & LEN_MASK) as usize
    }
    fn node(&self) -> usize {
        (self.len_node >> LEN_BITS) as usize
    }
}

/// URI bytes in 1 MiB chunks. A chunk is allocated with its capacity and filled by appending, so
/// its memory is touched only as URIs arrive (it was zeroed whole when allocated: a tenth of a
/// small crawl's instructions, and 64 MiB resident per collection with 64 shards before the
/// first hundred entries).
#[derive(Default)]
struct Arena {
    chunks: Vec<Vec<u8>>,
    /// Bytes no live slot refers to.
    garbage: usize,
    /// Bytes live slots refer to.
    live: usize,
}

impl Arena {
    fn push(&mut self, bytes: &[u8]) -> u32 {
        let full = self
            .chunks
            .last()
            .is_none_or(|c| c.len() + bytes.len() > CHUNK);
        if full {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let chunk = self.chunks.len() - 1;
        let last = &mut self.chunks[chunk];
        let at = ((chunk as u32) << 20) | last.len() as u32;
        last.extend_from_slice(bytes);
        self.live += bytes.len();
        at
    }

    fn get(&self, at: u32, len: usize) -> &[u8] {
        let chunk = (at >> 20) as usize;
        let off = (at & (CHUNK as u32 - 1)) as usize;
        &self.chunks[chunk][off..off + len]
    }

    fn forget(&mut self, len: usize) {
        self.live -= len;
        self.garbage += len;
    }
}

struct Shard {
    table: Table,
    arena: Arena,
}

fn hash_of(cs: &[u8; 16]) -> u64 {
    xxh3_64(cs)
}

/// The checksum store of one collection.
pub struct ChecksumStore {
    shards: Box<[Shard]>,
    shard_shift: u32,
    nodes: Vec<Box<[u8]>>,
    /// The index in `nodes` found last: a node's adds come in runs (a pipelined window), so it
    /// is tried first.
    last_node: usize,
    len: usize,
}

impl ChecksumStore {
    /// A store of `shards` shards (rounded up to a power of two, at least 1, at most 4096: the
    /// arena addresses 4096 chunks of 1 MiB per shard).
    pub fn new(shards: usize) -> Self {
        let n = shards.clamp(1, 4096).next_power_of_two();
        ChecksumStore {
            shards: (0..n)
                .map(|_| Shard {
                    table: Table::default(),
                    arena: Arena::default(),
                })
                .collect(),
            shard_shift: 64 - n.trailing_zeros(),
            nodes: Vec::new(),
            last_node: 0,
            len: 0,
        }
    }

    /// Number of checksums stored.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no checksum is stored.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    fn shard_of(&self, h: u64) -> usize {
        // The table uses the low bits and the top 7 bits of the hash; shards take the bits just
        // below the top 7 so the two choices stay independent.
        if self.shard_shift == 64 {
            0
        } else {
            ((h << 7) >> self.shard_shift) as usize
        }
    }

    fn node_index(&mut self, node: &[u8]) -> Result<u32, StoreError> {
        if self
            .nodes
            .get(self.last_node)
            .is_some_and(|n| n[..] == *node)
        {
            return Ok(self.last_node as u32);
        }
        if let Some(i) = self.nodes.iter().position(|n| &n[..] == node) {
            self.last_node = i;
            return Ok(i as u32);
        }
        if self.nodes.len() >= MAX_NODES {
            return Err(StoreError::TooManyNodes);
        }
        self.nodes.push(node.into());
        self.last_node = self.nodes.len() - 1;
        Ok(self.last_node as u32)
    }

    /// Asks the CPU to bring the table slot of `cs` into the cache, for an add, put, get or
    /// remove of it soon after: a hint, with no effect on what the store holds. A caller that
    /// knows a batch's checksums before it handles them prefetches them all first, so the
    /// waits for memory overlap.
    #[inline]
    pub fn prefetch(&self, cs: &Checksum) {
        let h = hash_of(&cs.0);
        self.shards[self.shard_of(h)].table.prefetch(h);
    }

    /// The owner of `cs`, if any: (URI, node identifier).
    pub fn get(&self, cs: &Checksum) -> Option<(&[u8], &[u8])> {
        let h = hash_of(&cs.0);
        let shard = &self.shards[self.shard_of(h)];
        shard.table.find(h, &cs.0).map(|s| {
            (
                shard.arena.get(s.uri_at, s.uri_len()),
                &self.nodes[s.node()][..],
            )
        })
    }

    /// Adds `cs` owned by `uri` on `node` unless it is there already (MS-FSCMT 3.3.5.4: the
    /// first node and URI to add a checksum own it).
    pub fn add(
        &mut self,
        cs: Checksum,
        uri: &[u8],
        node: &[u8],
    ) -> Result<AddOutcome<'_>, StoreError> {
        if uri.len() > MAX_URI_LEN {
            return Err(StoreError::UriTooLong(uri.len()));
        }
        let h = hash_of(&cs.0);
        let si = self.shard_of(h);
        // Taking the node index first (node ids are few) keeps the table to one probe.
        let node = self.node_index(node)?;
        let shard = &mut self.shards[si];
        match shard.table.find_or_vacant(h, &cs.0) {
            Place::Occupied(i) => {
                let s = *shard.table.get(i);
                Ok(AddOutcome::Exists {
                    owner_uri: shard.arena.get(s.uri_at, s.uri_len()),
                    owner_node: &self.nodes[s.node()][..],
                })
            }
            Place::Vacant(i) => {
                let uri_at = shard.arena.push(uri);
                shard.table.fill(
                    i,
                    Slot {
                        checksum: cs.0,
                        uri_at,
                        len_node: (uri.len() as u32) | (node << LEN_BITS),
                    },
                );
                self.len += 1;
                Ok(AddOutcome::Added)
            }
        }
    }

    /// Sets the owner of `cs`, replacing any (MS-FSCMT 3.4.5.3: the replica overwrites).
    pub fn put(&mut self, cs: Checksum, uri: &[u8], node: &[u8]) -> Result<(), StoreError> {
        if uri.len() > MAX_URI_LEN {
            return Err(StoreError::UriTooLong(uri.len()));
        }
        let h = hash_of(&cs.0);
        let si = self.shard_of(h);
        let node = self.node_index(node)?;
        let shard = &mut self.shards[si];
        let len_node = (uri.len() as u32) | (node << LEN_BITS);
        // One probe, as in `add`: the replica puts every forwarded add.
        match shard.table.find_or_vacant(h, &cs.0) {
            Place::Occupied(i) => {
                let slot = shard.table.get_mut(i);
                shard.arena.forget(slot.uri_len());
                slot.uri_at = shard.arena.push(uri);
                slot.len_node = len_node;
                self.maybe_compact(si);
            }
            Place::Vacant(i) => {
                let uri_at = shard.arena.push(uri);
                shard.table.fill(
                    i,
                    Slot {
                        checksum: cs.0,
                        uri_at,
                        len_node,
                    },
                );
                self.len += 1;
            }
        }
        Ok(())
    }

    /// Removes `cs`; returns whether it was there.
    pub fn remove(&mut self, cs: &Checksum) -> bool {
        let h = hash_of(&cs.0);
        let si = self.shard_of(h);
        let shard = &mut self.shards[si];
        let Some(slot) = shard.table.remove(h, &cs.0) else {
            return false;
        };
        shard.arena.forget(slot.uri_len());
        self.len -= 1;
        self.maybe_compact(si);
        true
    }

    /// Rewrites a shard's arena when more than half of it is garbage.
    fn maybe_compact(&mut self, si: usize) {
        let shard = &mut self.shards[si];
        if shard.arena.garbage < CHUNK || shard.arena.garbage < shard.arena.live {
            return;
        }
        let mut fresh = Arena::default();
        for slot in shard.table.iter_mut() {
            let bytes = shard.arena.get(slot.uri_at, slot.uri_len());
            slot.uri_at = fresh.push(bytes);
        }
        shard.arena = fresh;
    }

    /// Every entry: (checksum, URI, node identifier), shard by shard.
    pub fn iter(&self) -> impl Iterator<Item = (Checksum, &[u8], &[u8])> + '_ {
        (0..self.shards.len()).flat_map(move |i| self.iter_shard(i))
    }

    /// The entries of shard `i` (empty when there is no such shard).
    pub fn iter_shard(&self, i: usize) -> impl Iterator<Item = (Checksum, &[u8], &[u8])> + '_ {
        self.shards.get(i).into_iter().flat_map(move |shard| {
            shard.table.iter().map(move |s| {
                (
                    Checksum(s.checksum),
                    shard.arena.get(s.uri_at, s.uri_len()),
                    &self.nodes[s.node()][..],
                )
            })
        })
    }

    /// Bytes of memory held, URI bytes and arena slack included, table slack included.
    pub fn memory_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                s.table.capacity() * std::mem::size_of::<Slot>() + s.arena.chunks.len() * CHUNK
            })
            .sum::<usize>()
            + self.nodes.iter().map(|n| n.len() + 16).sum::<usize>()
    }

    /// Bytes of live URIs.
    pub fn uri_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.arena.live).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cs(i: u64) -> Checksum {
        let mut c = [0u8; 16];
        c[..8].copy_from_slice(&i.to_le_bytes());
        c[8..].copy_from_slice(&(!i).to_le_bytes());
        Checksum(c)
    }

    #[test]
    fn slot_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Slot>(), 24);
    }

    #[test]
    fn first_adder_owns() {
        let mut s = ChecksumStore::new(8);
        assert_eq!(s.add(cs(1), b"u1", b"n1").unwrap(), AddOutcome::Added);
        assert_eq!(
            s.add(cs(1), b"u2", b"n2").unwrap(),
            AddOutcome::Exists {
                owner_uri: b"u1",
                owner_node: b"n1"
            }
        );
        assert_eq!(s.len(), 1);
        assert!(s.remove(&cs(1)));
        assert!(!s.remove(&cs(1)));
        assert_eq!(s.add(cs(1), b"u2", b"n2").unwrap(), AddOutcome::Added);
        assert_eq!(s.get(&cs(1)), Some((&b"u2"[..], &b"n2"[..])));
    }

    #[test]
    fn put_overwrites() {
        let mut s = ChecksumStore::new(1);
        s.put(cs(5), b"a", b"n1").unwrap();
        s.put(cs(5), b"bb", b"n2").unwrap();
        assert_eq!(s.get(&cs(5)), Some((&b"bb"[..], &b"n2"[..])));
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn repeated_puts_keep_one_entry_and_compact_the_arena() {
        let mut s = ChecksumStore::new(1);
        let uri = |i: u64| format!("http://example.com/{i}/{}", "x".repeat(200)).into_bytes();
        for i in 0..20_000 {
            s.put(cs(i % 3), &uri(i), b"n").unwrap();
        }
        assert_eq!(s.len(), 3);
        for i in 19_997..20_000 {
            assert_eq!(s.get(&cs(i % 3)), Some((&uri(i)[..], &b"n"[..])));
        }
        let arena = &s.shards[0].arena;
        assert!(
            arena.garbage <= arena.live.max(CHUNK),
            "garbage was compacted"
        );
    }

    #[test]
    fn many_entries_survive_removal_and_compaction() {
        let mut s = ChecksumStore::new(4);
        let uri = |i: u64| format!("http://host{}.example/{}", i % 97, i).into_bytes();
        for i in 0..200_000 {
            s.add(cs(i), &uri(i), format!("n{}", i % 3).as_bytes())
                .unwrap();
        }
        for i in (0..200_000).filter(|i| i % 4 != 0) {
            assert!(s.remove(&cs(i)));
        }
        assert_eq!(s.len(), 50_000);
        for i in 0..200_000 {
            let got = s.get(&cs(i));
            if i % 4 == 0 {
                let n = format!("n{}", i % 3);
                assert_eq!(got, Some((&uri(i)[..], n.as_bytes())));
            } else {
                assert_eq!(got, None);
            }
        }
        assert_eq!(s.iter().count(), 50_000);
        // Compaction reclaimed the arena: garbage stays below live bytes plus one chunk.
        for shard in s.shards.iter() {
            assert!(shard.arena.garbage <= shard.arena.live.max(CHUNK));
        }
    }

    /// A batch's checksums prefetched first, then added in order (as the duplicate server
    /// handles a window), answers as adding each alone answers: duplicates inside the batch
    /// and against the store, puts and removes between batches, through the tables' growth.
    #[test]
    fn batches_prefetched_then_added_answer_as_one_by_one() {
        use std::collections::HashMap;
        let mut s = ChecksumStore::new(8);
        let mut model: HashMap<Checksum, (Vec<u8>, Vec<u8>)> = HashMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for batch in 0..300u64 {
            let n = (batch % 37) as usize * 30;
            let adds: Vec<(Checksum, Vec<u8>, Vec<u8>)> = (0..n)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // A range a little over the adds so far: repeats within and across batches.
                    let c = cs(x % (batch * 200 + 500));
                    let uri = format!("http://h/{batch}/{i}").into_bytes();
                    (c, uri, format!("n{}", i % 3).into_bytes())
                })
                .collect();
            for (c, _, _) in &adds {
                s.prefetch(c);
            }
            for (c, uri, node) in &adds {
                let got = s.add(*c, uri, node).unwrap();
                match model.get(c) {
                    Some((u, nd)) => assert_eq!(
                        got,
                        AddOutcome::Exists {
                            owner_uri: u,
                            owner_node: nd
                        }
                    ),
                    None => {
                        assert_eq!(got, AddOutcome::Added);
                        model.insert(*c, (uri.clone(), node.clone()));
                    }
                }
            }
            // Between batches: a put (the replica's overwrite) and a remove, prefetched too.
            let (c, uri) = (cs(x % 997), format!("http://put/{batch}").into_bytes());
            s.prefetch(&c);
            s.put(c, &uri, b"np").unwrap();
            model.insert(c, (uri, b"np".to_vec()));
            let gone = cs((x >> 7) % 1009);
            s.prefetch(&gone);
            assert_eq!(s.remove(&gone), model.remove(&gone).is_some());
            assert_eq!(s.len(), model.len());
        }
        for (c, (u, n)) in &model {
            assert_eq!(s.get(c), Some((&u[..], &n[..])));
        }
        assert_eq!(s.iter().count(), model.len());
    }

    #[test]
    fn overlong_uri_is_refused() {
        let mut s = ChecksumStore::new(1);
        let long = vec![b'a'; MAX_URI_LEN + 1];
        assert_eq!(
            s.add(cs(1), &long, b"n"),
            Err(StoreError::UriTooLong(MAX_URI_LEN + 1))
        );
        let max = vec![b'a'; MAX_URI_LEN];
        assert_eq!(s.add(cs(1), &max, b"n").unwrap(), AddOutcome::Added);
        assert_eq!(s.get(&cs(1)).unwrap().0.len(), MAX_URI_LEN);
    }
}
