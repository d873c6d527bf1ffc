//! Criterion bench of the fetcher's whole path over loopback (docs/performance.md, the crawl
//! path's third round): `fetch/keep_alive` submits 64 requests to one host of a local server
//! that answers each with a 3 KiB page over kept-alive connections, and waits for the 64
//! results, so the figure covers the submission and its wake-up, the request written, the
//! response read (its system calls included) and parsed, and the result handed back. In pages
//! per second.
//!
//! `cargo bench --bench fetch`.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use crawlfleet_net::fetch::{FetchRequest, Fetcher, FetcherOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

/// Requests in flight at once, as a node keeps several per site.
const BATCH: u64 = 64;

/// A keep-alive server answering every request with the same 3 KiB page, one thread per
/// connection, each response written in one call (head and body together).
fn server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let body = vec![b'x'; 3 << 10];
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nServer: bench\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
         Last-Modified: Sat, 28 Nov 2026 00:00:00 GMT\r\nETag: \"bench\"\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let response = response.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(stream.try_clone().expect("clone"));
                let mut w = stream;
                let mut line = String::new();
                loop {
                    line.clear();
                    match r.read_line(&mut line) {
                        Ok(0) | Err(_) => return,
                        Ok(_) if line == "\r\n" => {
                            if w.write_all(&response).is_err() {
                                return;
                            }
                        }
                        Ok(_) => {}
                    }
                }
            });
        }
    });
    addr
}

fn bench_fetch(c: &mut Criterion) {
    let addr = server();
    let fetcher = Fetcher::spawn(FetcherOptions::default()).expect("fetcher");
    let url: url::Url = format!("http://bench.test:{}/page.html", addr.port())
        .parse()
        .expect("url");
    let request = |id| FetchRequest {
        id,
        url: url.clone(),
        addr,
        headers: Vec::new(),
        max_body: 1 << 20,
        connect_timeout: Duration::from_secs(10),
        timeout: Duration::from_secs(30),
        head: false,
        http10: false,
        post: None,
    };
    let mut g = c.benchmark_group("fetch");
    g.throughput(Throughput::Elements(BATCH));
    g.bench_function("keep_alive", |b| {
        b.iter(|| {
            let refused = fetcher.submit_many((0..BATCH).map(request));
            assert!(refused.is_empty(), "submit");
            for _ in 0..BATCH {
                let done = fetcher
                    .results
                    .recv_timeout(Duration::from_secs(30))
                    .expect("a result");
                let page = done.result.expect("a page");
                assert_eq!(page.body.len(), 3 << 10);
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
    targets = bench_fetch
}
criterion_main!(benches);
