//! The first hour of a new user (issue 26), each step through the binary as they would take
//! it: configuration checks, the examples and the README's walk-through, `init`, completions
//! and the man page, a closed pipe, `up`'s data directory, admin address, progress and
//! Ctrl-C. The crawls are small webs on loopback; every wait has a deadline.

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{checkout_path, temp_dir};

mod up;

const BIN: &str = env!("CARGO_BIN_EXE_crawlfleet");

/// A configuration with one of each kind of mistake (issue 26).
const BAD: &str = r#"<CrawlerConfig>
  <DomainSpecification name="web">
    <attrib name="dealy" type="real">1</attrib>
    <attrib name="max_pending" type="integer">0</attrib>
    <attrib name="start_uris" type="list-string"><member>not a url</member></attrib>
  </DomainSpecification>
</CrawlerConfig>
"#;

/// The lines every path prints for [`BAD`] written to `file`.
fn bad_lines(file: &Path) -> [String; 3] {
    let f = file.display();
    [
        format!("{f}: line 3, column 5: collection \"web\": unknown setting \"dealy\"; did you mean \"delay\"?"),
        format!("{f}: line 4, column 5: collection \"web\": setting \"max_pending\": 0 is out of range: allowed 1 to 1000"),
        format!("{f}: line 5, column 5: collection \"web\": setting \"start_uris\": \"not a url\" is not a start URI (relative URL without a base): write it whole, as http://host/path"),
    ]
}

fn crawlfleet(args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args).env("RUST_LOG", "warn");
    c
}

/// Runs a command to its end within `secs`; kills it and fails the test otherwise.
fn run(cmd: &mut Command, secs: u64) -> Output {
    let shown = format!("{cmd:?}");
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    finish(child, secs, &shown)
}

fn finish(mut child: Child, secs: u64, shown: &str) -> Output {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let t_out = std::thread::spawn(move || read_all(out.as_mut()));
    let t_err = std::thread::spawn(move || read_all(err.as_mut()));
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{shown}: still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

fn read_all<R: Read>(r: Option<&mut R>) -> Vec<u8> {
    let mut v = Vec::new();
    if let Some(r) = r {
        let _ = r.read_to_end(&mut v);
    }
    v
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn shown(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn python3() -> bool {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: python3 is not installed");
    }
    ok
}

/// `python3 -m http.server` serving `dir` on 127.0.0.1:`port`, killed when dropped.
struct StaticServer(Child);

impl StaticServer {
    fn start(dir: &Path, port: u16) -> StaticServer {
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .arg("--directory")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "http.server on {port}: not within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        StaticServer(child)
    }
}

impl Drop for StaticServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The last JSON line of `up --json` (the first is the start record).
fn summary(o: &Output) -> serde_json::Value {
    let out = text(&o.stdout);
    let last = out.trim().lines().last().unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {}", shown(o)))
}

#[test]
fn config_check_names_each_mistake_with_its_place_and_a_suggestion() {
    let dir = temp_dir("config-check");
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, BAD).unwrap();
    let o = run(
        crawlfleet(&["config", "check"])
            .arg(&bad)
            .current_dir(dir.path()),
        30,
    );
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let err = text(&o.stderr);
    for line in bad_lines(&bad) {
        assert!(
            err.lines().any(|l| l == line),
            "missing {line:?}\n{}",
            shown(&o)
        );
    }
    let good = checkout_path("examples/collection.xml");
    let o = run(
        crawlfleet(&["config", "check", "examples/collection.xml"]).current_dir(checkout_path("")),
        30,
    );
    assert!(o.status.success(), "{}", shown(&o));
    assert_eq!(
        text(&o.stdout),
        "examples/collection.xml: ok (1 collection: intranet)\n"
    );
    assert!(good.exists());
    // A seed file that is not there is an error too.
    let o = run(
        crawlfleet(&["config", "check"])
            .arg(&good)
            .current_dir(dir.path()),
        30,
    );
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    assert!(
        text(&o.stderr).contains("cannot read the seed file \"examples/seeds.txt\""),
        "{}",
        shown(&o)
    );
}

#[test]
fn up_node_multinode_and_collection_add_refuse_a_bad_configuration_alike() {
    let dir = temp_dir("config-refused");
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, BAD).unwrap();
    let b = bad.to_str().unwrap();
    let data = |n: &str| dir.path().join(n).display().to_string();
    let admin = format!("127.0.0.1:{}", free_port());
    let runs: [Vec<String>; 3] = [
        [
            "up",
            "--config",
            b,
            "--until-idle",
            "--data-dir",
            &data("up"),
        ]
        .map(String::from)
        .to_vec(),
        [
            "node",
            "--standalone",
            "--config",
            b,
            "--admin",
            &admin,
            "--data-dir",
            &data("node"),
        ]
        .map(String::from)
        .to_vec(),
        [
            "multinode",
            "--config",
            b,
            "--listen",
            "127.0.0.1:0",
            "--admin",
            &admin,
            "--data-dir",
            &data("mn"),
        ]
        .map(String::from)
        .to_vec(),
    ];
    for args in &runs {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = run(&mut crawlfleet(&args), 60);
        assert!(!o.status.success(), "{args:?}\n{}", shown(&o));
        let err = text(&o.stderr);
        for line in bad_lines(&bad) {
            assert!(
                err.contains(&line),
                "{args:?}: missing {line:?}\n{}",
                shown(&o)
            );
        }
    }
    // The administrative CollectionAdd refuses it with the same findings (MS-FSCADM 2.2.9.3).
    let port = free_port();
    let admin = format!("127.0.0.1:{port}");
    let mut node = crawlfleet(&[
        "node",
        "--standalone",
        "--admin",
        &admin,
        "--data-dir",
        &data("n2"),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the node's admin port did not open"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let at = format!("@{b}");
    let o = run(
        &mut crawlfleet(&["admin", "--server", &admin, "collection-add", &at, "1"]),
        30,
    );
    let _ = node.kill();
    let _ = node.wait();
    assert_eq!(o.status.code(), Some(1), "{}", shown(&o));
    let err = text(&o.stderr);
    assert!(
        err.contains("unknown setting \"dealy\"; did you mean \"delay\"?"),
        "{}",
        shown(&o)
    );
    assert!(
        err.contains("0 is out of range: allowed 1 to 1000"),
        "{}",
        shown(&o)
    );
}

#[test]
fn the_examples_run_as_the_readme_says() {
    // inspect reads the captures (README, "crawlfleet inspect").
    let o = run(
        crawlfleet(&["inspect", "examples/fscmt-capture.bin"]).current_dir(checkout_path("")),
        30,
    );
    assert!(o.status.success(), "{}", shown(&o));
    assert!(
        text(&o.stdout).starts_with("{\"priority\":0,\"command\":\"CMD_UM_INIT\""),
        "{}",
        shown(&o)
    );
    let o = run(
        crawlfleet(&["inspect", "--raw", "examples/link-store-capture.bin"])
            .current_dir(checkout_path("")),
        30,
    );
    assert!(o.status.success() && !o.stdout.is_empty(), "{}", shown(&o));
}

/// The README's first command and its "Your first crawl" walk-through, run in order by
/// `scripts/newcomer.sh` in this checkout (CI runs it on a fresh clone): among them
/// examples/collection.xml crawling examples/site.
#[test]
fn the_readme_walk_through_runs_as_written() {
    if !python3() {
        return;
    }
    let o = run(
        Command::new("bash")
            .arg(checkout_path("scripts/newcomer.sh"))
            .arg("--here")
            .env("CRAWLFLEET_BIN", BIN),
        600,
    );
    assert!(o.status.success(), "{}", shown(&o));
    let out = text(&o.stdout);
    assert!(
        out.contains("newcomer: ok crawlfleet config check examples/collection.xml"),
        "{out}"
    );
    assert!(
        out.contains("newcomer: ok crawlfleet init ~/my-crawl"),
        "{out}"
    );
    // The example crawl's summary row: collection, fetched, stored, indexed, duplicates,
    // skipped, errors. index, about (the seed file's), docs/index, guide, faq and /index.html;
    // private/ and the .jpg are excluded by the configuration.
    let row: Vec<u64> = out
        .lines()
        .find(|l| l.starts_with("intranet "))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(row.len(), 6, "{out}");
    assert!(row[0] >= 6 && row[1] >= 5, "{out}");
    assert_eq!(row[5], 0, "errors\n{out}");
}

/// The multi-host section's web.xml is a configuration the check accepts (its ppdup section
/// included).
#[test]
fn the_readme_multi_host_configuration_checks() {
    let readme = std::fs::read_to_string(checkout_path("README.md")).unwrap();
    let section = readme
        .split("## A cluster on several hosts")
        .nth(1)
        .expect("the multi-host section");
    let xml = section
        .split("```xml\n")
        .nth(1)
        .and_then(|x| x.split("```").next())
        .expect("its web.xml");
    assert!(xml.contains("<section name=\"ppdup\">"), "{xml}");
    let dir = temp_dir("multihost");
    let web = dir.path().join("web.xml");
    std::fs::write(&web, xml).unwrap();
    let o = run(crawlfleet(&["config", "check"]).arg(&web), 30);
    assert!(o.status.success(), "{}", shown(&o));
}

#[test]
fn init_writes_a_starter_that_runs_as_it_says() {
    let dir = temp_dir("init");
    let port = free_port();
    let starter = dir.path().join("my-crawl");
    let o = run(
        crawlfleet(&["init"])
            .arg(&starter)
            .args(["--port", &port.to_string()]),
        30,
    );
    assert!(o.status.success(), "{}", shown(&o));
    let out = text(&o.stdout);
    for f in ["collection.xml", "seeds.txt", "site/index.html"] {
        assert!(starter.join(f).is_file(), "{f}\n{out}");
    }
    // The commands it prints, in order.
    let commands: Vec<&str> = out
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("python3") || l.starts_with("crawlfleet"))
        .collect();
    assert_eq!(commands.len(), 3, "{out}");
    assert!(
        commands[0].starts_with(&format!("python3 -m http.server {port}")),
        "{out}"
    );
    if !python3() {
        return;
    }
    let _site = StaticServer::start(&starter.join("site"), port);
    for c in &commands[1..] {
        let words: Vec<&str> = c.split_whitespace().skip(1).collect();
        let o = run(
            crawlfleet(&words).args(["--json"].iter().filter(|_| words[0] == "up")),
            120,
        );
        assert!(o.status.success(), "{c}\n{}", shown(&o));
        if words[0] == "up" {
            let s = summary(&o);
            // index, hello (the seed file's) and about.
            assert_eq!(
                s["collections"]["starter"]["pages_fetched"].as_u64(),
                Some(3),
                "{s}"
            );
        }
    }
    // A second init keeps what is there.
    let o = run(crawlfleet(&["init"]).arg(&starter), 30);
    assert!(text(&o.stdout).contains("kept "), "{}", shown(&o));
}

#[test]
fn completions_and_the_man_page_come_from_the_command_line() {
    let o = run(&mut crawlfleet(&["completions", "bash"]), 30);
    assert!(o.status.success(), "{}", shown(&o));
    let script = text(&o.stdout);
    assert!(
        script.contains("_crawlfleet()") && script.contains("config"),
        "{script}"
    );
    let o = run(&mut crawlfleet(&["man"]), 30);
    assert!(o.status.success(), "{}", shown(&o));
    assert!(
        text(&o.stdout).starts_with(".ie \\n(.g .ds Aq")
            || text(&o.stdout).contains(".TH crawlfleet"),
        "{}",
        shown(&o)
    );
    let dir = temp_dir("man");
    let o = run(crawlfleet(&["man", "--dir"]).arg(dir.path()), 30);
    assert!(o.status.success(), "{}", shown(&o));
    assert!(dir.path().join("crawlfleet-up.1").is_file());
    let o = run(&mut crawlfleet(&["completions", "tcsh"]), 30);
    assert_eq!(o.status.code(), Some(2), "{}", shown(&o));
}

#[test]
fn a_closed_pipe_is_a_normal_exit() {
    // `crawlfleet ... | head -c 1` under pipefail, so the status is crawlfleet's. Each writes
    // more than a pipe holds (64 KiB), so its writes after `head` exits fail: the completion
    // script in one write, and 2,000 lines of `config check` through println!.
    let many = vec!["examples/collection.xml"; 2000].join(" ");
    for args in [
        "completions bash".to_string(),
        format!("config check {many}"),
    ] {
        let o = run(
            Command::new("bash")
                .arg("-c")
                .arg(format!(
                    "set -o pipefail; {BIN} {args} | head -c 1 >/dev/null"
                ))
                .current_dir(checkout_path("")),
            60,
        );
        let shown_args: String = args.chars().take(40).collect();
        assert!(o.status.success(), "{shown_args}: {}", shown(&o));
        assert!(
            !text(&o.stderr).contains("panicked"),
            "{shown_args}: {}",
            shown(&o)
        );
    }
}
