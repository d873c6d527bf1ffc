//! The content index: idempotent apply, rebuild on open with a torn tail cut at every byte,
//! the lock-free reader, merging, compaction and the apply hook.

use std::sync::{Arc, Mutex};

use super::reader::{merge, read_dir, scan};
use super::*;

fn add(seq: u64, doc: &str, time: i64, body: &[u8]) -> Op {
    Op {
        seq,
        kind: OpKind::Add,
        doc: doc.to_owned(),
        time,
        checksum: [seq as u8; 16],
        status: 200,
        headers: vec![("content-type".into(), b"text/html".to_vec())],
        body: body.to_vec(),
    }
}

fn remove(seq: u64, doc: &str, time: i64) -> Op {
    Op {
        seq,
        kind: OpKind::Remove,
        doc: doc.to_owned(),
        time,
        checksum: [0; 16],
        status: 0,
        headers: Vec::new(),
        body: Vec::new(),
    }
}

#[test]
fn records_round_trip() {
    for op in [
        add(7, "http://a/", 100, b"<p>x</p>"),
        remove(9, "http://b/", 5),
    ] {
        let mut out = Vec::new();
        op.encode(&mut out);
        assert_eq!(out.len(), op.encoded_len());
        assert_eq!(Op::decode(&out), Some(op.clone()));
        for cut in 0..out.len() {
            assert_eq!(Op::decode(&out[..cut]), None, "cut at {cut}");
        }
    }
}

#[test]
fn an_op_applies_once_and_an_older_version_never_overwrites_a_newer() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ix, _) = Index::open(dir.path(), "web").unwrap();
    assert_eq!(
        ix.apply(&add(1, "u", 10, b"one")).unwrap(),
        Applied::Written
    );
    assert_eq!(ix.apply(&add(1, "u", 10, b"one")).unwrap(), Applied::Kept);
    assert_eq!(
        ix.apply(&add(3, "u", 20, b"three")).unwrap(),
        Applied::Written
    );
    // An older copy (earlier time, or same time and lower seq) is kept out.
    assert_eq!(ix.apply(&add(2, "u", 15, b"two")).unwrap(), Applied::Kept);
    assert_eq!(ix.apply(&add(2, "u", 20, b"two")).unwrap(), Applied::Kept);
    ix.commit().unwrap();
    assert_eq!(ix.read("u").unwrap().unwrap().body, b"three");
    assert_eq!(ix.live(), 1);
    // A remove hides it, and an older add sent late does not bring it back.
    assert_eq!(ix.apply(&remove(4, "u", 21)).unwrap(), Applied::Written);
    assert_eq!(ix.apply(&add(3, "u", 20, b"three")).unwrap(), Applied::Kept);
    assert_eq!(ix.live(), 0);
    ix.commit().unwrap();
    drop(ix);
    // After a reopen the same: a resend applies nothing.
    let (mut ix, rec) = Index::open(dir.path(), "web").unwrap();
    assert_eq!(rec.records, 3);
    assert_eq!(ix.live(), 0);
    assert_eq!(ix.apply(&remove(4, "u", 21)).unwrap(), Applied::Kept);
    assert_eq!(ix.apply(&add(3, "u", 20, b"three")).unwrap(), Applied::Kept);
    assert_eq!(
        ix.apply(&add(5, "u", 22, b"five")).unwrap(),
        Applied::Written
    );
    assert_eq!(ix.live(), 1);
}

/// A crash at every byte of the last record: the log reopens with the earlier records, the
/// last op is gone (it was never acknowledged), and resending it applies it once.
#[test]
fn a_torn_last_record_is_cut_at_every_byte_and_its_resend_applies_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = log_path(dir.path(), "web");
    let (mut ix, _) = Index::open(dir.path(), "web").unwrap();
    ix.apply(&add(1, "a", 10, b"alpha")).unwrap();
    ix.apply(&add(2, "b", 10, b"beta")).unwrap();
    ix.commit().unwrap();
    let before = ix.log_len();
    let last = add(3, "a", 11, b"alpha, again");
    ix.apply(&last).unwrap();
    ix.commit().unwrap();
    let full = std::fs::read(&path).unwrap();
    drop(ix);
    assert!(full.len() as u64 > before);
    for cut in before..full.len() as u64 {
        std::fs::write(&path, &full[..cut as usize]).unwrap();
        // The reader sees the consistent prefix without opening for writing.
        let (docs, rec) = read_dir(dir.path(), "web", None, 0).unwrap();
        assert_eq!(rec.intact_len, before, "cut at {cut}");
        assert_eq!(docs["a"].version, (10, 1), "cut at {cut}");
        let (mut ix, rec) = Index::open(dir.path(), "web").unwrap();
        assert_eq!(rec.records, 2, "cut at {cut}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
        assert_eq!(ix.apply(&last).unwrap(), Applied::Written, "cut at {cut}");
        assert_eq!(ix.apply(&last).unwrap(), Applied::Kept);
        ix.commit().unwrap();
        drop(ix);
        assert_eq!(std::fs::read(&path).unwrap(), full, "cut at {cut}");
    }
}

#[test]
fn the_reader_merges_directories_latest_version_wins() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let (mut a, _) = Index::open(d1.path(), "web").unwrap();
    let (mut b, _) = Index::open(d2.path(), "web").unwrap();
    a.apply(&add(1, "x", 10, b"x1")).unwrap();
    a.apply(&add(2, "y", 10, b"y1")).unwrap();
    b.apply(&add(5, "x", 12, b"x2, newer")).unwrap();
    b.apply(&remove(6, "y", 11)).unwrap();
    b.apply(&add(7, "z", 1, b"z")).unwrap();
    a.commit().unwrap();
    b.commit().unwrap();
    let (s1, _) = read_dir(d1.path(), "web", Some("x"), 0).unwrap();
    let (s2, _) = read_dir(d2.path(), "web", Some("x"), 1).unwrap();
    assert_eq!(s1["x"].headers.len(), 1);
    assert!(s1["y"].headers.is_empty());
    let m = merge(vec![s1, s2]);
    let live: Vec<(&str, usize, u64)> = m
        .values()
        .filter(|d| d.live())
        .map(|d| (d.doc.as_str(), d.source, d.size))
        .collect();
    assert_eq!(live, [("x", 1, 9), ("z", 1, 1)]);
    assert!(!m["y"].live(), "a newer remove hides the add");
    // A missing collection reads as empty.
    assert!(read_dir(d1.path(), "news", None, 0).unwrap().0.is_empty());
}

#[test]
fn compaction_keeps_the_latest_record_of_every_document_and_the_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ix, _) = Index::open(dir.path(), "web").unwrap();
    ix.set_compact_min(4096);
    let body = vec![b'x'; 200];
    let mut seq = 0;
    for round in 0..20 {
        for d in 0..10 {
            seq += 1;
            ix.apply(&add(seq, &format!("doc{d}"), round, &body))
                .unwrap();
        }
    }
    seq += 1;
    ix.apply(&remove(seq, "doc3", 100)).unwrap();
    assert!(ix.wants_compaction());
    ix.commit().unwrap();
    let before = ix.log_len();
    assert!(ix.maybe_compact().unwrap());
    assert!(ix.log_len() * 10 < before, "{} of {before}", ix.log_len());
    assert!(!ix.wants_compaction());
    assert_eq!(ix.live(), 9);
    assert_eq!(ix.read("doc5").unwrap().unwrap().time, 19);
    // The tombstone stays: an older add does not bring doc3 back, after a reopen too.
    assert_eq!(ix.apply(&add(1, "doc3", 19, &body)).unwrap(), Applied::Kept);
    seq += 1;
    ix.apply(&add(seq, "doc0", 50, b"new")).unwrap();
    ix.commit().unwrap();
    drop(ix);
    let (ix, rec) = Index::open(dir.path(), "web").unwrap();
    assert_eq!(rec.records, 11);
    assert_eq!(ix.live(), 9);
    assert_eq!(ix.get("doc3").map(|e| e.live), Some(false));
    assert_eq!(ix.read("doc0").unwrap().unwrap().body, b"new");
}

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<Vec<(String, OpKind, u64)>>>);

impl ApplyHook for Seen {
    fn applied(&mut self, op: &Op, end: u64) {
        self.0.lock().unwrap().push((op.doc.clone(), op.kind, end));
    }
}

#[test]
fn the_hook_hears_every_applied_op_with_its_log_position() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ix, _) = Index::open(dir.path(), "web").unwrap();
    let seen = Seen::default();
    ix.set_hook(Box::new(seen.clone()));
    ix.apply(&add(1, "a", 1, b"a")).unwrap();
    ix.apply(&add(1, "a", 1, b"a")).unwrap();
    ix.apply(&remove(2, "a", 2)).unwrap();
    ix.commit().unwrap();
    let got = seen.0.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "a kept op is not applied: {got:?}");
    assert_eq!(got[1].2, ix.log_len());
    // scan from the first op's end replays the rest, with the same positions.
    let mut again = Vec::new();
    scan(ix.path(), got[0].2, |op, end| {
        again.push((op.doc.clone(), op.kind, end));
        true
    })
    .unwrap();
    assert_eq!(again, got[1..]);
}

#[test]
fn collection_names_map_to_safe_file_names() {
    let p = log_path(Path::new("/d"), "web");
    assert_eq!(p, Path::new("/d/index/web.log"));
    let p = log_path(Path::new("/d"), "../a/b c");
    assert_eq!(p, Path::new("/d/index/%2E.%2Fa%2Fb%20c.log"));
}
