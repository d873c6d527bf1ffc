//! `bench dup` against a duplicate server started from this executable's hidden `role`, and
//! against a stand-in for redis-server in the test (SET key value NX answered `+OK` for a new key,
//! nil for one it has seen): the same requests reach both, so both count the same duplicates.
//! No timing thresholds: the figures are reported, not judged here.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use crate::util::run_json;

/// A duplicate server child process on a fresh data dir, killed and removed on drop.
pub(crate) struct DupServer {
    pub(crate) child: Child,
    dir: std::path::PathBuf,
    pub(crate) addr: SocketAddr,
}

impl DupServer {
    pub(crate) fn start(name: &str) -> DupServer {
        let dir =
            std::env::temp_dir().join(format!("crawlfleet-bench-it-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut child = Command::new(env!("CARGO_BIN_EXE_crawlfleet-bench"))
            .args(["role", "dupserver", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&dir)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("crawlfleet-bench role dupserver starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the start line");
        let addr = line
            .rsplit(' ')
            .next()
            .and_then(|a| a.trim().parse().ok())
            .unwrap_or_else(|| panic!("dupserver printed {line:?}"));
        DupServer { child, dir, addr }
    }
}

impl Drop for DupServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Reads one `SET <key> <value> NX` in the exact form `bench dup` writes; None at the end.
fn read_set(r: &mut impl Read) -> Option<Vec<u8>> {
    let mut head = [0u8; 18];
    r.read_exact(&mut head).ok()?;
    assert_eq!(&head, b"*4\r\n$3\r\nSET\r\n$16\r\n");
    let mut key = vec![0u8; 16 + 3];
    r.read_exact(&mut key).unwrap();
    assert_eq!(&key[16..], b"\r\n$");
    key.truncate(16);
    let mut len = Vec::new();
    loop {
        let mut b = [0u8; 1];
        r.read_exact(&mut b).unwrap();
        if b[0] == b'\r' {
            break;
        }
        len.push(b[0]);
    }
    let len: usize = String::from_utf8(len).unwrap().parse().unwrap();
    let mut rest = vec![0u8; 1 + len + 10];
    r.read_exact(&mut rest).unwrap();
    assert_eq!(&rest[1 + len..], b"\r\n$2\r\nNX\r\n");
    Some(key)
}

/// A redis-server stand-in on a free loopback port, one thread per connection.
fn fake_redis() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let keys = Arc::new(Mutex::new(HashSet::new()));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let keys = keys.clone();
            std::thread::spawn(move || serve(stream, &keys));
        }
    });
    addr
}

fn serve(stream: TcpStream, keys: &Mutex<HashSet<Vec<u8>>>) {
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    while let Some(key) = read_set(&mut r) {
        let fresh = keys.lock().unwrap().insert(key);
        let answer: &[u8] = if fresh { b"+OK\r\n" } else { b"$-1\r\n" };
        if w.write_all(answer).is_err() {
            return;
        }
    }
}

#[test]
fn bench_dup_counts_the_same_duplicates_as_its_redis_peer() {
    let server = DupServer::start("dup");
    let redis = fake_redis().to_string();
    let durable = fake_redis().to_string();
    let target = server.addr.to_string();
    for flow in ["windows", "stream"] {
        let j = run_json(&[
            "dup",
            "--target",
            &target,
            "--total",
            "6000",
            "--connections",
            "3",
            "--pipeline",
            "64",
            "--flow",
            flow,
            "--vs-redis",
            &redis,
            "--vs-redis-durable",
            &durable,
            "--json",
        ]);
        assert_eq!(j["total"], 6000, "{j}");
        assert_eq!(j["flow"], flow, "{j}");
        let dups = j["duplicates"].as_u64().expect("duplicates");
        assert!(dups > 0, "10% of the adds repeat a checksum: {j}");
        if flow == "windows" {
            // The second run's adds were all seen by the first run.
            assert_eq!(j["peer_duplicates"], dups, "{j}");
        }
        // The durable peer gets the same requests as the other.
        assert_eq!(j["durable_peer_duplicates"], j["peer_duplicates"], "{j}");
        let durable_rate = j["durable_peer_rate"].as_f64().expect("durable_peer_rate");
        let ratio = j["ratio_durable"].as_f64().expect("ratio_durable");
        assert!(durable_rate > 0.0, "{j}");
        assert!(
            (ratio - j["rate"].as_f64().unwrap() / durable_rate).abs() < 1e-9,
            "{j}"
        );
        assert!(j["rate"].as_f64().expect("rate") > 0.0, "{j}");
        assert!(j["peer_rate"].as_f64().expect("peer_rate") > 0.0, "{j}");
        assert!(j["p99_us"].as_u64().expect("p99_us") >= j["p50_us"].as_u64().unwrap());
    }
}
