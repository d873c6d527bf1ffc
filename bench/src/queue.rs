//! `crawlfleet bench queue`: push+pop rate of the persistent crawl queue on real encoded crawl
//! queue entries (MS-FSCMT 2.2.2.2), and the same number of pipelined `LPUSH` / `RPOP` against
//! redis-server in the same run (what a scrapy-redis frontier does).
//!
//! Both sides move entries in windows: push `window` entries, then pop them, checking each popped
//! entry is the one expected. The rate counts entries that went through (one push and one pop
//! each); `ops_rate` counts queue operations (twice that). With `--fill N` it instead pushes N
//! entries, reports disk use and resident memory, and pops them all checking their order.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crawlfleet_core::msg::{CrawlQueueEntry, UriStructure};
use crawlfleet_core::queue::{encode_entry, CrawlQueue, QueueOptions, SyncPolicy};
use serde_json::json;

use crate::cli::BenchQueueArgs;
use crate::{resident_bytes, BenchError};

/// The entry a node would queue for link `n` found on a page: the URI as found (unparsed; the
/// node parses it when it fetches), the page it was found on as referrer, this refresh cycle.
pub fn sample_entry(n: u64) -> CrawlQueueEntry<'static> {
    let uri = format!("http://www{}.example.com/section/page-{n}.html", n % 1000);
    let referrer = format!("http://www{}.example.com/section/", n % 1000);
    let mut e = CrawlQueueEntry::new(UriStructure::unparsed(uri.into_bytes().into()));
    e.referrer = UriStructure::unparsed(referrer.into_bytes().into());
    e.refresh_cycle = 3;
    e
}

/// `count` distinct encoded sample entries.
pub fn sample_records(count: usize) -> Vec<Vec<u8>> {
    (0..count as u64)
        .map(|n| {
            let mut r = Vec::new();
            encode_entry(&sample_entry(n), &mut r);
            r
        })
        .collect()
}

/// Distinct entries cycled through by the rate benchmarks.
const POOL: usize = 4096;

fn qerr(e: impl std::fmt::Display) -> BenchError {
    BenchError(format!("queue: {e}"))
}

/// The sync policy named on the command line: `always`, `manual` or milliseconds.
pub fn parse_sync(s: &str) -> Result<SyncPolicy, String> {
    match s {
        "always" => Ok(SyncPolicy::Always),
        "manual" => Ok(SyncPolicy::Manual),
        ms => match ms.trim_end_matches("ms").parse::<u64>() {
            Ok(0) | Err(_) => Err(format!(
                "{s:?}: expected always, manual or a number of milliseconds above 0"
            )),
            Ok(n) => Ok(SyncPolicy::Interval(Duration::from_millis(n))),
        },
    }
}

/// A queue directory: the one given (which must be empty or absent), or a fresh temporary one
/// removed when the benchmark ends.
struct BenchDir {
    path: PathBuf,
    remove: bool,
}

impl BenchDir {
    fn new(given: Option<&Path>) -> Result<BenchDir, BenchError> {
        match given {
            Some(p) => {
                if p.exists()
                    && std::fs::read_dir(p)
                        .map(|mut d| d.next().is_some())
                        .unwrap_or(true)
                {
                    return Err(BenchError(format!(
                        "{} is not empty: give a new directory (the benchmark writes a queue there)",
                        p.display()
                    )));
                }
                Ok(BenchDir {
                    path: p.to_owned(),
                    remove: false,
                })
            }
            None => Ok(BenchDir {
                path: std::env::temp_dir().join(format!(
                    "crawlfleet-bench-queue-{}-{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos())
                )),
                remove: true,
            }),
        }
    }
}

impl Drop for BenchDir {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Push+pop through the crawl queue in windows; returns the elapsed time.
fn run_queue(
    dir: &Path,
    opts: QueueOptions,
    recs: &[Vec<u8>],
    total: u64,
    window: u64,
) -> Result<Duration, BenchError> {
    let mut q = CrawlQueue::open(dir, opts).map_err(qerr)?;
    let started = Instant::now();
    let (mut pushed, mut popped) = (0u64, 0u64);
    while popped < total {
        let w = window.min(total - pushed);
        for _ in 0..w {
            q.push_back(&recs[pushed as usize % recs.len()])
                .map_err(qerr)?;
            pushed += 1;
        }
        for _ in 0..w {
            let want = &recs[popped as usize % recs.len()];
            match q.pop_front_with(|r| r == &want[..]).map_err(qerr)? {
                Some(true) => popped += 1,
                Some(false) => return Err(BenchError(format!("entry {popped} came out changed"))),
                None => return Err(BenchError(format!("entry {popped} is missing"))),
            }
        }
        q.tick(Instant::now()).map_err(qerr)?;
    }
    q.sync().map_err(qerr)?;
    Ok(started.elapsed())
}

/// The same windows of `LPUSH` then `RPOP` against redis on `connections` connections, each
/// with its own list; returns the elapsed time.
fn run_redis(
    addr: SocketAddr,
    recs: &[Vec<u8>],
    total: u64,
    pipeline: u64,
    connections: usize,
) -> Result<Duration, BenchError> {
    let rerr = |e: redis::RedisError| BenchError(format!("redis {addr}: {e}"));
    let client = redis::Client::open(format!("redis://{addr}/")).map_err(rerr)?;
    let per = total / connections as u64;
    let started = Instant::now();
    let results: Vec<Result<(), BenchError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..connections)
            .map(|c| {
                let count = if c == 0 {
                    total - per * (connections as u64 - 1)
                } else {
                    per
                };
                let client = &client;
                s.spawn(move || -> Result<(), BenchError> {
                    let mut con = client.get_connection().map_err(rerr)?;
                    let key = format!("crawlfleet-bench-queue-{}-{c}", std::process::id());
                    redis::cmd("DEL")
                        .arg(&key)
                        .query::<()>(&mut con)
                        .map_err(rerr)?;
                    let mut done = 0u64;
                    while done < count {
                        let w = pipeline.min(count - done);
                        let mut push = redis::pipe();
                        for k in 0..w {
                            let r = &recs[(done + k) as usize % recs.len()];
                            push.cmd("LPUSH").arg(&key).arg(&r[..]).ignore();
                        }
                        push.query::<()>(&mut con).map_err(rerr)?;
                        let mut pop = redis::pipe();
                        for _ in 0..w {
                            pop.cmd("RPOP").arg(&key);
                        }
                        let got: Vec<Option<Vec<u8>>> = pop.query(&mut con).map_err(rerr)?;
                        for (k, g) in got.iter().enumerate() {
                            let want = &recs[(done + k as u64) as usize % recs.len()];
                            if g.as_deref() != Some(&want[..]) {
                                return Err(BenchError(format!(
                                    "redis returned entry {} changed or missing",
                                    done + k as u64
                                )));
                            }
                        }
                        done += w;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(BenchError("a redis thread panicked".into())))
            })
            .collect()
    });
    let elapsed = started.elapsed();
    for r in results {
        r?;
    }
    Ok(elapsed)
}

/// Bytes the files of `dir` occupy on disk (allocated blocks, not apparent sizes).
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.metadata().ok())
                .map(|m| m.blocks() * 512)
                .sum()
        })
        .unwrap_or(0)
}

/// `--fill N`: N entries pushed, measured, then popped in order.
fn run_fill(
    args: &BenchQueueArgs,
    dir: &Path,
    opts: QueueOptions,
    n: u64,
) -> Result<(), BenchError> {
    let mut q = CrawlQueue::open(dir, opts).map_err(qerr)?;
    let rss_before = resident_bytes().unwrap_or(0);
    let mut rec = Vec::with_capacity(512);
    let mut record_bytes = 0u64;
    let started = Instant::now();
    for i in 0..n {
        rec.clear();
        encode_entry(&sample_entry(i), &mut rec);
        record_bytes += rec.len() as u64;
        q.push_back(&rec).map_err(qerr)?;
    }
    q.sync().map_err(qerr)?;
    let push_time = started.elapsed();
    let (len, disk, allocated, rss) = (
        q.len(),
        q.disk_bytes(),
        allocated_bytes(dir),
        resident_bytes().unwrap_or(0),
    );
    drop(q);
    let reopen = Instant::now();
    let mut q = CrawlQueue::open(dir, opts).map_err(qerr)?;
    let reopen_time = reopen.elapsed();
    let started = Instant::now();
    for i in 0..n {
        rec.clear();
        encode_entry(&sample_entry(i), &mut rec);
        match q.pop_front_with(|r| r == &rec[..]).map_err(qerr)? {
            Some(true) => {}
            Some(false) => return Err(BenchError(format!("entry {i} came out of order"))),
            None => return Err(BenchError(format!("entry {i} is missing"))),
        }
    }
    if !q.is_empty() {
        return Err(BenchError(format!("{} entries too many", q.len())));
    }
    q.sync().map_err(qerr)?;
    let pop_time = started.elapsed();
    let record_avg = record_bytes as f64 / n.max(1) as f64;
    let push_rate = n as f64 / push_time.as_secs_f64();
    let pop_rate = n as f64 / pop_time.as_secs_f64();
    let reopen_ms = reopen_time.as_secs_f64() * 1e3;
    let disk_after = q.disk_bytes();
    let out = json!({
        "entries": len,
        "record_bytes": record_avg,
        "push_rate": push_rate,
        "pop_rate": pop_rate,
        "disk_bytes": disk,
        "allocated_bytes": allocated,
        "rss_bytes": rss,
        "rss_growth_bytes": rss.saturating_sub(rss_before),
        "reopen_ms": reopen_ms,
        "disk_bytes_after": disk_after,
    });
    if args.json {
        println!("{out}");
        return Ok(());
    }
    println!("crawl queue fill: {len} entries of {record_avg:.0} bytes on average");
    println!("  push            {push_rate:>12.0} entries/s (encoding included)");
    println!("  disk            {disk:>12} bytes of files, {allocated} allocated");
    println!(
        "  resident        {rss:>12} bytes ({} more than before the fill)",
        rss.saturating_sub(rss_before)
    );
    println!("  reopen          {reopen_ms:>12.1} ms");
    println!("  pop in order    {pop_rate:>12.0} entries/s (checked)");
    println!(
        "  disk after      {disk_after:>12} bytes (the tail segment and spares kept for reuse)"
    );
    Ok(())
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchQueueArgs) -> Result<(), BenchError> {
    let dir = BenchDir::new(args.dir.as_deref())?;
    let opts = QueueOptions {
        segment_bytes: args.segment_bytes,
        sync: parse_sync(&args.sync).map_err(BenchError)?,
    };
    if let Some(n) = args.fill {
        return run_fill(args, &dir.path, opts, n);
    }
    let recs = sample_records(POOL);
    let avg = recs.iter().map(Vec::len).sum::<usize>() as f64 / recs.len() as f64;
    let window = args.window.max(1);
    let elapsed = run_queue(&dir.path, opts, &recs, args.total, window)?;
    let rate = args.total as f64 / elapsed.as_secs_f64();
    let peer = match args.vs_redis {
        Some(addr) => Some(
            args.total as f64
                / run_redis(
                    addr,
                    &recs,
                    args.total,
                    args.pipeline.max(1),
                    args.connections.max(1),
                )?
                .as_secs_f64(),
        ),
        None => None,
    };
    let mut out = json!({
        "total": args.total,
        "record_bytes": avg,
        "window": window,
        "sync": args.sync,
        "rate": rate,
        "ops_rate": 2.0 * rate,
    });
    if let Some(p) = peer {
        out["peer"] = json!("redis LPUSH+RPOP pipelined");
        out["pipeline"] = json!(args.pipeline);
        out["connections"] = json!(args.connections);
        out["peer_rate"] = json!(p);
        out["peer_ops_rate"] = json!(2.0 * p);
        out["ratio"] = json!(rate / p);
    }
    if args.json {
        println!("{out}");
        return Ok(());
    }
    println!(
        "crawl queue push+pop: {} entries of {avg:.0} bytes, windows of {window}, sync {}",
        args.total, args.sync
    );
    println!(
        "  crawlfleet      {rate:>12.0} entries/s ({:.0} ops/s)",
        2.0 * rate
    );
    if let Some(p) = peer {
        println!(
            "  redis           {p:>12.0} entries/s ({:.0} ops/s; pipeline {}, {} connection(s))",
            2.0 * p,
            args.pipeline,
            args.connections
        );
        println!("  ratio           {:>12.2}", rate / p);
    }
    Ok(())
}
