//! CMD_UM_STAT read back: its PKT_DATA is the flattened structure of MS-FSCADM 2.2.5
//! (MS-FSCMT 2.2.4.6), one per Statistics Timeout with what changed since the previous one
//! (MS-FSCMT 3.1.6). Two readings of it: as a schema delta to add to the cycle its Epoch names
//! ([`schema_of_report`]), and folded into a running 2.2.5 dictionary per node and per
//! collection ([`aggregate_report`]), each key aggregated as what it measures.

use super::schema::{Schema, COLLECTION};
use crate::marshal::Value;

/// 2.2.5 keys that describe state or are derived from the counted ones: not added up.
const NOT_COUNTED: &[&str] = &[
    "ActiveSites",
    "Epoch",
    "LastRefresh",
    "Feeding",
    "CrawlMode",
    "Status",
    "Uptime",
    "Progress",
    "FirstUpdate",
    "StatUpdate",
    "DocRate",
    "DataRateIn",
    "DataRateOut",
    "DocumentStore",
    "PPChecksums",
];

/// Attributes counted per sample (a document, a download): (total, average, largest, smallest).
/// The smallest is not a 2.2.5 key; crawlfleet's node schedulers send it besides.
const SAMPLED: [(&str, &str, &str, &str); 2] = [
    ("DocSize", "DocSizeAvg", "DocSizeMax", "DocSizeMin"),
    ("DLTime", "DLTimeAvg", "DLTimeMax", "DLTimeMin"),
];

fn num(v: &Value<'_>) -> Option<f64> {
    v.as_f64().or_else(|| v.as_i64().map(|i| i as f64))
}

fn key_num(d: &Value<'_>, k: &str) -> Option<f64> {
    d.get(k.as_bytes()).and_then(num)
}

/// How many samples a total and its average stand for.
fn samples(total: f64, avg: f64) -> u64 {
    if avg > 0.0 && total > 0.0 {
        (total / avg).round().max(1.0) as u64
    } else if total > 0.0 {
        1
    } else {
        0
    }
}

fn is_sampled_part(k: &str) -> bool {
    SAMPLED
        .iter()
        .any(|(_, a, mx, mn)| k == *a || k == *mx || k == *mn)
}

/// The counted part of a 2.2.5 structure as a collection schema delta named `name`: the
/// continuous totals, DocSize and DLTime as their samples (how many from the total over the
/// average, the largest from the Max key), and the histograms. State and derived keys, and
/// keys that are no FSCADM attribute (lower case), are left out.
pub fn schema_of_report(report: &Value<'_>, name: &str, now: i64) -> Schema {
    let mut s = Schema::new(COLLECTION, name, now);
    let Some(d) = report.as_dict() else {
        return s;
    };
    for (k, v) in d {
        let Some(k) = k.as_bytes().map(String::from_utf8_lossy) else {
            continue;
        };
        if !k.starts_with(|c: char| c.is_ascii_uppercase())
            || NOT_COUNTED.contains(&k.as_ref())
            || is_sampled_part(&k)
        {
            continue;
        }
        if let Some((_, avg, max, min)) = SAMPLED.iter().find(|(t, ..)| *t == k) {
            let total = num(v).unwrap_or(0.0);
            let a = key_num(report, avg).unwrap_or(0.0);
            let hi = key_num(report, max).unwrap_or(a);
            let lo = key_num(report, min).unwrap_or(a.min(hi));
            s.add_samples(&k, total, samples(total, a), lo, hi);
        } else if let Some(h) = v.as_dict() {
            for (b, n) in h {
                if let (Some(b), Some(n)) = (b.as_bytes(), num(n)) {
                    s.hist(&k, &String::from_utf8_lossy(b), n);
                }
            }
        } else if let Some(x) = num(v).filter(|x| *x != 0.0) {
            s.add(&k, x);
        }
    }
    s
}

fn put(acc: &mut Vec<(Value<'static>, Value<'static>)>, k: &str, v: Value<'static>) {
    match acc
        .iter_mut()
        .find(|(pk, _)| pk.as_bytes() == Some(k.as_bytes()))
    {
        Some((_, pv)) => *pv = v,
        None => acc.push((Value::owned_bytes(k.as_bytes().to_vec()), v)),
    }
}

fn acc_num(acc: &[(Value<'static>, Value<'static>)], k: &str) -> Option<f64> {
    acc.iter()
        .find(|(pk, _)| pk.as_bytes() == Some(k.as_bytes()))
        .and_then(|(_, v)| num(v))
}

/// Folds a reported 2.2.5 structure into `acc`, the running structure of a node or of a
/// collection: counts add up (histograms per bucket), the latest Epoch / LastRefresh /
/// StatUpdate and the earliest Uptime / FirstUpdate stand, DocSizeMax and DLTimeMax are the
/// largest, the averages are over every sample, state keys (Status, Feeding, CrawlMode,
/// Progress, ActiveSites, PPChecksums) are the latest reported, and DocumentStore and the rates
/// are computed again from the totals. Keys that are no 2.2.5 key (a node's own counters) add
/// up as numbers.
pub fn aggregate_report(acc: &mut Value<'static>, report: &Value<'_>) {
    let Some(d) = report.as_dict() else {
        return;
    };
    if acc.as_dict().is_none() {
        *acc = Value::Dict(Vec::new());
    }
    let Value::Dict(a) = acc else {
        return;
    };
    // The averages first, from the totals before this report is added.
    for (total, avg, ..) in SAMPLED {
        let (Some(t), Some(ra)) = (key_num(report, total), key_num(report, avg)) else {
            continue;
        };
        let old_t = acc_num(a, total).unwrap_or(0.0);
        let old_n = samples(old_t, acc_num(a, avg).unwrap_or(0.0));
        let n = old_n + samples(t, ra);
        let v = if n > 0 { (old_t + t) / n as f64 } else { 0.0 };
        put(a, avg, Value::Float(v));
    }
    for (k, v) in d {
        let Some(ks) = k.as_bytes().map(String::from_utf8_lossy) else {
            continue;
        };
        let old = acc_num(a, &ks);
        let x = num(v);
        let pick = |f: fn(f64, f64) -> f64| match (old, x) {
            (Some(o), Some(x)) => Some(Value::Float(f(o, x))),
            (None, Some(x)) => Some(Value::Float(x)),
            _ => None,
        };
        let new = match ks.as_ref() {
            "DocSizeAvg" | "DLTimeAvg" | "DocumentStore" | "DocRate" | "DataRateIn"
            | "DataRateOut" => continue,
            "Epoch" | "LastRefresh" => match (old, v.as_i64()) {
                (Some(o), Some(x)) => Some(Value::int(x.max(o as i64))),
                _ => Some(v.clone().into_owned()),
            },
            "StatUpdate" | "DocSizeMax" | "DLTimeMax" => pick(f64::max),
            "Uptime" | "FirstUpdate" | "DocSizeMin" | "DLTimeMin" => pick(f64::min),
            "ActiveSites" | "PPChecksums" | "Status" | "Feeding" | "CrawlMode" | "Progress" => {
                Some(v.clone().into_owned())
            }
            _ => {
                match a.iter_mut().find(|(pk, _)| pk == k) {
                    Some((_, pv)) => crate::sched::multinode::merge_stats(pv, v),
                    None => a.push((k.clone().into_owned(), v.clone().into_owned())),
                }
                None
            }
        };
        if let Some(new) = new {
            put(a, &ks, new);
        }
    }
    if report.get(b"DocumentStore").is_none() {
        return;
    }
    let f = |k: &str| acc_num(a, k).unwrap_or(0.0);
    let store = f("Stored") - f("Modified") - f("Deleted");
    let elapsed = (f("StatUpdate") - f("FirstUpdate")).max(1.0);
    let (docs, rin, rout) = (f("Downloaded"), f("ReadNet"), f("WriteNet"));
    put(a, "DocumentStore", Value::Float(store));
    put(a, "DocRate", Value::Float(docs / elapsed));
    put(a, "DataRateIn", Value::Float(rin / elapsed));
    put(a, "DataRateOut", Value::Float(rout / elapsed));
}
