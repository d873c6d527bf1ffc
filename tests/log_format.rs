//! `--log-format json` through the binary, as a log shipper reads it: every role started with
//! it writes its log records to standard error as one JSON object per line, with timestamp
//! (RFC 3339, UTC), level, target, message and the role; `up`'s progress and other lines are
//! records too, and so is the error a role stops on. Text stays the default, and an unknown
//! format is refused.

use std::fs::File;
use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::{temp_dir, Role, WASDR_TERMINATOR};

/// Starts `crawlfleet ARGS --log-format json` at level info, its standard error to a file.
fn start(dir: &Path, name: &str, args: &[&str]) -> (Role, PathBuf) {
    let log = dir.join(format!("{name}.stderr"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args(args)
        .args(["--log-format", "json"])
        .env("RUST_LOG", "info")
        .stderr(Stdio::from(File::create(&log).unwrap()));
    (Role::spawn(cmd), log)
}

/// The whole lines written so far, each checked to be one JSON object of the expected shape
/// from `role`.
fn records(log: &Path, role: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap();
    let whole = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    whole
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{role}: not JSON ({e}): {line:?}"));
            let o = v.as_object().unwrap_or_else(|| panic!("{role}: {line}"));
            let keys: Vec<&str> = o.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                ["timestamp", "level", "target", "message", "role"],
                "{line}"
            );
            let ts = o["timestamp"].as_str().unwrap();
            // 2026-11-27T16:54:39.141Z
            assert!(
                ts.len() == 24 && &ts[10..11] == "T" && ts.ends_with('Z'),
                "{role}: timestamp {ts}"
            );
            let level = o["level"].as_str().unwrap();
            assert!(
                ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&level),
                "{line}"
            );
            assert!(!o["target"].as_str().unwrap().is_empty(), "{line}");
            assert_eq!(o["role"], role, "{line}");
            v
        })
        .collect()
}

/// Waits for a record of `role` whose message contains `text`.
fn wait_for_record(log: &Path, role: &str, text: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(r) = records(log, role)
            .into_iter()
            .find(|r| r["message"].as_str().unwrap().contains(text))
        {
            return r;
        }
        assert!(
            Instant::now() < deadline,
            "{role}: no record with {text:?} within 60 s:\n{}",
            std::fs::read_to_string(log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn every_role_logs_one_json_object_per_line() {
    let dir = temp_dir("log-json");
    let d = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let any = "127.0.0.1:0";

    let (_dup, log) = start(
        dir.path(),
        "dupserver",
        &["dupserver", "--listen", any, "--data-dir", &d("dup")],
    );
    let r = wait_for_record(&log, "dupserver", "recovered");
    assert_eq!(r["level"], "INFO");
    assert_eq!(r["target"], "crawlfleet_shells::dupserver");

    let (_replica, log) = start(
        dir.path(),
        "dupreplica",
        &["dupreplica", "--listen", any, "--data-dir", &d("replica")],
    );
    wait_for_record(&log, "dupreplica", "recovered");

    let (_mn, log) = start(
        dir.path(),
        "multinode",
        &[
            "multinode",
            "--listen",
            any,
            "--admin",
            any,
            "--data-dir",
            &d("mn"),
        ],
    );
    wait_for_record(&log, "multinode", "administrative interface");

    let (_node, log) = start(
        dir.path(),
        "node",
        &[
            "node",
            "--standalone",
            "--admin",
            any,
            "--data-dir",
            &d("node"),
        ],
    );
    wait_for_record(&log, "node", "administrative interface");

    // The link store says nothing on start; a message it cannot read is a warning.
    let (links, log) = start(
        dir.path(),
        "linkstore",
        &["linkstore", "--listen", any, "--data-dir", &d("links")],
    );
    let mut peer = TcpStream::connect(links.addr()).unwrap();
    peer.write_all(b"not marshal\n\"quoted\"").unwrap();
    peer.write_all(WASDR_TERMINATOR).unwrap();
    let r = wait_for_record(&log, "linkstore", "refusing a message");
    assert_eq!(r["level"], "WARN");

    let (ns, log) = start(
        dir.path(),
        "nameserver",
        &["nameserver", "--listen", any, "--data-dir", &d("ns")],
    );
    wait_for_record(&log, "nameserver", "binding(s) kept");
    let ns_addr = ns.addr().to_string();
    let (_distributor, log) = start(
        dir.path(),
        "distributor",
        &[
            "distributor",
            "--nameserver",
            &ns_addr,
            "--listen",
            any,
            "--node-id",
            "7",
            "--data-dir",
            &d("distributor"),
        ],
    );
    wait_for_record(&log, "distributor", "became master");

    std::fs::create_dir(d("site")).unwrap();
    let (_rup, log) = start(
        dir.path(),
        "rup-server",
        &[
            "rup-server",
            "--root",
            &d("site"),
            "--listen",
            any,
            "--data-dir",
            &d("rup"),
            "--smtp",
            "127.0.0.1:9",
            "--from",
            "rup@example.org",
        ],
    );
    wait_for_record(&log, "rup-server", "RUP server");

    let (_web, log) = start(
        dir.path(),
        "synthweb",
        &["synthweb", "--web", "1:3", "--base", "127.93.7.1"],
    );
    wait_for_record(&log, "synthweb", "serving");
}

#[test]
fn up_logs_its_progress_as_json_and_text_stays_the_default() {
    let dir = temp_dir("log-json-up");
    let data = dir.path().join("data");
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["up", "--synthetic-web", "2:10", "--web-base", "127.93.8.1"])
        .args([
            "--nodes",
            "1",
            "--distributors",
            "0",
            "--until-idle",
            "--timeout",
            "120",
        ])
        .args(["--progress", "always", "--progress-interval", "0.2"])
        .args(["--log-format", "json", "--data-dir"])
        .arg(&data)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let log = dir.path().join("up.stderr");
    std::fs::write(&log, out.stderr.as_slice()).unwrap();
    let recs = records(&log, "up");
    assert!(
        recs.iter().any(|r| r["target"] == "crawlfleet::progress"
            && r["level"] == "INFO"
            && r["message"].as_str().unwrap().starts_with("progress ")),
        "{stderr}"
    );

    // Text by default: env_logger's lines, as before.
    let log = dir.path().join("text.stderr");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
    cmd.args(["dupserver", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("dup"))
        .env("RUST_LOG", "info")
        .stderr(Stdio::from(File::create(&log).unwrap()));
    let _dup = Role::spawn(cmd);
    let deadline = Instant::now() + Duration::from_secs(60);
    let line = loop {
        let text = std::fs::read_to_string(&log).unwrap();
        if let Some(l) = text.lines().find(|l| l.contains("recovered")) {
            break l.to_string();
        }
        assert!(Instant::now() < deadline, "no start line: {text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(serde_json::from_str::<Value>(&line).is_err(), "{line}");
    assert!(
        line.starts_with('[') && line.contains(" INFO  crawlfleet_shells::dupserver] "),
        "{line}"
    );

    // The error that stops a role is a record too.
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args([
            "dupserver",
            "--listen",
            "127.0.0.1:0",
            "--log-format",
            "json",
            "--data-dir",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let log = dir.path().join("failed.stderr");
    std::fs::write(&log, out.stderr.as_slice()).unwrap();
    let recs = records(&log, "dupserver");
    assert!(
        recs.iter()
            .any(|r| r["level"] == "ERROR" && r["target"] == "crawlfleet"),
        "{recs:?}"
    );

    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["dupserver", "--log-format", "xml", "--data-dir"])
        .arg(dir.path().join("never"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("[possible values: text, json]"), "{stderr}");
    assert!(!dir.path().join("never").exists());
}
