//! Criterion benches of the crawl store (`crawlfleet_core::store`) holding 1,000,000 records of
//! realistic URIs (about 80 bytes: 5,000 hosts, paths and query strings): lookups, and lookups
//! plus updates (a refresh: get the record, put it back with a new crawl time and cycle) with a
//! group commit (fdatasync) per window of 1000, compactions included. Counted in URIs.
//!
//! The peer in the same run is a plain in-memory `std::collections::HashMap<Vec<u8>, UriRecord>`
//! (no persistence), and the other layout considered for the store: a table keyed by the
//! xxh3-128 of the URI (compared inline, no URI dereferenced) with the URIs in an arena.
//!
//! Last, reopening the store: its log of a million records read back (counted in records).
//!
//! `cargo bench --bench crawl_store`

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use crawlfleet_core::store::{CrawlStore, UriRecord};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hashbrown::HashTable;
use xxhash_rust::xxh3::xxh3_128;

const RECORDS: usize = 1_000_000;
const WINDOW: usize = 1000;

fn uri(i: usize) -> Vec<u8> {
    let host = i % 5000;
    match i % 4 {
        0 => format!(
            "https://www.site{host}.example.com/articles/{}/{i}-a-title-of-some-words.html",
            i / 5000
        ),
        1 => format!(
            "http://site{host}.example.org/catalog/item?id={i}&ref=home&page={}",
            i % 17
        ),
        2 => format!(
            "https://blog.site{host}.example.net/{}/{:02}/post-{i}/",
            2000 + i % 25,
            i % 12 + 1
        ),
        _ => format!(
            "http://site{host}.example.com:8080/docs/v{}/api/reference/section-{i}.html",
            i % 9
        ),
    }
    .into_bytes()
}

fn record(i: usize) -> UriRecord {
    let mut cs = [0u8; 16];
    cs[..8].copy_from_slice(&(i as u64).to_le_bytes());
    UriRecord {
        etag: Some(format!("\"{i:x}-5f2b\"").into_bytes()),
        last_modified: Some(b"Tue, 15 Nov 2024 12:45:26 GMT".to_vec()),
        ..UriRecord::stored(cs, 1_700_000_000, 200, 1, 20_000 + (i % 5000) as u32)
    }
}

fn crawl_store(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("crawlfleet-bench-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let uris: Vec<Vec<u8>> = (0..RECORDS).map(uri).collect();
    let mut store = CrawlStore::open(&dir).expect("store opens");
    for (i, u) in uris.iter().enumerate() {
        store.put(u, record(i)).expect("put");
    }
    store.sync().expect("sync");
    let mut peer: HashMap<Vec<u8>, UriRecord> = HashMap::with_capacity(RECORDS);
    for (i, u) in uris.iter().enumerate() {
        peer.insert(u.clone(), record(i));
    }
    // Random order, so lookups miss the cache as a crawl's would.
    let mut order: Vec<usize> = (0..RECORDS).collect();
    fastrand::Rng::with_seed(7).shuffle(&mut order);

    let mut g = c.benchmark_group("crawl_store_1M");
    g.throughput(Throughput::Elements(WINDOW as u64))
        .sample_size(20)
        .measurement_time(Duration::from_secs(5));
    let mut at = 0;
    g.bench_function("get", |b| {
        b.iter(|| {
            let mut size = 0u64;
            for _ in 0..WINDOW {
                let u = &uris[order[at % RECORDS]];
                at += 1;
                size += u64::from(store.get(black_box(u)).expect("present").size);
            }
            black_box(size)
        })
    });
    g.bench_function("get/peer_std_hashmap", |b| {
        b.iter(|| {
            let mut size = 0u64;
            for _ in 0..WINDOW {
                let u = &uris[order[at % RECORDS]];
                at += 1;
                size += u64::from(peer.get(black_box(u.as_slice())).expect("present").size);
            }
            black_box(size)
        })
    });
    // The alternative layout: keys are the xxh3-128 of the URI, held inline (no URI compared
    // on lookup), URIs in an arena.
    struct Alt {
        key: u128,
        _uri: (u64, u32),
        rec: UriRecord,
    }
    let mut alt: HashTable<Alt> = HashTable::with_capacity(RECORDS);
    let mut arena = Vec::new();
    for (i, u) in uris.iter().enumerate() {
        let key = xxh3_128(u);
        alt.insert_unique(
            key as u64,
            Alt {
                key,
                _uri: (arena.len() as u64, u.len() as u32),
                rec: record(i),
            },
            |e| e.key as u64,
        );
        arena.extend_from_slice(u);
    }
    g.bench_function("get/peer_xxh3_128_keys_uri_arena", |b| {
        b.iter(|| {
            let mut size = 0u64;
            for _ in 0..WINDOW {
                let u = &uris[order[at % RECORDS]];
                at += 1;
                let key = xxh3_128(black_box(u));
                size += u64::from(
                    alt.find(key as u64, |e| e.key == key)
                        .expect("present")
                        .rec
                        .size,
                );
            }
            black_box(size)
        })
    });
    drop(alt);
    let mut cycle = 2;
    for (name, windows_per_sync) in [("sync_per_window", 1), ("sync_per_100_windows", 100)] {
        g.bench_function(format!("get+put/{name}"), |b| {
            b.iter(|| {
                for _ in 0..WINDOW {
                    let u = &uris[order[at % RECORDS]];
                    at += 1;
                    let mut r = store.get(u).expect("present").clone();
                    r.last_crawl += 86_400;
                    r.cycle = cycle;
                    store.put(u, r).expect("put");
                }
                cycle += 1;
                if cycle % windows_per_sync == 0 {
                    store.sync().expect("sync");
                }
            })
        });
    }
    g.finish();
    drop(store);

    // Reopening: the log of a million records (and the updates above) read back into the table,
    // as a node scheduler does at start.
    let mut g = c.benchmark_group("crawl_store_1M_reopen");
    g.throughput(Throughput::Elements(RECORDS as u64))
        .sample_size(10)
        .measurement_time(Duration::from_secs(20));
    g.bench_function("open", |b| {
        b.iter(|| {
            let s = CrawlStore::open(black_box(&dir)).expect("store reopens");
            assert_eq!(s.len(), RECORDS);
            s
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, crawl_store);
criterion_main!(benches);
