//! `crawlfleet bench queue` as a script runs it: one JSON object with the figures it promises
//! (no timing thresholds: the figures are reported, not judged here).

use crate::util::run_json as run;

#[test]
fn bench_queue_prints_its_rate_as_json() {
    let j = run(&["queue", "--total", "20000", "--json"]);
    assert_eq!(j["total"], 20000);
    assert!(j["rate"].as_f64().expect("rate is a number") > 0.0, "{j}");
    assert!(j["ops_rate"].as_f64().expect("ops_rate") > j["rate"].as_f64().unwrap());
    // Real crawl queue entries, not toy records: a URI and its referrer (at least 75 bytes of
    // strings) and the entry's other parts, in the queue's compact layout.
    assert!(
        j["record_bytes"].as_f64().expect("record_bytes") > 80.0,
        "{j}"
    );
    assert!(
        j.get("peer_rate").is_none(),
        "no peer without --vs-redis: {j}"
    );
}

#[test]
fn bench_queue_fill_pops_everything_back_in_order() {
    let dir = std::env::temp_dir().join(format!("crawlfleet-queue-fill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.to_str().expect("UTF-8 temp dir");
    let j = run(&[
        "queue",
        "--fill",
        "30000",
        "--dir",
        d,
        "--segment-bytes",
        "1048576",
        "--json",
    ]);
    assert_eq!(j["entries"], 30000);
    let disk = j["disk_bytes"].as_u64().expect("disk_bytes");
    let bytes = j["record_bytes"].as_f64().unwrap() * 30000.0;
    assert!(disk as f64 > bytes, "{j}");
    assert!(j["rss_bytes"].as_u64().expect("rss_bytes") > 0, "{j}");
    // Popped entries were checked in order by the command; their segments were released: what
    // is left is the tail segment, at most 4 spares kept for reuse, and the cursor page.
    assert!(
        j["disk_bytes_after"].as_u64().unwrap() <= 5 * 1048576 + 4096,
        "{j}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
