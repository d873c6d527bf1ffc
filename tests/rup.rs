//! `crawlfleet rup-server` (draft-cosmo) over real HTTP and real SMTP on loopback: rupinfo.txt
//! (3.1.1), the CGI actions (3.1.2, 3.3.1-3.3.4) and their refusals, the update reports (3.2)
//! byte for byte with their sequence numbers and filters, retried sends, the static side, and
//! the modification log across a SIGKILL.

pub(crate) mod peer;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::Ordering;

use crate::util::{python3, temp_dir, wait_until, Role};
use peer::{http, http_raw, post, pre, Smtp};

fn start(root: &Path, data: &Path, smtp: &Smtp) -> Role {
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
        "second,day,week",
        "--max-query-span",
        "1-hour",
        "--exclude",
        "^tmp/",
        "--include-only",
        "^docs/",
        "--rescan-secs",
        "1",
        "--retry-secs",
        "1",
    ])
}

/// Writes `path` under `root` whole: written beside the root, then renamed in, so that the
/// watcher sees one new or changed file, never a half-written one.
fn put(root: &Path, path: &str, content: &str) {
    let tmp = root.parent().unwrap().join("put.tmp");
    std::fs::write(&tmp, content).unwrap();
    let dst = root.join(path);
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::rename(&tmp, dst).unwrap();
}

fn register(addr: SocketAddr, form: &str) -> String {
    let a = post(addr, form);
    assert_eq!(a.status, 200, "{a:?}");
    let text = pre(&a);
    let key = text
        .strip_prefix("RegistrationKey: ")
        .expect("the key line");
    key.trim_end().to_owned()
}

fn seqno(addr: SocketAddr, key: &str, email: &str) -> Option<u64> {
    let a = post(
        addr,
        &format!("Action=GetSequenceNumber&RegistrationKey={key}&RegisteredRobotEmail={email}"),
    );
    (a.status == 200).then(|| {
        pre(&a)
            .trim()
            .strip_prefix("SequenceNumber=")
            .unwrap()
            .parse()
            .unwrap()
    })
}

/// The change lines of GetIndex over the last hour (3.3.4), unfiltered.
fn index(addr: SocketAddr) -> Vec<String> {
    let a = http(addr, "GET", "/rup-cgi?Action=GetIndex&Span=1-hour", "");
    assert_eq!(a.status, 200, "{a:?}");
    let text = pre(&a);
    let (head, lines) = text
        .split_once("\n\n")
        .expect("3.2: a blank line after the header");
    assert_eq!(head, format!("SequenceNumber: 0\nURLBase: http://{addr}/"));
    lines.lines().map(str::to_owned).collect()
}

/// Checks a change line's shape (3.2 with our date format) and gives (kind, paths).
fn parse_line(l: &str) -> (String, Vec<String>) {
    let (kw, paths) = l.split_once("]: ").unwrap_or_else(|| panic!("{l:?}"));
    let (kind, date) = kw.split_once('[').unwrap();
    assert!(["New", "Change", "Delete"].contains(&kind), "{l:?}");
    let b = date.as_bytes();
    assert!(
        b.len() == 20 && b[4] == b'-' && b[10] == b'T' && b[19] == b'Z',
        "date {date:?}"
    );
    (
        kind.to_owned(),
        paths.split(", ").map(str::to_owned).collect(),
    )
}

/// Waits until GetIndex holds `n` more lines than `before` and gives them.
fn new_lines(addr: SocketAddr, before: &[String], n: usize) -> Vec<String> {
    let mut now = Vec::new();
    wait_until("the change in GetIndex", || {
        now = index(addr);
        now.len() >= before.len() + n
    });
    assert_eq!(&now[..before.len()], before, "GetIndex's older lines stay");
    assert_eq!(now.len(), before.len() + n, "{now:#?}");
    now[before.len()..].to_vec()
}

/// Clock ticks per second of /proc/PID/stat's times (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// User and system CPU time of process `pid` so far, in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command name (in parentheses): utime and stime are the 12th and
    // 13th of them (proc(5): fields 14 and 15).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn rup_server_actions_reports_and_static_files() {
    let dir = temp_dir("rup");
    let root = dir.path().join("www");
    for (p, c) in [
        ("a.html", "<p>a</p>"),
        ("docs/b.html", "<p>b</p>"),
        ("tmp/c.html", "c"),
    ] {
        put(&root, p, c);
    }
    std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("out")).unwrap();
    let smtp = Smtp::start();
    let role = start(&root, &dir.path().join("data"), &smtp);
    let addr = role.addr();

    // 3.1.1 (the draft's "/rupinfo.tex" is a typo against its heading).
    let info = http(addr, "GET", "/rupinfo.txt", "");
    assert_eq!(info.status, 200);
    assert_eq!(
        info.body,
        format!(
            "RUP-CGI: http://{addr}/rup-cgi\nAuthentifier: none\nLatency: second, day, week\n\
             Exclude: ^tmp/\nIncludeOnly: ^docs/\nMaxQuerySpan: 1-hour\n"
        )
    );

    // The static side: validators, 304, HEAD, nothing outside the root.
    let a = http(addr, "GET", "/a.html", "");
    assert_eq!((a.status, a.body.as_str()), (200, "<p>a</p>"));
    let etag = a.header("etag").unwrap().to_owned();
    let lm = a.header("last-modified").unwrap().to_owned();
    let inm = http(
        addr,
        "GET",
        "/a.html",
        &format!("If-None-Match: {etag}\r\n"),
    );
    assert_eq!((inm.status, inm.body.as_str()), (304, ""));
    assert_eq!(inm.header("etag"), Some(etag.as_str()));
    assert_eq!(
        http(
            addr,
            "GET",
            "/a.html",
            &format!("If-Modified-Since: {lm}\r\n")
        )
        .status,
        304
    );
    assert_eq!(
        http(addr, "GET", "/a.html", "If-None-Match: \"other\"\r\n").status,
        200
    );
    let head = http(addr, "HEAD", "/a.html", "");
    assert_eq!(
        (
            head.status,
            head.header("content-length"),
            head.body.as_str()
        ),
        (200, Some("8"), "")
    );
    assert_eq!(http(addr, "GET", "/docs/", "").status, 404);
    assert_eq!(http(addr, "GET", "/../etc/passwd", "").status, 403);
    assert_eq!(
        http(addr, "GET", "/docs/%2e%2e/%2e%2e/secret.txt", "").status,
        403
    );
    assert_eq!(
        http(addr, "GET", "/out", "").status,
        403,
        "a symlink out of the root"
    );
    assert_eq!(http(addr, "GET", "/missing.html", "").status, 404);
    assert_eq!(http(addr, "DELETE", "/a.html", "").status, 405);

    // 3.1.2 through Python's standard library, as any robot would POST it.
    let script = "import sys, urllib.parse, urllib.request\n\
        data = urllib.parse.urlencode({'Action': 'Register', 'RobotEmail': 'bot1@example.org', \
        'Latency': '1-second', 'Exclude': '^tmp/'}).encode()\n\
        print(urllib.request.urlopen(sys.argv[1], data, timeout=20).read().decode())";
    let doc = python3(script, &[&format!("http://{addr}/rup-cgi")], b"");
    let key = doc
        .lines()
        .find_map(|l| l.strip_prefix("RegistrationKey: "))
        .expect("3.1.2: the RegistrationKey line")
        .to_owned();
    assert_eq!(key.len(), 32);

    // 3.3.3: a report each period, empty when nothing changed.
    wait_until("the first report", || {
        !smtp.to("bot1@example.org").is_empty()
    });
    let first = &smtp.to("bot1@example.org")[0];
    assert_eq!(
        first.body,
        format!("SequenceNumber: 1\r\nURLBase: http://{addr}/\r\n\r\n")
    );
    assert!(
        first.head.contains("Content-Type: text/plain"),
        "{}",
        first.head
    );

    // The changes, one at a time so that each is a line of its own.
    let before = index(addr);
    put(&root, "docs/e.html", "<p>e</p>");
    let l1 = new_lines(addr, &before, 1);
    put(&root, "a.html", "<p>a, changed</p>");
    let l2 = new_lines(addr, &[&before[..], &l1[..]].concat(), 1);
    std::fs::remove_file(root.join("docs/b.html")).unwrap();
    let l3 = new_lines(addr, &[&before[..], &l1[..], &l2[..]].concat(), 1);
    put(&root, "tmp/d.html", "d");
    let l4 = new_lines(addr, &[&before[..], &l1[..], &l2[..], &l3[..]].concat(), 1);
    let got: Vec<_> = [&l1, &l2, &l3, &l4]
        .iter()
        .map(|l| parse_line(&l[0]))
        .collect();
    let want = [
        ("New", "docs/e.html"),
        ("Change", "a.html"),
        ("Delete", "docs/b.html"),
        ("New", "tmp/d.html"),
    ];
    for ((kind, paths), (k, p)) in got.iter().zip(want) {
        assert_eq!((kind.as_str(), paths.as_slice()), (k, &[p.to_owned()][..]));
    }

    // Every report since: numbered 1, 2, 3, ... and, byte for byte, the header and the
    // filtered (Exclude ^tmp/) change lines, which together are GetIndex's minus tmp/.
    let mut mails = Vec::new();
    let expected = [l1[0].clone(), l2[0].clone(), l3[0].clone()].join("\r\n") + "\r\n";
    wait_until("the reports of the changes", || {
        let n = seqno(addr, &key, "bot1%40example.org").unwrap();
        mails = smtp.to("bot1@example.org");
        let lines: String = mails
            .iter()
            .map(|m| m.body.split_once("\r\n\r\n").unwrap().1)
            .collect();
        lines == expected && n as usize == mails.len()
    });
    for (i, m) in mails.iter().enumerate() {
        let header = format!(
            "SequenceNumber: {}\r\nURLBase: http://{addr}/\r\n\r\n",
            i + 1
        );
        assert!(m.body.starts_with(&header), "{:?}", m.body);
    }

    // 3.3.2: IncludeOnly replaces Exclude; only the items given change.
    let id = format!("RegistrationKey={key}&RegisteredRobotEmail=bot1%40example.org");
    let a = post(
        addr,
        &format!("Action=ModifyPreferences&{id}&IncludeOnly=%5Edocs%2F"),
    );
    assert_eq!(a.status, 200, "{a:?}");
    let seen = smtp.to("bot1@example.org").len();
    put(&root, "g.html", "g");
    put(&root, "docs/f.html", "f");
    wait_until("a report naming docs/f.html", || {
        smtp.to("bot1@example.org")[seen..]
            .iter()
            .any(|m| m.body.contains("docs/f.html"))
    });
    assert!(smtp
        .to("bot1@example.org")
        .iter()
        .all(|m| !m.body.contains("g.html")));

    // The refusals: 400 and 501, each with a one-line reason.
    for (form, status) in [
        ("Action=Register", 400),
        ("Action=Register&RobotEmail=not-an-address", 400),
        ("Action=Register&RobotEmail=x%40example.org&Latency=0-day", 400),
        ("Action=Register&RobotEmail=x%40example.org&Latency=month", 501),
        ("Action=Register&RobotEmail=x%40example.org&Exclude=%5Edocs%2F", 501),
        ("Action=Register&RobotEmail=x%40example.org&Exclude=%5Etmp%2F&IncludeOnly=%5Edocs%2F", 400),
        ("Action=Launch", 400),
        ("", 400),
        ("Action=GetSequenceNumber&RegistrationKey=0000&RegisteredRobotEmail=bot1%40example.org", 400),
        (&format!("Action=GetSequenceNumber&RegistrationKey={key}&RegisteredRobotEmail=bot2%40example.org"), 400),
        ("Action=GetIndex&Span=2-hour", 400),
        ("Action=GetIndex&Span=1-fortnight", 501),
        ("Action=GetIndex", 400),
    ] {
        let a = post(addr, form);
        assert_eq!(a.status, status, "{form}: {a:?}");
        assert_eq!(a.body.matches('\n').count(), 1, "{form}: {:?}", a.body);
    }
    assert_eq!(
        http(addr, "GET", "/rup-cgi?Action=GetIndex&Span=61-minute", "").status,
        400
    );
    assert_eq!(http(addr, "PUT", "/rup-cgi", "").status, 405);
    // The port's limits: a body over --max-body is refused from its head.
    let big = http(addr, "POST", "/rup-cgi", "Content-Length: 10000000\r\n");
    assert_eq!(big.status, 413);

    // A failed send is retried with the same number.
    smtp.refuse.store(true, Ordering::SeqCst);
    let key2 = register(
        addr,
        "Action=Register&RobotEmail=bot2%40example.org&Latency=second",
    );
    let refused = smtp.refused.load(Ordering::SeqCst);
    wait_until("two refused sends", || {
        smtp.refused.load(Ordering::SeqCst) >= refused + 2
    });
    assert_eq!(seqno(addr, &key2, "bot2%40example.org"), Some(0));
    smtp.refuse.store(false, Ordering::SeqCst);
    wait_until("bot2's first report", || {
        !smtp.to("bot2@example.org").is_empty()
    });
    assert!(smtp.to("bot2@example.org")[0]
        .body
        .starts_with("SequenceNumber: 1\r\n"));

    // A second Register of an address voids its old key; Unregister ends the reports.
    let key3 = register(
        addr,
        "Action=Register&RobotEmail=bot1%40example.org&Latency=day",
    );
    assert_ne!(key3, key);
    assert_eq!(seqno(addr, &key, "bot1%40example.org"), None);
    assert_eq!(seqno(addr, &key3, "bot1%40example.org"), Some(0));
    // Bounded resources while idle: over two seconds (two rescans, which open every
    // directory of the root) the server uses well under half a CPU; a watcher taking the
    // rescan's own opening of a directory for a change would rescan without end.
    let (t0, c0) = (std::time::Instant::now(), cpu_ticks(role.child.id()));
    let mut polls = 0;
    wait_until("two seconds of an idle server", || {
        polls += 1;
        assert_eq!(http(addr, "GET", "/a.html", "").status, 200);
        t0.elapsed() >= std::time::Duration::from_secs(2)
    });
    let used = cpu_ticks(role.child.id()) - c0;
    let wall = t0.elapsed().as_secs_f64() * USER_HZ;
    assert!(
        (used as f64) < wall / 2.0,
        "{used} ticks of CPU in {wall:.0} ticks ({polls} requests)"
    );

    let id3 = format!("RegistrationKey={key3}&RegisteredRobotEmail=bot1%40example.org");
    assert_eq!(post(addr, &format!("Action=Unregister&{id3}")).status, 200);
    assert_eq!(seqno(addr, &key3, "bot1%40example.org"), None);
    assert_eq!(post(addr, &format!("Action=Unregister&{id3}")).status, 400);
    role.kill();
}

#[test]
fn rup_modification_log_and_registrations_survive_sigkill() {
    let dir = temp_dir("rup-kill");
    let root = dir.path().join("www");
    let data = dir.path().join("data");
    put(&root, "keep.html", "k");
    put(&root, "change.html", "c");
    put(&root, "gone.html", "g");
    let smtp = Smtp::start();
    let role = start(&root, &data, &smtp);
    let addr = role.addr();
    let before = index(addr);
    // The first scan: a New of each file (on one line, or more if it straddled a second).
    let mut first: Vec<(String, String)> = before
        .iter()
        .map(|l| parse_line(l))
        .flat_map(|(k, ps)| ps.into_iter().map(move |p| (k.clone(), p)))
        .collect();
    first.sort();
    let new = |p: &str| ("New".to_owned(), p.to_owned());
    assert_eq!(
        first,
        [new("change.html"), new("gone.html"), new("keep.html")]
    );
    let key = register(
        addr,
        "Action=Register&RobotEmail=r%40example.org&Latency=1-second",
    );
    wait_until("two reports", || smtp.to("r@example.org").len() >= 2);
    // Hold the reports back so that the number written down is the last one sent.
    smtp.refuse.store(true, Ordering::SeqCst);
    let refused = smtp.refused.load(Ordering::SeqCst);
    wait_until("a refused send", || {
        smtp.refused.load(Ordering::SeqCst) > refused
    });
    let n = seqno(addr, &key, "r%40example.org").unwrap();
    assert!(n >= 2);
    put(&root, "new.html", "n");
    let with_new = new_lines(addr, &before, 1);
    role.kill();

    // While the server is down.
    put(&root, "change.html", "changed");
    std::fs::remove_file(root.join("gone.html")).unwrap();
    put(&root, "later.html", "l");

    let role = start(&root, &data, &smtp);
    let addr = role.addr();
    let after = index(addr);
    let kept = [&before[..], &with_new[..]].concat();
    assert_eq!(&after[..kept.len()], &kept[..], "the log kept what it had");
    let mut found: Vec<(String, Vec<String>)> =
        after[kept.len()..].iter().map(|l| parse_line(l)).collect();
    for (_, p) in &mut found {
        p.sort();
    }
    found.sort();
    assert_eq!(
        found,
        vec![
            ("Change".into(), vec!["change.html".into()]),
            ("Delete".into(), vec!["gone.html".into()]),
            ("New".into(), vec!["later.html".into()]),
        ],
        "what changed while the server was down, once each: {after:#?}"
    );
    // The registration and its sequence number survived: the next report is n + 1.
    assert_eq!(seqno(addr, &key, "r%40example.org"), Some(n));
    let seen = smtp.to("r@example.org").len();
    smtp.refuse.store(false, Ordering::SeqCst);
    wait_until("a report after the restart", || {
        smtp.to("r@example.org").len() > seen
    });
    let next = &smtp.to("r@example.org")[seen];
    assert!(
        next.body
            .starts_with(&format!("SequenceNumber: {}\r\n", n + 1)),
        "{:?}",
        next.body
    );
    let _ = http_raw;
    role.kill();
}

/// DESIGN.md "Limits every port keeps", on the RUP server's HTTP port: a client pipelining GETs
/// of a 1 MiB file and never reading the answers stops being read once its queued output is
/// full, so the server's memory stays bounded while another client is answered.
#[test]
fn rup_server_pipelined_gets_never_read_cost_bounded_memory() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::{Duration, Instant};

    let dir = temp_dir("rup-flood");
    let root = dir.path().join("www");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("big.bin"), vec![b'x'; 1 << 20]).unwrap();
    let smtp = Smtp::start();
    let server = start(&root, &dir.path().join("data"), &smtp);
    let addr = server.addr();
    let mut flooder = TcpStream::connect(addr).unwrap();
    flooder
        .set_write_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let window = "GET /big.bin HTTP/1.1\r\nHost: rup\r\n\r\n".repeat(1000);
    let until = Instant::now() + Duration::from_secs(2);
    let mut sent = 0u64;
    while Instant::now() < until && flooder.write_all(window.as_bytes()).is_ok() {
        sent += 1000;
    }
    // Another client is answered meanwhile, whole.
    let mut good = TcpStream::connect(addr).unwrap();
    good.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    good.write_all(b"GET /big.bin HTTP/1.1\r\nHost: rup\r\nConnection: close\r\n\r\n")
        .unwrap();
    // The head, then the body its Content-Length announces.
    let mut answer = Vec::new();
    let mut chunk = [0u8; 65536];
    let (head_end, len) = loop {
        let n = good.read(&mut chunk).unwrap();
        assert!(n > 0, "the server closed before answering");
        answer.extend_from_slice(&chunk[..n]);
        if let Some(i) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..i]).to_ascii_lowercase();
            assert!(head.starts_with("http/1.1 200"), "{head}");
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .expect("a Content-Length");
            break (i + 4, len);
        }
    };
    while answer.len() < head_end + len {
        let n = good.read(&mut chunk).unwrap();
        assert!(n > 0, "the server closed mid-body");
        answer.extend_from_slice(&chunk[..n]);
    }
    assert_eq!(len, 1 << 20, "the whole file");
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id())).unwrap();
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    eprintln!("rup flood: {sent} GETs of 1 MiB written, server RSS {rss_kb} kB");
    assert!(
        rss_kb < 256 << 10,
        "the RUP server holds {rss_kb} kB after a client pipelined {sent} GETs without reading"
    );
}
