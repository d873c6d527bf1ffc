//! `crawlfleet bench dup`: pipelined PPDUP_ADD load against a running duplicate server, and the
//! same number of `SET <checksum> <uri> NX` against redis-server in the same run (what a
//! scrapy-redis style deployment would use as its duplicate filter).
//!
//! The load generator shares the machine with the servers, so it is kept cheap, and the same
//! for both sides: every request is encoded before the clock starts, net's event loop drives all
//! connections (its thread does the socket work, as in every role; this thread hands it windows
//! of requests and counts answers), and answers are parsed only as far as needed to count them
//! and tell duplicates (each PPDUP_ADD_OK read borrowed in place, its PKT_OWNURI compared with
//! its PKT_URI; the RESP status line for redis).
//! With `--flow windows` each connection works like `redis-benchmark -P`: it sends a window of
//! `pipeline` requests, waits for their answers, and repeats; with `--flow stream` it sends a new
//! request for every answer, so `pipeline` stay in flight. A request's latency is the time from
//! handing it to the loop to the arrival of its answer. redis is spoken to in RESP, with exactly
//! the same flow: with `--vs-redis` a redis-server as a scrapy-redis deployment runs it (no
//! persistence), with `--vs-redis-durable` one that keeps the duplicate server's guarantee
//! (`appendfsync always`: each write fsync'd before it is answered), both in the same run.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{Limits, Value};
use crawlfleet_core::msg::{
    read_ppdup, Checksum, Message, PpdupChecksum, PpdupRef, PpdupSetConfig,
};
use crawlfleet_net::{
    ConnId, Event, EventLoop, Framing, FramingError, FscmtLengthFraming, Handle, MessageMeta, Next,
};
use crossbeam_channel::RecvTimeoutError;
use hdrhistogram::Histogram;
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
    /// How the event loop cuts this side's answers.
    type Framing: Framing;
    /// A framing for the loop.
    fn framing(&self) -> Self::Framing;
    /// The server.
    fn addr(&self) -> SocketAddr;
    /// The requests of one connection, encoded back to back, and where each one ends.
    fn requests(&self, conn: u64, count: u64) -> (Vec<u8>, Vec<usize>);
    /// What a new connection sends first, whose one answer must arrive before the load starts.
    fn hello(&self) -> Option<Vec<u8>>;
    /// Reads one answer: the message the framing cut (for FSCMT, the frame body).
    fn answer(&self, msg: &[u8]) -> Result<Answer, BenchError>;
}

struct Dup<'a> {
    args: &'a BenchDupArgs,
    collection: &'static [u8],
}

impl Protocol for Dup<'_> {
    // The answers are decoded here anyway: the loop only cuts frames by their length header.
    type Framing = FscmtLengthFraming;

    fn framing(&self) -> FscmtLengthFraming {
        FscmtLengthFraming::default()
    }

    fn addr(&self) -> SocketAddr {
        self.args.target
    }

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

    /// PPDUP_SET_CONFIG for the collection; the PPDUP_CONFIG_ACK answers it.
    fn hello(&self) -> Option<Vec<u8>> {
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
        Some(out)
    }

    fn answer(&self, body: &[u8]) -> Result<Answer, BenchError> {
        add_answer(body)
    }
}

/// Reads one of the duplicate server's answers (a frame body).
fn add_answer(body: &[u8]) -> Result<Answer, BenchError> {
    let limits = Limits::default();
    // An answer to an add in the canonical layout (every one from a crawlfleet server) is
    // read borrowed, as far as telling fresh from duplicate: no typed message is built, as
    // the redis side compares its status line and no more. Anything else goes through the
    // general decoder.
    if let Some((_, PpdupRef::AddOk(ok))) = read_ppdup(body, &limits) {
        return Ok(if ok.owner_uri.as_deref() == Some(&ok.uri[..]) {
            Answer::Fresh
        } else {
            Answer::Duplicate
        });
    }
    let (_, m) = frame::decode_message(body, &limits)
        .map_err(|e| BenchError(format!("bad message from the server: {e}")))?;
    Ok(match m {
        Message::PpdupAddOk(ok) if ok.owner_uri.as_deref() == Some(&ok.uri[..]) => Answer::Fresh,
        Message::PpdupAddOk(_) => Answer::Duplicate,
        Message::PpdupError(e) => {
            return Err(BenchError(format!(
                "the server refused an add: {}",
                String::from_utf8_lossy(&e.why)
            )))
        }
        // Keep-alives, promote requests and the PPDUP_CONFIG_ACK are not answers to adds.
        _ => Answer::Other,
    })
}

/// RESP answers as the loop cuts them: one line each (`+OK`, or the nil of SET ... NX).
#[derive(Clone, Debug)]
struct RespLines;

/// The longest answer line accepted.
const MAX_RESP_LINE: usize = 4096;

impl Framing for RespLines {
    fn next(&mut self, buf: &[u8]) -> Result<Next, FramingError> {
        match buf.iter().position(|&b| b == b'\n') {
            Some(end) => Ok(Next::Message(MessageMeta {
                len: end + 1,
                body: 0..end + 1,
                priority: Priority::Normal,
            })),
            None if buf.len() >= MAX_RESP_LINE => Err(FramingError::Oversized {
                len: buf.len(),
                limit: MAX_RESP_LINE,
            }),
            None => Ok(Next::Incomplete {
                needed: buf.len() + 1,
            }),
        }
    }
}

struct Redis<'a> {
    args: &'a BenchDupArgs,
    addr: SocketAddr,
}

impl Protocol for Redis<'_> {
    type Framing = RespLines;

    fn framing(&self) -> RespLines {
        RespLines
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }

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

    fn hello(&self) -> Option<Vec<u8>> {
        None
    }

    fn answer(&self, line: &[u8]) -> Result<Answer, BenchError> {
        match line {
            b"+OK\r\n" => Ok(Answer::Fresh),
            // SET ... NX on an existing key answers a nil bulk string.
            b"$-1\r\n" | b"_\r\n" => Ok(Answer::Duplicate),
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
    /// The loop's connection, once up.
    id: Option<ConnId>,
    requests: Vec<u8>,
    /// Byte offset where each request ends in `requests`.
    ends: Vec<usize>,
    /// Requests that may be sent: the current window's end, or (streaming) the answered ones
    /// plus the pipeline depth.
    limit: usize,
    /// Requests handed to the loop.
    sent: usize,
    /// Requests answered.
    answered: usize,
    /// When requests were handed to the loop: (requests sent by then, time), oldest first,
    /// dropped once answered; a request's latency runs from there to its answer.
    sends: VecDeque<(usize, Instant)>,
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

    /// Hands the requests up to `limit` to the loop.
    fn send(&mut self, handle: &Handle) -> Result<(), BenchError> {
        if self.sent >= self.limit {
            return Ok(());
        }
        let Some(id) = self.id else {
            return Err(BenchError("a connection is not up".into()));
        };
        let from = match self.sent {
            0 => 0,
            n => self.ends[n - 1],
        };
        let bytes = self.requests[from..self.ends[self.limit - 1]].to_vec();
        handle
            .send(id, Priority::Normal, bytes)
            .map_err(|e| BenchError(e.to_string()))?;
        self.sent = self.limit;
        self.sends.push_back((self.sent, Instant::now()));
        Ok(())
    }

    /// Records the latency of `n` answers that arrived at `now`.
    fn answers(&mut self, n: usize, now: Instant, latency: &mut Histogram<u64>) {
        for _ in 0..n {
            while self
                .sends
                .front()
                .is_some_and(|&(sent, _)| sent <= self.answered)
            {
                self.sends.pop_front();
            }
            if let Some(&(_, sent)) = self.sends.front() {
                let _ = latency.record(now.duration_since(sent).as_micros() as u64);
            }
            self.answered += 1;
        }
    }
}

/// How long the run waits for any answer before it gives up.
const SILENCE: Duration = Duration::from_secs(30);

/// Runs `total` requests of `proto` over `connections` connections of one event loop.
fn run_side<P: Protocol>(
    proto: &P,
    connections: usize,
    pipeline: usize,
    flow: Flow,
    total: u64,
) -> Result<Run, BenchError> {
    let per = total / connections as u64;
    let mut conns = Vec::with_capacity(connections);
    for c in 0..connections as u64 {
        let count = if c == 0 {
            total - per * (connections as u64 - 1)
        } else {
            per
        };
        let (requests, ends) = proto.requests(c, count);
        conns.push(Conn {
            id: None,
            requests,
            ends,
            limit: 0,
            sent: 0,
            answered: 0,
            sends: VecDeque::new(),
        });
    }
    let lp = EventLoop::builder()
        .framing(proto.framing())
        .spawn()
        .map_err(|e| BenchError(format!("event loop: {e}")))?;
    let result = drive(
        proto, &lp.handle, &lp.events, &mut conns, pipeline, flow, total,
    );
    let _ = lp.handle.shutdown();
    let _ = lp.join.join();
    result
}

/// Connects every connection, waits for the answers to their hellos, then runs the load.
fn drive<P: Protocol>(
    proto: &P,
    handle: &Handle,
    events: &crossbeam_channel::Receiver<Event>,
    conns: &mut [Conn],
    pipeline: usize,
    flow: Flow,
    total: u64,
) -> Result<Run, BenchError> {
    let next = || match events.recv_timeout(SILENCE) {
        Ok(ev) => Ok(ev),
        Err(RecvTimeoutError::Timeout) => Err(BenchError("no answer for 30 s".into())),
        Err(RecvTimeoutError::Disconnected) => Err(BenchError("the event loop stopped".into())),
    };
    let mut links = HashMap::new();
    for c in 0..conns.len() {
        let link = handle
            .connect(proto.addr())
            .map_err(|e| BenchError(e.to_string()))?;
        links.insert(link, c);
    }
    let mut index: HashMap<ConnId, usize> = HashMap::new();
    let mut ready = 0;
    while ready < conns.len() {
        match next()? {
            Event::Connected { conn, link, .. } => {
                let c = links[&link];
                conns[c].id = Some(conn);
                index.insert(conn, c);
                match proto.hello() {
                    Some(hello) => handle
                        .send(conn, Priority::Normal, hello)
                        .map_err(|e| BenchError(e.to_string()))?,
                    None => ready += 1,
                }
            }
            Event::Frames(batch) => {
                for (_, msg) in batch.iter() {
                    proto.answer(msg)?;
                }
                ready += 1;
            }
            other => return Err(closed(proto, other)),
        }
    }
    let mut latency = histogram()?;
    let mut duplicates = 0;
    let started = Instant::now();
    let mut running = 0;
    for conn in conns.iter_mut() {
        if !conn.done() {
            conn.advance(pipeline, flow);
            conn.send(handle)?;
            running += 1;
        }
    }
    while running > 0 {
        let batch = match next()? {
            Event::Frames(batch) => batch,
            Event::Timer(_) => continue,
            other => return Err(closed(proto, other)),
        };
        let Some(conn) = index.get(&batch.conn()).map(|&c| &mut conns[c]) else {
            continue;
        };
        if conn.done() {
            continue;
        }
        let now = Instant::now();
        let mut answered = 0;
        for (_, msg) in batch.iter() {
            match proto.answer(msg)? {
                Answer::Fresh => answered += 1,
                Answer::Duplicate => {
                    answered += 1;
                    duplicates += 1;
                }
                Answer::Other => {}
            }
        }
        if conn.answered + answered > conn.sent {
            return Err(BenchError("more answers than requests".into()));
        }
        conn.answers(answered, now, &mut latency);
        if conn.done() {
            running -= 1;
        } else if answered > 0 {
            conn.advance(pipeline, flow);
            conn.send(handle)?;
        }
    }
    Ok(Run {
        ops: total,
        elapsed: started.elapsed(),
        latency,
        duplicates,
    })
}

/// The error for an event that ends the run: a connection closed or that could not be made.
fn closed<P: Protocol>(proto: &P, ev: Event) -> BenchError {
    match ev {
        Event::Closed { reason, .. } => {
            BenchError(format!("{}: connection closed: {reason}", proto.addr()))
        }
        Event::ConnectFailed { error, .. } => {
            BenchError(format!("connecting to {}: {error}", proto.addr()))
        }
        other => BenchError(format!("unexpected event {other:?}")),
    }
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
    // Each redis-server gets the same requests, connections, pipeline and flow.
    let redis = |addr: Option<SocketAddr>| {
        addr.map(|addr| {
            run_side(
                &Redis { args, addr },
                connections,
                pipeline,
                args.flow,
                args.total,
            )
        })
        .transpose()
    };
    let peer = redis(args.vs_redis)?;
    let durable = redis(args.vs_redis_durable)?;
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
    if let Some(p) = &durable {
        out["durable_peer"] = json!("redis SET NX, appendfsync always");
        out["durable_peer_rate"] = json!(p.rate());
        out["durable_peer_p50_us"] = json!(p.latency.value_at_quantile(0.5));
        out["durable_peer_p99_us"] = json!(p.latency.value_at_quantile(0.99));
        out["durable_peer_duplicates"] = json!(p.duplicates);
        out["ratio_durable"] = json!(dup.rate() / p.rate());
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
    print_server("crawlfleet", "adds", &dup, "");
    if let Some(p) = &peer {
        print_server("redis SET NX", "sets", p, "");
        println!("  ratio           {:>12.2}", dup.rate() / p.rate());
    }
    if let Some(p) = &durable {
        print_server("redis fsync'd", "sets", p, "; appendfsync always");
        println!("  ratio durable   {:>12.2}", dup.rate() / p.rate());
    }
    Ok(())
}

/// One server's line of the text report: its rate in `unit`s per second, latency quantiles
/// and duplicates, with `note` after the duplicates.
fn print_server(name: &str, unit: &str, run: &Run, note: &str) {
    println!(
        "  {name:<16}{:>12.0} {unit}/s   p50 {:>6} us   p99 {:>6} us   ({} duplicates{note})",
        run.rate(),
        run.latency.value_at_quantile(0.5),
        run.latency.value_at_quantile(0.99),
        run.duplicates
    );
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use crawlfleet_core::msg::{PpdupAddOk, PpdupError};

    use super::*;

    /// The body of the frame carrying `m`, as the general encoder writes it.
    fn body_of(m: &Message<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        frame::encode_message(m, Priority::Normal, &mut out);
        let (body, _) = frame::split(&out, &Limits::default()).unwrap().unwrap();
        body.to_vec()
    }

    /// The slow path: the typed decode the borrowed read stands in for.
    fn typed(body: &[u8]) -> Option<bool> {
        match frame::decode_message(body, &Limits::default()).ok()?.1 {
            Message::PpdupAddOk(ok) => Some(ok.owner_uri.as_deref() == Some(&ok.uri[..])),
            _ => None,
        }
    }

    fn ok(uri: &str, owner: Option<&str>, replica: bool) -> Message<'static> {
        let b = |s: &str| Cow::Owned(s.as_bytes().to_vec());
        Message::PpdupAddOk(PpdupAddOk {
            collection: b("bench"),
            node_id: b("bench-0"),
            uri: b(uri),
            owner_uri: owner.map(b),
            ppdup_id: replica.then(|| b("dup-1")),
            dbname: replica.then(|| b("/data/bench")),
        })
    }

    #[test]
    fn answers_are_told_fresh_or_duplicate_as_the_typed_decode_tells_them() {
        let mut rng = fastrand::Rng::with_seed(7);
        for i in 0..500 {
            let uri = uri(rng.u64(0..4), i);
            let owner = match rng.u8(0..3) {
                0 => None,
                1 => Some(uri.clone()),
                _ => Some(format!("{uri}x")),
            };
            let body = body_of(&ok(&uri, owner.as_deref(), rng.bool()));
            let fresh = typed(&body).expect("a PPDUP_ADD_OK");
            let got = add_answer(&body).unwrap();
            assert_eq!(matches!(got, Answer::Fresh), fresh, "{owner:?} for {uri}");
            assert!(!matches!(got, Answer::Other));
            assert_eq!(!fresh, matches!(got, Answer::Duplicate));
        }
    }

    #[test]
    fn other_layouts_errors_and_other_messages_go_through_the_general_decoder() {
        // The same PPDUP_ADD_OK with its keys in reverse order: not the canonical layout, still
        // a valid frame (MS-FSCMT 2.2.1 does not order a dict's keys).
        let m = ok("http://a/", Some("http://b/"), false);
        let mut dict = m.to_dict();
        dict.reverse();
        let mut out = Vec::new();
        frame::encode_dict(&dict, Priority::Normal, &mut out);
        let (body, _) = frame::split(&out, &Limits::default()).unwrap().unwrap();
        assert!(read_ppdup(body, &Limits::default()).is_none());
        assert!(matches!(add_answer(body), Ok(Answer::Duplicate)));
        let refused = Message::PpdupError(PpdupError {
            collection: Cow::Borrowed(b"bench"),
            why: Cow::Borrowed(b"unknown collection"),
        });
        let e = add_answer(&body_of(&refused)).err().expect("an error");
        assert!(e.0.contains("unknown collection"), "{}", e.0);
        assert!(matches!(
            add_answer(&body_of(&Message::PpdupKeepalive)),
            Ok(Answer::Other)
        ));
        assert!(add_answer(b"not a frame").is_err());
    }
}
