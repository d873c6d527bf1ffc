//! What leaves the event loop: [`Event`]s on a crossbeam channel, with received messages batched
//! per read ([`FrameBatch`]) so that one channel operation carries many frames.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::frame::Priority;

use crate::framing::{FramingError, Refusal};
use crate::ids::{ConnId, LinkId, ListenerId, TimerId};
use crate::limits::{InRole, InRoleGuard};

/// One thing that happened in the loop. For a given connection the order is: `Accepted` or
/// `Connected` first, then `Frames` in wire order, then exactly one `Closed`, last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A listener accepted a connection.
    Accepted {
        /// The new connection.
        conn: ConnId,
        /// Which listener accepted it.
        listener: ListenerId,
        /// The peer's address.
        peer: SocketAddr,
    },
    /// An outgoing link is up on a new TCP connection.
    Connected {
        /// The new connection (fresh for every reconnect).
        conn: ConnId,
        /// The link it belongs to.
        link: LinkId,
        /// The address connected to.
        peer: SocketAddr,
    },
    /// An attempt to bring an outgoing link up failed; the loop tries again after `retry_in`.
    ConnectFailed {
        /// The link.
        link: LinkId,
        /// The address tried.
        addr: SocketAddr,
        /// Why it failed.
        error: IoFailure,
        /// When the next attempt starts.
        retry_in: Duration,
    },
    /// Complete, validated messages read from one connection, in wire order.
    Frames(FrameBatch),
    /// A connection is gone. Whatever was still queued for it is discarded (counted in `unsent`),
    /// as is anything sent to it afterwards: the role resends on another connection if it must.
    /// For a link's connection (`link` is `Some`), the loop reconnects unless the link was
    /// disconnected.
    Closed {
        /// The connection.
        conn: ConnId,
        /// The link it belonged to, for an outgoing connection.
        link: Option<LinkId>,
        /// Why it was closed.
        reason: CloseReason,
        /// What was queued for it and never written.
        unsent: Unsent,
    },
    /// A timer set with [`Handle::set_timer`](crate::Handle::set_timer) expired.
    Timer(TimerId),
}

/// Why a connection was closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The peer closed its side (a read returned 0 bytes).
    PeerClosed,
    /// A socket call failed.
    Io(IoFailure),
    /// The peer announced a message larger than the framing's limit.
    Oversized {
        /// The announced length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The peer sent a message the framing refused.
    BadFrame(FramingError),
    /// The role asked for it ([`Handle::close`](crate::Handle::close) or
    /// [`Handle::disconnect`](crate::Handle::disconnect)).
    LocalClose,
    /// A graceful close did not finish within the linger time.
    LingerExpired,
    /// A partial message, an unfinished handshake (an accepted connection that has sent no
    /// whole message) or output the peer does not read waited longer than the idle timeout.
    IdleTimeout {
        /// The timeout.
        after: Duration,
    },
    /// Partial messages held more than the budget; this connection held the most.
    MemoryCap {
        /// Bytes this connection held.
        held: usize,
        /// Bytes held in all (before this close).
        total: usize,
        /// The budget.
        cap: usize,
    },
    /// The loop is shutting down.
    Shutdown,
}

impl CloseReason {
    /// True when the peer misbehaved (oversized or undecodable message).
    pub fn is_protocol_error(&self) -> bool {
        matches!(
            self,
            CloseReason::Oversized { .. } | CloseReason::BadFrame(_)
        )
    }
}

impl From<FramingError> for CloseReason {
    fn from(e: FramingError) -> Self {
        match e {
            FramingError::Oversized { len, limit } => CloseReason::Oversized { len, limit },
            other => CloseReason::BadFrame(other),
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::PeerClosed => f.write_str("peer closed the connection"),
            CloseReason::Io(e) => write!(f, "i/o error: {e}"),
            CloseReason::Oversized { len, limit } => {
                write!(f, "frame length {len} exceeds the limit of {limit} bytes")
            }
            CloseReason::BadFrame(e) => e.fmt(f),
            CloseReason::LocalClose => f.write_str("closed locally"),
            CloseReason::LingerExpired => f.write_str("closed locally; linger time expired"),
            CloseReason::IdleTimeout { after } => {
                write!(f, "idle timeout: no message completed in {after:?}")
            }
            CloseReason::MemoryCap { held, total, cap } => write!(
                f,
                "partial messages hold {total} bytes, over the budget of {cap}; this \
                 connection held the most ({held})"
            ),
            CloseReason::Shutdown => f.write_str("event loop shut down"),
        }
    }
}

/// An `io::Error` reduced to what can be cloned and compared: its kind and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IoFailure {
    /// The error kind.
    pub kind: io::ErrorKind,
    /// The error's text.
    pub message: String,
}

impl From<&io::Error> for IoFailure {
    fn from(e: &io::Error) -> Self {
        IoFailure {
            kind: e.kind(),
            message: e.to_string(),
        }
    }
}

impl From<io::Error> for IoFailure {
    fn from(e: io::Error) -> Self {
        IoFailure::from(&e)
    }
}

impl fmt::Display for IoFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a closed connection still had queued: discarded, never written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unsent {
    /// Sends (each one [`Handle::send`](crate::Handle::send) call) not written at all.
    pub sends: usize,
    /// Bytes not written, counting the unwritten tail of a partly written send.
    pub bytes: usize,
}

/// Where one message sits in a batch's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameRef {
    /// Start of the whole message (header included).
    offset: usize,
    /// Length of the whole message.
    len: usize,
    /// Start of the body, relative to `offset`.
    body_start: usize,
    /// Length of the body.
    body_len: usize,
    priority: Priority,
    /// Set for input the framing refused ([`crate::Next::Refused`]).
    refusal: Option<Refusal>,
}

/// Messages read from one connection in one go, stored back to back in one buffer: one channel
/// operation and one allocation for the lot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameBatch {
    conn: ConnId,
    data: Vec<u8>,
    frames: Vec<FrameRef>,
    /// Counts the batch against its connection's messages waiting for the role until the last
    /// clone is dropped (see `limits`).
    held: Held,
}

/// The accounting of a batch the role holds; not part of what a batch is (equality ignores it).
/// A clone counts its bytes again, until it is dropped too.
#[derive(Debug, Default)]
struct Held(Option<InRoleGuard>);

impl Clone for Held {
    fn clone(&self) -> Self {
        Held(self.0.as_ref().map(InRoleGuard::again))
    }
}

impl PartialEq for Held {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Held {}

impl FrameBatch {
    /// An empty batch that will hold messages copied out of `conn`'s read buffer.
    pub(crate) fn new(conn: ConnId) -> Self {
        FrameBatch {
            conn,
            data: Vec::new(),
            frames: Vec::new(),
            held: Held::default(),
        }
    }

    /// Makes room for the records of `frames` more messages.
    pub(crate) fn reserve(&mut self, frames: usize) {
        self.frames.reserve(frames);
    }

    /// Records a message at `offset..offset + len` of the bytes that will become `data`; the
    /// body is `body` relative to `offset`. Refuses ranges that do not nest.
    pub(crate) fn push(
        &mut self,
        offset: usize,
        len: usize,
        body: std::ops::Range<usize>,
        priority: Priority,
    ) -> Result<(), FramingError> {
        if len == 0 || body.start > body.end || body.end > len {
            return Err(FramingError::Contract("message body outside the message"));
        }
        self.frames.push(FrameRef {
            offset,
            len,
            body_start: body.start,
            body_len: body.end - body.start,
            priority,
            refusal: None,
        });
        Ok(())
    }

    /// Records refused input at `offset..offset + refusal.len`; its body is all of it.
    pub(crate) fn push_refusal(
        &mut self,
        offset: usize,
        refusal: Refusal,
    ) -> Result<(), FramingError> {
        self.push(offset, refusal.len, 0..refusal.len, Priority::Normal)?;
        if let Some(last) = self.frames.last_mut() {
            last.refusal = Some(refusal);
        }
        Ok(())
    }

    /// Bytes the recorded messages span.
    pub(crate) fn span(&self) -> usize {
        self.frames.last().map_or(0, |f| f.offset + f.len)
    }

    /// Installs the bytes; `data.len()` must equal [`FrameBatch::span`].
    pub(crate) fn set_data(&mut self, data: Vec<u8>) {
        debug_assert_eq!(data.len(), self.span());
        self.data = data;
    }

    /// Counts the batch's bytes against `in_role` while the role holds it.
    pub(crate) fn hand_to_role(&mut self, in_role: &Arc<InRole>) {
        self.held = Held(Some(in_role.hand(self.data.len())));
    }

    /// The connection the messages came from.
    pub fn conn(&self) -> ConnId {
        self.conn
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// True when the batch holds no message (the loop never sends one).
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The `i`-th message's priority and body (for FSCMT: the marshal bytes after the header,
    /// ready for `frame::decode_body`).
    pub fn get(&self, i: usize) -> Option<(Priority, &[u8])> {
        let f = self.frames.get(i)?;
        let start = f.offset + f.body_start;
        Some((f.priority, self.data.get(start..start + f.body_len)?))
    }

    /// Whether the framing refused the `i`-th message ([`crate::Next::Refused`]), and with what
    /// status. A refused message is the connection's last: the role answers it with the status
    /// and closes the connection. Its body ([`FrameBatch::get`]) is the refused bytes.
    pub fn refusal(&self, i: usize) -> Option<Refusal> {
        self.frames.get(i)?.refusal
    }

    /// The `i`-th message as it was on the wire, header included: forward it without
    /// re-encoding.
    pub fn raw(&self, i: usize) -> Option<&[u8]> {
        let f = self.frames.get(i)?;
        self.data.get(f.offset..f.offset + f.len)
    }

    /// All messages as they were on the wire, back to back.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// All messages as they were on the wire, without copying: to relay or echo a batch whole.
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    /// The messages in wire order, as `(priority, body)`.
    pub fn iter(&self) -> Frames<'_> {
        Frames {
            batch: self,
            next: 0,
        }
    }
}

impl<'a> IntoIterator for &'a FrameBatch {
    type Item = (Priority, &'a [u8]);
    type IntoIter = Frames<'a>;

    fn into_iter(self) -> Frames<'a> {
        self.iter()
    }
}

/// Iterator over a [`FrameBatch`]'s `(priority, body)` pairs.
#[derive(Clone, Debug)]
pub struct Frames<'a> {
    batch: &'a FrameBatch,
    next: usize,
}

impl<'a> Iterator for Frames<'a> {
    type Item = (Priority, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.batch.get(self.next)?;
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.batch.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Frames<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_iterates_bodies_and_raw_frames() {
        let conn = ConnId::new(3, 1).unwrap();
        let mut b = FrameBatch::new(conn);
        b.push(0, 6, 4..6, Priority::Normal).unwrap();
        b.push(6, 5, 4..5, Priority::High).unwrap();
        assert!(b.push(11, 2, 1..3, Priority::High).is_err());
        b.set_data(b"\0\0\0\x02ab\0\0\0\x01c".to_vec());
        let got: Vec<_> = b.iter().collect();
        assert_eq!(
            got,
            vec![(Priority::Normal, &b"ab"[..]), (Priority::High, &b"c"[..])]
        );
        assert_eq!(b.raw(1), Some(&b"\0\0\0\x01c"[..]));
        assert_eq!(b.iter().len(), 2);
        assert_eq!(b.conn(), conn);
    }
}
