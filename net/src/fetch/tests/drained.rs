//! The socket counted drained after a short read (`conn.rs`): a response whose last read
//! filled less than its room is not followed by a `WouldBlock` read, so what the server does
//! after it (a close, stray bytes) must still reach the idle connection through the next
//! readiness event, and a close that came with the response through the event's FIN flag.

use std::io::{BufReader, Read, Write};
use std::sync::mpsc;

use super::*;

/// Polls `cond` until it holds or [`WAIT`] passes; true when it held.
fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let until = std::time::Instant::now() + WAIT;
    while std::time::Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    cond()
}

/// A fetcher whose idle connections never time out within a test: only what the server does
/// can close them.
fn patient_fetcher() -> Fetcher {
    let _ = env_logger::builder().is_test(true).try_init();
    Fetcher::spawn(FetcherOptions {
        idle_timeout: Duration::from_secs(3600),
        ..FetcherOptions::default()
    })
    .unwrap()
}

/// A server that answers one request per connection and then does `after` on the socket once
/// the test says the client has its result.
fn one_answer_then(after: fn(&mut TcpStream)) -> (Server, mpsc::Sender<()>) {
    let (go, wait) = mpsc::channel::<()>();
    let wait = Mutex::new(wait);
    let s = Server::local(move |_, stream| {
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut w = stream;
        if read_head(&mut r).is_none() {
            return;
        }
        w.write_all(&ok_response(b"page")).unwrap();
        let _ = wait.lock().unwrap().recv_timeout(WAIT);
        after(&mut w);
        // Hold the socket until the client closes it.
        let _ = r.read_to_end(&mut Vec::new());
    });
    (s, go)
}

#[test]
fn a_close_after_the_response_reaches_the_idle_connection() {
    let (s, go) = one_answer_then(|w| {
        let _ = w.shutdown(std::net::Shutdown::Write);
    });
    let f = patient_fetcher();
    let url = format!("http://h.test:{}/", s.addr.port());
    assert_eq!(fetch_ok(&f, request(1, &url, s.addr)).body, b"page");
    assert_eq!(f.open_connections(), 1);
    go.send(()).unwrap();
    assert!(
        eventually(|| f.open_connections() == 0),
        "the server's FIN closed the pooled connection"
    );
    let again = fetch_ok(&f, request(2, &url, s.addr));
    assert!(!again.reused_connection);
    assert_eq!(s.accepted(), 2);
}

#[test]
fn stray_bytes_after_the_response_close_the_idle_connection() {
    let (s, go) = one_answer_then(|w| {
        let _ = w.write_all(b"HTTP/1.1 200 OK\r\n");
    });
    let f = patient_fetcher();
    let url = format!("http://h.test:{}/", s.addr.port());
    assert_eq!(fetch_ok(&f, request(1, &url, s.addr)).body, b"page");
    go.send(()).unwrap();
    assert!(
        eventually(|| f.open_connections() == 0),
        "bytes nobody asked for closed the pooled connection"
    );
}

#[test]
fn a_close_sent_with_the_response_is_not_pooled_for_long() {
    // The response and the FIN leave together: whichever event brings them, the connection
    // ends up closed and the next request gets a fresh one.
    for round in 0..20 {
        let s = Server::local(|_, stream| {
            let mut r = BufReader::new(stream.try_clone().unwrap());
            let mut w = stream;
            if read_head(&mut r).is_some() {
                let _ = w.write_all(&ok_response(b"last"));
                let _ = w.shutdown(std::net::Shutdown::Write);
                let _ = r.read_to_end(&mut Vec::new());
            }
        });
        let f = patient_fetcher();
        let url = format!("http://h.test:{}/", s.addr.port());
        assert_eq!(fetch_ok(&f, request(1, &url, s.addr)).body, b"last");
        assert!(
            eventually(|| f.open_connections() == 0),
            "round {round}: a connection the server closed stayed in the pool"
        );
    }
}

#[test]
fn a_response_in_pieces_is_read_to_its_end() {
    // Each piece is a short read; the rest comes with later events.
    let body: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let expected = body.clone();
    let s = Server::local(move |_, stream| {
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut w = stream;
        while read_head(&mut r).is_some() {
            for piece in ok_response(&body).chunks(1500) {
                if w.write_all(piece).is_err() {
                    return;
                }
                w.flush().unwrap();
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    let f = patient_fetcher();
    let url = format!("http://h.test:{}/", s.addr.port());
    for id in 0..3 {
        let resp = fetch_ok(&f, request(id, &url, s.addr));
        assert_eq!(resp.body, expected);
        assert_eq!(resp.reused_connection, id > 0);
    }
    assert_eq!(s.accepted(), 1);
}
