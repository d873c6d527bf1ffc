//! The benchmarks that measure a role in a child process (`route`: a multinode scheduler,
//! `links`: a link store) start it from this executable's hidden `role` subcommand, and need no
//! `crawlfleet` binary; each prints one JSON object with every URI or line accounted for (no
//! timing thresholds: the figures are reported, not judged here).

use crate::util::run_json;

#[test]
fn bench_route_routes_every_uri_through_its_own_multinode_scheduler() {
    let j = run_json(&[
        "route", "--nodes", "2", "--total", "4000", "--sites", "50", "--json",
    ]);
    assert_eq!(j["sent"], 4000, "{j}");
    assert_eq!(j["uris"], 4000, "{j}");
    assert_eq!(j["nodes"], 2, "{j}");
    assert_eq!(j["sites"], 50, "{j}");
    assert!(j["rate"].as_f64().expect("rate is a number") > 0.0, "{j}");
}

#[test]
fn bench_links_feeds_its_own_link_store() {
    let j = run_json(&[
        "links",
        "--lines",
        "20000",
        "--batch-lines",
        "2000",
        "--connections",
        "1",
        "--json",
    ]);
    assert_eq!(j["lines"], 20000, "{j}");
    assert_eq!(j["messages"], 10, "{j}");
    assert!(j["rate"].as_f64().expect("rate is a number") > 0.0, "{j}");
}
