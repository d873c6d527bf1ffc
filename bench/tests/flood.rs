//! `bench flood` against a duplicate server started from this executable's hidden `role`: the
//! flooding connections write what they were told to, the well-behaved client is answered, and
//! the role's memory is read from /proc. No timing or memory thresholds: the figures are
//! reported, not judged here (tests/port_limits.rs holds the limits' own tests).

use crate::dup::DupServer;
use crate::util::run_json;

fn flood(server: &DupServer, args: &[&str]) -> serde_json::Value {
    let (target, pid) = (server.addr.to_string(), server.child.id().to_string());
    let mut all = vec![
        "flood",
        "--target",
        &target,
        "--pid",
        &pid,
        "--seconds",
        "1",
        "--json",
    ];
    all.extend_from_slice(args);
    run_json(&all)
}

fn memory_is_read(j: &serde_json::Value) {
    let mb = |k: &str| {
        j[k].as_f64()
            .unwrap_or_else(|| panic!("{k} is a number: {j}"))
    };
    assert!(mb("rss_before_mb") > 0.0, "{j}");
    assert!(mb("rss_peak_mb") > 0.0, "{j}");
    // VmHWM is read too. It is not compared with the samples: the kernel raises it only on
    // some paths (unmapping, exit), so memory an allocator hands back with madvise (mimalloc's
    // purge) can leave it below a sampled peak.
    assert!(mb("hwm_mb") > 0.0, "{j}");
}

#[test]
fn bench_flood_pipelines_adds_and_a_probe_is_answered_meanwhile() {
    let server = DupServer::start("flood-add");
    let j = flood(&server, &["--load", "ppdup-add"]);
    assert_eq!(j["load"], "ppdup-add", "{j}");
    assert_eq!(j["connections"], 1, "{j}");
    assert_eq!(j["sent_unit"], "requests", "{j}");
    assert!(j["sent"].as_u64().expect("sent") >= 1000, "{j}");
    assert_eq!(j["probe"], "ppdup", "{j}");
    assert!(j["probe_failure"].is_null(), "{j}");
    assert!(j["round_trips"].as_u64().expect("round_trips") > 0, "{j}");
    assert!(
        j["p99_us"].as_u64().expect("p99_us") >= j["p50_us"].as_u64().unwrap(),
        "{j}"
    );
    memory_is_read(&j);
}

#[test]
fn bench_flood_holds_partial_frames_short_of_their_last_mib() {
    let server = DupServer::start("flood-partial");
    let j = flood(
        &server,
        &[
            "--load",
            "partial-fscmt",
            "--connections",
            "2",
            "--frame-mib",
            "3",
        ],
    );
    assert_eq!(j["load"], "partial-fscmt", "{j}");
    assert_eq!(j["sent_unit"], "bytes", "{j}");
    // Each connection sends all of its 3 MiB frame but the last MiB, well within the server's
    // budget for partial messages and its idle timeout: both stay open.
    assert_eq!(j["sent"], 2 * (2u64 << 20), "{j}");
    assert_eq!(j["closed"], 0, "{j}");
    assert!(j["probe_failure"].is_null(), "{j}");
    assert!(j["round_trips"].as_u64().expect("round_trips") > 0, "{j}");
    memory_is_read(&j);
}
