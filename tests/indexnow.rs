//! IndexNow on a node's admin port (docs/indexnow.md), over real HTTP from a client written from
//! the protocol's text (python3's urllib): the key file checked on the submitting host (a
//! loopback site) before anything is queued, and every status code the protocol lists.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::sitemaps::{collection_xml, free_admin, standalone_node, Resource, TestSite};
use crate::util::{json_line, python3, stop_up_summary, temp_dir, wait_until, KillOnDrop};

/// A client as the IndexNow documentation describes one: POST of a JSON body
/// (`Content-Type: application/json; charset=utf-8`) or GET with a query, `N` times; prints
/// the status codes.
const CLIENT: &str = r#"
import sys, urllib.request, urllib.error
method, url, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = sys.stdin.buffer.read() if method == "POST" else None
codes = []
for _ in range(n):
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json; charset=utf-8")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            codes.append(r.status)
    except urllib.error.HTTPError as e:
        codes.append(e.code)
print(" ".join(str(c) for c in codes))
"#;

const KEY: &str = "a7b1c0ffee2d4e8f9a0b1c2d3e4f5a6b";
const BAD_KEY: &str = "b8c2d0ffee3e5f9a0b1c2d3e4f5a6b7c";

fn post(admin: &str, body: &str) -> u16 {
    let out = python3(
        CLIENT,
        &["POST", &format!("http://{admin}/indexnow"), "1"],
        body.as_bytes(),
    );
    out.trim().parse().unwrap_or_else(|_| panic!("{out:?}"))
}

fn get_n(admin: &str, query: &str, n: usize) -> Vec<u16> {
    let out = python3(
        CLIENT,
        &[
            "GET",
            &format!("http://{admin}/indexnow?{query}"),
            &n.to_string(),
        ],
        b"",
    );
    out.split_whitespace().map(|c| c.parse().unwrap()).collect()
}

/// Percent-encodes a query value (RFC 3986 unreserved characters kept).
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn submission(host: &str, key: &str, urls: &[&str]) -> String {
    serde_json::json!({"host": host, "key": key, "urlList": urls}).to_string()
}

/// Submits until the answer is no longer 202 (the key check done), a second apart so the rate
/// limit (one a second) is never what answers.
fn settled(admin: &str, body: &str) -> u16 {
    let mut last = 0;
    wait_until("the key check", || {
        last = post(admin, body);
        if last == 202 {
            std::thread::sleep(Duration::from_millis(1100));
        }
        last != 202
    });
    last
}

#[test]
fn indexnow_submissions_are_checked_answered_and_queued() {
    let dir = temp_dir("indexnow");
    let site = TestSite::start(Ipv4Addr::new(127, 94, 0, 1));
    let host = site.addr.ip().to_string();
    site.put(
        "/start.html",
        Resource::ok("text/html", "<html>start</html>"),
    );
    site.put(
        "/changed.html",
        Resource::ok("text/html", "<html>changed</html>"),
    );
    site.put(
        "/later.html",
        Resource::ok("text/html", "<html>later</html>"),
    );
    site.put(
        &format!("/{KEY}.txt"),
        Resource::ok("text/plain", format!("{KEY}\n")),
    );
    site.put(
        &format!("/{BAD_KEY}.txt"),
        Resource::ok("text/plain", "someone else's key"),
    );
    // A host no collection covers, with a valid key file.
    let other = TestSite::start(Ipv4Addr::new(127, 94, 0, 2));
    other.put(&format!("/{KEY}.txt"), Resource::ok("text/plain", KEY));
    other.put("/x.html", Resource::ok("text/html", "<html>x</html>"));

    let config = dir.path().join("c.xml");
    std::fs::write(
        &config,
        collection_xml("c", site.addr, &site.url("/start.html")),
    )
    .unwrap();
    let admin = free_admin();
    let _node = standalone_node(&dir.path().join("node"), &config, &admin);
    wait_until("the start page is fetched", || {
        site.hits().iter().any(|h| h.path == "/start.html")
    });

    // 400 Bad request: not JSON, no urlList.
    assert_eq!(post(&admin, "{not json"), 400);
    assert_eq!(
        post(&admin, &format!(r#"{{"host": "{host}", "key": "{KEY}"}}"#)),
        400
    );
    // 422: a key not of the protocol's format; a URL of another host.
    let changed = site.url("/changed.html");
    assert_eq!(
        post(&admin, &submission(&host, "short", &[changed.as_str()])),
        422
    );
    assert_eq!(
        post(
            &admin,
            &submission(
                &host,
                KEY,
                &[changed.as_str(), other.url("/x.html").as_str()]
            )
        ),
        422
    );
    // Nothing of these fetched a key file.
    let key_file = format!("/{KEY}.txt");
    assert!(!site.hits().iter().any(|h| h.path == key_file));

    // 202 while the key file is checked, 200 once it holds the key; the URL is fetched.
    let body = submission(&host, KEY, &[changed.as_str()]);
    assert_eq!(post(&admin, &body), 202);
    assert_eq!(settled(&admin, &body), 200);
    wait_until("the submitted page is fetched", || {
        site.hits().iter().any(|h| h.path == "/changed.html")
    });
    assert_eq!(
        site.hits().iter().filter(|h| h.path == key_file).count(),
        1,
        "the key check is cached"
    );
    // The GET form, with the key now known: 200.
    let q = format!("url={}&key={KEY}", enc(&site.url("/later.html")));
    assert_eq!(get_n(&admin, &q, 1), [200]);
    wait_until("the page submitted by GET is fetched", || {
        site.hits().iter().any(|h| h.path == "/later.html")
    });

    // 403: the key file holds another key.
    let bad = submission(&host, BAD_KEY, &[changed.as_str()]);
    assert_eq!(settled(&admin, &bad), 403);

    // A host no collection covers: accepted once its key checks, then dropped (never fetched,
    // though a later URL of the covered host submitted after it is).
    let theirs = submission(
        &other.addr.ip().to_string(),
        KEY,
        &[other.url("/x.html").as_str()],
    );
    assert_eq!(settled(&admin, &theirs), 200);
    site.put(
        "/after.html",
        Resource::ok("text/html", "<html>after</html>"),
    );
    let after = submission(&host, KEY, &[site.url("/after.html").as_str()]);
    let mut code = 0;
    wait_until("a submission past the rate limit", || {
        code = post(&admin, &after);
        code != 429 || {
            std::thread::sleep(Duration::from_millis(500));
            false
        }
    });
    assert_eq!(code, 200);
    wait_until("the later page is fetched", || {
        site.hits().iter().any(|h| h.path == "/after.html")
    });
    assert!(
        !other.hits().iter().any(|h| h.path == "/x.html"),
        "a URL no collection covers was fetched: {:?}",
        other.hits()
    );

    // 429 under a burst: ten submissions a host at once, then one a second.
    let q = format!("url={}&key={KEY}", enc("http://127.94.0.3/burst.html"));
    let codes = get_n(&admin, &q, 15);
    assert!(
        codes[..10].iter().all(|c| *c == 202 || *c == 403),
        "{codes:?}"
    );
    assert!(codes[10..].contains(&429), "{codes:?}");
}

/// `crawlfleet up`'s summary counts the IndexNow URLs its nodes dropped (their host covered by
/// no collection): every submission answered 200 or 202 hands its URL on, once the key holds.
#[test]
fn up_summary_counts_the_indexnow_urls_dropped() {
    use std::io::BufReader;
    use std::process::{Command, Stdio};
    let dir = temp_dir("indexnow-up");
    let other = TestSite::start(Ipv4Addr::new(127, 94, 1, 2));
    other.put(&format!("/{KEY}.txt"), Resource::ok("text/plain", KEY));
    let mut up = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["up", "--synthetic-web", "2:20", "--web-base", "127.94.1.10"])
        .args(["--json", "--data-dir"])
        .arg(dir.path().join("up"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("crawlfleet up runs");
    // Ended when the test fails before the SIGINT.
    let _kill = KillOnDrop(up.id());
    let mut out = BufReader::new(up.stdout.take().unwrap());
    let start = json_line(&mut out);
    let admin = start["node_admins"][0].as_str().unwrap().to_string();
    // Every node has an SMTP receiver for RUP reports (docs/rup.md).
    assert_eq!(
        start["node_smtps"].as_array().map(Vec::len),
        start["node_admins"].as_array().map(Vec::len),
        "{start}"
    );
    let body = submission(
        &other.addr.ip().to_string(),
        KEY,
        &[other.url("/x.html").as_str()],
    );
    let mut handed = 0;
    wait_until("the key check", || {
        let code = post(&admin, &body);
        assert!([200, 202, 429].contains(&code), "{code}");
        handed += u64::from(code != 429);
        if code != 200 {
            std::thread::sleep(Duration::from_millis(1100));
        }
        code == 200
    });
    let summary = stop_up_summary(&mut up, &mut out);
    assert_eq!(
        summary["indexnow_dropped"].as_u64(),
        Some(handed),
        "{summary}"
    );
    assert!(!other.hits().iter().any(|h| h.path == "/x.html"));
}
