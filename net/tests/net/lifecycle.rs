//! Closing and stopping: a graceful close writes what is queued first; shutdown and dropped
//! handles end the loop thread; sends to a closed connection are dropped, not misdelivered.

use std::io::Read;

use crawlfleet_net::{CloseReason, Event, LoopStopped, Priority, Unsent};

use crate::util;

#[test]
fn close_writes_the_queue_then_ends_the_stream() {
    let lp = util::spawn_listening();
    let mut peer = util::connect(lp.local_addrs[0]);
    let conn = util::accepted_from(&lp.handle, &lp.events, peer.local_addr().unwrap());
    let mut expect = Vec::new();
    for seq in 0..64 {
        let f = util::frame(1, seq, 64 << 10, Priority::Normal);
        expect.extend_from_slice(&f);
        lp.handle.send(conn, Priority::Normal, f).unwrap();
    }
    lp.handle.close(conn).unwrap();
    // Sent after close: dropped.
    lp.handle
        .send(conn, Priority::High, util::frame(1, 99, 1, Priority::High))
        .unwrap();
    let mut got = Vec::new();
    peer.read_to_end(&mut got).expect("clean end of stream");
    assert!(
        got == expect,
        "every queued byte, then the end of the stream"
    );
    drop(peer);
    match util::next_event(&lp.events) {
        Event::Closed {
            conn: c,
            reason,
            unsent,
            ..
        } => {
            assert_eq!(c, conn);
            assert_eq!(reason, CloseReason::LocalClose);
            assert_eq!(unsent, Unsent::default());
        }
        other => panic!("unexpected {other:?}"),
    }
    util::stop(lp);
}

#[test]
fn closed_event_counts_discarded_frames() {
    let lp = util::spawn_listening();
    let peer = util::connect(lp.local_addrs[0]);
    let conn = util::accepted_from(&lp.handle, &lp.events, peer.local_addr().unwrap());
    // 32 MiB to a peer that never reads, then the peer resets: most of it is never written.
    for seq in 0..128 {
        let f = util::frame(1, seq, 256 << 10, Priority::Normal);
        lp.handle.send(conn, Priority::Normal, f).unwrap();
    }
    drop(peer);
    match util::next_event(&lp.events) {
        Event::Closed {
            conn: c, unsent, ..
        } => {
            assert_eq!(c, conn);
            assert!(unsent.sends > 0 && unsent.bytes > 0, "{unsent:?}");
        }
        other => panic!("unexpected {other:?}"),
    }
    util::stop(lp);
}

#[test]
fn shutdown_ends_the_thread_and_closes_connections() {
    let lp = util::spawn_listening();
    let mut peer = util::connect(lp.local_addrs[0]);
    let conn = util::accepted_from(&lp.handle, &lp.events, peer.local_addr().unwrap());
    let handle = lp.handle.clone();
    let events = lp.events.clone();
    util::stop(lp);
    match util::next_event(&events) {
        Event::Closed {
            conn: c, reason, ..
        } => {
            assert_eq!(c, conn);
            assert_eq!(reason, CloseReason::Shutdown);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(events.recv().is_err(), "event channel closed");
    let mut rest = Vec::new();
    peer.read_to_end(&mut rest).expect("the peer sees the end");
    assert_eq!(handle.shutdown(), Err(LoopStopped));
}

#[test]
fn dropping_every_handle_stops_the_loop() {
    let lp = util::spawn_listening();
    drop(lp.handle);
    lp.join.join().expect("loop thread").expect("clean end");
    assert!(lp.events.recv().is_err());
}
