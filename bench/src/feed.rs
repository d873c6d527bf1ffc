//! `crawlfleet bench feed`: durable feeding operations acknowledged per second through content
//! distributor sessions (docs/distributor.md "Feeding sessions"), through one session and
//! through four sessions spread over the distributors, with p50/p99 acknowledgement latency;
//! and the same payloads as `XADD` pipelined against redis-server in the same run (a stream per
//! connection, what a queue-of-documents deployment would use; the script runs redis with
//! `appendonly yes`, `appendfsync everysec`, so redis acknowledges before its fsync while a
//! distributor acknowledges after it).
//!
//! Without `--nameserver` the benchmark starts its own name server and `--distributors`
//! distributors (child processes of this executable, in a temporary directory). Every request
//! is encoded before the clock starts. Each session (or redis connection) keeps `--window`
//! requests of `--batch` operations in flight on one blocking connection and thread; an
//! operation's latency is its request's, from the write of the request to its reply (which a
//! distributor sends once every operation in it is durable).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crawlfleet_core::distributor::{DISPATCHER_NAME, DISPATCHER_NODE, SESSION_FACTORY};
use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{Limits, Value};
use crawlfleet_core::nameserver::{Aor, Reply, Triple};
use crawlfleet_shells::nsclient::NsClient;
use hdrhistogram::Histogram;
use serde_json::json;

use crate::cli::BenchFeedArgs;
use crate::{BenchError, RoleChild};

fn err(e: impl std::fmt::Display) -> BenchError {
    BenchError(e.to_string())
}

/// Calls to the name server and the master are bounded by this.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest reply frame read (a feed reply is a few bytes per operation).
const MAX_REPLY: usize = 16 << 20;

/// What one side measured over all its connections.
struct Run {
    ops: u64,
    elapsed: Duration,
    latency: Histogram<u64>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    fn p(&self, q: f64) -> u64 {
        self.latency.value_at_quantile(q)
    }
}

/// One document of the load: the same bytes for both sides.
struct Doc {
    uri: String,
    checksum: [u8; 16],
    body: Vec<u8>,
}

const CONTENT_TYPE: &[u8] = b"text/html; charset=utf-8";

fn doc(run: usize, conn: usize, i: u64, body_bytes: usize) -> Doc {
    let uri = format!(
        "http://www{}.bench.example/r{run}/c{conn}/page-{i}.html",
        i % 997
    );
    // A checksum unique per document (the bytes a crawler's MD5 would take).
    let a = splitmix((run as u64) << 56 ^ (conn as u64) << 40 ^ i);
    let b = splitmix(a);
    let mut h = [0u8; 16];
    h[..8].copy_from_slice(&a.to_le_bytes());
    h[8..].copy_from_slice(&b.to_le_bytes());
    let mut body = Vec::with_capacity(body_bytes);
    let words = [
        "crawl ",
        "fleet ",
        "document ",
        "feeding ",
        "session ",
        "index ",
    ];
    let mut k = i as usize;
    while body.len() < body_bytes {
        body.extend_from_slice(words[k % words.len()].as_bytes());
        k = k.wrapping_mul(31).wrapping_add(7);
    }
    body.truncate(body_bytes);
    Doc {
        uri,
        checksum: h,
        body,
    }
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn s(v: &str) -> Value<'static> {
    Value::owned_bytes(v.as_bytes().to_vec())
}

fn k(v: &'static str) -> Value<'static> {
    Value::bytes(v.as_bytes())
}

/// The frame of one `feed` request of `docs` (sequence numbers from `seq`).
fn feed_frame(object: &str, id: i64, seq: u64, docs: &[Doc], now: i64, out: &mut Vec<u8>) {
    let ops = docs
        .iter()
        .enumerate()
        .map(|(j, d)| {
            Value::Dict(vec![
                (k("seq"), Value::int((seq + j as u64) as i64)),
                (k("op"), k("add")),
                (k("doc"), s(&d.uri)),
                (k("time"), Value::int(now)),
                (k("checksum"), Value::owned_bytes(d.checksum.to_vec())),
                (k("status"), Value::int(200)),
                (
                    k("headers"),
                    Value::List(vec![Value::List(vec![
                        k("content-type"),
                        Value::bytes(CONTENT_TYPE),
                    ])]),
                ),
                (k("body"), Value::owned_bytes(d.body.clone())),
            ])
        })
        .collect();
    let dict = vec![
        (k("object"), s(object)),
        (k("method"), k("feed")),
        (k("id"), Value::int(id)),
        (k("args"), Value::Dict(vec![(k("ops"), Value::List(ops))])),
    ];
    frame::encode_dict(&dict, Priority::Normal, out);
}

/// The same documents as redis `XADD feed:<conn> * doc .. checksum .. status .. headers .. body ..`.
fn xadd_batch(conn: usize, docs: &[Doc], out: &mut Vec<u8>) {
    let key = format!("feed:{conn}");
    for d in docs {
        let parts: [&[u8]; 13] = [
            b"XADD",
            key.as_bytes(),
            b"*",
            b"doc",
            d.uri.as_bytes(),
            b"checksum",
            &d.checksum,
            b"status",
            b"200",
            b"content-type",
            CONTENT_TYPE,
            b"body",
            &d.body,
        ];
        out.extend_from_slice(format!("*{}\r\n", parts.len()).as_bytes());
        for p in parts {
            out.extend_from_slice(format!("${}\r\n", p.len()).as_bytes());
            out.extend_from_slice(p);
            out.extend_from_slice(b"\r\n");
        }
    }
}

/// Reads replies off a blocking stream: whole units that `split` finds in the buffer.
struct Reader {
    buf: Vec<u8>,
    start: usize,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            buf: Vec::with_capacity(1 << 16),
            start: 0,
        }
    }

    /// The next unit: `split` returns the length of a whole one at the start of its input, or
    /// None when more bytes are needed. `f` gets the unit's bytes.
    fn next<T>(
        &mut self,
        s: &mut TcpStream,
        split: impl Fn(&[u8]) -> Result<Option<usize>, BenchError>,
        f: impl FnOnce(&[u8]) -> Result<T, BenchError>,
    ) -> Result<T, BenchError> {
        loop {
            if let Some(n) = split(&self.buf[self.start..])? {
                let r = f(&self.buf[self.start..self.start + n]);
                self.start += n;
                if self.start == self.buf.len() {
                    self.buf.clear();
                    self.start = 0;
                }
                return r;
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let len = self.buf.len();
            self.buf.resize(len + (1 << 16), 0);
            let n = s.read(&mut self.buf[len..]).map_err(err)?;
            self.buf.truncate(len + n);
            if n == 0 {
                return Err(err("the server closed the connection"));
            }
        }
    }
}

/// A whole FSCMT frame at the start of `b`.
fn frame_len(b: &[u8]) -> Result<Option<usize>, BenchError> {
    let limits = Limits {
        max_size: MAX_REPLY,
        ..Limits::default()
    };
    Ok(frame::split(b, &limits).map_err(err)?.map(|(_, n)| n))
}

/// A whole RESP reply at the start of `b` (a status, an error, an integer or a bulk string:
/// what XADD answers).
fn resp_len(b: &[u8]) -> Result<Option<usize>, BenchError> {
    let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    match b.first() {
        Some(b'$') => {
            let n: i64 = std::str::from_utf8(&b[1..eol])
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| err("a malformed RESP bulk length"))?;
            if n < 0 {
                return Ok(Some(eol + 2));
            }
            let end = eol + 2 + n as usize + 2;
            Ok((b.len() >= end).then_some(end))
        }
        Some(b'-') => Err(err(format!(
            "redis: {}",
            String::from_utf8_lossy(&b[1..eol])
        ))),
        _ => Ok(Some(eol + 2)),
    }
}

/// The requests of one connection, encoded, and how many operations each carries.
struct Load {
    frames: Vec<Vec<u8>>,
    ops: Vec<u64>,
}

/// Sends `load` on `s` with `window` requests in flight, reading `per_request` replies per
/// request; returns the latency of each request with its operation count.
fn pump(
    s: &mut TcpStream,
    load: &Load,
    window: usize,
    mut reply: impl FnMut(&mut Reader, &mut TcpStream, usize) -> Result<(), BenchError>,
) -> Result<Vec<(Duration, u64)>, BenchError> {
    let mut reader = Reader::new();
    let mut sent_at = Vec::with_capacity(load.frames.len());
    let mut out = Vec::with_capacity(load.frames.len());
    let mut next = 0;
    while next < load.frames.len().min(window) {
        sent_at.push(Instant::now());
        s.write_all(&load.frames[next]).map_err(err)?;
        next += 1;
    }
    for i in 0..load.frames.len() {
        reply(&mut reader, s, i)?;
        out.push((sent_at[i].elapsed(), load.ops[i]));
        if next < load.frames.len() {
            sent_at.push(Instant::now());
            s.write_all(&load.frames[next]).map_err(err)?;
            next += 1;
        }
    }
    Ok(out)
}

/// Runs one load per connection on threads that start together; `drive` runs one connection.
fn run_all(
    loads: Vec<Load>,
    drive: impl Fn(usize, &Load, &Barrier) -> Result<Vec<(Duration, u64)>, BenchError>
        + Sync
        + Send
        + Clone
        + 'static,
) -> Result<Run, BenchError> {
    let barrier = Arc::new(Barrier::new(loads.len() + 1));
    let mut threads = Vec::new();
    for (conn, load) in loads.into_iter().enumerate() {
        let barrier = barrier.clone();
        let drive = drive.clone();
        threads.push(std::thread::spawn(move || drive(conn, &load, &barrier)));
    }
    barrier.wait();
    let start = Instant::now();
    let mut latency = Histogram::<u64>::new(3).map_err(err)?;
    let mut ops = 0;
    let mut failed = None;
    for t in threads {
        match t.join() {
            Ok(Ok(lats)) => {
                for (d, n) in lats {
                    ops += n;
                    latency
                        .record_n(d.as_micros().max(1) as u64, n)
                        .map_err(err)?;
                }
            }
            Ok(Err(e)) => failed = Some(e),
            Err(_) => failed = Some(err("a load thread panicked")),
        }
    }
    let elapsed = start.elapsed();
    if let Some(e) = failed {
        return Err(e);
    }
    Ok(Run {
        ops,
        elapsed,
        latency,
    })
}

/// Splits `docs` operations into `conns` loads of `batch`-operation requests, encoded by `enc`.
fn loads(
    run: usize,
    conns: usize,
    args: &BenchFeedArgs,
    mut enc: impl FnMut(usize, usize, u64, &[Doc], &mut Vec<u8>),
) -> Vec<Load> {
    let per = args.docs.div_ceil(conns as u64);
    let batch = args.batch.max(1) as u64;
    (0..conns)
        .map(|c| {
            let mut load = Load {
                frames: Vec::new(),
                ops: Vec::new(),
            };
            let mut i = 0;
            while i < per {
                let n = batch.min(per - i);
                let docs: Vec<Doc> = (i..i + n)
                    .map(|j| doc(run, c, j, args.body_bytes))
                    .collect();
                let mut f = Vec::new();
                enc(c, load.frames.len(), i + 1, &docs, &mut f);
                load.frames.push(f);
                load.ops.push(n);
                i += n;
            }
            load
        })
        .collect()
}

/// The cluster the benchmark feeds: a name server and its distributors (started here, or given).
struct Cluster {
    nameserver: SocketAddr,
    _children: Vec<RoleChild>,
}

fn start_role(dir: &std::path::Path, args: &[&str]) -> Result<(RoleChild, SocketAddr), BenchError> {
    std::fs::create_dir_all(dir).map_err(err)?;
    let child = Command::new(std::env::current_exe().map_err(err)?)
        .arg("role")
        .args(args)
        .arg("--data-dir")
        .arg(dir.join("data"))
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .map_err(err)?;
    // Killed when dropped, also when it does not announce itself.
    let mut role = RoleChild {
        child,
        dir: dir.to_path_buf(),
    };
    let addr = crate::read_announced(&mut role.child, args[0])?;
    Ok((role, addr))
}

fn start_cluster(args: &BenchFeedArgs) -> Result<Cluster, BenchError> {
    if let Some(ns) = args.nameserver {
        return Ok(Cluster {
            nameserver: ns,
            _children: Vec::new(),
        });
    }
    let base = std::env::temp_dir().join(format!("crawlfleet-bench-feed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let (ns_child, ns) = start_role(&base.join("ns"), &["nameserver", "--listen", "127.0.0.1:0"])?;
    let mut children = vec![ns_child];
    let ns_s = ns.to_string();
    for n in 1..=args.distributors.max(1) {
        let id = n.to_string();
        let (c, _) = start_role(
            &base.join(format!("d{n}")),
            &[
                "distributor",
                "--nameserver",
                &ns_s,
                "--listen",
                "127.0.0.1:0",
                "--node-id",
                &id,
                "--collection",
                &args.collection,
                "--check-interval-ms",
                "500",
            ],
        )?;
        children.push(c);
    }
    Ok(Cluster {
        nameserver: ns,
        _children: children,
    })
}

/// The first address `host:port` resolves to.
fn first_addr(host: &str, port: u16) -> Result<SocketAddr, BenchError> {
    std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| err(format!("cannot resolve {host}:{port}")))
}

fn connect(aor: &Aor) -> Result<NsClient, BenchError> {
    NsClient::connect(first_addr(&aor.host, aor.port)?, CALL_TIMEOUT).map_err(err)
}

/// Waits until a master is bound and `want` distributors are registered with it; makes sure
/// each holds the collection; returns the master's session_factory.
fn ready(cluster: &Cluster, args: &BenchFeedArgs) -> Result<Aor, BenchError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let triple = Triple {
        name: DISPATCHER_NAME.to_owned(),
        interface_type: SESSION_FACTORY.0.to_owned(),
        interface_version: SESSION_FACTORY.1.to_owned(),
    };
    loop {
        let attempt = || -> Result<Option<Aor>, BenchError> {
            let mut ns = NsClient::connect(cluster.nameserver, CALL_TIMEOUT).map_err(err)?;
            let nodes: Vec<Aor> = ns
                .list()
                .map_err(err)?
                .into_iter()
                .filter(|a| a.interface_type == DISPATCHER_NODE.0)
                .collect();
            let Ok(master) = ns.resolve(triple.clone()) else {
                return Ok(None);
            };
            let want = match args.nameserver {
                Some(_) => nodes.len().max(1),
                None => args.distributors.max(1),
            };
            if nodes.len() < want {
                return Ok(None);
            }
            for n in &nodes {
                connect(n)?
                    .call_method(
                        &n.object_id,
                        "add_collection",
                        Value::Dict(vec![(k("collection"), s(&args.collection))]),
                    )
                    .map_err(err)?;
            }
            let registered = connect(&master)?
                .call_method(
                    &master
                        .object_id
                        .replace("session_factory", "master_dispatcher"),
                    "list_dispatchers",
                    Value::Dict(Vec::new()),
                )
                .map_err(err)?;
            let count = registered.as_list().map_or(0, <[_]>::len);
            Ok((count >= want).then_some(master))
        };
        match attempt() {
            Ok(Some(m)) => return Ok(m),
            Ok(None) => {}
            Err(e) if Instant::now() >= deadline => return Err(e),
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(err(
                "no master with every distributor registered within 30 s",
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Creates a session through the master's session_factory (MS-FSCDFT 3.6).
fn create_session(master: &Aor, collection: &str) -> Result<Aor, BenchError> {
    let guarantees = Value::Dict(vec![
        (k("type"), Value::int(9)),
        (k("checksum"), Value::int(-1_479_218_033)),
        (k("guarantees"), Value::List(Vec::new())),
    ]);
    let v = connect(master)?
        .call_method(
            &master.object_id,
            "create",
            Value::Dict(vec![
                (k("collection"), s(collection)),
                (k("guarantees"), guarantees),
                (k("priority"), Value::int(0)),
                (k("external_client"), Value::Bool(false)),
            ]),
        )
        .map_err(err)?;
    Aor::from_value(&v, "result").map_err(err)
}

/// One reply to a `feed` request: every operation acknowledged `ok`.
fn check_feed_reply(body_and_header: &[u8], ops: u64) -> Result<(), BenchError> {
    let limits = Limits {
        max_size: MAX_REPLY,
        ..Limits::default()
    };
    let reply = Reply::decode_body(&body_and_header[frame::HEADER_LEN..], &limits).map_err(err)?;
    let result = reply.outcome.map_err(err)?;
    let list = result
        .as_list()
        .ok_or_else(|| err("a feed reply that is not a list"))?;
    if list.len() as u64 != ops {
        return Err(err(format!("{} results for {ops} operations", list.len())));
    }
    for r in list {
        let e = r.as_list().unwrap_or(&[]);
        if e.get(1).and_then(Value::as_bytes) != Some(b"ok") {
            return Err(err(format!("an operation was not acknowledged: {r:?}")));
        }
    }
    Ok(())
}

fn run_sessions(
    master: &Aor,
    args: &BenchFeedArgs,
    sessions: usize,
    run: usize,
) -> Result<(Run, Vec<String>), BenchError> {
    let aors: Vec<Aor> = (0..sessions)
        .map(|_| create_session(master, &args.collection))
        .collect::<Result<_, _>>()?;
    let now = crawlfleet_core::clock::unix_now();
    let objects: Vec<String> = aors.iter().map(|a| a.object_id.clone()).collect();
    let loads = loads(run, sessions, args, |c, n, seq, docs, out| {
        feed_frame(&objects[c], n as i64 + 1, seq, docs, now, out)
    });
    let addrs: Vec<SocketAddr> = aors
        .iter()
        .map(|a| first_addr(&a.host, a.port))
        .collect::<Result<_, _>>()?;
    let window = args.window.max(1);
    let placed: Vec<String> = aors
        .iter()
        .map(|a| format!("{}:{}", a.host, a.port))
        .collect();
    let r = run_all(loads, move |c, load, barrier| {
        let mut stream = TcpStream::connect(addrs[c]).map_err(err);
        barrier.wait();
        let s = stream.as_mut().map_err(|e| err(e.to_string()))?;
        s.set_nodelay(true).map_err(err)?;
        pump(s, load, window, |r, s, i| {
            r.next(s, frame_len, |f| check_feed_reply(f, load.ops[i]))
        })
    })?;
    for a in &aors {
        let _ = connect(a).and_then(|mut c| {
            c.call_method(&a.object_id, "close", Value::Dict(Vec::new()))
                .map_err(err)
        });
    }
    Ok((r, placed))
}

fn run_redis(
    addr: SocketAddr,
    args: &BenchFeedArgs,
    conns: usize,
    run: usize,
) -> Result<Run, BenchError> {
    let loads = loads(run, conns, args, |c, _, _, docs, out| {
        xadd_batch(c, docs, out)
    });
    let window = args.window.max(1);
    run_all(loads, move |_, load, barrier| {
        let mut stream = TcpStream::connect(addr).map_err(err);
        barrier.wait();
        let s = stream.as_mut().map_err(|e| err(e.to_string()))?;
        s.set_nodelay(true).map_err(err)?;
        pump(s, load, window, |r, s, i| {
            for _ in 0..load.ops[i] {
                r.next(s, resp_len, |_| Ok(()))?;
            }
            Ok(())
        })
    })
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchFeedArgs) -> Result<(), BenchError> {
    let cluster = start_cluster(args)?;
    let master = ready(&cluster, args)?;
    let mut rows = Vec::new();
    for (run, &sessions) in args.sessions.iter().enumerate() {
        let sessions = sessions.max(1);
        let (ours, placed) = run_sessions(&master, args, sessions, run)?;
        let peer = match args.vs_redis {
            Some(addr) => Some(run_redis(addr, args, sessions, run)?),
            None => None,
        };
        let mut row = json!({
            "sessions": sessions,
            "placed_on": placed,
            "ops": ours.ops,
            "rate": ours.rate(),
            "p50_us": ours.p(0.5),
            "p99_us": ours.p(0.99),
        });
        if let Some(p) = &peer {
            row["peer"] = json!("redis XADD");
            row["peer_rate"] = json!(p.rate());
            row["peer_p50_us"] = json!(p.p(0.5));
            row["peer_p99_us"] = json!(p.p(0.99));
            row["ratio"] = json!(ours.rate() / p.rate());
        }
        rows.push((row, ours, peer));
    }
    if args.json {
        let runs: Vec<_> = rows.iter().map(|(r, _, _)| r.clone()).collect();
        println!(
            "{}",
            json!({
                "docs": args.docs,
                "body_bytes": args.body_bytes,
                "batch": args.batch,
                "window": args.window,
                "runs": runs,
            })
        );
        return Ok(());
    }
    println!(
        "feed: {} documents of {} bytes per run, {} per request, {} requests in flight per session",
        args.docs, args.body_bytes, args.batch, args.window
    );
    for (row, ours, peer) in &rows {
        println!("  {} session(s) on {}", row["sessions"], row["placed_on"]);
        println!(
            "    crawlfleet     {:>10.0} ops/s   p50 {:>7} us   p99 {:>7} us",
            ours.rate(),
            ours.p(0.5),
            ours.p(0.99)
        );
        if let Some(p) = peer {
            println!(
                "    redis XADD     {:>10.0} ops/s   p50 {:>7} us   p99 {:>7} us",
                p.rate(),
                p.p(0.5),
                p.p(0.99)
            );
            println!("    ratio          {:>10.2}", ours.rate() / p.rate());
        }
    }
    Ok(())
}
