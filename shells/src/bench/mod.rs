//! `crawlfleet bench`: load and capacity measurements of crawlfleet's parts, printed for people
//! or (with `--json`) as one JSON object for scripts.

pub mod crawl;
pub mod dup;
pub mod dupstore;
pub mod links;
pub mod queue;
pub mod refresh;
pub mod route;

use std::fmt;

/// A failed benchmark run.
#[derive(Debug)]
pub struct BenchError(pub String);

impl fmt::Display for BenchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BenchError {}

/// The resident set size of this process, in bytes (Linux `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
