//! Entries forwarded to a node, kept until the node confirms it holds them.
//!
//! MS-FSCMT has no acknowledgement for CMD_UM_URI (2.2.3.3): a node that dies or loses its
//! connection takes with it whatever was in the socket buffers, in its receive queue and in its
//! crawl queue since its last sync. The multinode scheduler therefore keeps a copy of every
//! entry it forwards, per connection, in generations closed by a CMD_UM_KEEPALIVE (2.2.3.1):
//! - Every sync tick, a connection with entries forwarded since the last tick closes its
//!   current generation and sends a CMD_UM_KEEPALIVE behind them, in the same bulk stream, so
//!   the keep-alive reaches the node after every entry of the generation.
//! - A node answers keep-alives in order (3.1.5.1), and ours answers only after its next sync
//!   of its crawl queues: the n-th CMD_UM_KEEPALIVE_ACK of a connection confirms every
//!   generation closed by keep-alive n or before, which are dropped.
//! - When the connection closes, the entries of the unconfirmed generations are taken in again
//!   as if the node had just sent them (3.2.5.5): routed to the same node, they wait in the
//!   deferred queue until it is back. A node that had them already drops them as seen, so
//!   nothing is fetched twice and nothing is lost.
//!
//! Memory is bounded: a connection keeps at most [`MAX_RETAINED_BYTES`]; past that, the oldest
//! generation is dropped with a log line (a node that does not answer keep-alives for that long
//! is not reading its socket either, and the loop's output cap closes it).

use std::collections::VecDeque;

use log::warn;

use super::{Multinode, SchedError};
use crate::frame::{self, Priority};
use crate::marshal::Limits;
use crate::msg::Message;
use crate::sched::{show, PeerId};

/// Most bytes of entries kept for one connection.
pub(super) const MAX_RETAINED_BYTES: usize = 64 << 20;

/// The unconfirmed entries of one connection.
#[derive(Default)]
pub(super) struct Retained {
    /// Frame bodies of the CMD_UM_URI / _URG forwarded since the last keep-alive, each as
    /// `[u32 len][body]`.
    cur: Vec<u8>,
    /// Generations closed by keep-alive number `.0`, oldest first.
    gens: VecDeque<(u64, Vec<u8>)>,
    /// Keep-alives sent and answered on this connection.
    sent: u64,
    acked: u64,
    /// Bytes in `cur` and `gens`.
    bytes: usize,
}

impl Retained {
    fn push(&mut self, body: &[u8]) {
        self.cur
            .extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.cur.extend_from_slice(body);
        self.bytes += 4 + body.len();
    }

    /// The frame bodies of every unconfirmed generation, oldest first.
    fn entries(&self) -> impl Iterator<Item = &[u8]> {
        self.gens
            .iter()
            .map(|(_, g)| g.as_slice())
            .chain(std::iter::once(self.cur.as_slice()))
            .flat_map(|mut buf| {
                std::iter::from_fn(move || {
                    let len = u32::from_le_bytes(buf.get(..4)?.try_into().ok()?) as usize;
                    let body = buf.get(4..4 + len)?;
                    buf = &buf[4 + len..];
                    Some(body)
                })
            })
    }

    /// Entries kept for this connection.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.entries().count()
    }
}

impl Multinode {
    /// Keeps a copy of the CMD_UM_URI / _URG frame `body` forwarded to `peer` (called next to
    /// every forward).
    pub(super) fn retain(&mut self, peer: PeerId, body: &[u8]) {
        let r = self.retained_mut(peer);
        r.push(body);
        if r.bytes > MAX_RETAINED_BYTES {
            if let Some((_, g)) = r.gens.pop_front() {
                r.bytes -= g.len();
                warn!(
                    "connection {peer}: {} bytes of forwarded entries not confirmed by a \
                     keep-alive answer; the oldest {} bytes are no longer kept for a requeue",
                    r.bytes + g.len(),
                    g.len()
                );
            }
        }
    }

    fn retained_mut(&mut self, peer: PeerId) -> &mut Retained {
        // A handful of nodes: a linear search beats hashing on the forwarding path.
        let i = match self.retained.iter().position(|(p, _)| *p == peer) {
            Some(i) => i,
            None => {
                self.retained.push((peer, Retained::default()));
                self.retained.len() - 1
            }
        };
        &mut self.retained[i].1
    }

    /// Sends a CMD_UM_KEEPALIVE on the bulk stream of `peer` (behind every entry forwarded so
    /// far) and closes the current generation with it.
    pub(super) fn send_keepalive(&mut self, peer: PeerId) {
        let r = self.retained_mut(peer);
        r.sent += 1;
        let n = r.sent;
        if !r.cur.is_empty() {
            let g = std::mem::take(&mut r.cur);
            r.gens.push_back((n, g));
        }
        let mut bytes = Vec::with_capacity(16);
        frame::encode_message(&Message::CmdUmKeepalive, Priority::Normal, &mut bytes);
        // A frame's encoding is its length prefix and body: the bulk stream takes it as is.
        self.out.bulk(peer).extend_from_slice(&bytes);
    }

    /// The sync tick: every connection with entries forwarded since its last keep-alive sends
    /// one, so they are confirmed (or requeued) within a few ticks.
    pub(super) fn confirm_tick(&mut self) {
        let due: Vec<PeerId> = self
            .retained
            .iter()
            .filter(|(p, r)| !r.cur.is_empty() && self.peers.contains_key(p))
            .map(|(p, _)| *p)
            .collect();
        for peer in due {
            self.send_keepalive(peer);
        }
    }

    /// A CMD_UM_KEEPALIVE_ACK: the oldest keep-alive still unanswered is answered, and the
    /// generations it closed are the node's.
    pub(super) fn keepalive_answered(&mut self, peer: PeerId) {
        let r = self.retained_mut(peer);
        r.acked = (r.acked + 1).min(r.sent);
        while r.gens.front().is_some_and(|(n, _)| *n <= r.acked) {
            if let Some((_, g)) = r.gens.pop_front() {
                r.bytes -= g.len();
            }
        }
    }

    /// True when `peer` has a keep-alive sent before number `upto` still unanswered.
    pub(super) fn keepalive_unanswered(&self, peer: PeerId, upto: u64) -> bool {
        self.retained
            .iter()
            .find(|(p, _)| *p == peer)
            .is_some_and(|(_, r)| r.acked < upto)
    }

    /// Keep-alives sent on `peer` so far.
    pub(super) fn keepalives_sent(&self, peer: PeerId) -> u64 {
        self.retained
            .iter()
            .find(|(p, _)| *p == peer)
            .map_or(0, |(_, r)| r.sent)
    }

    /// The connection closed: its unconfirmed entries are taken in again (and wait in their
    /// collections' deferred queues while the node is away).
    pub(super) fn requeue_unconfirmed(
        &mut self,
        peer: PeerId,
        node: &[u8],
    ) -> Result<(), SchedError> {
        let Some(i) = self.retained.iter().position(|(p, _)| *p == peer) else {
            return Ok(());
        };
        let (_, r) = self.retained.swap_remove(i);
        let limits = Limits::default();
        let mut n = 0u64;
        for body in r.entries() {
            // Every body kept was a CMD_UM_URI / _URG this scheduler decoded when it came in.
            if let Some(u) = crate::msg::peek_uri(body, &limits) {
                self.accept_uri(u.collection, u.uri, u.urgent, body)?;
            } else if let Ok((_, m)) = frame::decode_message(body, &limits) {
                match m {
                    Message::CmdUmUri(u) => {
                        self.accept_uri(&u.collection, &u.entry.uri.uri, false, body)?
                    }
                    Message::CmdUmUriUrg(u) => {
                        self.accept_uri(&u.collection, &u.entry.uri.uri, true, body)?
                    }
                    _ => continue,
                }
            } else {
                continue;
            }
            n += 1;
        }
        if n > 0 {
            self.counters.uris_requeued += n;
            warn!(
                "node {}: {n} forwarded entries not confirmed before the connection closed, \
                 requeued",
                show(node)
            );
        }
        Ok(())
    }

    /// Entries kept for `peer` until confirmed.
    #[cfg(test)]
    pub(crate) fn retained_count(&self, peer: PeerId) -> usize {
        self.retained
            .iter()
            .find(|(p, _)| *p == peer)
            .map_or(0, |(_, r)| r.count())
    }
}
