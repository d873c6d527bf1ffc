//! The journal's bookings against the comparison of counters it replaced, over a scripted
//! crawl of several sites in two collections.

use std::sync::Arc;

use super::SiteTally;
use crate::config::CollectionConfig;
use crate::crawl::counters::{doc_skip, uri_skip};
use crate::crawl::{Action, Count, CrawlEngine, EngineOptions, Failure, Fetched, Outcome};
use crate::sched::node::Ready;
use crate::sched::{record, start_uri_entry};
use crate::stats::sites::SiteDelta;

#[path = "site_tally_diffed.rs"]
mod diffed;
use diffed::Diffed;

const COLLS: [&[u8]; 2] = [b"a", b"b"];
const SITES: [&str; 4] = ["h1.example", "h2.example:8080", "10.0.0.7", "h4.example"];

fn engine() -> CrawlEngine {
    let mut e = CrawlEngine::new(EngineOptions {
        site_linger: 0.5,
        ..EngineOptions::default()
    });
    for c in COLLS {
        let mut cfg = CollectionConfig::defaults(&String::from_utf8_lossy(c));
        cfg.delay = 0.0;
        cfg.max_site_connections = 2;
        // Collection b crawls its start URIs alone: every link is too deep.
        if c == b"b" {
            cfg.max_depth = Some(0);
        }
        e.set_config(c, Arc::new(cfg));
    }
    e
}

fn ready(coll: &[u8], uri: &str, seq: u64) -> Ready {
    Ready {
        collection: coll.to_vec(),
        site: crate::routing::crawl_site(uri.as_bytes()).unwrap(),
        ip: "127.0.0.9".into(),
        record: record(&start_uri_entry(uri.as_bytes()), false),
        seq,
        conditional: Vec::new(),
    }
}

fn fetched(status: u16, headers: &[(&str, &str)], body: &str, truncated: bool) -> Fetched {
    Fetched {
        status,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.as_bytes().to_vec()))
            .collect(),
        body: body.as_bytes().to_vec(),
        truncated,
        checksum: None,
    }
}

/// One of the outcomes a crawl meets, chosen by `k`.
fn outcome(id: u64, url: &str, k: u32, rng: &mut fastrand::Rng) -> Outcome {
    let html = "text/html; charset=utf-8";
    let result = if url.ends_with("/robots.txt") {
        match k % 4 {
            0 => Ok(fetched(404, &[], "", false)),
            1 => Err(Failure::ConnectTimeout),
            _ => Ok(fetched(
                200,
                &[("content-type", "text/plain")],
                "User-agent: *\nDisallow: /private\nSitemap: http://h1.example/sitemap.xml\n",
                false,
            )),
        }
    } else {
        let n = rng.u32(0..1000);
        let page = format!(
            "<html><a href=\"/p{n}\">in</a><a href=\"http://{}/q{n}\">out</a>\
             <a href=\"mailto:x@example.com\">mail</a><a href=\"/private/{n}\">p</a></html>",
            SITES[rng.usize(0..SITES.len())]
        );
        match k % 12 {
            0..=2 => Ok(fetched(
                200,
                &[("content-type", html), ("etag", "\"x\"")],
                &page,
                false,
            )),
            3 => Ok(fetched(
                200,
                &[("content-type", html)],
                &format!("<meta name=\"robots\" content=\"noindex,nofollow\">{page}"),
                false,
            )),
            4 => Ok(fetched(
                200,
                &[("content-type", "text/plain"), ("last-modified", "x")],
                "plain",
                false,
            )),
            5 => Ok(fetched(404, &[("content-type", html)], "gone", false)),
            6 => Ok(fetched(
                301,
                &[("location", &format!("/moved{n}"))],
                "",
                false,
            )),
            7 => Err(Failure::Refused),
            8 => Ok(fetched(304, &[], "", false)),
            9 => Ok(fetched(200, &[("content-type", "image/png")], "png", false)),
            10 => Ok(fetched(200, &[("content-type", html)], "", false)),
            _ => Ok(fetched(200, &[("content-type", html)], &page, true)),
        }
    };
    Outcome {
        id,
        result,
        elapsed: f64::from(rng.u32(1..400_000)) * 1e-6,
        net_read: u64::from(rng.u32(0..5000)),
        net_written: u64::from(rng.u32(0..300)),
    }
}

fn sorted(mut v: Vec<((Vec<u8>, String), SiteDelta)>) -> Vec<((Vec<u8>, String), SiteDelta)> {
    v.sort_by(|x, y| x.0.cmp(&y.0));
    v
}

#[test]
fn journal_bookings_equal_the_diffed_counters_over_a_scripted_crawl() {
    let mut rng = fastrand::Rng::with_seed(28);
    let mut e = engine();
    let (mut new, mut old) = (SiteTally::new(), Diffed::new());
    let mut seq = 0;
    let mut compared = 0;
    let mut pages = 0;
    let mut clock = 0.0;
    for round in 0..400 {
        let now = 1_000 + round;
        clock += 0.1;
        // Entries for a few sites of either collection.
        for _ in 0..rng.usize(0..4) {
            seq += 1;
            let coll = COLLS[rng.usize(0..2)];
            let site = SITES[rng.usize(0..SITES.len())];
            let path = if rng.u8(0..8) == 0 { "private/x" } else { "p" };
            let r = ready(coll, &format!("http://{site}/{path}{seq}"), seq);
            new.started(coll, &r.site, now);
            old.started(coll, &r.site, now);
            e.push(r);
        }
        // Counts outside any operation (a refresh cycle's skips): neither books them.
        if rng.u8(0..5) == 0 {
            let c = e.counters_mut(COLLS[rng.usize(0..2)]);
            c.skip_uri(uri_skip::CACHE);
            c.add(Count::Processed, 2);
        }
        let (reqs, done) = e.poll(clock);
        new.requested(&mut e, &reqs, now);
        old.requested(&e, &reqs, now);
        for a in done {
            if let Action::SiteDone { collection, site } = a {
                new.ended(&collection, &site, now);
                old.ended(&collection, &site, now);
            }
        }
        for r in reqs {
            let coll = e.collection_of(r.id).unwrap().to_vec();
            let o = outcome(r.id, &r.url, rng.u32(..), &mut rng);
            old.before(&e, &coll);
            let actions = new.complete(&mut e, o, clock, now);
            old.after_uri(&e, &coll, r.url.as_bytes(), now);
            for a in actions {
                let Action::Document(d) = a else {
                    continue;
                };
                pages += 1;
                // The document's verdict, as the node scheduler's shell counts it.
                new.before(&mut e, &d.collection);
                old.before(&e, &d.collection);
                let c = e.counters_mut(&d.collection);
                match rng.u8(0..5) {
                    0 => c.skip_doc(doc_skip::DUPLICATE),
                    1 => c.add(Count::Unchanged, 1),
                    2 => c.add(Count::Deleted, 1),
                    3 => {
                        c.add(Count::Stored, 1);
                        c.add(Count::Modified, 1);
                    }
                    _ => c.add(Count::Stored, 1),
                }
                new.after_uri(&mut e, &d.collection, &d.uri, now);
                old.after_uri(&e, &d.collection, &d.uri, now);
            }
        }
        if round % 7 == 0 {
            let (n, o) = (sorted(new.take()), sorted(old.take()));
            assert_eq!(n, o, "round {round}");
            compared += n.len();
        }
    }
    let (n, o) = (sorted(new.take()), sorted(old.take()));
    assert_eq!(n, o);
    compared += n.len();
    // The script did crawl: pages reached their verdicts, deltas were compared.
    assert!(pages > 100, "{pages} pages");
    assert!(compared > 100, "{compared} deltas");
    let mut all = e.counters(b"a").unwrap().clone();
    all.merge(e.counters(b"b").unwrap());
    for code in [uri_skip::ROBOTS, uri_skip::DEPTH, uri_skip::NOFOLLOW] {
        assert!(all.uri_skip.contains_key(code), "{code} never counted");
    }
    for code in [
        doc_skip::CONNECT,
        doc_skip::MIME,
        doc_skip::TOO_LARGE,
        doc_skip::EMPTY,
        doc_skip::NOINDEX,
    ] {
        assert!(all.doc_skip.contains_key(code), "{code} never counted");
    }
    assert!(all.has_sitemap > 0 && all.local > 0 && all.local_fwd > 0 && all.redirects > 0);
}

#[test]
fn a_status_bucket_is_named_in_decimal() {
    use super::bucket_name;
    use crate::crawl::counted::Bucket;
    for s in [0u16, 7, 42, 200, 304, 9999, 65535] {
        let mut d = [0u8; 5];
        assert_eq!(bucket_name(&Bucket::Status(s), &mut d), s.to_string());
    }
}

#[test]
fn a_site_crawled_again_starts_again_and_removal_forgets_the_collection() {
    let mut t = SiteTally::new();
    t.started(b"a", "s", 5);
    t.started(b"a", "s", 6);
    t.ended(b"a", "s", 7);
    t.ended(b"a", "s", 8);
    t.started(b"a", "s", 9);
    t.started(b"b", "s", 9);
    let got = sorted(t.take());
    assert_eq!(got.len(), 2);
    assert_eq!(
        (
            got[0].1.starts,
            got[0].1.started,
            got[0].1.ended,
            got[0].1.at
        ),
        (2, Some(9), None, 9)
    );
    t.started(b"a", "t", 10);
    t.remove_collection(b"a");
    assert!(t.take().is_empty());
    // The removed collection's active sites went with it: a start counts again.
    t.started(b"a", "s", 11);
    assert_eq!(t.take()[0].1.starts, 1);
}
