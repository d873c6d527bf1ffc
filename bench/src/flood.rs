//! `crawlfleet bench flood`: what a hostile client costs a running role, against the limits every
//! port keeps (DESIGN.md "Limits every port keeps"): the role's peak resident memory, sampled
//! from /proc/PID/status, and the round trips of a well-behaved client meanwhile.
//!
//! The loads:
//! - `ppdup-add`: pipelined PPDUP_ADD (MS-FSCMT 2.2.5.1) on each flooding connection, whose
//!   answers are never read;
//! - `xmlrpc`: pipelined XML-RPC calls (CollectionGetList, MS-FSCADM 2.1) whose answers are never
//!   read;
//! - `partial-fscmt`, `partial-http`, `partial-wasdr`: each connection announces a message of
//!   `--frame-mib` MiB (an FSCMT length header, an HTTP Content-Length, a marshal string's
//!   declared length) and sends all of it but the last MiB, then holds the connection.
//!
//! Writes are non-blocking and resume where they stopped, so a flooding connection stays one
//! well-formed byte stream however long the role leaves it unread. The well-behaved client (the
//! probe) makes one round trip at a time for the whole flood: PPDUP_ADD after a
//! PPDUP_SET_CONFIG, a CollectionGetList call, or a one-document link store message
//! (MS-FSWASDR 2.2.1, answered `ack`).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::{Limits, Value};
use crawlfleet_core::msg::{Checksum, Message, PpdupChecksum, PpdupSetConfig};
use hdrhistogram::Histogram;
use serde_json::json;

use crate::cli::{BenchFloodArgs, FloodLoad, FloodProbe};
use crate::BenchError;

/// The XML-RPC call the `xmlrpc` load and probe make: it reads state and changes nothing.
const LIST: &str = "<?xml version='1.0'?><methodCall><methodName>CollectionGetList</methodName>\
                    <params></params></methodCall>";

/// The collection the PPDUP_ADD load and probe configure and add to.
const COLLECTION: &[u8] = b"flood";

/// Requests encoded per write window of the pipelined loads.
const WINDOW: u64 = 1000;

/// A field of /proc/PID/status in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

fn http_post(body: &str) -> Vec<u8> {
    format!(
        "POST /RPC2 HTTP/1.1\r\nHost: bench\r\nContent-Type: text/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn add(node: &[u8], i: u64) -> Message<'static> {
    let mut c = [0xa5u8; 16];
    c[..8].copy_from_slice(&i.to_le_bytes());
    c[8..12].copy_from_slice(&(node.len() as u32 ^ 0x5eed).to_le_bytes());
    Message::PpdupAdd(PpdupChecksum {
        collection: COLLECTION.into(),
        node_id: node.to_vec().into(),
        uri: format!("http://{}.example/{i}", String::from_utf8_lossy(node))
            .into_bytes()
            .into(),
        checksum: Checksum(c),
        ppdup_id: None,
        dbname: None,
    })
}

fn set_config() -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_message(
        &Message::PpdupSetConfig(PpdupSetConfig {
            config: Value::Dict(vec![(Value::bytes(COLLECTION), Value::Dict(vec![]))]),
            vclock: 1,
            collection: None,
        }),
        Priority::Normal,
        &mut out,
    );
    out
}

/// What one flooding connection did.
#[derive(Default)]
struct Flooded {
    /// Whole requests written (pipelined loads) or bytes of the partial message written.
    sent: u64,
    /// The role closed the connection (or reset it).
    closed: bool,
}

/// Writes `buf` from `*pos` on a non-blocking stream until it is all written, `until` passes or
/// the peer closes; Ok(false) when the deadline stopped it.
fn write_until(s: &mut TcpStream, buf: &[u8], pos: &mut usize, until: Instant) -> io::Result<bool> {
    while *pos < buf.len() {
        match s.write(&buf[*pos..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => *pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= until {
                    return Ok(false);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Whether the peer closed a non-blocking stream whose input nobody reads otherwise.
fn peer_closed(s: &mut TcpStream) -> bool {
    let mut scratch = [0u8; 4096];
    loop {
        match s.read(&mut scratch) {
            Ok(0) => return true,
            Ok(_) => {} // an answer (an HTTP 413, say): read on
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// A flooding connection: non-blocking, so its writes stop where the role stopped reading.
fn connect_flood(addr: SocketAddr) -> Option<TcpStream> {
    let s = TcpStream::connect(addr).ok()?;
    s.set_nonblocking(true).ok()?;
    Some(s)
}

/// A pipelined flood: windows of requests written back to back until `until`, answers never
/// read. Returns the stream (kept open until the memory is sampled) and what was written.
fn pipelined(
    addr: SocketAddr,
    load: FloodLoad,
    conn: usize,
    until: Instant,
) -> (Option<TcpStream>, Flooded) {
    let mut done = Flooded::default();
    let Some(mut s) = connect_flood(addr) else {
        done.closed = true;
        return (None, done);
    };
    let node = format!("flood-{conn}").into_bytes();
    // `pending` requests are in `buf`, written from `pos` on.
    let (mut buf, mut pos, mut i, mut pending) = (Vec::new(), 0usize, 0u64, 0u64);
    if load == FloodLoad::PpdupAdd {
        buf = set_config();
    }
    let post = http_post(LIST);
    loop {
        match write_until(&mut s, &buf, &mut pos, until) {
            Ok(true) => done.sent += pending,
            Ok(false) => break,
            Err(_) => {
                done.closed = true;
                break;
            }
        }
        if Instant::now() >= until {
            break;
        }
        buf.clear();
        pos = 0;
        for _ in 0..WINDOW {
            match load {
                FloodLoad::PpdupAdd => {
                    frame::encode_message(&add(&node, i), Priority::Normal, &mut buf)
                }
                _ => buf.extend_from_slice(&post),
            }
            i += 1;
        }
        pending = WINDOW;
    }
    (Some(s), done)
}

/// The head of a partial message announcing `len` bytes in `load`'s framing.
fn partial_head(load: FloodLoad, len: u64) -> Vec<u8> {
    match load {
        // MS-FSCMT 2.2.1: a 4-byte big-endian length, then the body.
        FloodLoad::PartialFscmt => (len as u32).to_be_bytes().to_vec(),
        FloodLoad::PartialHttp => format!(
            "POST /RPC2 HTTP/1.1\r\nHost: bench\r\nContent-Type: text/xml\r\nContent-Length: {len}\r\n\r\n"
        )
        .into_bytes(),
        // MS-FSWASDR 2.2.1: marshal data up to the terminator; here a string (type `s`, 4-byte
        // little-endian length) whose bytes keep coming.
        _ => {
            let mut h = b"s".to_vec();
            h.extend_from_slice(&(len.saturating_sub(5) as u32).to_le_bytes());
            h
        }
    }
}

/// One connection holding a partial message until `until`: all of it but the last MiB is
/// written (or as much as the role reads before then), and the connection is kept open.
fn partial(
    addr: SocketAddr,
    load: FloodLoad,
    frame: u64,
    until: Instant,
) -> (Option<TcpStream>, Flooded) {
    let mut done = Flooded::default();
    let Some(mut s) = connect_flood(addr) else {
        done.closed = true;
        return (None, done);
    };
    let target = frame.saturating_sub(1 << 20).max(frame / 2);
    let head = partial_head(load, frame);
    let chunk = vec![b' '; 1 << 20];
    let mut pos = 0;
    let mut ok = matches!(write_until(&mut s, &head, &mut pos, until), Ok(true));
    while ok && done.sent < target {
        let n = chunk.len().min((target - done.sent) as usize);
        pos = 0;
        match write_until(&mut s, &chunk[..n], &mut pos, until) {
            Ok(true) => done.sent += n as u64,
            Ok(false) => {
                done.sent += pos as u64;
                break;
            }
            Err(_) => {
                done.sent += pos as u64;
                ok = false;
            }
        }
    }
    // Hold it, noticing a close by the role.
    while ok && Instant::now() < until {
        if peer_closed(&mut s) {
            ok = false;
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    done.closed = !ok || peer_closed(&mut s);
    (Some(s), done)
}

/// The well-behaved client's round trips, in microseconds.
struct ProbeRun {
    latency: Histogram<u64>,
    failure: Option<String>,
}

/// One blocking connection of the probe.
struct ProbeConn {
    s: TcpStream,
    r: BufReader<TcpStream>,
}

impl ProbeConn {
    fn connect(addr: SocketAddr) -> io::Result<ProbeConn> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.set_write_timeout(Some(Duration::from_secs(10)))?;
        s.set_nodelay(true)?;
        Ok(ProbeConn {
            r: BufReader::new(s.try_clone()?),
            s,
        })
    }

    /// The next FSCMT message's body.
    fn frame(&mut self) -> io::Result<Vec<u8>> {
        let mut head = [0u8; 4];
        self.r.read_exact(&mut head)?;
        let mut body = vec![0u8; u32::from_be_bytes(head) as usize];
        self.r.read_exact(&mut body)?;
        Ok(body)
    }

    /// Reads FSCMT messages until `want` accepts one.
    fn until_message(&mut self, want: fn(&Message<'_>) -> bool) -> Result<(), String> {
        loop {
            let body = self.frame().map_err(|e| e.to_string())?;
            let (_, m) =
                frame::decode_message(&body, &Limits::default()).map_err(|e| e.to_string())?;
            if want(&m) {
                return Ok(());
            }
            if let Message::PpdupError(e) = m {
                return Err(format!("PPDUP_ERROR: {}", String::from_utf8_lossy(&e.why)));
            }
        }
    }

    /// One HTTP response; an error unless it is 200.
    fn http_response(&mut self) -> Result<(), String> {
        let (mut status, mut len) = (String::new(), 0usize);
        self.r.read_line(&mut status).map_err(|e| e.to_string())?;
        loop {
            let mut line = String::new();
            if self.r.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err("connection closed".into());
            }
            if line.trim().is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v
                        .trim()
                        .parse()
                        .map_err(|_| format!("bad header {line:?}"))?;
                }
            }
        }
        let mut body = vec![0u8; len];
        self.r.read_exact(&mut body).map_err(|e| e.to_string())?;
        if !status.starts_with("HTTP/1.1 200") {
            return Err(format!("answered {}", status.trim()));
        }
        Ok(())
    }
}

/// The probe: one round trip at a time from `start` until `until`.
fn probe(kind: FloodProbe, addr: SocketAddr, start: Instant, until: Instant) -> ProbeRun {
    let mut run = ProbeRun {
        latency: Histogram::new(3).expect("3 significant digits are allowed"),
        failure: None,
    };
    if kind == FloodProbe::None {
        return run;
    }
    let mut c = match ProbeConn::connect(addr) {
        Ok(c) => c,
        Err(e) => {
            run.failure = Some(format!("cannot connect: {e}"));
            return run;
        }
    };
    let link = {
        let mut b = crawlfleet_core::links::WebAnalyzerBatch::default();
        b.no_links(b"http://probe.example/", 1244208852)
            .expect("a valid document");
        crawlfleet_core::links::Message::webanalyzer(b"flood", &b).to_wire()
    };
    if kind == FloodProbe::Ppdup {
        let hello = set_config();
        if let Err(e) =
            c.s.write_all(&hello)
                .map_err(|e| e.to_string())
                .and_then(|()| c.until_message(|m| matches!(m, Message::PpdupConfigAck(_))))
        {
            run.failure = Some(e);
            return run;
        }
    }
    std::thread::sleep(start.saturating_duration_since(Instant::now()));
    let post = http_post(LIST);
    let mut i = 0u64;
    while Instant::now() < until {
        let t = Instant::now();
        let result = match kind {
            FloodProbe::Ppdup => {
                let mut wire = Vec::new();
                frame::encode_message(&add(b"probe", i), Priority::Normal, &mut wire);
                c.s.write_all(&wire)
                    .map_err(|e| e.to_string())
                    .and_then(|()| c.until_message(|m| matches!(m, Message::PpdupAddOk(_))))
            }
            FloodProbe::Xmlrpc => {
                c.s.write_all(&post)
                    .map_err(|e| e.to_string())
                    .and_then(|()| c.http_response())
            }
            _ => {
                c.s.write_all(&link)
                    .map_err(|e| e.to_string())
                    .and_then(|()| {
                        let mut a = String::new();
                        c.r.read_line(&mut a).map_err(|e| e.to_string())?;
                        if a == "ack\n" {
                            Ok(())
                        } else {
                            Err(format!("answered {a:?}"))
                        }
                    })
            }
        };
        if let Err(e) = result {
            run.failure = Some(format!("round trip {i}: {e}"));
            return run;
        }
        let us = t.elapsed().as_micros() as u64;
        let _ = run.latency.record(us.max(1));
        i += 1;
    }
    run
}

/// Samples the role's VmRSS every 10 ms until stopped; the thread returns the largest.
fn sampler(pid: u32, stop: Arc<AtomicBool>, last: Arc<AtomicU64>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(Ordering::Relaxed) {
            if let Some(rss) = status_bytes(pid, "VmRSS") {
                peak = peak.max(rss);
                last.store(rss, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        peak
    })
}

/// The probe that suits a load.
fn auto_probe(load: FloodLoad) -> FloodProbe {
    match load {
        FloodLoad::PpdupAdd | FloodLoad::PartialFscmt => FloodProbe::Ppdup,
        FloodLoad::Xmlrpc | FloodLoad::PartialHttp => FloodProbe::Xmlrpc,
        FloodLoad::PartialWasdr => FloodProbe::Wasdr,
    }
}

/// Runs `crawlfleet bench flood`.
pub fn run(args: &BenchFloodArgs) -> Result<(), BenchError> {
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let partial_load = !matches!(args.load, FloodLoad::PpdupAdd | FloodLoad::Xmlrpc);
    let connections = args
        .connections
        .unwrap_or(if partial_load { 32 } else { 1 });
    let probe_kind = match args.probe {
        FloodProbe::Auto => auto_probe(args.load),
        p => p,
    };
    let probe_addr = args.probe_target.unwrap_or(args.target);
    let frame_bytes = u64::from(args.frame_mib) << 20;
    if frame_bytes > u64::from(u32::MAX) {
        return Err(BenchError("--frame-mib: a length header is 32 bits".into()));
    }
    let before = status_bytes(args.pid, "VmRSS")
        .ok_or_else(|| BenchError(format!("no /proc/{}/status: is --pid the role?", args.pid)))?;

    let stop = Arc::new(AtomicBool::new(false));
    let last = Arc::new(AtomicU64::new(before));
    let sampling = sampler(args.pid, stop.clone(), last.clone());
    let start = Instant::now() + Duration::from_millis(200);
    let until = start + Duration::from_secs_f64(args.seconds);
    let prober = std::thread::spawn(move || probe(probe_kind, probe_addr, start, until));
    let (load, target) = (args.load, args.target);
    let flooders: Vec<_> = (0..connections)
        .map(|conn| {
            std::thread::spawn(move || {
                std::thread::sleep(start.saturating_duration_since(Instant::now()));
                if partial_load {
                    partial(target, load, frame_bytes, until)
                } else {
                    pipelined(target, load, conn, until)
                }
            })
        })
        .collect();
    let flooded: Vec<_> = flooders
        .into_iter()
        .map(|f| {
            f.join()
                .map_err(|_| BenchError("a flooding thread panicked".into()))
        })
        .collect::<Result<_, _>>()?;
    let probed = prober
        .join()
        .map_err(|_| BenchError("the probe panicked".into()))?;
    // The flooding connections are still open: the memory they hold is counted.
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let peak = sampling
        .join()
        .map_err(|_| BenchError("the sampler panicked".into()))?;
    let after = last.load(Ordering::Relaxed);
    let hwm = status_bytes(args.pid, "VmHWM").unwrap_or(0);
    let sent: u64 = flooded.iter().map(|(_, f)| f.sent).sum();
    let closed = flooded.iter().filter(|(_, f)| f.closed).count();
    let lat = &probed.latency;
    let round_trips = lat.len();
    let pct = |q: f64| {
        if round_trips == 0 {
            0
        } else {
            lat.value_at_quantile(q)
        }
    };

    if args.json {
        println!(
            "{}",
            json!({
                "load": args.load.name(),
                "seconds": args.seconds,
                "connections": connections,
                "sent": sent,
                "sent_unit": if partial_load { "bytes" } else { "requests" },
                "closed": closed,
                "rss_before_mb": mb(before),
                "rss_peak_mb": mb(peak),
                "rss_after_mb": mb(after),
                "hwm_mb": mb(hwm),
                "probe": probe_kind.name(),
                "round_trips": round_trips,
                "p50_us": pct(0.5),
                "p99_us": pct(0.99),
                "max_us": if round_trips == 0 { 0 } else { lat.max() },
                "probe_failure": probed.failure,
            })
        );
    } else {
        let unit = if partial_load { "bytes" } else { "requests" };
        println!(
            "{}: {connections} connections for {:.1} s, {sent} {unit} written, {closed} closed by the role",
            args.load.name(),
            args.seconds
        );
        println!(
            "role memory: {:.1} MB before, peak {:.1} MB resident (VmHWM {:.1} MB), {:.1} MB at the end",
            mb(before),
            mb(peak),
            mb(hwm),
            mb(after)
        );
        if probe_kind != FloodProbe::None {
            println!(
                "{} probe: {round_trips} round trips, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                probe_kind.name(),
                pct(0.5) as f64 / 1000.0,
                pct(0.99) as f64 / 1000.0,
                if round_trips == 0 {
                    0.0
                } else {
                    lat.max() as f64 / 1000.0
                }
            );
        }
    }
    if let (Some(why), false) = (&probed.failure, args.json) {
        // Reported, not fatal: a role that stops answering is what the run is there to show.
        println!("the well-behaved client failed: {why}");
    }
    Ok(())
}
