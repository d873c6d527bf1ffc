//! The link store over real sockets and processes (MS-FSWASDR): spec messages acknowledged and
//! read back by `crawlfleet links`, `failed\n` for garbage, oversized messages, unwritable and
//! full storage, acknowledged batches surviving SIGKILL, and the client's backlog across a
//! store restart.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crawlfleet_core::links::{
    parse_message, parse_records, read_log, stored_logs, LinkIndex, Message, Record,
    WebAnalyzerBatch, ACK, FAILED, TERMINATOR,
};
use crawlfleet_shells::linkclient::{Applications, LinkBatcher, LinkClientConfig, OutLink};

use crate::util::{temp_dir, vector, Role};

fn store(dir: &Path, extra: &[&str]) -> Role {
    let mut args = vec!["linkstore", "--listen", "127.0.0.1:0", "--data-dir"];
    args.push(dir.to_str().unwrap());
    args.extend_from_slice(extra);
    Role::start(&args)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends one message and returns the answer line.
fn exchange(s: &mut TcpStream, wire: &[u8]) -> Vec<u8> {
    s.write_all(wire).unwrap();
    let mut answer = Vec::new();
    let mut b = [0u8; 1];
    while answer.last() != Some(&b'\n') {
        match s.read(&mut b) {
            Ok(1) => answer.push(b[0]),
            other => panic!("no answer from the link store ({other:?}) after {answer:?}"),
        }
    }
    answer
}

fn links_query(dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["links", "--data-dir", dir.to_str().unwrap(), "--json"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "crawlfleet links {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn spec_message() -> Vec<u8> {
    let ts = 1244208852;
    let mut b = WebAnalyzerBatch::default();
    let doc = b"http://www.fourthcoffee.com/";
    b.link(
        doc,
        b"http://www.fourthcoffee.com/about.html",
        true,
        ts,
        b"about us",
    )
    .unwrap();
    b.link(
        doc,
        b"http://www.contoso.com/",
        false,
        ts,
        b"another example",
    )
    .unwrap();
    b.equivalence(
        doc,
        &[
            b"http://www.fourthcoffee.com/index.aspx",
            b"http://www.fourthcoffee.com/index.html",
        ],
        ts,
    )
    .unwrap();
    b.no_links(b"http://www.fourthcoffee.com/example1.html", ts)
        .unwrap();
    Message::webanalyzer(b"sp", &b).to_wire()
}

#[test]
fn spec_messages_on_many_connections_are_acknowledged_and_read_back() {
    let dir = temp_dir("linkstore-spec");
    let role = store(dir.path(), &[]);
    let addr = role.addr();
    let wa = vector("WASDR_WEBANALYZER").wire;
    let sp = vector("WASDR_SPREL").wire;
    let full = spec_message();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut c = connect(addr);
                for _ in 0..5 {
                    for m in [&wa, &sp, &full] {
                        assert_eq!(exchange(&mut c, m), ACK);
                    }
                }
                // Not marshal data: failed, and the connection goes on (2.2.2).
                assert_eq!(exchange(&mut c, b"\xffjunk...\0\0\0\0"), FAILED);
                assert_eq!(exchange(&mut c, &wa), ACK);
            });
        }
    });
    // Several messages in one write, answered in order.
    let mut c = connect(addr);
    let mut three = wa.clone();
    three.extend_from_slice(b"{0...\0\0\0\0"); // a dict without entries: failed
    three.extend_from_slice(&sp);
    c.write_all(&three).unwrap();
    let mut answers = vec![0u8; ACK.len() * 2 + FAILED.len()];
    c.read_exact(&mut answers).unwrap();
    assert_eq!(answers, [ACK, FAILED, ACK].concat());
    drop(role);

    let logs = stored_logs(dir.path()).unwrap();
    assert_eq!(logs.len(), 2, "{logs:?}");
    let about = links_query(
        dir.path(),
        &["inlinks", "http://www.fourthcoffee.com/about.html"],
    );
    let inl = about["inlinks"].as_array().unwrap();
    assert_eq!(inl.len(), 1, "resent lines count once: {about}");
    assert_eq!(inl[0]["from_url"], "http://www.fourthcoffee.com/");
    assert_eq!(inl[0]["anchor"], "about us");
    assert_eq!(about["cidhash"], "F73ZPmkvq5reFgsSEa4dA");
    let anchors = links_query(dir.path(), &["anchors", "http://www.contoso.com/"]);
    assert_eq!(anchors["anchors"][0]["text"], "another example");
    let out = links_query(dir.path(), &["outlinks", "http://www.fourthcoffee.com/"]);
    assert_eq!(out["outlinks"].as_array().unwrap().len(), 2);
    let eq = links_query(
        dir.path(),
        &["equivalents", "http://www.fourthcoffee.com/index.aspx"],
    );
    assert_eq!(
        eq["equivalents"]["class"]["doc_url"],
        "http://www.fourthcoffee.com/"
    );
    assert_eq!(
        eq["equivalents"]["class"]["members"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let sp = links_query(dir.path(), &["equivalents", "http://www.fourthcoffee.com/"]);
    assert_eq!(
        sp["equivalents"]["sprel"]["duplicates"][0],
        "http://www.fourthcoffee.com/index.aspx"
    );
}

#[test]
fn an_oversized_or_endless_message_gets_failed_and_the_connection_closes() {
    let dir = temp_dir("linkstore-oversized");
    let role = store(dir.path(), &["--max-message", "1000"]);
    let mut c = connect(role.addr());
    assert_eq!(exchange(&mut c, &vector("WASDR_SPREL").wire), ACK);
    c.write_all(&[b'x'; 5000]).unwrap();
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest); // until the store closes
    assert_eq!(rest, FAILED);
    // Other connections are served as before.
    let mut c = connect(role.addr());
    assert_eq!(exchange(&mut c, &vector("WASDR_SPREL").wire), ACK);
}

#[test]
fn an_unwritable_collection_gets_failed_and_others_are_stored() {
    let dir = temp_dir("linkstore-unwritable");
    // The webanalyzer logs' directory cannot be created: a regular file holds its name (a
    // permission test would not work as root).
    std::fs::write(dir.path().join("webanalyzer"), b"in the way").unwrap();
    let role = store(dir.path(), &[]);
    let mut c = connect(role.addr());
    assert_eq!(exchange(&mut c, &vector("WASDR_WEBANALYZER").wire), FAILED);
    assert_eq!(exchange(&mut c, &vector("WASDR_SPREL").wire), ACK);
    assert_eq!(exchange(&mut c, &vector("WASDR_WEBANALYZER").wire), FAILED);
}

/// A message whose `urimap` names `http://k/<id>`, padded to about `size` bytes.
fn numbered(id: u64, size: usize) -> Vec<u8> {
    let mut b = WebAnalyzerBatch::default();
    b.urimap(format!("http://k/{id}").as_bytes()).unwrap();
    b.sitemap(
        b"http://k/",
        format!("http://k/{}", "p".repeat(size)).as_bytes(),
    )
    .unwrap();
    Message::webanalyzer(b"numbered", &b).to_wire()
}

/// The ids of the stored numbered messages.
fn stored_ids(dir: &Path) -> Vec<u64> {
    let mut ids = Vec::new();
    for (_, _, path) in stored_logs(dir).unwrap() {
        read_log(&path, |p| {
            let m = parse_message(p).unwrap();
            parse_records(&m, |r| {
                if let Ok(Record::UriMap { url, .. }) = r {
                    let id = std::str::from_utf8(&url[9..]).unwrap();
                    ids.push(id.parse().unwrap());
                }
            });
        })
        .unwrap();
    }
    ids
}

#[test]
fn a_full_file_system_gets_failed_and_the_log_stays_usable() {
    let dir = temp_dir("linkstore-fsize");
    // RLIMIT_FSIZE of 64 blocks (32 or 64 KiB): a write past it fails with EFBIG, as on a full
    // disk.
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("ulimit -f 64 && exec \"$0\" linkstore --listen 127.0.0.1:0 --data-dir \"$1\"")
        .arg(env!("CARGO_BIN_EXE_crawlfleet"))
        .arg(dir.path())
        .env("RUST_LOG", "error");
    let limited = Role::spawn(cmd);
    let addr = limited.addr();
    let mut c = connect(addr);
    assert_eq!(exchange(&mut c, &numbered(1, 100)), ACK);
    assert_eq!(exchange(&mut c, &numbered(2, 200_000)), FAILED);
    assert_eq!(exchange(&mut c, &numbered(3, 100)), ACK);
    limited.kill();
    // The failed message left nothing behind: the log holds 1 and 3, and takes more.
    let role = store(dir.path(), &[]);
    let mut c = connect(role.addr());
    assert_eq!(exchange(&mut c, &numbered(4, 100)), ACK);
    drop(role);
    assert_eq!(stored_ids(dir.path()), vec![1, 3, 4]);
}

#[test]
fn acknowledged_messages_survive_sigkill() {
    let dir = temp_dir("linkstore-sigkill");
    let role = store(dir.path(), &[]);
    let addr = role.addr();
    let (tx, rx) = crossbeam_channel::unbounded();
    // Two senders; each records the ids the store acknowledged, until the store dies.
    let senders: Vec<_> = (0..2u64)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut c = connect(addr);
                for i in 0.. {
                    let id = t * 1_000_000 + i;
                    if c.write_all(&numbered(id, 2000)).is_err() {
                        return;
                    }
                    let mut a = [0u8; 4];
                    if c.read_exact(&mut a).is_err() {
                        return;
                    }
                    assert_eq!(&a, ACK);
                    tx.send(id).unwrap();
                }
            })
        })
        .collect();
    drop(tx);
    let mut acked = Vec::new();
    while acked.len() < 300 {
        acked.push(rx.recv().unwrap());
    }
    role.kill(); // SIGKILL, senders mid-stream
    for s in senders {
        s.join().unwrap();
    }
    acked.extend(rx.iter());
    let stored = stored_ids(dir.path());
    let missing: Vec<_> = acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(missing.is_empty(), "acknowledged but lost: {missing:?}");
    // The store starts again on what it left (a torn tail is cut).
    let role = store(dir.path(), &[]);
    let mut c = connect(role.addr());
    assert_eq!(exchange(&mut c, &numbered(7, 10)), ACK);
}

fn client(addr: SocketAddr, backlog: &Path, max_backlog: u64) -> LinkBatcher {
    let mut cfg = LinkClientConfig::new(addr, backlog.to_owned());
    cfg.max_batch_bytes = 4000;
    cfg.max_batch_age = Duration::from_millis(50);
    cfg.retry_interval = Duration::from_millis(50);
    cfg.io_timeout = Duration::from_secs(5);
    cfg.backlog_max_bytes = max_backlog;
    LinkBatcher::start(cfg).unwrap()
}

fn doc(i: u64) -> String {
    format!("http://site{}.example/doc{i}.html", i % 7)
}

fn add_doc(c: &LinkBatcher, i: u64) {
    let targets: Vec<String> = (0..3).map(|k| doc(i * 3 + k + 1_000_000)).collect();
    let links: Vec<OutLink<'_>> = targets
        .iter()
        .map(|t| OutLink {
            url: t.as_bytes(),
            anchor: b"a link",
            intra: false,
        })
        .collect();
    c.add_links(b"web", doc(i).as_bytes(), &links, 1_700_000_000)
        .unwrap();
}

/// Flushes until the backlog is empty (gives up after 60 s).
fn drain(c: &LinkBatcher) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.flush().backlog_messages > 0 {
        assert!(
            Instant::now() < deadline,
            "backlog not drained: {:?}",
            c.stats()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn check_all_docs(dir: &Path, docs: std::ops::Range<u64>) {
    let mut b = LinkIndex::builder();
    for (_, _, path) in stored_logs(dir).unwrap() {
        b.add_log(&path).unwrap();
    }
    let ix = b.finish();
    for i in docs {
        let out = ix.outlinks(doc(i).as_bytes());
        assert_eq!(out.len(), 3, "document {i} lost its links");
        assert!(out.iter().all(|l| l.to_url.is_some()));
    }
}

#[test]
fn the_client_keeps_batches_while_the_store_restarts_and_loses_nothing() {
    let dir = temp_dir("linkclient-restart");
    let backlog = dir.path().join("backlog");
    let data = dir.path().join("data");
    let role = store(&data, &[]);
    let addr = role.addr();
    let c = client(addr, &backlog, 64 << 20);
    for i in 0..300 {
        add_doc(&c, i);
    }
    c.flush();
    role.kill(); // mid-stream
    for i in 300..600 {
        add_doc(&c, i);
    }
    let down = c.flush();
    assert!(
        down.failed_attempts > 0 && down.backlog_messages > 0,
        "{down:?}"
    );
    // Same port, same data.
    let _role = Role::start(&[
        "linkstore",
        "--listen",
        &addr.to_string(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    for i in 600..900 {
        add_doc(&c, i);
    }
    drain(&c);
    let s = c.stats();
    assert_eq!((s.backlog_messages, s.dropped_messages), (0, 0), "{s:?}");
    drop(c);
    check_all_docs(&data, 0..900);
}

#[test]
fn the_backlog_outlives_the_client_and_stays_within_its_bound() {
    let dir = temp_dir("linkclient-backlog");
    let backlog = dir.path().join("backlog");
    let data = dir.path().join("data");
    // Nothing listens on this address yet.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let c = client(addr, &backlog, 64 << 20);
    for i in 0..200 {
        add_doc(&c, i);
    }
    let s = c.flush();
    assert!(s.backlog_messages > 0 && s.acked_messages == 0, "{s:?}");
    drop(c); // the backlog stays on disk
    let _role = Role::start(&[
        "linkstore",
        "--listen",
        &addr.to_string(),
        "--data-dir",
        data.to_str().unwrap(),
    ]);
    let c = client(addr, &backlog, 64 << 20);
    drain(&c);
    drop(c);
    check_all_docs(&data, 0..200);

    // A small bound drops the oldest messages, and says so.
    let small = dir.path().join("small");
    let c = client("127.0.0.1:1".parse().unwrap(), &small, 20_000);
    for i in 0..300 {
        add_doc(&c, i);
    }
    let s = c.flush();
    assert!(s.dropped_messages > 0, "{s:?}");
    assert!(s.backlog_bytes <= 20_000, "{s:?}");
}

/// A link store that follows MS-FSWASDR 3.2.5 and nothing more: reads each data message up to
/// the terminator (2.2.1), answers `ack\n` (2.2.2), and hands the message's bytes on.
fn recording_store() -> (SocketAddr, std::sync::mpsc::Receiver<Vec<u8>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { return };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) =
                        buf.windows(TERMINATOR.len()).position(|w| w == TERMINATOR)
                    {
                        let msg: Vec<u8> = buf.drain(..end + TERMINATOR.len()).collect();
                        if s.write_all(ACK).is_err() || tx.send(msg).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, rx)
}

#[test]
fn the_client_writes_the_lines_of_section_4_1_1() {
    // MS-FSWASDR 4.1.1: the fourthcoffee documents as the crawler reports them, through the
    // client's calls, must reach the store as the section's lines (with the corrections the
    // core's section 4 tests explain), one message per collection and application.
    let dir = temp_dir("linkclient-lines");
    let (addr, rx) = recording_store();
    let mut cfg = LinkClientConfig::new(addr, dir.path().join("backlog"));
    cfg.io_timeout = Duration::from_secs(20);
    let c = LinkBatcher::start(cfg).unwrap();
    c.set_applications(
        b"sp",
        Applications {
            webanalyzer: true,
            sharepoint: true,
        },
    );
    let ts = 1244208852;
    let doc1 = b"http://www.fourthcoffee.com/";
    let links = [
        OutLink {
            url: b"http://www.fourthcoffee.com/about.html",
            anchor: b"about us",
            intra: true,
        },
        // Refused (a space): skipped and counted, the others still sent.
        OutLink {
            url: b"http://www.fourthcoffee.com/a b",
            anchor: b"x",
            intra: true,
        },
        OutLink {
            url: b"http://www.contoso.com/",
            anchor: b"another\nexample",
            intra: false,
        },
    ];
    c.add_links(b"sp", doc1, &links, ts).unwrap();
    let class: [&[u8]; 2] = [
        b"http://www.fourthcoffee.com/index.aspx",
        b"http://www.fourthcoffee.com/index.html",
    ];
    c.add_equivalents(b"sp", doc1, &class, ts).unwrap();
    c.add_links(b"sp", b"http://www.fourthcoffee.com/example1.html", &[], ts)
        .unwrap();
    c.sitemap(b"sp", doc1, b"http://www.fourthcoffee.com/")
        .unwrap();
    c.uri_add(b"sp", doc1, &class[..1], ts).unwrap();
    // Another collection, WebAnalyzer only by default.
    c.add_links(b"other", doc1, &[], ts).unwrap();
    c.uri_add(b"other", doc1, &[], ts).unwrap();
    let stats = c.flush();
    assert_eq!(
        (stats.acked_messages, stats.skipped_links),
        (3, 1),
        "{stats:?}"
    );

    let mut got = std::collections::BTreeMap::new();
    for _ in 0..3 {
        let wire = rx.recv_timeout(Duration::from_secs(20)).unwrap();
        let m = parse_message(&wire[..wire.len() - TERMINATOR.len()]).unwrap();
        let fields: Vec<(String, String)> = m
            .fields
            .iter()
            .map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        let key = (
            m.application.name(),
            String::from_utf8_lossy(&m.collection).into_owned(),
        );
        got.insert(key, fields);
    }
    let f = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(
        got[&("webanalyzer", "sp".to_string())],
        vec![
            f(
                "links",
                "7fD/x4S22g9fsZM8Kbi3+ F73ZPmkvq5reFgsSEa4dA 1 1244208852 about us\n\
                 7fD/x4S22g9fsZM8Kbi3+ zcHqC/594P3ec4oHm2hoS 0 1244208852 another example\n"
            ),
            f(
                "urieq",
                "7fD/x4S22g9fsZM8Kbi3+ TMj7tEFgrTGlWETqbY5L5 1244208852\n\
                 7fD/x4S22g9fsZM8Kbi3+ 5c9HshqGRoVVma8oX4DPz 1244208852\n"
            ),
            f(
                "eqrepr",
                "7fD/x4S22g9fsZM8Kbi3+ http://www.fourthcoffee.com/ 1244208852 \
                 http://www.fourthcoffee.com/index.aspx\0http://www.fourthcoffee.com/index.html\n"
            ),
            f(
                "no_links",
                "http://www.fourthcoffee.com/example1.html wGLEKGuSUWctKO5xzzJ7J 1244208852\n"
            ),
            f(
                "urimap",
                "http://www.fourthcoffee.com/ 7fD/x4S22g9fsZM8Kbi3+\n\
                 http://www.fourthcoffee.com/about.html F73ZPmkvq5reFgsSEa4dA\n\
                 http://www.contoso.com/ zcHqC/594P3ec4oHm2hoS\n\
                 http://www.fourthcoffee.com/index.aspx TMj7tEFgrTGlWETqbY5L5\n\
                 http://www.fourthcoffee.com/index.html 5c9HshqGRoVVma8oX4DPz\n\
                 http://www.fourthcoffee.com/example1.html wGLEKGuSUWctKO5xzzJ7J\n"
            ),
            f(
                "sitemap",
                "7fD/x4S22g9fsZM8Kbi3+ http://www.fourthcoffee.com/\n"
            ),
        ]
    );
    // 4.2.1's line shape for SPRel.
    assert_eq!(
        got[&("sharepoint", "sp".to_string())],
        vec![f(
            "uris",
            "http://www.fourthcoffee.com/ 1244208852 ADD http://www.fourthcoffee.com/index.aspx\n"
        )]
    );
    assert_eq!(
        got[&("webanalyzer", "other".to_string())],
        vec![
            f(
                "no_links",
                "http://www.fourthcoffee.com/ 7fD/x4S22g9fsZM8Kbi3+ 1244208852\n"
            ),
            f(
                "urimap",
                "http://www.fourthcoffee.com/ 7fD/x4S22g9fsZM8Kbi3+\n"
            ),
        ]
    );
}
