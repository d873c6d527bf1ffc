//! The dashboard at `/` of the administrative port of the multinode scheduler and of a node
//! scheduler: a page, a style sheet and a script embedded in the binary (no CDN; the charts
//! are SVG drawn by the script), and `/api/dashboard`, the JSON the script polls, rendered on
//! the role's loop ([`render`]). The page's controls call the FSCADM methods at `/RPC2`.
//!
//! What the charts show over the last hour comes from [`History`], sampled every
//! [`SAMPLE_EVERY`](crate::admin::server::SAMPLE_EVERY) on the role's loop. The duplicate
//! server, its replica, the link store and the content distributors are shown from their
//! `/metrics`, read by a thread of [`peers`] (`--dashboard-peer NAME=HOST:PORT`; `crawlfleet
//! up` gives its own).

pub mod peers;

use std::collections::{BTreeMap, VecDeque};

use serde_json::{json, Value};

use crate::admin::roles::{is_suspended, status_word, Role};
use crate::admin::Admin;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("dashboard.js");
const STYLE: &str = include_str!("dashboard.css");

/// Samples kept: an hour at one every five seconds.
const KEPT: usize = 720;

/// The file of a dashboard path: content type and bytes.
pub fn asset(path: &str) -> Option<(&'static str, &'static [u8])> {
    match path {
        "/" | "/index.html" => Some(("text/html; charset=utf-8", INDEX.as_bytes())),
        "/dashboard.js" => Some(("text/javascript; charset=utf-8", SCRIPT.as_bytes())),
        "/dashboard.css" => Some(("text/css; charset=utf-8", STYLE.as_bytes())),
        _ => None,
    }
}

/// One sample: when, the running totals of every collection, and per node its pages.
#[derive(Clone, Debug)]
struct Point {
    t: i64,
    pages: f64,
    bytes: f64,
    nodes: BTreeMap<String, f64>,
}

/// What the dashboard remembers between polls: the samples of the last hour and the nodes
/// seen (a node that went away stays in the table, not connected).
#[derive(Debug, Default)]
pub struct History {
    points: VecDeque<Point>,
    nodes_seen: BTreeMap<String, Option<String>>,
}

fn totals(admin: &Admin, role: &dyn Role) -> (f64, f64) {
    let mut pages = 0.0;
    let mut bytes = 0.0;
    for (name, _) in role.collections() {
        if let Some(c) = admin.stats().collection(&name) {
            let life = c.table.lifetime();
            pages += life.num("Downloaded");
            bytes += life.num("ReadNet");
        }
    }
    (pages, bytes)
}

impl History {
    /// Takes a sample (the caller has folded the core's counters in: `Admin::absorb`).
    pub fn sample(&mut self, admin: &Admin, role: &dyn Role, now: i64) {
        let (pages, bytes) = totals(admin, role);
        let mut nodes = BTreeMap::new();
        for n in role.node_rows() {
            nodes.insert(n.id.clone(), n.pages);
            self.nodes_seen.insert(n.id, n.admin);
        }
        self.points.push_back(Point {
            t: now,
            pages,
            bytes,
            nodes,
        });
        while self.points.len() > KEPT {
            self.points.pop_front();
        }
    }

    /// [t, pages/s, bytes/s] between consecutive samples.
    fn rates(&self) -> Vec<Value> {
        let pts: Vec<&Point> = self.points.iter().collect();
        pts.windows(2)
            .map(|w| {
                let dt = (w[1].t - w[0].t).max(1) as f64;
                json!([
                    w[1].t,
                    (w[1].pages - w[0].pages).max(0.0) / dt,
                    (w[1].bytes - w[0].bytes).max(0.0) / dt
                ])
            })
            .collect()
    }

    /// A node's pages/s over the last minute of samples.
    fn node_rate(&self, id: &str) -> f64 {
        let last = self.points.back();
        let first = last.and_then(|l| self.points.iter().find(|p| p.t >= l.t - 60));
        match (first, last) {
            (Some(a), Some(b)) if b.t > a.t => {
                let pa = a.nodes.get(id).copied().unwrap_or(0.0);
                let pb = b.nodes.get(id).copied().unwrap_or(0.0);
                (pb - pa).max(0.0) / (b.t - a.t) as f64
            }
            _ => 0.0,
        }
    }
}

fn histogram(life: &crawlfleet_core::stats::Schema, key: &str) -> Value {
    let mut m = serde_json::Map::new();
    for (k, n) in life.histogram(key).into_iter().flatten() {
        m.insert(k.clone(), json!(n));
    }
    Value::Object(m)
}

/// The JSON of `/api/dashboard`.
pub fn render(admin: &Admin, role: &dyn Role, history: &History, now: i64) -> String {
    let mut collections = Vec::new();
    for (name, state) in role.collections() {
        let coll = String::from_utf8_lossy(&name).into_owned();
        let life = admin
            .stats()
            .collection(&name)
            .map(|c| c.table.lifetime())
            .unwrap_or_else(|| crawlfleet_core::stats::Schema::new("collection", &coll, now));
        let sites = if role.is_multinode() {
            life.num("SumActiveSites")
        } else {
            role.active_sites(&name) as f64
        };
        collections.push(json!({
            "name": coll,
            "status": status_word(state),
            "suspended": is_suspended(state),
            "crawl_mode": role.crawl_mode(&name),
            "queued": role.queued(&name),
            "active_sites": sites,
            "feeding": life.num("Feeding") != 0.0,
            "pages": life.num("Downloaded"),
            "bytes": life.num("ReadNet"),
            "stored": life.num("Stored"),
            "fed": life.num("PPFed"),
            "indexed": life.num("PPSucceeded"),
            "http": histogram(&life, "HTTPResponse"),
            "uri_skips": histogram(&life, "URISkip"),
            "doc_skips": histogram(&life, "DocSkip"),
        }));
    }
    let mut nodes = Vec::new();
    if role.is_multinode() {
        let live: BTreeMap<String, _> = role
            .node_rows()
            .into_iter()
            .map(|n| (n.id.clone(), n))
            .collect();
        for (id, addr) in &history.nodes_seen {
            let n = live.get(id);
            nodes.push(json!({
                "id": id,
                "admin": n.and_then(|n| n.admin.clone()).or_else(|| addr.clone()),
                "connected": n.is_some(),
                "sites": n.map_or(0.0, |n| n.sites),
                "pages": n.map_or(0.0, |n| n.pages),
                "rate": history.node_rate(id),
            }));
        }
    } else {
        let (pages, _) = totals(admin, role);
        let sites: i64 = role
            .collections()
            .iter()
            .map(|(n, _)| role.active_sites(n))
            .sum();
        let rate = history
            .rates()
            .last()
            .and_then(|r| r[1].as_f64())
            .unwrap_or(0.0);
        nodes.push(json!({
            "id": "this node",
            "admin": admin.addr().to_string(),
            "connected": true,
            "sites": sites,
            "pages": pages,
            "rate": rate,
        }));
    }
    let (distributors, peers) = admin.peers().map(|p| p.json()).unwrap_or_default();
    json!({
        "role": if role.is_multinode() { "multinode scheduler" } else { "node scheduler" },
        "addr": admin.addr().to_string(),
        "now": now,
        "collections": collections,
        "history": history.rates(),
        "nodes": nodes,
        "peers": peers,
        "distributors": distributors,
    })
    .to_string()
}
