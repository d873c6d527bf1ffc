//! The command line: the benchmarks are listed, and usage lines name the command as the program
//! name the caller gave (`crawlfleet bench` when run through `crawlfleet`).

use crate::util::{bench, show};

#[test]
fn help_lists_every_benchmark_but_not_the_role_runner() {
    let args = ["--help"];
    let out = bench(&args);
    assert!(out.status.success(), "{}", show(&args, &out));
    let help = String::from_utf8_lossy(&out.stdout);
    for name in [
        "dupstore", "dup", "route", "queue", "links", "crawl", "refresh", "flood",
    ] {
        assert!(
            help.lines().any(|l| l.trim_start().starts_with(name)),
            "{name} missing: {help}"
        );
    }
    assert!(
        !help.lines().any(|l| l.trim_start().starts_with("role")),
        "{help}"
    );
}

#[cfg(unix)]
#[test]
fn usage_names_the_program_as_called() {
    use std::os::unix::process::CommandExt;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet-bench"))
        .arg0("crawlfleet bench")
        .args(["route", "--help"])
        .output()
        .expect("the crawlfleet-bench binary runs");
    assert!(out.status.success(), "{}", show(&["route", "--help"], &out));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("Usage: crawlfleet bench route"), "{help}");
}

#[test]
fn an_unknown_benchmark_is_a_usage_error() {
    let args = ["nosuch"];
    let out = bench(&args);
    assert_eq!(out.status.code(), Some(2), "{}", show(&args, &out));
    assert!(out.stdout.is_empty(), "{}", show(&args, &out));
}
