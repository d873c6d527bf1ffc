//! The `crawlfleet` binary: parses the command line and runs one mode.

use std::process::ExitCode;

fn main() -> ExitCode {
    crawlfleet_shells::main()
}
