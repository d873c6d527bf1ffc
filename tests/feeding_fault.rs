//! Feeding under fault (issue "feeding sessions that lose nothing"): a crawl of the synthetic
//! web through `crawlfleet up --nameserver` against a name server and three content
//! distributors started as processes of their own. The master distributor is SIGKILLed twice
//! mid-crawl and started again (MS-FSCDFT 3.4: a backup takes over; the nodes' sessions are
//! recreated through the new master and their unacknowledged operations sent again); in the
//! second run the crawl itself (`up`, the node schedulers with it) is SIGKILLed once and
//! started again on its data directory. At the end the distributors' indexes, merged by
//! document id, hold every document the nodes' document logs hold, once, with its latest
//! checksum, and nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crawlfleet_core::feed::{DocLogReader, FeedOp, DOCS_DIR};
use crawlfleet_core::sched::node::collection_dir;
use serde_json::Value as Json;

use crate::util::{hex, nameserver, temp_dir, Role};

const COLLECTION: &str = "synthetic";
const NODES: usize = 2;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    c.env(
        "RUST_LOG",
        std::env::var("CF_TEST_LOG").unwrap_or_else(|_| "warn".into()),
    );
    c
}

fn distributor(ns: &str, dir: &Path, id: usize) -> Role {
    let mut cmd = bin();
    cmd.args(["distributor", "--nameserver", ns, "--listen", "127.0.0.1:0"])
        .args(["--node-id", &id.to_string(), "--collection", COLLECTION])
        .args(["--check-interval-ms", "200", "--call-timeout-ms", "500"])
        .arg("--data-dir")
        .arg(dir)
        .stderr(Stdio::inherit());
    Role::spawn(cmd)
}

/// The node id of the distributor bound as session_factory, if any.
fn master(ns: &str) -> Option<usize> {
    let out = bin()
        .args(["nameserver", "list", "--json", "--nameserver", ns])
        .output()
        .ok()?;
    let list: Json = serde_json::from_slice(&out.stdout).ok()?;
    list.as_array()?
        .iter()
        .find(|a| a["interface_type"] == "processing::session_factory")
        .and_then(|a| a["object_id"].as_str()?.split('/').nth(1)?.parse().ok())
}

/// The merged index of the distributors' directories: URI -> checksum in hex.
fn merged_index(dirs: &[PathBuf]) -> BTreeMap<String, String> {
    let mut cmd = bin();
    cmd.args(["index", "--json"]);
    for d in dirs {
        cmd.arg("--data-dir").arg(d);
    }
    let out = cmd.arg(COLLECTION).output().expect("crawlfleet index runs");
    assert!(
        out.status.success(),
        "crawlfleet index: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs: Json = serde_json::from_slice(&out.stdout).expect("index --json prints JSON");
    let mut map = BTreeMap::new();
    for d in docs.as_array().expect("an array of documents") {
        let uri = d["uri"].as_str().unwrap().to_owned();
        let prev = map.insert(uri.clone(), d["checksum"].as_str().unwrap().to_owned());
        assert!(prev.is_none(), "{uri} listed twice in the merged index");
    }
    map
}

/// What the nodes' document logs say each document is now: URI -> checksum in hex (deleted
/// documents left out).
fn fed_documents(up_dir: &Path) -> BTreeMap<String, String> {
    let mut latest: BTreeMap<String, (u64, u64, Option<String>)> = BTreeMap::new();
    for i in 1..=NODES {
        let dir =
            collection_dir(&up_dir.join(format!("node{i}")), COLLECTION.as_bytes()).join(DOCS_DIR);
        let Ok(reader) = DocLogReader::open(&dir) else {
            continue;
        };
        for r in reader {
            let (seq, doc) = r.expect("a readable document log");
            let uri = String::from_utf8_lossy(&doc.uri).into_owned();
            let now = (
                doc.time,
                seq,
                (doc.op != FeedOp::Delete).then(|| hex(&doc.checksum)),
            );
            match latest.get(&uri) {
                Some(old) if (old.0, old.1) >= (now.0, now.1) => {}
                _ => {
                    latest.insert(uri, now);
                }
            }
        }
    }
    latest
        .into_iter()
        .filter_map(|(u, (_, _, c))| c.map(|c| (u, c)))
        .collect()
}

fn up(ns: &str, data: &Path, until_idle: bool) -> Child {
    let mut cmd = bin();
    cmd.args(["up", "--synthetic-web", "6:300", "--web-delay", "0.02"])
        .args(["--nodes", &NODES.to_string(), "--nameserver", ns, "--json"])
        .args(["--no-progress", "--timeout", "150"])
        .arg("--data-dir")
        .arg(data)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if until_idle {
        cmd.arg("--until-idle");
    }
    cmd.spawn().expect("crawlfleet up runs")
}

fn wait_for(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILLs the master distributor once the index holds `at_least` documents and starts it
/// again on its data directory; returns how long until another master was bound.
fn kill_master(ns: &str, dirs: &[PathBuf], ds: &mut [Option<Role>], at_least: usize) -> Duration {
    wait_for("documents indexed", Duration::from_secs(60), || {
        merged_index(dirs).len() >= at_least
    });
    let m = master(ns).expect("a master is bound");
    ds[m - 1].take().expect("the master runs").kill();
    let killed = Instant::now();
    wait_for("a new master", Duration::from_secs(30), || {
        master(ns).is_some_and(|n| n != m)
    });
    let failover = killed.elapsed();
    ds[m - 1] = Some(distributor(ns, &dirs[m - 1], m));
    failover
}

fn check_all_indexed(up_dir: &Path, dirs: &[PathBuf]) -> usize {
    let fed = fed_documents(up_dir);
    assert!(!fed.is_empty(), "the crawl fed documents");
    let index = merged_index(dirs);
    for (uri, sum) in &fed {
        assert_eq!(
            index.get(uri),
            Some(sum),
            "{uri}: in the merged index with its latest checksum"
        );
    }
    assert_eq!(index.len(), fed.len(), "nothing else in the index");
    fed.len()
}

#[test]
fn no_fed_document_is_lost_or_doubled_when_the_master_distributor_or_the_crawl_is_killed() {
    let dir = temp_dir("feeding-fault");
    let ns_role = nameserver(&dir.path().join("ns"));
    let ns = ns_role.addr().to_string();
    let dirs: Vec<PathBuf> = (1..=3).map(|i| dir.path().join(format!("d{i}"))).collect();
    let mut ds: Vec<Option<Role>> = Vec::new();
    for (i, d) in dirs.iter().enumerate() {
        ds.push(Some(distributor(&ns, d, i + 1)));
        // One at a time, so the first is master.
        if i == 0 {
            wait_for("a master", Duration::from_secs(20), || {
                master(&ns).is_some()
            });
        }
    }

    // Run 1: the master distributor SIGKILLed twice mid-crawl.
    let up1 = dir.path().join("up1");
    let crawl = up(&ns, &up1, true);
    let f1 = kill_master(&ns, &dirs, &mut ds, 50);
    let f2 = kill_master(&ns, &dirs, &mut ds, 300);
    let out = crawl.wait_with_output().unwrap();
    assert!(out.status.success(), "up --until-idle finished");
    // The summary is the last line (the start record comes first).
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.trim().lines().last().unwrap_or("");
    let summary: Json = serde_json::from_str(last).expect("up --json prints JSON");
    let n1 = check_all_indexed(&up1, &dirs);
    eprintln!(
        "feeding fault: {n1} documents indexed across two master kills (failover {} ms, {} ms); up said {}",
        f1.as_millis(),
        f2.as_millis(),
        summary["documents_indexed"]
    );

    // Run 2: the crawl SIGKILLed mid-way and started again on its data directory.
    let up2 = dir.path().join("up2");
    let mut crawl = up(&ns, &up2, false);
    let before = merged_index(&dirs).len();
    wait_for("run 2 feeds", Duration::from_secs(60), || {
        merged_index(&dirs).len() >= before + 100
    });
    crawl.kill().unwrap(); // SIGKILL
    crawl.wait().unwrap();
    let crawl = up(&ns, &up2, true);
    let out = crawl.wait_with_output().unwrap();
    assert!(out.status.success(), "the restarted up finished");
    let fed2 = fed_documents(&up2);
    let index = merged_index(&dirs);
    for (uri, sum) in &fed2 {
        assert_eq!(index.get(uri), Some(sum), "{uri} after the crawl's SIGKILL");
    }
    drop(ds);
}
