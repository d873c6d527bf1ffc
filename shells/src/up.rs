//! `crawlfleet up`: a whole cluster in one process on loopback — a duplicate server and its
//! replica, a multinode scheduler and N node schedulers, each role on its own threads and
//! sockets exactly as on separate hosts — optionally with a synthetic web to crawl.
//!
//! The data directory holds one sub-directory per role (`dupserver`, `dupreplica`,
//! `multinode`, `node1`...). Collections come from `--config` files and, with
//! `--synthetic-web`, a collection `synthetic` for the generated web; a collection that names
//! no duplicate servers is given the embedded pair.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::config::{parse_xml, to_xml};
use crawlfleet_core::crawl::CrawlCounters;
use crawlfleet_core::marshal::Value;
use crawlfleet_core::synthweb::{SyntheticWeb, WebSpec};
use indicatif::{ProgressBar, ProgressStyle};
use log::info;
use parking_lot::Mutex;

use crate::cli::{AdminOpts, DupArgs, MultinodeArgs, NodeArgs, SchedTimers, UpArgs};
use crate::crawl::{NodeStatus, StatusSlot};
use crate::sessionsink::FeedCounters;
use crate::synthweb::SynthServer;

mod feeding;
pub use feeding::{Distributors, FeedingOptions};

/// A free port on 127.0.0.1 for a role `up` starts, which binds it a moment later.
///
/// It is chosen at random below the kernel's ephemeral range, where the ports of `:0` binds and
/// of outgoing connections come from: a port taken from that range could be handed to another
/// program's `:0` bind between this check and the role's own bind (seen with tests binding
/// listeners in parallel), whereas nothing is handed out below it. Falls back to a `:0` port
/// when the ephemeral range leaves no room below it.
fn free_addr() -> Result<SocketAddr, String> {
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const LOWEST: u16 = 10_000;
    if first_ephemeral > LOWEST + 1_000 {
        for _ in 0..256 {
            let port = fastrand::u16(LOWEST..first_ephemeral);
            if let Ok(addr) = TcpListener::bind(("127.0.0.1", port)).and_then(|l| l.local_addr()) {
                return Ok(addr);
            }
        }
    }
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// Set once a cluster is detached: a role that stops after that has nothing to tell.
type Detached = Arc<AtomicBool>;

fn spawn_role(
    name: &str,
    detached: &Detached,
    f: impl FnOnce() -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    let label = name.to_string();
    let detached = detached.clone();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if let Err(e) = f() {
                if detached.load(Ordering::Acquire) {
                    log::debug!("{label} stopped after the cluster was detached: {e}");
                    return;
                }
                log::error!("{label} stopped: {e}");
                eprintln!("crawlfleet up: {label} stopped: {e}");
                std::process::exit(1);
            }
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start {name}: {e}"))
}

/// Waits (at most five seconds) until something accepts connections at `addr`.
fn wait_listening(addr: SocketAddr) {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Gives every collection of an XML configuration the embedded duplicate servers when it names
/// none, and writes each to `<prefix>-<n>.xml`.
fn with_dupservers(
    xml: &str,
    dup: SocketAddr,
    replica: SocketAddr,
    prefix: &Path,
    overrides: &[(&str, Value<'static>)],
) -> Result<Vec<PathBuf>, String> {
    let dicts = parse_xml(xml).map_err(|e| e.to_string())?;
    let s = |x: String| Value::owned_bytes(x.into_bytes());
    let mut fixed = Vec::new();
    for (name, dict) in dicts {
        let mut pairs = dict.as_dict().map(<[_]>::to_vec).unwrap_or_default();
        let has = dict
            .get(b"ppdup")
            .and_then(|p| p.get(b"dupservers"))
            .and_then(Value::as_list)
            .is_some_and(|l| !l.is_empty());
        if !has {
            pairs.retain(|(k, _)| k.as_bytes() != Some(b"ppdup"));
            pairs.push((
                Value::bytes(b"ppdup").into_owned(),
                Value::Dict(vec![
                    (
                        Value::bytes(b"dupservers").into_owned(),
                        Value::list(vec![s(dup.to_string())]),
                    ),
                    (
                        Value::bytes(b"replicas").into_owned(),
                        Value::list(vec![s(replica.to_string())]),
                    ),
                ]),
            ));
        }
        for (k, v) in overrides {
            pairs.retain(|(key, _)| key.as_bytes() != Some(k.as_bytes()));
            pairs.push((Value::owned_bytes(k.as_bytes().to_vec()), v.clone()));
        }
        fixed.push((name, Value::Dict(pairs)));
    }
    let mut paths = Vec::new();
    for (i, (name, dict)) in fixed.iter().enumerate() {
        let text = to_xml(name, dict).map_err(|e| e.to_string())?;
        let out = PathBuf::from(format!("{}-{i}.xml", prefix.display()));
        std::fs::write(&out, text).map_err(|e| format!("cannot write {}: {e}", out.display()))?;
        paths.push(out);
    }
    Ok(paths)
}

/// The per-collection summary of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The counters of every node, merged.
    pub counters: CrawlCounters,
    /// Entries left in the nodes' crawl queues.
    pub queued: u64,
    /// Documents fed through content distributor sessions, over the nodes.
    pub feed: FeedCounters,
}

/// What a cluster crawled: per collection, and the seconds from the start of the cluster to
/// the moment its crawl went quiet.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// By collection name.
    pub collections: BTreeMap<String, Summary>,
    /// Seconds the crawl took.
    pub elapsed: f64,
    /// The documents were fed to content distributors (the summary shows them indexed).
    pub feeding: bool,
}

impl RunSummary {
    /// Pages fetched (robots.txt excluded), all collections.
    pub fn pages_fetched(&self) -> u64 {
        self.collections
            .values()
            .map(|s| s.counters.processed)
            .sum()
    }

    /// Pages fetched per second of the run.
    pub fn pages_per_second(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.pages_fetched() as f64 / self.elapsed
        } else {
            0.0
        }
    }

    /// Prints the summary as `crawlfleet up --until-idle` does: a table, or one JSON object.
    pub fn print(&self, json: bool) {
        print_summary(&self.collections, self.elapsed, self.feeding, json);
    }
}

fn summarize(slots: &[StatusSlot]) -> BTreeMap<String, Summary> {
    let mut out: BTreeMap<String, Summary> = BTreeMap::new();
    for s in slots {
        let st: NodeStatus = s.lock().clone();
        for (name, c) in st.collections {
            let e = out.entry(name).or_default();
            e.counters.merge(&c.counters);
            e.queued += c.queued;
            e.feed.fed += c.feed.fed;
            e.feed.acked += c.feed.acked;
            e.feed.failed += c.feed.failed;
            e.feed.pending += c.feed.pending;
        }
    }
    out
}

fn all_drained(slots: &[StatusSlot], since: Instant) -> bool {
    slots.iter().all(|s| {
        let st = s.lock();
        st.at.is_some_and(|t| t > since) && st.collections.values().all(|c| c.drained)
    })
}

/// A collection for [`Cluster::start`]: its configuration XML, attributes set over every
/// collection in it, and where it came from (a file name, for error messages; may be empty).
#[derive(Clone, Debug)]
pub struct CollectionSource {
    /// Where the XML came from.
    pub origin: String,
    /// The configuration (docs/collection-config.md).
    pub xml: String,
    /// Attributes that replace the XML's.
    pub overrides: Vec<(&'static str, Value<'static>)>,
}

/// How [`Cluster::watch`] runs.
#[derive(Clone, Copy, Debug)]
pub struct WatchOptions {
    /// Return when every collection is crawled; otherwise watch forever.
    pub until_idle: bool,
    /// Seconds with nothing queued, fetching or moving before the crawl counts as done.
    pub idle_seconds: f64,
    /// Give up after this many seconds; 0 waits forever.
    pub timeout: f64,
}

/// A duplicate server, its replica, a multinode scheduler and node schedulers, each on its own
/// threads and loopback sockets in this process. The roles run until the process ends.
pub struct Cluster {
    /// The multinode scheduler's node address.
    pub multinode: SocketAddr,
    /// The multinode scheduler's administrative address.
    pub multinode_admin: SocketAddr,
    /// The duplicate server.
    pub dupserver: SocketAddr,
    /// The duplicate server's replica.
    pub replica: SocketAddr,
    /// The link store receiving the nodes' link data.
    pub linkstore: SocketAddr,
    /// The node schedulers' administrative addresses.
    pub node_admins: Vec<SocketAddr>,
    /// Node schedulers started.
    pub nodes: usize,
    /// The name server and content distributors the nodes feed, if any.
    pub distributors: Option<Distributors>,
    slots: Vec<StatusSlot>,
    mn_queued: Arc<AtomicU64>,
    detached: Detached,
    started: Instant,
}

impl Cluster {
    /// Starts the roles with their data under `data_dir` (one sub-directory each) and the
    /// collections of `sources`; a collection naming no duplicate servers gets the cluster's.
    /// The documents stay in the nodes' document logs.
    pub fn start(
        data_dir: &Path,
        nodes: usize,
        sources: &[CollectionSource],
    ) -> Result<Cluster, String> {
        Cluster::start_with(data_dir, nodes, sources, &FeedingOptions::default())
    }

    /// [`Cluster::start`], the nodes feeding their documents to content distributors as
    /// `feeding` says: distributors started here, or those of an existing name server.
    pub fn start_with(
        data_dir: &Path,
        nodes: usize,
        sources: &[CollectionSource],
        feeding: &FeedingOptions,
    ) -> Result<Cluster, String> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| format!("data dir {} is unusable: {e}", data_dir.display()))?;
        let dup = free_addr()?;
        let replica = free_addr()?;
        let mn = free_addr()?;
        let mn_admin = free_addr()?;
        let mut configs: Vec<PathBuf> = Vec::new();
        for (i, src) in sources.iter().enumerate() {
            let prefix = data_dir.join(if src.origin.is_empty() {
                "synthetic".to_string()
            } else {
                format!("config{i}")
            });
            let written = with_dupservers(&src.xml, dup, replica, &prefix, &src.overrides)
                .map_err(|e| match src.origin.as_str() {
                    "" => e,
                    o => format!("{o}: {e}"),
                })?;
            configs.extend(written);
        }
        if configs.is_empty() {
            return Err(
                "nothing to crawl: give --config FILE.xml or --synthetic-web HOSTS:PAGES".into(),
            );
        }
        let detached: Detached = Arc::new(AtomicBool::new(false));
        let mut names = Vec::new();
        for src in sources {
            for (name, _) in parse_xml(&src.xml).map_err(|e| e.to_string())? {
                names.push(name);
            }
        }
        let distributors = feeding::start(data_dir, feeding, &names, &detached)?;
        let nameserver = distributors.as_ref().map(|d| d.nameserver);
        let timers = || SchedTimers {
            keepalive: 120.0,
            sync_ms: 100,
        };
        let admin_opts = || AdminOpts {
            stats_merge: 60.0,
            stats_cycles: 8,
            admin_max_body: 16 << 20,
        };
        let dup_args = |listen, dir: &str| DupArgs {
            listen,
            data_dir: data_dir.join(dir),
            node_id: None,
            keepalive: 120.0,
        };
        let ra = dup_args(replica, "dupreplica");
        spawn_role("dupreplica", &detached, move || {
            crate::dupserver::run(crawlfleet_core::dupserver::Mode::Replica, &ra, None)
        })?;
        let da = dup_args(dup, "dupserver");
        spawn_role("dupserver", &detached, move || {
            crate::dupserver::run(crawlfleet_core::dupserver::Mode::Server, &da, Some(replica))
        })?;
        let links = free_addr()?;
        let la = crate::cli::LinkstoreArgs {
            listen: Some(links),
            base_port: 13000,
            data_dir: data_dir.join("linkstore"),
            max_message: 64 << 20,
        };
        spawn_role("linkstore", &detached, move || crate::linkstore::run(&la))?;
        let mn_queued = Arc::new(AtomicU64::new(0));
        let ma = MultinodeArgs {
            listen: mn,
            admin: mn_admin,
            data_dir: data_dir.join("multinode"),
            config: configs,
            timers: timers(),
            admin_opts: admin_opts(),
        };
        let q = mn_queued.clone();
        spawn_role("multinode", &detached, move || {
            crate::multinode::run_with(&ma, Some(q))
        })?;
        // Node schedulers reconnect with backoff, but a start without warnings is nicer.
        wait_listening(mn);
        let mut slots: Vec<StatusSlot> = Vec::new();
        let mut node_admins = Vec::new();
        for i in 1..=nodes.max(1) {
            let admin = free_addr()?;
            node_admins.push(admin);
            let slot: StatusSlot = Arc::new(Mutex::new(NodeStatus::default()));
            slots.push(slot.clone());
            let na = NodeArgs {
                node_id: Some(format!("node{i}")),
                multinode: Some(mn),
                standalone: false,
                admin,
                data_dir: data_dir.join(format!("node{i}")),
                config: Vec::new(),
                dup_keepalive: 120.0,
                quarantine_interval: 5.0,
                stats_interval: 10.0,
                block_seconds: 1800,
                linkstore: Some(links),
                nameserver,
                timers: timers(),
                admin_opts: admin_opts(),
            };
            spawn_role(&format!("node{i}"), &detached, move || {
                crate::node::run_with(&na, Some(slot))
            })?;
        }
        info!(
            "cluster up: multinode {mn} (admin {mn_admin}), {nodes} nodes, duplicate server {dup}, replica {replica}, data in {}",
            data_dir.display()
        );
        Ok(Cluster {
            multinode: mn,
            multinode_admin: mn_admin,
            dupserver: dup,
            replica,
            linkstore: links,
            node_admins,
            nodes: nodes.max(1),
            distributors,
            slots,
            mn_queued,
            detached,
            started: Instant::now(),
        })
    }

    /// Restarts the clock of the run's elapsed time.
    pub fn restart_clock(&mut self) {
        self.started = Instant::now();
    }

    /// What the collections have done so far.
    pub fn summary(&self) -> RunSummary {
        RunSummary {
            collections: summarize(&self.slots),
            elapsed: self.started.elapsed().as_secs_f64(),
            feeding: self.distributors.is_some(),
        }
    }

    /// Shows progress on `bar` every 250 ms; with `until_idle`, returns when every collection
    /// is crawled, the elapsed time without the idle seconds waited.
    pub fn watch(&self, opts: &WatchOptions, bar: &ProgressBar) -> Result<RunSummary, String> {
        let started = self.started;
        let slots = &self.slots;
        let mn_queued = &self.mn_queued;
        let mut idle_since: Option<Instant> = None;
        let mut last_total = u64::MAX;
        let mut last_rate_at = (Instant::now(), 0u64);
        let mut rate = 0.0;
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let sum = summarize(slots);
            let fetched: u64 = sum.values().map(|s| s.counters.processed).sum();
            let stored: u64 = sum.values().map(|s| s.counters.stored).sum();
            let queued: u64 =
                sum.values().map(|s| s.queued).sum::<u64>() + mn_queued.load(Ordering::Relaxed);
            let dt = last_rate_at.0.elapsed().as_secs_f64();
            if dt >= 1.0 {
                rate = (fetched - last_rate_at.1.min(fetched)) as f64 / dt;
                last_rate_at = (Instant::now(), fetched);
            }
            bar.set_message(format!(
                "{fetched} pages fetched, {stored} stored, {rate:.0} pages/s, {queued} queued"
            ));
            bar.tick();
            if !opts.until_idle {
                continue;
            }
            let activity = fetched + stored + queued;
            let quiet = activity == last_total
                && queued == 0
                && mn_queued.load(Ordering::Relaxed) == 0
                && all_drained(slots, started)
                && (fetched > 0 || started.elapsed() > Duration::from_secs(5));
            last_total = activity;
            match (quiet, idle_since) {
                (true, None) => idle_since = Some(Instant::now()),
                (true, Some(t)) if t.elapsed().as_secs_f64() >= opts.idle_seconds => break,
                (true, Some(_)) => {}
                (false, _) => idle_since = None,
            }
            if opts.timeout > 0.0 && started.elapsed().as_secs_f64() > opts.timeout {
                bar.finish_and_clear();
                return Err(format!(
                    "the crawl was not done after {} seconds (--timeout)",
                    opts.timeout
                ));
            }
        }
        bar.finish_and_clear();
        Ok(RunSummary {
            collections: summarize(slots),
            elapsed: started.elapsed().as_secs_f64() - opts.idle_seconds,
            feeding: self.distributors.is_some(),
        })
    }

    /// Waits (at most `timeout`) until the content distributors acknowledged every document
    /// the nodes made durable; the summary after it shows them indexed. `Err` says what is
    /// missing. Nothing to wait for without distributors.
    pub fn wait_fed(&self, timeout: Duration) -> Result<(), String> {
        match self.distributors {
            Some(_) => feeding::wait_fed(&self.slots, timeout),
            None => Ok(()),
        }
    }

    /// From now on a role that stops (its data directory removed, say) only logs it instead of
    /// ending the process: for callers that go on after the crawl and clean up its data.
    pub fn detach(self) {
        self.detached.store(true, Ordering::Release);
    }
}

/// How long `up --until-idle` waits at the end for the distributors to acknowledge the
/// documents fed.
const FEED_WAIT: Duration = Duration::from_secs(60);

/// Runs the cluster; with `--until-idle`, until every collection is crawled.
pub fn run(args: &UpArgs) -> Result<(), String> {
    crate::set_quiet(true);
    let data_dir = match &args.data_dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("crawlfleet-up-{}", std::process::id())),
    };
    std::fs::create_dir_all(&data_dir)
        .map_err(|e| format!("data dir {} is unusable: {e}", data_dir.display()))?;
    let mut sources: Vec<CollectionSource> = Vec::new();
    for path in &args.config {
        let xml = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        sources.push(CollectionSource {
            origin: path.display().to_string(),
            xml,
            overrides: Vec::new(),
        });
    }
    let mut web_server = None;
    if let Some(spec) = &args.synthetic_web {
        let spec: WebSpec = spec.parse().map_err(|e| format!("--synthetic-web: {e}"))?;
        let spec = WebSpec {
            seed: args.seed,
            ..spec
        };
        let base: Ipv4Addr = args.web_base;
        let port = match args.web_port {
            Some(p) => p,
            None => crate::synthweb::free_port(base),
        };
        let web = Arc::new(SyntheticWeb::generate(&spec, base, port));
        let server = SynthServer::start_logging(web.clone(), args.access_log.as_deref())
            .map_err(|e| format!("cannot serve the synthetic web: {e}"))?;
        let mut overrides = Vec::new();
        if let Some(d) = args.web_delay {
            overrides.push(("delay", Value::Float(d)));
        }
        if let Some(n) = args.web_connections {
            overrides.push(("max_pending", Value::int(i64::from(n))));
        }
        // The link store gets both applications' data (MS-FSWASDR 2.2.1.3): the WebAnalyzer
        // link graph and the SPRel document lines.
        let app = |a: &str| Value::owned_bytes(a.as_bytes().to_vec());
        overrides.push((
            "linkstore",
            Value::Dict(vec![(
                Value::owned_bytes(b"applications".to_vec()),
                Value::list(vec![app("webanalyzer"), app("sharepoint")]),
            )]),
        ));
        sources.push(CollectionSource {
            origin: String::new(),
            xml: web.collection_xml("synthetic"),
            overrides,
        });
        if !args.json {
            eprintln!(
                "synthetic web: {} hosts x {} pages from {} (port {port})",
                spec.hosts,
                spec.pages,
                web.start_uris().join(" ")
            );
        }
        web_server = Some(server);
    }
    if let Some(dir) = &args.warc {
        let dir = std::path::absolute(dir).map_err(|e| format!("--warc: {e}"))?;
        sources
            .iter_mut()
            .for_each(|s| s.overrides.push(("warc", crate::warc::up_section(&dir))));
    }
    let feeding = FeedingOptions {
        distributors: args.distributors,
        nameserver: args.nameserver,
    };
    let mut cluster = Cluster::start_with(&data_dir, args.nodes, &sources, &feeding)?;
    if let (Some(d), false) = (&cluster.distributors, args.json) {
        eprintln!(
            "content distributors: name server {}, {} distributors{}",
            d.nameserver,
            d.nodes,
            if d.started.is_empty() {
                " (existing)".to_string()
            } else {
                format!(" at {:?}", d.started)
            }
        );
    }
    if !args.json {
        let admins: Vec<String> = cluster.node_admins.iter().map(|a| a.to_string()).collect();
        eprintln!(
            "crawlfleet up: multinode {}, {} node schedulers, duplicate server {} + replica {}, link store {}; data in {}\n\
             administration (XML-RPC, `crawlfleet admin --server ADDR ...`): multinode {}, nodes {}",
            cluster.multinode,
            cluster.nodes,
            cluster.dupserver,
            cluster.replica,
            cluster.linkstore,
            data_dir.display(),
            cluster.multinode_admin,
            admins.join(" ")
        );
    }
    cluster.restart_clock();
    let bar = if args.json || args.no_progress {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::new_spinner();
        b.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        b
    };
    let mut sum = cluster.watch(
        &WatchOptions {
            until_idle: args.until_idle,
            idle_seconds: args.idle_seconds,
            timeout: args.timeout,
        },
        &bar,
    )?;
    let fed = cluster.wait_fed(FEED_WAIT);
    crate::warc::close_all();
    sum.collections = summarize(&cluster.slots);
    sum.print(args.json);
    if let (Some(d), false) = (&cluster.distributors, args.json) {
        let query = if args.synthetic_web.is_some() {
            // Words of the generated web's pages.
            "replica checksum"
        } else {
            "crawl"
        };
        if let Some(c) = sum.collections.keys().next() {
            print_search_example(d, c, query);
        }
    }
    fed?;
    if let Some(s) = web_server {
        s.stop();
    }
    Ok(())
}

/// How to search what the crawl indexed, with the best hits of an example query (the
/// distributors commit their full-text indexes every second, so the last documents may be
/// missing from it yet).
fn print_search_example(d: &Distributors, collection: &str, query: &str) {
    if d.data_dirs.is_empty() {
        return;
    }
    let dirs: Vec<String> = d
        .data_dirs
        .iter()
        .map(|p| format!("--data-dir {}", p.display()))
        .collect();
    println!(
        "search the crawl (docs/search.md): crawlfleet search {} {collection} \"{query}\"",
        dirs.join(" ")
    );
    if let Some(a) = d.admins.first() {
        println!("  or XML-RPC search(\"{collection}\", \"{query}\", 10) on http://{a}/RPC2");
    }
    match crate::search::search(&d.data_dirs, collection, query, 3) {
        Ok(found) => {
            for f in found {
                println!("  {:>8.3}  {}", f.hit.score, f.hit.uri);
            }
        }
        Err(e) => println!("  ({e})"),
    }
}

fn print_summary(sum: &BTreeMap<String, Summary>, elapsed: f64, feeding: bool, json: bool) {
    let row = |c: &CrawlCounters| {
        let dups = c.doc_skip.get("cs").copied().unwrap_or(0);
        (
            c.processed,
            c.stored,
            dups,
            c.docs_skipped() - dups - c.errors() + c.uris_skipped(),
            c.errors(),
        )
    };
    if json {
        let mut cols = serde_json::Map::new();
        for (name, s) in sum {
            let (fetched, stored, dups, skipped, errors) = row(&s.counters);
            let http: serde_json::Map<String, serde_json::Value> = s
                .counters
                .http_response
                .iter()
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect();
            let skips: serde_json::Map<String, serde_json::Value> = s
                .counters
                .doc_skip
                .iter()
                .chain(s.counters.uri_skip.iter())
                .map(|(k, v)| (k.to_string(), (*v).into()))
                .collect();
            let mut col = serde_json::json!({
                    "pages_fetched": fetched,
                    "documents_stored": stored,
                    "duplicates": dups,
                    "skipped": skipped,
                    "errors": errors,
                    "redirects": s.counters.redirects,
                    "bytes": s.counters.read_net,
                    "http_response": http,
                    "skip_codes": skips,
            });
            if feeding {
                col["documents_indexed"] = s.feed.acked.into();
                col["feed_failed"] = s.feed.failed.into();
                col["feed_pending"] = s.feed.pending.into();
            }
            cols.insert(name.clone(), col);
        }
        let total = |f: fn(&(u64, u64, u64, u64, u64)) -> u64| -> u64 {
            sum.values().map(|s| f(&row(&s.counters))).sum()
        };
        let fetched = total(|r| r.0);
        let mut v = serde_json::json!({
            "pages_fetched": fetched,
            "documents_stored": total(|r| r.1),
            "duplicates": total(|r| r.2),
            "skipped": total(|r| r.3),
            "errors": total(|r| r.4),
            "elapsed_seconds": (elapsed * 1000.0).round() / 1000.0,
            "pages_per_second": if elapsed > 0.0 { (fetched as f64 / elapsed).round() } else { 0.0 },
            "collections": cols,
        });
        if feeding {
            v["documents_indexed"] = sum.values().map(|s| s.feed.acked).sum::<u64>().into();
        }
        println!("{v}");
        return;
    }
    let indexed = |s: &Summary| match feeding {
        true => format!(" {:>10}", s.feed.acked),
        false => String::new(),
    };
    println!(
        "{:<16} {:>10} {:>10}{} {:>10} {:>10} {:>8}",
        "collection",
        "fetched",
        "stored",
        if feeding { "    indexed" } else { "" },
        "duplicates",
        "skipped",
        "errors"
    );
    for (name, s) in sum {
        let (fetched, stored, dups, skipped, errors) = row(&s.counters);
        println!(
            "{name:<16} {fetched:>10} {stored:>10}{} {dups:>10} {skipped:>10} {errors:>8}",
            indexed(s)
        );
        if feeding && (s.feed.failed > 0 || s.feed.pending > 0) {
            println!(
                "  feeding: {} refused by the distributors, {} not acknowledged",
                s.feed.failed, s.feed.pending
            );
        }
        let codes: Vec<String> = s
            .counters
            .doc_skip
            .iter()
            .chain(s.counters.uri_skip.iter())
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let http: Vec<String> = s
            .counters
            .http_response
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        println!("  HTTP {}  skip codes {}", http.join(" "), codes.join(" "));
    }
    let fetched: u64 = sum.values().map(|s| s.counters.processed).sum();
    println!(
        "{fetched} pages in {elapsed:.1} s ({:.0} pages/s)",
        if elapsed > 0.0 {
            fetched as f64 / elapsed
        } else {
            0.0
        }
    );
}
