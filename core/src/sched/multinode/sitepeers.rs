//! Crawl site -> node connection for one collection, in a table whose slots can be prefetched.
//!
//! The routing thread looks up one site per CMD_UM_URI. With tens of thousands of sites the
//! table is larger than the cache, and each lookup waited for memory. Open addressing with
//! linear probing puts a site's entry at a place known from its hash alone, so the routing of a
//! batch of frames can prefetch the places of the next frames' sites while it forwards the
//! current one (see `Multinode::handle_frames`).

use crate::sys::prefetch;
use smallvec::SmallVec;

use super::PeerId;

/// A crawl site, up to 24 bytes inline (most host names are).
type SiteKey = SmallVec<[u8; 24]>;

/// One place of the table; `hash == 0` marks it empty (hashes are made odd).
#[derive(Clone, Default)]
struct Slot {
    hash: u64,
    peer: PeerId,
    key: SiteKey,
}

/// Crawl site -> peer. Hashes come from the caller ([`SitePeers::hash`] of any table sharing
/// the same hasher), so that a frame's site is hashed once for the prefetch and the lookup.
#[derive(Default)]
pub(super) struct SitePeers {
    /// Empty, or a power of two long, at most 3/4 full.
    slots: Vec<Slot>,
    len: usize,
}

impl SitePeers {
    /// The hash of `site` as the table uses it.
    pub(super) fn hash(hasher: &foldhash::fast::RandomState, site: &[u8]) -> u64 {
        use std::hash::BuildHasher;
        hasher.hash_one(site) | 1
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Asks the CPU to bring the place of `hash` into the cache; a hint with no effect on
    /// what the table holds.
    #[inline]
    pub(super) fn prefetch(&self, hash: u64) {
        if let Some(slot) = self
            .slots
            .get(hash as usize & self.slots.len().wrapping_sub(1))
        {
            let start = (slot as *const Slot).cast::<i8>();
            prefetch(start);
            prefetch(start.wrapping_add(std::mem::size_of::<Slot>() - 1));
        }
    }

    /// The peer of `site`, whose hash is `hash`.
    #[inline]
    pub(super) fn get(&self, site: &[u8], hash: u64) -> Option<PeerId> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            let s = &self.slots[i];
            if s.hash == 0 {
                return None;
            }
            if s.hash == hash && s.key.as_slice() == site {
                return Some(s.peer);
            }
            i = (i + 1) & mask;
        }
    }

    /// Sets the peer of `site`, whose hash is `hash`.
    pub(super) fn insert(&mut self, site: &[u8], hash: u64, peer: PeerId) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow();
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            let s = &mut self.slots[i];
            if s.hash == 0 {
                *s = Slot {
                    hash,
                    peer,
                    key: SiteKey::from_slice(site),
                };
                self.len += 1;
                return;
            }
            if s.hash == hash && s.key.as_slice() == site {
                s.peer = peer;
                return;
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let n = (self.slots.len() * 2).max(64);
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); n]);
        let mask = n - 1;
        for s in old.into_iter().filter(|s| s.hash != 0) {
            let mut i = s.hash as usize & mask;
            while self.slots[i].hash != 0 {
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

    #[test]
    fn agrees_with_a_map_through_growth_collisions_and_clears() {
        let hasher = foldhash::fast::RandomState::default();
        let mut t = SitePeers::default();
        let mut model: HashMap<Vec<u8>, PeerId> = HashMap::new();
        let site = |i: u64| format!("www{}.site{i}.example.com", i % 3).into_bytes();
        for round in 0..3u64 {
            for i in 0..5000u64 {
                let s = site(i * 7 % 3001);
                // A poor hash for a third of the sites: every one of them probes one run.
                let h = if i % 3 == 0 {
                    SitePeers::hash(&hasher, b"x")
                } else {
                    SitePeers::hash(&hasher, &s)
                };
                // Each site keeps the hash it was first given, as callers hash a site alike.
                let h = match model.get(&s) {
                    Some(_) => find_hash(&t, &s).unwrap(),
                    None => h,
                };
                t.prefetch(h);
                t.insert(&s, h, i + round);
                model.insert(s, i + round);
                assert_eq!(t.len(), model.len());
            }
            for (s, &p) in &model {
                let h = find_hash(&t, s).unwrap();
                assert_eq!(t.get(s, h), Some(p));
            }
            assert_eq!(
                t.get(b"absent.example", SitePeers::hash(&hasher, b"absent")),
                None
            );
            if round < 2 {
                t.clear();
                model.clear();
                assert_eq!(t.len(), 0);
                assert_eq!(t.get(&site(0), SitePeers::hash(&hasher, &site(0))), None);
            }
        }
        // The table is never more than three quarters full.
        assert!(t.len() * 4 <= t.slots.len() * 3);
    }

    /// The hash a site was stored under (test-only: scans the slots).
    fn find_hash(t: &SitePeers, site: &[u8]) -> Option<u64> {
        t.slots
            .iter()
            .find(|s| s.hash != 0 && s.key.as_slice() == site)
            .map(|s| s.hash)
    }
}
