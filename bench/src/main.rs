//! The `crawlfleet-bench` binary (also run as `crawlfleet bench`): parses the command line and
//! runs one benchmark.

use std::process::ExitCode;

fn main() -> ExitCode {
    crawlfleet_bench::main()
}
