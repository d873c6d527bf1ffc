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
fn site_updates_count_for_the_collection_too() {
    let mut s = Stats::new(3, 0);
    s.add_collection(b"c", 0);
    s.add_site(b"c", "a.com:80", "Downloaded", 1.0);
    s.add_site(b"c", "b.com:80", "Downloaded", 1.0);
    s.hist_site(b"c", "a.com:80", "MimeType", "text/html", 1.0);
    let c = s.collection(b"c").unwrap();
    assert_eq!(c.current().num("Downloaded"), 2.0);
    assert_eq!(c.sites["a.com:80"].current().num("Downloaded"), 1.0);
    assert_eq!(c.sites["a.com:80"].delta.schema, "siteschema");
    let d = s.site_dict(b"c", "a.com:80").unwrap();
    assert!(d.get(b"a.com:80").is_some());
    assert!(s.site_dict(b"c", "nope").is_none());
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
    s.add_site(b"c", "x:80", "DocSize", 10.5);
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
