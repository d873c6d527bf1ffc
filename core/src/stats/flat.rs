//! The flattened structures of CollectionGetStatistics2 (FSCADM 2.2.5) and
//! GetGlobalStatistics (2.2.6), computed from a schema instance.

use super::schema::{number, Schema};
use crate::marshal::Value;

/// What a flattened collection structure reports besides the gathered values: the scheduler's
/// live state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    /// Sites being crawled now (ActiveSites).
    pub active_sites: i64,
    /// Feeding (1) or paused (0).
    pub feeding: bool,
    /// "Crawling", "Zombie", "Suspended", "Disk full", "Compacting" or "Variable delay
    /// suspended" (2.2.5 Status).
    pub status: &'static str,
    /// 2.2.3.6, empty when no crawl limit is reached.
    pub crawl_mode: String,
    /// Percent of the current refresh cycle done, and the time to the next refresh in words.
    pub progress: (i64, String),
    /// The refresh cycle (Epoch) and when it began (LastRefresh).
    pub epoch: i64,
    /// When the current refresh cycle began.
    pub last_refresh: i64,
    /// When the collection was added (Uptime).
    pub uptime: i64,
}

fn s(k: &str) -> Value<'static> {
    Value::owned_bytes(k.as_bytes().to_vec())
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

fn hist(c: &Schema, key: &str) -> Value<'static> {
    Value::Dict(
        c.histogram(key)
            .map(|b| b.iter().map(|(k, v)| (s(k), Value::Float(*v))).collect())
            .unwrap_or_default(),
    )
}

/// The 2.2.5 dictionary for the schema instance `c` (a cycle, or the complete cycle) at `now`.
/// DocumentStore = Stored - Modified - Deleted; the rates divide by the seconds since the
/// instance began (`__startts__`, reported as FirstUpdate).
pub fn flatten_collection(c: &Schema, live: &Live, now: i64) -> Value<'static> {
    let f = |k: &str| c.num(k);
    let elapsed = (now - c.start).max(1) as f64;
    let mut d: Vec<(Value<'static>, Value<'static>)> = Vec::with_capacity(48);
    let mut put = |k: &str, v: Value<'static>| d.push((s(k), v));
    put("ActiveSites", Value::int(live.active_sites));
    for k in [
        "Processed",
        "Downloaded",
        "Modified",
        "Stored",
        "Deleted",
        "ReadNet",
        "WriteNet",
        "DocSize",
    ] {
        put(k, Value::Float(f(k)));
    }
    put(
        "DocSizeAvg",
        Value::Float(ratio(f("DocSize"), c.count("DocSize") as f64)),
    );
    put("DocSizeMax", Value::Float(c.max("DocSize")));
    for k in ["Retries", "NodeSchedulerFwd", "LocalFwd", "Local"] {
        put(k, Value::Float(f(k)));
    }
    put("Epoch", Value::int(live.epoch));
    put("LastRefresh", Value::int(live.last_refresh));
    put("Feeding", Value::int(i64::from(live.feeding)));
    put("CrawlMode", s(&live.crawl_mode));
    put("MimeType", hist(c, "MimeType"));
    put("HTTPResponse", hist(c, "HTTPResponse"));
    put("Uptime", Value::Float(live.uptime as f64));
    put("DLTime", Value::Float(f("DLTime")));
    put(
        "DLTimeAvg",
        Value::Float(ratio(f("DLTime"), c.count("DLTime") as f64)),
    );
    put("DLTimeMax", Value::Float(c.max("DLTime")));
    put("Status", s(live.status));
    put("URISkip", hist(c, "URISkip"));
    put("DocSkip", hist(c, "DocSkip"));
    let store = f("Stored") - f("Modified") - f("Deleted");
    put("DocumentStore", number(store.max(0.0)));
    put(
        "Progress",
        Value::list(vec![Value::int(live.progress.0), s(&live.progress.1)]),
    );
    put("FirstUpdate", Value::Float(c.start as f64));
    put("StatUpdate", Value::Float(now as f64));
    put("DocRate", Value::Float(f("Downloaded") / elapsed));
    put("DataRateIn", Value::Float(f("ReadNet") / elapsed));
    put("DataRateOut", Value::Float(f("WriteNet") / elapsed));
    for k in [
        "PPFailed",
        "PPSucceeded",
        "PPFed",
        "PPDeleted",
        "PPAdded",
        "PPModified",
        "PPURLsChange",
        "PPChecksums",
    ] {
        put(k, Value::Float(f(k)));
    }
    Value::Dict(d)
}

/// The 2.2.5 dictionary of a CMD_UM_STAT (MS-FSCMT 2.2.4.6) for `delta`, what a collection
/// gathered since the previous one (its `start`) until `now`: as [`flatten_collection`], but
/// DocumentStore is the change Stored - Modified - Deleted, negative after deletes (a peer that
/// adds the deltas up gets the store), and the smallest document and download (DocSizeMin,
/// DLTimeMin, no 2.2.5 keys) go along for [`super::schema_of_report`].
pub fn flatten_report(delta: &Schema, live: &Live, now: i64) -> Value<'static> {
    let mut v = flatten_collection(delta, live, now);
    if let Value::Dict(d) = &mut v {
        let store = delta.num("Stored") - delta.num("Modified") - delta.num("Deleted");
        for (k, x) in d.iter_mut() {
            if k.as_bytes() == Some(b"DocumentStore") {
                *x = number(store);
            }
        }
        d.push((s("DocSizeMin"), Value::Float(delta.min("DocSize"))));
        d.push((s("DLTimeMin"), Value::Float(delta.min("DLTime"))));
    }
    v
}

/// The 2.2.6 dictionary for the global schema instance `g` at `now`. The flattened names
/// follow the 2.2.6 table: DNSRequest counts the schema's DNSRequests, DNSResponse its
/// DNSResponses, and DNSResponses is the histogram the schema calls DNSResponse.
pub fn flatten_global(g: &Schema, now: i64) -> Value<'static> {
    let elapsed = (now - g.start).max(1) as f64;
    let f = |k: &str| Value::Float(g.num(k));
    Value::Dict(vec![
        (s("DNSWrite"), f("DNSWrite")),
        (s("DNSRead"), f("DNSRead")),
        (s("DNSRequest"), f("DNSRequests")),
        (s("DNSResponse"), f("DNSResponses")),
        (s("DNSResponses"), hist(g, "DNSResponse")),
        (s("DNSRetries"), f("DNSRetries")),
        (s("DNSTimeout"), f("DNSTimeout")),
        (s("DNSRateLimit"), f("DNSRateLimit")),
        (s("DNSRate"), Value::Float(g.num("DNSRequests") / elapsed)),
        (s("DNSDataRateIn"), Value::Float(g.num("DNSRead") / elapsed)),
        (
            s("DNSDataRateOut"),
            Value::Float(g.num("DNSWrite") / elapsed),
        ),
    ])
}
