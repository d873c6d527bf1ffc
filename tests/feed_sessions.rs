//! Node schedulers as content clients (issue 23, docs/distributor.md "Feeding sessions"): a
//! node's session sink feeds its document log through sessions it creates on the content
//! distributors (MS-FSCDFT 3.5.4.2, 3.6), and nothing is lost when the session's distributor is
//! SIGKILLed mid-feed (the sink recreates the session through the new master and sends again
//! everything after its cursor) or when the node itself is SIGKILLed and restarted (it goes on
//! from its cursor). `crawlfleet up` with its default distributors ends with every stored
//! document indexed, and so does `up --nameserver` with the distributors of an existing name
//! server, to which it adds the crawl's collections.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crawlfleet_core::feed::{DocLogReader, FeedOp, DOCS_DIR};
use crawlfleet_core::sched::node::collection_dir;
use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};

use crate::util::{hex, nameserver, temp_dir, wait_until, Role};

const COLLECTION: &str = "synthweb";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `crawlfleet index --json --data-dir D... COLLECTION`: document id -> checksum (hex), each
/// id counted (a merged listing names a document once).
fn index(collection: &str, dirs: &[&Path]) -> (BTreeMap<String, String>, usize) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args(["index", "--json"]);
    for d in dirs {
        cmd.arg("--data-dir").arg(d);
    }
    let out = cmd
        .arg(collection)
        .env("RUST_LOG", "error")
        .output()
        .expect("crawlfleet index runs");
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        // A distributor that has not created the collection's index yet.
        return (BTreeMap::new(), 0);
    }
    let v: serde_json::Value = serde_json::from_str(text.trim()).expect("index --json is JSON");
    let docs = v
        .as_array()
        .or_else(|| v["documents"].as_array())
        .cloned()
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for d in &docs {
        let id = d["doc"]
            .as_str()
            .or_else(|| d["uri"].as_str())
            .unwrap_or_default();
        let ck = d["checksum"].as_str().unwrap_or_default();
        out.insert(id.to_string(), ck.to_string());
    }
    (out, docs.len())
}

/// The node's document log: URI -> checksum (hex) of its latest add or update (deleted
/// documents left out).
fn logged(data: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let dir = collection_dir(data, COLLECTION.as_bytes()).join(DOCS_DIR);
    let Ok(reader) = DocLogReader::open(&dir) else {
        return out;
    };
    for r in reader {
        let Ok((_, doc)) = r else { break };
        let uri = String::from_utf8_lossy(&doc.uri).into_owned();
        if doc.op == FeedOp::Delete {
            out.remove(&uri);
        } else {
            out.insert(uri, hex(&doc.checksum));
        }
    }
    out
}

fn distributor(ns: &Role, dir: &Path, node: i64) -> Role {
    Role::start(&[
        "distributor",
        "--nameserver",
        &ns.addr().to_string(),
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.to_str().unwrap(),
        "--node-id",
        &node.to_string(),
        "--collection",
        COLLECTION,
        "--check-interval-ms",
        "100",
        "--call-timeout-ms",
        "2000",
    ])
}

fn node(data: &Path, config: &Path, admin: &str, ns: &Role) -> Role {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args(["node", "--standalone", "--sync-ms", "20", "--admin", admin])
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .args(["--nameserver", &ns.addr().to_string()])
        .env(
            "RUST_LOG",
            std::env::var("CF_TEST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stderr(Stdio::inherit());
    Role::spawn(cmd)
}

/// `crawlfleet distributors --json`: the node id of the distributor holding a session.
fn session_holder(ns: &Role) -> Option<i64> {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args([
            "distributors",
            "--json",
            "--nameserver",
            &ns.addr().to_string(),
        ])
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["distributors"].as_array()?.iter().find_map(|d| {
        let busy = d["sessions"].as_array().is_some_and(|s| !s.is_empty());
        busy.then(|| d["node_id"].as_i64()).flatten()
    })
}

/// The merged index holds every document of the node's log once, with its latest checksum.
fn assert_indexed_once(dirs: &[&Path], data: &Path) {
    let log = logged(data);
    let (idx, listed) = index(COLLECTION, dirs);
    assert_eq!(listed, idx.len(), "each document listed once");
    let missing: Vec<_> = log.keys().filter(|u| !idx.contains_key(*u)).collect();
    assert!(missing.is_empty(), "not indexed: {missing:?}");
    for (uri, ck) in &log {
        assert_eq!(idx.get(uri), Some(ck), "{uri}: the latest checksum");
    }
    assert_eq!(
        idx.len(),
        log.len(),
        "nothing indexed that the log does not hold"
    );
}

#[test]
fn a_session_whose_distributor_dies_is_recreated_and_nothing_is_lost() {
    let scratch = temp_dir("feed-sessions");
    let base = Ipv4Addr::new(127, 86, 0, 1);
    let config = scratch.path().join("synthweb.xml");
    let web_spec = "4:150";
    let web_role = Role::start(&[
        "synthweb",
        "--web",
        web_spec,
        "--plain",
        "--base",
        &base.to_string(),
        "--collection",
        config.to_str().unwrap(),
    ]);
    // 20 ms between requests to a site: the crawl lasts a few seconds, long enough to kill
    // the distributor and the node while it goes on.
    let xml = std::fs::read_to_string(&config).unwrap();
    let slow = xml.replace(
        "<attrib name=\"delay\" type=\"real\">0</attrib>",
        "<attrib name=\"delay\" type=\"real\">0.02</attrib>",
    );
    assert_ne!(xml, slow, "the collection has a delay to set");
    std::fs::write(&config, slow).unwrap();
    let mut spec: WebSpec = web_spec.parse().unwrap();
    spec.plain = true;
    let web = SyntheticWeb::generate(&spec, base, web_role.addr().port());
    let expected = web.expected().stored.len();

    let ns = nameserver(&scratch.path().join("ns"));
    let dirs: Vec<PathBuf> = (1..=2)
        .map(|i| scratch.path().join(format!("d{i}")))
        .collect();
    let mut dists: BTreeMap<i64, Role> = BTreeMap::new();
    for (i, d) in dirs.iter().enumerate() {
        dists.insert(i as i64 + 1, distributor(&ns, d, i as i64 + 1));
    }
    let data = scratch.path().join("node");
    let admin = format!("127.0.0.1:{}", free_port());
    let mut n = Some(node(&data, &config, &admin, &ns));
    let all: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();

    // Mid-feed: some documents indexed, the crawl still going. The distributor holding the
    // session dies.
    wait_until("the first documents are indexed", || {
        index(COLLECTION, &all).0.len() >= 20
    });
    let holder = session_holder(&ns).expect("a distributor holds the session");
    let indexed_before = index(COLLECTION, &all).0.len();
    assert!(indexed_before < expected, "the feed was still going");
    dists.remove(&holder).unwrap().kill();
    eprintln!("distributor {holder} SIGKILLed with {indexed_before} of {expected} indexed");

    // The sink recreates its session on the survivor (the new master) and goes on.
    wait_until("documents are indexed after the failover", || {
        index(COLLECTION, &all).0.len() > indexed_before + 20
    });
    // The node dies too, mid-feed, and comes back: it goes on from its cursor, with a new
    // session.
    n.take().unwrap().kill();
    eprintln!(
        "node SIGKILLed with {} of {expected} in its log, {} indexed",
        logged(&data).len(),
        index(COLLECTION, &all).0.len()
    );
    n = Some(node(&data, &config, &admin, &ns));
    wait_until("every stored page is in the log and indexed", || {
        logged(&data).len() >= expected && index(COLLECTION, &all).0.len() >= expected
    });
    assert_indexed_once(&all, &data);
    assert_eq!(logged(&data).len(), expected);
    drop(n);
}

#[test]
fn up_with_its_distributors_indexes_every_stored_document() {
    let dir = temp_dir("up-indexed");
    let data = dir.path().join("data");
    let v = crate::util::up_summary(
        Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args(["up", "--synthetic-web", "3:40", "--web-base", "127.87.0.1"])
            .arg("--data-dir")
            .arg(&data)
            .args(["--until-idle", "--json", "--timeout", "240"]),
    );
    let c = &v["collections"]["synthetic"];
    let stored = c["documents_stored"].as_u64().unwrap();
    assert!(stored > 0, "{v}");
    assert_eq!(c["documents_indexed"].as_u64(), Some(stored), "{v}");
    assert_eq!(c["feed_pending"].as_u64(), Some(0), "{v}");
    // The distributors' indexes, merged, hold every stored document once.
    let d1 = data.join("distributor1");
    let d2 = data.join("distributor2");
    let (idx, listed) = index("synthetic", &[&d1, &d2]);
    assert_eq!(listed, idx.len(), "each document listed once");
    assert_eq!(idx.len() as u64, stored, "{v}");
}

#[test]
fn up_feeds_the_distributors_of_an_existing_name_server_adding_its_collections() {
    let dir = temp_dir("up-nameserver");
    let ns = nameserver(&dir.path().join("ns"));
    // Distributors holding no collection: up adds the crawl's (add_collection).
    let dirs: Vec<PathBuf> = (1..=2).map(|i| dir.path().join(format!("d{i}"))).collect();
    let _dists: Vec<Role> = dirs
        .iter()
        .enumerate()
        .map(|(i, d)| {
            Role::start(&[
                "distributor",
                "--nameserver",
                &ns.addr().to_string(),
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                d.to_str().unwrap(),
                "--node-id",
                &(i + 1).to_string(),
                "--check-interval-ms",
                "100",
            ])
        })
        .collect();
    wait_until("a master is elected", || {
        Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args([
                "distributors",
                "--json",
                "--nameserver",
                &ns.addr().to_string(),
            ])
            .output()
            .ok()
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
            .is_some_and(|v| v["registered"].as_array().is_some_and(|r| r.len() == 2))
    });
    let v = crate::util::up_summary(
        Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args(["up", "--synthetic-web", "2:30", "--web-base", "127.88.0.1"])
            .args(["--nameserver", &ns.addr().to_string()])
            .arg("--data-dir")
            .arg(dir.path().join("up"))
            .args(["--until-idle", "--json", "--timeout", "240"]),
    );
    let stored = v["collections"]["synthetic"]["documents_stored"]
        .as_u64()
        .unwrap();
    assert!(stored > 0, "{v}");
    assert_eq!(v["documents_indexed"].as_u64(), Some(stored), "{v}");
    let all: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    let (idx, listed) = index("synthetic", &all);
    assert_eq!((idx.len() as u64, listed as u64), (stored, stored), "{v}");
}
