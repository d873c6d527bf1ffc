//! The session sink's parts without sockets: destinations, the cursor on disk, batching and
//! what an answer settles (docs/distributor.md "Feeding sessions").

use std::collections::BTreeSet;

use super::*;
use crate::marshal::Value;

fn doc(uri: &str, body_len: usize) -> FeedDoc {
    FeedDoc {
        op: FeedOp::Add,
        uri: uri.as_bytes().to_vec(),
        checksum: [7; 16],
        time: 1_700_000_000,
        status: 200,
        headers: vec![("content-type".into(), b"text/html".to_vec())],
        body: vec![b'x'; body_len],
    }
}

fn b(s: &str) -> Value<'static> {
    Value::owned_bytes(s.as_bytes().to_vec())
}

fn answer(items: &[(u64, &str, Option<&str>)]) -> Value<'static> {
    Value::list(
        items
            .iter()
            .map(|(seq, word, why)| {
                let mut l = vec![Value::int(*seq as i64), b(word)];
                if let Some(w) = why {
                    l.push(b(w));
                }
                Value::list(l)
            })
            .collect(),
    )
}

#[test]
fn a_collection_feeds_its_own_name_unless_its_configuration_names_destinations() {
    let none = Value::Dict(vec![]);
    assert_eq!(
        destinations("web", &none),
        vec![Destination {
            name: "default".into(),
            collection: "web".into()
        }]
    );
    // MS-FSCCFG 2.2.4.9: a `feeding` section, each member naming its content collection.
    let dict = Value::Dict(vec![(
        b("feeding"),
        Value::Dict(vec![
            (
                b("news"),
                Value::Dict(vec![(b("collection"), b("newsidx"))]),
            ),
            (b("archive"), Value::Dict(vec![])),
        ]),
    )]);
    let d = destinations("web", &dict);
    assert_eq!(
        d,
        vec![
            Destination {
                name: "archive".into(),
                collection: "archive".into()
            },
            Destination {
                name: "news".into(),
                collection: "newsidx".into()
            },
        ]
    );
    // FSCMT 3.1.5.6 / FSCADM 2.2.2.3: suspended for all, by name, or as default:<collection>.
    let mut s = BTreeSet::new();
    assert!(!d[1].is_suspended(false, &s));
    assert!(d[1].is_suspended(true, &s));
    s.insert(b"news".to_vec());
    assert!(d[1].is_suspended(false, &s));
    assert!(!d[0].is_suspended(false, &s));
    let mut s = BTreeSet::new();
    s.insert(b"default:newsidx".to_vec());
    assert!(d[1].is_suspended(false, &s));
}

#[test]
fn the_cursor_keeps_its_session_for_a_restart_and_reads_a_cursor_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = FeedCursor::open(dir.path(), "default").unwrap();
    c.advance(9).unwrap();
    assert_eq!(c.session(), None);
    // A cursor written before sessions were kept: 12 bytes, read as it was.
    let again = FeedCursor::open(dir.path(), "default").unwrap();
    assert_eq!((again.next(), again.session()), (9, None));
    c.set_session(65_537).unwrap();
    c.advance(20).unwrap();
    let again = FeedCursor::open(dir.path(), "default").unwrap();
    assert_eq!((again.next(), again.session()), (20, Some(65_537)));
    // Damage to the session id is refused like damage to the sequence number.
    let file = std::fs::read_dir(dir.path().join(CURSORS_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes.len(), 20);
    bytes[10] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    assert!(matches!(
        FeedCursor::open(dir.path(), "default"),
        Err(FeedError::Corrupt { .. })
    ));
}

#[test]
fn the_cursor_survives_a_reopen_never_goes_back_and_refuses_damage() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = FeedCursor::open(dir.path(), "default").unwrap();
    assert_eq!(c.next(), 0);
    c.advance(42).unwrap();
    c.advance(17).unwrap();
    assert_eq!(c.next(), 42);
    let again = FeedCursor::open(dir.path(), "default").unwrap();
    assert_eq!(again.next(), 42);
    // Each destination has its own.
    assert_eq!(FeedCursor::open(dir.path(), "news").unwrap().next(), 0);
    let file = std::fs::read_dir(dir.path().join(CURSORS_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "cursor"))
        .unwrap();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&file, &bytes).unwrap();
    assert!(matches!(
        FeedCursor::open(dir.path(), "default"),
        Err(FeedError::Corrupt { .. })
    ));
}

#[test]
fn operations_have_the_wire_shape() {
    let v = op_value(5, &doc("http://a/", 3));
    assert_eq!(v.get(b"seq").and_then(Value::as_i64), Some(5));
    assert_eq!(v.get(b"op").and_then(Value::as_bytes), Some(&b"add"[..]));
    assert_eq!(
        v.get(b"doc").and_then(Value::as_bytes),
        Some(&b"http://a/"[..])
    );
    assert_eq!(v.get(b"time").and_then(Value::as_i64), Some(1_700_000_000));
    assert_eq!(
        v.get(b"checksum").and_then(Value::as_bytes),
        Some(&[7u8; 16][..])
    );
    assert_eq!(v.get(b"status").and_then(Value::as_i64), Some(200));
    assert_eq!(v.get(b"body").and_then(Value::as_bytes), Some(&b"xxx"[..]));
    let h = v.get(b"headers").and_then(Value::as_list).unwrap();
    assert_eq!(
        h[0].as_list().unwrap()[1].as_bytes(),
        Some(&b"text/html"[..])
    );
    let mut del = doc("http://a/", 0);
    del.op = FeedOp::Delete;
    del.headers.clear();
    let v = op_value(6, &del);
    assert_eq!(v.get(b"op").and_then(Value::as_bytes), Some(&b"remove"[..]));
    assert!(v.get(b"body").is_none() && v.get(b"checksum").is_none());
}

#[test]
fn a_batch_stops_at_its_operation_and_byte_limits() {
    let mut batch = OpBatch::new();
    let small = doc("http://a/", 10);
    let mut seq = 1;
    while batch.fits(&small) {
        batch.push(seq, &small);
        seq += 1;
    }
    assert_eq!(batch.len(), MAX_BATCH_OPS);
    assert!(batch.is_full());
    let big = doc("http://big/", MAX_BATCH_BYTES / 3);
    let mut batch = OpBatch::new();
    let mut n = 0;
    while batch.fits(&big) {
        batch.push(n + 1, &big);
        n += 1;
    }
    assert_eq!(n, 2, "three thirds and their headers are over the limit");
    // One document over the limit still goes, alone.
    let huge = doc("http://huge/", MAX_BATCH_BYTES * 2);
    let mut batch = OpBatch::new();
    assert!(batch.fits(&huge));
    batch.push(1, &huge);
    assert!(!batch.fits(&small));
    let args = batch.to_args();
    assert_eq!(
        args.get(b"ops").and_then(Value::as_list).map(<[_]>::len),
        Some(1)
    );
}

#[test]
fn an_answer_settles_everything_before_the_first_transient_failure() {
    let mut batch = OpBatch::new();
    for seq in [3, 4, 6, 7] {
        batch.push(seq, &doc("http://a/", 1));
    }
    let res = answer(&[
        (3, "ok", None),
        (4, "failed", Some("malformed: no body")),
        (6, "failed", Some("disk_full: no room")),
        (7, "ok", None),
    ]);
    let outcomes = parse_result(&res, &batch.seqs()).unwrap();
    assert_eq!(outcomes[1], OpOutcome::Failed("malformed: no body".into()));
    let s = batch.settle(&outcomes, 8);
    assert_eq!(s.acked, 1);
    assert_eq!(s.failed, 1);
    assert_eq!(s.first_failure, Some((4, "malformed: no body".into())));
    assert_eq!(s.next, 6, "the cursor stops at the transient failure");
    assert_eq!(s.retry.as_deref(), Some("disk_full: no room"));
    assert_eq!(batch.seqs(), vec![6, 7], "sent again: from the failure on");
    // The resend is acknowledged: everything is settled.
    let res = answer(&[(6, "ok", None), (7, "ok", None)]);
    let s = batch.settle(&parse_result(&res, &batch.seqs()).unwrap(), 8);
    assert_eq!((s.next, s.acked, s.failed, s.retry), (8, 2, 0, None));
    assert!(batch.is_empty());
}

#[test]
fn an_answer_that_does_not_match_the_request_is_refused() {
    let seqs = [1, 2];
    for bad in [
        answer(&[(1, "ok", None)]),
        answer(&[(1, "ok", None), (3, "ok", None)]),
        answer(&[(1, "ok", None), (2, "maybe", None)]),
        Value::int(1),
    ] {
        assert!(parse_result(&bad, &seqs).is_err(), "{bad:?}");
    }
    let unknown = answer(&[
        (1, "failed", Some("unknown_collection: web")),
        (2, "ok", None),
    ]);
    assert!(matches!(
        parse_result(&unknown, &seqs).unwrap()[0],
        OpOutcome::Failed(_)
    ));
    let unavailable = answer(&[(1, "failed", Some("unavailable: busy")), (2, "ok", None)]);
    assert!(matches!(
        parse_result(&unavailable, &seqs).unwrap()[0],
        OpOutcome::Transient(_)
    ));
}

#[test]
fn only_synced_documents_count_as_durable() {
    use crate::feed::{DocLog, FeedSink};
    let dir = tempfile::tempdir().unwrap();
    let mut log = DocLog::open(dir.path()).unwrap();
    assert_eq!(log.durable_seq(), 1);
    log.feed(&doc("http://a/", 1)).unwrap();
    log.feed(&doc("http://b/", 1)).unwrap();
    assert_eq!(log.durable_seq(), 1, "not synced yet");
    log.sync().unwrap();
    assert_eq!(log.durable_seq(), 3);
    drop(log);
    assert_eq!(DocLog::open(dir.path()).unwrap().durable_seq(), 3);
}

#[test]
fn a_following_reader_reads_what_the_writer_adds_across_segments() {
    use crate::feed::{DocLog, DocLogOptions, DocLogReader, FeedSink};
    let dir = tempfile::tempdir().unwrap();
    let opts = DocLogOptions { segment_bytes: 600 };
    let mut log = DocLog::open_with(dir.path(), opts).unwrap();
    let mut r = DocLogReader::open_from(dir.path(), 0).unwrap();
    assert!(r.next().is_none());
    let mut read = Vec::new();
    for round in 0..5 {
        for i in 0..3 {
            log.feed(&doc(&format!("http://a/{round}/{i}"), 150))
                .unwrap();
        }
        log.sync().unwrap();
        r.follow().unwrap();
        for item in r.by_ref() {
            read.push(item.unwrap().0);
        }
    }
    let segments = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(segments > 3, "the log rolled over ({segments} segments)");
    assert_eq!(read, (1..=15).collect::<Vec<u64>>());
}
