//! The crawl queue survives a real SIGKILL (crawlfleet_core::queue, module doc "What a crash
//! loses"): a child process pushes and pops numbered crawl queue entries (MS-FSCMT 2.2.2.2) and
//! prints each sync point; the parent kills it with SIGKILL after some syncs and reopens the
//! queue, once as the same machine (exact resume) and once as after a power loss (resume from the
//! last sync), and checks that every entry pushed before the last printed sync and not popped
//! before it is there, in order, once, and that no entry popped before it comes back.
//!
//! The child is this test binary re-executed with `--exact` on
//! [`child_pushes_and_pops_until_killed`] and [`CHILD_ENV`] naming the queue directory.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crawlfleet_bench::queue::sample_entry;
use crawlfleet_core::queue::{
    decode_entry, encode_entry, CrawlQueue, QueueOptions, Resumed, SyncPolicy,
};

/// Set (to the queue directory) in the child process only.
const CHILD_ENV: &str = "CRAWLFLEET_QUEUE_CRASH_CHILD";
/// Syncs the parent waits for before the kill.
const SYNCS_BEFORE_KILL: usize = 8;

fn opts() -> QueueOptions {
    QueueOptions {
        // Small segments: the child rolls over, releases and reuses segments many times.
        segment_bytes: 64 << 10,
        sync: SyncPolicy::Manual,
    }
}

/// The number of the entry in `rec` (its URI is `.../page-<n>.html`).
fn entry_number(rec: &[u8]) -> u64 {
    let e = decode_entry(rec).expect("a crawl queue entry");
    let uri = String::from_utf8(e.uri.uri.to_vec()).expect("ASCII URI");
    let n = uri
        .rsplit("page-")
        .next()
        .and_then(|s| s.strip_suffix(".html"))
        .unwrap_or_else(|| panic!("unexpected URI {uri}"));
    n.parse().unwrap_or_else(|_| panic!("unexpected URI {uri}"))
}

/// Child mode only (does nothing unless [`CHILD_ENV`] is set): pushes entries 0, 1, 2, ... and
/// pops one after every third push, checking the order, syncs every 300 pushes and prints
/// `synced <pushed> <popped>` after each sync. Runs until killed (at most 60 s).
#[test]
fn child_pushes_and_pops_until_killed() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut q = CrawlQueue::open(Path::new(&dir), opts()).expect("child opens the queue");
    let (mut pushed, mut popped) = (0u64, 0u64);
    let mut rec = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        rec.clear();
        encode_entry(&sample_entry(pushed), &mut rec);
        q.push_back(&rec).expect("push");
        pushed += 1;
        if pushed % 3 == 0 {
            let got = q.pop_front_with(entry_number).expect("pop");
            assert_eq!(got, Some(popped), "child pops in order");
            popped += 1;
        }
        if pushed % 300 == 0 {
            q.sync().expect("sync");
            println!("synced {pushed} {popped}");
        }
    }
    panic!("the parent did not kill the child within 60 s");
}

/// Pops everything and checks it is `from..to` for some `from >= popped` and `to >= pushed`;
/// returns `(from, to)`.
fn check_resumed(q: &mut CrawlQueue, pushed: u64, popped: u64) -> (u64, u64) {
    let mut got = Vec::new();
    while let Some(n) = q.pop_front_with(entry_number).expect("pop") {
        got.push(n);
    }
    assert!(!got.is_empty(), "entries {popped}..{pushed} are missing");
    let (from, to) = (got[0], got[got.len() - 1] + 1);
    assert!(
        from >= popped,
        "entry {from} was popped before the last sync (popped {popped}) and came back"
    );
    assert!(
        to >= pushed,
        "entries {to}..{pushed} pushed before the last sync are lost"
    );
    let want: Vec<u64> = (from..to).collect();
    assert!(got == want, "entries out of order or repeated: {got:?}");
    (from, to)
}

#[test]
fn a_queue_killed_with_sigkill_resumes_without_loss_or_repeats() {
    // Both queue directories go with the guard, whether the test passes or not.
    let scratch = crate::util::temp_dir("queue-crash");
    let dir = scratch.path().join("queue");
    let exe = std::env::current_exe().expect("the test binary");
    let mut child = Command::new(&exe)
        .args([
            "--exact",
            "queue_crash::child_pushes_and_pops_until_killed",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the child starts");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut syncs = Vec::new();
    let mut shown = Vec::new();
    for line in stdout.lines() {
        let line = line.expect("child output");
        shown.push(line.clone());
        let mut words = line.split_whitespace();
        if words.next() == Some("synced") {
            let pushed: u64 = words.next().and_then(|w| w.parse().ok()).expect("pushed");
            let popped: u64 = words.next().and_then(|w| w.parse().ok()).expect("popped");
            syncs.push((pushed, popped));
            if syncs.len() == SYNCS_BEFORE_KILL {
                break;
            }
        }
    }
    // Let the child get into the middle of its next sync window (it pushes and pops meanwhile;
    // its stdout pipe has room for the lines it prints).
    std::thread::sleep(Duration::from_millis(fastrand::u64(1..20)));
    // std's Child::kill sends SIGKILL on Unix: no destructor, no sync, no flush runs.
    child.kill().expect("SIGKILL");
    let status = child.wait().expect("the child ends");
    let stderr = child.stderr.take().map(|mut e| {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut e, &mut s);
        s
    });
    assert_eq!(
        syncs.len(),
        SYNCS_BEFORE_KILL,
        "the child printed too few syncs ({status}):\n{}\n{}",
        shown.join("\n"),
        stderr.unwrap_or_default()
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "the child died of SIGKILL");
    let (pushed, popped) = *syncs.last().expect("syncs");

    // A copy that a restart treats as after a power loss: the boot id in its cursor no longer
    // matches, so the live cursor slots are distrusted and the queue resumes from the last sync.
    let power = scratch.path().join("power-loss");
    std::fs::create_dir_all(&power).unwrap();
    for f in std::fs::read_dir(&dir).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), power.join(f.file_name())).unwrap();
    }
    let mut cursor = std::fs::read(power.join("cursor")).unwrap();
    cursor[8..24].fill(0);
    std::fs::write(power.join("cursor"), &cursor).unwrap();

    let mut q = CrawlQueue::open(&dir, opts()).expect("the queue reopens after SIGKILL");
    assert_eq!(q.resumed(), Resumed::LastOperation);
    let (from, to) = check_resumed(&mut q, pushed, popped);
    drop(q);

    let mut q = CrawlQueue::open(&power, opts()).expect("the queue reopens after a power loss");
    assert_eq!(q.resumed(), Resumed::LastSync);
    let (sync_from, sync_to) = check_resumed(&mut q, pushed, popped);
    // The synced state is older than (or the same as) the state at the kill.
    assert!(
        sync_from <= from && sync_to <= to,
        "{sync_from}..{sync_to} vs {from}..{to}"
    );
    drop(q);
}
