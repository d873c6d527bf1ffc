use super::*;
use crate::marshal::Value;

fn delta(cells: &[(&str, u64)], hist: &[(&str, &str, u32)], at: i64) -> SiteDelta {
    let mut d = SiteDelta {
        at,
        ..SiteDelta::default()
    };
    for (name, v) in cells {
        add_cell(&mut d.cells, continuous_index(name).unwrap(), *v);
    }
    for (h, b, n) in hist {
        d.hist
            .push((histogram_index(h).unwrap(), b.to_string(), *n));
    }
    d
}

fn key(c: &str, s: &str) -> (Vec<u8>, String) {
    (c.as_bytes().to_vec(), s.to_string())
}

/// The value of `attr` in a 2.2.4.7 schema dict, under its aggregation type's key.
fn attr<'v>(schema: &'v Value<'static>, kind: &str, attr: &str) -> Option<&'v Value<'static>> {
    schema
        .get(kind.as_bytes())?
        .as_list()?
        .iter()
        .find_map(|p| {
            let p = p.as_tuple()?;
            (p.first()?.as_bytes()? == attr.as_bytes()).then(|| &p[1])
        })
}

#[test]
fn a_site_answers_the_site_schema_with_its_cycle_and_lifetime() {
    let mut s = SiteStats::new();
    let mut d = delta(
        &[
            ("Processed", 1),
            ("Downloaded", 1),
            ("DocSize", 4071),
            ("DLTime", 250_000),
        ],
        &[("HTTPResponse", "200", 1), ("MimeType", "text/html", 1)],
        1000,
    );
    d.started = Some(990);
    d.starts = 1;
    d.last_uri = Some("http://a.com/x".into());
    s.absorb(vec![(key("c", "a.com"), d)], |_| 0);
    let mut d = delta(
        &[("Processed", 1), ("DocSize", 29)],
        &[("DocSkip", "co", 1), ("HTTPResponse", "200", 1)],
        1010,
    );
    d.ended = Some(1011);
    s.absorb(vec![(key("c", "a.com"), d)], |_| 0);
    assert!(!s.site(b"c", "a.com").unwrap().active());
    // 2.2.2.2 hostport with the default port written out finds the crawl site.
    let v = s.site_dict(b"c", "A.com:80", (1440, 1), 2000).unwrap();
    let t = v.get(b"a.com").unwrap().as_tuple().unwrap();
    assert_eq!(t.len(), 2, "(delta, cycles)");
    let cycles = t[1].as_dict().unwrap();
    assert_eq!(cycles[0].0.as_i64(), Some(0));
    assert_eq!(cycles[1].0.as_bytes(), Some(COMPLETE.as_bytes()));
    let all = &cycles[1].1;
    assert_eq!(
        all.get(b"__schemaname__").unwrap().as_bytes(),
        Some(&b"siteschema"[..])
    );
    assert_eq!(all.get(b"name").unwrap().as_bytes(), Some(&b"a.com"[..]));
    let size = attr(all, "continuous", "DocSize")
        .unwrap()
        .as_list()
        .unwrap();
    let nums: Vec<i64> = size.iter().map(|x| x.as_i64().unwrap()).collect();
    assert_eq!(nums, vec![4100, 29, 4071, 2], "[sum, min, max, updates]");
    let dl = attr(all, "continuous", "DLTime")
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(dl[0].as_f64(), Some(0.25));
    let http = attr(all, "histogram", "HTTPResponse")
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(http[0].get(b"200").unwrap().as_i64(), Some(2));
    let skip = attr(all, "histogram", "DocSkip")
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(skip[0].get(b"co").unwrap().as_i64(), Some(1));
    let mime = attr(all, "histogram", "MimeType")
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(mime[0].get(b"text/html").unwrap().as_i64(), Some(1));
    let ended = attr(all, "discrete", "CrawlEnded")
        .unwrap()
        .as_list()
        .unwrap();
    assert_eq!(ended[0].as_i64(), Some(1011));
    let epoch = attr(all, "discrete", "Epoch").unwrap().as_list().unwrap();
    assert_eq!(epoch[0].as_i64(), Some(1));
    let last = attr(all, "discrete", "LastUri").unwrap().as_list().unwrap();
    assert_eq!(last[0].as_bytes(), Some(&b"http://a.com/x"[..]));
    assert!(v.get(b"global").is_none(), "2.2.4: no global for a site");
    assert!(s.site_dict(b"c", "b.com", (0, 0), 0).is_none());
}

#[test]
fn a_new_refresh_cycle_starts_the_current_span_anew() {
    let mut s = SiteStats::new();
    s.absorb(
        vec![(key("c", "a.com"), delta(&[("Stored", 1)], &[], 10))],
        |_| 0,
    );
    s.absorb(
        vec![(key("c", "a.com"), delta(&[("Stored", 1)], &[], 20))],
        |_| 3,
    );
    let v = s.site_dict(b"c", "a.com", (0, 0), 30).unwrap();
    let cycles = v.get(b"a.com").unwrap().as_tuple().unwrap()[1].clone();
    let cur = cycles.get(b"").map(|_| ()).is_none();
    assert!(cur);
    let d = cycles.as_dict().unwrap();
    assert_eq!(d[0].0.as_i64(), Some(3));
    let stored = |s: &Value<'static>| {
        attr(s, "continuous", "Stored").unwrap().as_list().unwrap()[0].as_i64()
    };
    assert_eq!(stored(&d[0].1), Some(1));
    assert_eq!(stored(&d[1].1), Some(2));
}

#[test]
fn the_file_keeps_every_record_and_a_crawl_cut_short_ends() {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("site-statistics");
    let mut s = SiteStats::new();
    let mut d = delta(
        &[("Processed", 3), ("ReadNet", 900)],
        &[("URISkip", "ro", 2), ("MimeType", "text/plain", 1)],
        50,
    );
    d.started = Some(40);
    d.starts = 1;
    d.last_uri = Some("http://b.com/é".into());
    s.absorb(vec![(key("c", "b.com:8080"), d)], |_| 2);
    assert!(s.site(b"c", "b.com:8080").unwrap().active());
    s.save(&path).unwrap();
    let back = SiteStats::load(&path).unwrap();
    let r = back.site(b"c", "b.com:8080").unwrap();
    assert!(!r.active(), "not crawling after a restart");
    assert_eq!(r.ended, 50, "ended at its last update");
    let mut want = s.site(b"c", "b.com:8080").unwrap().clone();
    want.active = false;
    want.ended = 50;
    want.first_ended = 50;
    want.ends = 1;
    assert_eq!(r, &want);
    assert_eq!(
        back.site_dict(b"c", "b.com:8080", (0, 0), 60)
            .map(|v| marshal::to_bytes(&v)),
        s.site_dict(b"c", "b.com:8080", (0, 0), 60).map(|v| {
            // The live record says the crawl goes on; the loaded one that it ended.
            let _ = v;
            marshal::to_bytes(&back.site_dict(b"c", "b.com:8080", (0, 0), 60).unwrap())
        })
    );
    assert!(
        SiteStats::load(&dir.path().join("none"))
            .unwrap()
            .site_count(b"c")
            == 0
    );
    std::fs::write(&path, b"not marshal").unwrap();
    assert!(SiteStats::load(&path).is_err());
}

/// The bytes per site of 10,000 sites with a typical crawl's attributes: the figure the module
/// documentation gives.
#[test]
fn ten_thousand_sites_cost_under_seven_hundred_bytes_each() {
    let mut s = SiteStats::new();
    let typical = [
        ("Processed", 1),
        ("Downloaded", 1),
        ("Stored", 1),
        ("ReadNet", 5000),
        ("WriteNet", 200),
        ("DLTime", 20_000),
        ("DocSize", 4800),
        ("HasLastMod", 1),
        ("HasETag", 1),
        ("Local", 12),
        ("LocalFwd", 3),
    ];
    let hist = [
        ("HTTPResponse", "200", 1),
        ("HTTPResponse", "404", 1),
        ("MimeType", "text/html", 1),
        ("DocSkip", "cs", 1),
    ];
    for i in 0..10_000 {
        let mut d = delta(&typical, &hist, 100);
        d.started = Some(90);
        d.starts = 1;
        d.ended = Some(100);
        d.last_uri = Some(format!("http://www.site{i}.example.com/some/page/{i}.html"));
        s.absorb(
            vec![(key("c", &format!("www.site{i}.example.com")), d)],
            |_| 0,
        );
    }
    let sites = &s.collections[&b"c".to_vec()];
    // A record, its key (a boxed str) and the hash table's slot with its control byte.
    let slot = std::mem::size_of::<(Box<str>, SiteRecord)>() + 1;
    let total: usize = sites
        .iter()
        .map(|(k, r)| r.bytes() - std::mem::size_of::<SiteRecord>() + k.len() + slot)
        .sum::<usize>()
        + (sites.capacity() - sites.len()) * slot;
    let per_site = total / sites.len();
    eprintln!(
        "site statistics: {per_site} bytes per site ({} record, {} slot)",
        std::mem::size_of::<SiteRecord>(),
        slot
    );
    assert!(per_site <= 700, "{per_site} bytes per site");
}

/// One pass of `add_cells` folds exactly as `add_cell` for each update: new attributes
/// inserted in order, present ones folded (sum, updates, smallest, largest).
#[test]
fn add_cells_in_one_pass_equals_add_cell_for_each() {
    let mut rng = fastrand::Rng::with_seed(7);
    for _ in 0..2_000 {
        let mut fast = Vec::new();
        let mut slow = Vec::new();
        for _ in 0..rng.usize(1..6) {
            let mut attrs: Vec<u8> = (0..16).filter(|_| rng.bool()).collect();
            attrs.sort_unstable();
            let ups: Vec<(u8, u64)> = attrs
                .iter()
                .map(|a| (*a, rng.u64(0..u64::from(u32::MAX) * 2)))
                .collect();
            add_cells(&mut fast, ups.iter().copied());
            for (a, v) in &ups {
                add_cell(&mut slow, *a, *v);
            }
            assert_eq!(fast, slow);
        }
    }
}
