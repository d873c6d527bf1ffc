//! The DNS database of both schedulers (MS-FSCMT 3.1.1, 3.2.5.4): host -> addresses with the time
//! they were resolved and their time to live. A failed lookup is cached too (as None), so a host
//! that does not resolve is not asked about again for its TTL.

use std::collections::HashMap;

use crate::msg::AddrInfo;

/// One cached answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DnsEntry {
    /// The addresses, or None when the lookup failed.
    pub addrinfo: Option<Vec<AddrInfo<'static>>>,
    /// When the lookup finished (Unix seconds).
    pub resolved_at: i64,
    /// Seconds the answer may be used.
    pub ttl: i64,
}

impl DnsEntry {
    /// Whether the answer may still be used at `now`.
    pub fn fresh(&self, now: i64) -> bool {
        now < self.resolved_at.saturating_add(self.ttl)
    }

    /// Seconds of validity left at `now`.
    pub fn ttl_left(&self, now: i64) -> i64 {
        (self.resolved_at.saturating_add(self.ttl) - now).max(0)
    }
}

/// Host -> answer, with a bound on the number of hosts kept.
#[derive(Debug)]
pub struct DnsCache {
    map: HashMap<Vec<u8>, DnsEntry>,
    max: usize,
}

impl DnsCache {
    /// A cache of at most `max` hosts (expired answers are dropped first when it is full).
    pub fn new(max: usize) -> Self {
        DnsCache {
            map: HashMap::new(),
            max: max.max(1),
        }
    }

    /// The fresh answer for `host` at `now`.
    pub fn get(&self, host: &[u8], now: i64) -> Option<&DnsEntry> {
        self.map.get(host).filter(|e| e.fresh(now))
    }

    /// Stores an answer.
    pub fn insert(&mut self, host: &[u8], entry: DnsEntry, now: i64) {
        if self.map.len() >= self.max && !self.map.contains_key(host) {
            self.map.retain(|_, e| e.fresh(now));
            if self.map.len() >= self.max {
                // Still full of fresh answers: drop an arbitrary one rather than grow.
                if let Some(k) = self.map.keys().next().cloned() {
                    self.map.remove(&k);
                }
            }
        }
        self.map.insert(host.to_vec(), entry);
    }

    /// Forgets `host`.
    pub fn remove(&mut self, host: &[u8]) {
        self.map.remove(host);
    }

    /// Hosts cached.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiry_and_bound() {
        let mut c = DnsCache::new(2);
        let e = |at, ttl| DnsEntry {
            addrinfo: None,
            resolved_at: at,
            ttl,
        };
        c.insert(b"a", e(100, 10), 100);
        assert!(c.get(b"a", 109).is_some());
        assert!(c.get(b"a", 110).is_none());
        c.insert(b"b", e(100, 100), 100);
        // Full: the expired "a" makes room for "c".
        c.insert(b"c", e(120, 100), 120);
        assert_eq!(c.len(), 2);
        assert!(c.get(b"b", 120).is_some() && c.get(b"c", 120).is_some());
        assert_eq!(c.get(b"c", 150).unwrap().ttl_left(150), 70);
    }
}
