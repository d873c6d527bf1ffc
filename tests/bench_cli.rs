//! `crawlfleet bench ARGS` runs the `crawlfleet-bench` executable, beside `crawlfleet` or else on
//! PATH, with ARGS untouched; its exit status (a signal included) is the command's own. Without
//! it, the command says how to build it and exits 2. Each test runs a copy of `crawlfleet` in a
//! directory of its own; where a `crawlfleet-bench` is wanted, the stand-in is a symbolic link to
//! /bin/sh, so `crawlfleet bench -c SCRIPT ...` runs SCRIPT (a link, not a script file written
//! here: a file just written can be "busy" for exec while another test thread forks). The
//! benchmarks themselves are tested in the `crawlfleet-bench` crate.
#![cfg(unix)]

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::{temp_dir, TempDir};

/// A directory holding a copy of the `crawlfleet` binary (a hard link where the file system
/// allows), and an empty directory to use as PATH.
struct Install {
    dir: TempDir,
}

impl Install {
    fn new(name: &str) -> Install {
        let dir = temp_dir(name);
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::create_dir_all(dir.path().join("path")).unwrap();
        let exe = dir.path().join("bin/crawlfleet");
        if std::fs::hard_link(env!("CARGO_BIN_EXE_crawlfleet"), &exe).is_err() {
            std::fs::copy(env!("CARGO_BIN_EXE_crawlfleet"), &exe).unwrap();
        }
        Install { dir }
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("path")
    }

    /// Runs `crawlfleet ARGS` from the copy with PATH set to `path` only.
    fn run(&self, path: &Path, args: &[&str]) -> Output {
        Command::new(self.bin().join("crawlfleet"))
            .args(args)
            .env("PATH", path)
            .output()
            .expect("the crawlfleet copy runs")
    }
}

/// Puts a `crawlfleet-bench` into `dir` that is /bin/sh.
fn stand_in(dir: &Path) {
    std::os::unix::fs::symlink("/bin/sh", dir.join("crawlfleet-bench")).unwrap();
}

fn show(out: &Output) -> String {
    format!(
        "status: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn bench_without_crawlfleet_bench_says_how_to_build_it() {
    let install = Install::new("bench-missing");
    let out = install.run(&install.path(), &["bench", "route", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(out.stdout.is_empty(), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("crawlfleet-bench"), "{}", show(&out));
    assert!(
        err.contains("cargo build --release -p crawlfleet-bench"),
        "{}",
        show(&out)
    );
    assert!(
        err.contains("cargo run --release -p crawlfleet-bench -- route --json"),
        "{}",
        show(&out)
    );
    // --help is the benchmarks' own: without them, the same explanation.
    let out = install.run(&install.path(), &["bench", "--help"]);
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
}

#[test]
fn bench_runs_crawlfleet_bench_beside_it_with_the_arguments_untouched() {
    let install = Install::new("bench-beside");
    stand_in(&install.bin());
    let args = ["route", "--json", "--help", "-x", "two words"];
    let mut command = vec!["bench", "-c", r#"printf '%s\n' "$@"; exit 7"#, "sh"];
    command.extend(args);
    let out = install.run(&install.path(), &command);
    assert_eq!(out.status.code(), Some(7), "{}", show(&out));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert_eq!(printed.lines().collect::<Vec<_>>(), args, "{}", show(&out));
}

#[test]
fn bench_finds_crawlfleet_bench_on_path() {
    let install = Install::new("bench-path");
    stand_in(&install.path());
    let out = install.run(&install.path(), &["bench", "-c", "echo from-path"]);
    assert!(out.status.success(), "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from-path\n");
}

#[test]
fn bench_ends_as_crawlfleet_bench_ends_on_a_signal() {
    let install = Install::new("bench-signal");
    stand_in(&install.bin());
    let out = install.run(&install.path(), &["bench", "-c", "kill -TERM $$"]);
    assert_eq!(out.status.signal(), Some(15), "{}", show(&out));
}
