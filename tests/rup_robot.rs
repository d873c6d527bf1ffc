//! The node scheduler as a RUP robot (draft-cosmo), end to end on loopback: a real
//! `crawlfleet rup-server` (its access log counts the requests per path), a real standalone
//! `crawlfleet node`, and between them the test's SMTP receiver, which relays each report to
//! the node (through `crawlfleet rup-deliver` or the node's own `--rup-smtp`) or drops it on
//! purpose. Checked: registration once (3.1.2, across a restart), New / Change fetched and
//! Delete removed as the reports say (3.2) and nothing else fetched, refresh cycles included;
//! a dropped report made up for by GetSequenceNumber and GetIndex (3.3.3); a loss beyond
//! MaxQuerySpan made up for by one full refresh; Unregister (3.3.1) when RUP is turned off.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::feed::{DocLogReader, FeedOp, DOCS_DIR};
use crawlfleet_core::sched::node::collection_dir;
use crawlfleet_core::store::{store_dir, CrawlStore};

use crate::rup::peer::Smtp;
use crate::util::{temp_dir, wait_until, Role};

const COLLECTION: &[u8] = b"rupweb";
const ROBOT: &str = "robot@example.org";
const PAGES: [&str; 5] = ["p1.html", "p2.html", "p3.html", "p4.html", "p5.html"];

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes `path` under `root` whole (beside the root, then renamed in), so that the server's
/// watcher sees one new or changed file.
fn put(root: &Path, path: &str, content: &str) {
    let tmp = root.parent().unwrap().join("put.tmp");
    std::fs::write(&tmp, content).unwrap();
    std::fs::rename(&tmp, root.join(path)).unwrap();
}

/// A site of an index linking five pages.
fn site(root: &Path) {
    std::fs::create_dir_all(root).unwrap();
    let links: String = PAGES
        .iter()
        .map(|p| format!("<a href=\"{p}\">{p}</a>\n"))
        .collect();
    put(
        root,
        "index.html",
        &format!("<html><body>{links}</body></html>"),
    );
    for p in PAGES {
        put(
            root,
            p,
            &format!("<html><body>page {p}, first</body></html>"),
        );
    }
}

fn rup_server(root: &Path, data: &Path, smtp: &Smtp, log: &Path, max_span: &str) -> Role {
    Role::start(&[
        "rup-server",
        "--root",
        root.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
        "--smtp",
        &smtp.addr.to_string(),
        "--from",
        "rup@example.org",
        "--latencies",
        "second,day",
        "--max-query-span",
        max_span,
        "--rescan-secs",
        "1",
        "--retry-secs",
        "1",
        "--access-log",
        log.to_str().unwrap(),
    ])
}

/// The collection: the site's index as start URI, no delay, refresh cycles every 1.2 s
/// (append: the queue is kept), RUP on with a one-second latency unless `rup_on` is false.
fn config(path: &Path, server: SocketAddr, rup_on: bool) {
    let enabled = if rup_on { "yes" } else { "no" };
    std::fs::write(
        path,
        format!(
            r#"<?xml version="1.0" encoding="utf-8"?>
<CrawlerConfig>
  <DomainSpecification name="rupweb">
    <attrib name="start_uris" type="list-string"><member>http://{server}/index.html</member></attrib>
    <attrib name="delay" type="real">0</attrib>
    <attrib name="refresh" type="real">0.02</attrib>
    <attrib name="refresh_mode" type="string">append</attrib>
    <section name="rup">
      <attrib name="robot_email" type="string">{ROBOT}</attrib>
      <attrib name="latency" type="string">1-second</attrib>
      <attrib name="enabled" type="boolean">{enabled}</attrib>
    </section>
  </DomainSpecification>
</CrawlerConfig>
"#
        ),
    )
    .unwrap();
}

fn node(data: &Path, config: &Path, smtp: Option<u16>) -> Role {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args([
        "node",
        "--standalone",
        "--admin",
        "127.0.0.1:0",
        "--sync-ms",
        "20",
        "--quarantine-interval",
        "0.5",
    ])
    .arg("--config")
    .arg(config)
    .arg("--data-dir")
    .arg(data)
    .env(
        "RUST_LOG",
        std::env::var("CF_TEST_LOG").unwrap_or_else(|_| "warn".into()),
    )
    .stderr(Stdio::inherit());
    if let Some(p) = smtp {
        cmd.arg("--rup-smtp").arg(format!("127.0.0.1:{p}"));
    }
    Role::spawn(cmd)
}

/// The server's access log: (method, path, CGI action, status) per request.
fn accesses(log: &Path) -> Vec<(String, String, String, u16)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 4).then(|| {
                (
                    f[0].to_owned(),
                    f[1].to_owned(),
                    f[2].to_owned(),
                    f[3].parse().unwrap(),
                )
            })
        })
        .collect()
}

/// GETs per page path (index and pages only).
fn gets(log: &Path) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for (method, path, _, _) in accesses(log) {
        if method == "GET" && path.ends_with(".html") {
            *m.entry(path.trim_start_matches('/').to_owned())
                .or_default() += 1;
        }
    }
    m
}

/// CGI requests of `action`.
fn cgi(log: &Path, action: &str) -> usize {
    accesses(log)
        .iter()
        .filter(|(_, _, a, s)| a == action && *s == 200)
        .count()
}

fn count(log: &Path, page: &str) -> usize {
    gets(log).get(page).copied().unwrap_or(0)
}

/// URI -> (adds, deletes) in the node's document log.
fn fed(data: &Path) -> BTreeMap<String, (u32, u32)> {
    let mut out: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let Ok(reader) = DocLogReader::open(&collection_dir(data, COLLECTION).join(DOCS_DIR)) else {
        return out;
    };
    for r in reader {
        let Ok((_, doc)) = r else { break };
        let e = out
            .entry(String::from_utf8_lossy(&doc.uri).into_owned())
            .or_default();
        match doc.op {
            FeedOp::Delete => e.1 += 1,
            _ => e.0 += 1,
        }
    }
    out
}

/// How the relay hands a report to the node.
enum Deliver {
    /// `crawlfleet rup-deliver --data-dir` with the mail on standard input.
    Pipe(PathBuf),
    /// SMTP to the node's `--rup-smtp` port.
    Smtp(SocketAddr),
}

/// Relays the reports the test's SMTP receiver gets to the node, one at a time, in order;
/// drops the next report holding a change line while `drop_next` is set, and whatever the node
/// does not take.
struct Relay {
    stop: Arc<AtomicBool>,
    drop_next: Arc<AtomicBool>,
    dropped: Arc<AtomicUsize>,
    delivered: Arc<AtomicUsize>,
}

impl Relay {
    fn start(smtp: &Smtp, how: Deliver) -> Relay {
        let r = Relay {
            stop: Arc::default(),
            drop_next: Arc::default(),
            dropped: Arc::default(),
            delivered: Arc::default(),
        };
        let (stop, drop_next, dropped, delivered) = (
            r.stop.clone(),
            r.drop_next.clone(),
            r.dropped.clone(),
            r.delivered.clone(),
        );
        let mails = smtp.mails.clone();
        std::thread::spawn(move || {
            let mut next = 0;
            while !stop.load(Ordering::SeqCst) {
                let m = mails.lock().unwrap().get(next).cloned();
                let Some(m) = m else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                next += 1;
                let changes = m.body.lines().skip(3).any(|l| !l.is_empty());
                if changes && drop_next.swap(false, Ordering::SeqCst) {
                    dropped.fetch_add(1, Ordering::SeqCst);
                    continue;
                }
                let raw = format!("{}\r\n\r\n{}", m.head, m.body);
                let ok = match &how {
                    Deliver::Pipe(dir) => pipe(dir, raw.as_bytes()),
                    Deliver::Smtp(addr) => smtp_send(*addr, &raw).is_ok(),
                };
                if ok {
                    delivered.fetch_add(1, Ordering::SeqCst);
                } else {
                    dropped.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
        r
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn pipe(dir: &Path, raw: &[u8]) -> bool {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["rup-deliver", "--data-dir"])
        .arg(dir)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    // A refusing rup-deliver may exit before it reads: the pipe's error is its answer.
    let _ = child.stdin.take().unwrap().write_all(raw);
    child.wait().unwrap().success()
}

/// One mail to the robot over SMTP (dot-stuffed, RFC 5321 4.5.2).
fn smtp_send(addr: SocketAddr, raw: &str) -> std::io::Result<()> {
    let c = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut w = c.try_clone()?;
    let mut r = BufReader::new(c);
    let mut expect = |code: &str| -> std::io::Result<()> {
        loop {
            let mut l = String::new();
            r.read_line(&mut l)?;
            if !l.starts_with(code) {
                return Err(std::io::Error::other(format!("wanted {code}, got {l:?}")));
            }
            if l.as_bytes().get(3) != Some(&b'-') {
                return Ok(());
            }
        }
    };
    expect("220")?;
    for (cmd, code) in [
        ("EHLO test".to_owned(), "250"),
        ("MAIL FROM:<rup@example.org>".to_owned(), "250"),
        (format!("RCPT TO:<{ROBOT}>"), "250"),
        ("DATA".to_owned(), "354"),
    ] {
        w.write_all(format!("{cmd}\r\n").as_bytes())?;
        expect(code)?;
    }
    for line in raw.split_inclusive("\r\n") {
        if line.starts_with('.') {
            w.write_all(b".")?;
        }
        w.write_all(line.as_bytes())?;
    }
    if !raw.ends_with("\r\n") {
        w.write_all(b"\r\n")?;
    }
    w.write_all(b".\r\n")?;
    expect("250")?;
    w.write_all(b"QUIT\r\n")?;
    Ok(())
}

/// Waits until the relay handed `n` more reports to the node than `from`.
fn reports(relay: &Relay, from: usize, n: usize) {
    wait_until("reports delivered", || {
        relay.delivered.load(Ordering::SeqCst) >= from + n
    });
}

#[test]
fn rup_robot_fetches_what_reports_name_and_recovers_a_lost_one() {
    let dir = temp_dir("rup-robot");
    let (root, log) = (dir.path().join("root"), dir.path().join("access.log"));
    site(&root);
    let smtp = Smtp::start();
    let server = rup_server(&root, &dir.path().join("rup"), &smtp, &log, "1-hour");
    let data = dir.path().join("node");
    let cfg = dir.path().join("rupweb.xml");
    config(&cfg, server.addr(), true);
    let node = node(&data, &cfg, None);
    // The first crawl, and one Register (3.1.2) when the site started.
    wait_until("the first crawl", || gets(&log).len() == 6);
    wait_until("the robot registers", || cgi(&log, "Register") == 1);
    let relay = Relay::start(&smtp, Deliver::Pipe(data.clone()));
    // Past any refresh cycle begun before the registration took effect.
    reports(&relay, 0, 2);
    let base = gets(&log);

    // 3.2: a change, a deletion and a new page (linked from nowhere: only the report names it).
    put(
        &root,
        "p1.html",
        "<html><body>page p1, second</body></html>",
    );
    std::fs::remove_file(root.join("p2.html")).unwrap();
    put(&root, "p6.html", "<html><body>page p6, new</body></html>");
    let p2 = format!("http://{}/p2.html", server.addr());
    wait_until(
        "the changed and new pages fetched, the deleted one fed as a delete",
        || {
            count(&log, "p1.html") == base["p1.html"] + 1
                && count(&log, "p6.html") == 1
                && fed(&data).get(&p2).is_some_and(|&(_, d)| d == 1)
        },
    );
    // Reports keep coming (one a second) and refresh cycles go by (one every 1.2 s): nothing
    // else is fetched, the deleted page included.
    let d = relay.delivered.load(Ordering::SeqCst);
    reports(&relay, d, 4);
    let mut want = base.clone();
    *want.get_mut("p1.html").unwrap() += 1;
    want.insert("p6.html".into(), 1);
    assert_eq!(gets(&log), want, "GETs per page");

    // 3.3.3: a report dropped on purpose; the next one shows the gap, and GetSequenceNumber
    // and GetIndex make it up.
    relay.drop_next.store(true, Ordering::SeqCst);
    put(
        &root,
        "p3.html",
        "<html><body>page p3, second</body></html>",
    );
    wait_until("the report of p3 dropped", || {
        relay.dropped.load(Ordering::SeqCst) == 1
    });
    wait_until("p3 fetched again through GetIndex", || {
        count(&log, "p3.html") == base["p3.html"] + 1
    });
    assert!(cgi(&log, "GetSequenceNumber") >= 1);
    assert!(cgi(&log, "GetIndex") >= 1);
    assert_eq!(cgi(&log, "Register"), 1, "registered once");
    drop(relay);
    node.kill();

    // The deleted page is out of the crawl store.
    let store = CrawlStore::open(&store_dir(&collection_dir(&data, COLLECTION))).unwrap();
    assert!(
        store.get(p2.as_bytes()).is_none(),
        "{p2} still in the store"
    );
    let p1 = format!("http://{}/p1.html", server.addr());
    assert!(store.get(p1.as_bytes()).is_some());
}

#[test]
fn rup_robot_refreshes_a_site_whole_past_max_query_span_and_unregisters() {
    let dir = temp_dir("rup-robot-span");
    let (root, log) = (dir.path().join("root"), dir.path().join("access.log"));
    site(&root);
    let smtp = Smtp::start();
    let server = rup_server(&root, &dir.path().join("rup"), &smtp, &log, "3-second");
    let data = dir.path().join("node");
    let cfg = dir.path().join("rupweb.xml");
    config(&cfg, server.addr(), true);
    let port = free_port();
    let relay = Relay::start(&smtp, Deliver::Smtp(([127, 0, 0, 1], port).into()));
    let n = node(&data, &cfg, Some(port));
    wait_until("the first crawl", || gets(&log).len() == 6);
    wait_until("the robot registers", || cgi(&log, "Register") == 1);
    reports(&relay, 0, 2);
    let base = gets(&log);
    // Down (SIGKILL) while a page changes and more than MaxQuerySpan of reports go lost.
    n.kill();
    put(
        &root,
        "p1.html",
        "<html><body>page p1, second</body></html>",
    );
    let lost = relay.dropped.load(Ordering::SeqCst);
    wait_until("reports lost while the node is down", || {
        relay.dropped.load(Ordering::SeqCst) >= lost + 5
    });
    let n = node(&data, &cfg, Some(port));
    // The next report shows the gap; GetIndex cannot reach back that far: one full refresh,
    // every page of the site fetched once more.
    wait_until("the site refreshed whole", || {
        PAGES.iter().all(|p| count(&log, p) == base[*p] + 1)
    });
    let d = relay.delivered.load(Ordering::SeqCst);
    reports(&relay, d, 3);
    for p in PAGES {
        assert_eq!(
            count(&log, p),
            base[p] + 1,
            "{p}: fetched once more, no more"
        );
    }
    // Conditionally: the changed page whole, the others 304.
    let last = |page: &str| {
        accesses(&log)
            .into_iter()
            .filter(|(m, p, _, _)| m == "GET" && p == page)
            .map(|a| a.3)
            .next_back()
    };
    assert_eq!(last("/p1.html"), Some(200));
    assert_eq!(last("/p2.html"), Some(304));
    assert_eq!(cgi(&log, "Register"), 1, "the key survived the restart");
    assert_eq!(
        cgi(&log, "GetIndex"),
        0,
        "past MaxQuerySpan GetIndex is not asked"
    );
    n.kill();

    // RUP turned off for the collection (3.3.1): the node unregisters.
    config(&cfg, server.addr(), false);
    let n = node(&data, &cfg, Some(port));
    wait_until("the robot unregisters", || cgi(&log, "Unregister") == 1);
    n.kill();
}

/// Reads one SMTP reply (all its lines); its code.
fn reply(r: &mut impl BufRead) -> String {
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).unwrap_or(0) == 0 {
            return String::new();
        }
        if l.as_bytes().get(3) != Some(&b'-') {
            return l.get(..3).unwrap_or("").to_owned();
        }
    }
}

fn session(addr: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    assert_eq!(reply(&mut r), "220");
    (c, r)
}

fn say(w: &mut TcpStream, r: &mut impl BufRead, line: &str) -> String {
    w.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    reply(r)
}

#[test]
fn rup_smtp_receiver_keeps_its_limits_and_bad_mail_is_dropped() {
    let dir = temp_dir("rup-robot-smtp");
    let data = dir.path().join("node");
    let cfg = dir.path().join("rupweb.xml");
    // No site is reachable: only the receiver and the spool are at work.
    config(&cfg, ([127, 0, 0, 1], free_port()).into(), true);
    let port = free_port();
    let node = node(&data, &cfg, Some(port));
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    wait_until("the receiver takes mail for the robot", || {
        let Ok(c) = TcpStream::connect(addr) else {
            return false;
        };
        let (mut w, mut r) = (c.try_clone().unwrap(), BufReader::new(c));
        reply(&mut r) == "220"
            && say(&mut w, &mut r, "HELO t") == "250"
            && say(&mut w, &mut r, "MAIL FROM:<a@example.org>") == "250"
            && say(&mut w, &mut r, &format!("RCPT TO:<{ROBOT}>")) == "250"
    });
    // Mail for anyone else is refused (RFC 5321 4.2.3: 550), as is RCPT before MAIL.
    let (mut w, mut r) = session(addr);
    assert_eq!(say(&mut w, &mut r, "RCPT TO:<robot@example.org>"), "503");
    assert_eq!(say(&mut w, &mut r, "MAIL FROM:<a@example.org>"), "250");
    assert_eq!(say(&mut w, &mut r, "RCPT TO:<other@example.org>"), "550");
    assert_eq!(say(&mut w, &mut r, "DATA"), "503");
    // A message over the size limit: 552, and the session goes on.
    assert_eq!(say(&mut w, &mut r, &format!("RCPT TO:<{ROBOT}>")), "250");
    assert_eq!(say(&mut w, &mut r, "DATA"), "354");
    let line = format!("{}\r\n", "x".repeat(998));
    for _ in 0..(17 << 20) / line.len() {
        w.write_all(line.as_bytes()).unwrap();
    }
    assert_eq!(say(&mut w, &mut r, "."), "552");
    assert_eq!(say(&mut w, &mut r, "NOOP"), "250");
    // A line past the limit: 500 and the connection closed.
    w.write_all("y".repeat(8 << 10).as_bytes()).unwrap();
    assert_eq!(reply(&mut r), "500");
    assert_eq!(reply(&mut r), "", "closed");
    // Sessions beyond 16 at once are turned away (421).
    let held: Vec<_> = (0..16).map(|_| session(addr)).collect();
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    assert_eq!(reply(&mut BufReader::new(c)), "421");
    drop(held);
    // Mail that is no report is dropped from the spool with a warning; rup-deliver refuses an
    // empty mail and a missing directory.
    assert!(pipe(&data, b"Subject: hello\r\n\r\nnot a report\r\n"));
    wait_until("the spool emptied", || {
        std::fs::read_dir(data.join("rup-spool"))
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("mail-"))
    });
    assert!(!pipe(&data, b""));
    assert!(!pipe(&dir.path().join("nowhere"), b"Subject: x\r\n\r\n"));
    // A report of a site this node never registered with is taken (250) and dropped without
    // being spooled: the robot would drop it (a mail server may hand every node each report).
    let (mut w, mut r) = session(addr);
    assert_eq!(say(&mut w, &mut r, "HELO t"), "250");
    assert_eq!(say(&mut w, &mut r, "MAIL FROM:<rup@example.org>"), "250");
    assert_eq!(say(&mut w, &mut r, &format!("RCPT TO:<{ROBOT}>")), "250");
    assert_eq!(say(&mut w, &mut r, "DATA"), "354");
    w.write_all(
        b"Subject: RUP report\r\n\r\nSequenceNumber: 1\r\nURLBase: http://127.0.0.9:1/\r\n\r\n\
          New[2026-11-25T10:00:00Z]: a.html\r\n.\r\n",
    )
    .unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("250 ") && line.contains("dropped"),
        "{line:?}"
    );
    node.kill();
}
