//! `crawlfleet bench links`: link lines per second a link store ingests and acknowledges.
//!
//! The bench starts a link store (a child process of this binary on a fresh data dir, unless
//! `--target` names a running one), then C connections each send messages of `--batch-lines`
//! `links` lines (MS-FSWASDR 2.2.1.3.1.1) one after another, waiting for each `ack\n` as the
//! protocol's client does (3.1.5). A line counts once its message is acknowledged, that is
//! durable in the store's log. The messages are built before the clock starts.
//!
//! Peer, in the same run: the same bytes, in the same message sizes, appended to a file with
//! one fdatasync per message from one thread — what the disk allows a store that syncs every
//! message, with no network and no parsing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crawlfleet_core::links::{cidhash, Message, WebAnalyzerBatch, ACK};
use hdrhistogram::Histogram;
use serde_json::json;

use crate::cli::BenchLinksArgs;
use crate::{BenchError, RoleChild};

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError(e.to_string())
}

fn bench_dir(what: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "crawlfleet-bench-links-{what}-{}",
        std::process::id()
    ))
}

fn start_store() -> Result<(RoleChild, SocketAddr), BenchError> {
    let dir = bench_dir("store");
    let _ = std::fs::remove_dir_all(&dir);
    // This executable's hidden `role` runs the link store as `crawlfleet` itself would.
    let child = Command::new(std::env::current_exe().map_err(err)?)
        .args(["role", "linkstore", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(err)?;
    // Killed when dropped, also when it does not announce itself.
    let mut store = RoleChild { child, dir };
    let addr = crate::read_announced(&mut store.child, "linkstore")?;
    Ok((store, addr))
}

/// Message `n` of connection `c`: `lines` links lines, 20 per linking document.
fn build_message(c: usize, n: u64, lines: usize) -> Vec<u8> {
    let mut b = WebAnalyzerBatch::default();
    let mut from = cidhash(b"");
    for i in 0..lines {
        if i % 20 == 0 {
            from = cidhash(format!("http://site{c}.example/{n}/page{i}.html").as_bytes());
        }
        let to = cidhash(format!("http://site{}.example/page{}.html", i % 97, i).as_bytes());
        b.link_line(
            &from,
            &to,
            i % 3 != 0,
            1_700_000_000 + n,
            b"anchor text of a link",
        );
    }
    Message::webanalyzer(b"bench", &b).to_wire()
}

/// The messages one connection sends in turn (four distinct ones, reused).
fn messages(c: usize, lines: usize) -> Vec<Vec<u8>> {
    (0..4).map(|n| build_message(c, n, lines)).collect()
}

fn send_all(
    addr: SocketAddr,
    msgs: &[Vec<u8>],
    count: u64,
    start: &Barrier,
) -> Result<Histogram<u64>, BenchError> {
    let mut s = TcpStream::connect(addr).map_err(err)?;
    s.set_nodelay(true).map_err(err)?;
    s.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(err)?;
    let mut hist = Histogram::<u64>::new(3).map_err(err)?;
    let mut answer = [0u8; 4];
    start.wait();
    for i in 0..count {
        let t = Instant::now();
        s.write_all(&msgs[i as usize % msgs.len()]).map_err(err)?;
        s.read_exact(&mut answer).map_err(err)?;
        if answer != ACK {
            return Err(err(format!(
                "the link store answered {:?}",
                String::from_utf8_lossy(&answer)
            )));
        }
        hist.record(t.elapsed().as_micros() as u64).map_err(err)?;
    }
    Ok(hist)
}

/// The peer: the same message sizes appended to a file, one fdatasync each.
fn disk_peer(msgs: &[Vec<u8>], count: u64) -> Result<f64, BenchError> {
    let dir = bench_dir("peer");
    std::fs::create_dir_all(&dir).map_err(err)?;
    let path = dir.join("log");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(err)?;
    let t = Instant::now();
    for i in 0..count {
        f.write_all(&msgs[i as usize % msgs.len()]).map_err(err)?;
        f.sync_data().map_err(err)?;
    }
    let secs = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&dir);
    Ok(secs)
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchLinksArgs) -> Result<(), BenchError> {
    let conns = args.connections.max(1);
    let batch = args.batch_lines.max(1);
    let per_conn = args.lines.div_ceil((batch * conns) as u64).max(1);
    let (_store, addr) = match args.target {
        Some(a) => (None, a),
        None => {
            let (c, a) = start_store()?;
            (Some(c), a)
        }
    };
    let all: Vec<Vec<Vec<u8>>> = (0..conns).map(|c| messages(c, batch)).collect();
    let start = Barrier::new(conns + 1);
    let (hist, secs) = std::thread::scope(|scope| {
        let handles: Vec<_> = all
            .iter()
            .map(|msgs| {
                let start = &start;
                scope.spawn(move || send_all(addr, msgs, per_conn, start))
            })
            .collect();
        start.wait();
        let t = Instant::now();
        let mut hist = Histogram::<u64>::new(3).map_err(err)?;
        for h in handles {
            let got = h.join().map_err(|_| err("a sending thread panicked"))??;
            hist.add(got).map_err(err)?;
        }
        Ok::<_, BenchError>((hist, t.elapsed().as_secs_f64()))
    })?;
    let messages = per_conn * conns as u64;
    let lines = messages * batch as u64;
    let bytes: u64 = all
        .iter()
        .map(|m| {
            (0..per_conn)
                .map(|i| m[i as usize % m.len()].len() as u64)
                .sum::<u64>()
        })
        .sum();
    let rate = lines as f64 / secs;
    let peer_secs = disk_peer(&all[0], messages)?;
    let peer_rate = lines as f64 / peer_secs;
    let p = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    if args.json {
        println!(
            "{}",
            json!({
                "rate": rate.round(),
                "lines": lines,
                "messages": messages,
                "bytes": bytes,
                "seconds": secs,
                "mb_per_s": bytes as f64 / secs / 1e6,
                "connections": conns,
                "batch_lines": batch,
                "ack_p50_ms": p(0.5),
                "ack_p99_ms": p(0.99),
                "peer": "append + fdatasync per message",
                "peer_rate": peer_rate.round(),
                "ratio": rate / peer_rate,
            })
        );
    } else {
        println!(
            "{lines} link lines in {messages} messages of {batch} over {conns} connection(s): \
             {secs:.2} s, {rate:.0} lines/s ingested and acknowledged ({:.1} MB/s); \
             ack latency p50 {:.2} ms, p99 {:.2} ms",
            bytes as f64 / secs / 1e6,
            p(0.5),
            p(0.99)
        );
        println!(
            "peer (same bytes, append + fdatasync per message, one thread): {peer_rate:.0} lines/s; \
             ratio {:.2}",
            rate / peer_rate
        );
    }
    Ok(())
}
