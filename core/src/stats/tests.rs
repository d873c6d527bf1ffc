//! Statistics aggregation (FSCADM 2.2.4.4 - 2.2.4.6), cycles, persistence and the flattened
//! structures (2.2.5, 2.2.6).

use super::*;

#[test]
fn continuous_values_sum_and_discrete_values_sample() {
    let mut s = Stats::new(2, 100);
    s.add_collection(b"c", 100);
    s.add(b"c", "Downloaded", 1.0);
    s.add(b"c", "Downloaded", 3.0);
    s.set(b"c", "QueueLength", 10.0);
    s.set(b"c", "QueueLength", 4.0);
    let d = &s.collection(b"c").unwrap().table.delta;
    assert_eq!(
        d.attrs["Downloaded"],
        Stat::Num {
            kind: Kind::Continuous,
            cur: 4.0,
            min: 1.0,
            max: 3.0,
            n: 2
        }
    );
    assert_eq!(
        d.attrs["QueueLength"],
        Stat::Num {
            kind: Kind::Discrete,
            cur: 4.0,
            min: 4.0,
            max: 10.0,
            n: 2
        }
    );
    s.merge(160);
    // 2.2.4.4: the delta is re-initialised; the cycle holds the values.
    let t = &s.collection(b"c").unwrap().table;
    assert!(t.delta.attrs.is_empty());
    assert_eq!(t.delta.start, 160);
    assert_eq!(t.cycles[&0].num("Downloaded"), 4.0);
    s.add(b"c", "Downloaded", 2.0);
    s.merge(220);
    let t = &s.collection(b"c").unwrap().table;
    assert_eq!(t.cycles[&0].num("Downloaded"), 6.0);
    assert_eq!(t.cycles[&0].count("Downloaded"), 3);
    assert_eq!(t.complete.num("Downloaded"), 6.0);
}

#[test]
fn cycles_are_retained_and_complete_covers_them_all() {
    let mut s = Stats::new(2, 0);
    s.add_collection(b"c", 0);
    for cycle in 0..5 {
        s.start_cycle(b"c", cycle, cycle * 10);
        s.add(b"c", "Stored", 1.0);
        s.hist(b"c", "HTTPResponse", "200", 1.0);
        s.set(b"c", "Epoch", cycle as f64);
    }
    s.merge(100);
    let t = &s.collection(b"c").unwrap().table;
    assert_eq!(t.cycles.keys().copied().collect::<Vec<_>>(), [3, 4]);
    assert_eq!(t.complete.num("Stored"), 5.0);
    assert_eq!(t.complete.histogram("HTTPResponse").unwrap()["200"], 5.0);
    assert_eq!(t.current().num("Stored"), 1.0);
    assert_eq!(t.previous().unwrap().num("Epoch"), 3.0);
    // The statistics tuple: (delta, {3: .., 4: .., "cOmPIEtE": ..}).
    let v = t.to_value();
    let cycles = v.as_tuple().unwrap()[1].as_dict().unwrap();
    assert_eq!(cycles.len(), 3);
    assert_eq!(cycles[2].0.as_bytes(), Some(COMPLETE.as_bytes()));
}

#[test]
fn the_statistics_dictionary_has_dspec_and_global() {
    let mut s = Stats::new(3, 0);
    s.add_collection(b"a", 0);
    s.add_collection(b"b", 0);
    s.global_add("DNSRequests", 2.0);
    let d = s.statistics_dict(Some(b"a"), |_| (1440, 8));
    assert!(d.get(b"global").is_some());
    assert!(d.get(b"a").is_some());
    assert!(d.get(b"b").is_none());
    let dspec = d.get(b"dspec").unwrap();
    assert_eq!(
        dspec.get(b"a").unwrap().get(b"refresh").unwrap().as_i64(),
        Some(1440)
    );
    let all = s.statistics_dict(None, |_| (0, 1));
    assert!(all.get(b"a").is_some() && all.get(b"b").is_some());
}

#[test]
fn statistics_survive_a_save_and_load() {
    let dir = std::env::temp_dir().join(format!("cf-stats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stats");
    let mut s = Stats::new(3, 5);
    s.add_collection(b"c", 5);
    s.add(b"c", "Downloaded", 7.0);
    s.set_str(b"c", "LastUri", "http://x/");
    s.hist(b"c", "URISkip", "ro", 2.0);
    s.set_row(b"c", "FeedingDestinations", "default", vec![Value::int(1)]);
    s.add(b"c", "DocSize", 10.5);
    s.start_cycle(b"c", 1, 50);
    s.add(b"c", "Downloaded", 1.0);
    s.save(&path).unwrap();
    let back = Stats::load(&path, 3, 99).unwrap();
    assert_eq!(back, s);
    assert_eq!(
        Stats::load(&dir.join("missing"), 3, 1).unwrap(),
        Stats::new(3, 1)
    );
    std::fs::write(&path, b"garbage").unwrap();
    assert!(Stats::load(&path, 3, 1).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn flattened_collection_and_global_structures() {
    let mut s = Stats::new(3, 1000);
    s.add_collection(b"c", 1000);
    for size in [1000.0, 3000.0] {
        s.add(b"c", "Downloaded", 1.0);
        s.add(b"c", "Stored", 1.0);
        s.add(b"c", "DocSize", size);
        s.add(b"c", "ReadNet", size + 200.0);
    }
    s.add(b"c", "Modified", 1.0);
    let cur = s.collection(b"c").unwrap().current();
    let live = Live {
        status: "Crawling",
        feeding: true,
        ..Live::default()
    };
    let f = flatten_collection(&cur, &live, 1010);
    assert_eq!(f.get(b"DocSizeAvg").unwrap().as_f64(), Some(2000.0));
    assert_eq!(f.get(b"DocSizeMax").unwrap().as_f64(), Some(3000.0));
    assert_eq!(f.get(b"DocumentStore").unwrap().as_i64(), Some(1));
    assert_eq!(f.get(b"DocRate").unwrap().as_f64(), Some(0.2));
    assert_eq!(f.get(b"DataRateIn").unwrap().as_f64(), Some(440.0));
    assert_eq!(f.get(b"Status").unwrap().as_bytes(), Some(&b"Crawling"[..]));
    assert_eq!(f.get(b"Progress").unwrap().as_list().unwrap().len(), 2);
    s.global_add("DNSRequests", 20.0);
    s.global_hist("DNSResponse", "0", 19.0);
    let g = flatten_global(&s.global.current(), 1010);
    assert_eq!(g.get(b"DNSRequest").unwrap().as_f64(), Some(20.0));
    assert_eq!(g.get(b"DNSRate").unwrap().as_f64(), Some(2.0));
    assert_eq!(
        g.get(b"DNSResponses").unwrap().get(b"0").unwrap().as_f64(),
        Some(19.0)
    );
}

/// DocSize per document (FSCADM 2.2.5 DocSizeAvg / DocSizeMax): samples added at once count
/// one update each.
#[test]
fn samples_make_per_document_averages_and_maxima() {
    let mut s = Stats::new(2, 0);
    s.add_collection(b"c", 0);
    s.add_samples(b"c", "DocSize", 4000.0, 4, 500.0, 2000.0);
    s.add_samples(b"c", "DocSize", 100.0, 1, 100.0, 100.0);
    let live = Live::default();
    let v = flatten_collection(&s.collection(b"c").unwrap().current(), &live, 10);
    assert_eq!(v.get(b"DocSizeAvg").and_then(Value::as_f64), Some(820.0));
    assert_eq!(v.get(b"DocSizeMax").and_then(Value::as_f64), Some(2000.0));
}

/// A refresh cycle that starts keeps what was gathered before with the cycle that ended, in
/// the CMD_UM_STAT reports too; each cycle has its Epoch.
#[test]
fn reports_and_cycles_split_at_a_new_cycle() {
    let mut s = Stats::new(4, 0);
    s.add_collection(b"c", 0);
    s.add(b"c", "Downloaded", 2.0);
    s.start_cycle(b"c", 1, 50);
    s.add(b"c", "Downloaded", 3.0);
    let c = s.collection(b"c").unwrap();
    assert_eq!(c.current().num("Downloaded"), 3.0);
    let (n, prev) = c.previous().unwrap();
    assert_eq!((n, prev.num("Downloaded")), (0, 2.0));
    assert_eq!(c.current().num("Epoch"), 1.0);
    let r = s.take_reports(b"c", 60);
    let got: Vec<(i64, f64)> = r.iter().map(|(n, s)| (*n, s.num("Downloaded"))).collect();
    assert_eq!(got, [(0, 2.0), (1, 3.0)]);
    assert!(s.take_reports(b"c", 70)[0].1.attrs.is_empty());
}

fn flat(pairs: &[(&str, Value<'static>)]) -> Value<'static> {
    Value::Dict(
        pairs
            .iter()
            .map(|(k, v)| (Value::owned_bytes(k.as_bytes().to_vec()), v.clone()))
            .collect(),
    )
}

/// MS-FSCMT 3.2.5.6: a reported 2.2.5 structure goes to the cycle its Epoch names; one of an
/// earlier cycle still counts there and in the complete cycle.
#[test]
fn reports_go_to_the_cycle_their_epoch_names() {
    let mut s = Stats::new(4, 0);
    s.add_collection(b"c", 0);
    let rep = |epoch: i64, docs: f64, size: f64, max: f64| {
        flat(&[
            ("Epoch", Value::int(epoch)),
            ("Downloaded", Value::Float(docs)),
            ("DocSize", Value::Float(size)),
            ("DocSizeAvg", Value::Float(size / docs)),
            ("DocSizeMax", Value::Float(max)),
            ("DocumentStore", Value::int(7)),
            ("uris_queued", Value::int(3)),
        ])
    };
    s.apply_report(b"c", &rep(0, 4.0, 4000.0, 1500.0), 10);
    s.apply_report(b"c", &rep(1, 2.0, 500.0, 300.0), 20);
    s.apply_report(b"c", &rep(0, 1.0, 6000.0, 6000.0), 30);
    let c = s.collection(b"c").unwrap();
    assert_eq!(c.table.cycle, 1);
    let cur = c.current();
    assert_eq!((cur.num("Downloaded"), cur.count("DocSize")), (2.0, 2));
    let (n, prev) = c.previous().unwrap();
    assert_eq!(n, 0);
    assert_eq!(prev.num("Downloaded"), 5.0);
    assert_eq!((prev.num("DocSize"), prev.count("DocSize")), (10000.0, 5));
    assert_eq!(prev.max("DocSize"), 6000.0);
    let all = c.table.lifetime();
    assert_eq!(all.num("Downloaded"), 7.0);
    assert!(!all.attrs.contains_key("uris_queued") && !all.attrs.contains_key("DocumentStore"));
}

/// The running 2.2.5 structure of a node or collection: counts add, averages over every
/// sample, maxima the largest, DocumentStore and the rates from the totals.
#[test]
fn aggregated_reports_keep_each_key_meaningful() {
    let mut acc = Value::Dict(Vec::new());
    let rep = |docs: f64, size: f64, max: f64, epoch: i64, stored: f64, deleted: f64| {
        flat(&[
            ("Epoch", Value::int(epoch)),
            ("Downloaded", Value::Float(docs)),
            ("Stored", Value::Float(stored)),
            ("Modified", Value::Float(0.0)),
            ("Deleted", Value::Float(deleted)),
            ("DocSize", Value::Float(size)),
            ("DocSizeAvg", Value::Float(size / docs)),
            ("DocSizeMax", Value::Float(max)),
            ("DocumentStore", Value::int(0)),
            ("FirstUpdate", Value::Float(100.0)),
            ("StatUpdate", Value::Float(110.0)),
            ("ActiveSites", Value::int(docs as i64)),
        ])
    };
    aggregate_report(&mut acc, &rep(4.0, 4000.0, 1500.0, 0, 4.0, 0.0));
    aggregate_report(&mut acc, &rep(1.0, 6000.0, 6000.0, 1, 1.0, 2.0));
    let n = |k: &[u8]| {
        acc.get(k)
            .and_then(|v| v.as_f64().or_else(|| v.as_i64().map(|i| i as f64)))
    };
    assert_eq!(n(b"Downloaded"), Some(5.0));
    assert_eq!(n(b"DocSizeAvg"), Some(2000.0));
    assert_eq!(n(b"DocSizeMax"), Some(6000.0));
    assert_eq!(n(b"Epoch"), Some(1.0));
    assert_eq!(n(b"DocumentStore"), Some(3.0));
    assert_eq!(n(b"ActiveSites"), Some(1.0));
    assert_eq!(n(b"DocRate"), Some(0.5));
}
