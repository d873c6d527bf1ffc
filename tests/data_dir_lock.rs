//! Every role holds its data directory exclusively (DESIGN.md "Durable state"): a second
//! process given the same `--data-dir` refuses to start, naming the holder's process id, and
//! writes nothing there.

use std::process::Command;

use crate::util::{temp_dir, Role};

/// Starts `role` on `dir` while `first` holds it: it must exit non-zero naming `first`'s pid.
fn refused(role: &[&str], dir: &str, first: &Role) {
    let mut args = role.to_vec();
    args.extend_from_slice(&["--data-dir", dir]);
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(&args)
        .output()
        .expect("crawlfleet runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "{args:?} started on a held directory"
    );
    let pid = first.child.id().to_string();
    assert!(
        err.contains(&format!("in use by process {pid}")),
        "{args:?}: the refusal names the holder ({pid}): {err}"
    );
}

#[test]
fn a_second_process_on_a_held_data_dir_is_refused_with_the_holders_pid() {
    let dir = temp_dir("lock-dup");
    let d = dir.path().to_str().unwrap();
    let first = Role::start(&["dupserver", "--listen", "127.0.0.1:0", "--data-dir", d]);
    refused(&["dupserver", "--listen", "127.0.0.1:0"], d, &first);
    refused(&["dupreplica", "--listen", "127.0.0.1:0"], d, &first);
    refused(&["multinode", "--listen", "127.0.0.1:0"], d, &first);
    refused(&["linkstore", "--listen", "127.0.0.1:0"], d, &first);
    refused(&["nameserver", "--listen", "127.0.0.1:0"], d, &first);
    refused(
        &[
            "distributor",
            "--nameserver",
            "127.0.0.1:9",
            "--listen",
            "127.0.0.1:0",
            "--node-id",
            "1",
        ],
        d,
        &first,
    );
    refused(
        &["node", "--standalone", "--admin", "127.0.0.1:0"],
        d,
        &first,
    );
    // Killed, the holder lets go: the directory is usable again.
    first.kill();
    let again = Role::start(&["dupserver", "--listen", "127.0.0.1:0", "--data-dir", d]);
    again.kill();
}
