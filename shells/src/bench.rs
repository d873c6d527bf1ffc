//! `crawlfleet bench`: the benchmarks are an executable of their own, `crawlfleet-bench` (the
//! `bench/` crate), so that this binary carries none of their dependencies (the redis client,
//! hdrhistogram). This module finds that executable and runs it with the arguments that follow
//! `bench`, as git runs its external subcommands: on Unix it replaces this process, so the
//! benchmark's exit code and signals are the command's own.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

use crate::cli::BenchArgs;

/// The benchmarks' executable, without the platform's suffix.
pub const BENCH_EXE: &str = "crawlfleet-bench";

/// Exit code when `crawlfleet-bench` is missing or cannot be started.
const CANNOT_RUN: u8 = 2;

/// Where `crawlfleet-bench` is: beside this executable first (a cargo build puts both in one
/// target directory, an install in one bin directory), then the first one on PATH.
pub fn find() -> Option<PathBuf> {
    let name = format!("{BENCH_EXE}{}", std::env::consts::EXE_SUFFIX);
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(&name)));
    let path = std::env::var_os("PATH").unwrap_or_default();
    beside
        .into_iter()
        .chain(
            std::env::split_paths(&path)
                // An empty PATH entry would mean the current directory; it is not searched.
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(|dir| dir.join(&name)),
        )
        .find(|candidate| candidate.is_file())
}

/// Runs `crawlfleet-bench` with `args.args`; returns only if it could not be run (Unix), or
/// with its exit code (elsewhere).
pub fn run(args: &BenchArgs) -> ExitCode {
    let Some(exe) = find() else {
        eprintln!("crawlfleet: {}", missing(&args.args));
        return ExitCode::from(CANNOT_RUN);
    };
    let mut command = Command::new(&exe);
    command.args(&args.args);
    // `--sched` reaches the benchmarks' executable (and the roles it starts) as the variable.
    command.env("CRAWLFLEET_SCHED", crate::schedpolicy::chosen().name());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // The benchmark's usage and error lines then name the command as the user typed it.
        command.arg0("crawlfleet bench");
        let e = command.exec();
        eprintln!("crawlfleet: cannot run {}: {e}", exe.display());
        ExitCode::from(CANNOT_RUN)
    }
    #[cfg(not(unix))]
    match command.status() {
        Ok(status) => match status.code() {
            Some(0) => ExitCode::SUCCESS,
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("crawlfleet: cannot run {}: {e}", exe.display());
            ExitCode::from(CANNOT_RUN)
        }
    }
}

/// What to tell a user whose `crawlfleet bench ARGS` found no `crawlfleet-bench`.
fn missing(args: &[OsString]) -> String {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.display().to_string()))
        .unwrap_or_else(|| "this executable's directory".into());
    let mut direct = String::from("cargo run --release -p crawlfleet-bench --");
    for a in args {
        direct.push(' ');
        direct.push_str(&a.to_string_lossy());
    }
    format!(
        "the benchmarks are a separate executable, {BENCH_EXE}, which is neither in {beside} nor \
         on PATH.\nBuild it in the source tree with\n    cargo build --release -p \
         crawlfleet-bench\n(a plain `cargo build --release` builds it beside crawlfleet), or run \
         it without crawlfleet:\n    {direct}"
    )
}
