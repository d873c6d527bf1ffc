//! The session sink against a scripted peer on loopback that plays name server, master and
//! session (docs/distributor.md "Feeding sessions"): its first `feed` connection dies without an
//! answer, its second answer holds a permanent and a transient failure. The sink must recreate
//! the session, send everything after its cursor again, settle each document once in its
//! counters, end with the cursor after the log's last durable document, and leave a suspended
//! destination alone.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::feed::session::{Destination, FeedCursor};
use crawlfleet_core::feed::{DocLog, FeedDoc, FeedOp, FeedSink, DOCS_DIR};
use crawlfleet_core::frame;
use crawlfleet_core::marshal::{Limits, Value};
use crawlfleet_core::nameserver::{Aor, Reply};
use parking_lot::Mutex;

use super::*;

/// What the peer saw.
#[derive(Default)]
struct Seen {
    creates: Vec<String>,
    recreates: Vec<i64>,
    feeds: usize,
    /// Every seq fed, in order, resends included.
    seqs: Vec<u64>,
}

fn s(v: &str) -> Value<'static> {
    Value::owned_bytes(v.as_bytes().to_vec())
}

fn aor(port: u16, object: &str) -> Value<'static> {
    Aor {
        name: "esp/subsystems/processing/dispatcher".into(),
        object_id: object.into(),
        host: "127.0.0.1".into(),
        port,
        interface_type: "processing::session".into(),
        interface_version: "5.1".into(),
    }
    .to_value()
}

/// Answers one connection until it closes (or the script drops it).
fn serve(mut conn: TcpStream, port: u16, seen: Arc<Mutex<Seen>>) {
    let limits = Limits {
        max_size: 64 << 20,
        ..Limits::default()
    };
    let mut buf = Vec::new();
    loop {
        let (body, used) = loop {
            if let Ok(Some((body, used))) = frame::split(&buf, &limits) {
                break (body.to_vec(), used);
            }
            let mut chunk = vec![0u8; 1 << 16];
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        buf.drain(..used);
        let f = frame::decode_body(&body, &limits).unwrap();
        let m = Value::Dict(f.message);
        let id = m.get(b"id").and_then(Value::as_i64);
        let method = m
            .get(b"method")
            .and_then(Value::as_bytes)
            .unwrap_or_default();
        let args = m.get(b"args").cloned().unwrap_or(Value::None);
        let result = match method {
            b"resolve" => aor(port, "dispatcher/1/session_factory"),
            b"create" | b"recreate" => {
                let mut sn = seen.lock();
                if method == b"create" {
                    let c = args.get(b"collection").and_then(Value::as_bytes).unwrap();
                    sn.creates.push(String::from_utf8_lossy(c).into_owned());
                } else {
                    sn.recreates
                        .push(args.get(b"id").and_then(Value::as_i64).unwrap());
                }
                aor(port, "dispatcher/1/session/65537")
            }
            b"feed" => {
                let ops = args.get(b"ops").and_then(Value::as_list).unwrap();
                let seqs: Vec<u64> = ops
                    .iter()
                    .map(|o| o.get(b"seq").and_then(Value::as_i64).unwrap() as u64)
                    .collect();
                let mut sn = seen.lock();
                sn.feeds += 1;
                sn.seqs.extend(&seqs);
                if sn.feeds == 1 {
                    // The session's distributor dies with the request unanswered.
                    return;
                }
                let second = sn.feeds == 2;
                let answers = seqs
                    .iter()
                    .enumerate()
                    .map(|(i, seq)| {
                        let mut a = vec![Value::int(*seq as i64)];
                        match (second, i) {
                            (true, 1) => a.extend([s("failed"), s("malformed: no body")]),
                            (true, 2) => a.extend([s("failed"), s("unavailable: busy")]),
                            _ => a.push(s("ok")),
                        }
                        Value::list(a)
                    })
                    .collect();
                Value::list(answers)
            }
            _ => Value::None,
        };
        let mut out = Vec::new();
        Reply {
            id,
            outcome: Ok(result),
        }
        .encode_frame(&mut out);
        if conn.write_all(&out).is_err() {
            return;
        }
    }
}

fn doc(i: usize) -> FeedDoc {
    FeedDoc {
        op: FeedOp::Add,
        uri: format!("http://a/{i}").into_bytes(),
        checksum: [i as u8; 16],
        time: 1_700_000_000,
        status: 200,
        headers: Vec::new(),
        body: vec![b'x'; 100],
    }
}

#[test]
fn a_lost_session_is_recreated_and_every_document_after_the_cursor_sent_again() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let peer_seen = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            let seen = Arc::clone(&peer_seen);
            std::thread::spawn(move || serve(conn, addr.port(), seen));
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let mut log = DocLog::open(&dir.path().join(DOCS_DIR)).unwrap();
    for i in 0..50 {
        log.feed(&doc(i)).unwrap();
    }
    log.sync().unwrap();
    // One more, written to the file (over the log's 1 MiB write chunk) but not synced: never
    // sent.
    let mut big = doc(50);
    big.body = vec![b'y'; 2 << 20];
    log.feed(&big).unwrap();
    let on_disk = std::fs::read_dir(dir.path().join(DOCS_DIR))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum::<u64>();
    assert!(on_disk > 2 << 20, "the last document is in the file");
    let shared = Arc::new(Shared::default());
    let news = Destination {
        name: "news".into(),
        collection: "news".into(),
    };
    shared.views.lock().insert(
        "web".into(),
        CollectionView {
            dir: dir.path().to_path_buf(),
            durable: log.durable_seq(),
            destinations: vec![
                Destination {
                    name: "default".into(),
                    collection: "web".into(),
                },
                news,
            ],
            all_suspended: false,
            // FSCMT 3.1.5.6: feeding to "news" is suspended.
            suspended: [b"news".to_vec()].into_iter().collect(),
        },
    );
    let sink_shared = Arc::clone(&shared);
    let sink = std::thread::spawn(move || Sink::new(addr, sink_shared).run());

    let deadline = Instant::now() + Duration::from_secs(30);
    while FeedCursor::open(dir.path(), "default").unwrap().next() != 51 {
        assert!(
            Instant::now() < deadline,
            "the cursor did not reach the end"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The counters are updated after the cursor, and the suspended destination's 50 stay
    // pending.
    while shared.counters.lock().get("web").map(|c| c.pending) != Some(50) {
        assert!(
            Instant::now() < deadline,
            "pending: {:?}",
            shared.counters.lock().get("web")
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    shared.stop.store(true, Ordering::Release);
    sink.join().unwrap();

    let seen = seen.lock();
    assert_eq!(
        seen.creates,
        vec!["web".to_string()],
        "one session, never for news"
    );
    assert!(
        seen.recreates.iter().all(|id| *id == 65537) && !seen.recreates.is_empty(),
        "the lost session is recreated by its id: {:?}",
        seen.recreates
    );
    // Sent: 1..=50 (lost), 1..=50 again (seq 3 transient), then 3..=50.
    let expect: Vec<u64> = (1..=50).chain(1..=50).chain(3..=50).collect();
    assert_eq!(seen.seqs, expect);
    let c = shared.counters.lock()["web"];
    assert_eq!(
        (c.fed, c.acked, c.failed),
        (50, 49, 1),
        "each document counted once"
    );
    assert_eq!(
        FeedCursor::open(dir.path(), "news").unwrap().next(),
        0,
        "a suspended destination's cursor does not move"
    );
}
