//! A full event channel stops the loop reading: the peer's writes back up into its socket, and
//! once the role drains the channel every frame arrives, in order, none lost.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_net::{Event, EventLoop, Priority};

use crate::util;

const FRAMES: i64 = 1024;
const PAD: usize = 64 << 10;

#[test]
fn full_event_channel_pauses_reading_without_loss() {
    util::init_logs();
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .event_capacity(Some(2))
        .spawn()
        .unwrap();
    let mut peer = util::connect(lp.local_addrs[0]);
    let written = Arc::new(AtomicUsize::new(0));
    let writer = {
        let written = Arc::clone(&written);
        std::thread::spawn(move || {
            for seq in 0..FRAMES {
                peer.write_all(&util::frame(4, seq, PAD, Priority::Normal))
                    .unwrap();
                written.fetch_add(1, Ordering::SeqCst);
            }
            peer
        })
    };
    // The role is not reading. Without backpressure the loop would take all 64 MiB off the
    // socket at once; with it the writer stalls once the socket buffers are full.
    std::thread::sleep(Duration::from_millis(500));
    let stalled_at = written.load(Ordering::SeqCst);
    assert!(lp.events.len() <= 2);
    assert!(
        stalled_at < FRAMES as usize,
        "the peer wrote everything while the role read nothing"
    );

    let mut next = 0;
    while next < FRAMES {
        match util::next_event(&lp.events) {
            Event::Accepted { .. } => {}
            Event::Frames(b) => {
                for (_, body) in &b {
                    let (_, seq, _) = util::parse(body);
                    assert_eq!(seq, next);
                    next += 1;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let _peer = writer.join().expect("writer");
    util::stop(lp);
}
