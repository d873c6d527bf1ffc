//! The URIs a node owns one checksum for, in its checksum database (MS-FSCMT 3.1.5.23).
//!
//! Almost every checksum has one owner: the document fed under it. A `BTreeSet` of one URI
//! allocated a B-tree leaf (about 300 bytes) beside the URI for every page stored, and its
//! first lookups walked it; [`Owners`] keeps a lone URI by itself and turns into the set only
//! when a second URI comes. It reads in the set's order either way.

use std::collections::BTreeSet;

/// The owners of one checksum, in byte order.
#[derive(Clone, Debug)]
pub(super) enum Owners {
    /// Exactly one URI.
    One(Box<[u8]>),
    /// Any number (none after the last was removed).
    Many(BTreeSet<Vec<u8>>),
}

impl Default for Owners {
    fn default() -> Self {
        Owners::Many(BTreeSet::new())
    }
}

impl Owners {
    /// Adds `uri`; false when it was there.
    pub(super) fn insert(&mut self, uri: &[u8]) -> bool {
        match self {
            Owners::One(u) if **u == *uri => false,
            Owners::One(u) => {
                let first = std::mem::take(u).into_vec();
                *self = Owners::Many(BTreeSet::from([first, uri.to_vec()]));
                true
            }
            Owners::Many(s) if s.is_empty() => {
                *self = Owners::One(uri.into());
                true
            }
            Owners::Many(s) => s.insert(uri.to_vec()),
        }
    }

    /// Removes `uri`; false when it was not there.
    pub(super) fn remove(&mut self, uri: &[u8]) -> bool {
        match self {
            Owners::One(u) if **u == *uri => {
                *self = Owners::default();
                true
            }
            Owners::One(_) => false,
            Owners::Many(s) => s.remove(uri),
        }
    }

    /// True when `uri` is an owner.
    pub(super) fn contains(&self, uri: &[u8]) -> bool {
        match self {
            Owners::One(u) => **u == *uri,
            Owners::Many(s) => s.contains(uri),
        }
    }

    /// True when there is no owner.
    pub(super) fn is_empty(&self) -> bool {
        matches!(self, Owners::Many(s) if s.is_empty())
    }

    /// The owners in byte order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let (one, many) = match self {
            Owners::One(u) => (Some(&**u), None),
            Owners::Many(s) => (None, Some(s.iter().map(Vec::as_slice))),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Owners agree with a `BTreeSet` (the type they replace) through generated inserts and
    /// removes, every answer and the order of iteration.
    #[test]
    fn agree_with_a_btree_set() {
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..200 {
            let mut o = Owners::default();
            let mut model: BTreeSet<Vec<u8>> = BTreeSet::new();
            for _ in 0..40 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Few URIs, so that inserts and removes hit and miss alike.
                let uri = format!("http://h/{}", x % 5).into_bytes();
                match (x >> 8) % 3 {
                    0 | 1 => assert_eq!(o.insert(&uri), model.insert(uri.clone())),
                    _ => assert_eq!(o.remove(&uri), model.remove(&uri)),
                }
                assert_eq!(o.is_empty(), model.is_empty());
                assert_eq!(o.contains(&uri), model.contains(&uri));
                assert!(o.iter().eq(model.iter().map(Vec::as_slice)));
            }
        }
    }

    #[test]
    fn one_owner_is_held_alone_and_the_set_is_made_for_a_second() {
        let mut o = Owners::default();
        assert!(o.is_empty() && o.iter().next().is_none());
        assert!(o.insert(b"http://b/"));
        assert!(matches!(o, Owners::One(_)));
        assert!(!o.insert(b"http://b/"));
        assert!(o.insert(b"http://a/"));
        assert!(matches!(o, Owners::Many(_)));
        assert_eq!(o.iter().collect::<Vec<_>>(), [b"http://a/", b"http://b/"]);
        assert!(o.remove(b"http://a/") && o.remove(b"http://b/") && o.is_empty());
        assert!(!o.remove(b"http://b/"));
    }
}
