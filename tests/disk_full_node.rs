//! A full disk pauses a node scheduler's crawl instead of stopping it (issue "Disk full": an
//! answer, never an exit): a standalone node crawling the synthetic web with its data
//! directory on a small tmpfs that a filler file fills mid-crawl stays up, logs why it paused,
//! stops fetching, reads as suspended (state 5, "Disk full": MS-FSCADM 2.2.3.3) over the
//! administrative port, and when the filler goes finishes the crawl with every page in the
//! document log once; a SIGKILL and a restart after that lose nothing. Needs root to mount the
//! tmpfs; says so and passes without checking anything otherwise.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crawlfleet_core::feed::{DocLogReader, FeedOp, DOCS_DIR};
use crawlfleet_core::sched::node::collection_dir;
use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};

use crate::disk_full::Tmpfs;
use crate::util::{temp_dir, wait_until, Role};

/// Big enough that the crawl is still going when the disk fills (a few seconds of fetching).
const WEB: &str = "4:400";
const COLLECTION: &[u8] = b"synthweb";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_node(data: &Path, config: &Path, admin: &str, log: &Path) -> Role {
    let err = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args(["node", "--standalone", "--sync-ms", "20", "--admin", admin])
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .env(
            "RUST_LOG",
            "warn,crawlfleet_core::sched::node::diskfull=info",
        )
        .stderr(Stdio::from(err));
    Role::spawn(cmd)
}

/// URI -> (adds, other operations) in the document log, as far as it is written.
fn fed(data: &Path) -> BTreeMap<String, (u32, u32)> {
    let mut out: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let dir = collection_dir(data, COLLECTION).join(DOCS_DIR);
    let Ok(reader) = DocLogReader::open(&dir) else {
        return out;
    };
    for r in reader {
        let (_, doc) = r.expect("a readable document log");
        let e = out
            .entry(String::from_utf8_lossy(&doc.uri).into_owned())
            .or_default();
        if doc.op == FeedOp::Add {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    out
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

fn admin_call(admin: &str, method: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["admin", "--json", "--server", admin, method, "synthweb"])
        .output()
        .expect("crawlfleet admin runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// CollectionGetStatus (MS-FSCADM 2.2.10.3).
fn status(admin: &str) -> String {
    admin_call(admin, "CollectionGetStatus")
}

/// Waits until `count` has not changed for `quiet`, polling (30 s at most).
fn wait_quiet(what: &str, quiet: Duration, mut count: impl FnMut() -> usize) -> usize {
    let mut last = (count(), Instant::now());
    wait_until(what, || {
        let now = count();
        if now != last.0 {
            last = (now, Instant::now());
        }
        last.1.elapsed() >= quiet
    });
    last.0
}

fn assert_each_page_fed_once(data: &Path, expected: &std::collections::BTreeSet<String>) {
    let fed = fed(data);
    for uri in expected {
        assert_eq!(fed.get(uri), Some(&(1, 0)), "{uri} in the document log");
    }
    assert_eq!(fed.len(), expected.len(), "nothing else fed");
}

/// Fills the file system holding `dir` (a file `filler` in it); returns its path.
fn fill(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("filler");
    let mut filler = File::create(&path).unwrap();
    let mb = vec![1u8; 1 << 20];
    while filler.write_all(&mb).is_ok() {}
    let kb = [1u8; 1024];
    while filler.write_all(&kb).is_ok() {}
    let _ = filler.sync_all();
    path
}

/// Starts a node crawling into `data`, fills the disk once 100 documents are fed, and waits
/// until the node says it paused and stops fetching: returns the node and the filler.
fn crawl_until_paused(
    fs: &Tmpfs,
    data: &Path,
    config: &Path,
    admin: &str,
    log: &Path,
    access: &Path,
) -> (Role, std::path::PathBuf) {
    let mut node = start_node(data, config, admin, log);
    wait_until("the crawl is under way", || fed(data).len() >= 100);
    let filler = fill(&fs.0);
    wait_until("the pause is logged", || {
        if let Some(exit) = node.child.try_wait().unwrap() {
            panic!(
                "the node exited ({exit}) instead of pausing:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::fs::read_to_string(log).is_ok_and(|l| l.contains("crawl paused, the disk is full"))
    });
    wait_quiet("fetching stops", Duration::from_millis(1500), || {
        lines(access)
    });
    assert!(node.child.try_wait().unwrap().is_none(), "the node exited");
    (node, filler)
}

#[test]
fn a_full_disk_pauses_the_crawl_and_it_resumes_losing_nothing() {
    let scratch = temp_dir("disk-full-node");
    let Some(fs) = Tmpfs::mount(&scratch.path().join("mnt"), 48) else {
        eprintln!("disk_full_node: cannot mount a tmpfs here (not root?); test skipped");
        return;
    };
    let base = Ipv4Addr::new(127, 84, 0, 1);
    let config = scratch.path().join("synthweb.xml");
    let access = scratch.path().join("access.log");
    let web_role = Role::start(&[
        "synthweb",
        "--web",
        WEB,
        "--plain",
        "--base",
        &base.to_string(),
        "--collection",
        config.to_str().unwrap(),
        "--access-log",
        access.to_str().unwrap(),
    ]);
    let mut spec: WebSpec = WEB.parse().unwrap();
    spec.plain = true;
    let web = SyntheticWeb::generate(&spec, base, web_role.addr().port());
    let expected = web.expected().stored;

    let data = fs.0.join("node");
    let log = scratch.path().join("node.log");
    let admin = format!("127.0.0.1:{}", free_port());
    let (mut node, filler) = crawl_until_paused(&fs, &data, &config, &admin, &log, &access);
    let paused_at = lines(&access);
    assert!(node.child.try_wait().unwrap().is_none(), "the node exited");
    let fed_paused = fed(&data).len();
    assert!(
        fed_paused < expected.len(),
        "the crawl was still going when the disk filled ({fed_paused} of {} fed)",
        expected.len()
    );
    assert!(
        status(&admin).contains("suspended"),
        "the status while paused: {}",
        status(&admin)
    );
    // The flattened statistics name the state (2.2.5 Status: "Disk full").
    let stats = admin_call(&admin, "CollectionGetStatistics2");
    assert!(stats.contains("Disk full"), "{stats}");
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(lines(&access), paused_at, "no fetch while paused");
    assert_eq!(
        fed(&data).len(),
        fed_paused,
        "the document log does not grow"
    );
    assert!(node.child.try_wait().unwrap().is_none(), "the node exited");
    let text = std::fs::read_to_string(&log).unwrap();
    let pauses: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("crawl paused"))
        .collect();
    assert!(
        pauses.len() <= 3,
        "one line per pause, rate-limited: {text}"
    );
    eprintln!(
        "disk full after {fed_paused} of {} documents fed, {paused_at} requests: {}",
        expected.len(),
        pauses[0]
    );

    // Space returns: the crawl resumes by itself and finishes, each page fed once.
    std::fs::remove_file(&filler).unwrap();
    wait_until("the crawl resumes", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("crawl resumed"))
    });
    wait_until("every page is fed", || fed(&data).len() >= expected.len());
    wait_quiet("the crawl ends", Duration::from_millis(1000), || {
        lines(&access)
    });
    assert_each_page_fed_once(&data, &expected);
    assert!(status(&admin).contains("crawling"), "{}", status(&admin));

    // Killed and restarted: nothing acknowledged is lost, nothing fed twice.
    node.kill();
    let node = start_node(&data, &config, &admin, &log);
    wait_until("the restarted node answers", || {
        status(&admin).contains("crawling")
    });
    wait_quiet(
        "the restarted node is idle",
        Duration::from_millis(1000),
        || lines(&access),
    );
    assert_each_page_fed_once(&data, &expected);
    drop(node);
    std::fs::remove_dir_all(&data).unwrap();

    // Killed while paused: what was not written is fetched again after the restart, and the
    // crawl still ends with each page fed once.
    let data = fs.0.join("node2");
    let log = scratch.path().join("node2.log");
    let (node, filler) = crawl_until_paused(&fs, &data, &config, &admin, &log, &access);
    node.kill();
    std::fs::remove_file(&filler).unwrap();
    let node = start_node(&data, &config, &admin, &log);
    wait_until("every page is fed after the restart", || {
        fed(&data).len() >= expected.len()
    });
    wait_quiet("the crawl ends", Duration::from_millis(1000), || {
        lines(&access)
    });
    assert_each_page_fed_once(&data, &expected);
    drop(node);
    drop(web_role);
}
