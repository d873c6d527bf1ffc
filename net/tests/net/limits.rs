//! The limits every port keeps (DESIGN.md "Limits every port keeps"): a peer that never reads is
//! not read either once its output passes the cap, partial messages share a memory budget, and a
//! partial message or a silent new connection times out. Other connections are served throughout.

use std::io::{ErrorKind, Read, Write};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_net::{CloseReason, Event, EventLoop, PartialBudget, Priority};

use crate::util;

/// Frames the flooding peer tries to send: 2,048 of 64 KiB, 128 MiB in all.
const FLOOD_FRAMES: i64 = 2048;
const FLOOD_PAD: usize = 64 << 10;

/// Waits (bounded by `util::WAIT`) until `cond` holds.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + util::WAIT;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "{what}: not within {:?}",
            util::WAIT
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_peer_that_never_reads_stops_being_read_and_others_are_served() {
    util::init_logs();
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .max_queued_output(1 << 20)
        .spawn()
        .unwrap();
    let addr = lp.local_addrs[0];
    // The role echoes every frame, whoever sends it, until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let role = {
        let (handle, events, stop) = (lp.handle.clone(), lp.events.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if let Ok(Event::Frames(b)) = events.recv_timeout(Duration::from_millis(50)) {
                    util::echo(&handle, b.conn(), &b);
                }
            }
        })
    };

    // The flooder writes frames and reads nothing; its writes time out once the loop stops
    // taking them (the loop must not read on and queue every answer).
    let mut flooder = util::connect(addr);
    flooder
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let writer = std::thread::spawn(move || {
        let mut whole = 0;
        for seq in 0..FLOOD_FRAMES {
            let f = util::frame(1, seq, FLOOD_PAD, Priority::Normal);
            if flooder.write_all(&f).is_err() {
                break;
            }
            whole += 1;
        }
        (flooder, whole)
    });
    let (mut flooder, whole) = writer.join().unwrap();
    assert!(
        whole < FLOOD_FRAMES / 4,
        "the loop read {whole} frames of a peer that reads nothing (answers queued without bound)"
    );

    // Meanwhile another peer gets its answers at once.
    let mut other = util::connect(addr);
    for seq in 0..10 {
        let f = util::frame(2, seq, 100, Priority::Normal);
        other.write_all(&f).unwrap();
        assert_eq!(util::read_frame(&mut other).unwrap(), f);
    }

    // Once the flooder reads, every frame it wrote whole comes back, in order.
    flooder.set_read_timeout(Some(util::WAIT)).unwrap();
    for seq in 0..whole {
        let back = util::read_frame(&mut flooder).expect("an answer to a frame written whole");
        let (client, got, _) = util::parse(&back[4..]);
        assert_eq!((client, got), (1, seq));
    }
    stop.store(true, Ordering::SeqCst);
    role.join().unwrap();
    util::stop(lp);
}

#[test]
fn partial_messages_past_the_budget_close_the_connection_holding_the_most() {
    util::init_logs();
    let budget = PartialBudget::new(1 << 20);
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .partial_budget(budget.clone())
        .spawn()
        .unwrap();
    let (h, ev) = (&lp.handle, &lp.events);
    let addr = lp.local_addrs[0];

    // `small` announces a 600 KiB frame and sends 400 KiB of it.
    let whole = util::frame(1, 0, 600 << 10, Priority::Normal);
    let mut small = util::connect(addr);
    let small_conn = util::accepted_from(h, ev, small.local_addr().unwrap());
    small.write_all(&whole[..400 << 10]).unwrap();
    wait_until("the loop holds the small partial frame", || {
        budget.held() >= 400 << 10
    });

    // `big` announces 4 MiB and sends 800 KiB: together over the 1 MiB budget.
    let mut big = util::connect(addr);
    let big_conn = util::accepted_from(h, ev, big.local_addr().unwrap());
    let big_frame = util::frame(2, 0, 4 << 20, Priority::Normal);
    big.write_all(&big_frame[..800 << 10]).unwrap();
    let closed = util::echo_until(h, ev, |e| matches!(e, Event::Closed { .. }));
    let Event::Closed { conn, reason, .. } = closed else {
        unreachable!()
    };
    assert_eq!(conn, big_conn, "the connection holding the most is closed");
    assert!(
        matches!(reason, CloseReason::MemoryCap { cap, .. } if cap == 1 << 20),
        "{reason:?}"
    );
    assert!(budget.held() <= 1 << 20);

    // The other finishes its frame and is answered; nothing is held after.
    small.write_all(&whole[400 << 10..]).unwrap();
    util::echo_until(
        h,
        ev,
        |e| matches!(e, Event::Frames(b) if b.conn() == small_conn),
    );
    assert_eq!(util::read_frame(&mut small).unwrap(), whole);
    assert_eq!(budget.held(), 0);
    util::stop(lp);
}

#[test]
fn a_partial_frame_or_a_silent_new_connection_times_out_and_an_idle_one_does_not() {
    util::init_logs();
    let timeout = Duration::from_millis(300);
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .idle_timeout(Some(timeout))
        .spawn()
        .unwrap();
    let (h, ev) = (&lp.handle, &lp.events);
    let addr = lp.local_addrs[0];

    // An outgoing link to a peer that never says anything is ours: it stays up.
    let silent_server = std::net::TcpListener::bind(util::loopback0()).unwrap();
    let link = h.connect(silent_server.local_addr().unwrap()).unwrap();
    let (_server_side, _) = silent_server.accept().unwrap();

    // `idle` sends a whole frame and then nothing: between messages, not waiting for one.
    let mut idle = util::connect(addr);
    let idle_conn = util::accepted_from(h, ev, idle.local_addr().unwrap());
    util::round_trip(h, ev, &mut idle, &util::frame(1, 0, 10, Priority::Normal));

    // `half` sends half a frame; `mute` connects and sends nothing.
    let f = util::frame(2, 0, 1000, Priority::Normal);
    let mut half = util::connect(addr);
    let half_conn = util::accepted_from(h, ev, half.local_addr().unwrap());
    half.write_all(&f[..f.len() / 2]).unwrap();
    let mut mute = util::connect(addr);
    let mute_conn = util::accepted_from(h, ev, mute.local_addr().unwrap());

    let mut closed = Vec::new();
    while closed.len() < 2 {
        if let Event::Closed { conn, reason, .. } =
            util::echo_until(h, ev, |e| matches!(e, Event::Closed { .. }))
        {
            assert_eq!(reason, CloseReason::IdleTimeout { after: timeout });
            closed.push(conn);
        }
    }
    closed.sort();
    let mut want = vec![half_conn, mute_conn];
    want.sort();
    assert_eq!(
        closed, want,
        "the partial frame and the silent connection time out"
    );
    for s in [&mut half, &mut mute] {
        let mut rest = Vec::new();
        if let Err(e) = s.read_to_end(&mut rest) {
            assert_ne!(e.kind(), ErrorKind::WouldBlock, "left open");
        }
    }

    // Several timeouts later the idle connection and the link are still served.
    std::thread::sleep(timeout * 3);
    util::round_trip(h, ev, &mut idle, &util::frame(1, 1, 10, Priority::Normal));
    while let Ok(e) = ev.try_recv() {
        if let Event::Closed { conn, link: l, .. } = e {
            assert!(conn != idle_conn && l != Some(link), "closed {conn}");
        }
    }
    util::stop(lp);
}

#[test]
fn a_peer_whose_messages_the_role_still_holds_waits_while_others_are_read() {
    util::init_logs();
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .max_in_role(256 << 10)
        .spawn()
        .unwrap();
    let (h, ev) = (&lp.handle, &lp.events);
    let addr = lp.local_addrs[0];
    let mut busy = util::connect(addr);
    let busy_conn = util::accepted_from(h, ev, busy.local_addr().unwrap());
    let mut other = util::connect(addr);
    let other_conn = util::accepted_from(h, ev, other.local_addr().unwrap());

    // `busy` sends 8 MiB in 64 KiB frames; the role keeps every batch of it (not dropped).
    let writer = std::thread::spawn(move || {
        for seq in 0..128 {
            busy.write_all(&util::frame(1, seq, 64 << 10, Priority::Normal))
                .unwrap();
        }
        busy
    });
    let mut kept = Vec::new();
    let mut kept_bytes = 0;
    // Once the role holds past the cap, `busy` is not read any more: `other` still is.
    let f = util::frame(2, 0, 10, Priority::Normal);
    let mut other_sent = false;
    loop {
        match util::next_event(ev) {
            Event::Frames(b) if b.conn() == busy_conn => {
                kept_bytes += b.data().len();
                kept.push(b);
                if kept_bytes > 256 << 10 && !other_sent {
                    other.write_all(&f).unwrap();
                    other_sent = true;
                }
            }
            Event::Frames(b) if b.conn() == other_conn => {
                assert_eq!(b.data(), &f[..]);
                break;
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    assert!(
        kept_bytes < 4 << 20,
        "the loop read {kept_bytes} bytes of a peer whose messages the role holds"
    );
    // The role lets go: the rest of `busy`'s frames arrive, all of them, in order.
    let mut next = 0;
    for b in kept.drain(..) {
        for (_, body) in &b {
            assert_eq!(util::parse(body).1, next);
            next += 1;
        }
    }
    while next < 128 {
        match util::next_event(ev) {
            Event::Frames(b) => {
                assert_eq!(b.conn(), busy_conn);
                for (_, body) in &b {
                    assert_eq!(util::parse(body).1, next);
                    next += 1;
                }
            }
            e => panic!("unexpected {e:?}"),
        }
    }
    drop(writer.join().unwrap());
    util::stop(lp);
}

#[test]
fn what_a_peer_sent_before_it_finished_sending_is_answered() {
    util::init_logs();
    let lp = EventLoop::builder()
        .listen(util::loopback0())
        .answer_half_closed(true)
        .spawn()
        .unwrap();
    let (h, ev) = (&lp.handle, &lp.events);
    let mut peer = util::connect(lp.local_addrs[0]);
    let conn = util::accepted_from(h, ev, peer.local_addr().unwrap());
    let frames: Vec<Vec<u8>> = (0..3)
        .map(|seq| util::frame(1, seq, 100, Priority::Normal))
        .collect();
    peer.write_all(&frames.concat()).unwrap();
    peer.shutdown(std::net::Shutdown::Write).unwrap();
    // The role takes its time (as a duplicate server syncing its log would) and then answers.
    let mut got = Vec::new();
    while got.len() < 3 {
        if let Event::Frames(b) = util::next_event(ev) {
            assert_eq!(b.conn(), conn);
            got.extend(b.iter().map(|(_, body)| body.to_vec()));
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    for f in &frames {
        h.send(conn, Priority::Normal, f.clone()).unwrap();
    }
    for f in &frames {
        assert_eq!(&util::read_frame(&mut peer).unwrap(), f);
    }
    // Then the loop closes it: the peer reads the end of the stream.
    let mut rest = Vec::new();
    peer.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty());
    assert!(matches!(
        util::next_event(ev),
        Event::Closed { conn: c, reason: CloseReason::PeerClosed, .. } if c == conn
    ));
    util::stop(lp);
}
