//! Criterion benches of the link store's per-page work on a node and at the store
//! (docs/performance.md, "Third round: link store lines, checksums and the multinode
//! scheduler"):
//!
//! - `md5/page`: the MD5 of a page of the plain synthetic web (the document checksum PPDUP_ADD
//!   carries), in bytes per second;
//! - `md5/cidhash`: a URL's CIDHASH (MS-FSWASDR 2.2.1.3.1.1: MD5 and 21 base64 characters);
//! - `batch/page`: what the link client writes for a page of the synthetic web (its `urimap`
//!   line, a `links` and `urimap` line per link through `page_links`, its `sitemap` line), per
//!   page, 50 pages to a fresh batch;
//! - `batch/origin_site`: the SITEURL of the page's `sitemap` line, from its parsed URL;
//! - `store/lines`: the link store counting a received 20,000-line message's lines;
//! - `route/group_frames`: a turn's frames joined per destination and priority.
//!
//! `cargo bench --bench links`.

mod common;

use std::hint::black_box;

use crawlfleet_core::crawl::links;
use crawlfleet_core::crawl::origin_site;
use crawlfleet_core::links::{cidhash, parse_message, Message, WebAnalyzerBatch};
use crawlfleet_net::Priority;
use crawlfleet_shells::multinode::group_frames;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use md5::{Digest, Md5};
use url::Url;

/// A page of the plain synthetic web `bench crawl` serves, its URL and its links.
fn page() -> (Url, Vec<u8>, Vec<(String, String, bool)>) {
    let (url, body) = common::plain_page();
    let found = links::extract(&body, &url, links::tags::A | links::tags::LINK).links;
    let out = found
        .iter()
        .map(|l| {
            let intra = Url::parse(&l.url).is_ok_and(|u| u.host() == url.host());
            (l.url.clone(), l.text.clone(), intra)
        })
        .collect();
    (url, body, out)
}

fn bench_md5(c: &mut Criterion) {
    let (url, body, _) = page();
    let mut g = c.benchmark_group("md5");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("page", |b| b.iter(|| Md5::digest(black_box(&body))));
    g.throughput(Throughput::Elements(1));
    g.bench_function("cidhash", |b| {
        b.iter(|| cidhash(black_box(url.as_str().as_bytes())))
    });
    g.finish();
}

/// A link of `page()` as `WebAnalyzerBatch::page_links` reads it.
fn parts(l: &(String, String, bool)) -> (&[u8], &[u8], bool) {
    (l.0.as_bytes(), l.1.as_bytes(), l.2)
}

fn bench_batch(c: &mut Criterion) {
    let (url, _, out) = page();
    assert!(out.len() > 5, "the page has links ({})", out.len());
    let mut g = c.benchmark_group("batch");
    g.throughput(Throughput::Elements(50));
    g.bench_function("page", |b| {
        b.iter_batched_ref(
            WebAnalyzerBatch::default,
            |batch| {
                for i in 0..50u64 {
                    // Fifty pages of the site: the same links, another page URL each.
                    let from = format!("{url}?{i}");
                    let from = from.as_bytes();
                    batch.urimap(from).expect("urimap");
                    let ts = 1_700_000_000 + i;
                    let written = batch.page_links(from, &out, parts, ts, |e| panic!("{e}"));
                    assert_eq!(written, out.len());
                    let site = origin_site(&url);
                    batch.sitemap(from, site.as_bytes()).expect("sitemap");
                }
            },
            BatchSize::SmallInput,
        )
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("origin_site", |b| {
        b.iter(|| origin_site(black_box(&url)).len())
    });
    g.finish();
}

fn bench_store(c: &mut Criterion) {
    let (url, _, out) = page();
    let mut batch = WebAnalyzerBatch::default();
    let mut i = 0u64;
    while batch.lines() < 20_000 {
        let from = format!("{url}?{i}");
        for (to, anchor, intra) in &out {
            batch
                .link(
                    from.as_bytes(),
                    to.as_bytes(),
                    *intra,
                    1_700_000_000,
                    anchor.as_bytes(),
                )
                .expect("link");
        }
        i += 1;
    }
    let wire = Message::webanalyzer(b"bench", &batch).to_wire();
    let body = &wire[..wire.len() - 7];
    let msg = parse_message(body).expect("message");
    let mut g = c.benchmark_group("store");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("lines", |b| b.iter(|| black_box(&msg).lines()));
    g.finish();
}

fn bench_route(c: &mut Criterion) {
    // A node thread's turn: a few dozen frames of 60-200 bytes to two duplicate servers.
    let mut rng = fastrand::Rng::with_seed(28);
    let sends: Vec<(u8, Priority, Vec<u8>)> = (0..40)
        .map(|_| (rng.u8(..2), Priority::Normal, vec![0u8; rng.usize(60..200)]))
        .collect();
    let mut g = c.benchmark_group("route");
    g.throughput(Throughput::Elements(sends.len() as u64));
    g.bench_function("group_frames", |b| {
        b.iter_batched(|| sends.clone(), group_frames, BatchSize::SmallInput)
    });
    g.finish();
}

criterion_group!(benches, bench_md5, bench_batch, bench_store, bench_route);
criterion_main!(benches);
