//! 1,000 concurrent loopback connections exchange frames with an echo role; every frame is
//! accounted for, on both sides.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Barrier;

use crawlfleet_net::{CloseReason, Event, Priority};

use crate::util;

const CONNS: usize = 1000;
const THREADS: usize = 4;
const FRAMES: i64 = 20;

/// The soft limit on open files, from /proc (Linux); `None` elsewhere.
fn open_file_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

#[test]
fn thousand_connections_echo_every_frame() {
    // Both ends live in this process: two descriptors per connection, plus slack.
    let need = 2 * CONNS as u64 + 200;
    if let Some(limit) = open_file_limit() {
        assert!(
            limit >= need,
            "this test needs {need} open files; the soft limit is {limit} (raise ulimit -n)"
        );
    }
    let lp = util::spawn_listening();
    let addr = lp.local_addrs[0];

    // The role: echo every frame, count per connection, until every connection has closed.
    let role = {
        let handle = lp.handle.clone();
        let events = lp.events.clone();
        std::thread::spawn(move || {
            let mut frames: HashMap<_, i64> = HashMap::new();
            let (mut accepted, mut closed) = (0, 0);
            while closed < CONNS {
                match util::next_event(&events) {
                    Event::Accepted { conn, .. } => {
                        accepted += 1;
                        frames.insert(conn, 0);
                    }
                    Event::Frames(batch) => {
                        *frames
                            .get_mut(&batch.conn())
                            .expect("frames after Accepted") += batch.len() as i64;
                        util::echo(&handle, batch.conn(), &batch);
                    }
                    Event::Closed {
                        conn,
                        reason,
                        unsent,
                        ..
                    } => {
                        assert_eq!(reason, CloseReason::PeerClosed);
                        assert_eq!(unsent.bytes, 0, "{conn}: echo not fully written");
                        closed += 1;
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            (accepted, frames)
        })
    };

    // The peers: THREADS threads of CONNS / THREADS connections each, all open at once.
    let opened = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let opened = &opened;
            s.spawn(move || {
                let ids = (t * CONNS / THREADS) as i64..((t + 1) * CONNS / THREADS) as i64;
                let mut peers: Vec<_> = ids.clone().map(|_| util::connect(addr)).collect();
                opened.wait();
                for (client, peer) in ids.clone().zip(&mut peers) {
                    let mut out = Vec::new();
                    for seq in 0..FRAMES {
                        let pad = ((client * 31 + seq * 97) % 1500) as usize;
                        out.extend(util::frame(client, seq, pad, Priority::Normal));
                    }
                    peer.write_all(&out).unwrap();
                }
                for (client, peer) in ids.zip(&mut peers) {
                    for seq in 0..FRAMES {
                        let f = util::read_frame(peer).expect("echoed frame");
                        let (c, s, _) = util::parse(&f[4..]);
                        assert_eq!(
                            (c, s),
                            (client, seq),
                            "frames in order, on their own connection"
                        );
                    }
                }
                // Every thread has read everything before any connection closes.
                opened.wait();
            });
        }
    });

    let (accepted, frames) = role.join().expect("role thread");
    assert_eq!(accepted, CONNS);
    assert_eq!(frames.len(), CONNS);
    assert!(
        frames.values().all(|&n| n == FRAMES),
        "every frame reached the role"
    );
    util::stop(lp);
}
