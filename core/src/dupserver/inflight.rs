//! The forwards awaiting the replica's _OK (MS-FSCMT 3.3.5.4 steps 3-5, 3.3.5.5 steps 2-5): for
//! each, the answer to the node held back (encoded), and the later messages for the same
//! checksum queued behind it.
//!
//! The replica answers over one connection in the order it was sent to, so the forwards are a
//! FIFO, and their held answers sit back to back in one byte buffer: a forward costs no
//! allocation of its own. Only checksums with messages queued behind a forward own a queue: the
//! set of checksums in flight holds keys alone (a forward enters and leaves it, so it is kept
//! small: no queue moved in and out of it), and the rare queues are in a map of their own.
//!
//! The set of checksums in flight is not kept exact: a forward's checksum is entered with the
//! forward's sequence number and left there when the _OK pops the forward, so that a forward
//! costs one insert and no removal. A checksum is in flight while the sequence number beside it
//! is not yet popped (the FIFO pops in sequence order; a checksum forwarded again carries its
//! newest forward's number); the entries of popped forwards are purged in bulk when they
//! outnumber the forwards in flight.
//!
//! The replica's lag in time is kept per batch rather than per forward: the forwards are
//! counted under the time their batch was handled ([`InFlight::push`] given the batch's
//! `at`), so a forward costs one comparison, and the oldest unacknowledged forward's age is the
//! age of the first stamp.

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::PeerId;
use crate::msg::{Checksum, Message};

/// A collection (by its index in [`InFlight::collections`]) and a checksum.
pub(super) type Key = (u32, Checksum);

/// A [`Key`] as the set of checksums in flight hashes it: two integers (the checksum as one
/// 128-bit word) rather than an integer and a 16-byte slice with its length, which the derived
/// hash of the tuple feeds the hasher byte-wise.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Busy(Key);

impl std::hash::Hash for Busy {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let (collection, Checksum(cs)) = self.0;
        h.write_u32(collection);
        h.write_u128(u128::from_le_bytes(cs));
    }
}

/// Entries of popped forwards the set of checksums in flight may hold beyond twice the forwards
/// in flight before they are purged.
const PURGE_MARGIN: usize = 4096;

struct Forward {
    /// None for a resynchronization forward that nobody waits for.
    key: Option<Key>,
    to: PeerId,
    /// Length of the held answer, next in `held`.
    len: usize,
    /// Promote on release (3.3.5.5 step 5: the forward was a PPDUP_REMOVE).
    promote: bool,
    /// The collection was removed meanwhile (3.3.5.2): drop the answer and the queue.
    cancelled: bool,
    /// The log batch holding the message's record (see [`super::DupServer::write_log`]).
    batch: u64,
}

/// What the replica's _OK released.
pub(super) struct Released {
    /// The node to answer, the answer's bytes in [`InFlight::held`], whether to promote first,
    /// and the log batch the answer waits for. None when nothing is to be answered
    /// (resynchronization, removed collection).
    pub(super) answer: Option<(PeerId, std::ops::Range<usize>, bool, Key, u64)>,
    /// Messages for the same checksum, to handle now.
    pub(super) waiting: VecDeque<(PeerId, Box<Message<'static>>)>,
}

/// The forwards awaiting the replica.
#[derive(Default)]
pub(super) struct InFlight {
    order: VecDeque<Forward>,
    /// Held answers of `order`, back to back from `held_start`.
    held: Vec<u8>,
    held_start: usize,
    /// Checksums forwarded, with the sequence number of their newest forward: those numbered
    /// `popped` or later have a forward in `order` (module docs). Every forward enters it, so it
    /// is hashed with foldhash (seeded per map) rather than SipHash.
    busy: HashMap<Busy, u64, foldhash::fast::RandomState>,
    /// Forwards popped so far: the sequence number of the front of `order`.
    popped: u64,
    /// The messages queued behind a forward of `busy` (checksums sent again before the replica
    /// answered: rare).
    waiting: HashMap<Key, VecDeque<(PeerId, Box<Message<'static>>)>, foldhash::fast::RandomState>,
    /// Collection names, indexed by the first element of [`Key`] (they are few).
    collections: Vec<Vec<u8>>,
    /// The forwards of `order` by the time their batch was handled, oldest first: (time,
    /// forwards); the counts add up to `order.len()`.
    stamps: VecDeque<(Instant, u32)>,
    /// Forwards of PPDUP_REMOVE in `order`: while there are none, a checksum missing from the
    /// store has no forward in flight (a forwarded add is in the store until its _OK at least).
    removes: usize,
}

impl InFlight {
    /// The index of a collection name, assigned on first use.
    pub(super) fn collection_index(&mut self, name: &[u8]) -> u32 {
        match self.collections.iter().position(|c| c[..] == *name) {
            Some(i) => i as u32,
            None => {
                self.collections.push(name.to_vec());
                (self.collections.len() - 1) as u32
            }
        }
    }

    /// Forwards not yet answered.
    pub(super) fn len(&self) -> usize {
        self.order.len()
    }

    /// When the batch of the oldest forward not yet answered was handled (None when every
    /// forward is answered): the replica's lag is its age.
    pub(super) fn oldest(&self) -> Option<Instant> {
        self.stamps.front().map(|(t, _)| *t)
    }

    /// Counts one forward under `at`.
    fn stamp(&mut self, at: Instant) {
        match self.stamps.back_mut() {
            Some((t, n)) if *t == at => *n += 1,
            _ => self.stamps.push_back((at, 1)),
        }
    }

    /// The name of collection index `i`.
    pub(super) fn collection_name(&self, i: u32) -> &[u8] {
        self.collections.get(i as usize).map_or(&[], |c| &c[..])
    }

    /// The held answer bytes (see [`Released::answer`]).
    pub(super) fn held(&self, r: std::ops::Range<usize>) -> &[u8] {
        &self.held[r]
    }

    /// Forwards of PPDUP_REMOVE awaiting the replica (see [`Self::busy_key`]).
    pub(super) fn removes(&self) -> usize {
        self.removes
    }

    /// The key of `checksum` in `collection` when a forward of it awaits the replica. While
    /// [`Self::removes`] is 0, every such checksum is in the store (its forward was an add).
    pub(super) fn busy_key(&self, collection: &[u8], checksum: Checksum) -> Option<Key> {
        if self.order.is_empty() {
            return None;
        }
        let i = self.collections.iter().position(|c| c[..] == *collection)? as u32;
        let key = (i, checksum);
        let popped = self.popped;
        self.busy
            .get(&Busy(key))
            .is_some_and(|&seq| seq >= popped)
            .then_some(key)
    }

    /// Queues a message behind the forward of `key` (see [`Self::busy_key`]).
    pub(super) fn queue(&mut self, key: Key, from: PeerId, msg: Message<'static>) {
        self.waiting
            .entry(key)
            .or_default()
            .push_back((from, Box::new(msg)));
    }

    /// Records a forward for `key`, sent in the batch handled at `at`, whose answer to `to`
    /// `encode` appends (encoded frames).
    pub(super) fn push(
        &mut self,
        key: Key,
        to: PeerId,
        (promote, batch, at): (bool, u64, Instant),
        encode: impl FnOnce(&mut Vec<u8>),
    ) {
        self.stamp(at);
        if self.held_start == self.held.len() {
            self.held.clear();
            self.held_start = 0;
        } else if self.held_start > (1 << 16) && self.held_start * 2 > self.held.len() {
            self.held.drain(..self.held_start);
            self.held_start = 0;
        }
        let start = self.held.len();
        encode(&mut self.held);
        self.order.push_back(Forward {
            key: Some(key),
            to,
            len: self.held.len() - start,
            promote,
            cancelled: false,
            batch,
        });
        self.removes += usize::from(promote);
        let seq = self.popped + self.order.len() as u64 - 1;
        // Popped forwards' entries, purged when they outnumber the forwards in flight (plus a
        // margin, so that a purge comes at most once every few thousand forwards).
        if self.busy.len() >= 2 * self.order.len() + PURGE_MARGIN {
            let popped = self.popped;
            self.busy.retain(|_, s| *s >= popped);
        }
        self.busy.insert(Busy(key), seq);
    }

    /// Entries of the set of checksums in flight, popped ones included (tests).
    #[cfg(test)]
    fn busy_entries(&self) -> usize {
        self.busy.len()
    }

    /// Records a resynchronization forward sent at `at`: its _OK releases nothing.
    pub(super) fn push_resync(&mut self, at: Instant) {
        self.stamp(at);
        self.order.push_back(Forward {
            key: None,
            to: 0,
            len: 0,
            promote: false,
            cancelled: false,
            batch: 0,
        });
    }

    /// The replica's next _OK: releases the oldest forward. None when nothing was forwarded.
    pub(super) fn pop(&mut self) -> Option<Released> {
        let f = self.order.pop_front()?;
        self.popped += 1;
        if let Some((_, n)) = self.stamps.front_mut() {
            *n -= 1;
            if *n == 0 {
                self.stamps.pop_front();
            }
        }
        let range = self.held_start..self.held_start + f.len;
        self.held_start = range.end;
        self.removes -= usize::from(f.promote);
        let (Some(key), false) = (f.key, f.cancelled) else {
            return Some(Released {
                answer: None,
                waiting: VecDeque::new(),
            });
        };
        let waiting = if self.waiting.is_empty() {
            VecDeque::new()
        } else {
            self.waiting.remove(&key).unwrap_or_default()
        };
        Some(Released {
            answer: Some((f.to, range, f.promote, key, f.batch)),
            waiting,
        })
    }

    /// PPDUP_CONF_REMOVE (3.3.5.2): the collection's forwards release nothing, and what waited
    /// behind them is discarded.
    pub(super) fn cancel_collection(&mut self, collection: &[u8]) {
        let Some(i) = self.collections.iter().position(|c| c[..] == *collection) else {
            return;
        };
        let i = i as u32;
        for f in self.order.iter_mut() {
            if f.key.is_some_and(|(c, _)| c == i) {
                f.cancelled = true;
            }
        }
        self.busy.retain(|Busy((c, _)), _| *c != i);
        self.waiting.retain(|(c, _), _| *c != i);
    }

    /// Forgets the forwards of a replica connection that is gone, after the caller released
    /// them with [`Self::pop`].
    pub(super) fn clear(&mut self) {
        self.order.clear();
        self.stamps.clear();
        self.held.clear();
        self.held_start = 0;
        self.removes = 0;
        self.busy.clear();
        self.waiting.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msg::CollectionOnly;

    fn msg(c: &str) -> Message<'static> {
        Message::PpdupConfRemove2(CollectionOnly {
            collection: std::borrow::Cow::Owned(c.as_bytes().to_vec()),
        })
    }

    /// Random forwards and _OKs against an exact model (the checksums of the forwards in the
    /// FIFO): a checksum is busy exactly while a forward of it awaits its _OK, and the popped
    /// entries left in the set are purged, so that it stays within twice the forwards in flight
    /// at its peak plus the margin.
    #[test]
    fn busy_agrees_with_the_forwards_in_flight_and_the_set_stays_bounded() {
        let mut f = InFlight::default();
        let at = Instant::now();
        let c = f.collection_index(b"c");
        let mut model: VecDeque<Checksum> = VecDeque::new();
        let mut rng = fastrand::Rng::with_seed(5);
        let mut peak = 0;
        let mut purged = false;
        for step in 0..60_000 {
            // Windows of forwards, then their _OKs, with a few checksums sent again.
            let forward = match (step / 3_000) % 2 {
                0 => rng.u8(..) < 200,
                _ => rng.u8(..) < 56,
            };
            if forward {
                let before = f.busy_entries();
                let cs = Checksum(u128::from(rng.u16(..)).to_le_bytes());
                if f.busy_key(b"c", cs).is_none() {
                    f.push((c, cs), 1, (false, 0, at), |_| {});
                    model.push_back(cs);
                    purged |= f.busy_entries() < before;
                }
            } else if let Some(r) = f.pop() {
                let (_, _, _, (_, cs), _) = r.answer.expect("an answer");
                assert_eq!(Some(cs), model.pop_front());
            }
            for probe in [0u16, 1, rng.u16(..)] {
                let cs = Checksum(u128::from(probe).to_le_bytes());
                assert_eq!(
                    f.busy_key(b"c", cs).is_some(),
                    model.contains(&cs),
                    "step {step}"
                );
            }
            peak = peak.max(f.len());
            assert!(f.busy_entries() <= 2 * peak + PURGE_MARGIN + 1);
        }
        assert!(purged, "the popped entries were purged");
    }

    #[test]
    fn a_checksum_is_busy_from_its_forward_to_its_answer_and_what_waited_is_released_with_it() {
        let mut f = InFlight::default();
        let at = Instant::now();
        assert_eq!(f.busy_key(b"c", Checksum([1; 16])), None);
        let key = (f.collection_index(b"c"), Checksum([1; 16]));
        let other = (f.collection_index(b"d"), Checksum([1; 16]));
        f.push(key, 7, (false, 3, at), |out| out.extend_from_slice(b"one"));
        f.push(other, 8, (true, 3, at), |out| out.extend_from_slice(b"two"));
        // The same checksum in another collection is another key.
        assert_eq!(f.busy_key(b"c", Checksum([1; 16])), Some(key));
        assert_eq!(f.busy_key(b"c", Checksum([2; 16])), None);
        assert_eq!(f.busy_key(b"d", Checksum([1; 16])), Some(other));
        f.queue(key, 9, msg("waited"));
        let r = f.pop().expect("a forward");
        let (to, range, promote, k, batch) = r.answer.expect("an answer");
        assert_eq!((to, promote, k, batch), (7, false, key, 3));
        assert_eq!(f.held(range), b"one");
        assert_eq!(r.waiting.len(), 1);
        assert_eq!(r.waiting[0].0, 9);
        assert_eq!(f.busy_key(b"c", Checksum([1; 16])), None);
        // A removed collection's forwards release nothing, and nothing waits behind them.
        f.queue(other, 9, msg("dropped"));
        f.cancel_collection(b"d");
        assert_eq!(f.busy_key(b"d", Checksum([1; 16])), None);
        let r = f.pop().expect("a forward");
        assert!(r.answer.is_none() && r.waiting.is_empty());
        assert!(f.pop().is_none());
        assert_eq!(f.len(), 0);
        assert_eq!(f.oldest(), None);
    }
}
