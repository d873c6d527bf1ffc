//! `GET /metrics` of every role of a `crawlfleet up` cluster crawling the synthetic web: the
//! text passes `promtool check metrics` (Debian's prometheus package; that check says it
//! skipped without it), and the counters are the crawl's own statistics as XML-RPC reports
//! them (CollectionGetStatistics2, "complete").

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crawlfleet_core::metrics::{parse, Sample};
use crawlfleet_core::xmlrpc::Value;
use crawlfleet_shells::admin::client;

use crate::util::temp_dir;

/// `up`, killed when dropped.
pub struct Up {
    child: Child,
    /// The start record (`up --json`'s first line).
    pub start: serde_json::Value,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    /// Starts `up --synthetic-web HOSTS:PAGES --json` in `data` with `extra` arguments.
    pub fn start(web: &str, data: &std::path::Path, extra: &[&str]) -> Up {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args(["up", "--synthetic-web", web, "--json", "--data-dir"])
            .arg(data)
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("crawlfleet up runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let start = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
        Up { child, start }
    }

    /// An address of the start record (`/`-separated path: `metrics/dupserver`).
    pub fn addr(&self, path: &str) -> String {
        let mut v = &self.start;
        for k in path.split('/') {
            v = &v[k];
        }
        v.as_str()
            .unwrap_or_else(|| panic!("{path} in {}", self.start))
            .to_string()
    }
}

/// `GET path` on `addr`: (status, content type, body).
pub fn get(addr: &str, path: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let ty = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Type: "))
        .unwrap_or("")
        .to_string();
    (status, ty, body.to_string())
}

fn promtool() -> bool {
    Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Checks `text` with `promtool check metrics`; says it skipped when promtool is missing.
pub fn check_with_promtool(what: &str, text: &str) {
    if !promtool() {
        eprintln!("skipped promtool check of {what}: promtool is not installed");
        return;
    }
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = p.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics refused the metrics of {what}:\n{}{}\n--- text\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn member<'v>(v: &'v Value, k: &str) -> Option<&'v Value> {
    match v {
        Value::Struct(m) => m.iter().find(|(n, _)| n == k).map(|(_, v)| v),
        _ => None,
    }
}

fn number(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Double(d) => *d,
        other => panic!("not a number: {other:?}"),
    }
}

/// The figures compared: name -> value, from XML-RPC's "complete" statistics.
fn from_statistics(admin: &str, coll: &str) -> BTreeMap<String, f64> {
    let r = client::call(admin, "CollectionGetStatistics2", &[coll.into()])
        .unwrap()
        .unwrap();
    let Value::Array(a) = r else { panic!("{r:?}") };
    let complete = member(&a[1], "complete").expect("complete statistics");
    let mut out = BTreeMap::new();
    for (metric, key) in [
        ("crawlfleet_pages_fetched_total", "Downloaded"),
        ("crawlfleet_uris_processed_total", "Processed"),
        ("crawlfleet_documents_stored_total", "Stored"),
        ("crawlfleet_received_bytes_total", "ReadNet"),
        ("crawlfleet_document_bytes_total", "DocSize"),
        ("crawlfleet_documents_fed_total", "PPFed"),
        ("crawlfleet_documents_indexed_total", "PPSucceeded"),
    ] {
        out.insert(metric.to_string(), number(member(complete, key).unwrap()));
    }
    for (metric, key) in [
        ("crawlfleet_http_responses_total", "HTTPResponse"),
        ("crawlfleet_uri_skips_total", "URISkip"),
        ("crawlfleet_document_skips_total", "DocSkip"),
    ] {
        if let Some(Value::Struct(buckets)) = member(complete, key) {
            for (b, n) in buckets {
                out.insert(format!("{metric}/{b}"), number(n));
            }
        }
    }
    out
}

/// The same figures from `/metrics`.
fn from_metrics(samples: &[Sample], coll: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| s.label("collection") == Some(coll))
    {
        let bucket = s.label("code").or(s.label("reason"));
        match (s.name.as_str(), bucket) {
            (
                "crawlfleet_http_responses_total"
                | "crawlfleet_uri_skips_total"
                | "crawlfleet_document_skips_total",
                Some(b),
            ) => {
                out.insert(format!("{}/{b}", s.name), s.value);
            }
            (
                "crawlfleet_pages_fetched_total"
                | "crawlfleet_uris_processed_total"
                | "crawlfleet_documents_stored_total"
                | "crawlfleet_received_bytes_total"
                | "crawlfleet_document_bytes_total"
                | "crawlfleet_documents_fed_total"
                | "crawlfleet_documents_indexed_total",
                None,
            ) => {
                out.insert(s.name.clone(), s.value);
            }
            _ => {}
        }
    }
    out
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| s.name == name && labels.iter().all(|(k, v)| s.label(k) == Some(v)))
        .map(|s| s.value)
}

/// Whether `text` declares `family` of type `kind`.
fn text_has_type(text: &str, family: &str, kind: &str) -> bool {
    text.lines().any(|l| l == format!("# TYPE {family} {kind}"))
}

/// Documents indexed as the statistics count them (PPSucceeded).
fn before_indexed(admin: &str) -> f64 {
    from_statistics(admin, "synthetic")["crawlfleet_documents_indexed_total"]
}

#[test]
fn every_role_serves_metrics_that_promtool_accepts_and_match_the_statistics() {
    let dir = temp_dir("metrics");
    let up = Up::start("3:30", &dir.path().join("data"), &["--distributors", "1"]);
    let admin = up.addr("admin");
    // Wait until the crawl's statistics hold fetched pages and documents indexed by the
    // distributor, then compare with /metrics read between two identical XML-RPC readings
    // (the figures move while the crawl runs).
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut last = String::new();
    let samples = loop {
        assert!(
            Instant::now() < deadline,
            "the metrics never matched the statistics: {last}"
        );
        std::thread::sleep(Duration::from_millis(300));
        let before = from_statistics(&admin, "synthetic");
        let indexed = before["crawlfleet_documents_indexed_total"];
        if before["crawlfleet_pages_fetched_total"] == 0.0 || indexed == 0.0 {
            last = format!("not crawled and indexed yet: {before:?}");
            continue;
        }
        let (status, ty, text) = get(&admin, "/metrics");
        assert_eq!(status, 200);
        assert!(ty.starts_with("text/plain; version=0.0.4"), "{ty}");
        let after = from_statistics(&admin, "synthetic");
        if before != after {
            last = "the statistics moved during the reading".into();
            continue;
        }
        let samples = parse(&text);
        let got = from_metrics(&samples, "synthetic");
        if got == before {
            break samples;
        }
        last = format!("\n/metrics:   {got:?}\nstatistics: {before:?}");
    };
    let page = |s: &[Sample], code: &str| {
        value(
            s,
            "crawlfleet_http_responses_total",
            &[("collection", "synthetic"), ("code", code)],
        )
    };
    assert!(page(&samples, "200").unwrap_or(0.0) > 0.0);
    assert_eq!(
        value(&samples, "crawlfleet_nodes_registered", &[]),
        Some(2.0)
    );
    assert!(value(&samples, "crawlfleet_process_resident_memory_bytes", &[]).unwrap() > 0.0);
    assert!(samples
        .iter()
        .any(|s| s.name == "crawlfleet_open_connections"
            && s.label("loop") == Some("multinode-loop")
            && s.value >= 2.0));
    assert!(samples
        .iter()
        .any(|s| s.name == "crawlfleet_event_loop_turn_seconds_count" && s.value > 0.0));
    // The multinode scheduler's loop accepted the two nodes' connections (at least).
    assert!(samples
        .iter()
        .any(|s| s.name == "crawlfleet_connections_opened_total"
            && s.label("loop") == Some("multinode-loop")
            && s.value >= 2.0));

    // Every node: its own pages, and its fetch times (one per fetch it counted).
    let mut all_fetched = 0.0;
    for node in up.start["node_admins"].as_array().unwrap() {
        let (_, _, text) = get(node.as_str().unwrap(), "/metrics");
        let s = parse(&text);
        let fetched = value(&s, "crawlfleet_pages_fetched_total", &[]).unwrap();
        all_fetched += fetched;
        let fetches = value(&s, "crawlfleet_fetch_duration_seconds_count", &[]).unwrap();
        assert!(fetched > 0.0 && fetches >= fetched, "{fetched} {fetches}");
        // The entries held in memory and their bytes come together (node only).
        let coll = [("collection", "synthetic")];
        let held = value(&s, "crawlfleet_queue_memory_entries", &coll).unwrap();
        let bytes = value(&s, "crawlfleet_queue_memory_bytes", &coll).unwrap();
        assert_eq!(held == 0.0, bytes == 0.0, "{held} entries, {bytes} bytes");
    }
    assert_eq!(
        value(&samples, "crawlfleet_queue_memory_entries", &[]),
        None,
        "the multinode scheduler holds no node's entries"
    );
    // Keep-alive: the nodes' fetchers (every `fetch` loop of the process) opened connections,
    // far fewer than the pages they fetched over them (three hosts).
    let fetch_opened: f64 = samples
        .iter()
        .filter(|s| {
            s.name == "crawlfleet_connections_opened_total"
                && s.label("loop").is_some_and(|l| l.starts_with("fetch"))
        })
        .map(|s| s.value)
        .sum();
    assert!(
        fetch_opened >= 1.0 && fetch_opened * 2.0 < all_fetched,
        "{fetch_opened} connections opened for {all_fetched} pages"
    );

    // The duplicate server and its replica hold the same checksums; every add was counted.
    let dup = parse(&get(&up.addr("metrics/dupserver"), "/metrics").2);
    let replica = parse(&get(&up.addr("metrics/dupreplica"), "/metrics").2);
    let entries = |s: &[Sample]| {
        value(
            s,
            "crawlfleet_dupserver_entries",
            &[("collection", "synthetic")],
        )
        .unwrap_or(0.0)
    };
    assert!(entries(&dup) > 0.0);
    let adds = value(&dup, "crawlfleet_dupserver_adds_total", &[]).unwrap();
    assert!(
        adds >= entries(&dup),
        "{adds} adds, {} entries",
        entries(&dup)
    );
    assert_eq!(
        value(&dup, "crawlfleet_dupserver_replica_connected", &[]),
        Some(1.0)
    );
    // The replica's lag in time: an age, 0 when nothing is pending.
    let lag = value(&dup, "crawlfleet_dupserver_replica_lag_seconds", &[]);
    assert!(lag.is_some_and(|s| (0.0..600.0).contains(&s)), "{lag:?}");
    assert!(text_has_type(
        &get(&up.addr("metrics/dupserver"), "/metrics").2,
        "crawlfleet_dupserver_replica_lag_seconds",
        "gauge"
    ));
    assert!(value(&replica, "crawlfleet_dupserver_adds_total", &[]).unwrap() > 0.0);
    // The link store stored batches with lines in them.
    let links = parse(&get(&up.addr("metrics/linkstore"), "/metrics").2);
    let batches = value(
        &links,
        "crawlfleet_linkstore_batches_total",
        &[("application", "webanalyzer"), ("collection", "synthetic")],
    );
    assert!(batches.unwrap_or(0.0) > 0.0, "{links:?}");

    // The content distributor, master of the election, received the documents' operations.
    let dist_admin = up.start["distributor_admins"][0]
        .as_str()
        .unwrap()
        .to_string();
    // Indexed first: every document acknowledged then had its operation received before.
    let indexed = before_indexed(&admin);
    let dist = parse(&get(&dist_admin, "/metrics").2);
    let info = dist
        .iter()
        .find(|s| s.name == "crawlfleet_distributor_info")
        .expect("crawlfleet_distributor_info");
    assert_eq!(info.label("election"), Some("master"));
    let ops = value(&dist, "crawlfleet_distributor_operations_total", &[]).unwrap();
    assert!(
        ops >= indexed && ops > 0.0,
        "{ops} operations, {indexed} indexed"
    );

    if !promtool() {
        eprintln!("skipped: promtool is not installed (Debian package prometheus)");
        return;
    }
    let mut endpoints = vec![
        ("the content distributor".to_string(), dist_admin),
        ("the multinode scheduler".into(), admin.clone()),
        ("the duplicate server".into(), up.addr("metrics/dupserver")),
        ("the replica".into(), up.addr("metrics/dupreplica")),
        ("the link store".into(), up.addr("metrics/linkstore")),
    ];
    for node in up.start["node_admins"].as_array().unwrap() {
        endpoints.push(("a node scheduler".into(), node.as_str().unwrap().into()));
    }
    for (what, addr) in endpoints {
        check_with_promtool(&what, &get(&addr, "/metrics").2);
    }
}

#[test]
fn metrics_ports_serve_metrics_and_refuse_the_rest() {
    let dir = temp_dir("metrics-port");
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let a = addr.to_string();
    let _role = crate::util::Role::start(&[
        "dupreplica",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--metrics-listen",
        &a,
    ]);
    let (status, _, text) = get(&a, "/metrics");
    assert_eq!(status, 200);
    assert!(text.contains("crawlfleet_dupserver_adds_total{role=\"dupreplica\"} 0\n"));
    assert_eq!(get(&a, "/").0, 405);
    assert_eq!(get(&a, "/RPC2").0, 405);
    check_with_promtool("a replica", &text);

    // The name server's.
    let ns_dir = temp_dir("metrics-ns");
    let ns_metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let _ns = crate::util::Role::start(&[
        "nameserver",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        ns_dir.path().to_str().unwrap(),
        "--metrics-listen",
        &ns_metrics,
    ]);
    let (status, _, text) = get(&ns_metrics, "/metrics");
    assert_eq!(status, 200);
    assert!(
        text.contains("\ncrawlfleet_nameserver_bindings 0\n"),
        "{text}"
    );
    check_with_promtool("the name server", &text);
}

/// A free port on loopback.
fn free_addr() -> String {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string()
}

/// The changes GetIndex lists over the last hour (draft-cosmo 3.3.4), by kind: paths.
fn index_by_kind(addr: std::net::SocketAddr) -> BTreeMap<String, f64> {
    let a = crate::rup::peer::http(addr, "GET", "/rup-cgi?Action=GetIndex&Span=1-hour", "");
    assert_eq!(a.status, 200, "{a:?}");
    let text = crate::rup::peer::pre(&a);
    let (_, lines) = text
        .split_once("\n\n")
        .expect("a blank line after the header");
    let mut out = BTreeMap::new();
    for l in lines.lines() {
        let (kw, paths) = l.split_once("]: ").unwrap();
        let kind = kw.split_once('[').unwrap().0.to_string();
        *out.entry(kind).or_default() += paths.split(", ").count() as f64;
    }
    out
}

#[test]
fn the_rup_server_serves_metrics_that_count_what_it_did() {
    use crate::rup::peer::{http, post, pre, Smtp};
    use std::sync::atomic::Ordering;

    let dir = temp_dir("metrics-rup");
    let root = dir.path().join("www");
    std::fs::create_dir_all(root.join("docs")).unwrap();
    std::fs::write(root.join("docs/a.html"), "<p>a</p>").unwrap();
    // A file named metrics is one of the site's files: /metrics is on --metrics-listen only.
    std::fs::write(root.join("metrics"), "a file of the site\n").unwrap();
    let smtp = Smtp::start();
    // Every report is refused until the robot has seen a failure.
    smtp.refuse.store(true, Ordering::SeqCst);
    let metrics = free_addr();
    let role = crate::util::Role::start(&[
        "rup-server",
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.path().join("data").to_str().unwrap(),
        "--smtp",
        &smtp.addr.to_string(),
        "--from",
        "rup@example.org",
        "--latencies",
        "second,day",
        "--retry-secs",
        "1",
        "--metrics-listen",
        &metrics,
    ]);
    let addr = role.addr();
    let read = || {
        let (status, ty, text) = get(&metrics, "/metrics");
        assert_eq!(status, 200);
        assert!(ty.starts_with("text/plain; version=0.0.4"), "{ty}");
        (parse(&text), text)
    };
    let (s, text) = read();
    assert_eq!(
        value(&s, "crawlfleet_rup_robots_registered", &[]),
        Some(0.0)
    );
    check_with_promtool("the RUP server", &text);

    // The site's own file named metrics, then a 304 for it.
    let a = http(addr, "GET", "/metrics", "");
    assert_eq!((a.status, a.body.as_str()), (200, "a file of the site\n"));
    let etag = a.header("etag").unwrap().to_owned();
    let extra = format!("If-None-Match: {etag}\r\n");
    assert_eq!(http(addr, "GET", "/metrics", &extra).status, 304);
    assert_eq!(http(addr, "GET", "/nothing", "").status, 404);

    // A robot registers over HTTP (3.1.2), plus refusals of the CGI.
    let a = post(
        addr,
        "Action=Register&RobotEmail=bot%40example.org&Latency=second",
    );
    assert_eq!(a.status, 200, "{a:?}");
    let key = pre(&a)
        .strip_prefix("RegistrationKey: ")
        .unwrap()
        .trim_end()
        .to_owned();
    assert_eq!(post(addr, "Action=Nonsense").status, 400);
    assert_eq!(post(addr, "RobotEmail=x@example.org").status, 400);
    crate::util::wait_until("a refused report", || {
        smtp.refused.load(Ordering::SeqCst) >= 1
    });
    smtp.refuse.store(false, Ordering::SeqCst);
    crate::util::wait_until("a report accepted", || {
        !smtp.to("bot@example.org").is_empty()
    });
    let form =
        format!("Action=Unregister&RegistrationKey={key}&RegisteredRobotEmail=bot%40example.org");
    assert_eq!(post(addr, &form).status, 200);

    // The counters settle at what the SMTP server and the CGI saw.
    let changes = index_by_kind(addr);
    assert!(
        changes.get("New").copied().unwrap_or(0.0) >= 2.0,
        "{changes:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, _) = read();
        let got = |name: &str, labels: &[(&str, &str)]| value(&s, name, labels).unwrap_or(-1.0);
        let want = [
            (got("crawlfleet_rup_robots_registered", &[]), 0.0),
            (
                got("crawlfleet_rup_reports_sent_total", &[]),
                smtp.to("bot@example.org").len() as f64,
            ),
            (
                got("crawlfleet_rup_reports_failed_total", &[]),
                smtp.refused.load(Ordering::SeqCst) as f64,
            ),
            (
                got(
                    "crawlfleet_rup_cgi_requests_total",
                    &[("action", "Register"), ("status", "200")],
                ),
                1.0,
            ),
            (
                got(
                    "crawlfleet_rup_cgi_requests_total",
                    &[("action", "Unregister"), ("status", "200")],
                ),
                1.0,
            ),
            (
                got(
                    "crawlfleet_rup_cgi_requests_total",
                    &[("action", "other"), ("status", "400")],
                ),
                1.0,
            ),
            (
                got(
                    "crawlfleet_rup_cgi_requests_total",
                    &[("action", "none"), ("status", "400")],
                ),
                1.0,
            ),
            (
                got(
                    "crawlfleet_rup_cgi_requests_total",
                    &[("action", "GetIndex"), ("status", "200")],
                ),
                1.0,
            ),
            (got("crawlfleet_rup_files_served_total", &[]), 1.0),
            (got("crawlfleet_rup_files_not_modified_total", &[]), 1.0),
            (
                got("crawlfleet_rup_modlog_entries", &[("kind", "New")]),
                changes.get("New").copied().unwrap_or(0.0),
            ),
            (
                got("crawlfleet_rup_modlog_entries", &[("kind", "Delete")]),
                changes.get("Delete").copied().unwrap_or(0.0),
            ),
        ];
        if want.iter().all(|(g, w)| g == w) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the RUP server's metrics never matched, (metric, expected): {want:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let (s, text) = read();
    assert!(value(&s, "crawlfleet_process_resident_memory_bytes", &[]).unwrap() > 0.0);
    assert!(value(&s, "crawlfleet_process_open_fds", &[]).unwrap() > 0.0);
    check_with_promtool("the RUP server", &text);
    assert_eq!(get(&metrics, "/rupinfo.txt").0, 405, "only /metrics there");
    drop(role);

    // Off loopback without a token: refused at the start, as every administrative port is.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["rup-server", "--root"])
        .arg(&root)
        .args(["--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .args([
            "--smtp",
            &smtp.addr.to_string(),
            "--from",
            "rup@example.org",
        ])
        .args(["--metrics-listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--admin-token-file"), "{stderr}");
}
