//! The one integration-test binary of `crawlfleet-bench`: each module below is one benchmark or
//! the command line; each runs the `crawlfleet-bench` executable as a script would.

mod cli;
mod crawl;
mod dup;
mod flood;
mod queue;
mod refresh;
mod roles;
mod scale;
mod util;
