//! What the two scheduler roles share: the persisted collection registry, the DNS cache, the
//! outbox a state machine fills for its shell, and small helpers.

pub mod collections;
pub mod dns;
pub mod inflight;
pub mod multinode;
pub mod node;
pub mod seen;
mod seen_table;

use std::borrow::Cow;

use crate::frame::{self, Priority};
use crate::marshal::Value;
use crate::msg::types::uri_flags;
use crate::msg::{CrawlQueueEntry, Message, UriStructure};
use crate::queue;

/// A connection, as the role shell numbers them.
pub type PeerId = u64;

/// What a state machine asks its shell to do after a batch of events.
#[derive(Debug, Default)]
pub struct Outbox<D> {
    /// Frames to send, in order.
    pub sends: Vec<(D, Priority, Vec<u8>)>,
    /// Normal-priority frames in bulk, one buffer per destination (the multinode scheduler's
    /// forwarded CMD_UM_URI: no allocation per frame). Sent after `sends`; a destination's frames
    /// keep their order within each list.
    pub bulk: Vec<(D, Vec<u8>)>,
    /// Connections to close (after sending what is queued for them).
    pub closes: Vec<PeerId>,
    /// Host names to resolve (the multinode scheduler; answers come back through
    /// `dns_resolved`).
    pub lookups: Vec<String>,
}

impl<D> Outbox<D> {
    fn new() -> Self {
        Outbox {
            sends: Vec::new(),
            bulk: Vec::new(),
            closes: Vec::new(),
            lookups: Vec::new(),
        }
    }

    fn send(&mut self, to: D, priority: Priority, m: &Message<'_>) {
        // Room for a PPDUP_ADD or CMD_UM_URI with a long URI: a frame grown from less is a
        // second allocation and a copy.
        let mut out = Vec::with_capacity(256);
        frame::encode_message(m, priority, &mut out);
        self.sends.push((to, priority, out));
    }

    /// The bulk buffer of `to`, to append whole frames to.
    pub fn bulk(&mut self, to: D) -> &mut Vec<u8>
    where
        D: PartialEq,
    {
        let i = match self.bulk.iter().position(|(d, _)| *d == to) {
            Some(i) => i,
            None => {
                // Room for a few hundred forwarded entries at once: a buffer grown by doubling
                // copies itself over and over while the pump fills it.
                self.bulk.push((to, Vec::with_capacity(BULK_START)));
                self.bulk.len() - 1
            }
        };
        &mut self.bulk[i].1
    }

    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.sends.is_empty()
            && self.bulk.is_empty()
            && self.closes.is_empty()
            && self.lookups.is_empty()
    }
}

/// The capacity a bulk buffer starts with.
const BULK_START: usize = 64 << 10;

/// Queue records carry one byte before the marshalled crawl queue entry: whether the entry came
/// urgent (CMD_UM_URI_URG), so that the multinode scheduler forwards it urgent too.
const RECORD_NORMAL: u8 = 0;
const RECORD_URGENT: u8 = 1;

/// A queue record for `entry`.
pub fn record(entry: &CrawlQueueEntry<'_>, urgent: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    out.push(if urgent { RECORD_URGENT } else { RECORD_NORMAL });
    queue::encode_entry(entry, &mut out);
    out
}

/// The entry of a queue record, and whether it was urgent.
pub fn parse_record(rec: &[u8]) -> Result<(CrawlQueueEntry<'_>, bool), queue::QueueError> {
    match rec.split_first() {
        Some((&m, body)) if m == RECORD_NORMAL || m == RECORD_URGENT => {
            Ok((queue::decode_entry(body)?, m == RECORD_URGENT))
        }
        _ => queue::decode_entry(b"").map(|e| (e, false)),
    }
}

/// The URI and URI flags of a queue record's entry ([`parse_record`]'s, the same error for a
/// record it refuses), without building the entry.
pub fn peek_record(rec: &[u8]) -> Result<(Cow<'_, [u8]>, i64), queue::QueueError> {
    match rec.split_first() {
        Some((&m, body)) if m == RECORD_NORMAL || m == RECORD_URGENT => queue::peek_entry(body),
        _ => queue::peek_entry(b""),
    }
}

/// A crawl queue entry for a start URI (URIF_STARTURI).
pub fn start_uri_entry(uri: &[u8]) -> CrawlQueueEntry<'static> {
    let mut e = CrawlQueueEntry::new(UriStructure::unparsed(Cow::Owned(uri.to_vec())));
    e.uri_flags |= uri_flags::URIF_STARTURI;
    e
}

/// The start URIs of a collection's configuration dict: its `start_uris` (a list of strings),
/// then those of each SubDomain (`subdomains`, docs/collection-config.md), each URI once.
pub fn start_uris(dict: &Value<'_>) -> Vec<Vec<u8>> {
    let own = |d: &Value<'_>| -> Vec<Vec<u8>> {
        let Some(v) = d.get(b"start_uris") else {
            return Vec::new();
        };
        let items = v.as_list().or_else(|| v.as_tuple()).unwrap_or(&[]);
        items
            .iter()
            .filter_map(|i| i.as_bytes().map(<[u8]>::to_vec))
            .collect()
    };
    let mut out = own(dict);
    if let Some(Value::Dict(subs)) = dict.get(b"subdomains") {
        // Seed files may give many URIs: each is looked up in a set, not in the list.
        let mut seen: std::collections::HashSet<Vec<u8>> = out.iter().cloned().collect();
        for (_, sub) in subs {
            for u in own(sub) {
                if seen.insert(u.clone()) {
                    out.push(u);
                }
            }
        }
    }
    out
}

/// A name safe to use as a file name: itself when made of `[A-Za-z0-9._-]` (and not starting
/// with a dot), else `x-` and its hex.
pub fn file_name(name: &[u8]) -> String {
    let safe = !name.is_empty()
        && name[0] != b'.'
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if safe && !name.starts_with(b"x-") {
        String::from_utf8_lossy(name).into_owned()
    } else {
        let mut s = String::from("x-");
        for b in name {
            s.push_str(&format!("{b:02x}"));
        }
        s
    }
}

/// The name of a collection for log lines.
pub fn show(name: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(name)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_kill;
#[cfg(test)]
mod tests_store;
