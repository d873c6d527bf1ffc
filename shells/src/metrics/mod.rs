//! `GET /metrics` of every role, in the Prometheus text format
//! ([`crawlfleet_core::metrics`]): what each role renders ([`sched`] for the node and
//! multinode schedulers, [`roles`] for the duplicate server, its replica, the link store, the
//! name server and the content distributor, [`rup`] for the RUP server), and what every
//! process adds ([`process`]: resident memory, open file descriptors, and per poll loop its
//! turn latency, open connections and connections opened).
//!
//! The schedulers answer on their administrative port, through the administrative server's one
//! request dispatch ([`crate::admin::server`]); a role without one serves `/metrics` on
//! `--metrics-listen` through the same server ([`serve`]).

pub mod roles;
pub mod rup;
pub mod sched;

use std::net::SocketAddr;
use std::sync::Arc;

use crawlfleet_core::metrics::{Exposition, CONTENT_TYPE};
use crawlfleet_net::http::{self, Request};

use crate::admin::server::{self, Route};

/// The figures every process reports: resident memory, file descriptors, and per poll loop
/// (`loop` label: its thread's name) the seconds its turns take and the connections it holds.
pub fn process(m: &mut Exposition) {
    if let Some(rss) = resident_bytes() {
        m.gauge(
            "crawlfleet_process_resident_memory_bytes",
            "Resident memory of the process.",
            &[],
            rss as f64,
        );
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        m.gauge(
            "crawlfleet_process_open_fds",
            "File descriptors the process holds open.",
            &[],
            fds.count() as f64,
        );
    }
    let loops = crawlfleet_net::loopstats::loops();
    m.declare(
        "crawlfleet_open_connections",
        "Connections each poll loop of the process holds open.",
        crawlfleet_core::metrics::Kind::Gauge,
    );
    for l in &loops {
        m.gauge(
            "crawlfleet_open_connections",
            "Connections each poll loop of the process holds open.",
            &[("loop", &l.name)],
            l.connections() as f64,
        );
    }
    const OPENED: &str = "Connections each poll loop of the process opened or accepted: with \
                          keep-alive, far fewer than the requests or messages they carried.";
    m.declare(
        "crawlfleet_connections_opened_total",
        OPENED,
        crawlfleet_core::metrics::Kind::Counter,
    );
    for l in &loops {
        m.counter(
            "crawlfleet_connections_opened_total",
            OPENED,
            &[("loop", &l.name)],
            l.opened() as f64,
        );
    }
    for l in &loops {
        m.histogram(
            "crawlfleet_event_loop_turn_seconds",
            "Time each turn of a poll loop spends on its events, commands and timers: the \
             latency an event can wait behind.",
            &[("loop", &l.name)],
            &l.turns.snapshot(),
        );
    }
}

/// Resident set size from /proc/self/statm.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok().filter(|p| *p > 0).unwrap_or(4096))
}

/// The `/metrics` answer of a role that renders its figures on any thread.
pub struct MetricsRoute {
    render: Box<dyn Fn(&mut Exposition) + Send + Sync>,
}

impl MetricsRoute {
    /// A route rendering with `render` (the process's figures follow).
    pub fn new(render: impl Fn(&mut Exposition) + Send + Sync + 'static) -> MetricsRoute {
        MetricsRoute {
            render: Box::new(render),
        }
    }

    /// The whole text.
    pub fn text(&self) -> String {
        let mut m = Exposition::new();
        (self.render)(&mut m);
        process(&mut m);
        m.finish()
    }
}

impl Route for MetricsRoute {
    fn answer(&self, req: &Request<'_>, keep_alive: bool) -> Option<Vec<u8>> {
        let path = req.path.split_once('?').map_or(req.path, |(p, _)| p);
        if path != "/metrics" {
            return None;
        }
        let mut out = Vec::new();
        if req.method == "GET" {
            let text = self.text();
            http::write_response(
                &mut out,
                200,
                CONTENT_TYPE,
                &[],
                text.as_bytes(),
                keep_alive,
            );
        } else {
            http::write_response(
                &mut out,
                405,
                "text/plain",
                &[("Allow", "GET")],
                b"GET /metrics\n",
                keep_alive,
            );
        }
        Some(out)
    }
}

/// A running `--metrics-listen` server; it stops when dropped.
pub struct MetricsServer {
    /// The bound address.
    pub addr: SocketAddr,
    _server: server::Server<std::convert::Infallible>,
}

/// Serves `route` at `GET /metrics` on `addr` (`--metrics-listen`), through the
/// administrative server's request dispatch, with the tokens and TLS of `access`.
pub fn serve(
    addr: SocketAddr,
    route: MetricsRoute,
    access: &crate::cli::AdminAccess,
) -> Result<MetricsServer, String> {
    let auth = crate::admin::access(access)?;
    auth.check_listen(addr)?;
    let s = server::spawn_route(addr, Arc::new(route), auth)
        .map_err(|e| format!("cannot listen on {addr} for /metrics: {e}"))?;
    log::info!("metrics on http://{}/metrics", s.addr);
    Ok(MetricsServer {
        addr: s.addr,
        _server: s,
    })
}
