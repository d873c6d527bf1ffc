//! Running the `crawlfleet-bench` executable and reading what it prints.

use std::process::{Command, Output};

/// Runs `crawlfleet-bench ARGS`.
pub fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crawlfleet-bench"))
        .args(args)
        .output()
        .expect("the crawlfleet-bench binary runs")
}

/// The command, its status and what it printed, for a failed check.
pub fn show(args: &[&str], out: &Output) -> String {
    format!(
        "crawlfleet-bench {}\nstatus: {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `crawlfleet-bench ARGS`, which must succeed and print one JSON line, and parses it.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let out = bench(args);
    assert!(out.status.success(), "{}", show(args, &out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line: {stdout}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}
