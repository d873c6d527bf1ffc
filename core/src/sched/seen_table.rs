//! The seen set's table in memory: 64-bit hashes in one array whose places can be prefetched.
//!
//! A crawl's seen set holds every URI queued in the cycle, far more than the cache holds, and
//! each link of a page asks it once. hashbrown's `HashSet<u64>` reads two places for each ask
//! (the group of control bytes, then the slot), each a wait for memory once the table outgrows
//! the cache: about 6% of a node thread's time at full speed. Here a hash is its own key and
//! its place follows from it alone (open addressing, linear probing over one array of the
//! hashes): one place read for each ask, and a caller that knows a page's links before it asks
//! for them prefetches all their places at once ([`Hashes::prefetch`]), so the waits overlap
//! (the table is `crate::probeset`, shared with the link client's mapped CIDHASHes).
//! (`sched/multinode/sitepeers.rs` does the same for the multinode scheduler's routes.)

use crate::probeset::{Probe, ProbeSet};

impl Probe for u64 {
    const EMPTY: u64 = 0;
    const MIN_PLACES: usize = 64;
    /// The hash's low bits: an xxh3 hash is its own key.
    #[inline]
    fn place(&self, mask: usize) -> usize {
        *self as usize & mask
    }
}

/// A set of 64-bit hashes. The hash 0 (the table's empty place) is kept apart.
#[derive(Default)]
pub(super) struct Hashes {
    set: ProbeSet<u64>,
    /// The hash 0 is in the set.
    zero: bool,
}

impl Hashes {
    /// Hashes in the set.
    pub(super) fn len(&self) -> usize {
        self.set.len() + usize::from(self.zero)
    }

    /// True when the set is empty.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the set, keeping its memory for the next cycle.
    pub(super) fn clear(&mut self) {
        self.set.clear();
        self.zero = false;
    }

    /// Asks the CPU to bring the place of `h` into the cache; a hint with no effect on what
    /// the set holds.
    #[inline]
    pub(super) fn prefetch(&self, h: u64) {
        self.set.prefetch(&h);
    }

    /// True when `h` is in the set.
    pub(super) fn contains(&self, h: u64) -> bool {
        if h == 0 {
            return self.zero;
        }
        self.set.contains(&h)
    }

    /// Adds `h`; false when it was already there.
    #[inline]
    pub(super) fn insert(&mut self, h: u64) -> bool {
        if h == 0 {
            return !std::mem::replace(&mut self.zero, true);
        }
        self.set.insert(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Generated hashes: random ones, the hash 0, and runs that share their low bits (every one
    /// of them starts probing at the same place, so runs wrap around the table's end).
    fn hashes(n: u64, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        let mut out = Vec::new();
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.push(match i % 5 {
                0 => 0,
                1 => x & !0xffff,
                2 => (x << 16) | 0xfff0 | (i & 0xf),
                _ => x,
            });
        }
        out
    }

    #[test]
    fn agrees_with_a_hash_set_through_growth_zero_collisions_and_clears() {
        let mut t = Hashes::default();
        assert!(t.is_empty() && !t.contains(0) && !t.contains(7));
        for round in 0..3u64 {
            let mut model = HashSet::new();
            let all = hashes(40_000, 0x9e37_79b9 + round);
            for (k, &h) in all.iter().enumerate() {
                t.prefetch(h);
                assert_eq!(t.insert(h), model.insert(h), "insert {h:#x}");
                assert_eq!(t.len(), model.len());
                // Now and then ask for one inserted long ago and one never inserted.
                if k % 97 == 0 {
                    let old = all[k / 2];
                    assert!(t.contains(old));
                    let absent = (old ^ 0x5555_0000_0000_0000) | 1;
                    assert_eq!(t.contains(absent), model.contains(&absent));
                }
            }
            for &h in &all {
                assert!(t.contains(h));
                assert!(!t.insert(h));
            }
            // The table is never more than three quarters full.
            assert!(t.set.len() * 4 <= t.set.places() * 3);
            let places = t.set.places();
            t.clear();
            assert!(t.is_empty() && !t.contains(0) && !t.contains(all[1]));
            assert_eq!(t.set.places(), places, "a clear keeps the memory");
        }
    }
}
