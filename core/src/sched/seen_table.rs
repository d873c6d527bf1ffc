//! The seen set's table in memory: 64-bit hashes in one array whose places can be prefetched.
//!
//! A crawl's seen set holds every URI queued in the cycle, far more than the cache holds, and
//! each link of a page asks it once. hashbrown's `HashSet<u64>` reads two places for each ask
//! (the group of control bytes, then the slot), each a wait for memory once the table outgrows
//! the cache: about 6% of a node thread's time at full speed. Here a hash is its own key and
//! its place follows from it alone (open addressing, linear probing over one array of the
//! hashes): one place read for each ask, and a caller that knows a page's links before it asks
//! for them prefetches all their places at once ([`Hashes::prefetch`]), so the waits overlap.
//! (`sched/multinode/sitepeers.rs` does the same for the multinode scheduler's routes.)

use crate::sys::prefetch;

/// A set of 64-bit hashes. Slot value 0 marks an empty place; the hash 0 itself is kept apart.
#[derive(Default)]
pub(super) struct Hashes {
    /// Empty, or a power of two long, at most 3/4 full.
    slots: Vec<u64>,
    /// Hashes in `slots` (the hash 0 not counted).
    len: usize,
    /// The hash 0 is in the set.
    zero: bool,
}

impl Hashes {
    /// Hashes in the set.
    pub(super) fn len(&self) -> usize {
        self.len + usize::from(self.zero)
    }

    /// True when the set is empty.
    pub(super) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Empties the set, keeping its memory for the next cycle.
    pub(super) fn clear(&mut self) {
        self.slots.fill(0);
        self.len = 0;
        self.zero = false;
    }

    /// Asks the CPU to bring the place of `h` into the cache; a hint with no effect on what
    /// the set holds.
    #[inline]
    pub(super) fn prefetch(&self, h: u64) {
        if let Some(slot) = self
            .slots
            .get(h as usize & self.slots.len().wrapping_sub(1))
        {
            prefetch(std::ptr::from_ref(slot));
        }
    }

    /// True when `h` is in the set.
    pub(super) fn contains(&self, h: u64) -> bool {
        if h == 0 {
            return self.zero;
        }
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            match self.slots[i] {
                0 => return false,
                s if s == h => return true,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// Adds `h`; false when it was already there.
    #[inline]
    pub(super) fn insert(&mut self, h: u64) -> bool {
        if h == 0 {
            return !std::mem::replace(&mut self.zero, true);
        }
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(64));
        }
        let mask = self.slots.len() - 1;
        let mut i = h as usize & mask;
        loop {
            let s = &mut self.slots[i];
            if *s == 0 {
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

    /// Moves the hashes into a table of `n` places (a power of two, over 4/3 of them).
    fn rebuild(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, vec![0; n]);
        let mask = n - 1;
        for h in old.into_iter().filter(|&h| h != 0) {
            let mut i = h as usize & mask;
            while self.slots[i] != 0 {
                i = (i + 1) & mask;
            }
            self.slots[i] = h;
        }
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
            assert!(t.len * 4 <= t.slots.len() * 3);
            let places = t.slots.len();
            t.clear();
            assert!(t.is_empty() && !t.contains(0) && !t.contains(all[1]));
            assert_eq!(t.slots.len(), places, "a clear keeps the memory");
        }
    }
}
