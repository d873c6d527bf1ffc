//! The one integration-test binary: each module below is one area.

mod admin;
mod admin_auth;
mod architecture;
mod bench_cli;
// Conformance to MS-FSCMT and MS-FSCADM from a peer written from the specs (issue 25).
mod conformance_fscadm;
mod conformance_fscmt;
mod crawl;
mod dashboard;
mod data_dir_lock;
mod decode_errors;
mod deploy;
mod differential;
mod disk_full;
mod disk_full_node;
mod distributor;
mod docs_cli;
mod dupserver;
mod feed_sessions;
mod feeding;
mod feeding_fault;
mod firsthour;
mod fleet;
mod fuzz_corpus;
mod inspect_cli;
mod linkstore;
mod log_format;
mod login;
mod metrics;
mod nameserver;
mod netns_fault;
mod port_limits;
mod queue_crash;
mod rup;
mod rup_robot;
mod rup_up;
mod sched;
mod search;
mod synthweb;
mod util;
mod vectors;
// Sitemaps and IndexNow (issue 24).
mod indexnow;
mod shutdown;
mod sitemaps;
mod warc;
