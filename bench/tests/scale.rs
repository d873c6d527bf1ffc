//! `crawlfleet bench scale` at a tiny scale: every role a process of its own, all of them
//! SIGKILLed halfway and started again from their data, the crawl complete afterwards, and the
//! figures the benchmark reports all there; then the same pages on one host.

use crate::util::run_json;

#[test]
fn a_tiny_scale_run_survives_the_kill_and_reports_every_figure() {
    // 3 hosts x 40 pages, one request at a time per site 50 ms apart: at least 2 s of
    // crawling, so the kill at half the pages falls in the middle of it.
    let args = [
        "scale",
        "--hosts",
        "3",
        "--pages",
        "120",
        "--connections",
        "1",
        "--delay",
        "0.05",
        "--kill-at",
        "0.5",
        "--versus-hosts",
        "1",
        "--base",
        "127.98.0.1",
        "--stall",
        "120",
        "--json",
    ];
    let v = run_json(&args);
    assert_eq!(v["complete"], true, "{v}");
    assert_eq!(v["pages"].as_u64(), Some(120), "{v}");
    assert_eq!(v["not_200"].as_u64(), Some(0), "{v}");
    // robots.txt per host, at least once.
    assert!(v["robots_requests"].as_u64().unwrap() >= 3, "{v}");
    let tenths = v["tenths_pages_per_second"].as_array().unwrap();
    assert_eq!(tenths.len(), 10, "{v}");
    for role in [
        "dupserver",
        "dupreplica",
        "multinode",
        "node1",
        "node2",
        "synthweb",
    ] {
        assert!(
            v["peak_rss_mb"][role].as_f64().unwrap() > 0.0,
            "{role}: {v}"
        );
    }
    for role in ["dupserver", "dupreplica", "multinode", "node1", "node2"] {
        assert!(
            v["disk_bytes_per_page"][role].as_f64().unwrap() > 0.0,
            "{role}: {v}"
        );
    }
    // Each node's queue peak, read from its /metrics, and what it costs in memory.
    for node in ["node1", "node2"] {
        assert!(
            v["peak_queued_uris"][node].as_u64().unwrap() > 0,
            "{node}: {v}"
        );
        assert!(
            v["rss_bytes_per_queued_uri"][node].as_f64().unwrap() > 0.0,
            "{node}: {v}"
        );
        assert!(
            v["queue_memory_bytes_per_queued_uri"][node]
                .as_f64()
                .is_some(),
            "{node}: {v}"
        );
    }
    // Every role came back from its data and the crawl went on.
    let restart = &v["restart"];
    for role in ["dupserver", "dupreplica", "multinode", "node1", "node2"] {
        assert!(
            restart["roles_ready_seconds"][role].as_f64().is_some(),
            "{role}: {v}"
        );
    }
    assert!(
        restart["crawl_resumed_after_seconds"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    let killed = v["killed_in_tenth"].as_u64().unwrap();
    assert!((4..=9).contains(&killed), "{v}");
    // The same 120 pages on one host, crawled to the end.
    assert_eq!(v["versus"]["hosts"].as_u64(), Some(1), "{v}");
    assert_eq!(v["versus"]["pages"].as_u64(), Some(120), "{v}");
}
