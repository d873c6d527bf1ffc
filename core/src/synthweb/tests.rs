//! The generator against a reference crawler that sees the web only through `respond`, as a
//! server's client would, and applies the collection's rules through `CollectionConfig`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};

use regex::Regex;
use url::Url;

use super::*;
use crate::config::{parse_xml, CollectionConfig};

const BASE: Ipv4Addr = Ipv4Addr::new(127, 77, 0, 1);
const PORT: u16 = 8080;

fn web(spec: &str) -> SyntheticWeb {
    SyntheticWeb::generate(&spec.parse().unwrap(), BASE, PORT)
}

fn config(web: &SyntheticWeb) -> CollectionConfig {
    let specs = parse_xml(&web.collection_xml("synth")).unwrap();
    assert_eq!(specs.len(), 1);
    CollectionConfig::from_dict(&specs[0].0, &specs[0].1).unwrap()
}

fn addr_of(u: &Url) -> SocketAddr {
    SocketAddr::new(
        u.host_str().unwrap().parse().unwrap(),
        u.port_or_known_default().unwrap(),
    )
}

/// A breadth-first crawler of `web` over `respond`: robots.txt per host (`Disallow` prefixes)
/// and, when the collection reads sitemaps, /sitemap.xml per host,
/// the collection's include/exclude rules, allowed types and max_doc_size, meta robots, meta
/// refresh and redirects; links from `<a href>`, `<img src>` and `<link href>`.
fn reference_crawl(web: &SyntheticWeb) -> (Expected, Vec<(String, String, String)>) {
    let cfg = config(web);
    let links =
        Regex::new(r#"<(?:a href|img src|link rel="next" href)="([^"]*)"(?:>([^<]*)</a>)?"#)
            .unwrap();
    let meta = Regex::new(r#"<meta name="robots" content="([^"]*)">"#).unwrap();
    let refresh = Regex::new(r#"<meta http-equiv="refresh" content="0; url=([^"]*)">"#).unwrap();
    let mut e = Expected::default();
    let mut edges = Vec::new();
    let mut robots: HashMap<SocketAddr, Vec<String>> = HashMap::new();
    let mut storable: Vec<(String, Vec<u8>)> = Vec::new();
    let mut queue: VecDeque<String> = web.start_uris().into();
    let mut seen: BTreeSet<String> = queue.iter().cloned().collect();
    while let Some(url) = queue.pop_front() {
        let u = Url::parse(&url).unwrap();
        let addr = addr_of(&u);
        let disallow = robots.entry(addr).or_insert_with(|| {
            let r = web.respond(addr, "/robots.txt");
            e.fetched.insert(u.join("/robots.txt").unwrap().to_string());
            // The collection reads sitemaps: /sitemap.xml too, its <loc>s queued like links.
            if cfg.sitemaps {
                let map = u.join("/sitemap.xml").unwrap().to_string();
                let m = web.respond(addr, "/sitemap.xml");
                e.fetched.insert(map);
                let text = String::from_utf8(m.body).unwrap();
                for loc in text.split("<loc>").skip(1) {
                    let loc = loc.split("</loc>").next().unwrap().to_string();
                    if seen.insert(loc.clone()) {
                        queue.push_back(loc);
                    }
                }
            }
            let text = String::from_utf8(r.body).unwrap();
            match r.status {
                200 => text
                    .lines()
                    .filter_map(|l| l.strip_prefix("Disallow:"))
                    .map(|p| p.trim().to_string())
                    .filter(|p| !p.is_empty())
                    .collect(),
                _ => Vec::new(),
            }
        });
        if !cfg.allows(&url) || disallow.iter().any(|p| u.path().starts_with(p.as_str())) {
            e.never.insert(url);
            continue;
        }
        let r = web.respond(addr, u.path());
        e.fetched.insert(url.clone());
        if !r.delay.is_zero() {
            e.slow.insert(url.clone());
        }
        let mut discover = |to: Url| {
            let to = to.to_string();
            if seen.insert(to.clone()) {
                queue.push_back(to);
            }
        };
        match r.status {
            301 | 302 => {
                let to = u.join(r.header("Location").unwrap()).unwrap();
                e.redirects.push((url, to.to_string(), r.status));
                discover(to);
                continue;
            }
            404 => {
                e.not_found.insert(url);
                continue;
            }
            200 => {}
            s => panic!("{url}: status {s}"),
        }
        let ctype = r.header("Content-Type").unwrap();
        if !cfg.allows_type(ctype) || r.body.len() as u64 > cfg.max_doc_size {
            continue;
        }
        let html = std::str::from_utf8(&r.body).unwrap();
        if let Some(c) = refresh.captures(html) {
            let to = u.join(&c[1]).unwrap();
            e.meta_refresh.push((url, to.to_string()));
            discover(to);
            continue;
        }
        let robots_meta = meta
            .captures(html)
            .map_or("", |c| c.get(1).unwrap().as_str());
        if !robots_meta.contains("noindex") {
            storable.push((url.clone(), r.body.clone()));
        }
        if robots_meta.contains("nofollow") {
            continue;
        }
        for c in links.captures_iter(html) {
            let mut to = u.join(&c[1]).unwrap();
            to.set_fragment(None);
            let anchor = c.get(2).map_or("", |a| a.as_str()).to_string();
            edges.push((url.clone(), to.to_string(), anchor));
            discover(to);
        }
    }
    let mut by_body: HashMap<Vec<u8>, Vec<String>> = HashMap::new();
    for (url, body) in storable {
        by_body.entry(body).or_default().push(url);
    }
    for (_, mut urls) in by_body {
        if urls.len() > 1 {
            urls.sort();
            e.duplicate_groups.push(urls);
        } else {
            e.stored.extend(urls);
        }
    }
    (e, edges)
}

fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

fn assert_matches_reference(web: &SyntheticWeb) {
    let (reference, mut ref_edges) = reference_crawl(web);
    let e = web.expected();
    assert_eq!(e.fetched, reference.fetched);
    assert_eq!(e.never, reference.never);
    assert_eq!(e.stored, reference.stored);
    assert_eq!(e.not_found, reference.not_found);
    assert_eq!(e.slow, reference.slow);
    assert_eq!(sorted(&e.redirects), sorted(&reference.redirects));
    assert_eq!(sorted(&e.meta_refresh), sorted(&reference.meta_refresh));
    let groups: Vec<Vec<String>> = e.duplicate_groups.iter().map(|g| sorted(g)).collect();
    assert_eq!(sorted(&groups), sorted(&reference.duplicate_groups));
    assert!(e.never.is_disjoint(&e.fetched));
    let mut edges = web.link_graph();
    edges.sort();
    ref_edges.sort();
    assert_eq!(edges, ref_edges);
}

#[test]
fn expected_sets_match_a_reference_crawl() {
    for spec in ["1:1", "1:7", "2:5", "3:30", "20:50", "7:230"] {
        assert_matches_reference(&web(spec));
    }
    for seed in [2, 99] {
        let spec = WebSpec {
            seed,
            ..("5:120".parse().unwrap())
        };
        assert_matches_reference(&SyntheticWeb::generate(&spec, BASE, PORT));
    }
}

#[test]
fn plain_webs_match_a_reference_crawl_and_hold_only_pages() {
    for spec in ["1:10", "20:50"] {
        let spec = WebSpec {
            plain: true,
            ..spec.parse().unwrap()
        };
        let web = SyntheticWeb::generate(&spec, BASE, PORT);
        assert_matches_reference(&web);
        let e = web.expected();
        assert!(e.never.is_empty() && e.not_found.is_empty() && e.slow.is_empty());
        assert!(e.redirects.is_empty() && e.meta_refresh.is_empty());
        assert!(e.duplicate_groups.is_empty());
        let pages = e.fetched.iter().filter(|u| !u.ends_with("/robots.txt"));
        assert!(pages.clone().all(|u| e.stored.contains(u)));
        assert_eq!(pages.count(), spec.hosts * spec.pages);
    }
}

#[test]
fn every_rule_appears_on_a_small_web() {
    let web = web("20:50");
    let e = web.expected();
    let url = |h: usize, path: &str| format!("http://{}{path}", web.hosts()[h]);
    // Every tree page of every host is reached.
    for h in 0..20 {
        for i in 0..50u32 {
            assert!(e.fetched.contains(&web.url(h as u32, Page::Tree(i))));
        }
        assert!(e.fetched.contains(&url(h, "/robots.txt")));
    }
    // robots.txt: disallowed on host 0, allowed on host 1 (404), Crawl-delay on host 2.
    assert!(e.never.contains(&url(0, "/private/v0.html")));
    assert!(e.stored.contains(&url(1, "/private/v0.html")));
    assert_eq!(web.respond(web.hosts()[1], "/robots.txt").status, 404);
    let robots = web.respond(web.hosts()[2], "/robots.txt");
    assert_eq!(
        robots.body,
        b"User-agent: *\nDisallow: /private/\nCrawl-delay: 1\n"
    );
    assert!(e.never.contains(&url(1, "/excluded/e0.html")));
    // Meta robots, MIME, size.
    assert!(
        e.fetched.contains(&url(0, "/s0/p1.html")) && !e.stored.contains(&url(0, "/s0/p1.html"))
    );
    assert!(e.stored.contains(&url(3, "/nf/n0.html")));
    assert!(!e.fetched.contains(&url(3, "/orphan/o0.html")));
    assert!(
        e.fetched.contains(&url(4, "/img/i0.png")) && !e.stored.contains(&url(4, "/img/i0.png"))
    );
    assert!(e.fetched.contains(&url(0, "/big.html")) && !e.stored.contains(&url(0, "/big.html")));
    let big = web.respond(web.hosts()[0], "/big.html");
    assert_eq!(big.body.len(), BIG_SIZE);
    assert!(big.body.len() as u64 > config(&web).max_doc_size);
    assert!(e.not_found.contains(&url(5, "/missing/m0.html")));
    assert!(e.slow.contains(&url(0, "/s0/p2.html")));
    let delay = web.respond(web.hosts()[0], "/s0/p2.html").delay;
    assert!((200..=500).contains(&delay.as_millis()));
    // Redirects: a 301, a 302 -> 301 chain, a meta refresh.
    assert!(e
        .redirects
        .contains(&(url(6, "/r/m0"), url(6, "/t/m0.html"), 301)));
    assert!(e
        .redirects
        .contains(&(url(6, "/r/a0"), url(6, "/r/b0"), 302)));
    assert!(e
        .redirects
        .contains(&(url(6, "/r/b0"), url(6, "/t/c0.html"), 301)));
    assert!(e
        .meta_refresh
        .contains(&(url(6, "/mr/f0.html"), url(6, "/t/f0.html"))));
    for t in ["/t/m0.html", "/t/c0.html", "/t/f0.html"] {
        assert!(e.stored.contains(&url(6, t)));
    }
    // Duplicates within a host and across two.
    let within = vec![url(7, "/dup/a0.html"), url(7, "/dup/b0.html")];
    let across = sorted(&[url(8, "/xdup/x0.html"), url(9, "/xdup/x0.html")]);
    assert!(e.duplicate_groups.contains(&within));
    assert!(e.duplicate_groups.contains(&across));
    assert_eq!(e.duplicate_groups.len(), 20 + 10);
    // About 20% of the random links cross hosts.
    let graph = web.link_graph();
    let host = |u: &str| u.split('/').nth(2).unwrap().to_string();
    let crossing = graph.iter().filter(|(f, t, _)| host(f) != host(t)).count();
    let share = crossing as f64 / graph.len() as f64;
    assert!(
        (0.05..0.3).contains(&share),
        "{crossing} of {}",
        graph.len()
    );
}

#[test]
fn hrefs_come_in_every_form() {
    let web = web("4:60");
    let mut html = String::new();
    for i in 0..60 {
        let r = web.respond(web.hosts()[0], &Page::Tree(i).path());
        html.push_str(std::str::from_utf8(&r.body).unwrap());
    }
    for form in [
        "href=\"http://127.77.0.1:8080/",
        "href=\"http://127.77.0.",
        "href=\"/s",
        "href=\"../",
        "href=\"../\"",
        "#top\"",
        "#sec",
        "<link rel=\"next\" href=\"",
        "<img src=\"/img/",
    ] {
        assert!(html.contains(form), "no {form}");
    }
    assert!(Regex::new(r#"href="p[0-9]+\.html"#)
        .unwrap()
        .is_match(&html));
    // Anchor texts name their target, and no two targets share one.
    let mut labels: HashMap<String, String> = HashMap::new();
    for (_, to, anchor) in web.link_graph() {
        if !anchor.is_empty() {
            assert_eq!(
                labels.entry(anchor.clone()).or_insert(to.clone()),
                &to,
                "{anchor}"
            );
        }
    }
}

#[test]
fn generation_is_deterministic_and_seeded() {
    let a = web("6:80");
    let b = web("6:80");
    assert_eq!(a.expected(), b.expected());
    assert_eq!(a.link_graph(), b.link_graph());
    for h in 0..6 {
        for p in a.pages_of(h) {
            let addr = a.hosts()[h as usize];
            assert_eq!(a.respond(addr, &p.path()), b.respond(addr, &p.path()));
        }
    }
    let other = WebSpec {
        seed: 7,
        ..("6:80".parse().unwrap())
    };
    let c = SyntheticWeb::generate(&other, BASE, PORT);
    assert_ne!(a.link_graph(), c.link_graph());
}

#[test]
fn paths_round_trip_and_unknown_paths_are_404() {
    let web = web("3:250");
    for h in 0..3 {
        for p in web.pages_of(h) {
            assert_eq!(Page::parse(&p.path()), Some(p), "{}", p.path());
        }
    }
    let host = web.hosts()[0];
    for path in [
        "/s0/p01.html",
        "/s1/p1.html",
        "/s0/p250.html",
        "/?x",
        "/r/m",
        "/r/m99",
        "/private/v-1.html",
        "",
        "robots.txt",
        "/missing/m0.html",
        "/s0/p1.htm",
    ] {
        assert_eq!(web.respond(host, path).status, 404, "{path}");
    }
    // Unknown host; the big page lives on host 0 only.
    let stranger: SocketAddr = "127.0.0.1:8080".parse().unwrap();
    assert_eq!(web.respond(stranger, "/").status, 404);
    assert_eq!(web.respond(web.hosts()[1], "/big.html").status, 404);
    // Cross-host duplicates exist only on hosts with a partner.
    assert_eq!(web.respond(web.hosts()[2], "/xdup/x0.html").status, 404);
    assert_eq!(web.respond(web.hosts()[1], "/xdup/x0.html").status, 200);
}

#[test]
fn collection_xml_parses_with_the_rules_of_the_web() {
    let web = web("300:2");
    let cfg = config(&web);
    assert_eq!(cfg.start_uris, web.start_uris());
    assert_eq!(cfg.delay, 0.0);
    assert!(cfg.robots && cfg.check_meta_robots && !cfg.obey_robots_delay);
    assert_eq!(cfg.max_doc_size, 5_242_880);
    let hosts = web.hosts();
    assert!(cfg.allows(&format!("http://{}/s0/p1.html", hosts[299])));
    assert!(!cfg.allows(&format!("http://{}/excluded/e0.html", hosts[299])));
    assert!(!cfg.allows("http://127.0.0.1:8080/"));
    assert!(!cfg.allows_type("image/png") && cfg.allows_type("text/html; charset=utf-8"));
    let named = parse_xml(&web.collection_xml("a<b&\"c\"")).unwrap();
    assert_eq!(named[0].0, "a<b&\"c\"");
}

#[test]
fn host_addresses_skip_network_and_broadcast_octets() {
    let web = SyntheticWeb::generate(&"600:1".parse().unwrap(), Ipv4Addr::new(127, 77, 0, 0), 1);
    let hosts = web.hosts();
    assert_eq!(hosts[0].to_string(), "127.77.0.1:1");
    assert_eq!(hosts[254].to_string(), "127.77.1.1:1");
    let distinct: BTreeSet<_> = hosts.iter().collect();
    assert_eq!(distinct.len(), 600);
    assert!(hosts.iter().all(|a| match a.ip() {
        std::net::IpAddr::V4(ip) => !matches!(ip.octets()[3], 0 | 255),
        std::net::IpAddr::V6(_) => false,
    }));
}

#[test]
fn web_specs_parse_and_refuse() {
    let s: WebSpec = "20:500".parse().unwrap();
    assert_eq!(
        (s.hosts, s.pages, s.seed, s.plain),
        (20, 500, WebSpec::DEFAULT_SEED, false)
    );
    for bad in ["", "20", "20:", ":5", "a:5", "2:3:4", "-1:5"] {
        assert_eq!(
            bad.parse::<WebSpec>(),
            Err(WebSpecError::Format(bad.into())),
            "{bad}"
        );
    }
    assert_eq!(
        "0:5".parse::<WebSpec>(),
        Err(WebSpecError::OutOfRange {
            what: "hosts",
            value: 0,
            max: WebSpec::MAX_HOSTS
        })
    );
    assert!(matches!(
        "5:99999999".parse::<WebSpec>(),
        Err(WebSpecError::OutOfRange { what: "pages", .. })
    ));
}

#[test]
fn a_large_web_reaches_every_page() {
    let spec: WebSpec = "1000:100".parse().unwrap();
    let web = SyntheticWeb::generate(&spec, BASE, PORT);
    let e = web.expected();
    let tree = e
        .fetched
        .iter()
        .filter(|u| u.ends_with('/') || (u.contains("/s") && !u.ends_with("/sitemap.xml")))
        .count();
    assert_eq!(tree, 1000 * 100);
    assert_eq!(
        e.fetched
            .iter()
            .filter(|u| u.ends_with("/robots.txt"))
            .count(),
        1000
    );
}

/// The rounds of changes a modification log is fed from name exactly the pages whose version
/// (their ETag and body) moves at that round.
#[test]
fn changed_in_round_names_the_pages_whose_version_moves() {
    let spec: WebSpec = "3:200".parse().unwrap();
    let since = 1_800_000_000;
    let web =
        SyntheticWeb::generate(&spec, "127.77.0.1".parse().unwrap(), 8080).publishing(Publish {
            robots_sitemap: true,
            since,
            changes: Some("5%/10".parse().unwrap()),
        });
    assert_eq!(web.round_at(since + 9), 0);
    assert_eq!(web.round_at(since + 10), 1);
    assert_eq!(web.round_time(3), since + 30);
    let mut named = 0;
    for h in 0..3u32 {
        for r in 1..=6u64 {
            let changed = web.changed_in_round(h, r);
            named += changed.len();
            for i in 0..200u32 {
                let before = web.version(h, i, web.round_time(r) - 1).0;
                let (after, at) = web.version(h, i, web.round_time(r));
                let path = Page::Tree(i).path();
                assert_eq!(
                    changed.contains(&path),
                    after == before + 1,
                    "{h} {path} {r}"
                );
                if after > before {
                    assert_eq!(at, web.round_time(r));
                }
            }
        }
    }
    // About 5% of 3 x 199 pages over six rounds.
    assert!((60..=300).contains(&named), "{named}");
    let still = SyntheticWeb::generate(&spec, "127.77.0.1".parse().unwrap(), 8080);
    assert_eq!(still.round_at(since + 100), 0);
    assert!(still.changed_in_round(0, 1).is_empty());
}
