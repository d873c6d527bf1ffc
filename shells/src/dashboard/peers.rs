//! The other roles the dashboard shows (the duplicate server, its replica, the link store, the
//! content distributors), read from their `/metrics` by a thread every [`SAMPLE_EVERY`]: a few
//! figures each, and the rates of its counters between two readings. A peer whose metrics
//! hold `crawlfleet_distributor_info` is a content distributor: its part in the election
//! (master, backup) is read from that family's `election` label.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::metrics::parse;
use parking_lot::Mutex;
use serde_json::{json, Value};

use crate::admin::server::SAMPLE_EVERY;

/// A figure shown: metric (summed over its samples, or only the sample with the given label),
/// label on the dashboard, and whether its rate per second is shown too.
type Figure = (
    &'static str,
    Option<(&'static str, &'static str)>,
    &'static str,
    bool,
);

/// The figures shown.
const FIGURES: [Figure; 14] = [
    ("crawlfleet_dupserver_entries", None, "entries", false),
    ("crawlfleet_dupserver_adds_total", None, "adds", true),
    ("crawlfleet_dupserver_removes_total", None, "removes", false),
    (
        "crawlfleet_dupserver_replica_connected",
        None,
        "replica connected",
        false,
    ),
    (
        "crawlfleet_dupserver_replica_lag_messages",
        None,
        "replica lag (messages)",
        false,
    ),
    (
        "crawlfleet_dupserver_replica_lag_seconds",
        None,
        "replica lag (s)",
        false,
    ),
    ("crawlfleet_linkstore_batches_total", None, "batches", true),
    ("crawlfleet_linkstore_lines_total", None, "lines", true),
    ("crawlfleet_linkstore_failed_total", None, "failed", false),
    ("crawlfleet_distributor_sessions", None, "sessions", false),
    ("crawlfleet_distributor_documents", None, "documents", true),
    (
        "crawlfleet_distributor_operations_total",
        None,
        "operations",
        true,
    ),
    ("crawlfleet_distributor_load", None, "load", false),
    (
        "crawlfleet_open_connections",
        Some(("loop", "distributor-loop")),
        "connections",
        false,
    ),
];

/// Limit on one reading.
const TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Clone, Debug, Default)]
struct Reading {
    up: bool,
    /// Label -> value.
    figures: Vec<(String, f64)>,
    at: Option<Instant>,
    /// A content distributor (kept while it is unreachable): its part in the election when
    /// last read.
    distributor: Option<String>,
}

/// The peers' last readings, shared with the thread that takes them.
pub struct Peers {
    list: Vec<(String, SocketAddr)>,
    readings: Arc<Mutex<Vec<Reading>>>,
}

/// `GET /metrics` at `addr`: the body.
fn scrape(addr: SocketAddr, token: Option<&str>) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.take(16 << 20).read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    match text.split_once("\r\n\r\n") {
        Some((head, body)) if head.starts_with("HTTP/1.1 200") => Ok(body.to_string()),
        _ => Err(std::io::Error::other("not a 200 answer")),
    }
}

fn read(addr: SocketAddr, token: Option<&str>, before: &Reading) -> Reading {
    let Ok(text) = scrape(addr, token) else {
        return Reading {
            distributor: before.distributor.as_ref().map(|_| "unknown".into()),
            ..Reading::default()
        };
    };
    let now = Instant::now();
    let samples = parse(&text);
    let mut figures = Vec::new();
    for (metric, only, label, rate) in FIGURES {
        let mut found = samples
            .iter()
            .filter(|s| s.name == metric && only.is_none_or(|(k, v)| s.label(k) == Some(v)))
            .peekable();
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
    let distributor = samples
        .iter()
        .find(|s| s.name == "crawlfleet_distributor_info")
        .map(|s| s.label("election").unwrap_or("unknown").to_string());
    Reading {
        up: true,
        figures,
        at: Some(now),
        distributor,
    }
}

impl Peers {
    /// Starts reading `list` (name, `/metrics` address) every [`SAMPLE_EVERY`].
    /// `token`: the one sent to each (`Authorization: Bearer`; the port's own, which `up`
    /// gives every role).
    pub fn start(list: Vec<(String, SocketAddr)>, token: Option<String>) -> Result<Peers, String> {
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
                    let r = read(*addr, token.as_deref(), &before);
                    let Some(s) = shared.upgrade() else { return };
                    s.lock()[i] = r;
                }
                std::thread::sleep(SAMPLE_EVERY);
            })
            .map_err(|e| format!("cannot start the dashboard's reader: {e}"))?;
        Ok(Peers { list, readings })
    }

    /// The readings as the dashboard's JSON shows them: the content distributors (with their
    /// `election`), and the other peers.
    pub fn json(&self) -> (Vec<Value>, Vec<Value>) {
        let readings = self.readings.lock();
        let (distributors, others): (Vec<_>, Vec<_>) = self
            .list
            .iter()
            .zip(readings.iter())
            .partition(|(_, r)| r.distributor.is_some());
        let show = |((name, addr), r): (&(String, SocketAddr), &Reading)| {
            let figures: serde_json::Map<String, Value> = r
                .figures
                .iter()
                .map(|(k, v)| (k.clone(), json!(v)))
                .collect();
            json!({
                "name": name,
                "addr": addr.to_string(),
                "up": r.up,
                "election": r.distributor,
                "figures": figures,
            })
        };
        (
            distributors.into_iter().map(show).collect(),
            others.into_iter().map(show).collect(),
        )
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
