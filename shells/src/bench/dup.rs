//! `crawlfleet bench dup`: pipelined PPDUP_ADD load against a running duplicate server, and the
//! same number of `SET <checksum> <uri> NX` against redis-server in the same run (what a
//! scrapy-redis style deployment would use as its duplicate filter).
//!
//! Each connection runs on its own thread and works like `redis-benchmark -P`: it writes a
//! window of `pipeline` requests, reads their answers, and repeats. A request's latency is the
//! time from the write of its window to the arrival of its answer.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{Limits, Value};
use crawlfleet_core::msg::{Checksum, Message, PpdupChecksum, PpdupSetConfig};
use hdrhistogram::Histogram;
use serde_json::json;

use super::BenchError;
use crate::cli::BenchDupArgs;

/// What one side of the comparison measured.
struct Run {
    ops: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
    duplicates: u64,
}

impl Run {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
}

/// The checksum of request `i` of connection `conn`: a fresh one, or with probability
/// `dup_ratio` one this connection used before (a duplicate document).
fn checksum(conn: u64, i: u64, dup_ratio: f64, rng: &mut fastrand::Rng) -> Checksum {
    let n = if i > 0 && rng.f64() < dup_ratio {
        rng.u64(0..i)
    } else {
        i
    };
    let a = splitmix(conn << 40 ^ n);
    let b = splitmix(a);
    let mut c = [0u8; 16];
    c[..8].copy_from_slice(&a.to_le_bytes());
    c[8..].copy_from_slice(&b.to_le_bytes());
    Checksum(c)
}

/// A latency histogram in microseconds, 3 significant digits.
fn histogram() -> Result<Histogram<u64>, BenchError> {
    Histogram::new(3).map_err(|e| BenchError(e.to_string()))
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn uri(conn: u64, i: u64) -> String {
    format!(
        "http://www{}.example.com/section/page-{conn}-{i}.html",
        i % 1000
    )
}

fn io(what: &str) -> impl Fn(std::io::Error) -> BenchError + '_ {
    move |e| BenchError(format!("{what}: {e}"))
}

/// Reads one FSCMT message from `stream`, buffering in `buf`.
fn read_message(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    start: &mut usize,
) -> Result<Message<'static>, BenchError> {
    let limits = Limits::default();
    loop {
        if let Some((body, used)) = frame::split(&buf[*start..], &limits)
            .map_err(|e| BenchError(format!("bad frame from the server: {e}")))?
        {
            let (_, m) = frame::decode_message(body, &limits)
                .map_err(|e| BenchError(format!("bad message from the server: {e}")))?;
            let m = m.into_owned();
            *start += used;
            return Ok(m);
        }
        if *start > 0 {
            buf.drain(..*start);
            *start = 0;
        }
        let old = buf.len();
        buf.resize(old + 256 * 1024, 0);
        let n = stream
            .read(&mut buf[old..])
            .map_err(io("reading from the server"))?;
        buf.truncate(old + n);
        if n == 0 {
            return Err(BenchError("the server closed the connection".into()));
        }
    }
}

fn dup_connection(args: &BenchDupArgs, conn: u64, count: u64) -> Result<Run, BenchError> {
    let mut stream =
        TcpStream::connect(args.target).map_err(io("connecting to the duplicate server"))?;
    stream.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(io("read timeout"))?;
    let collection = b"bench".to_vec();
    let mut out = Vec::new();
    frame::encode_message(
        &Message::PpdupSetConfig(PpdupSetConfig {
            config: Value::Dict(vec![(
                Value::owned_bytes(collection.clone()),
                Value::Dict(vec![]),
            )]),
            vclock: 1,
            collection: None,
        }),
        Priority::Normal,
        &mut out,
    );
    stream.write_all(&out).map_err(io("writing"))?;
    let (mut buf, mut start) = (Vec::new(), 0);
    read_message(&mut stream, &mut buf, &mut start)?;
    let node = format!("bench-{conn}").into_bytes();
    let mut latency = histogram()?;
    let mut rng = fastrand::Rng::with_seed(conn);
    let mut duplicates = 0;
    let started = Instant::now();
    let mut i = 0;
    while i < count {
        let window = (count - i).min(args.pipeline as u64);
        out.clear();
        for k in 0..window {
            let m = Message::PpdupAdd(PpdupChecksum {
                collection: collection.as_slice().into(),
                node_id: node.as_slice().into(),
                uri: uri(conn, i + k).into_bytes().into(),
                checksum: checksum(conn, i + k, args.dup_ratio, &mut rng),
                ppdup_id: None,
                dbname: None,
            });
            frame::encode_message(&m, Priority::Normal, &mut out);
        }
        let sent = Instant::now();
        stream.write_all(&out).map_err(io("writing"))?;
        let mut answered = 0;
        while answered < window {
            match read_message(&mut stream, &mut buf, &mut start)? {
                Message::PpdupAddOk(ok) => {
                    if ok.owner_uri.as_deref() != Some(&ok.uri[..]) {
                        duplicates += 1;
                    }
                    answered += 1;
                    let _ = latency.record(sent.elapsed().as_micros() as u64);
                }
                Message::PpdupError(e) => {
                    return Err(BenchError(format!(
                        "the server refused an add: {}",
                        String::from_utf8_lossy(&e.why)
                    )))
                }
                // Keep-alives and promote requests are not answers.
                _ => {}
            }
        }
        i += window;
    }
    Ok(Run {
        ops: count,
        elapsed: started.elapsed(),
        latency,
        duplicates,
    })
}

fn redis_connection(
    args: &BenchDupArgs,
    addr: SocketAddr,
    conn: u64,
    count: u64,
) -> Result<Run, BenchError> {
    let client = redis::Client::open(format!("redis://{addr}/"))
        .map_err(|e| BenchError(format!("redis {addr}: {e}")))?;
    let mut con = client
        .get_connection()
        .map_err(|e| BenchError(format!("redis {addr}: {e}")))?;
    let mut latency = histogram()?;
    let mut rng = fastrand::Rng::with_seed(conn);
    let mut duplicates = 0;
    let started = Instant::now();
    let mut i = 0;
    while i < count {
        let window = (count - i).min(args.pipeline as u64);
        let mut pipe = redis::pipe();
        for k in 0..window {
            let key = checksum(conn ^ 0x5eed_0000, i + k, args.dup_ratio, &mut rng);
            pipe.cmd("SET")
                .arg(&key.0[..])
                .arg(uri(conn, i + k))
                .arg("NX");
        }
        let sent = Instant::now();
        let answers: Vec<Option<String>> = pipe
            .query(&mut con)
            .map_err(|e| BenchError(format!("redis {addr}: {e}")))?;
        let us = sent.elapsed().as_micros() as u64;
        for a in answers {
            if a.is_none() {
                duplicates += 1;
            }
            let _ = latency.record(us);
        }
        i += window;
    }
    Ok(Run {
        ops: count,
        elapsed: started.elapsed(),
        latency,
        duplicates,
    })
}

/// Runs `one` on `connections` threads, `total` operations split between them.
fn run_all(
    connections: usize,
    total: u64,
    one: impl Fn(u64, u64) -> Result<Run, BenchError> + Sync,
) -> Result<Run, BenchError> {
    let per = total / connections as u64;
    let started = Instant::now();
    let runs: Vec<Result<Run, BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..connections as u64)
            .map(|c| {
                let count = if c == 0 {
                    total - per * (connections as u64 - 1)
                } else {
                    per
                };
                let one = &one;
                s.spawn(move || one(c, count))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError("a load thread panicked".into())))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    let mut all = Run {
        ops: 0,
        elapsed,
        latency: histogram()?,
        duplicates: 0,
    };
    for r in runs {
        let r = r?;
        all.ops += r.ops;
        all.duplicates += r.duplicates;
        all.latency
            .add(&r.latency)
            .map_err(|e| BenchError(e.to_string()))?;
    }
    Ok(all)
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchDupArgs) -> Result<(), BenchError> {
    let connections = args.connections.max(1);
    let dup = run_all(connections, args.total, |c, n| dup_connection(args, c, n))?;
    let peer = match args.vs_redis {
        Some(addr) => Some(run_all(connections, args.total, |c, n| {
            redis_connection(args, addr, c, n)
        })?),
        None => None,
    };
    let mut out = json!({
        "target": args.target.to_string(),
        "connections": connections,
        "pipeline": args.pipeline,
        "total": dup.ops,
        "dup_ratio": args.dup_ratio,
        "duplicates": dup.duplicates,
        "rate": dup.rate(),
        "p50_us": dup.latency.value_at_quantile(0.5),
        "p99_us": dup.latency.value_at_quantile(0.99),
    });
    if let Some(p) = &peer {
        out["peer"] = json!("redis SET NX");
        out["peer_rate"] = json!(p.rate());
        out["peer_p50_us"] = json!(p.latency.value_at_quantile(0.5));
        out["peer_p99_us"] = json!(p.latency.value_at_quantile(0.99));
        out["peer_duplicates"] = json!(p.duplicates);
        out["ratio"] = json!(dup.rate() / p.rate());
    }
    if args.json {
        println!("{out}");
        return Ok(());
    }
    println!(
        "PPDUP_ADD -> {}: {} adds on {} connection(s), pipeline {}",
        args.target, dup.ops, connections, args.pipeline
    );
    println!(
        "  crawlfleet      {:>12.0} adds/s   p50 {:>6} us   p99 {:>6} us   ({} duplicates)",
        dup.rate(),
        dup.latency.value_at_quantile(0.5),
        dup.latency.value_at_quantile(0.99),
        dup.duplicates
    );
    if let Some(p) = &peer {
        println!(
            "  redis SET NX    {:>12.0} sets/s   p50 {:>6} us   p99 {:>6} us   ({} duplicates)",
            p.rate(),
            p.latency.value_at_quantile(0.5),
            p.latency.value_at_quantile(0.99),
            p.duplicates
        );
        println!("  ratio           {:>12.2}", dup.rate() / p.rate());
    }
    Ok(())
}
