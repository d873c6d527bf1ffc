//! `crawlfleet bench dup`: pipelined PPDUP_ADD load against a running duplicate server, and the
//! same number of `SET <checksum> <uri> NX` against redis-server in the same run (what a
//! scrapy-redis style deployment would use as its duplicate filter).
//!
//! The load generator shares the machine with the servers, so it is kept cheap, and the same
//! for both sides: every request is encoded before the clock starts, one thread drives all
//! connections over non-blocking sockets (mio), and answers are parsed only as far as needed to
//! count them and tell duplicates (a typed decode of each PPDUP_ADD_OK; the RESP status line for
//! redis). With `--flow windows` each connection works like `redis-benchmark -P`: it writes a
//! window of `pipeline` requests, reads their answers, and repeats; with `--flow stream` it
//! writes a new request for every answer, so `pipeline` stay in flight. A request's latency is
//! the time from the write that completed it to the read that brought its answer. redis is
//! spoken to in RESP over a plain socket, with exactly the same flow.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{Limits, Value};
use crawlfleet_core::msg::{Checksum, Message, PpdupChecksum, PpdupSetConfig};
use hdrhistogram::Histogram;
use mio::{Events, Interest, Poll, Token};
use serde_json::json;

use crate::cli::{BenchDupArgs, Flow};
use crate::BenchError;

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

/// What one answer said.
enum Answer {
    /// The add created the mapping (PKT_OWNURI is the request's URI; redis `+OK`).
    Fresh,
    /// The checksum had an owner already (another PKT_OWNURI; redis nil).
    Duplicate,
    /// Not an answer to a request (a keep-alive, a promote request).
    Other,
}

/// One side's wire protocol as the load generator needs it.
trait Protocol {
    /// The requests of one connection, encoded back to back, and where each one ends.
    fn requests(&self, conn: u64, count: u64) -> (Vec<u8>, Vec<usize>);
    /// Opens and prepares one connection (blocking), ready for the first window.
    fn connect(&self) -> Result<TcpStream, BenchError>;
    /// Cuts one answer off the front of `buf`: `Ok(None)` when it is not complete yet.
    fn answer(&self, buf: &[u8]) -> Result<Option<(usize, Answer)>, BenchError>;
}

struct Dup<'a> {
    args: &'a BenchDupArgs,
    collection: &'static [u8],
}

impl Protocol for Dup<'_> {
    fn requests(&self, conn: u64, count: u64) -> (Vec<u8>, Vec<usize>) {
        let node = format!("bench-{conn}").into_bytes();
        let mut rng = fastrand::Rng::with_seed(conn);
        let mut out = Vec::with_capacity(count as usize * 140);
        let mut ends = Vec::with_capacity(count as usize);
        for i in 0..count {
            let m = Message::PpdupAdd(PpdupChecksum {
                collection: self.collection.into(),
                node_id: node.as_slice().into(),
                uri: uri(conn, i).into_bytes().into(),
                checksum: checksum(conn, i, self.args.dup_ratio, &mut rng),
                ppdup_id: None,
                dbname: None,
            });
            frame::encode_message(&m, Priority::Normal, &mut out);
            ends.push(out.len());
        }
        (out, ends)
    }

    fn connect(&self) -> Result<TcpStream, BenchError> {
        let mut stream = TcpStream::connect(self.args.target)
            .map_err(io("connecting to the duplicate server"))?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(io("read timeout"))?;
        let mut out = Vec::new();
        frame::encode_message(
            &Message::PpdupSetConfig(PpdupSetConfig {
                config: Value::Dict(vec![(Value::bytes(self.collection), Value::Dict(vec![]))]),
                vclock: 1,
                collection: None,
            }),
            Priority::Normal,
            &mut out,
        );
        stream.write_all(&out).map_err(io("writing"))?;
        // The PPDUP_CONFIG_ACK.
        let mut buf = Vec::new();
        loop {
            if let Some((used, _)) = self.answer(&buf)? {
                if used == buf.len() {
                    return Ok(stream);
                }
                return Err(BenchError("unexpected data after PPDUP_CONFIG_ACK".into()));
            }
            let mut chunk = [0u8; 4096];
            let n = stream
                .read(&mut chunk)
                .map_err(io("reading from the server"))?;
            if n == 0 {
                return Err(BenchError("the server closed the connection".into()));
            }
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    fn answer(&self, buf: &[u8]) -> Result<Option<(usize, Answer)>, BenchError> {
        let limits = Limits::default();
        let Some((body, used)) = frame::split(buf, &limits)
            .map_err(|e| BenchError(format!("bad frame from the server: {e}")))?
        else {
            return Ok(None);
        };
        let (_, m) = frame::decode_message(body, &limits)
            .map_err(|e| BenchError(format!("bad message from the server: {e}")))?;
        let answer = match m {
            Message::PpdupAddOk(ok) if ok.owner_uri.as_deref() == Some(&ok.uri[..]) => {
                Answer::Fresh
            }
            Message::PpdupAddOk(_) => Answer::Duplicate,
            Message::PpdupError(e) => {
                return Err(BenchError(format!(
                    "the server refused an add: {}",
                    String::from_utf8_lossy(&e.why)
                )))
            }
            // Keep-alives, promote requests and the PPDUP_CONFIG_ACK are not answers to adds.
            _ => Answer::Other,
        };
        Ok(Some((used, answer)))
    }
}

struct Redis<'a> {
    args: &'a BenchDupArgs,
    addr: SocketAddr,
}

impl Protocol for Redis<'_> {
    fn requests(&self, conn: u64, count: u64) -> (Vec<u8>, Vec<usize>) {
        let mut rng = fastrand::Rng::with_seed(conn);
        let mut out = Vec::with_capacity(count as usize * 110);
        let mut ends = Vec::with_capacity(count as usize);
        for i in 0..count {
            let key = checksum(conn ^ 0x5eed_0000, i, self.args.dup_ratio, &mut rng);
            let value = uri(conn, i);
            out.extend_from_slice(b"*4\r\n$3\r\nSET\r\n$16\r\n");
            out.extend_from_slice(&key.0);
            out.extend_from_slice(format!("\r\n${}\r\n", value.len()).as_bytes());
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n$2\r\nNX\r\n");
            ends.push(out.len());
        }
        (out, ends)
    }

    fn connect(&self) -> Result<TcpStream, BenchError> {
        TcpStream::connect(self.addr).map_err(|e| BenchError(format!("redis {}: {e}", self.addr)))
    }

    fn answer(&self, buf: &[u8]) -> Result<Option<(usize, Answer)>, BenchError> {
        let Some(end) = buf.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        match &buf[..=end] {
            b"+OK\r\n" => Ok(Some((end + 1, Answer::Fresh))),
            // SET ... NX on an existing key answers a nil bulk string.
            b"$-1\r\n" | b"_\r\n" => Ok(Some((end + 1, Answer::Duplicate))),
            line => Err(BenchError(format!(
                "redis {}: unexpected answer {:?}",
                self.addr,
                String::from_utf8_lossy(line)
            ))),
        }
    }
}

/// One connection of the run.
struct Conn {
    stream: mio::net::TcpStream,
    requests: Vec<u8>,
    /// Byte offset where each request ends in `requests`.
    ends: Vec<usize>,
    /// Requests that may be written: the current window's end, or (streaming) the answered
    /// ones plus the pipeline depth.
    limit: usize,
    /// Bytes of `requests` written.
    written: usize,
    /// Requests written whole.
    complete: usize,
    /// Requests answered.
    answered: usize,
    /// When the writes ended that completed requests: (requests complete by then, time), oldest
    /// first, dropped once answered; a request's latency runs from there to its answer.
    writes: VecDeque<(usize, Instant)>,
    buf: Vec<u8>,
    filled: usize,
}

impl Conn {
    fn done(&self) -> bool {
        self.answered == self.ends.len()
    }

    /// Moves `limit` on after answers: a new window once the last one is answered, or at
    /// once when streaming.
    fn advance(&mut self, pipeline: usize, flow: Flow) {
        if flow == Flow::Stream || self.answered == self.limit {
            self.limit = (self.answered + pipeline).min(self.ends.len());
        }
    }

    /// Writes requests up to `limit` until the socket is full.
    fn write(&mut self) -> Result<(), BenchError> {
        let end = match self.limit {
            0 => 0,
            n => self.ends[n - 1],
        };
        while self.written < end {
            match self.stream.write(&self.requests[self.written..end]) {
                Ok(0) => return Err(BenchError("the server stopped reading".into())),
                Ok(n) => {
                    self.written += n;
                    let complete = self.ends.partition_point(|&e| e <= self.written);
                    if complete > self.complete {
                        self.complete = complete;
                        self.writes.push_back((complete, Instant::now()));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(BenchError(format!("writing: {e}"))),
            }
        }
        Ok(())
    }

    /// Records the latency of `n` answers that arrived at `now`.
    fn answers(&mut self, n: usize, now: Instant, latency: &mut Histogram<u64>) {
        for _ in 0..n {
            while self
                .writes
                .front()
                .is_some_and(|&(complete, _)| complete <= self.answered)
            {
                self.writes.pop_front();
            }
            if let Some(&(_, sent)) = self.writes.front() {
                let _ = latency.record(now.duration_since(sent).as_micros() as u64);
            }
            self.answered += 1;
        }
    }
}

/// Runs `total` requests of `proto` over `connections` connections from one thread.
fn run_side(
    proto: &dyn Protocol,
    connections: usize,
    pipeline: usize,
    flow: Flow,
    total: u64,
) -> Result<Run, BenchError> {
    let per = total / connections as u64;
    let mut poll = Poll::new().map_err(io("poll"))?;
    let mut conns = Vec::with_capacity(connections);
    for c in 0..connections as u64 {
        let count = if c == 0 {
            total - per * (connections as u64 - 1)
        } else {
            per
        };
        let (requests, ends) = proto.requests(c, count);
        let stream = proto.connect()?;
        stream.set_nodelay(true).map_err(io("TCP_NODELAY"))?;
        stream.set_nonblocking(true).map_err(io("non-blocking"))?;
        let mut stream = mio::net::TcpStream::from_std(stream);
        poll.registry()
            .register(
                &mut stream,
                Token(c as usize),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(io("poll"))?;
        conns.push(Conn {
            stream,
            requests,
            ends,
            limit: 0,
            written: 0,
            complete: 0,
            answered: 0,
            writes: VecDeque::new(),
            buf: vec![0; 256 << 10],
            filled: 0,
        });
    }
    let mut latency = histogram()?;
    let mut duplicates = 0;
    let started = Instant::now();
    let mut running = 0;
    for conn in conns.iter_mut() {
        if !conn.done() {
            conn.advance(pipeline, flow);
            conn.write()?;
            running += 1;
        }
    }
    let mut events = Events::with_capacity(64);
    while running > 0 {
        poll.poll(&mut events, Some(Duration::from_secs(30)))
            .map_err(io("poll"))?;
        if events.is_empty() {
            return Err(BenchError("no answer for 30 s".into()));
        }
        for ev in events.iter() {
            let conn = &mut conns[ev.token().0];
            if conn.done() {
                continue;
            }
            if ev.is_writable() {
                conn.write()?;
            }
            if !ev.is_readable() {
                continue;
            }
            // Read until the socket is drained, counting whole answers as they arrive.
            loop {
                if conn.filled == conn.buf.len() {
                    conn.buf.resize(conn.buf.len() * 2, 0);
                }
                let n = match conn.stream.read(&mut conn.buf[conn.filled..]) {
                    Ok(0) => return Err(BenchError("the server closed the connection".into())),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(BenchError(format!("reading: {e}"))),
                };
                conn.filled += n;
                let now = Instant::now();
                let mut at = 0;
                let mut answered = 0;
                while let Some((used, answer)) = proto.answer(&conn.buf[at..conn.filled])? {
                    at += used;
                    match answer {
                        Answer::Fresh => answered += 1,
                        Answer::Duplicate => {
                            answered += 1;
                            duplicates += 1;
                        }
                        Answer::Other => {}
                    }
                }
                conn.buf.copy_within(at..conn.filled, 0);
                conn.filled -= at;
                if conn.answered + answered > conn.complete {
                    return Err(BenchError("more answers than requests".into()));
                }
                conn.answers(answered, now, &mut latency);
                if conn.done() {
                    running -= 1;
                    break;
                }
                if answered > 0 {
                    conn.advance(pipeline, flow);
                    conn.write()?;
                }
            }
        }
    }
    Ok(Run {
        ops: total,
        elapsed: started.elapsed(),
        latency,
        duplicates,
    })
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchDupArgs) -> Result<(), BenchError> {
    let connections = args.connections.max(1);
    let pipeline = args.pipeline.max(1);
    let dup_side = Dup {
        args,
        collection: b"bench",
    };
    let dup = run_side(&dup_side, connections, pipeline, args.flow, args.total)?;
    let peer = match args.vs_redis {
        Some(addr) => Some(run_side(
            &Redis { args, addr },
            connections,
            pipeline,
            args.flow,
            args.total,
        )?),
        None => None,
    };
    let mut out = json!({
        "target": args.target.to_string(),
        "connections": connections,
        "pipeline": args.pipeline,
        "flow": args.flow.name(),
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
        "PPDUP_ADD -> {}: {} adds on {} connection(s), pipeline {} ({})",
        args.target,
        dup.ops,
        connections,
        args.pipeline,
        args.flow.name()
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
