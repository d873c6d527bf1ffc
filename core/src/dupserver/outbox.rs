//! Frames queued for peers: consecutive frames to one peer share one buffer, which the shell
//! hands whole to the event loop as that connection's output (no copy). A new buffer starts at
//! the size of the answers expected (about the bytes of the frames being handled: a socket read
//! of a node's pipelined adds is answered by as many PPDUP_ADD_OK of about the same size), so
//! answering a window does not regrow its buffer frame after frame.

use super::PeerId;
use crate::frame::{self, Priority};
use crate::msg::{encode_add_ok_frame, Message, PpdupAddOk};

/// The smallest buffer started.
const MIN_ROOM: usize = 4096;

/// Frames for peers, in the order produced, consecutive frames to one peer in one buffer.
pub(super) type Queue = Vec<(PeerId, Vec<u8>)>;

/// Spare room under which the last buffer for a peer is left as it is and a new one started,
/// rather than grown: growing copies every frame in it (a replica's answers to two socket reads
/// of forwards in one batch filled the first read's room, and each batch copied its answers
/// again). The loop writes a connection's queued buffers with one `writev` all the same.
const SPARE: usize = 1024;

/// The buffer of `q` the next frame for `to` goes into: the last one when it is for `to` and
/// has room left, else a new one with room for `room` bytes.
fn buffer_for(q: &mut Queue, to: PeerId, room: usize) -> &mut Vec<u8> {
    if q.last()
        .is_none_or(|(p, b)| *p != to || b.capacity() - b.len() < SPARE)
    {
        q.push((to, Vec::with_capacity(room.max(MIN_ROOM))));
    }
    &mut q.last_mut().expect("pushed above").1
}

/// Appends encoded frames for `to`.
pub(super) fn push_encoded(q: &mut Queue, to: PeerId, frames: &[u8], room: usize) {
    buffer_for(q, to, room.max(frames.len())).extend_from_slice(frames);
}

/// Appends frames for `to` that `write` writes into the buffer.
pub(super) fn push_with(q: &mut Queue, to: PeerId, room: usize, write: impl FnOnce(&mut Vec<u8>)) {
    write(buffer_for(q, to, room));
}

/// Appends a frame carrying `m` for `to`.
pub(super) fn push_frame(q: &mut Queue, to: PeerId, m: &Message<'_>, room: usize) {
    frame::encode_message(m, Priority::Normal, buffer_for(q, to, room));
}

/// Appends a PPDUP_ADD_OK frame for `to`, written straight into the buffer.
pub(super) fn push_add_ok(q: &mut Queue, to: PeerId, ok: &PpdupAddOk<'_>, room: usize) {
    encode_add_ok_frame(ok, Priority::Normal, buffer_for(q, to, room));
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::*;

    /// A PPDUP_ADD_OK naming its own URI as the owner.
    fn add_ok() -> PpdupAddOk<'static> {
        PpdupAddOk {
            collection: Cow::Borrowed(b"c"),
            node_id: Cow::Borrowed(b"n"),
            uri: Cow::Borrowed(b"u"),
            owner_uri: Some(Cow::Borrowed(b"u")),
            ppdup_id: None,
            dbname: None,
        }
    }

    #[test]
    fn consecutive_frames_to_one_peer_share_a_buffer_of_the_room_asked() {
        let ok = add_ok();
        let mut one = Vec::new();
        frame::encode_message(&Message::PpdupAddOk(ok.clone()), Priority::Normal, &mut one);
        let mut q = Queue::new();
        push_add_ok(&mut q, 1, &ok, 100_000);
        push_frame(&mut q, 1, &Message::PpdupAddOk(ok.clone()), 0);
        push_encoded(&mut q, 2, &one, 0);
        push_add_ok(&mut q, 1, &ok, 0);
        assert_eq!(q.len(), 3);
        assert_eq!(q[0].0, 1);
        assert_eq!(q[0].1, [one.clone(), one.clone()].concat());
        assert!(q[0].1.capacity() >= 100_000);
        assert_eq!((q[1].0, &q[1].1), (2, &one));
        assert_eq!(q[1].1.capacity(), MIN_ROOM);
        assert_eq!((q[2].0, &q[2].1), (1, &one));
    }

    #[test]
    fn a_full_buffer_is_followed_by_a_new_one_rather_than_grown() {
        let ok = add_ok();
        let mut one = Vec::new();
        encode_add_ok_frame(&ok, Priority::Normal, &mut one);
        let mut q = Queue::new();
        // Frames to one peer until the first buffer's room is short of SPARE.
        let fit = (MIN_ROOM - SPARE) / one.len() + 1;
        for _ in 0..fit + 3 {
            push_add_ok(&mut q, 1, &ok, 0);
        }
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].1.capacity(), MIN_ROOM, "not grown");
        assert_eq!(q[0].1.len(), fit * one.len());
        let all: Vec<u8> = q.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        assert_eq!(all, one.repeat(fit + 3), "the same bytes, in order");
        assert!(q.iter().all(|(p, _)| *p == 1));
    }
}
