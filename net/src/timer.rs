//! The loop's deadlines: the role's timers and the loop's own (reconnects, connect timeouts,
//! linger, accept retries), in one min-heap. `mio::Poll` sleeps until the earliest one.
//!
//! Cancelling or replacing a timer does not search the heap: the live table remembers each key's
//! current generation and stale heap entries are skipped when they surface. The heap is rebuilt
//! when stale entries outnumber live ones, so a keepalive timer reset on every message does not
//! grow it without bound.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::{Duration, Instant};

use crate::ids::{ConnId, LinkId, TimerId};

/// Shortest repeat period; a zero period would spin the loop.
const MIN_PERIOD: Duration = Duration::from_millis(1);

/// What a deadline is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum TimerKey {
    /// A role's timer.
    User(TimerId),
    /// The next connection attempt of a link.
    Reconnect(LinkId),
    /// A connection's connect timeout or linger deadline (whichever state it is in).
    Conn(ConnId),
    /// Retry accepting on a listener after an accept error (out of file descriptors, say).
    AcceptRetry(usize),
    /// The periodic look for idle connections (see `limits`).
    IdleSweep,
}

#[derive(Debug)]
struct Entry {
    at: Instant,
    generation: u64,
    key: TimerKey,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // Generations are unique, so equal deadlines still order (first set, first fired).
        (self.at, self.generation).cmp(&(other.at, other.generation))
    }
}

#[derive(Debug)]
struct Live {
    generation: u64,
    repeat: Option<Duration>,
}

/// The deadline heap.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<Entry>>,
    /// Looked up every turn of the loop: hashed with foldhash (the keys are the loop's own,
    /// no peer chooses them), not SipHash.
    live: HashMap<TimerKey, Live, foldhash::fast::RandomState>,
    generation: u64,
}

impl Timers {
    /// Sets (or replaces) `key` to expire at `at`, then every `repeat` after that.
    pub(crate) fn set(&mut self, key: TimerKey, at: Instant, repeat: Option<Duration>) {
        self.generation += 1;
        let generation = self.generation;
        let repeat = repeat.map(|p| p.max(MIN_PERIOD));
        self.live.insert(key, Live { generation, repeat });
        self.heap.push(Reverse(Entry {
            at,
            generation,
            key,
        }));
        if self.heap.len() > 2 * self.live.len() + 64 {
            self.compact();
        }
    }

    /// Cancels `key`; no effect when it is not set.
    pub(crate) fn cancel(&mut self, key: TimerKey) {
        self.live.remove(&key);
    }

    /// The earliest live deadline.
    pub(crate) fn next_deadline(&mut self) -> Option<Instant> {
        self.drop_stale();
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Moves every key due at `now` to `out`, in deadline order, rescheduling repeating ones.
    /// Most turns nothing is due: the earliest entry, live or stale, is compared with `now`
    /// before anything is looked up.
    pub(crate) fn expire(&mut self, now: Instant, out: &mut Vec<TimerKey>) {
        loop {
            let due = matches!(self.heap.peek(), Some(Reverse(e)) if e.at <= now);
            if !due {
                return;
            }
            let Some(Reverse(e)) = self.heap.pop() else {
                return;
            };
            if !self.is_live(&e) {
                continue; // cancelled or replaced
            }
            out.push(e.key);
            let repeat = self.live.get(&e.key).and_then(|l| l.repeat);
            match repeat {
                Some(period) => {
                    // Keep the cadence; after a stall, skip the missed ticks instead of bursting.
                    let mut at = e.at + period;
                    if at <= now {
                        at = now + period;
                    }
                    self.set(e.key, at, Some(period));
                }
                None => {
                    self.live.remove(&e.key);
                }
            }
        }
    }

    fn drop_stale(&mut self) {
        while let Some(Reverse(e)) = self.heap.peek() {
            if self.is_live(e) {
                return;
            }
            self.heap.pop();
        }
    }

    fn is_live(&self, e: &Entry) -> bool {
        self.live
            .get(&e.key)
            .is_some_and(|l| l.generation == e.generation)
    }

    fn compact(&mut self) {
        let heap = std::mem::take(&mut self.heap);
        self.heap = heap
            .into_iter()
            .filter(|Reverse(e)| self.is_live(e))
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(i: u64) -> TimerKey {
        TimerKey::User(TimerId(i))
    }

    #[test]
    fn fires_in_deadline_order_and_skips_cancelled() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.set(user(1), t0 + Duration::from_millis(30), None);
        t.set(user(2), t0 + Duration::from_millis(10), None);
        t.set(user(3), t0 + Duration::from_millis(20), None);
        t.cancel(user(3));
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_millis(10)));
        let mut out = Vec::new();
        t.expire(t0 + Duration::from_millis(40), &mut out);
        assert_eq!(out, vec![user(2), user(1)]);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn replacing_moves_the_deadline() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.set(user(1), t0 + Duration::from_millis(10), None);
        t.set(user(1), t0 + Duration::from_millis(50), None);
        let mut out = Vec::new();
        t.expire(t0 + Duration::from_millis(20), &mut out);
        assert!(out.is_empty());
        t.expire(t0 + Duration::from_millis(50), &mut out);
        assert_eq!(out, vec![user(1)]);
    }

    #[test]
    fn repeating_keeps_cadence_and_skips_missed_ticks() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        let p = Duration::from_millis(10);
        t.set(user(1), t0 + p, Some(p));
        let mut out = Vec::new();
        t.expire(t0 + p, &mut out);
        assert_eq!(t.next_deadline(), Some(t0 + 2 * p));
        // A long stall fires once, not once per missed period.
        t.expire(t0 + 10 * p, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(t.next_deadline(), Some(t0 + 11 * p));
    }

    #[test]
    fn a_cancelled_timer_due_first_does_not_hide_a_live_one() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        t.set(user(1), t0 + Duration::from_millis(5), None);
        t.set(user(2), t0 + Duration::from_millis(10), None);
        t.set(user(3), t0 + Duration::from_millis(30), None);
        t.cancel(user(1));
        t.set(user(2), t0 + Duration::from_millis(20), None); // replaced: its old entry is stale
        let mut out = Vec::new();
        t.expire(t0 + Duration::from_millis(15), &mut out);
        assert!(out.is_empty(), "only stale entries were due: {out:?}");
        t.expire(t0 + Duration::from_millis(25), &mut out);
        assert_eq!(out, vec![user(2)]);
        assert_eq!(t.next_deadline(), Some(t0 + Duration::from_millis(30)));
        t.expire(t0 + Duration::from_millis(30), &mut out);
        assert_eq!(out, vec![user(2), user(3)]);
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn resetting_often_does_not_grow_the_heap() {
        let t0 = Instant::now();
        let mut t = Timers::default();
        for i in 0..10_000u32 {
            t.set(user(1), t0 + Duration::from_millis(u64::from(i)), None);
        }
        assert!(t.heap.len() <= 2 * t.live.len() + 65);
    }
}
