use std::fs;
use std::path::Path;

use super::*;
use tempfile::TempDir;

fn tmp(name: &str) -> TempDir {
    TempDir::with_prefix(format!("crawlfleet-feed-{name}-")).unwrap()
}

fn doc(i: u64) -> FeedDoc {
    let op = match i % 3 {
        0 => FeedOp::Add,
        1 => FeedOp::Update,
        _ => FeedOp::Delete,
    };
    let content = op != FeedOp::Delete;
    FeedDoc {
        op,
        uri: format!("http://site{}.example/page/{i}", i % 5).into_bytes(),
        checksum: [i as u8; 16],
        time: 1_700_000_000 + i,
        status: if content { 200 } else { 404 },
        headers: if content {
            vec![
                ("Content-Type".into(), b"text/html; charset=utf-8".to_vec()),
                ("ETag".into(), format!("\"{i}\"").into_bytes()),
            ]
        } else {
            Vec::new()
        },
        body: if content {
            format!(
                "<html><body>document {i} {}</body></html>",
                "x".repeat(i as usize % 300)
            )
            .into_bytes()
        } else {
            Vec::new()
        },
    }
}

fn read_all(dir: &Path, from: u64) -> Vec<(u64, FeedDoc)> {
    DocLogReader::open_from(dir, from)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn small() -> DocLogOptions {
    DocLogOptions {
        segment_bytes: 4096,
    }
}

#[test]
fn every_op_round_trips_across_reopen_and_numbering_goes_on() {
    let dir = tmp("ops");
    let mut log = DocLog::open(dir.path()).unwrap();
    assert!(log.is_empty());
    for i in 0..30 {
        assert_eq!(log.feed(&doc(i)).unwrap(), i + 1);
    }
    log.sync().unwrap();
    drop(log);
    let mut log = DocLog::open(dir.path()).unwrap();
    assert_eq!(log.next_seq(), 31);
    assert_eq!(log.feed(&doc(30)).unwrap(), 31);
    drop(log);
    let all = read_all(dir.path(), 0);
    let want: Vec<_> = (0..31).map(|i| (i + 1, doc(i))).collect();
    assert_eq!(all, want);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_documents_are_refused_without_changing_the_log() {
    let dir = tmp("refuse");
    let mut log = DocLog::open(dir.path()).unwrap();
    let mut d = doc(2);
    d.body = b"x".to_vec();
    assert!(matches!(log.feed(&d), Err(FeedError::DeleteWithContent)));
    let mut d = doc(0);
    d.uri = vec![b'a'; MAX_URI + 1];
    let e = log.feed(&d).unwrap_err();
    assert!(
        matches!(e, FeedError::TooLarge { field: "uri", len, limit } if len == MAX_URI + 1 && limit == MAX_URI),
        "{e}"
    );
    assert_eq!(log.feed(&doc(0)).unwrap(), 1);
    drop(log);
    assert_eq!(read_all(dir.path(), 0), vec![(1, doc(0))]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn segments_roll_over_and_a_reader_starts_at_any_seq() {
    let dir = tmp("segments");
    let mut log = DocLog::open_with(dir.path(), small()).unwrap();
    for i in 0..200 {
        log.feed(&doc(i)).unwrap();
    }
    drop(log);
    let segs = fs::read_dir(&dir).unwrap().count();
    assert!(segs > 5, "only {segs} segments");
    assert!(dir.path().join("00000001.log").exists() && dir.path().join("00000002.log").exists());
    for f in fs::read_dir(&dir).unwrap() {
        let len = f.unwrap().metadata().unwrap().len();
        assert!(len <= 4096, "segment of {len} bytes");
    }
    for from in [0, 1, 2, 57, 150, 200] {
        let got = read_all(dir.path(), from);
        let want: Vec<_> = (from.max(1)..=200).map(|s| (s, doc(s - 1))).collect();
        assert_eq!(got, want, "from {from}");
    }
    assert!(read_all(dir.path(), 201).is_empty());
    // Numbering goes on in the newest segment after a reopen.
    let mut log = DocLog::open_with(dir.path(), small()).unwrap();
    assert_eq!(log.feed(&doc(200)).unwrap(), 201);
    drop(log);
    assert_eq!(read_all(dir.path(), 201), vec![(201, doc(200))]);
    // A missing segment in the middle is a gap, not silently skipped.
    fs::remove_file(dir.path().join("00000003.log")).unwrap();
    let r: Result<Vec<_>, _> = DocLogReader::open(dir.path()).unwrap().collect();
    assert!(
        matches!(r, Err(FeedError::Corrupt { ref path, .. }) if path.ends_with("00000004.log")),
        "{r:?}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_tail_is_cut_and_damage_in_an_older_segment_is_an_error() {
    let dir = tmp("torn");
    let mut log = DocLog::open_with(dir.path(), small()).unwrap();
    for i in 0..40 {
        log.feed(&doc(i)).unwrap();
    }
    drop(log);
    let mut segs: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    segs.sort();
    let newest = segs.last().unwrap().clone();
    let full = fs::read(&newest).unwrap();
    fs::write(&newest, &full[..full.len() - 5]).unwrap();
    // A reader stops before the torn record; opening the log cuts it and numbers from there.
    assert_eq!(read_all(dir.path(), 0).len(), 39);
    let mut log = DocLog::open_with(dir.path(), small()).unwrap();
    assert_eq!(log.next_seq(), 40);
    assert_eq!(log.feed(&doc(99)).unwrap(), 40);
    drop(log);
    let all = read_all(dir.path(), 0);
    assert_eq!(all.len(), 40);
    assert_eq!(all[39], (40, doc(99)));
    // A newest segment torn at its creation (header incomplete) is dropped.
    let next = dir.path().join(format!("{:08}.log", segs.len() + 1));
    fs::write(&next, b"CFDOCS").unwrap();
    let log = DocLog::open_with(dir.path(), small()).unwrap();
    assert_eq!(log.next_seq(), 41);
    drop(log);
    assert!(!next.exists());
    // A flipped byte in the first segment is not a torn tail.
    let mut first = fs::read(&segs[0]).unwrap();
    first[40] ^= 1;
    fs::write(&segs[0], &first).unwrap();
    let r: Result<Vec<_>, _> = DocLogReader::open(dir.path()).unwrap().collect();
    assert!(
        matches!(r, Err(FeedError::Corrupt { offset: 16, .. })),
        "{r:?}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_is_not_a_segment_is_refused() {
    let dir = tmp("magic");
    fs::write(dir.path().join("00000001.log"), b"something else entirely").unwrap();
    let e = DocLog::open(dir.path()).err().expect("refused");
    assert!(matches!(e, FeedError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("bad magic"), "{e}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn synced_documents_survive_a_kill() {
    let dir = tmp("kill");
    let mut log = DocLog::open(dir.path()).unwrap();
    for i in 0..10 {
        log.feed(&doc(i)).unwrap();
    }
    log.sync().unwrap();
    log.feed(&doc(10)).unwrap();
    std::mem::forget(log); // killed: the unsynced document never reached the file
    let log = DocLog::open(dir.path()).unwrap();
    assert_eq!(log.next_seq(), 11);
    drop(log);
    assert_eq!(read_all(dir.path(), 0).len(), 10);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn suspended_feeding_holds_documents_across_reopen_and_resume_feeds_them_in_order() {
    let dir = tmp("suspend");
    let mut f = Feeder::open_with(dir.path(), small()).unwrap();
    assert!(!f.is_suspended());
    for i in 0..5 {
        assert_eq!(f.feed(&doc(i)).unwrap(), i + 1);
    }
    f.suspend().unwrap();
    f.suspend().unwrap();
    assert!(f.is_suspended());
    for i in 5..50 {
        f.feed(&doc(i)).unwrap();
    }
    f.sync().unwrap();
    assert_eq!(
        f.log().next_seq(),
        6,
        "nothing reaches the log while suspended"
    );
    drop(f);
    let mut f = Feeder::open_with(dir.path(), small()).unwrap();
    assert!(f.is_suspended(), "suspension persists");
    assert_eq!(f.held_len(), 45);
    f.feed(&doc(50)).unwrap();
    assert_eq!(f.resume().unwrap(), 46);
    assert!(!f.is_suspended());
    assert!(!dir.path().join(HELD_DIR).exists());
    assert_eq!(f.feed(&doc(51)).unwrap(), 52);
    assert_eq!(f.resume().unwrap(), 0);
    drop(f);
    let want: Vec<_> = (0..52).map(|i| (i + 1, doc(i))).collect();
    assert_eq!(read_all(&dir.path().join(DOCS_DIR), 0), want);
    let f = Feeder::open_with(dir.path(), small()).unwrap();
    assert!(!f.is_suspended());
    drop(f);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_crash_in_the_middle_of_resume_neither_loses_nor_duplicates() {
    // Crash points: after a step whose moves were synced, and after moves never written.
    for (steps, kill_unsynced) in [(1, false), (2, true), (3, false)] {
        let dir = tmp(&format!("resume-crash-{steps}-{kill_unsynced}"));
        let mut f = Feeder::open_with(dir.path(), small()).unwrap();
        f.feed(&doc(0)).unwrap();
        f.suspend().unwrap();
        for i in 1..100 {
            f.feed(&doc(i)).unwrap();
        }
        for _ in 0..steps {
            let r = f.resume_step(17).unwrap();
            assert_eq!(
                r,
                Resume {
                    moved: 17,
                    done: false
                }
            );
            assert!(f.is_resuming());
        }
        std::mem::forget(f); // killed
        if kill_unsynced {
            // The next move was being written when the process died: a torn record.
            let docs = dir.path().join(DOCS_DIR);
            let mut segs: Vec<_> = fs::read_dir(&docs)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            segs.sort();
            let newest = segs.last().unwrap();
            let mut bytes = fs::read(newest).unwrap();
            bytes.extend_from_slice(&[0x60, 0, 0, 0, 1, 2, 3, 4, 5, 0, 0, 0]);
            fs::write(newest, bytes).unwrap();
        }
        let f = Feeder::open_with(dir.path(), small()).unwrap();
        assert!(!f.is_suspended(), "the interrupted resume was finished");
        drop(f);
        let want: Vec<_> = (0..100).map(|i| (i + 1, doc(i))).collect();
        assert_eq!(
            read_all(&dir.path().join(DOCS_DIR), 0),
            want,
            "{steps} steps"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_crash_after_the_held_log_was_renamed_leaves_feeding_resumed() {
    let dir = tmp("resume-done");
    let mut f = Feeder::open(dir.path()).unwrap();
    f.suspend().unwrap();
    f.feed(&doc(0)).unwrap();
    assert_eq!(f.resume().unwrap(), 1);
    drop(f);
    // As if the process died between the rename and the removal.
    fs::create_dir_all(dir.path().join("docs-held.done")).unwrap();
    fs::write(dir.path().join("docs-held.done/00000001.log"), b"CFDOCS01").unwrap();
    let f = Feeder::open(dir.path()).unwrap();
    assert!(!f.is_suspended());
    assert!(!dir.path().join("docs-held.done").exists());
    drop(f);
    assert_eq!(read_all(&dir.path().join(DOCS_DIR), 0), vec![(1, doc(0))]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_encoded_length_is_the_length_encode_writes() {
    // DocLog::feed decides a segment's roll-over from encoded_len before it encodes the
    // document straight into the log's queue.
    for i in 0..40 {
        let d = doc(i);
        let mut out = vec![7u8; 3];
        d.encode(i, &mut out);
        assert_eq!(out.len() - 3, d.encoded_len(), "document {i}");
    }
}
