//! `--sched` through the binary: a role's threads run under SCHED_BATCH by default (a thread
//! woken with work does not preempt the one running; docs/performance.md "Sixteenth round"),
//! `--sched normal` or `CRAWLFLEET_SCHED=normal` leaves them under the system's default, and
//! `up` gives the policy to each role's threads and the threads they start, not to its own
//! main thread. Policies are read from `/proc/PID/task/TID/stat` as `ps` and `chrt` read them.

use std::process::{Command, Stdio};

use crate::util::{temp_dir, wait_until, Role};

const BIN: &str = env!("CARGO_BIN_EXE_crawlfleet");
/// sched(7)'s policy numbers.
const SCHED_OTHER: u32 = 0;
const SCHED_BATCH: u32 = 3;

/// A thread's name and scheduling policy from its stat line: "TID (NAME) STATE ...", the
/// name may hold spaces and parentheses, fields go on after its last ')' with the state as
/// field 3, the policy field 41.
fn name_and_policy(stat: &str) -> (String, u32) {
    let (head, rest) = stat.rsplit_once(')').unwrap();
    let name = head.split_once('(').unwrap().1.to_string();
    let policy = rest
        .split_whitespace()
        .nth(41 - 3)
        .unwrap()
        .parse()
        .unwrap();
    (name, policy)
}

/// Each thread of `pid`: its name and its scheduling policy.
fn threads(pid: u32) -> Vec<(String, u32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let Ok(stat) = std::fs::read_to_string(t.unwrap().path().join("stat")) else {
            continue; // the thread ended meanwhile
        };
        out.push(name_and_policy(&stat));
    }
    out
}

/// The calling thread's policy (what a process it starts inherits).
fn policy_of_this_thread() -> u32 {
    name_and_policy(&std::fs::read_to_string("/proc/thread-self/stat").unwrap()).1
}

fn dupserver(dir: &std::path::Path, extra: &[&str], env: Option<&str>) -> Role {
    let mut cmd = Command::new(BIN);
    cmd.args(["dupserver", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .args(extra)
        .env("RUST_LOG", "warn")
        .env_remove("CRAWLFLEET_SCHED")
        .stderr(Stdio::inherit());
    if let Some(v) = env {
        cmd.env("CRAWLFLEET_SCHED", v);
    }
    Role::spawn(cmd)
}

#[test]
fn a_role_process_runs_its_threads_under_sched_batch_unless_told_normal() {
    let dir = temp_dir("sched-role");
    for (name, extra, env, want) in [
        ("default", &[][..], None, SCHED_BATCH),
        ("flag", &["--sched", "normal"][..], None, SCHED_OTHER),
        ("env", &[][..], Some("normal"), SCHED_OTHER),
        ("env-batch", &[][..], Some("batch"), SCHED_BATCH),
    ] {
        let role = dupserver(&dir.path().join(name), extra, env);
        // The role is listening: its event loop, server and sync threads are up.
        std::net::TcpStream::connect(role.addr()).unwrap();
        let ts = threads(role.child.id());
        assert!(ts.len() >= 3, "{name}: {ts:?}");
        assert!(
            ts.iter().all(|(_, p)| *p == want),
            "{name}: every thread's policy should be {want}: {ts:?}"
        );
    }
    let out = Command::new(BIN)
        .args(["dupserver", "--sched", "fifo", "--data-dir"])
        .arg(dir.path().join("refused"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid value 'fifo'"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn up_gives_the_policy_to_its_roles_threads_not_to_its_main_thread() {
    let dir = temp_dir("sched-up");
    let mut up = Command::new(BIN)
        .args(["up", "--synthetic-web", "4:300", "--web-base", "127.94.0.1"])
        .args(["--web-delay", "0.05", "--progress", "never"])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("RUST_LOG", "warn")
        .env_remove("CRAWLFLEET_SCHED")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = up.id();
    let roles = ["node1", "fetch", "dupserver", "multinode", "linkstore"];
    let mut ts = Vec::new();
    wait_until("up's roles and fetchers run", || {
        ts = threads(pid);
        roles.iter().all(|r| ts.iter().any(|(n, _)| n == r))
    });
    let _ = up.kill();
    let _ = up.wait();
    for r in roles {
        for (n, p) in ts.iter().filter(|(n, _)| n == r) {
            assert_eq!(*p, SCHED_BATCH, "{n}: {ts:?}");
        }
    }
    // The main thread (named after the executable) supervises and starts no crawl work: it
    // keeps the policy it was started with, this test thread's (SCHED_OTHER as CI runs the
    // tests, where this tells it apart from the roles' threads).
    let main = ts.iter().find(|(n, _)| n == "crawlfleet").unwrap();
    assert_eq!(main.1, policy_of_this_thread(), "{ts:?}");
}
