//! The dashboard on the multinode scheduler's administrative port of a `crawlfleet up`
//! cluster crawling the synthetic web: its files and JSON over HTTP, then in a real browser
//! (headless Chromium driven through chromedriver by tests/dashboard/drive.py; Debian's
//! chromium and chromium-driver, which .ci/run installs; that part says it skipped without
//! them): the page shows pages crawled > 0 and the master content distributor, its Suspend
//! button suspends the collection (checked through XML-RPC), and a screenshot is saved under
//! target/.

use std::process::Command;
use std::time::{Duration, Instant};

use crawlfleet_core::xmlrpc::Value;
use crawlfleet_shells::admin::client;

use crate::metrics::{get, Up};
use crate::util::{checkout_path, temp_dir};

fn installed(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn status(admin: &str, coll: &str) -> String {
    match client::call(admin, "CollectionGetStatus", &[coll.into()]) {
        Ok(Ok(Value::String(s))) => s,
        other => panic!("CollectionGetStatus: {other:?}"),
    }
}

#[test]
fn the_dashboard_shows_the_crawl_and_suspends_a_collection_in_chromium() {
    let dir = temp_dir("dashboard");
    let up = Up::start("3:30", &dir.path().join("data"), &["--distributors", "2"]);
    let admin = up.addr("admin");

    // The files, embedded in the binary.
    let (code, ty, html) = get(&admin, "/");
    assert_eq!((code, ty.as_str()), (200, "text/html; charset=utf-8"));
    assert!(html.contains("<script src=\"/dashboard.js\">"));
    let (code, _, js) = get(&admin, "/dashboard.js");
    assert_eq!(code, 200);
    assert!(js.contains("/api/dashboard") && js.contains("CollectionSuspend"));
    assert_eq!(get(&admin, "/dashboard.css").0, 200);
    assert_eq!(get(&admin, "/nothing-here").0, 404);

    // The JSON: the collection with pages fetched, the two nodes, the other roles.
    let deadline = Instant::now() + Duration::from_secs(120);
    let d: serde_json::Value = loop {
        let (code, ty, body) = get(&admin, "/api/dashboard");
        assert_eq!((code, ty.as_str()), (200, "application/json"));
        let d: serde_json::Value = serde_json::from_str(&body).unwrap();
        let c = &d["collections"][0];
        let peers_up = d["peers"]
            .as_array()
            .is_some_and(|p| p.len() == 3 && p.iter().all(|p| p["up"] == true));
        let nodes = d["nodes"].as_array().map_or(0, Vec::len);
        // Both distributors read, one of them master, holding the nodes' feeding sessions
        // and documents indexed between them (the master places each session).
        let dists = d["distributors"].as_array().cloned().unwrap_or_default();
        let sum = |k: &str| -> f64 {
            dists
                .iter()
                .map(|p| p["figures"][k].as_f64().unwrap_or(0.0))
                .sum()
        };
        let master_fed = dists.iter().any(|p| p["election"] == "master")
            && sum("sessions") >= 1.0
            && sum("documents") > 0.0
            && sum("operations") > 0.0;
        let dists_up = dists.len() == 2 && dists.iter().all(|p| p["up"] == true);
        if c["pages"].as_f64().unwrap_or(0.0) > 0.0
            && peers_up
            && nodes == 2
            && dists_up
            && master_fed
        {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "the dashboard never showed the crawl: {d}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let c = &d["collections"][0];
    assert_eq!(c["name"], "synthetic");
    assert_eq!(c["status"], "Crawling");
    assert!(c["http"]["200"].as_f64().unwrap() > 0.0, "{c}");
    assert!(d["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|n| n["connected"] == true));
    let dup = d["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "dupserver")
        .unwrap();
    assert!(dup["figures"]["entries"].as_f64().unwrap() > 0.0, "{dup}");
    // One master, one backup (MS-FSCDFT 3.4), each with its figures.
    let dists = d["distributors"].as_array().unwrap();
    let mut elections: Vec<&str> = dists
        .iter()
        .map(|p| p["election"].as_str().unwrap())
        .collect();
    elections.sort();
    assert_eq!(elections, ["backup", "master"], "{d}");
    let names: Vec<&str> = dists.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"distributor1") && names.contains(&"distributor2"));
    let master = dists.iter().find(|p| p["election"] == "master").unwrap();
    for p in dists {
        for k in ["sessions", "documents", "load", "connections", "operations"] {
            assert!(p["figures"][k].is_number(), "{k}: {p}");
        }
    }
    // The nodes and the backup talk to the master.
    assert!(
        master["figures"]["connections"].as_f64().unwrap() >= 1.0,
        "{master}"
    );

    // In the browser.
    let tools = ["chromium", "chromedriver", "python3"];
    if let Some(missing) = tools.iter().find(|t| !installed(t)) {
        eprintln!("skipped the browser part: {missing} is not installed");
        return;
    }
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new("python3")
        .arg(checkout_path("tests/dashboard/drive.py"))
        .arg(format!("http://{admin}/"))
        .arg("synthetic")
        .arg(&shot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "drive.py failed\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert!(r["pages"].as_i64().unwrap() > 0, "{r}");
    assert_eq!(r["fault"], false, "{r}");
    assert_eq!(r["state"], "Suspended");
    assert!(
        r["distributors"].as_str().unwrap().contains("master"),
        "{r}"
    );
    // The click went through FSCADM: the scheduler says the collection is suspended.
    assert_eq!(status(&admin, "synthetic"), "suspended");
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
    eprintln!("screenshot: {}", shot.display());
}
