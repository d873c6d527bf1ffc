//! Order, persistence and damage handling of the crawl queue, against a `VecDeque` model.

use std::collections::VecDeque;
use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;
use crate::msg::{Redirect, UriStructure};
use tempfile::TempDir;

fn tmp(name: &str) -> TempDir {
    TempDir::with_prefix(format!("crawlfleet-queue-{name}-")).unwrap()
}

fn manual(segment_bytes: u64) -> QueueOptions {
    QueueOptions {
        segment_bytes,
        sync: SyncPolicy::Manual,
    }
}

/// Record `n`: its number, then filler of a length that varies with `n` (0 to 299 bytes).
fn rec(n: u64, rng: &mut fastrand::Rng) -> Vec<u8> {
    let mut r = n.to_le_bytes().to_vec();
    let extra = rng.usize(0..300);
    r.extend((0..extra).map(|i| (n as usize + i) as u8));
    r
}

fn files(dir: &Path, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

fn drain(q: &mut CrawlQueue) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while let Some(r) = q.pop_front().unwrap() {
        out.push(r);
    }
    out
}

/// Makes the next open treat the queue as after a reboot: the live cursor slots are not trusted.
fn forget_boot(dir: &Path) {
    let mut f = OpenOptions::new()
        .write(true)
        .open(dir.join("cursor"))
        .unwrap();
    f.seek(SeekFrom::Start(8)).unwrap();
    f.write_all(&[0u8; 16]).unwrap();
}

fn patch(path: &Path, offset: u64, bytes: &[u8]) {
    let mut f = OpenOptions::new().write(true).open(path).unwrap();
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.write_all(bytes).unwrap();
}

#[test]
fn back_pushes_come_out_in_order_and_front_pushes_first_newest_first() {
    let dir = tmp("order");
    let mut q = CrawlQueue::open(dir.path(), QueueOptions::default()).unwrap();
    assert_eq!(q.resumed(), Resumed::Created);
    assert!(q.is_empty());
    for i in 0..1000u32 {
        q.push_back(&i.to_le_bytes()).unwrap();
    }
    q.push_front(b"urgent-1").unwrap();
    q.push_front(b"urgent-2").unwrap();
    assert_eq!(q.len(), 1002);
    assert_eq!(q.pop_front().unwrap().unwrap(), b"urgent-2");
    q.push_front(b"urgent-3").unwrap();
    assert_eq!(q.pop_front().unwrap().unwrap(), b"urgent-3");
    assert_eq!(q.pop_front().unwrap().unwrap(), b"urgent-1");
    for i in 0..1000u32 {
        let got = q.pop_front_with(|r| u32::from_le_bytes(r.try_into().unwrap()));
        assert_eq!(got.unwrap(), Some(i));
    }
    assert_eq!(q.pop_front().unwrap(), None);
    assert!(q.is_empty());
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn empty_records_are_records() {
    let dir = tmp("empty");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    q.push_back(b"").unwrap();
    q.push_front(b"").unwrap();
    q.push_back(b"x").unwrap();
    assert_eq!(q.len(), 3);
    drop(q);
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert_eq!(drain(&mut q), vec![vec![], vec![], b"x".to_vec()]);
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn records_larger_than_a_segment_are_refused_and_the_largest_fits() {
    let dir = tmp("large");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    let max = 4096 - 48;
    let err = q.push_back(&vec![1; max + 1]).unwrap_err();
    assert!(
        matches!(err, QueueError::RecordTooLarge { len, max: m } if len == max + 1 && m == max)
    );
    assert!(matches!(
        q.push_front(&vec![1; 10_000]).unwrap_err(),
        QueueError::RecordTooLarge { .. }
    ));
    assert!(q.is_empty());
    for i in 0..3u8 {
        q.push_back(&vec![i; max]).unwrap();
        q.push_front(&vec![10 + i; max]).unwrap();
    }
    let got: Vec<u8> = drain(&mut q).iter().map(|r| r[0]).collect();
    assert_eq!(got, vec![12, 11, 10, 0, 1, 2]);
    assert!(matches!(
        CrawlQueue::open(tmp("large-opts").path(), manual(100)),
        Err(QueueError::BadOptions(_))
    ));
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn consumed_segments_are_deleted_and_disk_use_follows_the_queue() {
    let dir = tmp("rollover");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    let mut rng = fastrand::Rng::with_seed(7);
    let recs: Vec<Vec<u8>> = (0..2000).map(|n| rec(n, &mut rng)).collect();
    for r in &recs {
        q.push_back(r).unwrap();
    }
    for r in &recs[..200] {
        q.push_front(r).unwrap();
    }
    q.sync().unwrap();
    let back_files = files(dir.path(), "back-").len();
    let front_files = files(dir.path(), "front-").len();
    assert!(back_files > 50, "{back_files} back segments");
    assert!(front_files > 5, "{front_files} front segments");
    let full = q.disk_bytes();
    assert_eq!(full, (back_files + front_files) as u64 * 4096 + 4096);
    for r in recs[..200].iter().rev() {
        assert_eq!(&q.pop_front().unwrap().unwrap(), r);
    }
    for r in &recs[..1000] {
        assert_eq!(&q.pop_front().unwrap().unwrap(), r);
    }
    q.sync().unwrap();
    // One front segment is kept above the empty stack while it is in use.
    assert_eq!(
        files(dir.path(), "front-").len(),
        1,
        "{:?}",
        files(dir.path(), "front-")
    );
    let left = files(dir.path(), "back-").len();
    assert!(
        left < back_files / 2 + 2,
        "{left} of {back_files} back segments left"
    );
    // Consumed segments are kept as spares for reuse, at most back::MAX_SPARES of them.
    assert_eq!(files(dir.path(), "spare-").len(), back::MAX_SPARES);
    assert!(q.disk_bytes() < full * 6 / 10);
    for r in &recs[1000..] {
        assert_eq!(&q.pop_front().unwrap().unwrap(), r);
    }
    q.sync().unwrap();
    assert_eq!(
        files(dir.path(), "back-").len(),
        1,
        "only the tail segment is left"
    );
    // An idle queue gives its spares back.
    for _ in 0..50 {
        q.sync().unwrap();
    }
    assert!(
        files(dir.path(), "spare-").is_empty(),
        "{:?}",
        files(dir.path(), "spare-")
    );
    assert_eq!(q.disk_bytes(), 4096 + 4096);
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

/// How the randomized test ends a queue's life.
#[derive(Clone, Copy, Debug)]
enum End {
    /// Dropped (syncs).
    Close,
    /// The process dies on this boot: the queue object vanishes without a sync.
    Kill,
    /// The machine loses power: the queue vanishes and the next open distrusts the live state.
    PowerLoss,
}

#[test]
fn random_interleavings_match_a_deque_across_reopens_kills_and_power_losses() {
    for seed in 0..3 {
        let dir = tmp(&format!("model-{seed}"));
        let mut rng = fastrand::Rng::with_seed(seed);
        let opts = manual(if seed % 2 == 0 { 4096 } else { 16384 });
        let mut q = CrawlQueue::open(dir.path(), opts).unwrap();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        let mut synced_model = model.clone();
        let mut n = 0u64;
        for step in 0..5000 {
            match rng.u32(0..100) {
                0..=39 => {
                    let r = rec(n, &mut rng);
                    n += 1;
                    q.push_back(&r).unwrap();
                    model.push_back(r);
                }
                40..=54 => {
                    let r = rec(n, &mut rng);
                    n += 1;
                    q.push_front(&r).unwrap();
                    model.push_front(r);
                }
                55..=93 => {
                    let got = q.pop_front().unwrap();
                    assert_eq!(got, model.pop_front(), "seed {seed} step {step}");
                }
                94..=96 => {
                    q.sync().unwrap();
                    synced_model = model.clone();
                }
                _ => {
                    let end = [End::Close, End::Kill, End::PowerLoss][rng.usize(0..3)];
                    match end {
                        End::Close => drop(q),
                        End::Kill => std::mem::forget(q),
                        End::PowerLoss => {
                            std::mem::forget(q);
                            forget_boot(dir.path());
                            model = synced_model.clone();
                        }
                    }
                    q = CrawlQueue::open(dir.path(), opts).unwrap();
                    let want = match end {
                        End::PowerLoss => Resumed::LastSync,
                        _ => Resumed::LastOperation,
                    };
                    assert_eq!(q.resumed(), want, "seed {seed} step {step}");
                    synced_model = model.clone();
                }
            }
            assert_eq!(q.len(), model.len() as u64, "seed {seed} step {step}");
        }
        assert_eq!(drain(&mut q), Vec::from(model), "seed {seed}");
        drop(q);
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn clear_drops_everything_durably() {
    let dir = tmp("clear");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    for i in 0..500u32 {
        q.push_back(&[i as u8; 100]).unwrap();
        q.push_front(&[i as u8; 50]).unwrap();
    }
    q.clear().unwrap();
    assert!(q.is_empty());
    assert_eq!(files(dir.path(), "back-").len(), 1);
    assert!(files(dir.path(), "front-").is_empty());
    assert!(files(dir.path(), "spare-").is_empty());
    std::mem::forget(q);
    forget_boot(dir.path());
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert_eq!(q.resumed(), Resumed::LastSync);
    assert!(q.is_empty());
    assert_eq!(q.pop_front().unwrap(), None);
    q.push_back(b"after").unwrap();
    assert_eq!(drain(&mut q), vec![b"after".to_vec()]);
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tick_follows_the_sync_policy() {
    let now = Instant::now();
    let dir = tmp("tick");
    let opts = QueueOptions {
        segment_bytes: 4096,
        sync: SyncPolicy::Interval(Duration::from_secs(3600)),
    };
    let mut q = CrawlQueue::open(dir.path(), opts).unwrap();
    q.push_back(b"a").unwrap();
    assert!(!q.tick(now).unwrap());
    assert!(q.tick(now + Duration::from_secs(7200)).unwrap());
    drop(q);
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert!(!q.tick(now + Duration::from_secs(7200)).unwrap());
    drop(q);
    let always = QueueOptions {
        segment_bytes: 4096,
        sync: SyncPolicy::Always,
    };
    let mut q = CrawlQueue::open(dir.path(), always).unwrap();
    q.push_back(b"b").unwrap();
    std::mem::forget(q);
    forget_boot(dir.path());
    // Under Always even a power loss keeps every push.
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert_eq!(drain(&mut q), vec![b"a".to_vec(), b"b".to_vec()]);
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_record_is_reported_and_skipped() {
    let dir = tmp("damaged");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    // 100-byte records: 40 fit in a 4096-byte segment after its 32-byte header.
    for i in 0..100u8 {
        q.push_back(&[i; 92]).unwrap();
    }
    drop(q);
    let first = dir.path().join(&files(dir.path(), "back-")[0]);
    // The payload of record 3 of the first segment.
    patch(&first, 32 + 3 * 100 + 8 + 5, b"\xff");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    for i in 0..3u8 {
        assert_eq!(q.pop_front().unwrap().unwrap(), [i; 92]);
    }
    match q.pop_front() {
        Err(QueueError::Corrupt { path, offset, .. }) => {
            assert_eq!(path, first);
            assert_eq!(offset, 32 + 3 * 100);
        }
        other => panic!("expected a corrupt record, got {other:?}"),
    }
    // The rest of the first segment is dropped; the second starts at record 40.
    assert_eq!(q.pop_front().unwrap().unwrap(), [40; 92]);
    assert_eq!(q.len(), 59);
    drop(q);

    // Damage in the tail segment drops the rest of the log; the queue keeps working.
    let last = dir.path().join(files(dir.path(), "back-").last().unwrap());
    patch(&last, 32, &[0xee; 4]);
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    // Records 41 to 79 are in the middle segment, 80 to 99 in the tail segment.
    while q.len() > 20 {
        q.pop_front().unwrap().unwrap();
    }
    assert!(matches!(q.pop_front(), Err(QueueError::Corrupt { .. })));
    assert!(q.is_empty());
    q.push_back(b"again").unwrap();
    assert_eq!(drain(&mut q), vec![b"again".to_vec()]);
    drop(q);

    // A damaged front record drops the front stack, and the back log is served.
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    q.push_back(b"back").unwrap();
    q.push_front(b"front-1").unwrap();
    q.push_front(b"front-2").unwrap();
    drop(q);
    let front = dir.path().join(&files(dir.path(), "front-")[0]);
    // front-2 is the second record: 7 bytes + 16-byte footer after front-1's 23 bytes.
    patch(&front, 32 + 23, b"X");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert!(matches!(q.pop_front(), Err(QueueError::Corrupt { .. })));
    assert_eq!(q.pop_front().unwrap().unwrap(), b"back");
    assert!(q.is_empty());
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn truncated_or_missing_files_are_refused_by_name() {
    let dir = tmp("truncated");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    for i in 0..100u8 {
        q.push_back(&[i; 92]).unwrap();
    }
    q.push_front(b"f").unwrap();
    drop(q);
    let last = dir.path().join(files(dir.path(), "back-").last().unwrap());
    let copy = fs::read(&last).unwrap();

    fs::OpenOptions::new()
        .write(true)
        .open(&last)
        .unwrap()
        .set_len(200)
        .unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(
        matches!(&err, QueueError::Corrupt { path, .. } if path.ends_with("cursor")),
        "{err}"
    );
    assert!(err.to_string().contains("tail"), "{err}");

    fs::write(&last, &copy[..10]).unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(
        matches!(&err, QueueError::Corrupt { path, .. } if *path == last),
        "{err}"
    );

    let mut bad = copy.clone();
    bad[0] ^= 1;
    fs::write(&last, &bad).unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(err.to_string().contains("header"), "{err}");

    // A missing middle segment is a gap.
    fs::write(&last, &copy).unwrap();
    let middle = dir.path().join(&files(dir.path(), "back-")[1]);
    let middle_copy = fs::read(&middle).unwrap();
    fs::remove_file(&middle).unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(err.to_string().contains("gap"), "{err}");
    fs::write(&middle, &middle_copy).unwrap();

    // A missing front segment.
    let front = dir.path().join(&files(dir.path(), "front-")[0]);
    let front_copy = fs::read(&front).unwrap();
    fs::remove_file(&front).unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(err.to_string().contains("front stack top"), "{err}");
    fs::write(&front, &front_copy).unwrap();

    // Everything restored: the queue opens with all its records.
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert_eq!(q.len(), 101);
    assert_eq!(drain(&mut q).len(), 101);
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_cursor_is_refused_or_falls_back_to_the_last_sync() {
    let dir = tmp("cursor");
    let cursor = dir.path().join("cursor");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    q.push_back(b"synced").unwrap();
    q.sync().unwrap();
    q.push_back(b"live").unwrap();
    std::mem::forget(q);
    let copy = fs::read(&cursor).unwrap();

    // Both live slots damaged, same boot: resume from the last sync.
    patch(&cursor, 128, &[0xaa; 128]);
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert_eq!(q.resumed(), Resumed::LastSync);
    assert_eq!(drain(&mut q), vec![b"synced".to_vec()]);
    std::mem::forget(q);

    // Both synced slots damaged after a reboot: nothing to trust.
    fs::write(&cursor, &copy).unwrap();
    patch(&cursor, 256, &[0x55; 128]);
    forget_boot(dir.path());
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(
        matches!(&err, QueueError::Corrupt { path, .. } if *path == cursor),
        "{err}"
    );

    fs::write(&cursor, &copy[..100]).unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(err.to_string().contains("4096"), "{err}");

    let mut bad = copy.clone();
    bad[0] = b'X';
    fs::write(&cursor, &bad).unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(err.to_string().contains("magic"), "{err}");

    fs::remove_file(&cursor).unwrap();
    let err = CrawlQueue::open(dir.path(), manual(4096)).err().unwrap();
    assert!(err.to_string().contains("missing"), "{err}");

    // Intact again: the live state (same boot) with both records.
    fs::write(&cursor, &copy).unwrap();
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert_eq!(q.resumed(), Resumed::LastOperation);
    assert_eq!(drain(&mut q), vec![b"synced".to_vec(), b"live".to_vec()]);
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_crash_during_the_first_open_leaves_a_queue_that_opens() {
    let dir = tmp("first-open");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    for i in 0..100u8 {
        q.push_back(&[i; 92]).unwrap();
    }
    drop(q);
    // The cursor as `open` creates it, before the first sync: segment files exist beside it.
    fs::remove_file(dir.path().join("cursor")).unwrap();
    cursor::CursorFile::create(&dir.path().join("cursor"), &cursor::State::default()).unwrap();
    assert!(files(dir.path(), "back-").len() > 1);
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert!(q.is_empty());
    q.push_back(b"new").unwrap();
    assert_eq!(drain(&mut q), vec![b"new".to_vec()]);
    assert_eq!(files(dir.path(), "back-").len(), 1);
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn other_files_in_the_directory_are_left_alone() {
    let dir = tmp("others");
    fs::write(dir.path().join("back-notes.txt"), b"mine").unwrap();
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    q.push_back(b"a").unwrap();
    drop(q);
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    assert_eq!(drain(&mut q), vec![b"a".to_vec()]);
    drop(q);
    assert_eq!(
        fs::read(dir.path().join("back-notes.txt")).unwrap(),
        b"mine"
    );
    fs::remove_dir_all(&dir).unwrap();
}

fn entry() -> CrawlQueueEntry<'static> {
    let mut e = CrawlQueueEntry::new(UriStructure {
        uri: b"http://www.contoso.com/a/b.html?c=d"[..].into(),
        scheme: b"http"[..].into(),
        netloc: b"www.contoso.com"[..].into(),
        host: b"www.contoso.com"[..].into(),
        port: Some(80),
        path: b"/a/b.html"[..].into(),
        query: b"c=d"[..].into(),
        default_scheme: b"http"[..].into(),
        skip_fragments: true,
        parsed: true,
        host_idna: b"www.contoso.com"[..].into(),
        ..Default::default()
    });
    e.redirects.push(Redirect {
        from: b"http://contoso.com/a/b.html"[..].into(),
        kind: crate::msg::types::uri_flags::URIF_REDIRECT_301,
    });
    e.queue_flags = crate::msg::types::queue_flags::QF_PREPEND;
    e
}

#[test]
fn crawl_queue_entries_round_trip_through_the_queue() {
    let dir = tmp("entries");
    let mut q = CrawlQueue::open(dir.path(), manual(4096)).unwrap();
    let e = entry();
    let mut buf = Vec::new();
    encode_entry(&e, &mut buf);
    // The record is the compact layout, a fraction of the marshal 9-tuple (FSCMT 2.2.2.2).
    assert!(buf.len() * 2 < marshal::to_bytes(&e.to_value()).len());
    q.push_back(&buf).unwrap();
    // Queues written before the compact layout hold marshal records: still read.
    q.push_back(&marshal::to_bytes(&e.to_value())).unwrap();
    // The compact record, then the marshal one.
    for _ in 0..2 {
        let back = q
            .pop_front_with(|r| decode_entry(r).map(CrawlQueueEntry::into_owned))
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(back, e);
    }

    assert!(matches!(decode_entry(b"(\x01"), Err(QueueError::Decode(_))));
    assert!(matches!(
        decode_entry(&buf[..buf.len() - 1]),
        Err(QueueError::Compact(_))
    ));
    let not_entry = marshal::to_bytes(&crate::marshal::Value::int(5));
    assert!(matches!(
        decode_entry(&not_entry),
        Err(QueueError::Entry(_))
    ));
    drop(q);
    fs::remove_dir_all(&dir).unwrap();
}

/// The general decoder's reading of a record: the marshal value, then the entry.
fn general_entry<'a>(rec: &'a [u8], limits: &Limits) -> Option<CrawlQueueEntry<'a>> {
    let v = marshal::from_bytes(rec, limits).ok()?;
    CrawlQueueEntry::from_value(crate::msg::Key::Data, &v).ok()
}

/// [`entry`] with an extra key, and with URI flags over 31 bits: entries the straight
/// decoder declines, for the general path.
fn entries_off_the_straight_path() -> [CrawlQueueEntry<'static>; 2] {
    let mut extra = entry();
    extra.extra.push((
        crate::marshal::Value::bytes(b"rss"),
        crate::marshal::Value::bytes(b"1"),
    ));
    let mut wide = entry();
    wide.uri_flags = 1 << 40;
    [extra, wide]
}

/// Marshal records (queues written before the compact layout) are read straight for the common
/// entry, and the straight decoder never reads a record differently from the general one (it
/// declines, or agrees), byte changes and truncations included.
#[test]
fn entries_are_written_and_read_straight_as_the_general_codec_does() {
    let mut plain = CrawlQueueEntry::new(UriStructure::unparsed(b"http://h.example/x"[..].into()));
    plain.referrer = UriStructure::unparsed(b"http://h.example/"[..].into());
    plain.refresh_cycle = 3;
    let [extra, wide] = entries_off_the_straight_path();
    let limits = Limits::default();
    for e in [entry(), plain, extra, wide] {
        let buf = marshal::to_bytes(&e.to_value());
        let rec = &buf[..];
        assert_eq!(decode_entry(rec).unwrap(), e);
        let straight = crate::msg::decode_entry_flat(rec, &limits);
        assert_eq!(
            straight.is_some(),
            e.extra.is_empty() && e.uri_flags < 1 << 31
        );
        for i in 0..rec.len() {
            for delta in [1u8, 0x80, 0xff] {
                let mut bad = rec.to_vec();
                bad[i] = bad[i].wrapping_add(delta);
                if let Some(fast) = crate::msg::decode_entry_flat(&bad, &limits) {
                    assert_eq!(general_entry(&bad, &limits), Some(fast));
                }
            }
        }
        for n in 0..rec.len() {
            assert_eq!(crate::msg::decode_entry_flat(&rec[..n], &limits), None);
        }
        let mut longer = rec.to_vec();
        longer.push(b'0');
        assert_eq!(crate::msg::decode_entry_flat(&longer, &limits), None);
        // Limits are kept as the general decoder keeps them.
        for depth in 0..4 {
            let shallow = Limits {
                max_depth: depth,
                ..Limits::default()
            };
            if let Some(fast) = crate::msg::decode_entry_flat(rec, &shallow) {
                assert_eq!(general_entry(rec, &shallow), Some(fast));
            }
        }
        let small = Limits {
            max_size: rec.len() - 1,
            ..Limits::default()
        };
        assert_eq!(crate::msg::decode_entry_flat(rec, &small), None);
    }
}

/// A record's URI and URI flags peeked are those of its decoded entry, and a record is peeked
/// exactly when the straight decoder reads it (byte changes, truncations, limits), or when the
/// general path decodes it.
#[test]
fn a_peeked_entry_gives_what_its_decoding_gives() {
    let mut plain = CrawlQueueEntry::new(UriStructure::unparsed(b"http://h.example/x"[..].into()));
    plain.referrer = UriStructure::unparsed(b"http://h.example/"[..].into());
    plain.uri_flags = crate::msg::types::uri_flags::URIF_FORCE;
    let limits = Limits::default();
    let same = |rec: &[u8]| match (peek_entry(rec), decode_entry(rec)) {
        (Ok((uri, flags)), Ok(e)) => {
            assert_eq!((uri, flags), (e.uri.uri.clone(), e.uri_flags));
        }
        (Err(_), Err(_)) => {}
        (p, d) => panic!("peek {p:?} against decode {d:?}"),
    };
    let [extra, wide] = entries_off_the_straight_path();
    let mut records = Vec::new();
    for e in [entry(), plain, extra, wide] {
        // The record written now (compact, or marshal for extra metadata) and the marshal
        // record of queues written before the compact layout.
        let mut rec = Vec::new();
        encode_entry(&e, &mut rec);
        records.push(rec);
        records.push(marshal::to_bytes(&e.to_value()));
    }
    for rec in records {
        same(&rec);
        for i in 0..rec.len() {
            for delta in [1u8, 0x80, 0xff] {
                let mut bad = rec.clone();
                bad[i] = bad[i].wrapping_add(delta);
                same(&bad);
                assert_eq!(
                    crate::msg::peek_entry_flat(&bad, &limits).is_some(),
                    crate::msg::decode_entry_flat(&bad, &limits).is_some()
                );
            }
        }
        for n in 0..rec.len() {
            same(&rec[..n]);
            assert_eq!(crate::msg::peek_entry_flat(&rec[..n], &limits), None);
        }
        for depth in 0..4 {
            let shallow = Limits {
                max_depth: depth,
                ..Limits::default()
            };
            assert_eq!(
                crate::msg::peek_entry_flat(&rec, &shallow).is_some(),
                crate::msg::decode_entry_flat(&rec, &shallow).is_some()
            );
        }
    }
}

/// The allocation used where a file system has no fallocate (what glibc's posix_fallocate does
/// there) allocates every block of the range and changes no byte of the file.
#[test]
fn blocks_allocated_by_writing_keep_the_contents() {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let dir = tmp("write-blocks");
    let path = dir.path().join("f");
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    f.set_len(64 * 1024).unwrap();
    f.write_all_at(b"kept", 5000).unwrap();
    crate::sys::write_blocks(&f, 4096, 40 * 1024).unwrap();
    // st_blocks counts 512-byte units.
    assert!(f.metadata().unwrap().blocks() * 512 >= 40 * 1024);
    let mut want = vec![0u8; 64 * 1024];
    want[5000..5004].copy_from_slice(b"kept");
    assert!(fs::read(&path).unwrap() == want);
    crate::sys::write_blocks(&f, 0, 0).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().len(), 64 * 1024);
}

/// Entries of every shape the compact layout distinguishes: parsed and unparsed URI
/// structures, ports (negative and past 32 bits), default schemes other than "http" (and
/// none), integers at both ends of i64, redirects.
fn compact_entries() -> Vec<CrawlQueueEntry<'static>> {
    let mut plain = CrawlQueueEntry::new(UriStructure::unparsed(b"http://h.example/x"[..].into()));
    plain.referrer = UriStructure::unparsed(b"http://h.example/"[..].into());
    let mut odd = entry();
    odd.uri.port = Some(-1);
    odd.uri.default_scheme = b"https"[..].into();
    odd.referrer.default_scheme = b""[..].into();
    odd.referrer.port = Some(1 << 40);
    odd.referrer.skip_fragments = false;
    odd.uri_flags = i64::MIN;
    odd.frame_flags = i64::MAX;
    odd.queue_flags = -1;
    odd.refresh_cycle = 1 << 33;
    odd.redirects.push(Redirect {
        from: b""[..].into(),
        kind: -7,
    });
    vec![
        entry(),
        plain,
        odd,
        CrawlQueueEntry::new(UriStructure::unparsed(b""[..].into())),
    ]
}

/// The compact layout gives back every entry exactly; a truncated or lengthened record is
/// refused with [`QueueError::Compact`]; a damaged byte is refused or read as some entry,
/// never a panic.
#[test]
fn compact_records_round_trip_and_refuse_damage() {
    for e in compact_entries() {
        let mut rec = b"kept".to_vec();
        encode_entry(&e, &mut rec);
        assert_eq!(&rec[..4], b"kept");
        let rec = &rec[4..];
        assert_eq!(rec[0], compact::MAGIC);
        assert!(rec.len() < marshal::to_bytes(&e.to_value()).len());
        assert_eq!(decode_entry(rec).unwrap(), e);
        assert_eq!(peek_entry(rec).unwrap(), (e.uri.uri.clone(), e.uri_flags));
        for n in 1..rec.len() {
            assert!(
                matches!(decode_entry(&rec[..n]), Err(QueueError::Compact(_))),
                "{n} bytes of {}",
                rec.len()
            );
            assert!(
                matches!(peek_entry(&rec[..n]), Err(QueueError::Compact(_))),
                "peek of {n} bytes of {}",
                rec.len()
            );
        }
        let mut longer = rec.to_vec();
        longer.push(0);
        assert!(matches!(decode_entry(&longer), Err(QueueError::Compact(_))));
        for i in 1..rec.len() {
            for delta in [1u8, 0x7f, 0x80, 0xff] {
                let mut bad = rec.to_vec();
                bad[i] = bad[i].wrapping_add(delta);
                if let Ok(d) = decode_entry(&bad) {
                    // What a damaged record reads as is an entry the codec writes back.
                    let mut again = Vec::new();
                    encode_entry(&d, &mut again);
                    assert_eq!(decode_entry(&again).unwrap(), d);
                }
            }
        }
    }
}

/// A plain entry as the schedulers queue it takes under half the bytes of its marshal record.
#[test]
fn compact_records_are_under_half_the_marshal_bytes() {
    let mut e = CrawlQueueEntry::new(UriStructure::unparsed(
        b"http://host-0042.example:8080/p/123/456.html"[..].into(),
    ));
    e.referrer = UriStructure::unparsed(b"http://host-0042.example:8080/p/123.html"[..].into());
    let mut rec = Vec::new();
    encode_entry(&e, &mut rec);
    let old = marshal::to_bytes(&e.to_value()).len();
    assert!(rec.len() * 2 < old, "{} against {old}", rec.len());
}
