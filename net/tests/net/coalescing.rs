//! Many small frames queued at once (which the loop writes many per `writev`; the unit tests in
//! `sendq` count the calls) arrive intact and in order.

use crawlfleet_net::Priority;

use crate::util;

const FRAMES: i64 = 20_000;

#[test]
fn many_small_frames_arrive_intact_and_in_order() {
    let lp = util::spawn_listening();
    let mut peer = util::connect(lp.local_addrs[0]);
    let conn = util::accepted_from(&lp.handle, &lp.events, peer.local_addr().unwrap());

    let reader = std::thread::spawn(move || {
        let mut seqs = Vec::with_capacity(FRAMES as usize);
        for _ in 0..FRAMES {
            let f = util::read_frame(&mut peer).expect("frame");
            let (c, seq, _) = util::parse(&f[4..]);
            assert_eq!(c, 9);
            seqs.push(seq);
        }
        seqs
    });
    // Single-frame sends, and every tenth send carries three frames at once.
    let mut seq = 0;
    while seq < FRAMES {
        let mut bytes = util::frame(9, seq, (seq % 40) as usize, Priority::Normal);
        seq += 1;
        if seq % 10 == 0 {
            for _ in 0..2.min(FRAMES - seq) {
                bytes.extend(util::frame(9, seq, 3, Priority::Normal));
                seq += 1;
            }
        }
        lp.handle.send(conn, Priority::Normal, bytes).unwrap();
    }
    let seqs = reader.join().expect("reader");
    assert_eq!(seqs, (0..FRAMES).collect::<Vec<_>>());
    util::stop(lp);
}
