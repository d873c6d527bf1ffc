//! The CIDHASHes a WebAnalyzer batch has written `urimap` lines for, in one array whose places
//! can be prefetched.
//!
//! A batch collects a second of a node's pages (up to 4 MiB): tens of thousands of CIDHASHes,
//! more than the cache holds, each link's asked once. hashbrown's set read two places for each
//! (its control bytes, then the slot), each a wait for memory; here a CIDHASH's place follows
//! from its own bits (it is MD5 output), one array, linear probing, so one place is read and a
//! page's links can have theirs prefetched together ([`Mapped::prefetch`]) before they are
//! asked in turn.

use super::CidHash;
use crate::links::CIDHASH_LEN;
use crate::sys::prefetch;

/// An empty place: no CIDHASH is all zero bytes (they are base64 characters).
const EMPTY: CidHash = CidHash([0; CIDHASH_LEN]);

/// A set of CIDHASHes.
#[derive(Clone, Default)]
pub(super) struct Mapped {
    /// Empty, or a power of two long, at most 3/4 full.
    slots: Vec<CidHash>,
    len: usize,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped").field("len", &self.len).finish()
    }
}

/// The place of `h` in a table of `mask + 1` places: the first eight characters (48 random
/// bits) mixed by a multiply, its high bits taken.
#[inline]
fn place(h: &CidHash, mask: usize) -> usize {
    let mut w = [0u8; 8];
    w.copy_from_slice(&h.0[..8]);
    let x = u64::from_le_bytes(w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 32) as usize & mask
}

impl Mapped {
    /// CIDHASHes in the set.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Empties the set, keeping its memory for the next batch.
    pub(super) fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(EMPTY);
            self.len = 0;
        }
    }

    /// Asks the CPU to bring the place of `h` into the cache; a hint with no effect on what
    /// the set holds.
    #[inline]
    pub(super) fn prefetch(&self, h: &CidHash) {
        if self.slots.is_empty() {
            return;
        }
        let slot = &self.slots[place(h, self.slots.len() - 1)];
        let start = std::ptr::from_ref(slot).cast::<i8>();
        prefetch(start);
        // A place of 21 bytes may cross into the next cache line.
        prefetch(start.wrapping_add(CIDHASH_LEN - 1));
    }

    /// True when `h` is in the set.
    pub(super) fn contains(&self, h: &CidHash) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = place(h, mask);
        loop {
            let s = &self.slots[i];
            if *s == EMPTY {
                return false;
            }
            if s == h {
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `h`; false when it was there.
    #[inline]
    pub(super) fn insert(&mut self, h: CidHash) -> bool {
        debug_assert!(h != EMPTY, "a CIDHASH is base64 characters");
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(1024));
        }
        let mask = self.slots.len() - 1;
        let mut i = place(&h, mask);
        loop {
            let s = &mut self.slots[i];
            if *s == EMPTY {
                *s = h;
                self.len += 1;
                return true;
            }
            if *s == h {
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    /// Moves the CIDHASHes into a table of `n` places (a power of two).
    fn rebuild(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; n]);
        let mask = n - 1;
        for h in old.into_iter().filter(|h| *h != EMPTY) {
            let mut i = place(&h, mask);
            while self.slots[i] != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = h;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::links::cidhash;
    use std::collections::HashSet;

    #[test]
    fn agrees_with_a_hash_set_through_growth_collisions_and_clears() {
        let mut m = Mapped::default();
        assert!(!m.contains(&cidhash(b"http://a/")));
        for round in 0..3 {
            let mut model = HashSet::new();
            for i in 0..30_000u32 {
                // URLs seen again and again, and CIDHASHes sharing their first eight
                // characters (one place for all of them: runs that wrap around the end).
                let h = match i % 16 {
                    0 => {
                        let mut h = cidhash(b"http://same/");
                        h.0[8..12].copy_from_slice(&i.to_le_bytes().map(|b| b'A' + b % 26));
                        h
                    }
                    _ => cidhash(format!("http://h{}/p{}", round, i % 9000).as_bytes()),
                };
                m.prefetch(&h);
                assert_eq!(m.insert(h), model.insert(h));
                assert_eq!(m.len(), model.len());
            }
            for h in &model {
                assert!(m.contains(h));
            }
            assert!(!m.contains(&cidhash(b"http://never/")));
            assert!(m.len * 4 <= m.slots.len() * 3);
            let places = m.slots.len();
            m.clear();
            assert_eq!(m.len(), 0);
            assert!(model.iter().all(|h| !m.contains(h)));
            assert_eq!(m.slots.len(), places, "a clear keeps the memory");
        }
    }
}
