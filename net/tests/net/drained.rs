//! A read that fills less than its room ends the loop's read pass (`Conn::read`), without the
//! `WouldBlock` read the pass used to end on. What the peer sends or closes afterwards must
//! still be read: a FIN queued behind the data shows on the event that brings them, anything
//! later raises an event of its own.

use std::io::{Read, Write};

use crawlfleet_core::frame::Priority;
use crawlfleet_net::{CloseReason, ConnId, Event, EventLoop};
use crossbeam_channel::Receiver;

use crate::util;

/// Collects frames of `conn` until `n` arrived, then expects it closed by the peer.
fn frames_then_closed(ev: &Receiver<Event>, conn: ConnId, n: usize) {
    let mut got = 0;
    loop {
        match util::next_event(ev) {
            Event::Frames(b) if b.conn() == conn => got += b.len(),
            Event::Closed {
                conn: c, reason, ..
            } if c == conn => {
                assert_eq!(got, n, "every frame sent before the FIN was delivered");
                assert!(matches!(reason, CloseReason::PeerClosed), "{reason:?}");
                return;
            }
            _ => {}
        }
    }
}

#[test]
fn frames_and_a_fin_sent_together_are_both_seen() {
    let lp = util::spawn_listening();
    let (h, ev) = (&lp.handle, &lp.events);
    for round in 1..=20 {
        let mut peer = util::connect(lp.local_addrs[0]);
        let conn = util::accepted_from(h, ev, peer.local_addr().unwrap());
        let frames: Vec<u8> = (0..round)
            .flat_map(|seq| util::frame(1, seq as i64, 200, Priority::Normal))
            .collect();
        peer.write_all(&frames).unwrap();
        peer.shutdown(std::net::Shutdown::Write).unwrap();
        frames_then_closed(ev, conn, round);
    }
    util::stop(lp);
}

#[test]
fn a_fin_after_the_frames_were_read_is_seen() {
    let lp = util::spawn_listening();
    let (h, ev) = (&lp.handle, &lp.events);
    let mut peer = util::connect(lp.local_addrs[0]);
    let conn = util::accepted_from(h, ev, peer.local_addr().unwrap());
    // A short read each time: the loop stops reading after it, and the next bytes, then the
    // FIN, come with events of their own.
    for seq in 0..5 {
        util::round_trip(h, ev, &mut peer, &util::frame(2, seq, 50, Priority::Normal));
    }
    peer.shutdown(std::net::Shutdown::Write).unwrap();
    frames_then_closed(ev, conn, 0);
    let mut rest = Vec::new();
    peer.read_to_end(&mut rest).unwrap();
    util::stop(lp);
}

#[test]
fn a_message_larger_than_the_read_buffer_arrives_whole() {
    // 100 KiB in one frame: reads that fill their room go on, the last short one ends the pass.
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .spawn()
        .unwrap();
    let (h, ev) = (&lp.handle, &lp.events);
    let mut peer = util::connect(lp.local_addrs[0]);
    let _ = util::accepted_from(h, ev, peer.local_addr().unwrap());
    for seq in 0..3 {
        util::round_trip(
            h,
            ev,
            &mut peer,
            &util::frame(3, seq, 100 << 10, Priority::Normal),
        );
    }
    util::stop(lp);
}
