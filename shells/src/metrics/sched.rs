//! `/metrics` of the node and multinode schedulers, rendered on the role's loop from the
//! statistics the administrative interface keeps (the same figures XML-RPC's
//! CollectionGetStatistics2 reports as "complete": the lifetime of the collection) and the
//! scheduler core's live state.
//!
//! Per collection (label `collection`): pages fetched, bytes, HTTP status counts, skip
//! reasons, documents stored, fed and indexed, queued URIs, active sites, the state. The
//! multinode scheduler's figures are its nodes' (CMD_UM_STAT) added up; a node's are its own.

use crawlfleet_core::metrics::{Exposition, Kind};
use crawlfleet_core::stats::Schema;

use crate::admin::roles::{status_word, Role};
use crate::admin::Admin;

/// Counters: (metric, FSCADM attribute, help).
const COUNTERS: [(&str, &str, &str); 15] = [
    (
        "crawlfleet_pages_fetched_total",
        "Downloaded",
        "Pages fetched (FSCADM Downloaded).",
    ),
    (
        "crawlfleet_uris_processed_total",
        "Processed",
        "URIs processed (FSCADM Processed).",
    ),
    (
        "crawlfleet_documents_stored_total",
        "Stored",
        "Documents stored (FSCADM Stored).",
    ),
    (
        "crawlfleet_documents_modified_total",
        "Modified",
        "Documents found changed (FSCADM Modified).",
    ),
    (
        "crawlfleet_documents_deleted_total",
        "Deleted",
        "Documents deleted (FSCADM Deleted).",
    ),
    (
        "crawlfleet_received_bytes_total",
        "ReadNet",
        "Bytes read from the network by fetches (FSCADM ReadNet).",
    ),
    (
        "crawlfleet_sent_bytes_total",
        "WriteNet",
        "Bytes written to the network by fetches (FSCADM WriteNet).",
    ),
    (
        "crawlfleet_document_bytes_total",
        "DocSize",
        "Bytes of the documents fetched (FSCADM DocSize).",
    ),
    (
        "crawlfleet_fetch_seconds_total",
        "DLTime",
        "Seconds spent downloading (FSCADM DLTime).",
    ),
    (
        "crawlfleet_documents_fed_total",
        "PPFed",
        "Documents sent to the content distributors (FSCADM PPFed).",
    ),
    (
        "crawlfleet_documents_indexed_total",
        "PPSucceeded",
        "Documents the content distributors acknowledged (FSCADM PPSucceeded).",
    ),
    (
        "crawlfleet_documents_feed_failed_total",
        "PPFailed",
        "Documents the content distributors refused (FSCADM PPFailed).",
    ),
    (
        "crawlfleet_logins_total",
        "Logins",
        "Form logins that gave a session (docs/collection-config.md, Login).",
    ),
    (
        "crawlfleet_login_failures_total",
        "LoginFailures",
        "Form logins that failed.",
    ),
    (
        "crawlfleet_relogins_total",
        "Relogins",
        "Form logins started because an answer showed the session gone.",
    ),
];

/// Histograms of the statistics: (metric, FSCADM attribute, label, help).
const BUCKETS: [(&str, &str, &str, &str); 4] = [
    (
        "crawlfleet_http_responses_total",
        "HTTPResponse",
        "code",
        "Fetches by HTTP status (FSCADM HTTPResponse).",
    ),
    (
        "crawlfleet_uri_skips_total",
        "URISkip",
        "reason",
        "URIs not fetched, by skip code (FSCADM URISkip).",
    ),
    (
        "crawlfleet_document_skips_total",
        "DocSkip",
        "reason",
        "Documents fetched but not stored, by skip code (FSCADM DocSkip).",
    ),
    (
        "crawlfleet_documents_by_mime_total",
        "MimeType",
        "mime",
        "Documents by MIME type (FSCADM MimeType).",
    ),
];

/// A scheduler's `/metrics` text (the caller has folded the core's counters in:
/// `Admin::absorb`).
pub fn render(admin: &Admin, role: &dyn Role) -> String {
    let mut m = Exposition::new();
    for (name, _, help) in COUNTERS {
        m.declare(name, help, Kind::Counter);
    }
    for (name, _, _, help) in BUCKETS {
        m.declare(name, help, Kind::Counter);
    }
    let stats = admin.stats();
    for (name, state) in role.collections() {
        let coll = String::from_utf8_lossy(&name).into_owned();
        let l = [("collection", coll.as_str())];
        let life: Schema = match stats.collection(&name) {
            Some(c) => c.table.lifetime(),
            None => continue,
        };
        for (metric, key, help) in COUNTERS {
            m.counter(metric, help, &l, life.num(key));
        }
        for (metric, key, label, help) in BUCKETS {
            for (bucket, n) in life.histogram(key).into_iter().flatten() {
                m.counter(metric, help, &[("collection", &coll), (label, bucket)], *n);
            }
        }
        m.gauge(
            "crawlfleet_queue_entries",
            "URIs waiting in the collection's crawl queues.",
            &l,
            role.queued(&name) as f64,
        );
        if let Some((entries, bytes)) = role.queued_in_memory(&name) {
            m.gauge(
                "crawlfleet_queue_memory_entries",
                "Crawl queue entries taken into memory and not finished (site manager and crawl engine).",
                &l,
                entries as f64,
            );
            m.gauge(
                "crawlfleet_queue_memory_bytes",
                "Estimated heap bytes of the crawl queue entries held in memory.",
                &l,
                bytes as f64,
            );
        }
        let active = if role.is_multinode() {
            life.num("SumActiveSites")
        } else {
            role.active_sites(&name) as f64
        };
        m.gauge(
            "crawlfleet_active_sites",
            "Sites being crawled now.",
            &l,
            active,
        );
        m.gauge(
            "crawlfleet_collection_suspended",
            "1 while the collection's crawl is suspended.",
            &l,
            f64::from(u8::from(crate::admin::roles::is_suspended(state))),
        );
        m.gauge(
            "crawlfleet_collection_feeding",
            "1 while the collection's documents are fed, 0 while feeding is suspended.",
            &l,
            life.num("Feeding"),
        );
        m.gauge(
            "crawlfleet_refresh_cycle",
            "The collection's refresh cycle.",
            &l,
            role.refresh_cycle(&name) as f64,
        );
        let mode = role.crawl_mode(&name);
        m.gauge(
            "crawlfleet_collection_info",
            "The collection's state (FSCADM Status) and CrawlMode, as labels.",
            &[
                ("collection", &coll),
                ("status", status_word(state)),
                ("crawl_mode", &mode),
            ],
            1.0,
        );
    }
    if role.is_multinode() {
        m.gauge(
            "crawlfleet_nodes_registered",
            "Node schedulers registered with the multinode scheduler.",
            &[],
            role.node_ports().len() as f64,
        );
    }
    if let Some(h) = admin.fetch_latency() {
        m.histogram(
            "crawlfleet_fetch_duration_seconds",
            "Time from sending a request to the whole answer read, per fetch.",
            &[],
            &h.snapshot(),
        );
    }
    super::process(&mut m);
    m.finish()
}
