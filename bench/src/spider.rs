//! The spider column of `crawlfleet bench crawl`: spider_cli (`cargo install spider_cli
//! --no-default-features`, "the fastest web crawler CLI in Rust") crawling the same web from
//! the same nginx, robots.txt obeyed (`--respect-robots-txt`), in two modes:
//!
//! - its default concurrent mode (`spider --url URL --respect-robots-txt crawl --output-links`);
//! - `crawl --sync --output-links`, which pauses 1 ms before each request.
//!
//! `--output-links` is what makes spider_cli crawl at all. Its `crawl` command spawns the crawl
//! as a task and, without `--output-links`, returns from `main` at once, so the runtime drops
//! the crawl before its first request completes and the process exits 0 having fetched nothing
//! (strace shows a connect and a close). With it, `main` prints each page's URL from the crawl's
//! page channel until the channel closes at the end of the crawl; its standard output goes to
//! /dev/null.
//!
//! The crawl may still end early, exit 0 and no message, when the server answers fast: its
//! crawl task returns by itself (a debugger sees the task complete, not cancelled) with links
//! still unvisited. On one host of a 5,000-page tree the concurrent mode fetched 4 to 289 pages
//! from nginx in six runs, but all 5,000 from a Python server answering each request after
//! 20 ms. `--sync` (a 1 ms pause before each request) fetched all 20,000 pages of one host, and
//! with a process for each of 50 hosts every page in four runs of five (43 hosts whole in the
//! fifth); the concurrent mode, its processes slowed by each other, 94-100% of the pages.
//!
//! spider crawls one site per process, so it runs one process per host of the web at once (how
//! a spider user crawls many sites), each started at its host's `/`, and a process still running
//! after the time limit is stopped. What it fetched is read from nginx's access log, as for our
//! crawl: the distinct pages (robots.txt apart), the hosts every page of which was fetched, and
//! the seconds from the start to the last request answered; a mode that stops early is reported
//! with the pages it reached and its rate over them.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crawlfleet_core::synthweb::SyntheticWeb;

use crate::crawl::{access_log, err};
use crate::BenchError;

/// What one mode of spider did.
#[derive(Debug)]
pub(super) struct SpiderRun {
    /// Distinct pages fetched, robots.txt apart.
    pub(super) pages: u64,
    /// Hosts every page of which was fetched.
    pub(super) complete_hosts: usize,
    /// Seconds from the start to the last request answered.
    pub(super) seconds: f64,
    /// Processes that were still running at the deadline (stopped then).
    pub(super) stopped: usize,
}

impl SpiderRun {
    /// Pages per second over the pages fetched.
    pub(super) fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.pages as f64 / self.seconds
        } else {
            0.0
        }
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs spider (`exe`) on every host of `web`, in the `--sync` mode or not, for at most
/// `limit`; reads what it fetched from the access log at `log`.
pub(super) fn run(
    exe: &Path,
    dir: &Path,
    web: &SyntheticWeb,
    log: &Path,
    sync: bool,
    limit: Duration,
) -> Result<SpiderRun, BenchError> {
    let before = access_log(log, 0)?.lines;
    let mode = if sync { "sync" } else { "concurrent" };
    let tmp = dir.join(format!("spider-{mode}-tmp"));
    fs::create_dir_all(&tmp).map_err(err("spider's temporary directory"))?;
    let started_at = unix_now();
    let started = Instant::now();
    let mut children: Vec<Child> = Vec::new();
    for (i, host) in web.hosts().iter().enumerate() {
        let out = fs::File::create(dir.join(format!("spider-{mode}-{i}.log")))
            .map_err(err("spider's log"))?;
        let mut cmd = Command::new(exe);
        cmd.args(["--url", &format!("http://{host}/"), "--respect-robots-txt"])
            .arg("crawl");
        if sync {
            cmd.arg("--sync");
        }
        // Without it spider_cli returns before its crawl fetches anything (module docs).
        cmd.arg("--output-links");
        // Each process leaves a spool directory (spider_html_*) in the temporary directory:
        // the work directory's, removed with it.
        let spawned = cmd
            .env("TMPDIR", &tmp)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(out)
            .spawn();
        match spawned {
            Ok(c) => children.push(c),
            Err(e) => {
                for mut c in children {
                    let _ = c.kill();
                    let _ = c.wait();
                }
                return Err(BenchError(format!("cannot run {}: {e}", exe.display())));
            }
        }
    }
    let deadline = started + limit;
    loop {
        let running = children
            .iter_mut()
            .map(|c| matches!(c.try_wait(), Ok(None)))
            .filter(|&r| r)
            .count();
        if running == 0 || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut stopped = 0;
    for mut c in children {
        if matches!(c.try_wait(), Ok(None)) {
            stopped += 1;
            let _ = c.kill();
        }
        let _ = c.wait();
    }
    let served = access_log(log, before)?;
    let seconds = if served.last_at > started_at {
        served.last_at - started_at
    } else {
        started.elapsed().as_secs_f64()
    };
    let per_host = web.spec().pages as u64;
    let complete_hosts = served
        .host_pages
        .values()
        .filter(|&&n| n >= per_host)
        .count();
    Ok(SpiderRun {
        pages: served.pages,
        complete_hosts,
        seconds,
        stopped,
    })
}
