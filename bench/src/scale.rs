//! `crawlfleet bench scale`: a crawl at the scale the project is for, each role a process of
//! its own as `crawlfleet up` lays them out (duplicate server with a replica, multinode
//! scheduler, `--nodes` node schedulers), over a plain synthetic web of `--hosts` hosts and
//! `--pages` pages in all, served by one `crawlfleet synthweb` process listening on every
//! host's loopback address (host `i` is the `i`-th address from `--base`, so a site's politeness
//! and the multinode scheduler's per-IP grants work per host as on a real web, and no name
//! needs resolving).
//!
//! It reports, from the web server's access log and the roles' `/proc` entries:
//! - pages/s in each tenth of the pages (the first against the last);
//! - the peak resident memory (VmHWM) of every role, over both of its lives;
//! - resident bytes per checksum entry (the duplicate server's growth over the pages stored);
//! - each node's peak of queued URIs (its `/metrics`: `crawlfleet_queue_entries`, the crawl
//!   queue on disk, plus `crawlfleet_queue_memory_entries`, the entries taken into memory),
//!   its resident growth per queued URI at that peak (peak RSS less the RSS once it answered,
//!   over the peak), and the heap bytes of the in-memory entries per queued URI
//!   (`crawlfleet_queue_memory_bytes` at the peak, over the peak);
//! - the bytes each role keeps on disk, per page, and the CPU seconds each used;
//! - the connections the nodes opened to the web (the access log numbers them) and pages per
//!   connection: keep-alive reuses a site's connections while it is crawled, so many small
//!   sites cost a TCP handshake every few pages where a few large ones cost almost none;
//! - with `--kill-at F`, the time every role takes to come back from its data after all of
//!   them are SIGKILLed once a fraction F of the pages was fetched (each until its port
//!   answers), and until the web sees requests again;
//! - with `--versus-hosts N`, the same number of pages on N hosts, crawled the same way
//!   afterwards (no kill), and the ratio of the two crawl times.
//!
//! The crawl is complete when the access log holds every page; each page fetched more than
//! once is counted (the kill may repeat what was in flight). Everything runs in a work
//! directory on disk (`--dir`, or one under the temporary directory), removed at the end.

use std::collections::HashSet;
use std::fs::{self, File};
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crawlfleet_core::marshal::Value;
use crawlfleet_core::synthweb::WebSpec;
use serde_json::json;

use crate::cli::BenchScaleArgs;
use crate::BenchError;

fn err(what: &str) -> impl Fn(std::io::Error) -> BenchError + '_ {
    move |e| BenchError(format!("{what}: {e}"))
}

/// The collection's name.
const COLLECTION: &str = "scale";

/// A role process: how to start it, the address that answers once it is up, and its peak
/// resident memory over its lives.
struct Proc {
    name: String,
    args: Vec<String>,
    ready: SocketAddr,
    child: Option<Child>,
    peak_rss: u64,
    dir: PathBuf,
    /// Resident bytes once it first answered.
    base_rss: u64,
    /// A node's `/metrics` address (its admin port).
    metrics: Option<SocketAddr>,
    /// CPU seconds (user and system) of its earlier lives.
    cpu: f64,
    /// A node's largest queue seen: (URIs queued on disk and in memory, heap bytes of the
    /// in-memory ones at that moment).
    peak_queue: (u64, u64),
}

impl Proc {
    fn spawn(&mut self, logs: &Path) -> Result<(), BenchError> {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logs.join(format!("{}.err", self.name)))
            .map_err(err("a role's log"))?;
        let exe = std::env::current_exe().map_err(err("this executable"))?;
        let child = Command::new(exe)
            .arg("role")
            .args(&self.args)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(err("starting a role"))?;
        self.child = Some(child);
        Ok(())
    }

    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Current and peak resident bytes (VmRSS, VmHWM).
    fn rss(&self) -> (u64, u64) {
        self.pid().map_or((0, 0), proc_rss)
    }

    fn note_peak(&mut self) {
        self.peak_rss = self.peak_rss.max(self.rss().1);
    }

    /// Waits until the role's address answers; the seconds it took from `since`.
    fn wait_ready(&mut self, since: Instant, timeout: Duration) -> Result<f64, BenchError> {
        let until = Instant::now() + timeout;
        loop {
            if TcpStream::connect_timeout(&self.ready, Duration::from_millis(200)).is_ok() {
                return Ok(since.elapsed().as_secs_f64());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                return Err(BenchError(format!(
                    "{} exited ({status}) before it answered on {}",
                    self.name, self.ready
                )));
            }
            if Instant::now() > until {
                return Err(BenchError(format!(
                    "{} does not answer on {}",
                    self.name, self.ready
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// CPU seconds over every life so far.
    fn cpu_seconds(&self) -> f64 {
        self.cpu + self.pid().map_or(0.0, proc_cpu)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            self.cpu += proc_cpu(c.id());
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A node's queue from its `/metrics`: (URIs queued on disk and in memory, estimated heap
/// bytes of the in-memory ones); None when it does not answer.
fn node_queue(addr: SocketAddr) -> Option<(u64, u64)> {
    use std::io::Write;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: bench\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return None;
    }
    let samples = crawlfleet_core::metrics::parse(body);
    let get = |name: &str| {
        samples
            .iter()
            .find(|x| x.name == name && x.label("collection") == Some(COLLECTION))
            .map(|x| x.value as u64)
    };
    let disk = get("crawlfleet_queue_entries")?;
    let (held, bytes) = (
        get("crawlfleet_queue_memory_entries")?,
        get("crawlfleet_queue_memory_bytes")?,
    );
    Some((disk + held, bytes))
}

/// User and system CPU seconds of a process, all its threads (0 when it is gone). The
/// clock ticks of /proc are USER_HZ, 100 on Linux.
fn proc_cpu(pid: u32) -> f64 {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // After the command name in parentheses: state is field 3, utime 14, stime 15.
    let Some((_, rest)) = text.rsplit_once(')') else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    (tick(11) + tick(12)) as f64 / 100.0
}

/// VmRSS and VmHWM of a process, in bytes (0 when it is gone).
fn proc_rss(pid: u32) -> (u64, u64) {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Bytes allocated on disk (and apparent sizes) of the files under `dir`.
fn disk_bytes(dir: &Path) -> (u64, u64) {
    let (mut blocks, mut len) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else {
                blocks += m.blocks() * 512;
                len += m.len();
            }
        }
    }
    (blocks, len)
}

/// The web server's access log, read as it grows: distinct pages (robots.txt apart), repeats,
/// robots.txt requests, answers other than 200, and the connections the requests came on.
struct LogTail {
    file: File,
    offset: u64,
    partial: Vec<u8>,
    seen: HashSet<u64, BuildHasherDefault<DefaultHasher>>,
    pages: u64,
    repeats: u64,
    robots: u64,
    not_ok: u64,
    /// Connections that carried a request: the server numbers them from 0 as it accepts them
    /// (the log's last column), so one more than the highest number logged.
    connections: u64,
}

impl LogTail {
    fn open(path: &Path) -> Result<LogTail, BenchError> {
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .map_err(err("the access log"))?;
        Ok(LogTail {
            file,
            offset: 0,
            partial: Vec::new(),
            seen: HashSet::default(),
            pages: 0,
            repeats: 0,
            robots: 0,
            not_ok: 0,
            connections: 0,
        })
    }

    /// Reads what was appended since the last call.
    fn poll(&mut self) -> Result<(), BenchError> {
        self.file
            .seek(SeekFrom::Start(self.offset))
            .map_err(err("the access log"))?;
        let mut buf = Vec::new();
        let n = (&self.file)
            .read_to_end(&mut buf)
            .map_err(err("the access log"))?;
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Ok(());
        };
        let whole: Vec<u8> = self.partial.drain(..=end).collect();
        for line in whole.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            // address:port, path, status, ... (the synthweb server's access log)
            let mut cols = line.split(|&b| b == b'\t');
            let (host, path, status) = (cols.next(), cols.next(), cols.next());
            if status != Some(b"200") {
                self.not_ok += 1;
            }
            let conn = cols
                .nth(2)
                .and_then(|c| std::str::from_utf8(c).ok()?.parse::<u64>().ok());
            if let Some(c) = conn {
                self.connections = self.connections.max(c + 1);
            }
            if path == Some(b"/robots.txt") {
                self.robots += 1;
                continue;
            }
            let key = self.seen.hasher().hash_one((host, path));
            if self.seen.insert(key) {
                self.pages += 1;
            } else {
                self.repeats += 1;
            }
        }
        Ok(())
    }
}

/// One crawl's figures.
struct Outcome {
    pages: u64,
    repeats: u64,
    robots: u64,
    not_ok: u64,
    /// Connections the nodes opened to the web.
    connections: u64,
    /// Seconds from the start to the last new page.
    seconds: f64,
    /// Seconds the roles were away (kill to the first page after the restart).
    gap: f64,
    /// Pages/s of each tenth of the pages.
    tenths: Vec<f64>,
    /// The tenth the kill fell in.
    killed_tenth: Option<usize>,
    /// (role, peak RSS bytes).
    peak_rss: Vec<(String, u64)>,
    /// (role, allocated bytes, apparent bytes) on disk after the crawl.
    disk: Vec<(String, u64, u64)>,
    /// The duplicate server's RSS growth over the crawl.
    dup_growth: u64,
    /// (node, resident growth: peak less the RSS once it answered, peak URIs queued on disk
    /// and in memory, heap bytes of the in-memory entries at that peak).
    queues: Vec<(String, u64, u64, u64)>,
    /// (role, CPU seconds over its lives).
    cpu: Vec<(String, f64)>,
    /// (role, seconds until it answered again) after the kill, and seconds until the web
    /// saw requests again.
    restart: Option<(Vec<(String, f64)>, f64)>,
}

fn crawl(args: &BenchScaleArgs, hosts: usize, kill_at: f64) -> Result<Outcome, BenchError> {
    let per_host = (args.pages / hosts).max(1);
    let expected = (hosts * per_host) as u64;
    let work = match &args.dir {
        Some(d) => d.join(format!("scale-{hosts}")),
        None => std::env::temp_dir().join(format!(
            "crawlfleet-bench-scale-{}-{hosts}",
            std::process::id()
        )),
    };
    let _ = fs::remove_dir_all(&work);
    let logs = work.join("logs");
    fs::create_dir_all(&logs).map_err(err("the work directory"))?;
    // Kept when the run fails, for its logs and data (the error names the directory).
    let mut cleanup = Cleanup(work.clone(), true);
    let say = |line: String| {
        if !args.json {
            eprintln!("{line}");
        }
    };
    say(format!(
        "scale: {hosts} hosts x {per_host} pages = {expected} pages, {} nodes",
        args.nodes
    ));
    // The web.
    let port = crawlfleet_shells::synthweb::free_port(args.base);
    let access = work.join("access.log");
    let raw_xml = work.join("web.xml");
    let web_ready = SocketAddr::from((args.base, port));
    let s = |x: &dyn std::fmt::Display| x.to_string();
    let mut web = Proc {
        name: "synthweb".into(),
        args: vec![
            "synthweb".into(),
            "--plain".into(),
            "--web".into(),
            format!("{hosts}:{per_host}"),
            "--base".into(),
            s(&args.base),
            "--port".into(),
            s(&port),
            "--access-log".into(),
            s(&access.display()),
            "--collection".into(),
            s(&raw_xml.display()),
            "--collection-name".into(),
            COLLECTION.into(),
        ],
        ready: web_ready,
        child: None,
        peak_rss: 0,
        dir: work.join("web"),
        base_rss: 0,
        metrics: None,
        cpu: 0.0,
        peak_queue: (0, 0),
    };
    web.spawn(&logs)?;
    web.wait_ready(Instant::now(), Duration::from_secs(120))?;
    let addr = || crawlfleet_shells::up::free_addr().map_err(BenchError);
    let (dup, replica, mn, mn_admin) = (addr()?, addr()?, addr()?, addr()?);
    let xml = fs::read_to_string(&raw_xml).map_err(err("the web's collection"))?;
    let configs = crawlfleet_shells::up::with_dupservers(
        &xml,
        dup,
        replica,
        &work.join("collection"),
        &[
            ("delay", Value::Float(args.delay)),
            ("max_pending", Value::int(i64::from(args.connections))),
            ("max_sites", Value::int(i64::from(args.max_sites))),
        ],
    )
    .map_err(BenchError)?;
    let config = configs
        .first()
        .ok_or_else(|| BenchError("no collection written".into()))?;
    let role = |name: &str, ready: SocketAddr, args: Vec<String>| Proc {
        name: name.into(),
        args,
        ready,
        child: None,
        peak_rss: 0,
        dir: work.join(name),
        base_rss: 0,
        metrics: None,
        cpu: 0.0,
        peak_queue: (0, 0),
    };
    let dir_of = |name: &str| s(&work.join(name).display());
    let mut roles = vec![
        role(
            "dupreplica",
            replica,
            vec![
                "dupreplica".into(),
                "--listen".into(),
                s(&replica),
                "--data-dir".into(),
                dir_of("dupreplica"),
            ],
        ),
        role(
            "dupserver",
            dup,
            vec![
                "dupserver".into(),
                "--listen".into(),
                s(&dup),
                "--data-dir".into(),
                dir_of("dupserver"),
                "--replica".into(),
                s(&replica),
            ],
        ),
        role(
            "multinode",
            mn,
            vec![
                "multinode".into(),
                "--listen".into(),
                s(&mn),
                "--admin".into(),
                s(&mn_admin),
                "--data-dir".into(),
                dir_of("multinode"),
                "--config".into(),
                s(&config.display()),
            ],
        ),
    ];
    for i in 1..=args.nodes.max(1) {
        let admin = addr()?;
        let name = format!("node{i}");
        let mut node = role(
            &name,
            admin,
            vec![
                "node".into(),
                "--node-id".into(),
                name.clone(),
                "--multinode".into(),
                s(&mn),
                "--admin".into(),
                s(&admin),
                "--data-dir".into(),
                dir_of(&name),
                "--stats-interval".into(),
                "1".into(),
                "--connections".into(),
                args.node_connections.to_string(),
            ],
        );
        node.metrics = Some(admin);
        roles.push(node);
    }
    let mut tail = LogTail::open(&access)?;
    let started = Instant::now();
    for r in roles.iter_mut() {
        r.spawn(&logs)?;
        r.wait_ready(Instant::now(), Duration::from_secs(120))?;
        r.base_rss = r.rss().0;
    }
    // (seconds, distinct pages), sampled.
    let mut series: Vec<(f64, u64)> = vec![(0.0, 0)];
    let mut restart = None;
    let mut killed_at_pages = None;
    let mut gap = 0.0;
    let mut last_report = Instant::now();
    let mut last_new = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        tail.poll()?;
        let t = started.elapsed().as_secs_f64();
        if tail.pages > series.last().map_or(0, |s| s.1) {
            series.push((t, tail.pages));
            last_new = Instant::now();
        }
        for r in roles.iter_mut() {
            r.note_peak();
            if let Some((queued, bytes)) = r.metrics.and_then(node_queue) {
                if queued > r.peak_queue.0 {
                    r.peak_queue = (queued, bytes);
                }
            }
        }
        web.note_peak();
        if last_report.elapsed() >= Duration::from_secs(10) {
            last_report = Instant::now();
            say(format!(
                "  {:.0} s: {} of {expected} pages ({} repeats)",
                t, tail.pages, tail.repeats
            ));
        }
        if tail.pages >= expected {
            break;
        }
        if kill_at > 0.0 && restart.is_none() && tail.pages as f64 >= kill_at * expected as f64 {
            say(format!(
                "  SIGKILL of every role at {} pages; restarting",
                tail.pages
            ));
            killed_at_pages = Some(tail.pages);
            for r in roles.iter_mut() {
                r.kill();
            }
            let killed = Instant::now();
            let mut ready = Vec::new();
            for r in roles.iter_mut() {
                let t0 = Instant::now();
                r.spawn(&logs)?;
                ready.push((r.name.clone(), r.wait_ready(t0, Duration::from_secs(600))?));
            }
            let before = tail.offset;
            let until = Instant::now() + Duration::from_secs(600);
            while tail.offset == before {
                if Instant::now() > until {
                    return Err(BenchError("no request in 600 s after the restart".into()));
                }
                std::thread::sleep(Duration::from_millis(5));
                tail.poll()?;
            }
            gap = killed.elapsed().as_secs_f64();
            restart = Some((ready, gap));
            last_new = Instant::now();
        }
        if last_new.elapsed().as_secs_f64() > args.stall {
            return Err(BenchError(format!(
                "no new page in {} s: {} of {expected} pages fetched (logs in {})",
                args.stall,
                tail.pages,
                logs.display()
            )));
        }
        if args.timeout > 0.0 && t > args.timeout {
            return Err(BenchError(format!(
                "not done after {} s: {} of {expected} pages",
                args.timeout, tail.pages
            )));
        }
    }
    let seconds = series.last().map_or(0.0, |s| s.0);
    // A moment for late answers (repeats would show), then the final peaks.
    std::thread::sleep(Duration::from_millis(500));
    tail.poll()?;
    for r in roles.iter_mut() {
        r.note_peak();
    }
    let dup_growth = roles[1].rss().0.saturating_sub(roles[1].base_rss);
    let queues = roles
        .iter()
        .filter(|r| r.metrics.is_some())
        .map(|r| {
            let growth = r.peak_rss.saturating_sub(r.base_rss);
            (r.name.clone(), growth, r.peak_queue.0, r.peak_queue.1)
        })
        .collect();
    let cpu = roles
        .iter()
        .chain(std::iter::once(&web))
        .map(|r| (r.name.clone(), r.cpu_seconds()))
        .collect();
    for r in roles.iter_mut() {
        r.kill();
    }
    web.kill();
    // When the crawl reached `pages`, interpolated between the samples around it.
    let at = |pages: u64| -> f64 {
        let i = series.partition_point(|s| s.1 < pages);
        match (i.checked_sub(1).and_then(|j| series.get(j)), series.get(i)) {
            (Some(&(t0, p0)), Some(&(t1, p1))) if p1 > p0 => {
                t0 + (t1 - t0) * (pages - p0) as f64 / (p1 - p0) as f64
            }
            (_, Some(&(t, _))) => t,
            _ => seconds,
        }
    };
    let tenths: Vec<f64> = (0..10u64)
        .map(|k| {
            let (a, b) = (expected * k / 10, expected * (k + 1) / 10);
            let dt = at(b) - at(a);
            if dt > 0.0 {
                (b - a) as f64 / dt
            } else {
                0.0
            }
        })
        .collect();
    let killed_tenth = killed_at_pages.map(|p| ((p * 10 / expected.max(1)) as usize).min(9));
    cleanup.1 = false;
    Ok(Outcome {
        pages: tail.pages,
        repeats: tail.repeats,
        robots: tail.robots,
        connections: tail.connections,
        not_ok: tail.not_ok,
        seconds,
        gap,
        tenths,
        killed_tenth,
        peak_rss: roles
            .iter()
            .map(|r| (r.name.clone(), r.peak_rss))
            .chain(std::iter::once(("synthweb".to_string(), web.peak_rss)))
            .collect(),
        disk: roles
            .iter()
            .map(|r| {
                let (a, l) = disk_bytes(&r.dir);
                (r.name.clone(), a, l)
            })
            .collect(),
        dup_growth,
        queues,
        cpu,
        restart,
    })
}

/// Removes the work directory when dropped, unless told to keep it (a failed run).
struct Cleanup(PathBuf, bool);

impl Drop for Cleanup {
    fn drop(&mut self) {
        if self.1 {
            eprintln!(
                "scale: the failed run's directory is kept: {}",
                self.0.display()
            );
        } else {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

const MB: f64 = 1024.0 * 1024.0;

fn report(o: &Outcome) -> serde_json::Value {
    let round = |x: f64| (x * 100.0).round() / 100.0;
    // Bytes over the queue's peak; null for a node that never had anything queued.
    let per_queued = |bytes: u64, queued: u64| match queued {
        0 => serde_json::Value::Null,
        q => json!(round(bytes as f64 / q as f64)),
    };
    let pages = o.pages.max(1) as f64;
    let first = o.tenths.first().copied().unwrap_or(0.0);
    let last = o.tenths.last().copied().unwrap_or(0.0);
    json!({
        "pages": o.pages,
        "repeats": o.repeats,
        "robots_requests": o.robots,
        "connections": o.connections,
        "pages_per_connection": round(pages / o.connections.max(1) as f64),
        "not_200": o.not_ok,
        "seconds": round(o.seconds),
        "seconds_without_restart": round(o.seconds - o.gap),
        "pages_per_second": round(o.pages as f64 / (o.seconds - o.gap).max(1e-9)),
        "tenths_pages_per_second": o.tenths.iter().map(|r| r.round()).collect::<Vec<_>>(),
        "killed_in_tenth": o.killed_tenth,
        "last_over_first_tenth": if first > 0.0 { round(last / first) } else { 0.0 },
        "peak_rss_mb": o.peak_rss.iter().map(|(n, b)| (n.clone(), json!(round(*b as f64 / MB))))
            .collect::<serde_json::Map<_, _>>(),
        "cpu_seconds": o.cpu.iter().map(|(n, c)| (n.clone(), json!(round(*c))))
            .collect::<serde_json::Map<_, _>>(),
        "disk_bytes_per_page": o.disk.iter().map(|(n, a, _)| (n.clone(), json!(round(*a as f64 / pages))))
            .collect::<serde_json::Map<_, _>>(),
        "disk_apparent_bytes_per_page": o.disk.iter().map(|(n, _, l)| (n.clone(), json!(round(*l as f64 / pages))))
            .collect::<serde_json::Map<_, _>>(),
        "rss_bytes_per_checksum_entry": round(o.dup_growth as f64 / pages),
        "peak_queued_uris": o.queues.iter().map(|(n, _, q, _)| (n.clone(), json!(q)))
            .collect::<serde_json::Map<_, _>>(),
        "rss_bytes_per_queued_uri": o.queues.iter()
            .map(|(n, g, q, _)| (n.clone(), per_queued(*g, *q)))
            .collect::<serde_json::Map<_, _>>(),
        "queue_memory_bytes_per_queued_uri": o.queues.iter()
            .map(|(n, _, q, b)| (n.clone(), per_queued(*b, *q)))
            .collect::<serde_json::Map<_, _>>(),
        "restart": o.restart.as_ref().map(|(ready, resumed)| json!({
            "roles_ready_seconds": ready.iter().map(|(n, s)| (n.clone(), json!(round(*s))))
                .collect::<serde_json::Map<_, _>>(),
            "crawl_resumed_after_seconds": round(*resumed),
        })),
    })
}

/// `crawlfleet bench scale`.
pub fn run(args: &BenchScaleArgs) -> Result<(), BenchError> {
    if args.hosts == 0 || args.hosts > WebSpec::MAX_HOSTS || args.pages < args.hosts {
        return Err(BenchError(format!(
            "--hosts must be 1..={} and --pages at least --hosts",
            WebSpec::MAX_HOSTS
        )));
    }
    if !(0.0..1.0).contains(&args.kill_at) {
        return Err(BenchError("--kill-at must be in [0, 1)".into()));
    }
    descriptors_suffice(args.hosts, args.nodes, args.node_connections)?;
    let main = crawl(args, args.hosts, args.kill_at)?;
    let versus = match args.versus_hosts {
        Some(h) if h > 0 && h != args.hosts => Some((h, crawl(args, h, 0.0)?)),
        _ => None,
    };
    let mut v = report(&main);
    v["hosts"] = json!(args.hosts);
    v["nodes"] = json!(args.nodes);
    v["connections_per_site"] = json!(args.connections);
    v["max_sites"] = json!(args.max_sites);
    v["node_connections"] = json!(args.node_connections);
    v["delay"] = json!(args.delay);
    if let Some((h, o)) = &versus {
        let ours = main.seconds - main.gap;
        let mut r = report(o);
        v["versus"] = json!({
            "hosts": h,
            "pages": o.pages,
            "seconds": (o.seconds * 100.0).round() / 100.0,
            "time_ratio": ((ours / o.seconds.max(1e-9)) * 100.0).round() / 100.0,
            "connections": o.connections,
            "pages_per_connection": r["pages_per_connection"].take(),
            "cpu_seconds": r["cpu_seconds"].take(),
        });
    }
    let expected = ((args.pages / args.hosts).max(1) * args.hosts) as u64;
    let complete = main.pages == expected && main.not_ok == 0;
    v["complete"] = json!(complete);
    if args.json {
        println!("{v}");
    } else {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    }
    if !complete {
        return Err(BenchError(format!(
            "{} of {expected} pages, {} answers not 200",
            main.pages, main.not_ok
        )));
    }
    Ok(())
}

/// Descriptors a process may hold, after `main` raised the soft limit to the hard one.
fn open_files_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Descriptors the synthetic web's process needs besides its connections: files, the event
/// loop, the pipes to this process.
const WEB_SPARE_DESCRIPTORS: u64 = 64;

/// The synthetic web's process holds a listener a host and, at worst, every socket of every
/// node's fetcher. Short of descriptors, its accepts fail and the crawl waits on them (a run with
/// 5,000 fetcher sockets a node on a 20,000 limit took 2.8 times as long): say so before
/// starting rather than measure that.
fn descriptors_suffice(hosts: usize, nodes: usize, sockets: u32) -> Result<(), BenchError> {
    let sockets = u64::from(sockets);
    let need = hosts as u64 + nodes as u64 * sockets + WEB_SPARE_DESCRIPTORS;
    match open_files_limit() {
        Some(limit) if limit < need => Err(BenchError(format!(
            "{hosts} hosts and {nodes} nodes need about {need} open descriptors in the synthetic \
             web's process (a listener a host, {sockets} sockets a node), the limit is {limit}: \
             raise the hard limit (`ulimit -Hn`, LimitNOFILE) or crawl fewer hosts"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_web_beyond_the_descriptor_limit_is_refused_before_the_crawl() {
        // Linux caps any process at fs.nr_open (at most 2^30 descriptors).
        let e = descriptors_suffice(1 << 31, 2, 512).unwrap_err();
        assert!(e.0.contains("open descriptors"), "{}", e.0);
        // One host and one node fit under any limit a role can start with.
        descriptors_suffice(1, 1, 512).unwrap();
    }

    #[test]
    fn the_access_log_tail_counts_distinct_pages_across_partial_reads() {
        let dir = tempdir();
        let path = dir.join("access.log");
        let mut t = LogTail::open(&path).unwrap();
        use std::io::Write;
        let mut f = fs::OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"127.0.0.1:80\t/robots.txt\t200\t1\t2\t0\n127.0.0.1:80\t/\t200\t1\t2\t0\n127.0.0.1:80\t/a")
            .unwrap();
        t.poll().unwrap();
        assert_eq!((t.pages, t.robots), (1, 1));
        f.write_all(
            b".html\t404\t1\t2\t0\n127.0.0.1:80\t/\t200\t1\t2\t0\n127.0.0.2:80\t/\t200\t1\t2\t0\n",
        )
        .unwrap();
        t.poll().unwrap();
        assert_eq!((t.pages, t.repeats, t.not_ok), (3, 1, 1));
        assert_eq!(
            t.connections, 1,
            "every request so far came on connection 0"
        );
        f.write_all(b"127.0.0.2:80\t/b.html\t200\t1\t2\t7\n")
            .unwrap();
        t.poll().unwrap();
        assert_eq!(t.connections, 8, "connections 0 to 7 were accepted");
        let _ = fs::remove_dir_all(dir);
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("scale-unit-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }
}
