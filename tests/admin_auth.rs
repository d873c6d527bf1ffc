//! The administrative port's tokens (issue 27 "Safe to expose"): a port off loopback refuses
//! to start without one; with tokens every request is checked in the one dispatch, whatever its
//! path (Python's xmlrpc.client with basic credentials, raw HTTP with Bearer, both in
//! tests/admin_auth.py); a read-only token reads but changes nothing; IndexNow stays open (its
//! key file is its proof); `crawlfleet admin --token-file` and `up`'s admin.token.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::{checkout_path, temp_dir, Role};

const BIN: &str = env!("CARGO_BIN_EXE_crawlfleet");
const FULL: &str = "full-7c1e0a9b4d2f4e6a8b3c5d7e9f1a2b3c";
const READ_ONLY: &str = "read-4f3e2d1c0b9a8f7e6d5c4b3a29180716";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Writes the two token files under `dir`.
fn tokens(dir: &Path) -> (PathBuf, PathBuf) {
    let (full, ro) = (dir.join("admin.token"), dir.join("readonly.token"));
    std::fs::write(&full, format!("{FULL}\n")).unwrap();
    std::fs::write(&ro, format!("  {READ_ONLY}\n")).unwrap();
    (full, ro)
}

/// Runs `crawlfleet args` to its end (60 s at most).
fn run(args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("crawlfleet {args:?} still runs after 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn python(args: &[&str]) {
    let script = checkout_path("tests/admin_auth.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success() && text(&out.stdout).trim() == "ok",
        "python3 admin_auth.py {args:?}: {}\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn an_admin_port_off_loopback_without_a_token_is_refused() {
    let dir = temp_dir("auth-refuse");
    let d = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let admin = format!("0.0.0.0:{}", free_port());
    for args in [
        vec![
            "node",
            "--standalone",
            "--admin",
            &admin,
            "--data-dir",
            &d("n"),
        ],
        vec![
            "multinode",
            "--listen",
            "127.0.0.1:0",
            "--admin",
            &admin,
            "--data-dir",
            &d("m"),
        ],
    ] {
        let o = run(&args);
        assert!(!o.status.success(), "{args:?} started");
        let err = text(&o.stderr);
        assert!(
            err.contains("is not on loopback") && err.contains("--admin-token-file"),
            "{args:?}: {err}"
        );
    }
    // A read-only token alone is a mistake, said as such; so is an unreadable token file.
    let (_, ro) = tokens(dir.path());
    let o = run(&[
        "node",
        "--standalone",
        "--admin",
        "127.0.0.1:0",
        "--admin-readonly-token-file",
        ro.to_str().unwrap(),
        "--data-dir",
        &d("n2"),
    ]);
    assert!(!o.status.success() && text(&o.stderr).contains("--admin-token-file"));
    let o = run(&[
        "node",
        "--standalone",
        "--admin",
        &admin,
        "--admin-token-file",
        &d("missing"),
        "--data-dir",
        &d("n3"),
    ]);
    assert!(!o.status.success() && text(&o.stderr).contains("missing"));
}

#[test]
fn tokens_guard_every_request_of_a_node_and_a_multinode_scheduler() {
    let dir = temp_dir("auth-node");
    let (full, ro) = tokens(dir.path());
    let (full, ro) = (full.to_str().unwrap(), ro.to_str().unwrap());
    // Off loopback (every address, reached here through 127.0.0.1), the IndexNow route beside.
    let port = free_port();
    let node = Role::start(&[
        "node",
        "--standalone",
        "--admin",
        &format!("0.0.0.0:{port}"),
        "--admin-token-file",
        full,
        "--admin-readonly-token-file",
        ro,
        "--data-dir",
        dir.path().join("node").to_str().unwrap(),
    ]);
    let addr = format!("127.0.0.1:{port}");
    python(&[&addr, FULL, READ_ONLY, "indexnow"]);
    // The admin command line: with the token file it calls, without it says 401.
    let o = run(&[
        "admin",
        "--server",
        &addr,
        "--token-file",
        full,
        "is-distributed",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = run(&["admin", "--server", &addr, "is-distributed"]);
    assert!(
        !o.status.success() && text(&o.stderr).contains("401"),
        "{}",
        text(&o.stderr)
    );
    drop(node);
    // On loopback a token is optional, and enforced when given.
    let port = free_port();
    let _mn = Role::start(&[
        "multinode",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        &format!("127.0.0.1:{port}"),
        "--admin-token-file",
        full,
        "--admin-readonly-token-file",
        ro,
        "--data-dir",
        dir.path().join("mn").to_str().unwrap(),
    ]);
    python(&[&format!("127.0.0.1:{port}"), FULL, READ_ONLY]);
}

/// `GET /api/dashboard` at `addr` with the full token: the body.
fn dashboard_json(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "GET /api/dashboard HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {FULL}\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

#[test]
fn up_passes_its_token_to_every_admin_port_and_the_admin_cli_finds_it() {
    let dir = temp_dir("auth-up");
    let (full, _) = tokens(dir.path());
    let data = dir.path().join("data");
    let mut up = Command::new(BIN)
        .args(["up", "--synthetic-web", "2:20", "--web-base", "127.94.0.1"])
        .args(["--progress", "never", "--admin-token-file"])
        .arg(&full)
        .arg("--data-dir")
        .arg(&data)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let token = data.join("admin.token");
    crate::util::wait_until("up writes admin.token", || token.exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "admin.token is its owner's only");
    let d = data.to_str().unwrap();
    let o = run(&["admin", "--data-dir", d, "collection-get-list"]);
    assert!(
        o.status.success() && text(&o.stdout).contains("synthetic"),
        "{}",
        text(&o.stderr)
    );
    // SetLogLevel goes on to every node with the same token (FSCADM 2.2.8.6).
    let o = run(&["admin", "--data-dir", d, "set-log-level", "112"]);
    assert!(
        o.status.success(),
        "{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let addr = std::fs::read_to_string(data.join("admin.addr")).unwrap();
    let o = run(&["admin", "--server", addr.trim(), "collection-get-list"]);
    assert!(!o.status.success() && text(&o.stderr).contains("401"));
    // The dashboard reads the content distributors' /metrics, behind the same token, with
    // its own: both show up, one of them master.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let body = dashboard_json(addr.trim());
        let d: serde_json::Value = serde_json::from_str(&body).unwrap();
        let dists = d["distributors"].as_array().cloned().unwrap_or_default();
        if dists.len() == 2
            && dists.iter().all(|p| p["up"] == true)
            && dists.iter().any(|p| p["election"] == "master")
        {
            break;
        }
        assert!(Instant::now() < deadline, "no distributors read: {d}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = up.kill();
    let _ = up.wait();
}

#[test]
fn the_admin_port_speaks_tls_with_its_certificate() {
    let dir = temp_dir("auth-tls");
    let (full, _) = tokens(dir.path());
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let port = free_port();
    let _node = Role::start(&[
        "node",
        "--standalone",
        "--admin",
        &format!("0.0.0.0:{port}"),
        "--admin-token-file",
        full.to_str().unwrap(),
        "--admin-tls-cert",
        cert.to_str().unwrap(),
        "--admin-tls-key",
        key.to_str().unwrap(),
        "--data-dir",
        dir.path().join("node").to_str().unwrap(),
    ]);
    let script = checkout_path("tests/admin_tls.py");
    let addr = format!("127.0.0.1:{port}");
    let out = Command::new("python3")
        .arg(&script)
        .args([&addr, cert.to_str().unwrap(), FULL])
        .output()
        .unwrap();
    assert!(
        out.status.success() && text(&out.stdout).trim() == "ok",
        "python3 admin_tls.py: {}\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    // `crawlfleet admin` over TLS, trusting the certificate.
    let (c, f) = (cert.to_str().unwrap(), full.to_str().unwrap());
    let o = run(&[
        "admin",
        "--server",
        &addr,
        "--tls-ca",
        c,
        "--token-file",
        f,
        "is-distributed",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // A key that does not match the certificate, or a certificate file without one, is refused
    // at start.
    let other = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let wrong = dir.path().join("wrong.pem");
    std::fs::write(&wrong, other.signing_key.serialize_pem()).unwrap();
    for (c, k) in [(&cert, &wrong), (&key, &key)] {
        let o = run(&[
            "node",
            "--standalone",
            "--admin",
            "127.0.0.1:0",
            "--admin-tls-cert",
            c.to_str().unwrap(),
            "--admin-tls-key",
            k.to_str().unwrap(),
            "--data-dir",
            dir.path().join("node2").to_str().unwrap(),
        ]);
        assert!(!o.status.success(), "started with {c:?} {k:?}");
        assert!(
            text(&o.stderr).contains("--admin-tls"),
            "{}",
            text(&o.stderr)
        );
    }
}
