//! Large frames: the read buffer grows to what a frame needs, up to the configured limit and
//! not a byte beyond it.

use std::io::Write;

use crawlfleet_core::marshal::Limits;
use crawlfleet_net::{CloseReason, Event, EventLoop, Priority};

use crate::util;

const LIMIT: usize = 4 << 20;

/// A frame whose body is exactly `body_len` bytes.
fn frame_with_body(body_len: usize) -> Vec<u8> {
    // Find the padding that gives the wanted body size (the dict overhead is small and fixed
    // for one length class of the padding string).
    let overhead = util::frame(1, 1, 0, Priority::Normal).len() - 4;
    let f = util::frame(1, 1, body_len - overhead, Priority::Normal);
    assert_eq!(f.len() - 4, body_len);
    f
}

#[test]
fn frames_up_to_the_limit_pass_and_one_byte_more_is_refused() {
    util::init_logs();
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .limits(Limits {
            max_size: LIMIT,
            ..Limits::default()
        })
        .spawn()
        .unwrap();
    let (h, ev) = (&lp.handle, &lp.events);
    let mut peer = util::connect(lp.local_addrs[0]);
    util::accepted_from(h, ev, peer.local_addr().unwrap());

    // A small frame, a frame of exactly the limit, a small one again: all echoed intact.
    util::round_trip(h, ev, &mut peer, &util::frame(1, 0, 10, Priority::Normal));
    let big = frame_with_body(LIMIT);
    // Written in small pieces, so the loop sees the frame arrive bit by bit.
    let writer = {
        let mut w = peer.try_clone().unwrap();
        let big = big.clone();
        std::thread::spawn(move || {
            for chunk in big.chunks(3000) {
                w.write_all(chunk).unwrap();
            }
        })
    };
    util::echo_until(
        h,
        ev,
        |e| matches!(e, Event::Frames(b) if b.data() == &big[..]),
    );
    writer.join().unwrap();
    assert_eq!(util::read_frame(&mut peer).unwrap(), big);
    util::round_trip(h, ev, &mut peer, &util::frame(1, 2, 10, Priority::High));

    // One byte over the limit: refused from the header alone.
    let mut over = (LIMIT as u32 + 1).to_be_bytes().to_vec();
    over.extend_from_slice(&[0; 100]);
    peer.write_all(&over).unwrap();
    match util::echo_until(h, ev, |e| matches!(e, Event::Closed { .. })) {
        Event::Closed { reason, .. } => assert_eq!(
            reason,
            CloseReason::Oversized {
                len: LIMIT + 1,
                limit: LIMIT
            }
        ),
        _ => unreachable!(),
    }
    util::stop(lp);
}
