//! `crawlfleet bench`: load and capacity measurements of crawlfleet's parts, printed for people
//! or (with `--json`) as one JSON object for scripts.
//!
//! The benchmarks are a crate and an executable of their own, `crawlfleet-bench`, so that the
//! production `crawlfleet` binary carries none of their dependencies (the redis client,
//! hdrhistogram); `crawlfleet bench ARGS` finds this executable beside its own (or on PATH) and
//! runs it with ARGS. `main` parses [`cli::Cli`] and calls [`run`], which dispatches to one
//! `run` function per benchmark module.
//!
//! ```text
//! cargo build --release                         # builds crawlfleet and crawlfleet-bench
//! target/release/crawlfleet bench route --json  # or: target/release/crawlfleet-bench route --json
//! ```
#![deny(missing_docs)]

pub mod cli;
pub mod crawl;
pub mod dup;
pub mod dupstore;
pub mod feed;
pub mod flood;
pub mod links;
pub mod queue;
pub mod refresh;
mod refresh_rup;
pub mod route;
pub mod scale;
mod spider;

use std::ffi::OsString;
use std::process::ExitCode;

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

/// A role the benchmark started as a child process, killed (and its data directory removed)
/// when dropped.
pub(crate) struct RoleChild {
    pub(crate) child: std::process::Child,
    pub(crate) dir: std::path::PathBuf,
}

impl Drop for RoleChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads the line a role child process announces itself with on its standard output and
/// returns the address it ends with (the role's listening address).
pub(crate) fn read_announced(
    child: &mut std::process::Child,
    what: &str,
) -> Result<std::net::SocketAddr, BenchError> {
    use std::io::Read;
    let mut out = child
        .stdout
        .take()
        .ok_or_else(|| BenchError("no stdout".into()))?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while out.read(&mut byte).map_err(|e| BenchError(e.to_string()))? == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&line).into_owned();
    line.rsplit(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| BenchError(format!("{what} printed {line:?}")))
}

/// The resident set size of this process, in bytes (Linux `/proc/self/status`).
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The whole program: the command line, then one benchmark (or, for the benchmarks' child
/// processes, one crawlfleet role).
pub fn main() -> ExitCode {
    use clap::Parser;
    // Each role, and the load side's sockets, as `crawlfleet` raises it (a synthetic web of
    // 10,000 hosts needs a listener each).
    let open_files = crawlfleet_shells::raise_open_files_limit();
    let cli = cli::Cli::parse();
    crawlfleet_shells::schedpolicy::choose(cli.sched);
    // The roles a benchmark starts as processes of this executable take the same policy. No
    // thread runs yet, so changing the environment races with nothing.
    std::env::set_var("CRAWLFLEET_SCHED", cli.sched.name());
    match cli.command {
        cli::BenchCommand::Role(role) => run_role(role),
        command => {
            // The load side moves large buffers between threads as the roles do.
            crawlfleet_shells::tune_allocator();
            crawlfleet_shells::init_logging();
            crawlfleet_shells::log_open_files_limit(open_files);
            run(command)
        }
    }
}

/// Runs one benchmark, printing its error (if any) to stderr.
pub fn run(command: cli::BenchCommand) -> ExitCode {
    use cli::BenchCommand;
    let result = match command {
        BenchCommand::Dup(args) => dup::run(&args),
        BenchCommand::Route(args) => route::run(&args),
        BenchCommand::Dupstore(args) => dupstore::run(&args),
        BenchCommand::Queue(args) => queue::run(&args),
        BenchCommand::Links(args) => links::run(&args),
        BenchCommand::Refresh(args) => refresh::run(&args),
        BenchCommand::Crawl(args) => crawl::run(&args),
        BenchCommand::Flood(args) => flood::run(&args),
        BenchCommand::Feed(args) => feed::run(&args),
        BenchCommand::Scale(args) => scale::run(&args),
        BenchCommand::Role(role) => return run_role(role),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crawlfleet: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a crawlfleet role as `crawlfleet ARGS` would, with the role's own process setup
/// (allocator tuning, logging): `bench route` and `bench links` start their multinode scheduler
/// or link store so, as a child process of this executable.
pub fn run_role(role: cli::RoleArgs) -> ExitCode {
    crawlfleet_shells::main_from(std::iter::once(OsString::from("crawlfleet")).chain(role.args))
}
