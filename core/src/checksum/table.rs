//! A shard's table of checksum slots: open addressing with linear probing over one array of
//! 24-byte slots, so that the place of a checksum follows from its hash alone and can be
//! prefetched before it is asked for.
//!
//! A duplicate server's table outgrows the cache (24 bytes a checksum, a million checksums a
//! run), and each add asks it once: with hashbrown each ask read two places (the group of
//! control bytes, then the slot), each a wait for memory; the store's insert was 6-7% of the
//! server's and the replica's CPU samples. Here an ask reads one place (and the slots after it
//! while they are full), and a caller that knows a window of adds before it handles them
//! prefetches their places at once ([`Table::prefetch`]), so the waits overlap. The node's seen
//! set does the same (`sched/seen_table.rs`).
//!
//! The table is at most 3/4 full (linear probing's probe sequences grow fast past that); a
//! removal shifts the slots after it back (no tombstones).

use super::{hash_of, Slot};
use crate::sys::prefetch;

/// `len_node` of an empty slot: a URI length of 2^17 - 1, over [`super::MAX_URI_LEN`], so no
/// stored entry has it.
const EMPTY: u32 = u32::MAX;

const EMPTY_SLOT: Slot = Slot {
    checksum: [0; 16],
    uri_at: 0,
    len_node: EMPTY,
};

/// Where [`Table::find_or_vacant`] found a checksum, or the empty place it would go.
pub(super) enum Place {
    /// The slot holding it.
    Occupied(usize),
    /// The empty slot to fill ([`Table::fill`]).
    Vacant(usize),
}

/// The slots of one shard.
#[derive(Default)]
pub(super) struct Table {
    /// Empty, or a power of two long, at most 3/4 full.
    slots: Vec<Slot>,
    /// Full slots.
    len: usize,
}

impl Slot {
    fn is_empty(&self) -> bool {
        self.len_node == EMPTY
    }
}

impl Table {
    /// Slots allocated.
    pub(super) fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Asks the CPU to bring the place of hash `h` into the cache; a hint with no effect on
    /// what the table holds. A slot may straddle two cache lines: both are asked for.
    #[inline]
    pub(super) fn prefetch(&self, h: u64) {
        if let Some(slot) = self
            .slots
            .get(h as usize & self.slots.len().wrapping_sub(1))
        {
            let p: *const u8 = std::ptr::from_ref(slot).cast();
            prefetch(p);
            prefetch(p.wrapping_add(std::mem::size_of::<Slot>() - 1));
        }
    }

    /// The slot holding `cs` (of hash `h`).
    #[inline]
    pub(super) fn find(&self, h: u64, cs: &[u8; 16]) -> Option<&Slot> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.is_empty() {
                return None;
            }
            if s.checksum == *cs {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    /// The slot of `cs` (of hash `h`) if it is there, else the empty slot it goes to, room
    /// for it made first (the table grows before it would pass 3/4 full).
    #[inline]
    pub(super) fn find_or_vacant(&mut self, h: u64, cs: &[u8; 16]) -> Place {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(16));
        }
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.is_empty() {
                return Place::Vacant(i);
            }
            if s.checksum == *cs {
                return Place::Occupied(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Fills the empty slot `i` that [`Table::find_or_vacant`] returned (nothing changed the
    /// table since).
    #[inline]
    pub(super) fn fill(&mut self, i: usize, slot: Slot) {
        debug_assert!(self.slots[i].is_empty() && !slot.is_empty());
        self.slots[i] = slot;
        self.len += 1;
    }

    /// The full slot `i`.
    pub(super) fn get(&self, i: usize) -> &Slot {
        &self.slots[i]
    }

    /// The full slot `i`, to change its URI and node (not its checksum).
    pub(super) fn get_mut(&mut self, i: usize) -> &mut Slot {
        &mut self.slots[i]
    }

    /// Removes `cs` (of hash `h`); its slot, if it was there.
    pub(super) fn remove(&mut self, h: u64, cs: &[u8; 16]) -> Option<Slot> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut hole = h as usize & mask;
        loop {
            let s = &self.slots[hole];
            if s.is_empty() {
                return None;
            }
            if s.checksum == *cs {
                break;
            }
            hole = (hole + 1) & mask;
        }
        let removed = self.slots[hole];
        // Backward shift: each slot after the hole, up to the next empty one, moves into the
        // hole when the hole lies between its home place and where it is (its probe passes
        // the hole), so every probe still finds what it looks for before an empty slot.
        let mut j = (hole + 1) & mask;
        while !self.slots[j].is_empty() {
            let home = hash_of(&self.slots[j].checksum) as usize & mask;
            if j.wrapping_sub(home) & mask >= j.wrapping_sub(hole) & mask {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = EMPTY_SLOT;
        self.len -= 1;
        Some(removed)
    }

    /// The full slots, in table order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.slots.iter().filter(|s| !s.is_empty())
    }

    /// The full slots, to change their URIs' places (not their checksums).
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Slot> + '_ {
        self.slots.iter_mut().filter(|s| !s.is_empty())
    }

    /// Moves the slots into a table of `n` places (a power of two, over 4/3 of them).
    fn rebuild(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY_SLOT; n]);
        let mask = n - 1;
        for s in old.into_iter().filter(|s| !s.is_empty()) {
            let mut i = hash_of(&s.checksum) as usize & mask;
            while !self.slots[i].is_empty() {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn slot(cs: [u8; 16], v: u32) -> Slot {
        Slot {
            checksum: cs,
            uri_at: v,
            len_node: v & 0xffff,
        }
    }

    /// Checksums whose hashes share their low bits are what make long runs; random ones and
    /// repeats of earlier ones are mixed in.
    fn checksums(n: u32, seed: u64) -> Vec<[u8; 16]> {
        let mut x = seed | 1;
        (0..n)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut c = [0u8; 16];
                c[..8].copy_from_slice(&(x % (u64::from(n) * 2)).to_le_bytes());
                c[8] = (i % 3) as u8;
                c
            })
            .collect()
    }

    #[test]
    fn agrees_with_a_hash_map_through_growth_removal_and_wrap_around() {
        let mut t = Table::default();
        let mut model: HashMap<[u8; 16], u32> = HashMap::new();
        let all = checksums(60_000, 0x9e37_79b9);
        for (k, cs) in all.iter().enumerate() {
            let h = hash_of(cs);
            t.prefetch(h);
            let v = k as u32;
            match t.find_or_vacant(h, cs) {
                Place::Occupied(i) => {
                    assert_eq!(Some(&t.get(i).uri_at), model.get(cs));
                    t.get_mut(i).uri_at = v;
                }
                Place::Vacant(i) => {
                    assert!(!model.contains_key(cs));
                    t.fill(i, slot(*cs, v));
                }
            }
            model.insert(*cs, v);
            // Every third step removes one seen earlier (present or not).
            if k % 3 == 2 {
                let gone = all[k / 2];
                let h = hash_of(&gone);
                assert_eq!(
                    t.remove(h, &gone).map(|s| s.uri_at),
                    model.remove(&gone),
                    "remove {k}"
                );
            }
            assert_eq!(t.len, model.len());
            assert!(t.len * 4 <= t.slots.len() * 3);
        }
        for cs in &all {
            assert_eq!(
                t.find(hash_of(cs), cs).map(|s| s.uri_at),
                model.get(cs).copied()
            );
        }
        assert_eq!(t.iter().count(), model.len());
        // Remove everything: the table empties, and finds nothing afterwards.
        for cs in &all {
            assert_eq!(
                t.remove(hash_of(cs), cs).map(|s| s.uri_at),
                model.remove(cs)
            );
        }
        assert_eq!(t.len, 0);
        assert!(all.iter().all(|cs| t.find(hash_of(cs), cs).is_none()));
    }

    #[test]
    fn removal_keeps_runs_that_wrap_past_the_end_reachable() {
        // A small table, a run of checksums all placed at its last slot: the run wraps to
        // the front, and removing from its middle must keep the rest findable.
        let mut t = Table::default();
        t.rebuild(16);
        let mask = 15;
        let mut same_home = Vec::new();
        let mut i = 0u64;
        while same_home.len() < 6 {
            let mut c = [0u8; 16];
            c[..8].copy_from_slice(&i.to_le_bytes());
            if hash_of(&c) as usize & mask == mask {
                same_home.push(c);
            }
            i += 1;
        }
        for (k, c) in same_home.iter().enumerate() {
            let Place::Vacant(at) = t.find_or_vacant(hash_of(c), c) else {
                panic!("new")
            };
            assert_eq!(at, (mask + k) & mask);
            t.fill(at, slot(*c, k as u32));
        }
        let mut removed = Vec::new();
        for gone in [2usize, 0, 5] {
            let c = same_home[gone];
            assert_eq!(t.remove(hash_of(&c), &c).unwrap().uri_at, gone as u32);
            removed.push(gone);
            for (k, c) in same_home.iter().enumerate() {
                let found = t.find(hash_of(c), c).map(|s| s.uri_at);
                let expect = (!removed.contains(&k)).then_some(k as u32);
                assert_eq!(found, expect, "checksum {k} after removing {removed:?}");
            }
        }
    }
}
