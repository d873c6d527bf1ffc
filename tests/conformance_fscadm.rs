//! MS-FSCADM conformance: Python's unmodified `xmlrpc.client` (tests/conformance/
//! conformance_fscadm.py) against real roles on loopback. Each test names the section it
//! checks; docs/conformance.md lists them per method.

use std::path::Path;

use crate::conformance_fscmt::{free_port, multinode_at, node, Peer};
use crate::util::{checkout_path, temp_dir, Role};

/// A standalone node scheduler and its administrative address.
fn standalone(data: &Path) -> (Role, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    (standalone_at(data, &admin, &[]), admin)
}

/// A standalone node scheduler with its administrative interface on `admin`.
fn standalone_at(data: &Path, admin: &str, extra: &[&str]) -> Role {
    let mut args = vec![
        "node",
        "--standalone",
        "--admin",
        admin,
        "--data-dir",
        data.to_str().unwrap(),
        "--sync-ms",
        "20",
    ];
    args.extend_from_slice(extra);
    Role::start(&args)
}

/// MS-FSCADM 2.2.8.6 SetLogLevel (and 2.2.8.1 GetLogLevel): 1 on success, 0 otherwise.
#[test]
fn set_log_level_answers_one_or_zero() {
    let dir = temp_dir("cf-loglevel");
    let (_node, admin) = standalone(&dir.path().join("n"));
    Peer::start("conformance_fscadm", "set_log_level", &[&admin]).finish();
}

/// MS-FSCADM 2.2.2.2 hostport and 2.2.2.3 contentdest, with 2.2.7 faults: a malformed Site or
/// Destination argument gets a fault naming it.
#[test]
fn malformed_sites_and_destinations_get_a_fault_naming_the_argument() {
    let dir = temp_dir("cf-malformed");
    let (_node, admin) = standalone(&dir.path().join("n"));
    Peer::start("conformance_fscadm", "malformed_arguments", &[&admin]).finish();
}

/// MS-FSCADM 2.2.9.13 CollectionRefetch with a SubCollection, on a standalone node scheduler:
/// the subcollection's pages (in its crawl store) are requested again and no other; an
/// unknown SubCollection is a fault (2.2.7) and fetches nothing.
#[test]
fn collection_refetch_of_a_subcollection_fetches_it_again() {
    let dir = temp_dir("cf-refetch");
    let admin = format!("127.0.0.1:{}", free_port());
    let tmp = dir.path().to_str().unwrap().to_owned();
    let mut peer = Peer::start(
        "conformance_fscadm",
        "refetch_subcollection",
        &["127.131.0", &tmp, &admin],
    );
    let cfg = peer.announced()["config"].as_str().unwrap().to_owned();
    let _node = standalone_at(&dir.path().join("n"), &admin, &["--config", &cfg]);
    let got = peer.finish();
    eprintln!("requests per page: {got}");
}

/// MS-FSCADM 2.2.10.4 CollectionGetSiteStatistics on a standalone node scheduler: the
/// structure of 2.2.4 with the site schema of 2.2.4.9 for each crawl site, agreeing with what
/// the web served (requests, bytes, statuses, refused connections), adding up to the
/// collection's statistics, and persisted across a restart (3.3.1).
#[test]
fn site_statistics_of_a_standalone_node_agree_with_the_web() {
    let dir = temp_dir("cf-sitestats");
    let admin = format!("127.0.0.1:{}", free_port());
    let tmp = dir.path().to_str().unwrap().to_owned();
    let data = dir.path().join("n");
    let mut peer = Peer::start(
        "conformance_fscadm",
        "site_statistics",
        &["127.133.0", &tmp, &admin, data.to_str().unwrap()],
    );
    let cfg = peer.announced()["config"].as_str().unwrap().to_owned();
    let args = ["--config", &cfg, "--stats-merge", "1"];
    let node = standalone_at(&data, &admin, &args);
    assert_eq!(peer.announced()["restart"], 1);
    node.kill();
    let _node = standalone_at(&data, &admin, &args);
    peer.tell("restarted");
    let got = peer.finish();
    eprintln!("sites: {got}");
}

/// MS-FSCADM 2.2.10.4 CollectionGetSiteStatistics on a multinode scheduler with two node
/// schedulers: each site's statistics come from the node that crawls it.
#[test]
fn site_statistics_through_the_multinode_scheduler_come_from_the_crawling_node() {
    let dir = temp_dir("cf-mn-sitestats");
    let admin = format!("127.0.0.1:{}", free_port());
    let tmp = dir.path().to_str().unwrap().to_owned();
    let mut peer = Peer::start(
        "conformance_fscadm",
        "site_statistics_multinode",
        &["127.134.0", &tmp, &admin],
    );
    let cfg = peer.announced()["config"].as_str().unwrap().to_owned();
    let (mn, _) = multinode_at(&dir.path().join("mn"), &[&cfg], "127.0.0.1:0", &admin);
    let _nodes: Vec<Role> = ["n1", "n2"]
        .iter()
        .map(|id| node(&dir.path().join(id), mn.addr(), id, &[]))
        .collect();
    let got = peer.finish();
    eprintln!("{got}");
}

/// MS-FSCADM 2.2.10.6 CollectionGetStatistics2 ("cur" the current refresh cycle, "prev" the
/// previous one, each with its 2.2.4.9 Epoch) and 2.2.10.5 across a CollectionRefetch; 2.2.5
/// DocSizeAvg / DocSizeMax per document and ReadNet / WriteNet with heads and requests.
#[test]
fn statistics_keep_each_refresh_cycle_in_its_slot() {
    let dir = temp_dir("cf-stat-cycle");
    let (_node, admin) = standalone(&dir.path().join("n"));
    let got = Peer::start(
        "conformance_fscadm",
        "statistics_by_cycle",
        &[&admin, "127.133.0"],
    )
    .finish();
    eprintln!("downloads: {got}");
}

/// MS-FSCADM 2.2.9.5 CollectionDeleteSite and 2.2.9.6 CollectionDeleteURIs: 2.2.5 Deleted
/// and DocumentStore follow the deletes.
#[test]
fn statistics_count_admin_deletes() {
    let dir = temp_dir("cf-stat-del");
    let (_node, admin) = standalone(&dir.path().join("n"));
    Peer::start(
        "conformance_fscadm",
        "statistics_after_deletes",
        &[&admin, "127.134.0"],
    )
    .finish();
}

/// docs/conformance.md names only tests that exist: every `module::test` (or
/// `module::submodule::test`) it cites is a `fn` of tests/module.rs (or
/// tests/module/submodule.rs).
#[test]
fn conformance_table_names_existing_tests() {
    let doc = std::fs::read_to_string(checkout_path("docs/conformance.md")).unwrap();
    let mut named = 0;
    for cited in doc.split('`').skip(1).step_by(2) {
        let parts: Vec<&str> = cited.split("::").collect();
        let is_path = parts.len() >= 2
            && parts.iter().all(|p| {
                !p.is_empty()
                    && p.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            });
        if !is_path {
            continue;
        }
        let (test, modules) = parts.split_last().unwrap();
        let file = checkout_path(&format!("tests/{}.rs", modules.join("/")));
        let src = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("{cited}: {} ({e})", file.display()));
        assert!(
            src.contains(&format!("fn {test}(")),
            "docs/conformance.md cites {cited}, which is no test of {}",
            file.display()
        );
        named += 1;
    }
    assert!(named > 40, "only {named} tests cited");
}
