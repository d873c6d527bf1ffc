//! Criterion benches of the full-text index (`crawlfleet_core::distributor::fulltext`): HTML
//! pages of about 2 KB of varied words applied (text extraction included) and committed, 1000
//! at a time, and searches of two words over 20,000 indexed pages. Counted in documents and in
//! searches.
//!
//! The peer in the same run is the text extraction alone (html5gum), the part of `apply` that
//! runs on the distributor's index thread; tantivy's own indexing runs on its thread.
//!
//! `cargo bench --bench fulltext`

use std::hint::black_box;
use std::time::Duration;

use crawlfleet_core::distributor::fulltext::{extract, Doc, FullText, Op};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const WORDS: [&str; 16] = [
    "aardvark", "badger", "camel", "dingo", "eland", "ferret", "gecko", "heron", "ibis", "jackal",
    "koala", "lemur", "marmot", "newt", "ocelot", "panda",
];

fn page(i: u64) -> Vec<u8> {
    let mut body = String::new();
    let mut x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    for _ in 0..250 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        body.push_str(WORDS[(x % 16) as usize]);
        body.push_str(if x.is_multiple_of(7) { ".</p><p>" } else { " " });
    }
    format!(
        "<html><head><title>Page {i}</title><script>var x = {i};</script></head>\
         <body><p>{body}</p></body></html>"
    )
    .into_bytes()
}

fn doc<'a>(uri: &'a str, body: &'a [u8]) -> Op<'a> {
    Op::Put(Doc {
        uri,
        time: 1_700_000_000,
        checksum: &[7; 16],
        content_type: Some(b"text/html"),
        body,
    })
}

fn bench(c: &mut Criterion) {
    let pages: Vec<(String, Vec<u8>)> = (0..1000)
        .map(|i| (format!("https://site{}.example/{i}.html", i % 50), page(i)))
        .collect();
    let mut g = c.benchmark_group("fulltext");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(1000));
    g.bench_function("apply+commit/1000", |b| {
        let dir = tempfile::TempDir::with_prefix("crawlfleet-bench-fulltext-").unwrap();
        let (mut ft, _) = FullText::open(dir.path(), 0).unwrap();
        let mut pos = 0;
        b.iter(|| {
            for (u, p) in &pages {
                pos += 1;
                ft.apply(&doc(u, p), pos).unwrap();
            }
            ft.commit().unwrap();
        });
    });
    g.bench_function("peer-extract/1000", |b| {
        b.iter(|| {
            for (_, p) in &pages {
                black_box(extract::text(Some(b"text/html"), p));
            }
        });
    });
    let dir = tempfile::TempDir::with_prefix("crawlfleet-bench-fulltext-").unwrap();
    let (mut ft, _) = FullText::open(dir.path(), 0).unwrap();
    for i in 0..20_000u64 {
        let u = format!("https://site{}.example/{i}.html", i % 50);
        ft.apply(&doc(&u, &page(i)), i + 1).unwrap();
    }
    ft.commit().unwrap();
    g.throughput(Throughput::Elements(1));
    g.bench_function("search/20000", |b| {
        let mut i = 0;
        b.iter(|| {
            i += 1;
            let q = format!("{} {}", WORDS[i % 16], WORDS[(i * 7 + 3) % 16]);
            black_box(ft.search(&q, 10).unwrap());
        });
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
