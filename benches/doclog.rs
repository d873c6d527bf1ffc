//! Criterion benches of the document log (`crawlfleet_core::feed::DocLog`): documents of about
//! 1.3 KB (a URI, two headers, a body) appended and committed (fdatasync) in groups of 1000 and
//! of 10, in 4 MiB segments so that rotation is part of the run. Counted in documents.
//!
//! The peer in the same run is the documents' bodies written to a plain file with `write_all` and
//! `sync_data` per group: what the disk allows.
//!
//! `cargo bench --bench doclog`

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::time::Duration;

use crawlfleet_core::feed::{DocLog, DocLogOptions, FeedDoc, FeedOp, FeedSink};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn doc(i: u64) -> FeedDoc {
    FeedDoc {
        op: FeedOp::Add,
        uri: format!("https://www.site{}.example.com/articles/{i}.html", i % 5000).into_bytes(),
        checksum: [i as u8; 16],
        time: 1_700_000_000 + i,
        status: 200,
        headers: vec![
            ("Content-Type".into(), b"text/html; charset=utf-8".to_vec()),
            ("ETag".into(), format!("\"{i}\"").into_bytes()),
        ],
        body: format!("<html><body>{i} {}</body></html>", "x".repeat(1200)).into_bytes(),
    }
}

fn bench(c: &mut Criterion) {
    let docs: Vec<FeedDoc> = (0..1000).map(doc).collect();
    let mut g = c.benchmark_group("doclog");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    for window in [1000usize, 10] {
        g.throughput(Throughput::Elements(1000));
        g.bench_function(format!("feed+sync/{window}"), |b| {
            let dir = tempfile::TempDir::with_prefix("crawlfleet-bench-doclog-").unwrap();
            let opts = DocLogOptions {
                segment_bytes: 4 << 20,
            };
            let mut log = DocLog::open_with(dir.path(), opts).unwrap();
            b.iter(|| {
                for group in docs.chunks(window) {
                    for d in group {
                        black_box(log.feed(d).unwrap());
                    }
                    log.sync().unwrap();
                }
            });
        });
        g.bench_function(format!("peer-write+sync/{window}"), |b| {
            let dir = tempfile::TempDir::with_prefix("crawlfleet-bench-doclog-").unwrap();
            let mut f = File::create(dir.path().join("peer")).unwrap();
            let bytes: Vec<Vec<u8>> = docs.iter().map(|d| d.body.clone()).collect();
            b.iter(|| {
                for group in bytes.chunks(window) {
                    for d in group {
                        f.write_all(d).unwrap();
                    }
                    f.sync_data().unwrap();
                }
            });
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
