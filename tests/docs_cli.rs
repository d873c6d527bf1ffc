//! `crawlfleet docs` as an operator runs it: a document log written with the core API under a
//! node's data directory, listed as lines and as JSON, from a sequence number, the held
//! documents of a suspended feed, and an unknown collection; and the documents of every node of
//! a cluster `crawlfleet up` crawled, given the directory given to `up`.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::{Command, Output};

use crawlfleet_core::feed::{FeedDoc, FeedOp, FeedSink, Feeder};
use crawlfleet_core::sched::node::collection_dir;
use serde_json::{json, Value};

use crate::util::temp_dir;

fn crawlfleet(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(args)
        .output()
        .expect("the crawlfleet binary runs")
}

fn show(args: &[&str], out: &Output) -> String {
    format!(
        "crawlfleet {}\nstatus: {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `crawlfleet docs ARGS`, expecting success; returns its standard output.
fn docs_ok(args: &[&str]) -> String {
    let mut all = vec!["docs"];
    all.extend_from_slice(args);
    let out = crawlfleet(&all);
    assert!(out.status.success(), "{}", show(&all, &out));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn docs(n: u8) -> Vec<FeedDoc> {
    let page = |i: u8, op, body: &[u8]| FeedDoc {
        op,
        uri: format!("http://example.com/p{i}").into_bytes(),
        checksum: [i; 16],
        time: 1_700_000_000 + u64::from(i),
        status: 200,
        headers: vec![("Content-Type".into(), b"text/html".to_vec())],
        body: body.to_vec(),
    };
    let mut out = vec![
        page(1, FeedOp::Add, b"<p>one</p>"),
        page(2, FeedOp::Add, b"\xff\xfe binary"),
        page(1, FeedOp::Update, b"<p>one, again</p>"),
        FeedDoc {
            status: 404,
            headers: Vec::new(),
            body: Vec::new(),
            ..page(2, FeedOp::Delete, b"")
        },
    ];
    out.truncate(n as usize);
    out
}

fn write_collection(data: &Path, name: &str) {
    let mut f = Feeder::open(&collection_dir(data, name.as_bytes())).unwrap();
    for d in docs(4) {
        f.feed(&d).unwrap();
    }
    f.sync().unwrap();
}

#[test]
fn docs_lists_every_fed_document_as_lines_and_json() {
    let data = temp_dir("docs-cli");
    write_collection(data.path(), "web");
    let d = data.path().to_str().unwrap();
    let lines = docs_ok(&["--data-dir", d, "web"]);
    let want = [
        format!(
            "1\tadd\t200\thttp://example.com/p1\t{}\t10",
            "01".repeat(16)
        ),
        format!("2\tadd\t200\thttp://example.com/p2\t{}\t9", "02".repeat(16)),
        format!(
            "3\tupdate\t200\thttp://example.com/p1\t{}\t17",
            "01".repeat(16)
        ),
        format!(
            "4\tdelete\t404\thttp://example.com/p2\t{}\t0",
            "02".repeat(16)
        ),
    ];
    assert_eq!(lines.lines().collect::<Vec<_>>(), want);

    let from = docs_ok(&["--data-dir", d, "web", "--from", "3"]);
    assert_eq!(from.lines().collect::<Vec<_>>(), want[2..]);

    let json_lines = docs_ok(&["--data-dir", d, "--json", "web"]);
    let objs: Vec<Value> = json_lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs.len(), 4);
    assert_eq!(
        objs[0],
        json!({"seq": 1, "op": "add", "status": 200, "time": 1_700_000_001u64,
               "uri": "http://example.com/p1", "checksum": "01".repeat(16), "size": 10,
               "headers": [["Content-Type", "text/html"]]})
    );
    assert_eq!(objs[3]["headers"], json!([]));

    let with_body = docs_ok(&["--data-dir", d, "--json", "--body", "web"]);
    let objs: Vec<Value> = with_body
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs[0]["body"], json!("<p>one</p>"));
    assert_eq!(objs[1]["body"], Value::Null);
    assert_eq!(objs[1]["body_base64"], json!("//4gYmluYXJ5"));
    assert_eq!(objs[3]["body"], json!(""));
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn docs_lists_held_documents_and_refuses_an_unknown_collection() {
    let data = temp_dir("docs-cli-held");
    let coll = collection_dir(data.path(), b"held coll");
    let mut f = Feeder::open(&coll).unwrap();
    f.feed(&docs(1)[0]).unwrap();
    f.suspend().unwrap();
    for d in &docs(3)[1..] {
        f.feed(d).unwrap();
    }
    f.sync().unwrap();
    drop(f);
    let d = data.path().to_str().unwrap();
    assert_eq!(docs_ok(&["--data-dir", d, "held coll"]).lines().count(), 1);
    let held = docs_ok(&["--data-dir", d, "--held", "held coll"]);
    assert_eq!(
        held.lines()
            .map(|l| l.split('\t').take(2).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>(),
        ["1 add", "2 update"]
    );

    let args = ["docs", "--data-dir", d, "nosuch"];
    let out = crawlfleet(&args);
    assert!(!out.status.success(), "{}", show(&args, &out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown collection \"nosuch\"") && err.contains("x-68656c6420636f6c6c"),
        "{}",
        show(&args, &out)
    );
    assert!(out.stdout.is_empty());

    let args = ["docs", "--data-dir", d, "--body", "held coll"];
    let out = crawlfleet(&args);
    assert!(
        !out.status.success(),
        "--body needs --json: {}",
        show(&args, &out)
    );
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn docs_of_an_up_data_dir_lists_every_node() {
    let dir = temp_dir("docs-cli-up");
    let data = dir.path().join("data");
    let d = data.to_str().unwrap();
    let base = Ipv4Addr::new(127, 91, 0, 1);
    let port = TcpListener::bind((base, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let args = [
        "up",
        "--synthetic-web",
        "4:12",
        "--web-base",
        &base.to_string(),
        "--web-port",
        &port.to_string(),
        "--nodes",
        "2",
        "--distributors",
        "0",
        "--until-idle",
        "--timeout",
        "120",
        "--progress",
        "never",
        "--data-dir",
        d,
    ];
    let out = crawlfleet(&args);
    assert!(out.status.success(), "{}", show(&args, &out));

    // Each node's own listing, with its name appended, in node order: that is the cluster's.
    let mut want = Vec::new();
    for node in ["node1", "node2"] {
        let node_dir = data.join(node);
        for line in docs_ok(&["--data-dir", node_dir.to_str().unwrap(), "synthetic"]).lines() {
            assert_eq!(line.split('\t').count(), 6, "{line}");
            want.push(format!("{line}\t{node}"));
        }
    }
    let all = docs_ok(&["--data-dir", d, "synthetic"]);
    assert_eq!(all.lines().collect::<Vec<_>>(), want);
    // 4 hosts of 12 pages each, every page fed once by the node its site is routed to.
    let uris: BTreeSet<&str> = all
        .lines()
        .filter(|l| l.split('\t').nth(1) == Some("add"))
        .map(|l| l.split('\t').nth(3).unwrap())
        .collect();
    assert!(uris.len() >= 40, "{} URIs:\n{all}", uris.len());
    assert_eq!(
        uris.len(),
        all.lines().filter(|l| l.contains("\tadd\t")).count(),
        "each URI added once across the nodes:\n{all}"
    );

    let json_lines = docs_ok(&["--data-dir", d, "--json", "synthetic"]);
    let objs: Vec<Value> = json_lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs.len(), want.len());
    for (o, line) in objs.iter().zip(&want) {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(o["seq"].to_string(), cols[0]);
        assert_eq!(o["uri"], json!(cols[3]));
        assert_eq!(o["node"], json!(cols[6]));
    }

    // --from applies to each node's log.
    let from = docs_ok(&["--data-dir", d, "synthetic", "--from", "3"]);
    let want_from: Vec<&String> = want
        .iter()
        .filter(|l| l.split('\t').next().unwrap().parse::<u64>().unwrap() >= 3)
        .collect();
    assert_eq!(from.lines().collect::<Vec<_>>(), want_from);

    let args = ["docs", "--data-dir", d, "nosuch"];
    let out = crawlfleet(&args);
    assert!(!out.status.success(), "{}", show(&args, &out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown collection \"nosuch\"")
            && err.contains("node1, node2")
            && err.contains("collections there: synthetic"),
        "{}",
        show(&args, &out)
    );
}
