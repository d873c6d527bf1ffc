//! A clean stop on SIGTERM and SIGINT (issue 27 "Safe to expose", issue 26 Ctrl-C): every role
//! as a real process stops accepting, flushes what it holds and exits 0 within 5 s, and the next
//! start resumes from what it flushed: a node's statistics written (merged every hour here, so
//! only the stop writes them) and its WARC files closed with no `.open` left; a duplicate
//! server's checksums; and `crawlfleet up` stopping every role it started on one Ctrl-C.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crawlfleet_core::msg::{Checksum, Message, PpdupChecksum, PpdupSetConfig};
use crawlfleet_core::stats::Stats;

use crate::util::{temp_dir, wait_until, Client, Role};

const BIN: &str = env!("CARGO_BIN_EXE_crawlfleet");

/// Sends `sig` (`-TERM`, `-INT`) to a process.
fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// Sends SIGTERM to `role` and polls for its exit, which must come within 5 s (issue 27).
fn stop(mut role: Role, what: &str) -> ExitStatus {
    signal(role.child.id(), "-TERM");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(s) = role.child.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what} still runs 5 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stops_cleanly(role: Role, what: &str) {
    let status = stop(role, what);
    assert_eq!(status.code(), Some(0), "{what} exited with {status}");
}

/// Every file under `dir` whose name ends with `suffix`.
fn find(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out
}

/// Whether the statistics file of `dir` holds figures for `collection`.
fn has_statistics(dir: &Path, collection: &str) -> bool {
    let Ok(stats) = Stats::load(&dir.join("statistics"), 8, 0) else {
        return false;
    };
    stats
        .collections
        .get(collection.as_bytes())
        .is_some_and(|c| {
            let t = &c.table;
            t.cycles
                .values()
                .chain([&t.complete, &t.delta])
                .any(|s| !s.attrs.is_empty())
        })
}

fn node(data: &Path, config: &Path) -> Role {
    Role::start(&[
        "node",
        "--standalone",
        "--admin",
        "127.0.0.1:0",
        // Only the stop writes the statistics.
        "--stats-merge",
        "3600",
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ])
}

#[test]
fn a_node_flushes_its_statistics_and_closes_its_warc_files_on_sigterm() {
    let dir = temp_dir("stop-node");
    let config = dir.path().join("web.xml");
    let web = Role::start(&[
        "synthweb",
        "--web",
        "3:400",
        "--base",
        "127.92.0.1",
        "--collection",
        config.to_str().unwrap(),
        "--collection-name",
        "web",
    ]);
    // Slow enough that the crawl is still going when the signal comes.
    let xml = std::fs::read_to_string(&config).unwrap().replace(
        "</DomainSpecification>",
        "<attrib name=\"delay\" type=\"real\">0.02</attrib>\
         <section name=\"warc\"><attrib name=\"enabled\" type=\"boolean\">yes</attrib></section>\
         </DomainSpecification>",
    );
    std::fs::write(&config, xml).unwrap();
    let data = dir.path().join("node");
    let warc = data.join("warc");
    let n = node(&data, &config);
    wait_until("the node archives", || {
        find(&warc, ".warc.gz.open")
            .iter()
            .any(|f| std::fs::metadata(f).is_ok_and(|m| m.len() > 2000))
    });
    assert!(
        !has_statistics(&data, "web"),
        "no statistics before the stop"
    );
    stops_cleanly(n, "the node");
    assert_eq!(
        find(&warc, ".open"),
        Vec::<PathBuf>::new(),
        "WARC files closed"
    );
    assert!(!find(&warc, ".warc.gz").is_empty());
    assert!(
        has_statistics(&data, "web"),
        "statistics written at the stop"
    );
    let closed = find(&warc, ".warc.gz").len();
    // The next start resumes: the data directory is free, the crawl goes on into new files.
    let n = node(&data, &config);
    wait_until("the restarted node archives", || {
        !find(&warc, ".warc.gz.open").is_empty()
    });
    stops_cleanly(n, "the restarted node");
    assert!(find(&warc, ".warc.gz").len() > closed);
    assert!(find(&warc, ".open").is_empty());
    drop(web);
}

fn set_config(coll: &str) -> Message<'static> {
    Message::PpdupSetConfig(PpdupSetConfig {
        config: crawlfleet_core::marshal::Value::Dict(vec![(
            crawlfleet_core::marshal::Value::owned_bytes(coll.as_bytes().to_vec()),
            crawlfleet_core::marshal::Value::Dict(vec![]),
        )]),
        vclock: 1,
        collection: None,
    })
}

fn add(node: &str, uri: String, i: u32) -> Message<'static> {
    let mut c = [0x5au8; 16];
    c[..4].copy_from_slice(&i.to_le_bytes());
    Message::PpdupAdd(PpdupChecksum {
        collection: b"c".to_vec().into(),
        node_id: node.as_bytes().to_vec().into(),
        uri: uri.into_bytes().into(),
        checksum: Checksum(c),
        ppdup_id: None,
        dbname: None,
    })
}

#[test]
fn the_duplicate_server_and_replica_keep_their_checksums_across_sigterm() {
    let dir = temp_dir("stop-dup");
    let (sdir, rdir) = (dir.path().join("server"), dir.path().join("replica"));
    let start = |kind: &str, d: &Path, extra: &[&str]| {
        let mut args = vec![
            kind,
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            d.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        Role::start(&args)
    };
    let replica = start("dupreplica", &rdir, &[]);
    let r = replica.addr().to_string();
    let server = start("dupserver", &sdir, &["--replica", &r]);
    let mut a = Client::connect(server.addr());
    a.send(&set_config("c"));
    assert!(matches!(a.recv_reply(), Message::PpdupConfigAck(_)));
    let n = 5000u32;
    let adds: Vec<_> = (0..n)
        .map(|i| add("na", format!("http://a/{i}"), i))
        .collect();
    a.send_many(&adds);
    for _ in 0..n {
        assert!(matches!(a.recv_reply(), Message::PpdupAddOk(_)));
    }
    stops_cleanly(server, "the duplicate server");
    stops_cleanly(replica, "the replica");
    // Restarted (each data directory free again), both answer with the first owner.
    for (kind, d) in [("dupserver", &sdir), ("dupreplica", &rdir)] {
        let role = start(kind, d, &[]);
        let mut b = Client::connect(role.addr());
        b.send(&set_config("c"));
        b.recv_reply();
        let probes: Vec<_> = (0..n)
            .map(|i| add("nb", format!("http://b/{i}"), i))
            .collect();
        b.send_many(&probes);
        for i in 0..n {
            match b.recv_reply() {
                Message::PpdupAddOk(ok) => assert_eq!(
                    ok.owner_uri.as_deref(),
                    Some(format!("http://a/{i}").as_bytes()),
                    "{kind}"
                ),
                other => panic!("{kind}: {other:?}"),
            }
        }
        stops_cleanly(role, kind);
    }
}

#[test]
fn every_other_role_exits_0_on_sigterm_and_starts_again() {
    let dir = temp_dir("stop-roles");
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.html"), "a").unwrap();
    let (mn, ls, ns, rup) = (d("mn"), d("ls"), d("ns"), d("rup"));
    let multinode = [
        "multinode",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
    ];
    let roles: Vec<(&str, Vec<&str>)> = vec![
        ("multinode", [&multinode[..], &["--data-dir", &mn]].concat()),
        (
            "linkstore",
            vec!["linkstore", "--listen", "127.0.0.1:0", "--data-dir", &ls],
        ),
        (
            "nameserver",
            vec!["nameserver", "--listen", "127.0.0.1:0", "--data-dir", &ns],
        ),
        (
            "rup-server",
            vec![
                "rup-server",
                "--root",
                root.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
                "--data-dir",
                &rup,
                "--smtp",
                "127.0.0.1:9",
                "--from",
                "rup@example.org",
            ],
        ),
    ];
    for round in 0..2 {
        for (name, args) in &roles {
            let role = Role::start(args);
            // It serves: a connection is accepted.
            std::net::TcpStream::connect(role.addr()).unwrap();
            stops_cleanly(role, &format!("{name} (start {})", round + 1));
        }
    }
    // A distributor (it needs a name server) stops with its content indexes committed.
    let ns_role = Role::start(&roles[2].1);
    let nsa = ns_role.addr().to_string();
    for round in 0..2 {
        let dist = Role::start(&[
            "distributor",
            "--nameserver",
            &nsa,
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            &d("dist"),
            "--node-id",
            "1",
            "--collection",
            "web",
        ]);
        std::net::TcpStream::connect(dist.addr()).unwrap();
        stops_cleanly(dist, &format!("the distributor (start {})", round + 1));
    }
    stops_cleanly(ns_role, "the name server");
}

#[test]
fn up_stops_every_role_it_started_on_one_ctrl_c() {
    let dir = temp_dir("stop-up");
    let data = dir.path().join("data");
    let warc = dir.path().join("warc");
    let mut up = Command::new(BIN)
        .args(["up", "--synthetic-web", "4:300", "--web-base", "127.93.0.1"])
        .args(["--web-delay", "0.05", "--progress", "never"])
        .arg("--data-dir")
        .arg(&data)
        .arg("--warc")
        .arg(&warc)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("up archives", || !find(&warc, ".warc.gz.open").is_empty());
    // Statistics are merged every 60 s: none written yet.
    assert!(!data.join("multinode").join("statistics").exists());
    signal(up.id(), "-INT");
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(s) = up.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "up still runs 5 s after Ctrl-C");
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = up.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(" pages in "),
        "the summary so far: {stdout}"
    );
    // Every role flushed: statistics of the multinode scheduler and each node, WARC files
    // closed.
    assert!(
        data.join("multinode").join("statistics").exists(),
        "{stderr}"
    );
    assert!(has_statistics(&data.join("node1"), "synthetic"), "{stderr}");
    assert!(
        find(&warc, ".open").is_empty(),
        "{:?}",
        find(&warc, ".open")
    );
    assert!(!find(&warc, ".warc.gz").is_empty());
}
