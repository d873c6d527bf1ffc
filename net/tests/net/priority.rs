//! MS-FSCMT 2.2.1: a priority-1 frame goes ahead of queued priority-0 frames. Observed at a
//! peer that does not read until the high frame is queued behind far more normal frames than
//! the socket buffers can hold.

use std::time::Duration;

use crawlfleet_net::{Event, Priority, TimerId};

use crate::util;

const NORMAL: i64 = 256;
/// 256 frames of 256 KiB: 64 MiB, far beyond loopback socket buffers while the peer is not
/// reading, so most normal frames are still queued when the high one arrives.
const PAD: usize = 256 << 10;
const HIGH_SEQ: i64 = 1_000_000;

#[test]
fn high_priority_frame_overtakes_queued_normal_frames() {
    let lp = util::spawn_listening();
    let mut peer = util::connect(lp.local_addrs[0]);
    let conn = util::accepted_from(&lp.handle, &lp.events, peer.local_addr().unwrap());

    for seq in 0..NORMAL {
        let f = util::frame(0, seq, PAD, Priority::Normal);
        lp.handle.send(conn, Priority::Normal, f).unwrap();
    }
    let high = util::frame(0, HIGH_SEQ, 16, Priority::High);
    lp.handle.send(conn, Priority::High, high).unwrap();
    // Commands are carried out in order: once this timer fires, the high frame is queued.
    lp.handle
        .set_timer(TimerId(1), Duration::ZERO, None)
        .unwrap();
    match util::next_event(&lp.events) {
        Event::Timer(TimerId(1)) => {}
        other => panic!("unexpected {other:?}"),
    }

    let mut seqs = Vec::new();
    for _ in 0..=NORMAL {
        let f = util::read_frame(&mut peer).expect("frame");
        let (_, seq, priority) = util::parse(&f[4..]);
        assert_eq!(priority == Priority::High, seq == HIGH_SEQ);
        seqs.push(seq);
    }
    let at = seqs
        .iter()
        .position(|&s| s == HIGH_SEQ)
        .expect("high frame arrived");
    let normals: Vec<i64> = seqs.iter().copied().filter(|&s| s != HIGH_SEQ).collect();
    assert_eq!(
        normals,
        (0..NORMAL).collect::<Vec<_>>(),
        "normal frames keep their order"
    );
    assert!(
        at < seqs.len() - 1,
        "the high frame came last: it waited behind every queued normal frame"
    );
    // Far more than half of the data was still queued when the high frame arrived.
    assert!(at < NORMAL as usize / 2, "high frame at position {at}");
    util::stop(lp);
}
