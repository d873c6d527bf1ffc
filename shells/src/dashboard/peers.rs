//! The other roles the dashboard shows (the duplicate server, its replica, the link store),
//! read from their `/metrics` by a thread every [`SAMPLE_EVERY`]: a few figures each, and the
//! rates of its counters between two readings.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::metrics::parse;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::admin::server::SAMPLE_EVERY;

/// The figures shown: metric (summed over its labels), label on the dashboard, and whether
/// its rate per second is shown too.
const FIGURES: [(&str, &str, bool); 8] = [
    ("crawlfleet_dupserver_entries", "entries", false),
    ("crawlfleet_dupserver_adds_total", "adds", true),
    ("crawlfleet_dupserver_removes_total", "removes", false),
    (
        "crawlfleet_dupserver_replica_connected",
        "replica connected",
        false,
    ),
    (
        "crawlfleet_dupserver_replica_lag_messages",
        "replica lag (messages)",
        false,
    ),
    ("crawlfleet_linkstore_batches_total", "batches", true),
    ("crawlfleet_linkstore_lines_total", "lines", true),
    ("crawlfleet_linkstore_failed_total", "failed", false),
];

/// Limit on one reading.
const TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, Default)]
struct Reading {
    up: bool,
    /// Label -> value.
    figures: Vec<(String, f64)>,
    at: Option<Instant>,
}

/// The peers' last readings, shared with the thread that takes them.
pub struct Peers {
    list: Vec<(String, SocketAddr)>,
    readings: Arc<Mutex<Vec<Reading>>>,
}

/// `GET /metrics` at `addr`: the body.
fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.take(16 << 20).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(std::io::Error::other("not a 200 answer")),
    }
}

fn read(addr: SocketAddr, before: &Reading) -> Reading {
    let Ok(text) = scrape(addr) else {
        return Reading::default();
    };
    let now = Instant::now();
    let samples = parse(&text);
    let mut figures = Vec::new();
    for (metric, label, rate) in FIGURES {
        let mut found = samples.iter().filter(|s| s.name == metric).peekable();
        if found.peek().is_none() {
            continue;
        }
        let v: f64 = found.map(|s| s.value).sum();
        figures.push((label.to_string(), v));
        if rate {
            let old = before.figures.iter().find(|(l, _)| l == label);
            if let (Some((_, old)), Some(at)) = (old, before.at) {
                let dt = now.duration_since(at).as_secs_f64().max(0.001);
                figures.push((format!("{label}/s"), (v - old).max(0.0) / dt));
            }
        }
    }
    Reading {
        up: true,
        figures,
        at: Some(now),
    }
}

impl Peers {
    /// Starts reading `list` (name, `/metrics` address) every [`SAMPLE_EVERY`].
    pub fn start(list: Vec<(String, SocketAddr)>) -> Result<Peers, String> {
        let readings = Arc::new(Mutex::new(vec![Reading::default(); list.len()]));
        // The thread stops once the readings are dropped with the role.
        let (shared, addrs) = (Arc::downgrade(&readings), list.clone());
        std::thread::Builder::new()
            .name("dashboard-peers".into())
            .spawn(move || loop {
                for (i, (_, addr)) in addrs.iter().enumerate() {
                    let Some(before) = shared.upgrade().map(|s| s.lock()[i].clone()) else {
                        return;
                    };
                    let r = read(*addr, &before);
                    let Some(s) = shared.upgrade() else { return };
                    s.lock()[i] = r;
                }
                std::thread::sleep(SAMPLE_EVERY);
            })
            .map_err(|e| format!("cannot start the dashboard's reader: {e}"))?;
        Ok(Peers { list, readings })
    }

    /// The readings as the dashboard's JSON shows them.
    pub fn json(&self) -> Vec<Value> {
        let readings = self.readings.lock();
        self.list
            .iter()
            .zip(readings.iter())
            .map(|((name, addr), r)| {
                let figures: serde_json::Map<String, Value> = r
                    .figures
                    .iter()
                    .map(|(k, v)| (k.clone(), json!(v)))
                    .collect();
                json!({ "name": name, "addr": addr.to_string(), "up": r.up, "figures": figures })
            })
            .collect()
    }
}

/// Reads a `--dashboard-peer` value: `NAME=HOST:PORT`.
pub fn parse_peer(s: &str) -> Result<(String, SocketAddr), String> {
    let (name, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=HOST:PORT"))?;
    let addr = addr
        .parse()
        .map_err(|e| format!("{s:?}: {addr:?} is not an address: {e}"))?;
    Ok((name.to_string(), addr))
}
