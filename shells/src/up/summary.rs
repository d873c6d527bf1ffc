//! The summary `up` prints: per collection, fetched, stored, indexed, duplicates, skipped and
//! errors with the HTTP and skip code histograms, as a table or one JSON object; and the
//! statistics of earlier runs on the same data directory (`summary.json`), which it adds up.

use std::collections::BTreeMap;
use std::path::Path;

use crawlfleet_core::crawl::CrawlCounters;

use super::Distributors;
use crate::crawl::{NodeStatus, StatusSlot};
use crate::sessionsink::FeedCounters;

/// The per-collection summary of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The counters of every node, merged.
    pub counters: CrawlCounters,
    /// Entries left in the nodes' crawl queues.
    pub queued: u64,
    /// Documents fed through content distributor sessions, over the nodes.
    pub feed: FeedCounters,
}

/// What a cluster crawled: per collection, and the seconds from the start of the cluster to
/// the moment its crawl went quiet.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// By collection name.
    pub collections: BTreeMap<String, Summary>,
    /// Seconds the crawl took.
    pub elapsed: f64,
    /// The documents were fed to content distributors (the summary shows them indexed).
    pub feeding: bool,
    /// Pages fetched by earlier runs on the same data directory (counted in `collections`,
    /// not in the rate).
    pub earlier_fetched: u64,
    /// IndexNow URLs the nodes dropped in this run: no collection covers their host
    /// (docs/indexnow.md).
    pub indexnow_dropped: u64,
    /// What the nodes' RUP robots did in this run, over the nodes (docs/rup.md).
    pub rup: crate::node::RupCounters,
}

impl RunSummary {
    /// Pages fetched (robots.txt excluded), all collections.
    pub fn pages_fetched(&self) -> u64 {
        self.collections
            .values()
            .map(|s| s.counters.processed)
            .sum()
    }

    /// Pages fetched per second of the run.
    pub fn pages_per_second(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.pages_fetched().saturating_sub(self.earlier_fetched) as f64 / self.elapsed
        } else {
            0.0
        }
    }

    /// Prints the summary as `crawlfleet up --until-idle` does: a table, or one JSON object.
    pub fn print(&self, json: bool) {
        print_summary(self, json);
    }
}

/// Waits (at most two seconds) until every node published its status after `since`, so that
/// a summary taken then counts what the nodes did up to that moment.
pub(super) fn wait_published(slots: &[StatusSlot], since: std::time::Instant) {
    let until = since + std::time::Duration::from_secs(2);
    while std::time::Instant::now() < until
        && !slots.iter().all(|s| s.lock().at.is_some_and(|t| t > since))
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// IndexNow URLs dropped, over the nodes.
pub(super) fn indexnow_dropped(slots: &[StatusSlot]) -> u64 {
    slots.iter().map(|s| s.lock().indexnow_dropped).sum()
}

/// What the nodes' RUP robots did, over the nodes.
pub(super) fn rup_counters(slots: &[StatusSlot]) -> crate::node::RupCounters {
    let mut t = crate::node::RupCounters::default();
    for s in slots {
        let r = s.lock().rup;
        t.sites_registered += r.sites_registered;
        t.reports_received += r.reports_received;
        t.reports_applied += r.reports_applied;
        t.pages_queued += r.pages_queued;
    }
    t
}

pub(super) fn summarize(slots: &[StatusSlot]) -> BTreeMap<String, Summary> {
    let mut out: BTreeMap<String, Summary> = BTreeMap::new();
    for s in slots {
        let st: NodeStatus = s.lock().clone();
        for (name, c) in st.collections {
            let e = out.entry(name).or_default();
            e.counters.merge(&c.counters);
            e.queued += c.queued;
            e.feed.fed += c.feed.fed;
            e.feed.acked += c.feed.acked;
            e.feed.failed += c.feed.failed;
            e.feed.pending += c.feed.pending;
        }
    }
    out
}

/// How to search what the crawl indexed, with the best hits of an example query (the
/// distributors commit their full-text indexes every second, so the last documents may be
/// missing from it yet).
pub(super) fn print_search_example(d: &Distributors, collection: &str, query: &str) {
    if d.data_dirs.is_empty() {
        return;
    }
    let dirs: Vec<String> = d
        .data_dirs
        .iter()
        .map(|p| format!("--data-dir {}", p.display()))
        .collect();
    println!(
        "search the crawl (docs/search.md): crawlfleet search {} {collection} \"{query}\"",
        dirs.join(" ")
    );
    if let Some(a) = d.admins.first() {
        println!("  or XML-RPC search(\"{collection}\", \"{query}\", 10) on http://{a}/RPC2");
    }
    match crate::search::search(&d.data_dirs, collection, query, 3) {
        Ok(found) => {
            for f in found {
                println!("  {:>8.3}  {}", f.hit.score, f.hit.uri);
            }
        }
        Err(e) => println!("  ({e})"),
    }
}

fn print_summary(run: &RunSummary, json: bool) {
    let (sum, elapsed, feeding) = (&run.collections, run.elapsed, run.feeding);
    let rate = run.pages_per_second();
    let row = |c: &CrawlCounters| {
        let dups = c.doc_skip.get("cs").copied().unwrap_or(0);
        (
            c.processed,
            c.stored,
            dups,
            c.docs_skipped() - dups - c.errors() + c.uris_skipped(),
            c.errors(),
        )
    };
    if json {
        let mut cols = serde_json::Map::new();
        for (name, s) in sum {
            let (fetched, stored, dups, skipped, errors) = row(&s.counters);
            let http: serde_json::Map<String, serde_json::Value> = s
                .counters
                .http_response
                .iter()
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect();
            let skips: serde_json::Map<String, serde_json::Value> = s
                .counters
                .doc_skip
                .iter()
                .chain(s.counters.uri_skip.iter())
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect();
            let mut col = serde_json::json!({
                    "pages_fetched": fetched,
                    "documents_stored": stored,
                    "duplicates": dups,
                    "skipped": skipped,
                    "errors": errors,
                    "redirects": s.counters.redirects,
                    "bytes": s.counters.read_net,
                    "http_response": http,
                    "skip_codes": skips,
                    "sitemaps_read": s.counters.sitemaps_read,
                    "sitemap_skipped": s.counters.sitemap_skipped,
            });
            if feeding {
                col["documents_indexed"] = s.feed.acked.into();
                col["feed_failed"] = s.feed.failed.into();
                col["feed_pending"] = s.feed.pending.into();
            }
            cols.insert(name.clone(), col);
        }
        let total = |f: fn(&(u64, u64, u64, u64, u64)) -> u64| -> u64 {
            sum.values().map(|s| f(&row(&s.counters))).sum()
        };
        let fetched = total(|r| r.0);
        let mut v = serde_json::json!({
            "pages_fetched": fetched,
            "documents_stored": total(|r| r.1),
            "duplicates": total(|r| r.2),
            "skipped": total(|r| r.3),
            "errors": total(|r| r.4),
            "elapsed_seconds": (elapsed * 1000.0).round() / 1000.0,
            "pages_per_second": rate.round(),
            "indexnow_dropped": run.indexnow_dropped,
            "rup": {
                "sites_registered": run.rup.sites_registered,
                "reports_received": run.rup.reports_received,
                "reports_applied": run.rup.reports_applied,
                "pages_queued": run.rup.pages_queued,
            },
            "collections": cols,
        });
        if run.earlier_fetched > 0 {
            v["earlier_pages_fetched"] = run.earlier_fetched.into();
        }
        if feeding {
            v["documents_indexed"] = sum.values().map(|s| s.feed.acked).sum::<u64>().into();
        }
        println!("{v}");
        return;
    }
    let indexed = |s: &Summary| match feeding {
        true => format!(" {:>10}", s.feed.acked),
        false => String::new(),
    };
    println!(
        "{:<16} {:>10} {:>10}{} {:>10} {:>10} {:>8}",
        "collection",
        "fetched",
        "stored",
        if feeding { "    indexed" } else { "" },
        "duplicates",
        "skipped",
        "errors"
    );
    for (name, s) in sum {
        let (fetched, stored, dups, skipped, errors) = row(&s.counters);
        println!(
            "{name:<16} {fetched:>10} {stored:>10}{} {dups:>10} {skipped:>10} {errors:>8}",
            indexed(s)
        );
        if feeding && (s.feed.failed > 0 || s.feed.pending > 0) {
            println!(
                "  feeding: {} refused by the distributors, {} not acknowledged",
                s.feed.failed, s.feed.pending
            );
        }
        if s.counters.sitemaps_read + s.counters.sitemap_skipped > 0 {
            let c = &s.counters;
            let (read, skipped) = (c.sitemaps_read, c.sitemap_skipped);
            println!("  sitemaps: {read} read, {skipped} stored pages not refetched (lastmod)");
        }
        let codes: Vec<String> = s
            .counters
            .doc_skip
            .iter()
            .chain(s.counters.uri_skip.iter())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let http: Vec<String> = s
            .counters
            .http_response
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("  HTTP {}  skip codes {}", http.join(" "), codes.join(" "));
    }
    explain_errors(sum);
    if run.indexnow_dropped > 0 {
        println!(
            "IndexNow: {} submitted URLs dropped (no collection covers their host)",
            run.indexnow_dropped
        );
    }
    let r = &run.rup;
    if r.sites_registered + r.reports_received > 0 {
        println!(
            "RUP: {} sites registered, {} reports received ({} applied), {} pages queued by reports",
            r.sites_registered, r.reports_received, r.reports_applied, r.pages_queued
        );
    }
    let fetched: u64 = sum.values().map(|s| s.counters.processed).sum();
    println!(
        "{} pages in {elapsed:.1} s ({rate:.0} pages/s){}",
        fetched.saturating_sub(run.earlier_fetched),
        match run.earlier_fetched {
            0 => String::new(),
            n => format!("; {n} more in earlier runs on this data directory"),
        }
    );
}

/// The skip codes of MS-FSCADM 2.2.3.1 and 2.2.3.2 (the counters key them by `&'static str`).
fn skip_code(code: &str) -> Option<&'static str> {
    use crawlfleet_core::crawl::counters::{doc_skip as d, uri_skip as u};
    [
        u::NOFOLLOW,
        u::SCHEME,
        u::URI,
        u::ROBOTS,
        u::DOMAIN,
        u::CACHE,
        u::DEPTH,
        d::HEADER,
        d::MIME,
        d::HEADER_EXCLUDED,
        d::TIMEOUT,
        d::TOO_LARGE,
        d::ENCODING,
        d::CHUNK,
        d::NO_REDIRECT_TARGET,
        d::NOINDEX,
        d::DUPLICATE,
        d::INCOMPLETE,
        d::CONNECT,
        d::CONNECT_TIMEOUT,
        d::NETWORK,
        d::EMPTY,
        d::EMPTY_HEADER,
        d::OTHER,
    ]
    .into_iter()
    .find(|c| *c == code)
}

/// The file of the statistics of earlier runs.
const SUMMARY_FILE: &str = "summary.json";

/// The statistics the runs on `dir` gathered so far (empty when there were none).
pub(super) fn load(dir: &Path) -> RunSummary {
    let mut out = RunSummary::default();
    let Ok(text) = std::fs::read_to_string(dir.join(SUMMARY_FILE)) else {
        return out;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        log::warn!("{}: not JSON, ignored", dir.join(SUMMARY_FILE).display());
        return out;
    };
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or(0);
    for (name, c) in v["collections"].as_object().into_iter().flatten() {
        let mut s = Summary::default();
        let k = &mut s.counters;
        k.processed = n(c, "processed");
        k.downloaded = n(c, "downloaded");
        k.stored = n(c, "stored");
        k.redirects = n(c, "redirects");
        k.read_net = n(c, "read_net");
        k.sitemaps_read = n(c, "sitemaps_read");
        k.sitemap_skipped = n(c, "sitemap_skipped");
        for (code, count) in c["http_response"].as_object().into_iter().flatten() {
            if let Ok(code) = code.parse() {
                k.http_response.insert(code, count.as_u64().unwrap_or(0));
            }
        }
        for (map, key) in [(&mut k.doc_skip, "doc_skip"), (&mut k.uri_skip, "uri_skip")] {
            for (code, count) in c[key].as_object().into_iter().flatten() {
                if let Some(code) = skip_code(code) {
                    map.insert(code, count.as_u64().unwrap_or(0));
                }
            }
        }
        s.feed.acked = n(c, "indexed");
        out.collections.insert(name.clone(), s);
    }
    out.earlier_fetched = out.pages_fetched();
    out
}

/// Keeps the statistics of `run` (earlier runs included) for the next run on `dir`.
pub(super) fn save(dir: &Path, run: &RunSummary) -> Result<(), String> {
    let mut cols = serde_json::Map::new();
    for (name, s) in &run.collections {
        let k = &s.counters;
        let map = |m: &BTreeMap<&'static str, u64>| -> serde_json::Value {
            m.iter()
                .map(|(c, n)| (c.to_string(), serde_json::Value::from(*n)))
                .collect()
        };
        let http: serde_json::Map<String, serde_json::Value> = k
            .http_response
            .iter()
            .map(|(c, n)| (c.to_string(), (*n).into()))
            .collect();
        cols.insert(
            name.clone(),
            serde_json::json!({
                "processed": k.processed,
                "downloaded": k.downloaded,
                "stored": k.stored,
                "redirects": k.redirects,
                "read_net": k.read_net,
                "sitemaps_read": k.sitemaps_read,
                "sitemap_skipped": k.sitemap_skipped,
                "http_response": http,
                "doc_skip": map(&k.doc_skip),
                "uri_skip": map(&k.uri_skip),
                "indexed": s.feed.acked,
            }),
        );
    }
    let v = serde_json::json!({ "collections": cols });
    super::layout::write_synced(&dir.join(SUMMARY_FILE), v.to_string().as_bytes())
}

impl RunSummary {
    /// Adds the statistics of earlier runs ([`load`]) to this run's.
    pub(super) fn add_earlier(&mut self, earlier: &RunSummary) {
        for (name, e) in &earlier.collections {
            let s = self.collections.entry(name.clone()).or_default();
            s.counters.merge(&e.counters);
            s.feed.acked += e.feed.acked;
        }
        self.earlier_fetched = earlier.earlier_fetched;
    }
}

/// What each fetch error code of MS-FSCADM 2.2.3.2 means to someone looking at a crawl that
/// failed (README, "Troubleshooting").
const ERROR_MEANINGS: [(&str, &str); 9] = [
    (
        "co",
        "no connection: nothing answers at the address (is the site up?)",
    ),
    ("ct", "the connection timed out"),
    ("ne", "a network error"),
    ("ti", "the download took longer than fetch_timeout"),
    ("he", "an invalid HTTP header"),
    ("cu", "a chunked body that did not decode"),
    ("en", "a Content-Encoding that did not decode"),
    ("eh", "an empty HTTP header"),
    ("ot", "another failure (the node's log says which)"),
];

/// Says on standard error what the errors of each collection were, so that a crawl that
/// fetched nothing is not a silent success.
fn explain_errors(sum: &BTreeMap<String, Summary>) {
    for (name, s) in sum {
        let errors = s.counters.errors();
        if errors == 0 {
            continue;
        }
        let why: Vec<String> = ERROR_MEANINGS
            .iter()
            .filter_map(|(code, meaning)| {
                let n = s.counters.doc_skip.get(code).copied().unwrap_or(0);
                (n > 0).then(|| format!("{n} {code}: {meaning}"))
            })
            .collect();
        super::progress::tell(
            log::Level::Warn,
            format_args!(
                "crawlfleet up: collection {name}: {errors} fetch error(s); {}",
                why.join("; ")
            ),
        );
    }
}
