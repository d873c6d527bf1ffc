//! `crawlfleet bench crawl` with the spider column, on a small web: the harness starts one
//! spider process per host in each mode and counts what they fetched from nginx's access log.
//! The spider here is a stand-in written for the test (it fetches its host's robots.txt and
//! `/`, and with `--sync` every other page of its host), so the counts are known; the real
//! spider_cli runs in scripts/bench-crawl.sh. Skipped when nginx or python3 is missing
//! (`.ci/run` installs nginx).

use std::os::unix::fs::PermissionsExt;

use crate::util::run_json;

const FAKE_SPIDER: &str = r#"#!/usr/bin/env python3
import os, sys, urllib.request
# Its spool directories go to the work directory's temporary directory.
assert os.path.isdir(os.environ["TMPDIR"]) and os.environ["TMPDIR"].endswith("-tmp")
url = sys.argv[sys.argv.index("--url") + 1]
assert "--respect-robots-txt" in sys.argv and "crawl" in sys.argv
# spider_cli's crawl returns before fetching anything without --output-links.
assert "--output-links" in sys.argv
urllib.request.urlopen(url + "robots.txt").read()
urllib.request.urlopen(url).read()
if "--sync" in sys.argv:
    # Every other tree page of the host (3:30: pages 1..29 under /s0/ and /s1/).
    for i in range(1, 30):
        urllib.request.urlopen(url + "s%d/p%d.html" % (i // 20, i)).read()
"#;

#[test]
fn the_spider_column_counts_each_mode_from_the_access_log() {
    let have = |p: &str, a: &str| std::process::Command::new(p).arg(a).output().is_ok();
    if !have("nginx", "-v") || !have("python3", "--version") {
        eprintln!("bench crawl: nginx or python3 is missing; test skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("bench-crawl-spider-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let spider = dir.join("spider");
    std::fs::write(&spider, FAKE_SPIDER).unwrap();
    std::fs::set_permissions(&spider, std::fs::Permissions::from_mode(0o755)).unwrap();
    let v = run_json(&[
        "crawl",
        "--web",
        "3:30",
        "--nodes",
        "1",
        "--base",
        "127.99.0.1",
        "--skip-wrk",
        "--skip-scrapy",
        "--spider",
        spider.to_str().unwrap(),
        "--spider-timeout",
        "60",
        "--timeout",
        "120",
        "--json",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["pages"].as_u64(), Some(90), "{v}");
    // One process per host: each fetched `/` (robots.txt is not a page), so no host whole;
    // with --sync every page of its host.
    assert_eq!(v["spider_pages"].as_u64(), Some(3), "{v}");
    assert_eq!(v["spider_complete_hosts"].as_u64(), Some(0), "{v}");
    assert_eq!(v["spider_sync_pages"].as_u64(), Some(90), "{v}");
    assert_eq!(v["spider_sync_complete_hosts"].as_u64(), Some(3), "{v}");
    assert_eq!(v["spider_stopped"].as_u64(), Some(0), "{v}");
    assert!(v["spider_rate"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["ratio_spider_sync"].as_f64().unwrap() > 0.0, "{v}");
    // The crawl as nginx saw it, first answer to last: within the cluster's own span (which
    // starts before the roles ask for anything and ends after the last page).
    let web = v["web_seconds"].as_f64().expect("web_seconds");
    assert!(
        web > 0.0 && web <= v["elapsed_seconds"].as_f64().unwrap() + 0.05,
        "{v}"
    );
    assert!(v["web_rate"].as_f64().unwrap() > 0.0, "{v}");
}
