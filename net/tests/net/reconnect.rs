//! An outgoing link comes up when a listener appears, and comes back when the listener returns
//! after dying; its LinkId stays, each TCP connection gets a fresh ConnId.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crawlfleet_net::{BackoffPolicy, CloseReason, ConnId, Event, EventLoop, LinkId, Priority};
use crossbeam_channel::Receiver;

use crate::util::{self, WAIT};

/// Accepts one connection within [`WAIT`].
fn accept(listener: &TcpListener) -> TcpStream {
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(WAIT)).unwrap();
                return s;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => panic!("no connection from the link within {WAIT:?}: {e}"),
        }
    }
}

fn bind(addr: SocketAddr) -> TcpListener {
    TcpListener::bind(addr).unwrap_or_else(|e| panic!("rebinding {addr}: {e}"))
}

/// Waits for the next `Connected` of `link`, checking the attempts before it failed.
fn connected(events: &Receiver<Event>, link: LinkId, max: Duration) -> (ConnId, usize) {
    let mut failures = 0;
    loop {
        match util::next_event(events) {
            Event::Connected { conn, link: l, .. } if l == link => return (conn, failures),
            Event::ConnectFailed {
                link: l, retry_in, ..
            } if l == link => {
                assert!(retry_in <= max, "backoff capped: {retry_in:?}");
                failures += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The link's connection carries frames both ways.
fn exchange(lp: &crawlfleet_net::Spawned, conn: ConnId, server: &mut TcpStream, n: i64) {
    use std::io::Write;
    let out = util::frame(7, n, 100, Priority::Normal);
    lp.handle.send(conn, Priority::Normal, out.clone()).unwrap();
    assert_eq!(util::read_frame(server).unwrap(), out);
    let back = util::frame(8, n, 100, Priority::High);
    server.write_all(&back).unwrap();
    match util::next_event(&lp.events) {
        Event::Frames(b) => {
            assert_eq!(b.conn(), conn);
            assert_eq!(b.data(), &back[..]);
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn link_comes_up_when_the_listener_appears_and_returns_after_it_dies() {
    util::init_logs();
    // A free port with nothing listening on it.
    let addr = TcpListener::bind(util::loopback0())
        .unwrap()
        .local_addr()
        .unwrap();
    let max = Duration::from_millis(80);
    let lp = EventLoop::builder()
        .backoff(BackoffPolicy {
            initial: Duration::from_millis(5),
            max,
        })
        .spawn()
        .unwrap();
    let link = lp.handle.connect(addr).unwrap();

    // Nothing listens: attempts fail, with growing delays.
    let mut delays = Vec::new();
    while delays.len() < 4 {
        match util::next_event(&lp.events) {
            Event::ConnectFailed {
                link: l,
                addr: a,
                error,
                retry_in,
            } => {
                assert_eq!((l, a), (link, addr));
                assert_eq!(error.kind, ErrorKind::ConnectionRefused);
                delays.push(retry_in);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        delays.windows(2).all(|w| w[0] < w[1] || w[1] == max),
        "{delays:?}"
    );

    // The listener appears: the link comes up.
    let listener = bind(addr);
    let mut server = accept(&listener);
    let (first, _) = connected(&lp.events, link, max);
    exchange(&lp, first, &mut server, 1);

    // The listener dies: the connection closes, attempts fail again.
    drop(listener);
    drop(server);
    match util::next_event(&lp.events) {
        Event::Closed {
            conn,
            link: l,
            reason,
            ..
        } => {
            assert_eq!((conn, l), (first, Some(link)));
            assert_eq!(reason, CloseReason::PeerClosed);
        }
        other => panic!("unexpected {other:?}"),
    }
    match util::next_event(&lp.events) {
        Event::ConnectFailed { link: l, .. } => assert_eq!(l, link),
        other => panic!("unexpected {other:?}"),
    }

    // It returns: the link comes back, same LinkId, a fresh ConnId.
    let listener = bind(addr);
    let mut server = accept(&listener);
    let (second, _) = connected(&lp.events, link, max);
    assert_ne!(second, first);
    exchange(&lp, second, &mut server, 2);

    // Disconnect closes it for good: the server sees the end, the loop says LocalClose.
    lp.handle.disconnect(link).unwrap();
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut server, &mut rest).expect("clean end of stream");
    assert!(rest.is_empty());
    drop(server);
    match util::next_event(&lp.events) {
        Event::Closed { conn, reason, .. } => {
            assert_eq!(conn, second);
            assert_eq!(reason, CloseReason::LocalClose);
        }
        other => panic!("unexpected {other:?}"),
    }
    drop(listener);
    util::stop(lp);
}
