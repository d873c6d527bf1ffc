//! Shared helpers: frame building and parsing, bounded waits, a std-socket peer.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{Limits, Value};
use crawlfleet_net::{ConnId, Event, EventLoop, Handle, Spawned};
use crossbeam_channel::{Receiver, RecvTimeoutError};

/// The longest any single wait in these tests may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(30);

pub fn init_logs() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// A loop listening on one free loopback port, with default settings.
pub fn spawn_listening() -> Spawned {
    init_logs();
    EventLoop::builder()
        .listen(loopback0())
        .spawn()
        .expect("spawn event loop")
}

pub fn loopback0() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A whole FSCMT frame: `{"c": client, "s": seq, "p": pad}` with `pad_len` bytes of padding.
pub fn frame(client: i64, seq: i64, pad_len: usize, priority: Priority) -> Vec<u8> {
    let pad = vec![(seq % 251) as u8; pad_len];
    let dict = vec![
        (Value::bytes(b"c"), Value::int(client)),
        (Value::bytes(b"s"), Value::int(seq)),
        (Value::bytes(b"p"), Value::bytes(&pad)),
    ];
    let mut out = Vec::new();
    frame::encode_dict(&dict, priority, &mut out);
    out
}

/// Parses a frame body made by [`frame`], checking the padding: `(client, seq, priority)`.
pub fn parse(body: &[u8]) -> (i64, i64, Priority) {
    let f = frame::decode_body(body, &Limits::default()).expect("valid frame");
    let get = |k: &[u8]| {
        f.message
            .iter()
            .find(|(key, _)| key.as_bytes() == Some(k))
            .map(|(_, v)| v.clone())
            .expect("key present")
    };
    let client = get(b"c").as_i64().unwrap();
    let seq = get(b"s").as_i64().unwrap();
    let pad = get(b"p");
    let pad = pad.as_bytes().unwrap();
    assert!(
        pad.iter().all(|&b| b == (seq % 251) as u8),
        "padding intact"
    );
    (client, seq, f.priority)
}

/// Reads one whole frame (header included) from a blocking std socket.
pub fn read_frame(s: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut header = [0u8; 4];
    s.read_exact(&mut header)?;
    let len = u32::from_be_bytes(header) as usize;
    let mut out = header.to_vec();
    out.resize(4 + len, 0);
    s.read_exact(&mut out[4..])?;
    Ok(out)
}

/// A blocking std peer with read and write timeouts of [`WAIT`].
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the loop");
    s.set_read_timeout(Some(WAIT)).unwrap();
    s.set_write_timeout(Some(WAIT)).unwrap();
    s
}

/// Receives the next event, failing the test after [`WAIT`].
pub fn next_event(events: &Receiver<Event>) -> Event {
    match events.recv_timeout(WAIT) {
        Ok(ev) => ev,
        Err(RecvTimeoutError::Timeout) => panic!("no event within {WAIT:?}"),
        Err(RecvTimeoutError::Disconnected) => panic!("event channel closed"),
    }
}

/// Runs an echo role on the events until `until` returns true for one of them: every frame goes
/// back to its connection with its priority. Returns that event.
pub fn echo_until(
    handle: &Handle,
    events: &Receiver<Event>,
    mut until: impl FnMut(&Event) -> bool,
) -> Event {
    let deadline = Instant::now() + WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = match events.recv_timeout(left) {
            Ok(ev) => ev,
            Err(e) => panic!("echo role: no matching event within {WAIT:?} ({e})"),
        };
        if let Event::Frames(batch) = &ev {
            echo(handle, batch.conn(), batch);
        }
        if until(&ev) {
            return ev;
        }
    }
}

/// Sends every frame of a batch back, each with its own priority.
pub fn echo(handle: &Handle, conn: ConnId, batch: &crawlfleet_net::FrameBatch) {
    for i in 0..batch.len() {
        let (priority, _) = batch.get(i).unwrap();
        handle
            .send(conn, priority, batch.raw(i).unwrap().to_vec())
            .unwrap();
    }
}

/// Waits for `Accepted` from the connection whose peer address is `peer`.
pub fn accepted_from(handle: &Handle, events: &Receiver<Event>, peer: SocketAddr) -> ConnId {
    match echo_until(
        handle,
        events,
        |ev| matches!(ev, Event::Accepted { peer: p, .. } if *p == peer),
    ) {
        Event::Accepted { conn, .. } => conn,
        _ => unreachable!(),
    }
}

/// Sends `frame` from a peer and checks that it comes back unchanged through an echo role.
pub fn round_trip(handle: &Handle, events: &Receiver<Event>, peer: &mut TcpStream, frame: &[u8]) {
    peer.write_all(frame).unwrap();
    echo_until(
        handle,
        events,
        |ev| matches!(ev, Event::Frames(b) if b.data() == frame),
    );
    let back = read_frame(peer).expect("echo comes back");
    assert_eq!(back, frame);
}

/// Shuts a loop down and checks its thread ends cleanly.
pub fn stop(lp: Spawned) {
    lp.handle.shutdown().unwrap();
    lp.join
        .join()
        .expect("loop thread")
        .expect("loop ended cleanly");
}
