//! The one integration-test binary: each module below is one area.

mod admin;
mod bench_cli;
mod crawl;
mod decode_errors;
mod differential;
mod docs_cli;
mod dupserver;
mod fleet;
mod fuzz_corpus;
mod inspect_cli;
mod linkstore;
mod queue_crash;
mod sched;
mod synthweb;
mod util;
mod vectors;
