//! Criterion benches of the persistent crawl queue (`crawlfleet_core::queue`): push+pop of real
//! encoded crawl queue entries (MS-FSCMT 2.2.2.2, about 270 bytes each), in windows of 1000
//! pushes then 1000 pops, counted in entries (one push and one pop each).
//!
//! `cargo bench --bench queue`; the aim is 5 million entries per second. `crawlfleet bench queue
//! --vs-redis` compares the same windows with redis LPUSH/RPOP in one run.

use std::hint::black_box;
use std::time::Duration;

use crawlfleet_bench::queue::sample_records;
use crawlfleet_core::queue::{CrawlQueue, QueueOptions, SyncPolicy};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Entries per iteration.
const WINDOW: usize = 1000;

fn queue_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("crawlfleet-bench-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn push_pop(c: &mut Criterion) {
    let recs = sample_records(WINDOW);
    let mut g = c.benchmark_group("crawl_queue");
    g.throughput(Throughput::Elements(WINDOW as u64))
        .measurement_time(Duration::from_secs(5));
    // The default group sync, and a sync after every window of 1000 entries (Manual policy:
    // consumed segments are released only by a sync, so a manual queue must be synced).
    for (name, sync, sync_each) in [
        ("interval_100ms", SyncPolicy::default(), false),
        ("sync_every_window", SyncPolicy::Manual, true),
    ] {
        let dir = queue_dir(name);
        let opts = QueueOptions {
            sync,
            ..QueueOptions::default()
        };
        let mut q = CrawlQueue::open(&dir, opts).expect("queue opens");
        g.bench_function(format!("push_back+pop_front/{name}"), |b| {
            b.iter(|| {
                for r in &recs {
                    q.push_back(black_box(r)).expect("push");
                }
                let mut bytes = 0;
                while let Some(n) = q.pop_front_with(|r| r.len()).expect("pop") {
                    bytes += n;
                }
                if sync_each {
                    q.sync().expect("sync");
                }
                black_box(bytes)
            })
        });
        g.bench_function(format!("push_front+pop_front/{name}"), |b| {
            b.iter(|| {
                for r in &recs {
                    q.push_front(black_box(r)).expect("push");
                }
                let mut bytes = 0;
                while let Some(n) = q.pop_front_with(|r| r.len()).expect("pop") {
                    bytes += n;
                }
                if sync_each {
                    q.sync().expect("sync");
                }
                black_box(bytes)
            })
        });
        drop(q);
        let _ = std::fs::remove_dir_all(&dir);
    }
    g.finish();
}

criterion_group!(benches, push_pop);
criterion_main!(benches);
