//! A set of fixed-size keys in one array, open addressing with linear probing, whose places can
//! be prefetched: a key's place follows from its own bits ([`Probe::place`]), so one place is
//! read for each ask (hashbrown reads its control bytes, then the slot: two waits for memory
//! once the table outgrows the cache), and a caller that knows its next keys prefetches all
//! their places at once ([`ProbeSet::prefetch`]), so the waits overlap. The node's seen set
//! (`sched/seen_table.rs`) and the link client's mapped CIDHASHes (`links/mapped.rs`) use it.

use crate::sys::prefetch;

/// A key of a [`ProbeSet`].
pub(crate) trait Probe: Copy + Eq {
    /// The value of an empty place, never inserted.
    const EMPTY: Self;
    /// Places the table has at least once it holds anything (a power of two).
    const MIN_PLACES: usize;
    /// The key's first place in a table of `mask + 1` places.
    fn place(&self, mask: usize) -> usize;
}

/// A set of keys: empty, or a power of two places long, at most 3/4 full.
#[derive(Clone)]
pub(crate) struct ProbeSet<K> {
    slots: Vec<K>,
    len: usize,
}

impl<K> Default for ProbeSet<K> {
    fn default() -> Self {
        ProbeSet {
            slots: Vec::new(),
            len: 0,
        }
    }
}

impl<K> std::fmt::Debug for ProbeSet<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeSet").field("len", &self.len).finish()
    }
}

impl<K: Probe> ProbeSet<K> {
    /// Keys in the set.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Places in the table.
    #[cfg(test)]
    pub(crate) fn places(&self) -> usize {
        self.slots.len()
    }

    /// Empties the set, keeping its memory.
    pub(crate) fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(K::EMPTY);
            self.len = 0;
        }
    }

    /// Asks the CPU to bring the place of `k` into the cache (both lines when the place
    /// straddles two); a hint with no effect on what the set holds.
    #[inline]
    pub(crate) fn prefetch(&self, k: &K) {
        if let Some(slot) = self.slots.get(k.place(self.slots.len().wrapping_sub(1))) {
            let start = std::ptr::from_ref(slot).cast::<u8>();
            let end = start.wrapping_add(std::mem::size_of::<K>() - 1);
            prefetch(start);
            if start as usize / 64 != end as usize / 64 {
                prefetch(end);
            }
        }
    }

    /// True when `k` is in the set.
    pub(crate) fn contains(&self, k: &K) -> bool {
        if self.slots.is_empty() {
            return false;
        }
        let mask = self.slots.len() - 1;
        let mut i = k.place(mask);
        loop {
            let s = &self.slots[i];
            if *s == K::EMPTY {
                return false;
            }
            if s == k {
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `k` (never [`Probe::EMPTY`]); false when it was already there.
    #[inline]
    pub(crate) fn insert(&mut self, k: K) -> bool {
        debug_assert!(k != K::EMPTY, "the empty key is not a key");
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.rebuild((self.slots.len() * 2).max(K::MIN_PLACES));
        }
        let mask = self.slots.len() - 1;
        let mut i = k.place(mask);
        loop {
            let s = &mut self.slots[i];
            if *s == K::EMPTY {
                *s = k;
                self.len += 1;
                return true;
            }
            if *s == k {
                return false;
            }
            i = (i + 1) & mask;
        }
    }

    /// Moves the keys into a table of `n` places (a power of two, over 4/3 of them).
    fn rebuild(&mut self, n: usize) {
        let old = std::mem::replace(&mut self.slots, vec![K::EMPTY; n]);
        let mask = n - 1;
        for k in old.into_iter().filter(|k| *k != K::EMPTY) {
            let mut i = k.place(mask);
            while self.slots[i] != K::EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = k;
        }
    }
}
