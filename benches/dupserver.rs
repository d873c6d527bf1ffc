//! Criterion benches of the duplicate server's hot path (MS-FSCMT 3.3.5.4), without sockets:
//!
//! - `handle_frames`: a node's pipelined window of PPDUP_ADD frames (10% of them repeating an
//!   earlier checksum) through `DupServer::handle_frames`, as the shell hands it a socket read:
//!   one decode per frame, the checksum store and its write-ahead log record, the PPDUP_ADD_OK
//!   written into the peer's output buffer; then `write_log` (the log written, not synced: the
//!   fdatasync is the disk's cost, not the handling's), once per window as the shell does.
//! - `handle_frames_with_replica`: the same window on a server with its replica connected: each
//!   new checksum forwarded (PPDUP_ADD with PKT_PPDUP_ID and PKT_DBNAME) and its answer held;
//!   then the replica's PPDUP_ADD_OKs for the window (made by a replica state machine outside
//!   the clock) handled by the server, which releases the held answers. Only the server's work
//!   is timed.
//! - `ppdup_add_ok`: the answer alone, `encode_add_ok_frame` (written straight into the output
//!   buffer) against `frame::encode_message` of the same typed message, and `fresh_add_ok`: the
//!   same bytes spliced from the PPDUP_ADD's body (`AddBytes`), as the server answers a node.
//! - `replica_add_ok`: the server's reading of its replica's PPDUP_ADD_OK, `read_ppdup_command`
//!   (the command alone) against `read_ppdup` (the borrowed message).
//!
//! - `store_window`: `ChecksumStore::add` of a window of new checksums into a store past the
//!   cache, each alone, and with the window's slots prefetched ahead (`ChecksumStore::prefetch`).
//!
//! `cargo bench --bench dupserver`, in adds (answers) per second.

use std::borrow::Cow;
use std::hint::black_box;
use std::time::{Duration, Instant};

use crawlfleet_core::checksum::durable::DupStores;
use crawlfleet_core::checksum::ChecksumStore;
use crawlfleet_core::dupserver::{DupServer, Mode};
use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::Value;
use crawlfleet_core::msg::{
    encode_add_ok_frame, encode_checksum_frame, read_ppdup, read_ppdup_command, AddBytes, Checksum,
    ChecksumRef, Command, Message, PpdupAddOk, PpdupChecksum, PpdupRef, PpdupSetConfig,
};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Adds in a window (`crawlfleet bench dup --pipeline`).
const WINDOW: usize = 256;
const NODE: u64 = 1;
/// The server's connection to its replica, and the replica's to the server.
const REPLICA: u64 = 2;
const SERVER: u64 = 3;

/// The frame bodies of `frames` (whole frames back to back, as queued for a peer).
fn bodies_of(frames: &[u8]) -> Vec<&[u8]> {
    let limits = Default::default();
    let mut out = Vec::new();
    let mut rest = frames;
    while let Some((body, used)) = frame::split(rest, &limits).expect("valid frames") {
        out.push(body);
        rest = &rest[used..];
    }
    out
}

/// `n` PPDUP_ADD frames from one node, back to back, and where each body lies.
fn adds(first: u64, n: usize, rng: &mut fastrand::Rng) -> (Vec<u8>, Vec<(usize, usize)>) {
    let mut out = Vec::with_capacity(n * 180);
    let mut bodies = Vec::with_capacity(n);
    for i in first..first + n as u64 {
        // One add in ten repeats an earlier checksum.
        let k = if i > 0 && rng.u8(..10) == 0 {
            rng.u64(0..i)
        } else {
            i
        };
        let mut cs = [0u8; 16];
        cs[..8].copy_from_slice(&k.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
        cs[8..].copy_from_slice(&k.to_le_bytes());
        let uri = format!("http://www{}.example.com/section/page-{i}.html", i % 1000);
        let m = Message::PpdupAdd(PpdupChecksum {
            collection: Cow::Borrowed(b"bench"),
            node_id: Cow::Borrowed(b"node-1"),
            uri: Cow::Owned(uri.into_bytes()),
            checksum: Checksum(cs),
            ppdup_id: None,
            dbname: None,
        });
        let start = out.len();
        frame::encode_message(&m, Priority::Normal, &mut out);
        bodies.push((start + frame::HEADER_LEN, out.len()));
    }
    (out, bodies)
}

/// A server on a fresh store in `dir`, with the collection configured and a node connected.
fn server(dir: &std::path::Path) -> DupServer {
    configured(dir, Mode::Server, false, NODE)
}

/// A server or replica on a fresh store in `dir`, with the collection configured by `peer`.
fn configured(dir: &std::path::Path, mode: Mode, with_replica: bool, peer: u64) -> DupServer {
    let (stores, _) = DupStores::open(dir, 64).expect("a fresh store");
    let mut s = DupServer::new(mode, b"dup-bench", stores, with_replica);
    s.peer_connected(peer);
    s.handle_message(
        peer,
        Message::PpdupSetConfig(PpdupSetConfig {
            config: Value::Dict(vec![(Value::bytes(b"bench"), Value::Dict(Vec::new()))]),
            vclock: 1,
            collection: None,
        }),
    );
    s.write_log().expect("log written");
    s
}

fn handle_frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("dupserver");
    g.throughput(Throughput::Elements(WINDOW as u64))
        .sample_size(20);
    g.bench_function("handle_frames", |b| {
        // A fresh store per sample: `iters` windows of new adds, encoded before the clock runs.
        b.iter_custom(|iters| {
            let dir = tempfile::TempDir::with_prefix("crawlfleet-bench-dup-").expect("tempdir");
            let mut s = server(dir.path());
            let mut rng = fastrand::Rng::with_seed(iters);
            let (wire, bodies) = adds(0, iters as usize * WINDOW, &mut rng);
            let started = Instant::now();
            for window in bodies.chunks(WINDOW) {
                let bytes = window.last().map_or(0, |w| w.1) - window[0].0;
                let frames = window.iter().map(|&(a, z)| &wire[a..z]);
                s.handle_frames(NODE, frames, bytes).expect("valid frames");
                black_box(s.write_log().expect("log written").after_sync.len());
            }
            started.elapsed()
        })
    });
    g.bench_function("handle_frames_with_replica", |b| {
        b.iter_custom(|iters| {
            let dir = tempfile::TempDir::with_prefix("crawlfleet-bench-dup-").expect("tempdir");
            let mut s = configured(&dir.path().join("server"), Mode::Server, true, NODE);
            s.replica_connected(REPLICA);
            s.take_direct();
            let mut r = configured(&dir.path().join("replica"), Mode::Replica, false, SERVER);
            let mut rng = fastrand::Rng::with_seed(iters);
            let (wire, bodies) = adds(0, iters as usize * WINDOW, &mut rng);
            let mut spent = Duration::ZERO;
            for window in bodies.chunks(WINDOW) {
                let bytes = window.last().map_or(0, |w| w.1) - window[0].0;
                let frames = window.iter().map(|&(a, z)| &wire[a..z]);
                let started = Instant::now();
                s.handle_frames(NODE, frames, bytes).expect("valid frames");
                let forwards = s.take_direct();
                black_box(s.write_log().expect("log written").after_sync.len());
                spent += started.elapsed();
                // The replica's answers, outside the clock.
                for (_, frames) in &forwards {
                    r.handle_frames(SERVER, bodies_of(frames), frames.len())
                        .expect("valid forwards");
                }
                let oks = r.write_log().expect("log written").after_sync;
                let oks: Vec<u8> = oks.into_iter().flat_map(|(_, f)| f).collect();
                let ok_bodies = bodies_of(&oks);
                let started = Instant::now();
                s.handle_frames(REPLICA, ok_bodies, oks.len())
                    .expect("valid answers");
                black_box(s.write_log().expect("log written").after_batch.len());
                spent += started.elapsed();
                assert_eq!(s.replica_lag(), Some((true, 0)), "every forward answered");
            }
            spent
        })
    });
    g.finish();
}

fn add_ok(c: &mut Criterion) {
    let uri = b"http://www7.example.com/section/page-1-7.html";
    let ok = PpdupAddOk {
        collection: Cow::Borrowed(b"bench"),
        node_id: Cow::Borrowed(b"node-1"),
        uri: Cow::Borrowed(uri),
        owner_uri: Some(Cow::Borrowed(uri)),
        ppdup_id: None,
        dbname: None,
    };
    let typed = Message::PpdupAddOk(ok.clone());
    let mut flat = Vec::new();
    encode_add_ok_frame(&ok, Priority::Normal, &mut flat);
    let mut general = Vec::new();
    frame::encode_message(&typed, Priority::Normal, &mut general);
    assert_eq!(flat, general, "the same bytes either way");
    let mut g = c.benchmark_group("ppdup_add_ok");
    g.throughput(Throughput::Elements(WINDOW as u64));
    let mut out = Vec::with_capacity(WINDOW * flat.len());
    g.bench_function("encode_add_ok_frame", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..WINDOW {
                encode_add_ok_frame(black_box(&ok), Priority::Normal, &mut out);
            }
            black_box(out.len())
        })
    });
    g.bench_function("encode_message", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..WINDOW {
                frame::encode_message(black_box(&typed), Priority::Normal, &mut out);
            }
            black_box(out.len())
        })
    });
    // The node's add the answer is for, as the server reads it.
    let add = ChecksumRef {
        collection: b"bench",
        node_id: b"node-1",
        uri,
        checksum: Checksum([7; 16]),
        ppdup_id: None,
        dbname: None,
    };
    let mut add_frame = Vec::new();
    encode_checksum_frame(Command::PpdupAdd, &add, Priority::Normal, &mut add_frame);
    let body = &add_frame[frame::HEADER_LEN..];
    let Some((_, PpdupRef::Add(read))) = read_ppdup(body, &Default::default()) else {
        panic!("the add reads back");
    };
    let spliced = AddBytes::of(body, &read).expect("read from its body");
    out.clear();
    assert!(spliced.fresh_add_ok(&mut out));
    assert_eq!(out, flat, "the same bytes spliced");
    g.bench_function("fresh_add_ok", |b| {
        b.iter(|| {
            out.clear();
            for _ in 0..WINDOW {
                black_box(&spliced).fresh_add_ok(&mut out);
            }
            black_box(out.len())
        })
    });
    g.finish();
    // The replica's answer to the forward of that add.
    let mut ok_frame = Vec::new();
    let echo = PpdupAddOk {
        owner_uri: None,
        ppdup_id: Some(Cow::Borrowed(b"dup-127.0.0.1:7000")),
        dbname: Some(Cow::Borrowed(b"/var/lib/crawlfleet/dup/bench")),
        ..ok
    };
    encode_add_ok_frame(&echo, Priority::Normal, &mut ok_frame);
    let ok_body = &ok_frame[frame::HEADER_LEN..];
    let limits = Default::default();
    assert_eq!(
        read_ppdup_command(ok_body, &limits),
        Some((Priority::Normal, Command::PpdupAddOk))
    );
    let mut g = c.benchmark_group("replica_add_ok");
    g.throughput(Throughput::Elements(1));
    g.bench_function("read_ppdup_command", |b| {
        b.iter(|| black_box(read_ppdup_command(black_box(ok_body), &limits)))
    });
    g.bench_function("read_ppdup", |b| {
        b.iter(|| black_box(read_ppdup(black_box(ok_body), &limits).is_some()))
    });
    g.finish();
}

/// Checksums no earlier call made: `n` from `from` on, spread by a multiplicative hash.
fn fresh_checksums(from: u64, n: u64) -> Vec<Checksum> {
    (from..from + n)
        .map(|i| {
            let mut c = [0u8; 16];
            c[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
            c[8..].copy_from_slice(&i.to_le_bytes());
            Checksum(c)
        })
        .collect()
}

/// Windows of 1,024 new checksums added to a store of two million (its 64 shards' tables past
/// the cache, as a duplicate server's are after a million-page run): each add alone, against
/// the window's slots prefetched 16 ahead as `DupServer::handle_frames` does.
fn store_window(c: &mut Criterion) {
    const PREFILL: u64 = 2_000_000;
    const N: u64 = 1024;
    let uri = b"http://127.77.0.1:8080/s5/p117.html";
    let mut g = c.benchmark_group("store_window");
    g.throughput(Throughput::Elements(N));
    for prefetched in [false, true] {
        let mut store = ChecksumStore::new(64);
        for cs in fresh_checksums(0, PREFILL) {
            store.add(cs, uri, b"node1").expect("a short URI");
        }
        let name = if prefetched {
            "prefetched"
        } else {
            "one_by_one"
        };
        let mut next = PREFILL;
        // Only the adds are timed; each window is new, and removed again after, so every
        // window meets the same two million and its slots are not in the cache already.
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut timed = Duration::ZERO;
                for _ in 0..iters {
                    let window = fresh_checksums(next, N);
                    next += N;
                    let ahead = if prefetched { 16 } else { 0 };
                    let started = Instant::now();
                    for cs in window.iter().take(ahead) {
                        store.prefetch(cs);
                    }
                    for (i, cs) in window.iter().enumerate() {
                        if let Some(later) = window.get(i + ahead).filter(|_| prefetched) {
                            store.prefetch(later);
                        }
                        black_box(store.add(*cs, uri, b"node1").is_ok());
                    }
                    timed += started.elapsed();
                    for cs in &window {
                        store.remove(cs);
                    }
                }
                timed
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = handle_frames, add_ok, store_window
}
criterion_main!(benches);
