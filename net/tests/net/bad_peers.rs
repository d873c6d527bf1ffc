//! A peer that sends an oversized length prefix or an undecodable frame loses its own
//! connection, after the whole frames it sent before are delivered; other connections go on.

use std::io::{ErrorKind, Read, Write};

use crawlfleet_core::marshal::Limits;
use crawlfleet_net::{CloseReason, Event, FramingError, Priority};

use crate::util;

/// Runs `bad_bytes` from one of three peers and checks the closing `reason`.
fn only_the_offender_is_closed(bad_bytes: &[u8], check: impl Fn(&CloseReason)) {
    let lp = util::spawn_listening();
    let addr = lp.local_addrs[0];
    let (h, ev) = (&lp.handle, &lp.events);
    let mut good1 = util::connect(addr);
    let mut bad = util::connect(addr);
    let mut good2 = util::connect(addr);
    let _g1 = util::accepted_from(h, ev, good1.local_addr().unwrap());
    let bad_conn = util::accepted_from(h, ev, bad.local_addr().unwrap());
    let _g2 = util::accepted_from(h, ev, good2.local_addr().unwrap());

    util::round_trip(h, ev, &mut good1, &util::frame(1, 0, 10, Priority::Normal));

    // One good frame, then the bad bytes, in one write.
    let before = util::frame(2, 0, 10, Priority::High);
    let mut out = before.clone();
    out.extend_from_slice(bad_bytes);
    bad.write_all(&out).unwrap();

    let mut delivered_before = false;
    let closed = util::echo_until(h, ev, |e| {
        if let Event::Frames(b) = e {
            if b.conn() == bad_conn {
                assert_eq!(b.data(), &before[..]);
                delivered_before = true;
            }
        }
        matches!(e, Event::Closed { conn, .. } if *conn == bad_conn)
    });
    assert!(
        delivered_before,
        "the whole frame before the bad one was delivered first"
    );
    let Event::Closed { reason, link, .. } = closed else {
        unreachable!()
    };
    assert_eq!(link, None);
    check(&reason);
    assert!(reason.is_protocol_error());

    // The offender sees its connection end (after its echo, if the close raced it, or a reset).
    let mut rest = Vec::new();
    if let Err(e) = bad.read_to_end(&mut rest) {
        let timed_out = matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut);
        assert!(!timed_out, "the offender's connection was left open");
    }

    // The others carry on, in both directions.
    util::round_trip(
        h,
        ev,
        &mut good2,
        &util::frame(3, 1, 1000, Priority::Normal),
    );
    util::round_trip(h, ev, &mut good1, &util::frame(1, 1, 1000, Priority::High));
    util::stop(lp);
}

#[test]
fn oversized_length_prefix_closes_only_its_connection() {
    let header = 100_000_000u32.to_be_bytes();
    only_the_offender_is_closed(&header, |reason| {
        assert_eq!(
            *reason,
            CloseReason::Oversized {
                len: 100_000_000,
                limit: Limits::DEFAULT_MAX_SIZE
            }
        );
        assert_eq!(
            reason.to_string(),
            "frame length 100000000 exceeds the limit of 67108864 bytes"
        );
    });
}

#[test]
fn undecodable_frame_closes_only_its_connection() {
    let mut garbage = 5u32.to_be_bytes().to_vec();
    garbage.extend_from_slice(b"\xffjunk");
    only_the_offender_is_closed(&garbage, |reason| {
        assert!(
            matches!(reason, CloseReason::BadFrame(FramingError::Fscmt(_))),
            "{reason:?}"
        );
    });
}

#[test]
fn valid_marshal_that_is_not_a_frame_tuple_closes_its_connection() {
    // A marshal int (i 1) where a (dict, priority) tuple belongs.
    let mut body = 5u32.to_be_bytes().to_vec();
    body.extend_from_slice(b"i\x01\x00\x00\x00");
    only_the_offender_is_closed(&body, |reason| {
        assert!(matches!(reason, CloseReason::BadFrame(_)), "{reason:?}");
    });
}
