//! WARC archives (docs/warc.md, WARC 1.1) read back by an independent reader: `crawlfleet up
//! --warc` over the synthetic web, then `warcio check` (every block and payload digest) and
//! `warcio index` compared with the nodes' document logs and the CDXJ files; and a refresh of
//! pages whose server answers conditional GETs with 304, giving server-not-modified revisits
//! (WARC 1.1 6.7.2), across a SIGKILL of the node and its restart (the torn file recovered).
//! The warcio parts say they skipped when warcio (PyPI; `.ci/run` installs it) is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crawlfleet_core::feed::{DocLogReader, FeedOp, DOCS_DIR};
use crawlfleet_core::sched::node::collection_dir;
use crawlfleet_core::warc::sha1_base32;

use crate::util::{temp_dir, wait_until, Role};

/// A command running warcio's command line, or `None` when warcio is not installed.
fn warcio() -> Option<Command> {
    if Command::new("warcio")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some(Command::new("warcio"));
    }
    let imports = Command::new("python3")
        .args(["-c", "import warcio.cli"])
        .output()
        .is_ok_and(|o| o.status.success());
    imports.then(|| {
        let mut c = Command::new("python3");
        c.args([
            "-c",
            "import sys; from warcio.cli import main; main(sys.argv[1:])",
        ]);
        c
    })
}

/// Every file under `dir` (two levels: COLLECTION/NODE or one) whose name ends with `suffix`.
fn find(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// `warcio check FILES`, asserting success.
fn warcio_check(files: &[PathBuf]) {
    let Some(mut cmd) = warcio() else {
        eprintln!("warcio is not installed: skipped `warcio check`");
        return;
    };
    let out = cmd.arg("check").arg("-v").args(files).output().unwrap();
    assert!(
        out.status.success(),
        "warcio check failed\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `warcio index -f FIELDS FILES`: one JSON object per record.
fn warcio_index(files: &[PathBuf], fields: &str) -> Option<Vec<serde_json::Value>> {
    let Some(mut cmd) = warcio() else {
        eprintln!("warcio is not installed: skipped `warcio index`");
        return None;
    };
    let out = cmd
        .args(["index", "-f", fields])
        .args(files)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    Some(
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

/// The CDXJ lines of every index under `dir`: (filename, offset) -> the line's JSON.
fn cdxj(dir: &Path) -> BTreeMap<(String, u64), serde_json::Value> {
    let mut out = BTreeMap::new();
    for f in find(dir, ".cdxj") {
        let text = std::fs::read_to_string(&f).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut sorted = lines.clone();
        sorted.sort();
        assert_eq!(lines, sorted, "{} is sorted", f.display());
        for l in lines {
            let mut parts = l.splitn(3, ' ');
            let (key, ts, json) = (parts.next().unwrap(), parts.next().unwrap(), parts.next());
            let v: serde_json::Value = serde_json::from_str(json.unwrap()).unwrap();
            assert_eq!(key, crawlfleet_core::warc::surt(v["url"].as_str().unwrap()));
            assert_eq!(ts.len(), 14);
            let offset = v["offset"].as_str().unwrap().parse().unwrap();
            out.insert((v["filename"].as_str().unwrap().to_string(), offset), v);
        }
    }
    out
}

/// URI -> SHA-1 (WARC form) of the body of its latest add or update in a node's document log.
fn logged(node_dir: &Path, collection: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let dir = collection_dir(node_dir, collection.as_bytes()).join(DOCS_DIR);
    let Ok(reader) = DocLogReader::open(&dir) else {
        return out;
    };
    for r in reader {
        let (_, doc) = r.unwrap();
        let uri = String::from_utf8_lossy(&doc.uri).into_owned();
        if doc.op == FeedOp::Delete {
            out.remove(&uri);
        } else {
            out.insert(uri, sha1_base32(&[&doc.body]));
        }
    }
    out
}

#[test]
fn up_archives_the_synthetic_web_and_warcio_reads_it_back() {
    let dir = temp_dir("warc-up");
    let base = Ipv4Addr::new(127, 78, 0, 1);
    let port = TcpListener::bind((base, 0))
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let data = dir.path().join("data");
    let warc = dir.path().join("warc");
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args([
            "up",
            "--synthetic-web",
            "3:15",
            "--web-base",
            &base.to_string(),
        ])
        .args([
            "--web-port",
            &port.to_string(),
            "--nodes",
            "2",
            "--distributors",
            "0",
        ])
        .args(["--until-idle", "--json", "--timeout", "120"])
        .arg("--data-dir")
        .arg(&data)
        .arg("--warc")
        .arg(&warc)
        .env("RUST_LOG", "warn")
        .output()
        .expect("crawlfleet up runs");
    assert!(
        out.status.success(),
        "crawlfleet up failed\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A clean stop leaves every file closed, each with its index.
    assert!(find(&warc, ".open").is_empty(), "{:?}", find(&warc, ""));
    let files = find(&warc, ".warc.gz");
    assert!(!files.is_empty());
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("crawlfleet-synthetic-"), "{name}");
        let stem = name.strip_suffix(".warc.gz").unwrap();
        assert!(f.with_file_name(format!("{stem}.cdxj")).exists(), "{name}");
    }
    let mut docs = BTreeMap::new();
    for e in std::fs::read_dir(&data).unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with("node") && e.path().is_dir() {
            docs.extend(logged(&e.path(), "synthetic"));
        }
    }
    assert!(docs.len() >= 30, "{} documents", docs.len());
    let index = cdxj(&warc);
    // Every stored document is archived, with the digest of the body the crawl fed.
    let by_uri: BTreeMap<&str, BTreeSet<&str>> =
        index.values().fold(BTreeMap::new(), |mut m, v| {
            m.entry(v["url"].as_str().unwrap())
                .or_default()
                .insert(v["digest"].as_str().unwrap());
            m
        });
    for (uri, digest) in &docs {
        let archived = by_uri
            .get(uri.as_str())
            .unwrap_or_else(|| panic!("{uri} not archived"));
        assert!(
            archived.contains(&digest["sha1:".len()..]),
            "{uri}: {archived:?} vs {digest}"
        );
    }

    warcio_check(&files);
    let Some(records) = warcio_index(
        &files,
        "filename,offset,length,warc-type,warc-target-uri,warc-payload-digest,http:status",
    ) else {
        return;
    };
    let mut seen = 0;
    for r in &records {
        let kind = r["warc-type"].as_str().unwrap();
        if kind != "response" && kind != "revisit" {
            continue;
        }
        seen += 1;
        let name = Path::new(r["filename"].as_str().unwrap())
            .file_name()
            .unwrap();
        let offset: u64 = r["offset"].as_str().unwrap().parse().unwrap();
        let line = &index[&(name.to_string_lossy().into_owned(), offset)];
        let uri = r["warc-target-uri"].as_str().unwrap();
        assert_eq!(line["url"], uri);
        assert_eq!(line["length"], r["length"]);
        assert_eq!(line["status"], r["http:status"]);
        let digest = r["warc-payload-digest"].as_str().unwrap();
        assert_eq!(line["digest"].as_str().unwrap(), &digest["sha1:".len()..]);
        if let Some(d) = docs.get(uri) {
            // The document log and warcio agree on the payload.
            assert!(by_uri[uri].contains(&d["sha1:".len()..]));
        }
    }
    assert_eq!(seen, index.len());
    let uris: BTreeSet<&str> = records
        .iter()
        .filter_map(|r| r["warc-target-uri"].as_str())
        .collect();
    assert!(docs.keys().all(|u| uris.contains(u.as_str())));
}

/// A collection of three pages on `server`, refreshed every three seconds, archived to `warc`.
fn refresh_config(path: &Path, server: &str, warc: &Path) {
    let xml = format!(
        "<?xml version=\"1.0\"?>\n<CrawlerConfig>\n  <DomainSpecification name=\"pages\">\n\
         \x20   <attrib name=\"start_uris\" type=\"list-string\"><member>http://{server}/index.html</member></attrib>\n\
         \x20   <attrib name=\"delay\" type=\"real\">0</attrib>\n\
         \x20   <attrib name=\"refresh\" type=\"real\">0.05</attrib>\n\
         \x20   <attrib name=\"refresh_mode\" type=\"string\">append</attrib>\n\
         \x20   <section name=\"warc\">\n\
         \x20     <attrib name=\"enabled\" type=\"boolean\">yes</attrib>\n\
         \x20     <attrib name=\"dir\" type=\"string\">{}</attrib>\n\
         \x20   </section>\n  </DomainSpecification>\n</CrawlerConfig>\n",
        warc.display()
    );
    std::fs::write(path, xml).unwrap();
}

fn node(data: &Path, config: &Path) -> Role {
    Role::start(&[
        "node",
        "--standalone",
        "--admin",
        "127.0.0.1:0",
        "--sync-ms",
        "20",
        "--config",
        config.to_str().unwrap(),
        "--data-dir",
        data.to_str().unwrap(),
    ])
}

/// The CDXJ lines of a copy of the `.open` file, recovered the way a restart would.
fn open_index(warc: &Path, scratch: &Path) -> Vec<serde_json::Value> {
    let Some(open) = find(warc, ".warc.gz.open").pop() else {
        return Vec::new();
    };
    let _ = std::fs::remove_dir_all(scratch);
    std::fs::create_dir_all(scratch).unwrap();
    let copy = scratch.join(open.file_name().unwrap());
    if std::fs::copy(&open, &copy).is_err() || crawlfleet_core::warc::recover(&copy).is_err() {
        return Vec::new();
    }
    cdxj(scratch).into_values().collect()
}

#[test]
fn refresh_304s_are_server_not_modified_revisits() {
    let dir = temp_dir("warc-304");
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("index.html"),
        "<a href=\"a.html\">a</a> <a href=\"b.html\">b</a>",
    )
    .unwrap();
    std::fs::write(root.join("a.html"), "<p>page a</p>").unwrap();
    std::fs::write(root.join("b.html"), "<p>page b</p>").unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("127.0.0.1:{port}");
    // Python's static server answers If-Modified-Since with 304 (RFC 9110 13.1.3).
    let mut web = Command::new("python3")
        .args([
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            &port.to_string(),
        ])
        .arg("--directory")
        .arg(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs");
    wait_until("the web server listens", || {
        std::net::TcpStream::connect(&server).is_ok()
    });
    let warc = dir.path().join("warc");
    let config = dir.path().join("pages.xml");
    refresh_config(&config, &server, &warc);
    let data = dir.path().join("data");
    let pages: Vec<String> = ["index.html", "a.html", "b.html"]
        .iter()
        .map(|p| format!("http://{server}/{p}"))
        .collect();
    let n = node(&data, &config);
    let scratch = dir.path().join("scratch");
    wait_until("a 304 revisit of every page", || {
        let lines = open_index(&warc, &scratch);
        pages.iter().all(|p| {
            lines
                .iter()
                .any(|l| l["url"] == p.as_str() && l["status"] == "200")
                && lines.iter().any(|l| {
                    l["url"] == p.as_str() && l["status"] == "304" && l["mime"] == "warc/revisit"
                })
        })
    });
    // A crash, then a restart: the file left open is cut to whole records, indexed, closed.
    n.kill();
    assert_eq!(find(&warc, ".warc.gz.open").len(), 1);
    let n = node(&data, &config);
    wait_until("the open file recovered", || {
        find(&warc, ".cdxj").len() == 1 && find(&warc, ".warc.gz").len() == 1
    });
    n.kill();
    let _ = web.kill();
    let _ = web.wait();
    let files = find(&warc, ".warc.gz");
    let index = cdxj(&warc);
    for p in &pages {
        assert!(index
            .values()
            .any(|l| l["url"] == p.as_str() && l["status"] == "304"));
    }
    warcio_check(&files);
    let Some(records) = warcio_index(
        &files,
        "warc-type,warc-target-uri,warc-profile,warc-refers-to-target-uri,warc-refers-to,http:status",
    ) else {
        return;
    };
    let revisits: Vec<&serde_json::Value> = records
        .iter()
        .filter(|r| r["warc-type"] == "revisit")
        .collect();
    for p in &pages {
        let r = revisits
            .iter()
            .find(|r| r["warc-target-uri"] == p.as_str())
            .unwrap_or_else(|| panic!("no revisit of {p}: {records:?}"));
        assert_eq!(
            r["warc-profile"],
            "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
        );
        assert_eq!(r["warc-refers-to-target-uri"], p.as_str());
        assert_eq!(r["http:status"], "304");
    }
}
