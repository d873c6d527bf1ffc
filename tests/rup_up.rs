//! RUP at work in `crawlfleet up` (docs/rup.md "The synthetic web"): the generated web's hosts
//! publish /rupinfo.txt and answer the CGI, the nodes register with each, the web mails its
//! update reports to the nodes' SMTP receivers every latency period, and the pages a report
//! names are fetched again, and no other.

use std::collections::{BTreeMap, BTreeSet};
use std::io::BufReader;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::rup::peer::{post, pre};
use crate::util::{json_line, stop_up_summary, temp_dir, wait_until, KillOnDrop};

/// The access log's lines: host, path, start (Unix seconds).
fn accesses(log: &Path) -> Vec<(String, String, f64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() == 6).then(|| {
                (
                    f[0].to_owned(),
                    f[1].to_owned(),
                    f[3].parse().unwrap_or(0.0),
                )
            })
        })
        .collect()
}

/// A tree page of the generated web (`/s0/p3.html`): the pages that change.
fn tree_page(path: &str) -> bool {
    path.starts_with("/s") && path.contains("/p") && path.ends_with(".html")
}

/// The tree pages fetched more than once up to `until`, by `http://host/path`.
fn refetched(log: &Path, until: f64) -> BTreeSet<String> {
    let mut n: BTreeMap<String, usize> = BTreeMap::new();
    for (host, path, start) in accesses(log) {
        if tree_page(&path) && start <= until {
            *n.entry(format!("http://{host}{path}")).or_default() += 1;
        }
    }
    n.into_iter()
        .filter(|(_, c)| *c > 1)
        .map(|(u, _)| u)
        .collect()
}

#[test]
fn up_shows_rup_registrations_reports_and_refetches_of_changed_pages_only() {
    let dir = temp_dir("rup-up");
    let log = dir.path().join("access.log");
    // 10% of the tree pages change every 2 seconds; the nodes ask for a report as often.
    let mut up = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["up", "--synthetic-web", "2:40", "--web-base", "127.94.3.10"])
        .args(["--web-changes", "10%/2", "--distributors", "0", "--json"])
        .arg("--access-log")
        .arg(&log)
        .arg("--data-dir")
        .arg(dir.path().join("up"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .expect("crawlfleet up runs");
    // Ended when the test fails before the SIGINT.
    let _kill = KillOnDrop(up.id());
    let mut out = BufReader::new(up.stdout.take().unwrap());
    let start = json_line(&mut out);
    assert_eq!(start["event"], "start", "{start}");

    // Each host's rupinfo.txt is read and its CGI called (Register) by the node crawling it.
    wait_until("both hosts registered with", || {
        let a = accesses(&log);
        let hosts = |p: &str| {
            a.iter()
                .filter(|(_, path, _)| path == p)
                .map(|(h, _, _)| h.clone())
                .collect::<BTreeSet<_>>()
                .len()
        };
        hosts("/rupinfo.txt") == 2 && hosts("/rup-cgi") == 2
    });
    let host0: SocketAddr = accesses(&log)
        .iter()
        .find(|(_, p, _)| p == "/rupinfo.txt")
        .map(|(h, _, _)| h.parse().unwrap())
        .unwrap();
    let host1: SocketAddr = accesses(&log)
        .iter()
        .map(|(h, _, _)| h.parse::<SocketAddr>().unwrap())
        .find(|h| *h != host0)
        .unwrap();
    // The reports bring changed pages back: several tree pages fetched again.
    wait_until("changed pages fetched again", || {
        refetched(&log, f64::MAX).len() >= 4
    });
    // Every change the web logged so far, from each host's GetIndex (3.3.4).
    let asked_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let mut changed = BTreeSet::new();
    for host in [host0, host1] {
        let a = post(host, "Action=GetIndex&Span=1-hour");
        assert_eq!(a.status, 200, "{}", a.body);
        let text = pre(&a);
        assert!(text.starts_with(&format!("SequenceNumber: 0\nURLBase: http://{host}/\n\n")));
        for l in text.lines().filter(|l| l.starts_with("Change[")) {
            let (_, paths) = l.split_once("]: ").unwrap();
            for p in paths.split(", ") {
                changed.insert(format!("http://{host}/{p}"));
            }
        }
    }
    let again = refetched(&log, asked_at);
    assert!(again.len() >= 4, "{again:?}");
    // The pages fetched again are changed ones: an unchanged page is never fetched twice.
    let unchanged: Vec<&String> = again.difference(&changed).collect();
    assert!(
        unchanged.is_empty(),
        "fetched again though unchanged: {unchanged:?}"
    );

    let summary = stop_up_summary(&mut up, &mut out);
    let rup = &summary["rup"];
    assert_eq!(rup["sites_registered"].as_u64(), Some(2), "{summary}");
    let received = rup["reports_received"].as_u64().unwrap();
    let applied = rup["reports_applied"].as_u64().unwrap();
    assert!(
        received >= 1 && applied >= 1 && applied <= received,
        "{summary}"
    );
    assert!(rup["pages_queued"].as_u64().unwrap() >= 1, "{summary}");
}

/// `--no-web-rup`: the generated web publishes no rupinfo.txt and the collection is no robot.
#[test]
fn up_without_web_rup_registers_nowhere() {
    let dir = temp_dir("rup-up-off");
    let log = dir.path().join("access.log");
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["up", "--synthetic-web", "2:10", "--web-base", "127.94.3.40"])
        .args([
            "--no-web-rup",
            "--distributors",
            "0",
            "--json",
            "--until-idle",
        ])
        .arg("--access-log")
        .arg(&log)
        .arg("--data-dir")
        .arg(dir.path().join("up"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("crawlfleet up runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(text.trim().lines().last().unwrap_or("")).unwrap();
    assert!(summary["pages_fetched"].as_u64().unwrap() > 10, "{summary}");
    assert_eq!(summary["rup"]["sites_registered"].as_u64(), Some(0));
    let rup: Vec<_> = accesses(&log)
        .into_iter()
        .filter(|(_, p, _)| p == "/rupinfo.txt" || p == "/rup-cgi")
        .collect();
    assert!(rup.is_empty(), "{rup:?}");
}
