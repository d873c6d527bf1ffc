//! The record log's crash tests, run on the generic writer: a log cut at every byte of its last
//! record, every bit of a record flipped, the zeros of a grown file, a torn magic; then group
//! commit, rotation and compaction. Each store keeps its own recovery tests on top of these.

use std::fs;
use std::path::PathBuf;

use tempfile::TempDir;

use super::framing::*;
use super::*;

fn framed(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let s = begin(&mut out);
    out.extend_from_slice(payload);
    seal(&mut out, s);
    out
}

#[test]
fn a_record_reads_back_and_damage_is_a_torn_record() {
    let rec = framed(b"hello");
    let mut buf = Vec::new();
    let mut r = &rec[..];
    assert_eq!(
        read_next(&mut r, rec.len() as u64, 100, &mut buf).unwrap(),
        Next::Record
    );
    assert_eq!(buf, b"hello");
    let mut r = &rec[..];
    assert_eq!(read_next(&mut r, 0, 100, &mut buf).unwrap(), Next::End);
    // Cut short, over the limit, flipped bit.
    let mut r = &rec[..];
    assert_eq!(
        read_next(&mut r, 10, 100, &mut buf).unwrap(),
        Next::Torn("record longer than the file")
    );
    let mut r = &rec[..];
    assert_eq!(
        read_next(&mut r, 5, 100, &mut buf).unwrap(),
        Next::Torn("truncated record header")
    );
    let mut r = &rec[..];
    assert_eq!(
        read_next(&mut r, rec.len() as u64, 4, &mut buf).unwrap(),
        Next::Torn("record length over the limit")
    );
    let mut bad = rec.clone();
    bad[HEADER + 1] ^= 1;
    let mut r = &bad[..];
    assert_eq!(
        read_next(&mut r, bad.len() as u64, 100, &mut buf).unwrap(),
        Next::Torn("record check mismatch")
    );
}

#[test]
fn the_cursor_refuses_to_read_past_the_end() {
    let mut c = Cur(&[3, 0, 0, 0, b'a', b'b']);
    assert_eq!(c.bytes(), None);
    let mut c = Cur(&[2, 0, 0, 0, b'a', b'b', 7]);
    assert_eq!(c.bytes(), Some(&b"ab"[..]));
    assert_eq!(c.u8(), Some(7));
    assert!(c.is_empty());
    assert_eq!(c.u16(), None);
}

const PLAIN: Format = Format::plain("test log", 1 << 20);
const MAGIC: Format = Format {
    magic: b"CFTEST01",
    name: "test log",
    max_record: 1 << 20,
};

fn tmp(name: &str) -> (TempDir, PathBuf) {
    let dir = TempDir::with_prefix(format!("crawlfleet-recordlog-{name}-")).unwrap();
    let path = dir.path().join("log");
    (dir, path)
}

fn payload(i: usize) -> Vec<u8> {
    format!("record {i} {}", "x".repeat(i % 7)).into_bytes()
}

/// Writes `n` records with `opts` and returns the file's bytes and each record's end offset.
fn write_log(path: &std::path::Path, opts: Options, n: usize) -> (Vec<u8>, Vec<u64>) {
    let (mut w, rec) = LogWriter::open(path, opts, |_| true).unwrap();
    assert_eq!(rec.records, 0);
    let mut ends = Vec::new();
    for i in 0..n {
        w.append(&payload(i));
        w.commit().unwrap();
        ends.push(w.len());
    }
    drop(w);
    (fs::read(path).unwrap(), ends)
}

/// Opens the log at `path` and returns the payloads it holds and what opening found.
fn reopen(path: &std::path::Path, opts: Options) -> (Vec<Vec<u8>>, Recovered, LogWriter) {
    let mut got = Vec::new();
    let (w, rec) = LogWriter::open(path, opts, |p| {
        got.push(p.to_vec());
        true
    })
    .unwrap();
    (got, rec, w)
}

#[test]
fn a_log_cut_at_every_byte_of_its_last_record_keeps_the_others_and_goes_on_after_them() {
    for format in [PLAIN, MAGIC] {
        let opts = Options::new(format);
        let (_dir, path) = tmp("cut");
        let (full, ends) = write_log(&path, opts, 4);
        let before_last = ends[2];
        for cut in before_last..full.len() as u64 {
            fs::write(&path, &full[..cut as usize]).unwrap();
            let (got, rec, mut w) = reopen(&path, opts);
            assert_eq!(got, (0..3).map(payload).collect::<Vec<_>>(), "cut at {cut}");
            assert_eq!(rec.intact_len, before_last);
            assert_eq!(rec.torn_bytes, cut - before_last);
            assert_eq!(fs::metadata(&path).unwrap().len(), before_last, "tail cut");
            // New records follow the intact ones.
            w.append(b"after");
            w.commit().unwrap();
            drop(w);
            let (got, rec, _w) = reopen(&path, opts);
            assert_eq!(got.len(), 4);
            assert_eq!(got[3], b"after");
            assert_eq!(rec.torn_bytes, 0);
        }
        // The whole file is four records.
        fs::write(&path, &full).unwrap();
        let (got, rec, _w) = reopen(&path, opts);
        assert_eq!(got.len(), 4);
        assert_eq!((rec.records, rec.torn, rec.torn_bytes), (4, None, 0));
    }
}

#[test]
fn a_flipped_bit_anywhere_in_a_record_ends_the_log_before_it() {
    let opts = Options::new(MAGIC);
    let (_dir, path) = tmp("flip");
    let (full, ends) = write_log(&path, opts, 3);
    // Every bit of the second record: its header and its payload.
    let (start, end) = (ends[0], ends[1]);
    for byte in start..end {
        for bit in 0..8 {
            let mut bad = full.clone();
            bad[byte as usize] ^= 1 << bit;
            fs::write(&path, &bad).unwrap();
            let mut got = Vec::new();
            let rec = read_log(&path, &MAGIC, |p| {
                got.push(p.to_vec());
                true
            })
            .unwrap();
            assert_eq!(got, vec![payload(0)], "byte {byte} bit {bit}");
            assert_eq!(rec.intact_len, start);
            assert!(rec.torn.is_some());
        }
    }
    // A flipped magic is not this log: refused, the file left alone.
    let mut bad = full.clone();
    bad[0] ^= 1;
    fs::write(&path, &bad).unwrap();
    let e = LogWriter::open(&path, opts, |_| true).unwrap_err();
    assert!(e.to_string().contains("not a test log (bad magic)"), "{e}");
    assert_eq!(fs::read(&path).unwrap(), bad);
}

#[test]
fn a_payload_the_store_cannot_decode_ends_the_log_like_a_torn_record() {
    let opts = Options::new(PLAIN);
    let (_dir, path) = tmp("malformed");
    let (_, ends) = write_log(&path, opts, 3);
    let mut n = 0;
    let (_w, rec) = LogWriter::open(&path, opts, |p| {
        n += 1;
        p != payload(1).as_slice()
    })
    .unwrap();
    assert_eq!((n, rec.records, rec.intact_len), (2, 1, ends[0]));
    assert_eq!(rec.torn, Some("malformed record"));
    assert_eq!(fs::metadata(&path).unwrap().len(), ends[0]);
}

#[test]
fn a_magic_torn_at_creation_is_a_new_log_and_a_missing_file_an_empty_one() {
    let opts = Options::new(MAGIC);
    let (_dir, path) = tmp("magic");
    let (_, rec, w) = reopen(&path, opts);
    assert_eq!(rec, Recovered::default());
    assert!(w.is_empty());
    assert_eq!(fs::read(&path).unwrap(), MAGIC.magic);
    drop(w);
    for cut in 0..MAGIC.magic.len() {
        fs::write(&path, &MAGIC.magic[..cut]).unwrap();
        let (got, rec, w) = reopen(&path, opts);
        assert!(got.is_empty() && w.is_empty());
        assert_eq!(rec.torn_bytes, cut as u64);
        assert_eq!(fs::read(&path).unwrap(), MAGIC.magic, "cut at {cut}");
    }
    // Short, but not the start of the magic: refused and left alone.
    fs::write(&path, b"CFX").unwrap();
    assert!(LogWriter::open(&path, opts, |_| true).is_err());
    assert_eq!(fs::read(&path).unwrap(), b"CFX");
}

#[test]
fn the_zeros_a_grown_log_ends_with_read_as_its_end() {
    let opts = Options {
        grow_step: 64 << 10,
        ..Options::new(PLAIN)
    };
    let (_dir, path) = tmp("grown");
    let (mut w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
    let big = |i: u8| vec![i; 30 << 10];
    for i in 0..5 {
        w.append(&big(i));
        w.commit().unwrap();
    }
    let written = w.len();
    w.settle_growth();
    let size = fs::metadata(&path).unwrap().len();
    assert!(written > opts.grow_step && size > written);
    assert!(size.is_multiple_of(opts.grow_step));
    // Room asked for ahead: the file grows at once, a step past it.
    w.make_room(opts.grow_step).unwrap();
    assert!(fs::metadata(&path).unwrap().len() >= written + opts.grow_step);
    drop(w);
    let before = fs::read(&path).unwrap();
    let (got, rec, mut w) = reopen(&path, opts);
    assert_eq!(got, (0..5).map(big).collect::<Vec<_>>());
    assert_eq!(rec.intact_len, written);
    // Cut to its records and grown again from the opening: zeros after them.
    w.settle_growth();
    let after = fs::read(&path).unwrap();
    assert_eq!(after[..written as usize], before[..written as usize]);
    assert!(
        after[written as usize..].iter().all(|&b| b == 0),
        "zeros after the records"
    );
    w.append(b"after");
    w.commit().unwrap();
    drop(w);
    let (got, _, _w) = reopen(&path, opts);
    assert_eq!(got.len(), 6);
}

#[test]
fn pipelined_writes_are_durable_through_a_sync_point_synced_on_another_thread() {
    let (_dir, path) = tmp("pipelined");
    let (mut w, _) = LogWriter::open(&path, Options::new(PLAIN), |_| true).unwrap();
    w.append(b"one");
    let first = w.write_pending().unwrap();
    assert_eq!(first.len(), w.len());
    w.append_with(|out| out.extend_from_slice(b"two"));
    assert_eq!((w.pending_records(), w.has_pending()), (1, true));
    let second = w.write_pending().unwrap();
    assert!(first.covered_by(&second) && !second.covered_by(&first));
    assert_eq!(w.committed_len(), 0, "not committed by this writer");
    std::thread::spawn(move || second.sync().unwrap())
        .join()
        .unwrap();
    let mut got = Vec::new();
    read_log(&path, &PLAIN, |p| {
        got.push(p.to_vec());
        true
    })
    .unwrap();
    assert_eq!(got, vec![b"one".to_vec(), b"two".to_vec()]);
}

#[test]
fn a_full_segment_rotates_to_a_new_file_and_the_old_one_stays() {
    let opts = Options {
        segment_limit: 100,
        ..Options::new(MAGIC)
    };
    let (dir, path) = tmp("rotate");
    let (mut w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
    let mut segment = 0;
    for i in 0..20 {
        w.append(&payload(i));
        w.commit().unwrap();
        if w.segment_full() {
            segment += 1;
            w.rotate(&dir.path().join(format!("log-{segment}")))
                .unwrap();
            assert!(w.is_empty() && !w.segment_full());
        }
    }
    assert!(segment >= 3, "{segment} rotations");
    // Every record is in exactly one segment, in order.
    let mut got = Vec::new();
    let mut files = vec![path.clone()];
    files.extend((1..=segment).map(|s| dir.path().join(format!("log-{s}"))));
    for f in &files {
        let rec = read_log(f, &MAGIC, |p| {
            got.push(p.to_vec());
            true
        })
        .unwrap();
        assert_eq!(rec.torn, None);
        assert!(rec.intact_len <= 100 + 8 + 64, "{} bytes", rec.intact_len);
    }
    assert_eq!(got, (0..20).map(payload).collect::<Vec<_>>());
}

#[test]
fn compaction_replaces_the_log_with_the_live_records() {
    let opts = Options::new(MAGIC);
    let (dir, path) = tmp("compact");
    let (mut w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
    for i in 0..50 {
        w.append(&payload(i));
    }
    w.commit().unwrap();
    w.append(b"queued, then dropped by the compaction");
    let before = w.len();
    let len = w
        .compact(|c| {
            for i in (0..50).step_by(10) {
                c.record(|out| out.extend_from_slice(&payload(i)))?;
            }
            Ok(())
        })
        .unwrap();
    assert!(len < before);
    assert_eq!(
        (w.len(), w.committed_len(), w.has_pending()),
        (len, len, false)
    );
    w.append(b"after");
    w.commit().unwrap();
    drop(w);
    assert!(!dir.path().join("log.tmp").exists());
    let (got, rec, _w) = reopen(&path, opts);
    let mut want: Vec<Vec<u8>> = (0..50).step_by(10).map(payload).collect();
    want.push(b"after".to_vec());
    assert_eq!(got, want);
    assert_eq!(rec.torn, None);
}

#[test]
fn an_error_names_the_file_and_what_was_done() {
    let e = LogError::new(
        std::path::Path::new("/d/log"),
        "write",
        std::io::Error::from_raw_os_error(28),
    );
    assert!(e.is_no_space());
    assert!(e.to_string().starts_with("/d/log: write: "), "{e}");
    let e = LogError::new(
        std::path::Path::new("/d/log"),
        "sync",
        std::io::Error::from_raw_os_error(5),
    );
    assert!(!e.is_no_space());
}

/// Set (to the log's path) in the child process of
/// [`a_failed_write_is_cut_back_and_the_log_goes_on_after_the_last_good_record`] only.
const CHILD_ENV: &str = "CRAWLFLEET_RECORDLOG_CHILD";

/// The child: commits 1000-byte records under a 32 KiB file size limit (RLIMIT_FSIZE, SIGXFSZ
/// ignored) until one fails, as on a full disk; then checks the failed write was cut off and a
/// small record still commits after the last good one.
#[test]
fn child_writes_past_a_file_size_limit() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    let (mut w, _) = LogWriter::open(&path, Options::new(PLAIN), |_| true).unwrap();
    let mut committed = 0;
    let err = loop {
        assert!(committed < 1000, "no write failed");
        w.append(&[b'r'; 1000]);
        match w.commit() {
            Ok(()) => committed += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(err.action, "write", "{err}");
    // Nothing of the failed record is left in the file, and it stays queued.
    assert_eq!(fs::metadata(&path).unwrap().len(), w.committed_len());
    assert_eq!(w.pending_records(), 1);
    w.discard_pending();
    w.append(b"small");
    w.commit().unwrap();
    println!("committed {committed}");
}

/// Runs the test `child` of this binary with `env` set to `path`, under a file size limit set
/// by `ulimit` (SIGXFSZ ignored, so that a write past it fails with EFBIG as on a full disk);
/// returns what it printed, once it succeeded. dash's and bash's `ulimit -f` count 512- or
/// 1024-byte blocks: 64 of them are 32 or 64 KiB.
fn run_limited(ulimit: &str, child: &str, env: &str, path: &std::path::Path) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap '' XFSZ; {ulimit} && exec \"$0\" --exact --nocapture \"$1\""
        ))
        .arg(std::env::current_exe().unwrap())
        .arg(format!("recordlog::tests::{child}"))
        .env(env, path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_failed_write_is_cut_back_and_the_log_goes_on_after_the_last_good_record() {
    let (_dir, path) = tmp("cutback");
    let stdout = run_limited(
        "ulimit -f 64",
        "child_writes_past_a_file_size_limit",
        CHILD_ENV,
        &path,
    );
    let committed: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("committed "))
        .expect("the child's count")
        .parse()
        .unwrap();
    assert!(committed >= 30, "{committed} records under the limit");
    let (got, rec, _w) = reopen(&path, Options::new(PLAIN));
    assert_eq!((rec.torn, rec.torn_bytes), (None, 0), "{rec:?}");
    assert_eq!(got.len(), committed + 1);
    assert_eq!(got.last().map(Vec::as_slice), Some(&b"small"[..]));
}

#[test]
fn room_reserved_ahead_allocates_blocks_without_growing_the_file() {
    use std::os::unix::fs::MetadataExt;
    let (_dir, path) = tmp("reserve");
    let (mut w, _) = LogWriter::open(&path, Options::new(MAGIC), |_| true).unwrap();
    w.append(b"first");
    w.commit().unwrap();
    let len = fs::metadata(&path).unwrap().len();
    w.reserve(100, 1 << 20).unwrap();
    let m = fs::metadata(&path).unwrap();
    assert_eq!(m.len(), len, "the size stays: a reader sees no zeros");
    assert!(m.blocks() * 512 >= 1 << 20, "{} blocks", m.blocks());
    // Within the room reserved: nothing asked of the file system, the records go in it.
    w.reserve(100, 1 << 20).unwrap();
    w.append(b"second");
    w.commit().unwrap();
    drop(w);
    let (got, rec, _w) = reopen(&path, Options::new(MAGIC));
    assert_eq!(got, vec![b"first".to_vec(), b"second".to_vec()]);
    assert_eq!((rec.torn, rec.torn_bytes), (None, 0));
}

#[test]
fn a_failed_compaction_leaves_the_log_and_no_temporary_file() {
    let (dir, path) = tmp("compact-fails");
    let (mut w, _) = LogWriter::open(&path, Options::new(MAGIC), |_| true).unwrap();
    w.append(b"kept");
    w.commit().unwrap();
    let e = w
        .compact(|c| {
            c.record(|out| out.extend_from_slice(b"half"))?;
            Err(LogError::new(
                &dir.path().join("log.tmp"),
                "write",
                std::io::Error::from_raw_os_error(28),
            ))
        })
        .unwrap_err();
    assert!(e.is_no_space());
    assert!(
        !dir.path().join("log.tmp").exists(),
        "the half-written copy is gone"
    );
    w.append(b"after");
    w.commit().unwrap();
    w.clear().unwrap();
    w.append(b"new cycle");
    w.commit().unwrap();
    drop(w);
    let (got, _, _w) = reopen(&path, Options::new(MAGIC));
    assert_eq!(got, vec![b"new cycle".to_vec()]);
}

/// Record `i` of 1000 bytes.
fn kilo_payload(i: usize) -> Vec<u8> {
    let mut p = payload(i);
    p.resize(1000, b'q');
    p
}

/// Set (to the log's path) in the child process of
/// [`records_wait_queued_while_the_disk_is_full_and_go_out_in_order`] only.
const QUEUE_CHILD_ENV: &str = "CRAWLFLEET_RECORDLOG_QUEUE_CHILD";

/// The child: queues 100 records of 1000 bytes under a soft 32 KiB file size limit (SIGXFSZ
/// ignored), writing every 4 KiB with [`LogWriter::write_over`], which keeps queueing once the
/// limit refuses the writes (EFBIG, as a full disk would); the commit reports it with nothing
/// half-written in the file. Then the limit is lifted (room returns) and a commit writes every
/// queued record.
#[test]
fn child_queues_records_past_a_file_size_limit() {
    let Ok(path) = std::env::var(QUEUE_CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    let (mut w, _) = LogWriter::open(&path, Options::new(PLAIN), |_| true).unwrap();
    for i in 0..100 {
        w.append(&kilo_payload(i));
        w.write_over(4096).unwrap();
    }
    let e = w.commit().unwrap_err();
    assert!(e.is_no_space(), "{e}");
    assert_eq!(fs::metadata(&path).unwrap().len(), w.len());
    assert!(w.pending_records() > 0);
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Fsize);
    limit.current = limit.maximum;
    setrlimit(Resource::Fsize, limit).unwrap();
    w.commit().unwrap();
    println!("queued {}", w.len());
}

#[test]
fn records_wait_queued_while_the_disk_is_full_and_go_out_in_order() {
    let (_dir, path) = tmp("queued");
    // A soft limit only: the child lifts it again.
    let stdout = run_limited(
        "ulimit -S -f 64",
        "child_queues_records_past_a_file_size_limit",
        QUEUE_CHILD_ENV,
        &path,
    );
    assert!(stdout.contains("queued "), "{stdout}");
    let (got, rec, _w) = reopen(&path, Options::new(PLAIN));
    assert_eq!((rec.torn, rec.torn_bytes), (None, 0), "{rec:?}");
    let want: Vec<Vec<u8>> = (0..100).map(kilo_payload).collect();
    assert_eq!(got, want);
}

#[test]
fn a_failed_sync_keeps_the_records_written_since_the_last_commit_for_the_next() {
    for grow_step in [0, 4096] {
        let (_dir, path) = tmp("failed-sync");
        let opts = Options {
            grow_step,
            ..Options::new(Format::plain("test log", 1024))
        };
        let (mut w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
        w.append(&payload(0));
        w.commit().unwrap();
        // Records 1 and 2 written ahead of the commit, 3 queued when the sync fails.
        w.append(&payload(1));
        w.append(&payload(2));
        w.write_pending().unwrap();
        w.append(&payload(3));
        w.fail_next_sync(std::io::Error::from_raw_os_error(5) /* EIO */);
        let e = w.commit().expect_err("the sync fails");
        assert_eq!(e.action, "sync");
        assert_eq!(w.pending_records(), 3);
        assert_eq!(w.len(), w.committed_len());
        // Queued behind them, and the retried commit writes each once.
        w.append(&payload(4));
        w.commit().unwrap();
        drop(w);
        let (got, rec, _) = reopen(&path, opts);
        assert_eq!(got, (0..5).map(payload).collect::<Vec<_>>());
        assert_eq!(rec.records, 5);
    }
}

#[test]
fn a_grown_log_is_grown_ahead_from_its_opening_before_any_record() {
    let opts = Options {
        grow_step: 64 << 10,
        ..Options::new(MAGIC)
    };
    let (_dir, path) = tmp("grown-at-open");
    let (w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
    w.settle_growth();
    // The step past the magic and one more, as the first record would have asked.
    assert_eq!(fs::metadata(&path).unwrap().len(), 2 * opts.grow_step);
    drop(w);
    // Reopened: nothing but the magic was written, and the file grows again from there.
    let (got, rec, mut w) = reopen(&path, opts);
    assert!(got.is_empty());
    assert_eq!(rec.intact_len, w.len());
    // Records over the zeros read back, and the zeros after them as the end.
    w.append(b"first");
    w.commit().unwrap();
    w.settle_growth();
    assert_eq!(fs::metadata(&path).unwrap().len(), 2 * opts.grow_step);
    drop(w);
    let (got, _, _w) = reopen(&path, opts);
    assert_eq!(got, [b"first".to_vec()]);
}

#[test]
fn a_log_grown_ahead_by_its_thread_keeps_every_record_across_reopens() {
    let opts = Options {
        grow_step: 8 << 10,
        ..Options::new(PLAIN)
    };
    let (_dir, path) = tmp("grown-thread");
    let mut want: Vec<Vec<u8>> = Vec::new();
    for round in 0..5 {
        // Reopened right after the drop of a writer whose grower may have been under way:
        // every record is there, the zeros after them cut.
        let (got, rec, mut w) = reopen(&path, opts);
        assert_eq!(got, want, "round {round}");
        assert_eq!(rec.intact_len, w.len());
        for i in 0..200 {
            let p = kilo_payload(round * 200 + i);
            let need = (p.len() + HEADER) as u64;
            w.make_room(need).unwrap();
            // Room made is zeros on disk up to the end of this record at least.
            let end = w.len() + w.pending_bytes() as u64 + need;
            assert!(fs::metadata(&path).unwrap().len() >= end);
            w.append(&p);
            want.push(p);
            if i % 3 == 0 {
                w.write_pending().unwrap();
            }
            if i % 10 == 9 {
                w.commit().unwrap();
            }
        }
        w.commit().unwrap();
        // Once the grower has caught up, a step or more of zeros lies ahead of the records.
        w.settle_growth();
        assert!(fs::metadata(&path).unwrap().len() >= w.len() + opts.grow_step);
    }
    let (got, _, _w) = reopen(&path, opts);
    assert_eq!(got, want);
}

/// Set (to the log's path) in the child process of
/// [`a_grown_log_refuses_records_while_the_disk_is_full_and_takes_them_after`] only.
const GROW_CHILD_ENV: &str = "CRAWLFLEET_RECORDLOG_GROW_CHILD";

/// The child: a log grown ahead in 16 KiB steps under a soft 32 KiB file size limit (SIGXFSZ
/// ignored) admits 1000-byte records through [`LogWriter::make_room`] until its grower cannot
/// write the zeros (EFBIG, as a full disk would): that room is refused, again when asked again,
/// and the records admitted are all committed. Then the limit is lifted (room returns) and a
/// record is admitted and committed after them.
#[test]
fn child_grows_past_a_file_size_limit() {
    let Ok(path) = std::env::var(GROW_CHILD_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    let opts = Options {
        grow_step: 16 << 10,
        ..Options::new(PLAIN)
    };
    let (mut w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
    let need = (1000 + HEADER) as u64;
    let mut admitted = 0;
    let e = loop {
        match w.make_room(need) {
            Ok(()) => {
                w.append(&kilo_payload(admitted));
                w.commit().unwrap();
                admitted += 1;
            }
            Err(e) => break e,
        }
        assert!(admitted < 1000, "the limit never refused the zeros");
    };
    assert!(e.is_no_space(), "{e}");
    assert_eq!(e.action, "grow");
    assert!(w.make_room(need).is_err());
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Fsize);
    limit.current = limit.maximum;
    setrlimit(Resource::Fsize, limit).unwrap();
    w.make_room(need).unwrap();
    w.append(b"after");
    w.commit().unwrap();
    println!("admitted {admitted}");
}

#[test]
fn a_grown_log_refuses_records_while_the_disk_is_full_and_takes_them_after() {
    let (_dir, path) = tmp("grow-full");
    let stdout = run_limited(
        "ulimit -S -f 64",
        "child_grows_past_a_file_size_limit",
        GROW_CHILD_ENV,
        &path,
    );
    let admitted: usize = stdout
        .lines()
        .find_map(|l| l.strip_prefix("admitted "))
        .expect("the child's count")
        .parse()
        .unwrap();
    assert!(admitted >= 10, "{admitted} records under the limit");
    let opts = Options {
        grow_step: 16 << 10,
        ..Options::new(PLAIN)
    };
    let (got, _, _w) = reopen(&path, opts);
    let mut want: Vec<Vec<u8>> = (0..admitted).map(kilo_payload).collect();
    want.push(b"after".to_vec());
    assert_eq!(got, want);
}

#[test]
fn commits_run_together_on_helper_threads_settle_as_a_commit_does() {
    let opts = Options::new(Format::plain("test log", 1024));
    let dirs: Vec<_> = (0..3).map(|i| tmp(&format!("together-{i}"))).collect();
    let mut logs: Vec<LogWriter> = dirs
        .iter()
        .map(|(_, p)| LogWriter::open(p, opts, |_| true).unwrap().0)
        .collect();
    for (i, w) in logs.iter_mut().enumerate() {
        w.append(&payload(i));
        w.append(&payload(i + 10));
    }
    // The second log's sync fails; the others' succeed.
    logs[1].fail_next_sync(std::io::Error::from_raw_os_error(5) /* EIO */);
    let mut commits: Vec<Commit> = logs
        .iter_mut()
        .map(|w| w.commit_begin().unwrap().expect("records to commit"))
        .collect();
    let mut side_ran = None;
    let inline = run_commits(
        commits.iter_mut(),
        || side_ran = Some(std::thread::current().name().map(str::to_owned)),
        || std::thread::current().name().map(str::to_owned),
    );
    // The side job ran on a helper thread, `inline` on this one.
    assert_eq!(side_ran, Some(Some("log-sync".to_owned())));
    assert_eq!(inline, std::thread::current().name().map(str::to_owned));
    assert_eq!(
        commits.iter().map(Commit::failed).collect::<Vec<_>>(),
        [false, true, false]
    );
    let results: Vec<_> = logs
        .iter_mut()
        .zip(commits)
        .map(|(w, c)| w.commit_end(c).map_err(|e| e.action))
        .collect();
    assert_eq!(results, [Ok(()), Err("sync"), Ok(())]);
    // Committed logs have nothing left; the failed one took its records back to write again.
    assert!(logs[0].commit_begin().unwrap().is_none());
    assert_eq!(logs[1].pending_records(), 2);
    assert_eq!(logs[1].len(), logs[1].committed_len());
    logs[1].commit().unwrap();
    drop(logs);
    for (i, (_, p)) in dirs.iter().enumerate() {
        let (got, rec, _) = reopen(p, opts);
        assert_eq!(got, vec![payload(i), payload(i + 10)], "log {i}");
        assert_eq!(rec.records, 2);
    }
}

#[test]
fn a_commit_not_run_is_synced_when_settled_and_one_dropped_is_synced_by_the_next() {
    let opts = Options::new(Format::plain("test log", 1024));
    let (_dir, path) = tmp("settled");
    let (mut w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
    w.append(&payload(0));
    let c = w.commit_begin().unwrap().expect("a record to commit");
    assert!(!c.failed());
    w.commit_end(c).unwrap();
    assert_eq!(w.len(), w.committed_len());
    w.append(&payload(1));
    drop(w.commit_begin().unwrap());
    // Written, not committed: the next commit still has something to sync.
    assert!(w.committed_len() < w.len());
    let c = w
        .commit_begin()
        .unwrap()
        .expect("the dropped commit's records");
    w.commit_end(c).unwrap();
    assert_eq!(w.len(), w.committed_len());
    drop(w);
    assert_eq!(reopen(&path, opts).0, vec![payload(0), payload(1)]);
}

/// The machine's page size.
fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system; it has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).unwrap_or(4096)
}

/// Pages of the file at `path` in the page cache (mincore over a read-only mapping).
fn cached_pages(path: &std::path::Path) -> usize {
    let f = fs::File::open(path).unwrap();
    // SAFETY: the mapping is read-only and only its address is used (mincore reads no byte);
    // nothing truncates the file while it is mapped.
    let map = unsafe { memmap2::Mmap::map(&f).unwrap() };
    let mut resident = vec![0u8; map.len().div_ceil(page_size())];
    // SAFETY: `map` is a live mapping of `map.len()` bytes and `resident` has a byte for each
    // of its pages.
    let r = unsafe { libc::mincore(map.as_ptr() as *mut _, map.len(), resident.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore: {}", std::io::Error::last_os_error());
    resident.iter().filter(|b| *b & 1 == 1).count()
}

/// A log of `records` records of 4 KiB (about a page each) committed with `opts`: its path.
fn committed_log(dir: &TempDir, name: &str, opts: Options, records: usize) -> PathBuf {
    let path = dir.path().join(name);
    let (mut w, _) = LogWriter::open(&path, opts, |_| true).unwrap();
    for i in 0..records {
        w.append(&[i as u8; 4096]);
        if i % 64 == 63 {
            w.commit().unwrap();
        }
    }
    w.commit().unwrap();
    path
}

#[test]
fn synced_pages_leave_the_page_cache_behind_the_kept_tail() {
    let dir = TempDir::new().unwrap();
    // By default a log's pages stay cached.
    let kept = committed_log(&dir, "kept.log", Options::new(PLAIN), 256);
    let len = fs::metadata(&kept).unwrap().len();
    let pages = (len as usize).div_ceil(page_size());
    let before = cached_pages(&kept);
    crate::sys::drop_cached(&fs::File::open(&kept).unwrap(), len);
    if before < pages - 1 || cached_pages(&kept) == before {
        // A file system that does not cache its writes, or whose pages cannot be dropped
        // (tmpfs): nothing to see.
        eprintln!("the file system does not drop cached pages: not tested here");
        return;
    }
    // Tail 0: every synced page but the one the next record goes on.
    let none = committed_log(&dir, "none.log", Options::new(PLAIN).cache_tail(0), 256);
    let cached = cached_pages(&none);
    assert!(cached <= 1, "{cached} pages cached");
    // A 256 KiB tail stays, the rest goes.
    let tail = Options::new(PLAIN).cache_tail(256 << 10);
    let tailed = committed_log(&dir, "tail.log", tail, 256);
    let cached = cached_pages(&tailed);
    let kept_pages = (256 << 10) / page_size();
    assert!(
        (kept_pages..=kept_pages + 2).contains(&cached),
        "{cached} pages cached, {kept_pages} kept"
    );
    // The records all read back (the cache is a cache).
    let (_, found) = LogWriter::open(&none, Options::new(PLAIN), |p| p.len() == 4096).unwrap();
    assert_eq!((found.records, found.torn_bytes), (256, 0));
}
