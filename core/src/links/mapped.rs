//! The CIDHASHes a WebAnalyzer batch has written `urimap` lines for, in one array whose places
//! can be prefetched.
//!
//! A batch collects a second of a node's pages (up to 4 MiB): tens of thousands of CIDHASHes,
//! more than the cache holds, each link's asked once. hashbrown's set read two places for each
//! (its control bytes, then the slot), each a wait for memory; here a CIDHASH's place follows
//! from its own bits (it is MD5 output), one array, linear probing, so one place is read and a
//! page's links can have theirs prefetched together (`ProbeSet::prefetch`) before they are
//! asked in turn.

use super::CidHash;
use crate::links::CIDHASH_LEN;
use crate::probeset::{Probe, ProbeSet};

impl Probe for CidHash {
    /// No CIDHASH is all zero bytes (they are base64 characters).
    const EMPTY: CidHash = CidHash([0; CIDHASH_LEN]);
    const MIN_PLACES: usize = 1024;
    /// The first eight characters (48 random bits) mixed by a multiply, its high bits taken.
    #[inline]
    fn place(&self, mask: usize) -> usize {
        let mut w = [0u8; 8];
        w.copy_from_slice(&self.0[..8]);
        let x = u64::from_le_bytes(w).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (x >> 32) as usize & mask
    }
}

/// A set of CIDHASHes.
pub(super) type Mapped = ProbeSet<CidHash>;

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
            assert!(m.len() * 4 <= m.places() * 3);
            let places = m.places();
            m.clear();
            assert_eq!(m.len(), 0);
            assert!(model.iter().all(|h| !m.contains(h)));
            assert_eq!(m.places(), places, "a clear keeps the memory");
        }
    }
}
