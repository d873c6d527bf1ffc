//! `/metrics` of the roles other than the schedulers: the duplicate server, its replica and
//! the link store on `--metrics-listen` (each role's thread publishes what it has done into a
//! shared view, which the metrics server renders), and the content distributor on its
//! `--admin` port (from its dispatcher_node state).

use std::collections::BTreeMap;
use std::sync::Arc;

use crawlfleet_core::metrics::{Exposition, Kind};
use parking_lot::Mutex;

use super::MetricsRoute;

/// What a duplicate server or replica has done (published by its thread).
#[derive(Clone, Debug, Default)]
pub struct DupView {
    /// "dupserver" or "dupreplica".
    pub role: &'static str,
    /// PPDUP_ADD messages handled.
    pub adds: u64,
    /// PPDUP_REMOVE messages handled.
    pub removes: u64,
    /// Checksums held, per collection.
    pub entries: BTreeMap<String, u64>,
    /// Bytes in the write-ahead log.
    pub wal_bytes: u64,
    /// A server's replica: connected, and forwarded messages not acknowledged yet.
    pub replica: Option<(bool, usize)>,
    /// When the batch of the oldest forwarded message not acknowledged yet was handled.
    pub replica_oldest: Option<std::time::Instant>,
}

/// A duplicate server's shared view.
pub type SharedDup = Arc<Mutex<DupView>>;

/// The `/metrics` of a duplicate server or replica.
pub fn dup_route(view: SharedDup) -> MetricsRoute {
    MetricsRoute::new(move |m| dup(&view.lock(), m))
}

/// Renders a duplicate server's view.
pub fn dup(v: &DupView, m: &mut Exposition) {
    let role = [("role", v.role)];
    m.counter(
        "crawlfleet_dupserver_adds_total",
        "PPDUP_ADD messages handled (MS-FSCMT 3.3.5.4, 3.4.5.3).",
        &role,
        v.adds as f64,
    );
    m.counter(
        "crawlfleet_dupserver_removes_total",
        "PPDUP_REMOVE messages handled (MS-FSCMT 3.3.5.5, 3.4.5.4).",
        &role,
        v.removes as f64,
    );
    let help = "Checksums held, per collection.";
    m.declare("crawlfleet_dupserver_entries", help, Kind::Gauge);
    for (c, n) in &v.entries {
        m.gauge(
            "crawlfleet_dupserver_entries",
            help,
            &[("role", v.role), ("collection", c)],
            *n as f64,
        );
    }
    m.gauge(
        "crawlfleet_dupserver_log_bytes",
        "Bytes in the checksum store's write-ahead log.",
        &role,
        v.wal_bytes as f64,
    );
    if let Some((connected, pending)) = v.replica {
        m.gauge(
            "crawlfleet_dupserver_replica_connected",
            "1 while the duplicate server is connected to its replica.",
            &role,
            f64::from(u8::from(connected)),
        );
        m.gauge(
            "crawlfleet_dupserver_replica_lag_messages",
            "Checksum messages forwarded to the replica and not acknowledged yet.",
            &role,
            pending as f64,
        );
        let age = v.replica_oldest.map_or(0.0, |t| t.elapsed().as_secs_f64());
        m.gauge(
            "crawlfleet_dupserver_replica_lag_seconds",
            "Age of the oldest checksum message forwarded to the replica and not acknowledged \
             yet (0 when none is pending).",
            &role,
            age,
        );
    }
}

/// What the link store has stored, per application and collection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkCounts {
    /// Data messages (batches) stored.
    pub batches: u64,
    /// Lines in them.
    pub lines: u64,
    /// Message bytes.
    pub bytes: u64,
}

/// What the link store has done (updated by its store thread).
#[derive(Clone, Debug, Default)]
pub struct LinkView {
    /// By (application, collection).
    pub stored: BTreeMap<(String, String), LinkCounts>,
    /// Messages answered `failed`.
    pub failed: u64,
}

/// The link store's shared view.
pub type SharedLinks = Arc<Mutex<LinkView>>;

/// The `/metrics` of the link store.
pub fn link_route(view: SharedLinks) -> MetricsRoute {
    MetricsRoute::new(move |m| links(&view.lock(), m))
}

/// Renders the link store's view.
pub fn links(v: &LinkView, m: &mut Exposition) {
    let families = [
        (
            "crawlfleet_linkstore_batches_total",
            "Data messages (batches) stored and acknowledged (MS-FSWASDR 3.2.5).",
        ),
        (
            "crawlfleet_linkstore_lines_total",
            "Lines of the batches stored.",
        ),
        (
            "crawlfleet_linkstore_received_bytes_total",
            "Bytes of the batches stored.",
        ),
    ];
    for (name, help) in families {
        m.declare(name, help, Kind::Counter);
    }
    for ((app, coll), c) in &v.stored {
        let l = [("application", app.as_str()), ("collection", coll.as_str())];
        for ((name, help), n) in families.iter().zip([c.batches, c.lines, c.bytes]) {
            m.counter(name, help, &l, n as f64);
        }
    }
    m.counter(
        "crawlfleet_linkstore_failed_total",
        "Data messages answered failed (unreadable, unknown application, not stored).",
        &[],
        v.failed as f64,
    );
}

/// Renders a content distributor's state: its part in the election, collections held with
/// their sessions and live documents, and its load (MS-FSCDFT 3.5.4.7).
pub fn distributor(
    node: &crawlfleet_core::distributor::DispatcherNode,
    role: &str,
    m: &mut Exposition,
) {
    let id = node.node_id().to_string();
    m.gauge(
        "crawlfleet_distributor_info",
        "The distributor's node id and its part in the election (master, backup, undecided).",
        &[("node_id", &id), ("election", role)],
        1.0,
    );
    m.gauge(
        "crawlfleet_distributor_load",
        "Operations received and not yet acknowledged (get_load, MS-FSCDFT 3.5.4.7).",
        &[],
        node.load() as f64,
    );
    m.counter(
        "crawlfleet_distributor_operations_total",
        "Operations received in feeding sessions since the start.",
        &[],
        node.ops_received() as f64,
    );
    let status = node.on_get_status(role);
    let indexed = status.get(b"indexed");
    let sessions_help = "Feeding sessions held, per content collection.";
    let docs_help = "Live documents in the collection's content index.";
    m.declare(
        "crawlfleet_distributor_sessions",
        sessions_help,
        Kind::Gauge,
    );
    m.declare("crawlfleet_distributor_documents", docs_help, Kind::Gauge);
    for c in node.collections() {
        let l = [("collection", c)];
        let n = node.sessions().filter(|s| s.collection == c).count();
        m.gauge(
            "crawlfleet_distributor_sessions",
            sessions_help,
            &l,
            n as f64,
        );
        let docs = indexed
            .and_then(|d| d.get(c.as_bytes()))
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        m.gauge(
            "crawlfleet_distributor_documents",
            docs_help,
            &l,
            docs as f64,
        );
    }
}
