//! Criterion benches of the functions every fetched page goes through on a node and at the
//! duplicate server (docs/performance.md lists where each stands in the profiles):
//!
//! - `links/extract`: link extraction from a page of the plain synthetic web (about 30 links:
//!   tokenizing, resolution against the page's URL, normalization), in bytes per second;
//! - `links/resolve`: resolving hrefs of every form against a page URL, per href;
//! - `url/parse_whole`: a site's queued URIs parsed whole by the url crate (the host's IDNA
//!   mapping and IPv4 reading each time), per URI, and `url/parse_on_site` the same through
//!   the site's first parsed URL (`crawl::parse_on_site`, as the engine parses what it requests);
//! - `site/crawl_site`: the crawl site of a link (the routing key and the same-site test), and
//!   `site/same_site` the engine's same-site test of the page's links (`routing::SameSite`:
//!   links written with the page's authority answered by comparing bytes);
//! - `robots/allowed`: a robots.txt match (RFC 9309) on a parsed file of a dozen rules, and
//!   `robots/allowed_url` the same on URLs already parsed (as the engine matches them);
//! - `tally/page`: one page's counts booked to its site for the per-site statistics;
//! - `rules/refusal`: a link against the collection rules `bench crawl` uses (include_domains
//!   the web's hosts, exclude_uris one regexp), per link; `rules/refusal_known_domain` the same
//!   with the host rules' verdict known from the page (the engine's path for a page's links
//!   written with its authority);
//!   `rules/uri_regexp` that regexp alone (a straight pattern, matched in one pass), and
//!   `rules/uri_regexp_set` a pattern of the same links the regex set matches;
//! - `queue/decode_entry`: a crawl queue record decoded (each taken entry is, four times), and
//!   `queue/encode_entry` the record of a link written;
//! - `checksum/add`: PPDUP_ADD's insert into the sharded checksum table, new checksums, and
//!   the same through the durable store (table and write-ahead log, written but not synced);
//! - `seen/page_of_links`: a page's eight links asked of a seen set of a million URIs (larger
//!   than the cache), all seen before, one after another; `seen/page_of_links_prefetched` the
//!   same with their places prefetched first, as the crawler asks for a page's links.
//!
//! `cargo bench --bench crawl_path`.

mod common;

use std::hint::black_box;
use std::time::Duration;

use crawlfleet_core::checksum::durable::DupStores;
use crawlfleet_core::checksum::ChecksumStore;
use crawlfleet_core::config::{CollectionConfig, RuleSet, RuleTarget};
use crawlfleet_core::crawl::links;
use crawlfleet_core::crawl::robots::Rules;
use crawlfleet_core::crawl::site_tally::SiteTally;
use crawlfleet_core::crawl::{Count, CrawlEngine, EngineOptions};
use crawlfleet_core::msg::{Checksum, CrawlQueueEntry, UriStructure};
use crawlfleet_core::queue;
use crawlfleet_core::routing::{crawl_site, SameSite};
use crawlfleet_core::sched::seen::SeenSet;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use url::Url;

fn bench_links(c: &mut Criterion) {
    let (url, body) = common::plain_page();
    let n = links::extract(&body, &url, links::tags::A | links::tags::LINK)
        .links
        .len();
    assert!(n > 5, "the page has links ({n})");
    let mut g = c.benchmark_group("links");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("extract", |b| {
        b.iter(|| links::extract(black_box(&body), &url, links::tags::A | links::tags::LINK))
    });
    let hrefs = [
        "http://127.77.0.3:8080/s2/p41.html",
        "/s7/p140.html#part",
        "p118.html",
        "../s1/p30.html",
        "../",
        "HTTP://127.77.0.2:8080/./s0/../s0/p3.html",
    ];
    g.throughput(Throughput::Elements(hrefs.len() as u64));
    g.bench_function("resolve", |b| {
        b.iter(|| {
            for h in &hrefs {
                black_box(links::resolve(&url, black_box(h)));
            }
        })
    });
    g.finish();
    let queued = [
        "http://127.77.0.3:8080/s2/p41.html",
        "http://127.77.0.3:8080/s7/p140.html",
        "http://127.77.0.3:8080/",
        "http://127.77.0.3:8080/robots.txt",
        "http://127.77.0.3:8080/s1/p30.html?page=2",
        "http://127.77.0.3:8080/s0/p3.html",
    ];
    let mut g = c.benchmark_group("url");
    g.throughput(Throughput::Elements(queued.len() as u64));
    g.bench_function("parse_whole", |b| {
        b.iter(|| {
            for u in &queued {
                black_box(Url::parse(black_box(u)).ok());
            }
        })
    });
    let mut origin = None;
    crawlfleet_core::crawl::parse_on_site(&mut origin, queued[0]);
    assert!(origin.is_some(), "the site's first URL is kept");
    g.bench_function("parse_on_site", |b| {
        b.iter(|| {
            for u in &queued {
                black_box(crawlfleet_core::crawl::parse_on_site(
                    &mut origin,
                    black_box(u),
                ));
            }
        })
    });
    g.finish();
    let mut g = c.benchmark_group("site");
    let uris: Vec<String> = hrefs
        .iter()
        .filter_map(|h| links::resolve(&url, h))
        .map(String::from)
        .collect();
    g.throughput(Throughput::Elements(uris.len() as u64));
    g.bench_function("crawl_site", |b| {
        b.iter(|| {
            for u in &uris {
                black_box(crawl_site(black_box(u.as_bytes())));
            }
        })
    });
    let page_site = crawl_site(url.as_str().as_bytes()).expect("the page's site");
    g.bench_function("same_site", |b| {
        b.iter(|| {
            let same = SameSite::new(black_box(url.as_str()), &page_site);
            for u in &uris {
                black_box(same.is_same(black_box(u)));
            }
        })
    });
    g.finish();
}

fn bench_robots(c: &mut Criterion) {
    let text = b"User-agent: *\nDisallow: /private/\nDisallow: /cgi-bin/\nDisallow: /*.pdf$\n\
Allow: /private/public/\nDisallow: /tmp\nDisallow: /search?\n\nUser-agent: crawlfleet\n\
Disallow: /no-crawlfleet/\nAllow: /no-crawlfleet/yes/\nDisallow: /*?session=\nCrawl-delay: 0\n\
Sitemap: http://127.77.0.1:8080/sitemap.xml\n";
    let rules = Rules::from_fetch("crawlfleet", Some(200), text);
    let uris = [
        "http://127.77.0.1:8080/s5/p117.html",
        "http://127.77.0.1:8080/no-crawlfleet/x.html",
        "http://127.77.0.1:8080/no-crawlfleet/yes/x.html",
        "http://127.77.0.1:8080/a/b/c/d.pdf",
        "http://127.77.0.1:8080/page?session=12",
    ];
    assert!(rules.allowed(uris[0]) && !rules.allowed(uris[1]) && rules.allowed(uris[2]));
    let mut g = c.benchmark_group("robots");
    g.throughput(Throughput::Elements(uris.len() as u64));
    g.bench_function("allowed", |b| {
        b.iter(|| {
            for u in &uris {
                black_box(rules.allowed(black_box(u)));
            }
        })
    });
    // The engine's match: the entry's URL parsed once, for this and for its request.
    let parsed: Vec<Url> = uris.iter().map(|u| Url::parse(u).expect("url")).collect();
    g.bench_function("allowed_url", |b| {
        b.iter(|| {
            for u in &parsed {
                black_box(rules.allowed_url(black_box(u)));
            }
        })
    });
    g.finish();
}

/// What one page's outcome and verdict count, booked to its site by the per-site tally: the
/// journal of the collection's counters read into the site's pending delta.
fn bench_tally(c: &mut Criterion) {
    let mut e = CrawlEngine::new(EngineOptions::default());
    e.set_config(
        b"bench",
        std::sync::Arc::new(CollectionConfig::defaults("bench")),
    );
    let mut t = SiteTally::new();
    let mut g = c.benchmark_group("tally");
    g.throughput(Throughput::Elements(1));
    g.bench_function("page", |b| {
        b.iter(|| {
            t.before(&mut e, b"bench");
            let k = e.counters_mut(b"bench");
            k.count_download(0.0123);
            k.add(Count::ReadNet, 2_400);
            k.add(Count::WriteNet, 120);
            k.add(Count::Downloaded, 1);
            k.http_status(200);
            k.mime_type("text/html");
            k.count_doc(2_172);
            k.add(Count::Local, 7);
            t.after(&mut e, b"bench", "127.77.0.1:8080", 1_000);
            t.before(&mut e, b"bench");
            e.counters_mut(b"bench").add(Count::Stored, 1);
            t.after(&mut e, b"bench", "127.77.0.1:8080", 1_000);
        })
    });
    g.finish();
    black_box(t.take());
}

fn bench_rules_and_queue(c: &mut Criterion) {
    let mut cfg = CollectionConfig::defaults("bench");
    let hosts: Vec<String> = (1..=5).map(|i| format!("127.77.0.{i}")).collect();
    cfg.include_domains = RuleSet::parse(RuleTarget::Domain, &hosts).expect("hosts");
    cfg.exclude_uris =
        RuleSet::parse(RuleTarget::Uri, &[crawlfleet_core::synthweb::EXCLUDE_RULE]).expect("rule");
    let uris = [
        "http://127.77.0.1:8080/s5/p117.html",
        "http://127.77.0.3:8080/s2/p41.html",
        "http://127.77.0.2:8080/excluded/x.html",
        "http://127.77.0.9:8080/s0/p3.html",
    ];
    assert!(cfg.refusal(uris[0]).is_none() && cfg.refusal(uris[2]).is_some());
    let mut g = c.benchmark_group("rules");
    g.throughput(Throughput::Elements(uris.len() as u64));
    g.bench_function("refusal", |b| {
        b.iter(|| {
            for u in &uris {
                black_box(cfg.refusal_with(black_box(u), true));
            }
        })
    });
    let page_refused = cfg.domain_refused("http://127.77.0.1:8080/s0/p1.html");
    g.bench_function("refusal_known_domain", |b| {
        b.iter(|| {
            for u in &uris {
                black_box(cfg.refusal_known_domain(black_box(u), page_refused));
            }
        })
    });
    // The scale run's configuration: include_domains names 10,000 hosts.
    let mut many = cfg.clone();
    let hosts: Vec<String> = (0..10_000)
        .map(|i| format!("127.{}.{}.{}", 77 + i / 65_536, (i / 256) % 256, i % 256))
        .collect();
    many.include_domains = RuleSet::parse(RuleTarget::Domain, &hosts).expect("hosts");
    g.bench_function("refusal_10000_hosts", |b| {
        b.iter(|| {
            for u in &uris {
                black_box(many.refusal_with(black_box(u), true));
            }
        })
    });
    // The regexp rule alone: straight (one pass) and, for comparison, a pattern of the same
    // links that only the regex set matches (an alternation).
    let straight = &cfg.exclude_uris;
    let set = RuleSet::parse(
        RuleTarget::Uri,
        &["regexp:http://[^/]+/(excluded|refused)/.*"],
    )
    .expect("rule");
    for u in &uris {
        assert_eq!(straight.matches(u), set.matches(u), "{u}");
    }
    g.bench_function("uri_regexp", |b| {
        b.iter(|| {
            for u in &uris {
                black_box(straight.matches(black_box(u)));
            }
        })
    });
    g.bench_function("uri_regexp_set", |b| {
        b.iter(|| {
            for u in &uris {
                black_box(set.matches(black_box(u)));
            }
        })
    });
    g.finish();
    let mut e = CrawlQueueEntry::new(UriStructure::unparsed(
        b"http://127.77.0.1:8080/s5/p117.html"[..].into(),
    ));
    e.referrer = UriStructure::unparsed(b"http://127.77.0.1:8080/s5/p116.html"[..].into());
    e.refresh_cycle = 1;
    let mut rec = Vec::new();
    queue::encode_entry(&e, &mut rec);
    let mut g = c.benchmark_group("queue");
    g.throughput(Throughput::Elements(1));
    g.bench_function("decode_entry", |b| {
        b.iter(|| black_box(queue::decode_entry(black_box(&rec)).is_ok()))
    });
    g.bench_function("peek_entry", |b| {
        b.iter(|| black_box(queue::peek_entry(black_box(&rec)).is_ok()))
    });
    // The marshal record queues written before the compact layout hold, still read.
    let marshal_rec = crawlfleet_core::marshal::to_bytes(&e.to_value());
    g.bench_function("decode_entry_marshal", |b| {
        b.iter(|| black_box(queue::decode_entry(black_box(&marshal_rec)).is_ok()))
    });
    let mut out = Vec::with_capacity(512);
    g.bench_function("encode_entry", |b| {
        b.iter(|| {
            out.clear();
            queue::encode_entry(black_box(&e), &mut out);
            black_box(out.len())
        })
    });
    g.finish();
}

fn checksums(n: usize, salt: u64) -> Vec<Checksum> {
    (0..n as u64)
        .map(|i| {
            let mut c = [0u8; 16];
            c[..8].copy_from_slice(&(i ^ salt).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes());
            c[8..].copy_from_slice(&i.to_le_bytes());
            Checksum(c)
        })
        .collect()
}

fn bench_checksum(c: &mut Criterion) {
    const N: usize = 10_000;
    let uri = b"http://127.77.0.1:8080/s5/p117.html";
    let mut g = c.benchmark_group("checksum");
    g.throughput(Throughput::Elements(N as u64));
    let fresh = checksums(N, 1);
    g.bench_function("add", |b| {
        b.iter_batched(
            || ChecksumStore::new(64),
            |mut store| {
                for cs in &fresh {
                    black_box(store.add(*cs, uri, b"node1").is_ok());
                }
                store
            },
            BatchSize::LargeInput,
        )
    });
    let dir = std::env::temp_dir().join(format!("crawl-path-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (mut stores, _) = DupStores::open(&dir, 64).expect("open the store");
    stores.set_collection(b"bench", Vec::new());
    let mut round = 0u64;
    g.bench_function("add_durable", |b| {
        b.iter_batched(
            || {
                round += 1;
                checksums(N, round << 32)
            },
            |batch| {
                for cs in batch {
                    black_box(stores.add(b"bench", cs, uri, b"node1").is_ok());
                }
                stores.write_log().expect("write the log");
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
    drop(stores);
    let _ = std::fs::remove_dir_all(&dir);
}

fn bench_seen(c: &mut Criterion) {
    const URIS: usize = 1 << 20;
    const PAGE: usize = 8;
    let dir = tempfile::TempDir::with_prefix("crawl-path-seen-").expect("temp dir");
    let mut seen = SeenSet::open(&dir.path().join("seen")).expect("open the seen set");
    let uris: Vec<String> = (0..URIS)
        .map(|i| format!("http://127.77.0.{}:8080/s{}/p{i}.html", i % 50, i % 97))
        .collect();
    for u in &uris {
        seen.insert(u.as_bytes()).expect("insert");
    }
    // Eight links of a page: URIs far apart in the set, a different eight each time.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut page = move || {
        let mut p = [0usize; PAGE];
        for i in &mut p {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *i = x as usize % URIS;
        }
        p
    };
    let mut g = c.benchmark_group("seen");
    g.throughput(Throughput::Elements(PAGE as u64));
    g.bench_function("page_of_links", |b| {
        b.iter(|| {
            for i in page() {
                black_box(seen.insert(uris[i].as_bytes()).expect("insert"));
            }
        })
    });
    g.bench_function("page_of_links_prefetched", |b| {
        b.iter(|| {
            let p = page();
            for &i in &p {
                seen.prefetch(uris[i].as_bytes());
            }
            for i in p {
                black_box(seen.insert(uris[i].as_bytes()).expect("insert"));
            }
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = bench_links, bench_robots, bench_tally, bench_rules_and_queue, bench_checksum,
        bench_seen
}
criterion_main!(benches);
