use super::*;
use tempfile::TempDir;

fn tmp(name: &str) -> TempDir {
    TempDir::with_prefix(format!("crawlfleet-store-{name}-")).unwrap()
}

fn rec(i: u32) -> UriRecord {
    let mut cs = [0u8; 16];
    cs[..4].copy_from_slice(&i.to_le_bytes());
    UriRecord {
        etag: i
            .is_multiple_of(2)
            .then(|| format!("\"etag-{i}\"").into_bytes()),
        last_modified: i
            .is_multiple_of(3)
            .then(|| b"Tue, 15 Nov 1994 12:45:26 GMT".to_vec()),
        ..UriRecord::stored(cs, 1_700_000_000 + u64::from(i), 200, 1, 1000 + i)
    }
}

fn uri(i: u32) -> Vec<u8> {
    format!("http://host{}.example.com/dir/page-{i}.html", i % 7).into_bytes()
}

#[test]
fn records_round_trip_across_reopen_and_remove_is_durable() {
    let dir = tmp("roundtrip");
    let mut s = CrawlStore::open(dir.path()).unwrap();
    for i in 0..100 {
        assert_eq!(s.put(&uri(i), rec(i)).unwrap(), None);
    }
    let updated = UriRecord {
        state: UriState::Duplicate {
            owner: Some(b"http://owner/".to_vec()),
        },
        ..rec(5)
    };
    assert_eq!(s.put(&uri(5), updated.clone()).unwrap(), Some(rec(5)));
    assert_eq!(s.remove(&uri(6)).unwrap(), Some(rec(6)));
    assert_eq!(s.remove(&uri(6)).unwrap(), None);
    assert_eq!(s.len(), 99);
    s.sync().unwrap();
    drop(s);
    let s = CrawlStore::open(dir.path()).unwrap();
    assert_eq!(s.len(), 99);
    assert_eq!(s.recovery().records, 102);
    assert_eq!(s.recovery().truncated, 0);
    assert_eq!(s.get(&uri(5)), Some(&updated));
    assert_eq!(s.get(&uri(6)), None);
    for i in (0..100).filter(|i| *i != 5 && *i != 6) {
        assert_eq!(s.get(&uri(i)), Some(&rec(i)), "uri {i}");
    }
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_tail_is_cut_and_appending_goes_on_after_it() {
    let dir = tmp("torn");
    let mut s = CrawlStore::open(dir.path()).unwrap();
    for i in 0..10 {
        s.put(&uri(i), rec(i)).unwrap();
    }
    s.sync().unwrap();
    let path = s.path().to_path_buf();
    drop(s);
    let full = fs::read(&path).unwrap();
    // Every cut inside the last record loses that record only.
    let mut last_start = None;
    for cut in (MAGIC.len()..full.len()).rev() {
        fs::write(&path, &full[..cut]).unwrap();
        let s = CrawlStore::open(dir.path()).unwrap();
        if s.len() == 10 {
            panic!("a cut at {cut} of {} kept every record", full.len());
        }
        if s.len() < 9 {
            last_start = Some(cut + 1);
            break;
        }
        assert_eq!(s.get(&uri(8)), Some(&rec(8)));
        assert_eq!(s.get(&uri(9)), None);
        assert_eq!(fs::metadata(&path).unwrap().len(), s.log_bytes());
    }
    assert!(last_start.is_some());
    // A flipped byte in the last record: same; then the store appends after the cut.
    let mut bad = full.clone();
    let n = bad.len();
    bad[n - 3] ^= 0x40;
    fs::write(&path, &bad).unwrap();
    let mut s = CrawlStore::open(dir.path()).unwrap();
    assert_eq!(s.len(), 9);
    assert!(s.recovery().truncated > 0);
    s.put(b"http://after/", rec(77)).unwrap();
    s.sync().unwrap();
    drop(s);
    let s = CrawlStore::open(dir.path()).unwrap();
    assert_eq!(s.len(), 10);
    assert_eq!(s.get(b"http://after/"), Some(&rec(77)));
    assert_eq!(s.recovery().truncated, 0);
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_is_not_a_store_is_refused_and_a_torn_header_is_a_new_store() {
    let dir = tmp("magic");
    fs::write(dir.path().join(LOG_FILE), b"GARBAGE!and more").unwrap();
    let err = CrawlStore::open(dir.path()).err().expect("refused");
    assert!(err.error.contains("not a crawl store"), "{err}");
    fs::write(dir.path().join(LOG_FILE), b"short").unwrap();
    let err = CrawlStore::open(dir.path()).err().expect("refused");
    assert!(err.error.contains("not a crawl store"), "{err}");
    assert_eq!(
        fs::read(dir.path().join(LOG_FILE)).unwrap(),
        b"short",
        "left alone"
    );
    fs::write(dir.path().join(LOG_FILE), b"CFST").unwrap();
    let s = CrawlStore::open(dir.path()).unwrap();
    assert!(s.is_empty());
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn oversized_fields_are_refused_without_changing_the_store() {
    let dir = tmp("limits");
    let mut s = CrawlStore::open(dir.path()).unwrap();
    let long = vec![b'a'; MAX_FIELD + 1];
    let err = s.put(&long, rec(1)).expect_err("refused");
    assert!(err.error.contains("URI of 65537 bytes"), "{err}");
    let r = UriRecord {
        etag: Some(long.clone()),
        ..rec(1)
    };
    let err = s.put(b"http://a/", r).expect_err("refused");
    assert!(err.error.contains("etag"), "{err}");
    assert!(s.is_empty());
    assert_eq!(s.log_bytes(), MAGIC.len() as u64);
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compaction_keeps_the_live_records_across_reopen() {
    let dir = tmp("compact");
    let opts = StoreOptions {
        compact_min_bytes: 64 << 10,
        compact_ratio: 2,
    };
    let mut s = CrawlStore::open_with(dir.path(), opts).unwrap();
    for round in 0..20u32 {
        for i in 0..200 {
            s.put(
                &uri(i),
                UriRecord {
                    cycle: round,
                    ..rec(i)
                },
            )
            .unwrap();
        }
        s.remove(&uri(round)).unwrap();
        s.sync().unwrap();
        assert!(
            s.log_bytes() <= (64 << 10).max(2 * (8 + s.table.live_bytes)),
            "round {round}: {} bytes for {} live",
            s.log_bytes(),
            s.table.live_bytes
        );
    }
    // The file holds exactly the live records after an explicit compaction.
    let live = s.table.live_bytes;
    s.compact().unwrap();
    assert_eq!(fs::metadata(s.path()).unwrap().len(), 8 + live);
    s.put(&uri(0), rec(0)).unwrap();
    s.sync().unwrap();
    drop(s);
    let s = CrawlStore::open_with(dir.path(), opts).unwrap();
    assert_eq!(s.len(), 199); // every round puts all 200 again; the last removed uri(19)
    assert_eq!(s.get(&uri(0)), Some(&rec(0)));
    assert_eq!(s.get(&uri(19)), None);
    assert_eq!(
        s.get(&uri(20)),
        Some(&UriRecord {
            cycle: 19,
            ..rec(20)
        })
    );
    assert!(!dir.path().join("crawl.tmp").exists());
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_interrupted_compaction_leaves_the_old_log() {
    let dir = tmp("compact-crash");
    let mut s = CrawlStore::open(dir.path()).unwrap();
    s.put(&uri(1), rec(1)).unwrap();
    s.sync().unwrap();
    drop(s);
    // A compaction that stopped before its rename left a partial temporary file.
    fs::write(dir.path().join("crawl.tmp"), b"CFSTORE1\x10\0").unwrap();
    let s = CrawlStore::open(dir.path()).unwrap();
    assert_eq!(s.get(&uri(1)), Some(&rec(1)));
    assert!(!dir.path().join("crawl.tmp").exists());
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_query_answers_from_the_records() {
    let dir = tmp("queries");
    let mut s = CrawlStore::open(dir.path()).unwrap();
    let cs_a = [0xaa; 16];
    let put = |s: &mut CrawlStore, u: &str, cs: [u8; 16], cycle: u32, state: UriState| {
        let r = UriRecord {
            state,
            ..UriRecord::stored(cs, 1, 200, cycle, 10)
        };
        s.put(u.as_bytes(), r).unwrap();
    };
    put(&mut s, "http://Example.com/a", cs_a, 2, UriState::Stored);
    put(
        &mut s,
        "http://example.com:80/b",
        [1; 16],
        1,
        UriState::Stored,
    );
    put(
        &mut s,
        "http://example.com:8080/c",
        cs_a,
        1,
        UriState::Stored,
    );
    put(
        &mut s,
        "https://example.com/d",
        [2; 16],
        1,
        UriState::Deleted,
    );
    put(
        &mut s,
        "http://other.org/e",
        cs_a,
        1,
        UriState::Duplicate { owner: None },
    );
    put(&mut s, "http://other.org/f", [3; 16], 1, UriState::Error);
    put(&mut s, "http://other.org/g", [4; 16], 2, UriState::Stored);
    let v = |xs: &[&str]| -> Vec<Vec<u8>> { xs.iter().map(|x| x.as_bytes().to_vec()).collect() };
    assert_eq!(
        s.uris_of_site("example.com"),
        v(&[
            "http://Example.com/a",
            "http://example.com:80/b",
            "https://example.com/d"
        ])
    );
    assert_eq!(
        s.uris_of_site("EXAMPLE.com:8080"),
        v(&["http://example.com:8080/c"])
    );
    assert_eq!(s.uris_of_site("nowhere.net"), v(&[]));
    assert_eq!(
        s.uris_with_prefix(b"http://other.org/"),
        v(&[
            "http://other.org/e",
            "http://other.org/f",
            "http://other.org/g"
        ])
    );
    assert_eq!(
        s.uris_with_checksum(&cs_a),
        v(&[
            "http://Example.com/a",
            "http://example.com:8080/c",
            "http://other.org/e"
        ])
    );
    // Cycle 2 ends: stored documents still at cycle 1 were not seen again.
    assert_eq!(
        s.stale(2),
        v(&["http://example.com:80/b", "http://example.com:8080/c"])
    );
    assert_eq!(s.stale(1), v(&[]));
    assert_eq!(s.iter().count(), 7);
    assert_eq!(s.len(), 7);
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn what_was_synced_survives_a_kill_and_nothing_half_written_is_read() {
    let dir = tmp("kill");
    let mut s = CrawlStore::open(dir.path()).unwrap();
    for i in 0..1000 {
        s.put(&uri(i), rec(i)).unwrap();
    }
    s.sync().unwrap();
    for i in 1000..1100 {
        s.put(&uri(i), rec(i)).unwrap();
    }
    s.remove(&uri(0)).unwrap();
    // Killed: no drop, so queued records never reach the file.
    std::mem::forget(s);
    let s = CrawlStore::open(dir.path()).unwrap();
    assert_eq!(s.len(), 1000);
    for i in 0..1000 {
        assert_eq!(s.get(&uri(i)), Some(&rec(i)), "uri {i}");
    }
    drop(s);
    fs::remove_dir_all(&dir).unwrap();
}
