//! `crawlfleet bench refresh`: requests and seconds of one refresh cycle over a web the cluster
//! has crawled before, with most pages unchanged, for each way of finding what changed.
//!
//! The plain synthetic web is served by nginx (which sends ETag and Last-Modified for its
//! static files and answers conditional requests with 304). For each method a fresh cluster
//! ([`Cluster`], as `crawlfleet up` runs it) crawls the web once; then `--changed` of the pages
//! are rewritten (a new size, so a new ETag) and CollectionRefetch starts a refresh cycle
//! through the multinode scheduler's XML-RPC interface:
//!
//! - `conditional`: every node queues its stored documents again and fetches each with
//!   If-None-Match / If-Modified-Since (the collection's `sitemaps` off).
//! - `sitemaps`: the benchmark writes a `/sitemap.xml` on every host, each page with its file's
//!   modification time as `<lastmod>` (rewritten after the change), and the collection reads
//!   sitemaps: the refresh cycle fetches the sitemaps, then only the pages whose `<lastmod>`
//!   is newer than their last fetch.
//! - `rup`: a `crawlfleet rup-server` per host watches the files nginx serves, nginx passes
//!   `/rupinfo.txt` and the RUP CGI to it, and the collection is a RUP robot (docs/rup.md):
//!   during the first crawl each node registers with the sites it crawls (latency one second),
//!   and the servers' reports go by SMTP, through a relay (`refresh_rup`), to the nodes'
//!   `--rup-smtp` receivers. There is no CollectionRefetch: the report of the second after the
//!   change (the changes are made within one second) names the changed pages, and the nodes
//!   fetch them. The cycle runs from the first report naming changes to the last answer; the
//!   time from the change to it (up to a second: the latency) is shown beside it.
//!
//! nginx's access log tells the requests of the cycle (pages, robots.txt, sitemaps), how many
//! were answered 304 and 200, whether a page was requested twice, and when the last one was
//! answered: a cycle's seconds run from the CollectionRefetch call to that last answer. Each
//! method's cycle must be exact (the pages fetched are the changed ones, or all of them
//! conditionally) or the run fails.

use std::fs;
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crawlfleet_core::marshal::Value;
use indicatif::ProgressBar;
use serde_json::json;

use crate::cli::{BenchRefreshArgs, RefreshMethod};
use crate::crawl::{access_log, err, paths_under, require, say, serve_web, Served, Workdir};
use crate::{refresh_rup, BenchError};
use crawlfleet_core::synthweb::SyntheticWeb;
use crawlfleet_shells::up::{Cluster, CollectionSource, RunSummary, WatchOptions};

const COLLECTION: &str = "bench";

/// The web root of host `h`.
fn host_root(web_root: &Path, h: &std::net::SocketAddr) -> std::path::PathBuf {
    let ip = match h.ip() {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => a.to_string(),
    };
    web_root.join("www").join(ip)
}

fn page_file(root: &Path, path: &str) -> std::path::PathBuf {
    match path {
        "/" => root.join("index.html"),
        p => root.join(p.trim_start_matches('/')),
    }
}

/// The pages of a host's tree (robots.txt and sitemaps aside).
fn pages_of(root: &Path) -> Result<Vec<String>, BenchError> {
    Ok(paths_under(root)?
        .into_iter()
        .filter(|p| p != "/robots.txt" && !p.starts_with("/sitemap"))
        .collect())
}

/// Rewrites every `every`-th page of every host: a comment at the end changes its size, so
/// its ETag. Returns how many pages changed.
fn change_pages(
    web_root: &Path,
    hosts: &[std::net::SocketAddr],
    every: usize,
) -> Result<u64, BenchError> {
    let mut changed = 0;
    for h in hosts {
        let root = host_root(web_root, h);
        for p in pages_of(&root)?.iter().step_by(every) {
            let file = page_file(&root, p);
            let mut body = fs::read(&file).map_err(err("reading a page"))?;
            body.extend_from_slice(b"<!-- changed for the refresh benchmark -->\n");
            fs::write(&file, body).map_err(err("rewriting a page"))?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Writes `/sitemap.xml` on every host: each page with its file's modification time (to the
/// second) as `<lastmod>`.
fn write_sitemaps(web_root: &Path, hosts: &[std::net::SocketAddr]) -> Result<(), BenchError> {
    for h in hosts {
        let root = host_root(web_root, h);
        let mut xml = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
             <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
        );
        for p in pages_of(&root)? {
            let modified = fs::metadata(page_file(&root, &p))
                .and_then(|m| m.modified())
                .map_err(err("reading a page's time"))?;
            let secs = modified
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            xml.push_str(&format!(
                "<url><loc>http://{h}{p}</loc><lastmod>{}</lastmod></url>\n",
                crawlfleet_core::rup::format_date(secs)
            ));
        }
        xml.push_str("</urlset>\n");
        fs::write(root.join("sitemap.xml"), xml).map_err(err("writing a sitemap"))?;
    }
    Ok(())
}

fn totals(s: &RunSummary) -> (u64, u64, u64, u64) {
    s.collections.values().fold((0, 0, 0, 0), |a, c| {
        (
            a.0 + c.counters.processed,
            a.1 + c.counters.unchanged,
            a.2 + c.counters.modified,
            a.3 + c.counters.sitemap_skipped,
        )
    })
}

pub(super) fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One method's refresh cycle.
struct Cycle {
    method: RefreshMethod,
    served: Served,
    /// CollectionRefetch to the last answer.
    seconds: f64,
    /// Documents found unchanged (304), modified, and skipped by their sitemap's lastmod.
    unchanged: u64,
    modified: u64,
    skipped: u64,
    changed: u64,
    first_pages: u64,
    first_seconds: f64,
    /// RUP: seconds from the change to the last answer (the cycle, plus the wait for the
    /// reports), the reports naming changes and the distinct pages they named.
    since_change: f64,
    /// When the cycle started (Unix seconds): CollectionRefetch, or RUP's first report.
    started: f64,
    reports: u64,
    report_paths: u64,
    /// RUP: each report naming changes: its site, when the relay got it, when the last node
    /// took it.
    arrivals: Vec<(String, f64, f64)>,
    /// Why the cycle was not exact, if it was not.
    problem: Option<String>,
}

impl Cycle {
    fn ok_200(&self) -> u64 {
        let s = &self.served;
        s.requests - s.not_modified - s.not_ok
    }
}

/// Crawls the web with a fresh cluster, changes pages and runs one refresh cycle by `method`.
fn run_method(
    args: &BenchRefreshArgs,
    method: RefreshMethod,
    work: &Workdir,
    web: &SyntheticWeb,
) -> Result<Cycle, BenchError> {
    let log_path = work.web_dir.join("access.log");
    let hosts = web.hosts();
    let sitemaps = method == RefreshMethod::Sitemaps;
    let rup = method == RefreshMethod::Rup;
    if sitemaps {
        write_sitemaps(&work.web_dir, &hosts)?;
    } else {
        for h in &hosts {
            let _ = fs::remove_file(host_root(&work.web_dir, h).join("sitemap.xml"));
        }
    }
    let source = CollectionSource {
        origin: String::new(),
        xml: web.collection_xml(COLLECTION),
        overrides: vec![
            ("delay", Value::Float(0.0)),
            ("max_pending", Value::int(i64::from(args.web.connections))),
            // No timer: the benchmark starts the cycle itself.
            ("refresh", Value::Float(0.0)),
            ("sitemaps", Value::Bool(sitemaps)),
        ],
    };
    let mut source = source;
    let mut sites = None;
    if rup {
        let s = |x: &str| Value::owned_bytes(x.as_bytes().to_vec());
        source.overrides.push((
            "rup",
            Value::Dict(vec![
                (s("robot_email"), s(refresh_rup::ROBOT)),
                (s("latency"), s("1-second")),
            ]),
        ));
        say(
            args.json,
            format_args!("rup: a rup-server for each of {} hosts...", hosts.len()),
        );
        let web_root = work.web_dir.clone();
        let root_of = move |h: &std::net::SocketAddr| host_root(&web_root, h);
        sites = Some(refresh_rup::start(&work.dir.join("rup"), &hosts, &root_of)?);
    }
    say(
        args.json,
        format_args!(
            "{}: first crawl, {} node schedulers...",
            method.name(),
            args.web.nodes
        ),
    );
    let before = access_log(&log_path, 0)?.lines;
    let dir = work.dir.join(format!("cluster-{}", method.name()));
    let mut cluster = Cluster::start(&dir, args.web.nodes, &[source]).map_err(BenchError)?;
    if let Some(s) = &sites {
        s.deliver_to(&cluster.node_smtps);
    }
    let watch = WatchOptions {
        until_idle: true,
        idle_seconds: 1.0,
        timeout: args.timeout,
    };
    let result = cycle(
        args,
        method,
        &mut cluster,
        &watch,
        work,
        web,
        before,
        sites.as_ref(),
    );
    cluster.detach();
    result
}

#[allow(clippy::too_many_arguments)]
fn cycle(
    args: &BenchRefreshArgs,
    method: RefreshMethod,
    cluster: &mut Cluster,
    watch: &WatchOptions,
    work: &Workdir,
    web: &SyntheticWeb,
    before: u64,
    sites: Option<&refresh_rup::RupSites>,
) -> Result<Cycle, BenchError> {
    let spec = args.web.spec();
    let log_path = work.web_dir.join("access.log");
    let first = cluster
        .watch(watch, &ProgressBar::hidden())
        .map_err(BenchError)?;
    let expected = (spec.hosts * spec.pages) as u64;
    let t0 = totals(&first);
    let mut served0 = access_log(&log_path, before)?;
    if served0.pages != expected {
        return Err(BenchError(format!(
            "{}: the first crawl fetched {} of {expected} pages",
            method.name(),
            served0.pages
        )));
    }
    if let Some(sites) = sites {
        // Every site registered with: a report from each came through.
        let until = Instant::now() + Duration::from_secs(60);
        while sites.heard().len() < web.hosts().len() {
            if Instant::now() > until {
                return Err(BenchError(format!(
                    "rup: reports from {} of {} sites after the first crawl",
                    sites.heard().len(),
                    web.hosts().len()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        served0 = access_log(&log_path, before)?;
        // The changes all within one second, so that each site's report of the next second
        // names them all: start just past a whole second.
        let now = unix_now();
        let wait = 1.05 - now.fract();
        std::thread::sleep(Duration::from_secs_f64(wait.rem_euclid(1.0)));
    }
    let every = (1.0 / args.changed).round().max(1.0) as usize;
    let changed_at = unix_now();
    let changed = change_pages(&work.web_dir, &web.hosts(), every)?;
    if method == RefreshMethod::Sitemaps {
        write_sitemaps(&work.web_dir, &web.hosts())?;
    }
    say(
        args.json,
        format_args!(
            "{}: first crawl: {} pages in {:.2} s; {changed} pages changed; refresh cycle...",
            method.name(),
            t0.0,
            first.elapsed
        ),
    );
    let started = unix_now();
    if sites.is_none() {
        // The refresh, as an operator starts it: CollectionRefetch on the multinode
        // scheduler, relayed to every node as CMD_ADM_CONF_REFRESH.
        let admin = cluster.multinode_admin.to_string();
        let params = [
            crawlfleet_core::xmlrpc::Value::String(COLLECTION.into()),
            crawlfleet_core::xmlrpc::Value::String(String::new()),
        ];
        match crawlfleet_shells::admin::client::call(&admin, "CollectionRefetch", &params) {
            Ok(Ok(_)) => {}
            Ok(Err(f)) => return Err(BenchError(format!("CollectionRefetch: {}", f.message))),
            Err(e) => return Err(BenchError(format!("CollectionRefetch: {e}"))),
        }
    }
    cluster.restart_clock();
    // Until the nodes have the cycle's work (the watch would otherwise see the idle end of
    // the first crawl); RUP: until every changed page was fetched, the reports coming at the
    // next second.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let now = cluster.summary();
        let t = totals(&now);
        let going = match sites {
            Some(_) => t.2 - t0.2 >= changed,
            None => t.0 != t0.0 || now.collections.values().any(|c| c.queued > 0),
        };
        if going {
            break;
        }
        if Instant::now() > until {
            return Err(BenchError(format!(
                "{}: the refresh cycle did not start in 60 s ({} of {changed} changed pages fetched)",
                method.name(),
                t.2 - t0.2
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let second = cluster
        .watch(watch, &ProgressBar::hidden())
        .map_err(BenchError)?;
    let served = access_log(&log_path, served0.lines)?;
    let t1 = totals(&second);
    let (from, reports, report_paths, arrivals) = match sites {
        Some(s) => {
            let (first, _, n, paths) = s.changes_since(changed_at);
            (first, n, paths, s.arrivals_since(changed_at))
        }
        None => (started, 0, 0, Vec::new()),
    };
    let mut c = Cycle {
        method,
        seconds: (served.last_at - from).max(0.0),
        since_change: (served.last_at - changed_at).max(0.0),
        started: from,
        reports,
        report_paths,
        arrivals,
        unchanged: t1.1 - t0.1,
        modified: t1.2 - t0.2,
        skipped: t1.3 - t0.3,
        changed,
        first_pages: t0.0,
        first_seconds: first.elapsed,
        problem: None,
        served,
    };
    c.problem = exactness(&c, expected, spec.hosts as u64);
    Ok(c)
}

/// Why a cycle was not what its method promises, or `None`.
fn exactness(c: &Cycle, expected: u64, hosts: u64) -> Option<String> {
    let s = &c.served;
    let changed = c.changed;
    let common = s.repeats == 0 && s.not_ok == 0 && c.modified == changed;
    let exact = match c.method {
        RefreshMethod::Conditional => {
            common
                && s.pages == expected
                && s.not_modified == expected - changed
                && c.unchanged == expected - changed
        }
        RefreshMethod::Sitemaps => {
            common
                && s.pages == changed
                && s.not_modified == 0
                && s.sitemaps == hosts
                && c.skipped == expected - changed
        }
        // The reports named exactly the changed pages, fetched once each; nothing else asked.
        RefreshMethod::Rup => {
            common
                && s.pages == changed
                && s.requests == changed
                && c.report_paths == changed
                && c.unchanged == 0
        }
    };
    (!exact).then(|| {
        format!(
            "{}: the refresh cycle was not exact: {} distinct pages of {expected} ({changed} \
             changed), {} repeats ({:?}), {} answered 304, {} sitemap requests, {} RUP \
             requests, {} paths in {} reports, {} unchanged, {} modified, {} skipped by \
             lastmod, {} neither 200 nor 304",
            c.method.name(),
            s.pages,
            s.repeats,
            s.repeated,
            s.not_modified,
            s.sitemaps,
            s.rup,
            c.report_paths,
            c.reports,
            c.unchanged,
            c.modified,
            c.skipped,
            s.not_ok
        )
    })
}

/// Where a RUP cycle's time went: the reports' arrival at the relay and at the nodes, and
/// from each site's report to its first and last page answered.
fn print_arrivals(c: &Cycle) {
    let after = |t: f64| t - c.started;
    let last =
        |f: &dyn Fn(&(String, f64, f64)) -> f64| c.arrivals.iter().map(f).fold(0.0, f64::max);
    println!(
        "  rup: the reports reached the relay by {:.3} s and the nodes by {:.3} s after the start",
        after(last(&|a| a.1)),
        after(last(&|a| a.2))
    );
    let mut first = Vec::new();
    let mut end = Vec::new();
    for (site, at, _) in &c.arrivals {
        if let Some(h) = c.served.by_host.get(site).filter(|h| h.1 > 0.0) {
            first.push(h.1 - at);
            end.push(h.2 - at);
        }
    }
    for (what, v) in [("first", &mut first), ("last", &mut end)] {
        v.sort_by(f64::total_cmp);
        if let (Some(lo), Some(hi), Some(m)) = (v.first(), v.last(), median(v)) {
            println!(
                "  rup: from a site's report (at the relay) to its {what} page: median {m:.3} s, \
                 {lo:.3}-{hi:.3} s over {} sites",
                v.len()
            );
        }
    }
}

/// The middle value of sorted `x`, if any.
fn median(x: &[f64]) -> Option<f64> {
    x.get(x.len() / 2).copied()
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
    let with_rup = args.methods.contains(&RefreshMethod::Rup);
    let locations = |h| match with_rup {
        true => refresh_rup::nginx_locations(h),
        false => String::new(),
    };
    let (work, web, _) = serve_web(&spec, args.web.base, "refresh", args.json, &locations)?;
    let mut cycles = Vec::new();
    for m in &args.methods {
        cycles.push(run_method(args, *m, &work, &web)?);
    }
    drop(work);
    let base = cycles
        .iter()
        .find(|c| c.method == RefreshMethod::Conditional)
        .map(|c| c.seconds);
    let speedup = |c: &Cycle| base.filter(|_| c.seconds > 0.0).map(|b| b / c.seconds);
    let round = |x: f64| (x * 1000.0).round() / 1000.0;
    let expected = (spec.hosts * spec.pages) as u64;
    if args.json {
        let methods: Vec<serde_json::Value> = cycles
            .iter()
            .map(|c| {
                json!({
                    "method": c.method.name(),
                    "requests": c.served.requests,
                    "pages": c.served.pages,
                    "not_modified": c.served.not_modified,
                    "ok_200": c.ok_200(),
                    "robots_requests": c.served.robots,
                    "sitemap_requests": c.served.sitemaps,
                    "rup_requests": c.served.rup,
                    "reports": c.reports,
                    "report_paths": c.report_paths,
                    "seconds_since_change": round(c.since_change),
                    "repeated_pages": c.served.repeats,
                    "sitemap_to_first_page_median": median(&c.served.sitemap_to_page()).map(round),
                    "seconds": round(c.seconds),
                    "speedup": speedup(c).map(|x| (x * 10.0).round() / 10.0),
                    "unchanged": c.unchanged,
                    "modified": c.modified,
                    "skipped_by_lastmod": c.skipped,
                    "changed_pages": c.changed,
                    "complete": c.problem.is_none(),
                    "first_crawl_pages": c.first_pages,
                    "first_crawl_seconds": round(c.first_seconds),
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "methods": methods,
                "expected_pages": expected,
                "changed": args.changed,
                "nodes": args.web.nodes,
                "hosts": spec.hosts,
                "pages_per_host": spec.pages,
                "connections_per_site": args.web.connections,
            })
        );
    } else {
        println!(
            "refresh cycle of {expected} pages, {} changed ({} nodes, {} per site):",
            cycles.first().map_or(0, |c| c.changed),
            args.web.nodes,
            args.web.connections
        );
        println!(
            "  {:<12} {:>9} {:>8} {:>8} {:>8} {:>9} {:>5} {:>7} {:>9} {:>8}",
            "method",
            "requests",
            "pages",
            "304",
            "200",
            "sitemaps",
            "rup",
            "robots",
            "seconds",
            "speedup"
        );
        for c in &cycles {
            println!(
                "  {:<12} {:>9} {:>8} {:>8} {:>8} {:>9} {:>5} {:>7} {:>9.3} {:>8}",
                c.method.name(),
                c.served.requests,
                c.served.pages,
                c.served.not_modified,
                c.ok_200(),
                c.served.sitemaps,
                c.served.rup,
                c.served.robots,
                c.seconds,
                speedup(c).map_or("-".into(), |x| format!("{x:.1}x"))
            );
        }
        for c in &cycles {
            println!(
                "  {}: first crawl {} pages in {:.2} s; counters: {} unchanged, {} modified, {} skipped by lastmod",
                c.method.name(),
                c.first_pages,
                c.first_seconds,
                c.unchanged,
                c.modified,
                c.skipped
            );
            let s = &c.served;
            let after = |t: f64| if t > 0.0 { t - c.started } else { 0.0 };
            println!(
                "  {}: after the start: first answer {:.3} s, first page {:.3} s, last sitemap \
                 {:.3} s, last answer {:.3} s",
                c.method.name(),
                after(s.first_at),
                after(s.pages_first_at),
                after(s.sitemaps_last_at),
                after(s.last_at)
            );
            let gaps = s.sitemap_to_page();
            if let (Some(lo), Some(hi)) = (gaps.first(), gaps.last()) {
                println!(
                    "  {}: from a site's sitemap to its first page: median {:.3} s, {lo:.3}-{hi:.3} s over {} sites",
                    c.method.name(),
                    gaps[gaps.len() / 2],
                    gaps.len()
                );
            }
            if c.method == RefreshMethod::Rup {
                print_arrivals(c);
                println!(
                    "  rup: {} reports named {} pages; {:.3} s from the change to the last answer \
                     (the reports leave at the second after the change: latency 1-second)",
                    c.reports, c.report_paths, c.since_change
                );
            }
        }
    }
    let problems: Vec<&String> = cycles.iter().filter_map(|c| c.problem.as_ref()).collect();
    if !problems.is_empty() {
        let p: Vec<&str> = problems.iter().map(|s| s.as_str()).collect();
        return Err(BenchError(p.join("\n")));
    }
    Ok(())
}
