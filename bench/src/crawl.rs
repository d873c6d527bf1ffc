//! `crawlfleet bench crawl`: pages per second a whole crawlfleet cluster crawls from a plain
//! synthetic web served by nginx, against two peers in the same run on the same pages:
//!
//! - wrk's raw requests per second (keep-alive, a Lua script cycling over host 0's paths): the
//!   most this machine fetches from that nginx, with no parsing, no queue and no politeness;
//! - Scrapy (`scripts/bench_crawl_spider.py`, embedded): a CrawlSpider following every link on
//!   the web's hosts with robots.txt obeyed, 64 concurrent requests, no delay, stopped after
//!   `--duration` seconds; its rate is pages parsed over the seconds to the last one;
//! - with `--spider PATH`, spider_cli in its concurrent and `--sync` modes, one process per host
//!   (`crate::spider`), each mode's rate over the pages it fetched.
//!
//! Our crawl is `crawlfleet up`'s cluster ([`Cluster`]) on the same web with delay 0, robots
//! on and `--connections` per site, run until idle; the rate is pages fetched over elapsed
//! seconds, from the cluster's start (its roles up) to the first reading of its status that
//! shows the crawl done (everything fetched and stored, nothing queued). nginx's access log
//! tells whether every page was fetched, each once, and gives the crawl's rate at the web
//! (`web_rate`: pages over nginx's first answer to its last) and how the cluster's clock
//! sits around it (`start_lag`: start to the first answer; `end_lag`: the last answer to the
//! end).
//!
//! Peers run first, our crawl last, so the cluster's idle roles (they run until the process
//! ends) cost the peers nothing. nginx is stopped and the work directory removed at the end,
//! also on errors.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::marshal::Value;
use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};
use indicatif::ProgressBar;
use serde_json::json;

use crate::cli::BenchCrawlArgs;
use crate::BenchError;
use crawlfleet_shells::up::{Cluster, CollectionSource, WatchOptions};

/// The Scrapy spider, written next to the web so the binary needs no checkout.
const SPIDER: &str = include_str!("../../scripts/bench_crawl_spider.py");

pub(super) fn err(what: &str) -> impl Fn(std::io::Error) -> BenchError + '_ {
    move |e| BenchError(format!("{what}: {e}"))
}

/// The work directory, the web's directory and the nginx serving it; stopping nginx and
/// removing both directories when dropped.
pub(super) struct Workdir {
    pub(super) dir: PathBuf,
    pub(super) web_dir: PathBuf,
    pub(super) nginx: Option<Child>,
}

impl Workdir {
    pub(super) fn stop_nginx(&mut self) {
        let Some(mut child) = self.nginx.take() else {
            return;
        };
        // SIGTERM lets the master stop its workers (SIGKILL would orphan them).
        use rustix::process::{kill_process, Pid, Signal};
        let _ = kill_process(Pid::from_child(&child), Signal::TERM);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        log::warn!("nginx did not stop on SIGTERM; killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        self.stop_nginx();
        let _ = fs::remove_dir_all(&self.web_dir);
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Fails with a clear message when `program` cannot be run.
pub(super) fn require(program: &str, args: &[&str], hint: &str) -> Result<(), BenchError> {
    match Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(BenchError(format!(
            "`{program} {}` failed ({s}): {hint}",
            args.join(" ")
        ))),
        Err(e) => Err(BenchError(format!("cannot run {program} ({e}): {hint}"))),
    }
}

/// True once `addr` answers `GET /` with 200.
fn answers(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"GET / HTTP/1.0\r\nHost: bench\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && &head[9..12] == b"200"
}

pub(super) fn start_nginx(
    work: &mut Workdir,
    conf: &Path,
    web_dir: &Path,
    host0: SocketAddr,
) -> Result<(), BenchError> {
    let log = fs::File::create(work.dir.join("nginx.out")).map_err(err("nginx.out"))?;
    let log2 = log.try_clone().map_err(err("nginx.out"))?;
    let child = Command::new("nginx")
        .arg("-c")
        .arg(conf)
        .arg("-p")
        .arg(web_dir)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log2)
        .spawn()
        .map_err(err("cannot start nginx"))?;
    work.nginx = Some(child);
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        if answers(host0) {
            // nginx logs a request after answering it: wait for the probe's line, so that a
            // count of the log taken next does not meet it later as a repeat of `/`.
            let log = web_dir.join("access.log");
            while Instant::now() < until && access_log(&log, 0)?.lines == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
            return Ok(());
        }
        if let Some(Ok(Some(status))) = work.nginx.as_mut().map(Child::try_wait) {
            work.nginx = None;
            let out = fs::read_to_string(work.dir.join("nginx.out")).unwrap_or_default();
            let errlog = fs::read_to_string(web_dir.join("error.log")).unwrap_or_default();
            return Err(BenchError(format!(
                "nginx exited ({status}): {}{}",
                out.trim(),
                errlog.trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(BenchError(format!("nginx does not answer on {host0}")))
}

/// Every file under `root`, as a URL path (`/index.html` as `/`).
pub(super) fn paths_under(root: &Path) -> Result<Vec<String>, BenchError> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).map_err(err("reading the web's tree"))? {
            let e = e.map_err(err("reading the web's tree"))?;
            let p = e.path();
            if e.file_type()
                .map_err(err("reading the web's tree"))?
                .is_dir()
            {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                let rel = rel.to_string_lossy().replace('\\', "/");
                out.push(match rel.as_str() {
                    "index.html" => "/".to_string(),
                    r => format!("/{r}"),
                });
            }
        }
    }
    out.sort();
    Ok(out)
}

/// What nginx's access log says from line `skip` on.
#[derive(Debug, Default)]
pub(super) struct Served {
    /// Lines read in all (to skip next time).
    pub(super) lines: u64,
    /// Requests answered from line `skip` on.
    pub(super) requests: u64,
    /// Of those, answered neither 200 nor 304.
    pub(super) not_ok: u64,
    /// Of those, answered 304 Not Modified.
    pub(super) not_modified: u64,
    /// Distinct pages (robots.txt aside) requested.
    pub(super) pages: u64,
    /// Of those, by host (`address:port`).
    pub(super) host_pages: std::collections::HashMap<String, u64>,
    /// Requests for a page already requested.
    pub(super) repeats: u64,
    /// The first few of them, `address:port/path`.
    pub(super) repeated: Vec<String>,
    /// robots.txt requests.
    pub(super) robots: u64,
    /// Sitemap requests (`/sitemap*`), not counted as pages.
    pub(super) sitemaps: u64,
    /// RUP requests (`/rupinfo.txt` and the CGI, `/rup-cgi`), not counted as pages.
    pub(super) rup: u64,
    /// The latest time a request was answered (nginx's `$msec`, Unix seconds).
    pub(super) last_at: f64,
    /// The first answer, the last sitemap's and the first page's (0 when none).
    pub(super) first_at: f64,
    pub(super) sitemaps_last_at: f64,
    pub(super) pages_first_at: f64,
    /// By host: its last sitemap's answer, its first page's and its last page's (0 when none).
    pub(super) by_host: std::collections::HashMap<String, (f64, f64, f64)>,
}

impl Served {
    /// The seconds from each host's last sitemap to its first page after it, sorted (hosts
    /// with both only): how long a page waits once its sitemap is read.
    pub(super) fn sitemap_to_page(&self) -> Vec<f64> {
        let mut gaps: Vec<f64> = self
            .by_host
            .values()
            .filter(|(s, p, _)| *s > 0.0 && *p > 0.0)
            .map(|(s, p, _)| p - s)
            .collect();
        gaps.sort_by(f64::total_cmp);
        gaps
    }
}

pub(super) fn access_log(path: &Path, skip: u64) -> Result<Served, BenchError> {
    let f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Served::default()),
        Err(e) => return Err(BenchError(format!("{}: {e}", path.display()))),
    };
    let mut out = Served::default();
    let mut seen = std::collections::HashSet::new();
    for line in BufReader::new(f).lines() {
        let line = line.map_err(err("reading nginx's access log"))?;
        out.lines += 1;
        if out.lines <= skip {
            continue;
        }
        out.requests += 1;
        // address:port, URI, status, ... (SyntheticWeb::write_nginx's log_format)
        let mut cols = line.split('\t');
        let (host, uri, status) = (cols.next(), cols.next(), cols.next());
        let at = cols
            .next()
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(0.0);
        out.last_at = out.last_at.max(at);
        let earliest = |x: f64| if x == 0.0 { at } else { x.min(at) };
        out.first_at = earliest(out.first_at);
        match status {
            Some("200") => {}
            Some("304") => out.not_modified += 1,
            _ => out.not_ok += 1,
        }
        if uri == Some("/robots.txt") {
            out.robots += 1;
        } else if uri.is_some_and(|u| u.starts_with("/sitemap")) {
            out.sitemaps += 1;
            out.sitemaps_last_at = out.sitemaps_last_at.max(at);
            let h = out
                .by_host
                .entry(host.unwrap_or_default().into())
                .or_default();
            h.0 = h.0.max(at);
        } else if uri.is_some_and(|u| u == "/rupinfo.txt" || u.starts_with("/rup-cgi")) {
            out.rup += 1;
        } else if seen.insert((host.map(str::to_string), uri.map(str::to_string))) {
            out.pages += 1;
            *out.host_pages
                .entry(host.unwrap_or_default().into())
                .or_default() += 1;
            out.pages_first_at = earliest(out.pages_first_at);
            let h = out
                .by_host
                .entry(host.unwrap_or_default().into())
                .or_default();
            h.1 = if h.1 == 0.0 { at } else { h.1.min(at) };
            h.2 = h.2.max(at);
        } else {
            out.repeats += 1;
            if out.repeated.len() < 5 {
                out.repeated.push(format!(
                    "{}{}",
                    host.unwrap_or_default(),
                    uri.unwrap_or_default()
                ));
            }
        }
    }
    Ok(out)
}

/// wrk's requests per second over `paths` of `host`.
fn run_wrk(
    dir: &Path,
    host: SocketAddr,
    paths: &[String],
    seconds: u64,
) -> Result<f64, BenchError> {
    let mut lua = String::from("local paths = {\n");
    for p in paths {
        lua.push_str(&format!("  {:?},\n", p));
    }
    lua.push_str(
        "}\nlocal i = 0\nrequest = function()\n  i = i % #paths + 1\n  \
         return wrk.format(\"GET\", paths[i])\nend\n",
    );
    let script = dir.join("urls.lua");
    fs::write(&script, lua).map_err(err("urls.lua"))?;
    let out = Command::new("wrk")
        .args(["-t2", "-c64", &format!("-d{seconds}s"), "-s"])
        .arg(&script)
        .arg(format!("http://{host}/"))
        .output()
        .map_err(err("cannot run wrk"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(BenchError(format!(
            "wrk failed ({}): {text}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    if let Some(l) = text.lines().find(|l| l.contains("Non-2xx")) {
        return Err(BenchError(format!(
            "wrk got errors from nginx: {}",
            l.trim()
        )));
    }
    text.lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| BenchError(format!("no Requests/sec in wrk's output: {text}")))
}

/// What Scrapy did: pages parsed and the seconds to the last one.
struct ScrapyRun {
    pages: u64,
    seconds: f64,
}

fn run_scrapy(
    dir: &Path,
    python: &Path,
    web: &SyntheticWeb,
    connections: u32,
    seconds: u64,
) -> Result<ScrapyRun, BenchError> {
    let spider = dir.join("bench_crawl_spider.py");
    fs::write(&spider, SPIDER).map_err(err("the spider"))?;
    let out_json = dir.join("scrapy.json");
    let hosts: Vec<String> = web.hosts().iter().map(SocketAddr::to_string).collect();
    let log = fs::File::create(dir.join("scrapy.log")).map_err(err("scrapy.log"))?;
    let start = web.start_uris().join(",");
    let status = Command::new(python)
        .args(["-m", "scrapy", "runspider"])
        .arg(&spider)
        .args(["-a", &format!("start={start}")])
        .args(["-a", &format!("hosts={}", hosts.join(","))])
        .arg("-a")
        .arg(format!("out={}", out_json.display()))
        .args(["-s", &format!("CLOSESPIDER_TIMEOUT={seconds}")])
        .args([
            "-s",
            &format!("CONCURRENT_REQUESTS_PER_DOMAIN={connections}"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .status()
        .map_err(err("cannot run scrapy"))?;
    let text = fs::read_to_string(&out_json).map_err(|e| {
        let log = fs::read_to_string(dir.join("scrapy.log")).unwrap_or_default();
        let tail: String = log.lines().rev().take(15).collect::<Vec<_>>().join("\n");
        BenchError(format!(
            "scrapy ({status}) wrote no result ({e}); its log ends:\n{tail}"
        ))
    })?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| BenchError(format!("scrapy's result {text:?}: {e}")))?;
    let pages = v["pages"].as_u64().unwrap_or(0);
    let secs = v["seconds"].as_f64().unwrap_or(0.0);
    if pages == 0 || secs <= 0.0 {
        return Err(BenchError(format!("scrapy fetched nothing: {text}")));
    }
    Ok(ScrapyRun {
        pages,
        seconds: secs,
    })
}

pub(super) fn say(json: bool, line: std::fmt::Arguments<'_>) {
    if !json {
        eprintln!("{line}");
    }
}

/// Writes the plain web of `spec` for nginx (in a work directory named after `what`) and
/// starts nginx on it: the work directory (nginx stopped and files removed when dropped), the
/// web and its first host.
pub(super) fn serve_web(
    spec: &WebSpec,
    base: std::net::Ipv4Addr,
    what: &str,
    json: bool,
    locations: &dyn Fn(SocketAddr) -> String,
) -> Result<(Workdir, Arc<SyntheticWeb>, SocketAddr), BenchError> {
    let name = format!("crawlfleet-bench-{what}-{}", std::process::id());
    let dir = std::env::temp_dir().join(&name);
    // The web's tree (a file per page) goes to memory where there is a tmpfs: writing and
    // removing 100,000 files on a disk mounted with `discard` takes minutes. The cluster's
    // data stays on disk, where `crawlfleet up` keeps it.
    let shm = Path::new("/dev/shm");
    let web_dir = if shm.is_dir() {
        shm.join(&name)
    } else {
        dir.join("web")
    };
    for d in [&dir, &web_dir] {
        let _ = fs::remove_dir_all(d);
        fs::create_dir_all(d).map_err(err("the work directory"))?;
    }
    let mut work = Workdir {
        dir,
        web_dir: web_dir.clone(),
        nginx: None,
    };
    let port = crawlfleet_shells::synthweb::free_port(base);
    let web = Arc::new(SyntheticWeb::generate(spec, base, port));
    let hosts = web.hosts();
    let host0 = *hosts
        .first()
        .ok_or_else(|| BenchError("the web has no hosts".into()))?;
    say(
        json,
        format_args!(
            "writing the web ({} hosts x {} pages) for nginx...",
            spec.hosts, spec.pages
        ),
    );
    let conf = web.write_nginx(&web_dir).map_err(err("writing the web"))?;
    // What the caller adds to each host's server block.
    let mut text = fs::read_to_string(&conf).map_err(err("reading nginx.conf"))?;
    for h in &hosts {
        let extra = locations(*h);
        if !extra.is_empty() {
            let listen = format!("        listen {h};\n");
            text = text.replacen(&listen, &format!("{listen}{extra}"), 1);
        }
    }
    fs::write(&conf, text).map_err(err("writing nginx.conf"))?;
    start_nginx(&mut work, &conf, &web_dir, host0)?;
    Ok((work, web, host0))
}

/// `crawlfleet bench crawl`.
pub fn run(args: &BenchCrawlArgs) -> Result<(), BenchError> {
    crawlfleet_shells::set_quiet(true);
    let spec = args.web.spec();
    let seconds = args.duration.max(1);
    let hint = "install it (apt-get install nginx wrk) or run scripts/bench-crawl.sh";
    require("nginx", &["-v"], hint)?;
    if !args.skip_wrk {
        require("wrk", &["-v"], hint).or_else(|e| {
            // wrk -v prints its version and exits 1 on some builds; only "cannot run" counts.
            if e.0.starts_with("cannot run") {
                Err(e)
            } else {
                Ok(())
            }
        })?;
    }
    if !args.skip_scrapy {
        let python = args.python.to_string_lossy().into_owned();
        require(
            &python,
            &["-c", "import scrapy"],
            "give --python a Python with scrapy installed (scripts/bench-crawl.sh makes a \
             virtualenv), or --skip-scrapy",
        )?;
    }
    let (mut work, web, host0) =
        serve_web(&spec, args.web.base, "crawl", args.json, &|_| String::new())?;
    let web_dir = work.web_dir.clone();
    let ip0 = match host0.ip() {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => a.to_string(),
    };
    let paths0 = paths_under(&web_dir.join("www").join(ip0))?;
    let wrk_rate = if args.skip_wrk {
        None
    } else {
        say(args.json, format_args!("wrk, {seconds} s..."));
        Some(run_wrk(&work.dir, host0, &paths0, seconds)?)
    };
    let scrapy = if args.skip_scrapy {
        None
    } else {
        say(args.json, format_args!("scrapy, at most {seconds} s..."));
        Some(run_scrapy(
            &work.dir,
            &args.python,
            &web,
            args.web.connections,
            seconds,
        )?)
    };
    let log_path = web_dir.join("access.log");
    let spiders = match &args.spider {
        None => None,
        Some(exe) => {
            let mut runs = Vec::new();
            for sync in [false, true] {
                say(
                    args.json,
                    format_args!(
                        "spider{}, one process per host, at most {} s...",
                        if sync { " --sync" } else { "" },
                        args.spider_timeout
                    ),
                );
                runs.push(crate::spider::run(
                    exe,
                    &work.dir,
                    &web,
                    &log_path,
                    sync,
                    Duration::from_secs(args.spider_timeout.max(1)),
                )?);
            }
            let sync = runs.pop();
            runs.pop().zip(sync)
        }
    };
    let before = access_log(&log_path, 0)?.lines;
    say(
        args.json,
        format_args!(
            "crawlfleet, {} node schedulers, until idle...",
            args.web.nodes
        ),
    );
    let source = CollectionSource {
        origin: String::new(),
        xml: web.collection_xml("bench"),
        overrides: vec![
            ("delay", Value::Float(0.0)),
            ("max_pending", Value::int(i64::from(args.web.connections))),
        ],
    };
    let cluster =
        Cluster::start(&work.dir.join("cluster"), args.web.nodes, &[source]).map_err(BenchError)?;
    // The cluster's clock, on the web's: its time starts as `start` returns.
    let t0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let watched = cluster.watch(
        &WatchOptions {
            until_idle: true,
            idle_seconds: 1.0,
            timeout: args.timeout,
        },
        &ProgressBar::hidden(),
    );
    // The roles run on; their data directory goes with the work directory.
    cluster.detach();
    let sum = watched.map_err(BenchError)?;
    let served = access_log(&log_path, before)?;
    if let Some(to) = &args.access_log {
        fs::copy(&log_path, to).map_err(err("copying nginx's access log (--access-log)"))?;
    }
    work.stop_nginx();
    let expected = (spec.hosts * spec.pages) as u64;
    let (requests, not_ok) = (served.requests, served.not_ok);
    let pages = sum.pages_fetched();
    // Every page once. robots.txt is fetched once per host per node that crawls the host (a
    // site may move to another node between visits), so its count only has to cover the hosts.
    let complete = pages == expected
        && served.pages == expected
        && served.repeats == 0
        && served.robots >= spec.hosts as u64
        && not_ok == 0;
    let rate = sum.pages_per_second();
    // The crawl as the web saw it: its pages over the time from nginx's first answer to its
    // last (`$msec`, to the millisecond). `rate` counts from starting the cluster to the last
    // page found by polling the nodes' published status (every 250 ms, published every
    // 200 ms), a step of about half a second in a five-second crawl.
    let web_seconds = served.last_at - served.first_at;
    let web_rate = (web_seconds > 0.0).then(|| served.pages as f64 / web_seconds);
    let scrapy_rate = scrapy.as_ref().map(|s| s.pages as f64 / s.seconds);
    let ratio = |peer: Option<f64>| peer.filter(|p| *p > 0.0).map(|p| rate / p);
    let round = |x: f64| (x * 100.0).round() / 100.0;
    if args.json {
        let v = json!({
            "rate": rate.round(),
            "wrk_rate": wrk_rate.map(f64::round),
            "scrapy_rate": scrapy_rate.map(f64::round),
            "pages": pages,
            "ratio_scrapy": ratio(scrapy_rate).map(round),
            "ratio_wrk": ratio(wrk_rate).map(round),
            "web_rate": web_rate.map(f64::round),
            "web_seconds": round(web_seconds),
            "ratio_wrk_web": web_rate
                .zip(wrk_rate.filter(|w| *w > 0.0))
                .map(|(r, w)| round(r / w)),
            "complete": complete,
            "expected_pages": expected,
            "requests": requests,
            "non_200": not_ok,
            "repeated_pages": served.repeats,
            "robots_requests": served.robots,
            "elapsed_seconds": round(sum.elapsed),
            "start_lag": round(served.first_at - t0),
            "end_lag": round(t0 + sum.elapsed - served.last_at),
            "nodes": args.web.nodes,
            "hosts": spec.hosts,
            "pages_per_host": spec.pages,
            "connections_per_site": args.web.connections,
            "spider_rate": spiders.as_ref().map(|(c, _)| c.rate().round()),
            "spider_pages": spiders.as_ref().map(|(c, _)| c.pages),
            "spider_seconds": spiders.as_ref().map(|(c, _)| round(c.seconds)),
            "spider_stopped": spiders.as_ref().map(|(c, _)| c.stopped),
            "spider_complete_hosts": spiders.as_ref().map(|(c, _)| c.complete_hosts),
            "spider_sync_rate": spiders.as_ref().map(|(_, s)| s.rate().round()),
            "spider_sync_pages": spiders.as_ref().map(|(_, s)| s.pages),
            "spider_sync_seconds": spiders.as_ref().map(|(_, s)| round(s.seconds)),
            "spider_sync_stopped": spiders.as_ref().map(|(_, s)| s.stopped),
            "spider_sync_complete_hosts": spiders.as_ref().map(|(_, s)| s.complete_hosts),
            "ratio_spider": ratio(spiders.as_ref().map(|(c, _)| c.rate())).map(round),
            "ratio_spider_sync": ratio(spiders.as_ref().map(|(_, s)| s.rate())).map(round),
            "scrapy_pages": scrapy.as_ref().map(|s| s.pages),
            "scrapy_seconds": scrapy.as_ref().map(|s| round(s.seconds)),
        });
        println!("{v}");
    } else {
        println!(
            "crawlfleet: {pages} pages in {:.2} s = {rate:.0} pages/s ({} nodes, {} per site)",
            sum.elapsed, args.web.nodes, args.web.connections
        );
        if let Some(w) = web_rate {
            println!(
                "  at the web: {} pages from the first answer to the last in {web_seconds:.3} s \
                 = {w:.0} pages/s (first answer {:.2} s after the cluster's start, last {:.2} s \
                 before its end)",
                served.pages,
                served.first_at - t0,
                t0 + sum.elapsed - served.last_at
            );
        }
        if complete {
            println!(
                "  complete: every one of the {expected} pages fetched once, plus {} robots.txt \
                 for {} hosts (nginx answered {requests} requests, all 200)",
                served.robots, spec.hosts
            );
        } else {
            println!(
                "  INCOMPLETE: {pages} of {expected} pages counted; nginx served {} distinct \
                 pages, {} repeats ({}), {} robots.txt, {not_ok} not 200",
                served.pages,
                served.repeats,
                served.repeated.join(" "),
                served.robots
            );
        }
        if let Some(w) = wrk_rate {
            println!(
                "wrk:        {w:.0} requests/s (host 0, keep-alive, 64 connections): crawlfleet \
                 at {:.0}% of it",
                rate / w * 100.0
            );
        }
        if let Some((c, s)) = &spiders {
            for (name, r) in [("spider:    ", c), ("spider sync:", s)] {
                println!(
                    "{name} {} pages in {:.2} s = {:.0} pages/s (every page of {} of {} hosts; \
                     {} processes stopped at the time limit): crawlfleet {:.1}x",
                    r.pages,
                    r.seconds,
                    r.rate(),
                    r.complete_hosts,
                    spec.hosts,
                    r.stopped,
                    rate / r.rate().max(1e-9)
                );
            }
        }
        if let (Some(s), Some(r)) = (&scrapy, scrapy_rate) {
            println!(
                "scrapy:     {} pages in {:.2} s = {r:.0} pages/s: crawlfleet {:.1}x",
                s.pages,
                s.seconds,
                rate / r
            );
        }
    }
    if !complete {
        return Err(BenchError(format!(
            "the crawl fetched {pages} of {expected} pages ({} distinct served, {} repeats, \
             {not_ok} not 200)",
            served.pages, served.repeats
        )));
    }
    Ok(())
}
