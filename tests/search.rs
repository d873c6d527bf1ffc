//! The searchable crawl (docs/distributor.md "Search"): a real `crawlfleet distributor` fed
//! through a session (docs/distributor.md "Feeding sessions", the client tests/feed_peer.py
//! written with CPython's marshal module alone), then searched with `crawlfleet search --json`
//! on its data directory while it runs and with Python's unmodified xmlrpc.client on its
//! `--admin` port; SIGKILLed right after an acknowledged feed, and restarted without its search
//! directory, it rebuilds the full-text index from the content index.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{json, Value as Json};

use crate::distributor::{crawlfleet_json, guarantees, settle};
use crate::util::{nameserver, python3, temp_dir, wait_until, Role};

const PEER: &str = include_str!("feed_peer.py");
const XMLRPC: &str = include_str!("search_client.py");
const SF: &str = "dispatcher/1/session_factory";

/// Distributor 1 holding `web` on `listen`, its admin interface on a free port: the role and
/// the admin URL (from its second announce line).
fn distributor(ns: &Role, dir: &Path, listen: &str) -> (Role, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args([
        "distributor",
        "--nameserver",
        &ns.addr().to_string(),
        "--listen",
        listen,
        "--data-dir",
        dir.to_str().unwrap(),
        "--node-id",
        "1",
        "--collection",
        "web",
        "--check-interval-ms",
        "100",
        "--call-timeout-ms",
        "2000",
        "--admin",
        "127.0.0.1:0",
    ])
    .env(
        "RUST_LOG",
        std::env::var("CF_TEST_LOG").unwrap_or_else(|_| "warn".into()),
    )
    .stderr(Stdio::inherit())
    .stdout(Stdio::piped());
    let mut child = cmd.spawn().expect("crawlfleet runs");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    let mut second = String::new();
    out.read_line(&mut first).unwrap();
    out.read_line(&mut second).unwrap();
    let listen = first.trim().rsplit(' ').next().and_then(|a| a.parse().ok());
    assert!(listen.is_some(), "{first:?}");
    let url = second
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_owned();
    assert!(
        second.contains(" admin on http://"),
        "{cmd:?} printed {second:?}"
    );
    (Role { child, listen }, url)
}

/// Runs tests/feed_peer.py against `addr` with `steps`; one parsed reply per step.
fn peer(addr: SocketAddr, steps: &[Json]) -> Vec<Json> {
    let input: String = steps.iter().map(|s| format!("{s}\n")).collect();
    let out = python3(
        PEER,
        &[&addr.ip().to_string(), &addr.port().to_string()],
        input.as_bytes(),
    );
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Creates a session on the master at `master` (MS-FSCDFT 3.6): its address and object id.
fn session(master: SocketAddr) -> (SocketAddr, String) {
    let args = json!({"collection": "web", "guarantees": guarantees(&[]), "priority": 0,
                      "external_client": false});
    let r = peer(
        master,
        &[json!({"object": SF, "method": "create", "id": 1, "args": args})],
    );
    let aor = &r[0]["result"];
    let addr = format!("{}:{}", aor["host"].as_str().unwrap(), aor["port"])
        .parse()
        .unwrap();
    (addr, aor["object_id"].as_str().unwrap().to_owned())
}

/// An add of an HTML page.
fn add(seq: i64, uri: &str, html: &str) -> Json {
    json!({"seq": seq, "op": "add", "doc": uri, "time": 1_700_000_000 + seq,
           "checksum": {"$hex": format!("{seq:032x}")}, "status": 200,
           "headers": [["Content-Type", {"$b": "text/html; charset=utf-8"}]],
           "body": {"$b": html}})
}

/// Feeds `ops` in one request; asserts each is acknowledged (durable in the content index).
fn feed(at: SocketAddr, session: &str, id: i64, ops: Vec<Json>) {
    let want: Vec<Json> = ops.iter().map(|o| json!([o["seq"], "ok"])).collect();
    let r = peer(
        at,
        &[json!({"object": session, "method": "feed", "id": id, "args": {"ops": ops}})],
    );
    assert_eq!(r[0]["result"], Json::Array(want), "{}", r[0]);
}

/// `crawlfleet search --json` over `dirs`: (uri, snippet) of each hit, best first.
fn cli_search(dirs: &[&Path], query: &str) -> Vec<(String, String)> {
    let mut args = vec!["search".to_owned()];
    for d in dirs {
        args.extend(["--data-dir".to_owned(), d.to_str().unwrap().to_owned()]);
    }
    args.extend(["web".into(), query.into(), "--json".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let hits = crawlfleet_json(&args);
    hits.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            assert!(h["score"].as_f64().unwrap() > 0.0, "{h}");
            assert!(h["data_dir"].is_string(), "{h}");
            let uri = h["uri"].as_str().unwrap().to_owned();
            (uri, h["snippet"].as_str().unwrap().to_owned())
        })
        .collect()
}

fn uris(hits: &[(String, String)]) -> Vec<&str> {
    hits.iter().map(|h| h.0.as_str()).collect()
}

/// The distributor's XML-RPC search, through Python's xmlrpc.client.
fn xmlrpc_search(url: &str, collection: &str, query: &str, limit: i64) -> Json {
    let out = python3(XMLRPC, &[url, collection, query, &limit.to_string()], b"");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

const A: &str = "http://a.test/animals";
const B: &str = "http://b.test/travel";
const C: &str = "http://c.test/gone";
const D: &str = "http://d.test/late";

#[test]
fn fed_documents_are_searchable_and_the_index_is_rebuilt_when_lost() {
    let dir = temp_dir("search");
    let ns = nameserver(&dir.path().join("ns"));
    let data = dir.path().join("d1");
    let (d, url) = distributor(&ns, &data, "127.0.0.1:0");
    settle(&ns, &[1].into());
    let listen = format!("127.0.0.1:{}", d.addr().port() - 390);
    let (at, s) = session(d.addr());
    let page = |title: &str, body: &str| {
        format!(
            "<html><head><title>{title}</title><script>var scriptonly = 1;</script></head>\
             <body><p>{body}</p></body></html>"
        )
    };
    feed(
        at,
        &s,
        10,
        vec![
            add(
                1,
                A,
                &page("Animals", "the aardvark digs; an aardvark eats ants"),
            ),
            add(2, B, &page("Travel", "a zeppelin over the aardvark farm")),
            add(3, C, &page("Gone", "aardvark soon removed")),
        ],
    );
    feed(
        at,
        &s,
        11,
        vec![json!({"seq": 4, "op": "remove", "doc": C, "time": 1_700_000_100})],
    );
    // Committed within a second of the feed: polled, then ranked by how often the word comes.
    wait_until("the fed documents searchable", || {
        cli_search(&[&data], "aardvark").len() == 2
    });
    let hits = cli_search(&[&data], "aardvark");
    assert_eq!(uris(&hits), [A, B], "the removed page is gone");
    assert!(hits[0].1.contains("aardvark"), "{hits:?}");
    assert!(
        cli_search(&[&data], "scriptonly").is_empty(),
        "scripts are not text"
    );
    // Two directories holding the same documents: each URI once.
    assert_eq!(uris(&cli_search(&[&data, &data], "aardvark")), [A, B]);

    // The same search over XML-RPC.
    let r = xmlrpc_search(&url, "web", "zeppelin", 10);
    assert_eq!(r.as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r[0]["uri"], B, "{r}");
    assert_eq!(r[0]["title"], "Travel", "{r}");
    assert!(
        r[0]["snippet"].as_str().unwrap().contains("zeppelin"),
        "{r}"
    );
    assert!(r[0]["score"].as_f64().unwrap() > 0.0, "{r}");
    let r = xmlrpc_search(&url, "web", "aardvark", 1);
    assert_eq!(r[0]["uri"], A, "{r}");
    assert_eq!(r.as_array().unwrap().len(), 1, "{r}");
    let r = xmlrpc_search(&url, "news", "aardvark", 10);
    assert_eq!(r["fault"], 1, "{r}");
    assert!(
        r["what"]
            .as_str()
            .unwrap()
            .starts_with("unknown_collection"),
        "{r}"
    );
    let r = xmlrpc_search(&url, "web", "aardvark", 0);
    assert_eq!(r["fault"], 1, "{r}");

    // The same port's /metrics: the session and the documents of the content index.
    let admin = url.trim_start_matches("http://").trim_end_matches("/RPC2");
    let mut text = String::new();
    crate::util::wait_until("the distributor's /metrics to count the documents", || {
        text = crate::metrics::get(admin, "/metrics").2;
        let s = crawlfleet_core::metrics::parse(&text);
        let of = |n: &str| {
            s.iter()
                .find(|x| x.name == n && x.label("collection") == Some("web"))
                .map_or(0.0, |x| x.value)
        };
        of("crawlfleet_distributor_sessions") == 1.0 && of("crawlfleet_distributor_documents") > 0.0
    });
    assert!(text.contains("crawlfleet_distributor_info{node_id=\"1\",election="));
    crate::metrics::check_with_promtool("a content distributor", &text);

    // Acknowledged, then SIGKILLed at once (before the full-text commit, most likely): the
    // restart finds the full-text index behind the log and rebuilds it.
    feed(
        at,
        &s,
        12,
        vec![add(5, D, &page("Late", "quokka aardvark"))],
    );
    d.kill();
    let (d, _) = distributor(&ns, &data, &listen);
    assert_eq!(uris(&cli_search(&[&data], "quokka")), [D]);
    drop(d);
    // The search directory lost: rebuilt from the content index at start.
    std::fs::remove_dir_all(data.join("search")).unwrap();
    let (_d, url) = distributor(&ns, &data, &listen);
    assert!(data.join("search").join("web").join("meta.json").exists());
    let mut all = uris(&cli_search(&[&data], "aardvark"))
        .into_iter()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    all.sort();
    assert_eq!(all, [A, B, D]);
    let r = xmlrpc_search(&url, "web", "quokka", 10);
    assert_eq!(r[0]["uri"], D, "{r}");
}
