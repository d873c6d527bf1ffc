//! `crawlfleet bench refresh`: pages per second of a refresh cycle over a web the cluster has
//! crawled before, with most pages unchanged.
//!
//! The plain synthetic web is served by nginx (which sends ETag and Last-Modified for its
//! static files and answers conditional requests with 304). A cluster ([`Cluster`], as
//! `crawlfleet up` runs it) crawls it once; then `--changed` of the pages are rewritten (a new
//! size, so a new ETag) and CollectionRefetch starts a refresh cycle through the multinode
//! scheduler's XML-RPC interface. Every node queues its stored documents again and fetches
//! each with If-None-Match / If-Modified-Since: the rate is pages requested in the cycle over
//! the seconds it took. nginx's access log tells how many pages were answered 304 and 200, and
//! whether each was requested once.

use std::fs;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use crawlfleet_core::marshal::Value;
use indicatif::ProgressBar;
use serde_json::json;

use crate::cli::BenchRefreshArgs;
use crate::crawl::{access_log, err, paths_under, require, say, serve_web};
use crate::BenchError;
use crawlfleet_shells::up::{Cluster, CollectionSource, RunSummary, WatchOptions};

const COLLECTION: &str = "bench";

/// Rewrites every `every`-th page of every host (robots.txt aside): a comment at the end
/// changes its size, so its ETag. Returns how many pages changed.
fn change_pages(
    web_root: &std::path::Path,
    hosts: &[std::net::SocketAddr],
    every: usize,
) -> Result<u64, BenchError> {
    let mut changed = 0;
    for h in hosts {
        let ip = match h.ip() {
            IpAddr::V4(a) => a.to_string(),
            IpAddr::V6(a) => a.to_string(),
        };
        let root = web_root.join("www").join(ip);
        let pages: Vec<String> = paths_under(&root)?
            .into_iter()
            .filter(|p| p != "/robots.txt")
            .collect();
        for p in pages.iter().step_by(every) {
            let file = match p.as_str() {
                "/" => root.join("index.html"),
                p => root.join(p.trim_start_matches('/')),
            };
            let mut body = fs::read(&file).map_err(err("reading a page"))?;
            body.extend_from_slice(b"<!-- changed for the refresh benchmark -->\n");
            fs::write(&file, body).map_err(err("rewriting a page"))?;
            changed += 1;
        }
    }
    Ok(changed)
}

fn totals(s: &RunSummary) -> (u64, u64, u64) {
    s.collections.values().fold((0, 0, 0), |a, c| {
        (
            a.0 + c.counters.processed,
            a.1 + c.counters.unchanged,
            a.2 + c.counters.modified,
        )
    })
}

/// `crawlfleet bench refresh`.
pub fn run(args: &BenchRefreshArgs) -> Result<(), BenchError> {
    crawlfleet_shells::set_quiet(true);
    let spec = args.web.spec();
    if !(args.changed > 0.0 && args.changed <= 1.0) {
        return Err(BenchError(format!(
            "--changed {} is not a fraction in (0, 1]",
            args.changed
        )));
    }
    require(
        "nginx",
        &["-v"],
        "install it (apt-get install nginx) or run scripts/bench-crawl.sh",
    )?;
    let (mut work, web, _) = serve_web(&spec, args.web.base, "refresh", args.json)?;
    let log_path = work.web_dir.join("access.log");
    let source = CollectionSource {
        origin: String::new(),
        xml: web.collection_xml(COLLECTION),
        overrides: vec![
            ("delay", Value::Float(0.0)),
            ("max_pending", Value::int(i64::from(args.web.connections))),
            // No timer: the benchmark starts the cycle itself.
            ("refresh", Value::Float(0.0)),
        ],
    };
    say(
        args.json,
        format_args!("first crawl, {} node schedulers...", args.web.nodes),
    );
    let mut cluster =
        Cluster::start(&work.dir.join("cluster"), args.web.nodes, &[source]).map_err(BenchError)?;
    let watch = WatchOptions {
        until_idle: true,
        idle_seconds: 1.0,
        timeout: args.timeout,
    };
    let first = cluster.watch(&watch, &ProgressBar::hidden());
    let first = match first {
        Ok(s) => s,
        Err(e) => {
            cluster.detach();
            return Err(BenchError(e));
        }
    };
    let expected = (spec.hosts * spec.pages) as u64;
    let (fetched0, unchanged0, modified0) = totals(&first);
    let served0 = access_log(&log_path, 0)?;
    if served0.pages != expected {
        cluster.detach();
        return Err(BenchError(format!(
            "the first crawl fetched {} of {expected} pages",
            served0.pages
        )));
    }
    let every = (1.0 / args.changed).round().max(1.0) as usize;
    let changed = change_pages(&work.web_dir, &web.hosts(), every)?;
    say(
        args.json,
        format_args!(
            "first crawl: {fetched0} pages in {:.2} s; {changed} pages changed; refresh cycle...",
            first.elapsed
        ),
    );
    // The refresh, as an operator starts it: CollectionRefetch on the multinode scheduler,
    // relayed to every node as CMD_ADM_CONF_REFRESH.
    let admin = cluster.multinode_admin.to_string();
    let params = [
        crawlfleet_core::xmlrpc::Value::String(COLLECTION.into()),
        crawlfleet_core::xmlrpc::Value::String(String::new()),
    ];
    match crawlfleet_shells::admin::client::call(&admin, "CollectionRefetch", &params) {
        Ok(Ok(_)) => {}
        Ok(Err(f)) => {
            cluster.detach();
            return Err(BenchError(format!("CollectionRefetch: {}", f.message)));
        }
        Err(e) => {
            cluster.detach();
            return Err(BenchError(format!("CollectionRefetch: {e}")));
        }
    }
    cluster.restart_clock();
    // Until the nodes have the cycle's work (the watch would otherwise see the idle end of
    // the first crawl).
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let now = cluster.summary();
        if totals(&now).0 != fetched0 || now.collections.values().any(|c| c.queued > 0) {
            break;
        }
        if Instant::now() > until {
            cluster.detach();
            return Err(BenchError("the refresh cycle did not start in 30 s".into()));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let second = cluster.watch(&watch, &ProgressBar::hidden());
    cluster.detach();
    let second = second.map_err(BenchError)?;
    let served = access_log(&log_path, served0.lines)?;
    work.stop_nginx();
    let (fetched1, unchanged1, modified1) = totals(&second);
    let pages = fetched1 - fetched0;
    let unchanged = unchanged1 - unchanged0;
    let modified = modified1 - modified0;
    let rate = if second.elapsed > 0.0 {
        pages as f64 / second.elapsed
    } else {
        0.0
    };
    let ok_200 = served.requests - served.not_modified - served.not_ok - served.robots;
    let complete = served.pages == expected
        && served.repeats == 0
        && served.not_ok == 0
        && served.not_modified == expected - changed
        && unchanged == expected - changed
        && modified == changed;
    let round = |x: f64| (x * 100.0).round() / 100.0;
    if args.json {
        println!(
            "{}",
            json!({
                "rate": rate.round(),
                "pages": pages,
                "elapsed_seconds": round(second.elapsed),
                "not_modified": served.not_modified,
                "ok_200": ok_200,
                "unchanged": unchanged,
                "modified": modified,
                "changed_pages": changed,
                "expected_pages": expected,
                "repeated_pages": served.repeats,
                "robots_requests": served.robots,
                "complete": complete,
                "first_crawl_rate": (fetched0 as f64 / first.elapsed.max(1e-9)).round(),
                "first_crawl_seconds": round(first.elapsed),
                "nodes": args.web.nodes,
                "hosts": spec.hosts,
                "pages_per_host": spec.pages,
                "connections_per_site": args.web.connections,
            })
        );
    } else {
        println!(
            "refresh cycle: {pages} pages in {:.2} s = {rate:.0} pages/s ({} nodes, {} per site)",
            second.elapsed, args.web.nodes, args.web.connections
        );
        println!(
            "  nginx: {} answered 304, {ok_200} answered 200 ({changed} pages were changed), {} robots.txt, {} repeats; crawl counters: {unchanged} unchanged, {modified} modified",
            served.not_modified, served.robots, served.repeats
        );
        println!(
            "first crawl:   {fetched0} pages in {:.2} s = {:.0} pages/s",
            first.elapsed,
            fetched0 as f64 / first.elapsed.max(1e-9)
        );
    }
    if !complete {
        return Err(BenchError(format!(
            "the refresh cycle was not exact: {} distinct pages of {expected}, {} repeats, {} \
             answered 304 (want {}), {unchanged} unchanged and {modified} modified (want {} and \
             {changed}), {} neither 200 nor 304",
            served.pages,
            served.repeats,
            served.not_modified,
            expected - changed,
            expected - changed,
            served.not_ok
        )));
    }
    Ok(())
}
