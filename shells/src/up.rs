//! `crawlfleet up`: a whole cluster in one process on loopback — a duplicate server and its
//! replica, a multinode scheduler and N node schedulers, each role on its own threads and
//! sockets exactly as on separate hosts — optionally with a synthetic web to crawl.
//!
//! The data directory holds one sub-directory per role (`dupserver`, `dupreplica`,
//! `multinode`, `node1`...). Collections come from `--config` files and, with
//! `--synthetic-web`, a collection `synthetic` for the generated web; a collection that names
//! no duplicate servers is given the embedded pair.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::config::{parse_xml, to_xml};
use crawlfleet_core::marshal::Value;
use indicatif::ProgressBar;
use log::info;
use parking_lot::Mutex;

use crate::cli::{AdminAccess, AdminOpts, DupArgs, MultinodeArgs, NodeArgs, SchedTimers};
use crate::crawl::{NodeStatus, StatusSlot};
use crate::stop::Stop;
use layout::Layout;
use progress::Figures;
use roles::{spawn_role, Roles, RolesRef};

mod command;
mod feeding;
pub mod layout;
pub mod progress;
mod roles;
mod summary;
pub use command::run;
pub use feeding::{Distributors, FeedingOptions};
use summary::{indexnow_dropped, rup_counters, summarize};
pub use summary::{RunSummary, Summary};

/// A free port on 127.0.0.1 for a role that binds it a moment later (in another process:
/// the benchmarks' roles).
///
/// It is chosen at random below the kernel's ephemeral range, where the ports of `:0` binds and
/// of outgoing connections come from: a port taken from that range could be handed to another
/// program's `:0` bind between this check and the role's own bind (seen with tests binding
/// listeners in parallel), whereas nothing is handed out below it. Falls back to a `:0` port
/// when the ephemeral range leaves no room below it.
pub fn free_addr() -> Result<SocketAddr, String> {
    free_listener()?.local_addr().map_err(|e| e.to_string())
}

/// [`free_addr`] for a role of this process: the port stays bound, held in
/// [`crawlfleet_net::reserve`] until the role binds it, so nothing can take it in between (two
/// `up`s starting at once picked the same port below the ephemeral range, and the second
/// role to bind it stopped its `up`).
pub fn held_addr() -> Result<SocketAddr, String> {
    crawlfleet_net::reserve::hold(free_listener()?).map_err(|e| e.to_string())
}

/// [`held_addr`] for a role that binds the port after its own too (a distributor): both free,
/// both held.
pub(crate) fn held_pair_addr() -> Result<SocketAddr, String> {
    for _ in 0..256 {
        let addr = held_addr()?;
        if hold_next(addr) {
            return Ok(addr);
        }
        drop(crawlfleet_net::reserve::take(addr));
    }
    Err("no two free consecutive ports on 127.0.0.1".into())
}

/// Binds and holds the port after `addr`'s; false when it is taken (or there is none).
pub(crate) fn hold_next(addr: SocketAddr) -> bool {
    addr.port().checked_add(1).is_some_and(|next| {
        crawlfleet_net::reserve::bind_and_hold(SocketAddr::new(addr.ip(), next)).is_ok()
    })
}

fn free_listener() -> Result<TcpListener, String> {
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    const LOWEST: u16 = 10_000;
    if first_ephemeral > LOWEST + 1_000 {
        for _ in 0..256 {
            let port = fastrand::u16(LOWEST..first_ephemeral);
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                return Ok(l);
            }
        }
    }
    TcpListener::bind("127.0.0.1:0").map_err(|e| format!("no free port on 127.0.0.1: {e}"))
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
/// none, sets `overrides` over each, and writes each to `<prefix>-<n>.xml`.
pub fn with_dupservers(
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

/// Entries the nodes' engines hold for their sites (taken from the crawl queues, not fetched
/// yet): one figure per node, over its collections.
fn held(slots: &[StatusSlot]) -> u64 {
    slots
        .iter()
        .map(|s| {
            let st = s.lock();
            st.collections
                .values()
                .map(|c| c.held as u64)
                .max()
                .unwrap_or(0)
        })
        .sum()
}

/// How often [`Cluster::watch_until`] reads the nodes' published status.
const POLL: Duration = Duration::from_millis(50);
/// How often it shows the figures.
const SHOW_EVERY: Duration = Duration::from_millis(250);

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

/// The `/metrics` addresses of the roles without an administrative port.
#[derive(Clone, Copy, Debug)]
pub struct RoleMetrics {
    /// The duplicate server's.
    pub dupserver: SocketAddr,
    /// Its replica's.
    pub dupreplica: SocketAddr,
    /// The link store's.
    pub linkstore: SocketAddr,
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
    /// Where the roles without an administrative port serve `/metrics`: the duplicate
    /// server, its replica, the link store.
    pub metrics: RoleMetrics,
    /// The node schedulers' SMTP receivers of RUP reports (`--rup-smtp`, docs/rup.md).
    pub node_smtps: Vec<SocketAddr>,
    /// Node schedulers started.
    pub nodes: usize,
    /// The name server and content distributors the nodes feed, if any.
    pub distributors: Option<Distributors>,
    slots: Vec<StatusSlot>,
    mn_queued: Arc<AtomicU64>,
    roles: RolesRef,
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
        let open = AdminAccess::default();
        Cluster::start_at(data_dir, nodes, sources, feeding, &open, &mut |_| {
            held_addr()
        })
    }

    /// [`Cluster::start_with`] in the data directory `up` holds: every role on the address
    /// it had in the last run on that directory when it is free (`layout.save()` keeps them
    /// for the next), the multinode scheduler's administrative one on `admin` when given; every
    /// administrative port checks the tokens of `access`.
    pub fn start_in(
        layout: &mut Layout,
        nodes: usize,
        sources: &[CollectionSource],
        feeding: &FeedingOptions,
        admin: Option<SocketAddr>,
        access: &AdminAccess,
    ) -> Result<Cluster, String> {
        let dir = layout.dir.clone();
        Cluster::start_at(
            &dir,
            nodes,
            sources,
            feeding,
            access,
            &mut |key| match (key, admin) {
                ("multinode-admin", Some(a)) => {
                    // Bound now, so a taken address is refused before any role starts.
                    crawlfleet_net::reserve::bind_and_hold(a)
                        .map_err(|e| format!("cannot listen on {a} (--admin-listen): {e}"))?;
                    layout.set(key, a);
                    Ok(a)
                }
                _ => layout.addr(key, held_addr),
            },
        )
    }

    fn start_at(
        data_dir: &Path,
        nodes: usize,
        sources: &[CollectionSource],
        feeding: &FeedingOptions,
        access: &AdminAccess,
        addr: &mut dyn FnMut(&str) -> Result<SocketAddr, String>,
    ) -> Result<Cluster, String> {
        std::fs::create_dir_all(data_dir)
            .map_err(|e| format!("data dir {} is unusable: {e}", data_dir.display()))?;
        let dup = addr("dupserver")?;
        let replica = addr("dupreplica")?;
        let mn = addr("multinode")?;
        let mn_admin = addr("multinode-admin")?;
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
        let roles = Roles::new();
        let mut names = Vec::new();
        for src in sources {
            for (name, _) in parse_xml(&src.xml).map_err(|e| e.to_string())? {
                names.push(name);
            }
        }
        let distributors = feeding::start(data_dir, feeding, &names, &roles, access, addr)?;
        let nameserver = distributors.as_ref().map(|d| d.nameserver);
        let timers = || SchedTimers {
            keepalive: 120.0,
            sync_ms: 100,
        };
        // The tokens on every administrative port; TLS on the multinode scheduler's alone, the
        // one `--admin-listen` may expose (the nodes' stay on loopback, where the multinode
        // scheduler forwards SetLogLevel to them).
        let admin_opts = |tls: bool| AdminOpts {
            stats_merge: 60.0,
            stats_cycles: 8,
            admin_max_body: 16 << 20,
            dashboard_peers: Vec::new(),
            access: match tls {
                true => access.clone(),
                false => AdminAccess {
                    admin_tls_cert: None,
                    admin_tls_key: None,
                    ..access.clone()
                },
            },
        };
        let dup_metrics = addr("dupserver-metrics")?;
        let replica_metrics = addr("dupreplica-metrics")?;
        let dup_args = |listen, dir: &str, metrics| DupArgs {
            listen,
            data_dir: data_dir.join(dir),
            node_id: None,
            keepalive: 120.0,
            metrics_listen: Some(metrics),
            // On loopback, as every port `up` opens but the administrative one.
            access: AdminAccess::default(),
        };
        let ra = dup_args(replica, "dupreplica", replica_metrics);
        spawn_role("dupreplica", &roles, move |stop| {
            crate::dupserver::run(crawlfleet_core::dupserver::Mode::Replica, &ra, None, stop)
        })?;
        let da = dup_args(dup, "dupserver", dup_metrics);
        spawn_role("dupserver", &roles, move |stop| {
            let replica = Some(replica);
            crate::dupserver::run(crawlfleet_core::dupserver::Mode::Server, &da, replica, stop)
        })?;
        let links = addr("linkstore")?;
        let links_metrics = addr("linkstore-metrics")?;
        let la = crate::cli::LinkstoreArgs {
            listen: Some(links),
            base_port: 13000,
            data_dir: data_dir.join("linkstore"),
            max_message: 64 << 20,
            metrics_listen: Some(links_metrics),
            access: AdminAccess::default(),
        };
        spawn_role("linkstore", &roles, move |stop| {
            crate::linkstore::run(&la, stop)
        })?;
        let mn_queued = Arc::new(AtomicU64::new(0));
        // The dashboard shows the duplicate server, its replica, the link store and the
        // content distributors started here (their /metrics).
        let mut dashboard_peers = vec![
            ("dupserver".into(), dup_metrics),
            ("dupreplica".into(), replica_metrics),
            ("linkstore".into(), links_metrics),
        ];
        for (i, a) in distributors.iter().flat_map(|d| &d.admins).enumerate() {
            dashboard_peers.push((format!("distributor{}", i + 1), *a));
        }
        let ma = MultinodeArgs {
            listen: mn,
            admin: mn_admin,
            data_dir: data_dir.join("multinode"),
            config: configs,
            timers: timers(),
            admin_opts: AdminOpts {
                dashboard_peers,
                ..admin_opts(true)
            },
        };
        let q = mn_queued.clone();
        spawn_role("multinode", &roles, move |stop| {
            crate::multinode::run_with(&ma, Some(q), stop)
        })?;
        // Node schedulers reconnect with backoff, but a start without warnings is nicer.
        wait_listening(mn);
        let mut slots: Vec<StatusSlot> = Vec::new();
        let (mut node_admins, mut node_smtps) = (Vec::new(), Vec::new());
        for i in 1..=nodes.max(1) {
            let admin = addr(&format!("node{i}-admin"))?;
            node_admins.push(admin);
            let smtp = addr(&format!("node{i}-smtp"))?;
            node_smtps.push(smtp);
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
                rup_smtp: Some(smtp),
                connections: crate::cli::DEFAULT_CONNECTIONS,
                timers: timers(),
                admin_opts: admin_opts(false),
            };
            spawn_role(&format!("node{i}"), &roles, move |stop| {
                crate::node::run_with(&na, Some(slot), stop)
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
            metrics: RoleMetrics {
                dupserver: dup_metrics,
                dupreplica: replica_metrics,
                linkstore: links_metrics,
            },
            node_smtps,
            nodes: nodes.max(1),
            distributors,
            slots,
            mn_queued,
            roles,
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
            indexnow_dropped: indexnow_dropped(&self.slots),
            rup: rup_counters(&self.slots),
            ..RunSummary::default()
        }
    }

    /// Shows progress on `bar` every 250 ms; with `until_idle`, returns when every collection
    /// is crawled, the elapsed time until the crawl was first seen done (see
    /// [`Cluster::watch_until`]).
    pub fn watch(&self, opts: &WatchOptions, bar: &ProgressBar) -> Result<RunSummary, String> {
        let r = self.watch_until(opts, &Stop::never(), &mut |f: &Figures| {
            bar.set_message(f.line());
            bar.tick();
        });
        bar.finish_and_clear();
        r.map(|(sum, _)| sum)
    }

    /// [`Cluster::watch`], showing the figures with `show` every 250 ms, and returning early
    /// (with `true`) once `stop` is set.
    ///
    /// The nodes' published status is read every [`POLL`]. With `until_idle`, the crawl is
    /// done once nothing is queued anywhere, every node says its collections are drained and
    /// no counter has moved for `idle_seconds`; the elapsed time returned ends at the first
    /// reading of that final state (at most one publication and one reading after the last
    /// page was stored), not at the end of the idle wait that confirms it.
    pub fn watch_until(
        &self,
        opts: &WatchOptions,
        stop: &Stop,
        show: &mut dyn FnMut(&Figures),
    ) -> Result<(RunSummary, bool), String> {
        let started = self.started;
        let slots = &self.slots;
        let mn_queued = &self.mn_queued;
        let mut idle_since: Option<Instant> = None;
        let mut last_total = u64::MAX;
        let mut last_rate_at = (Instant::now(), 0u64, 0u64);
        let mut figures = Figures::default();
        // When the state now unchanged was first read done.
        let mut settled_at: Option<Instant> = None;
        let mut shown_at: Option<Instant> = None;
        let stopped = loop {
            if stop.wait(POLL) {
                break true;
            }
            let sum = summarize(slots);
            let fetched: u64 = sum.values().map(|s| s.counters.processed).sum();
            let stored: u64 = sum.values().map(|s| s.counters.stored).sum();
            let bytes: u64 = sum.values().map(|s| s.counters.read_net).sum();
            let node_queued: u64 = sum.values().map(|s| s.queued).sum();
            let queued = node_queued + held(slots) + mn_queued.load(Ordering::Relaxed);
            let dt = last_rate_at.0.elapsed().as_secs_f64();
            if dt >= 1.0 {
                figures.pages_per_sec = fetched.saturating_sub(last_rate_at.1) as f64 / dt;
                figures.bytes_per_sec = bytes.saturating_sub(last_rate_at.2) as f64 / dt;
                last_rate_at = (Instant::now(), fetched, bytes);
            }
            figures.fetched = fetched;
            figures.stored = stored;
            figures.queued = queued;
            figures.errors = sum.values().map(|s| s.counters.errors()).sum();
            if shown_at.is_none_or(|t| t.elapsed() >= SHOW_EVERY) {
                show(&figures);
                shown_at = Some(Instant::now());
            }
            if !opts.until_idle {
                continue;
            }
            let activity = fetched + stored + queued;
            let done = queued == 0
                && mn_queued.load(Ordering::Relaxed) == 0
                && all_drained(slots, started)
                && (fetched > 0 || started.elapsed() > Duration::from_secs(5));
            settled_at = match (done, activity == last_total, settled_at) {
                (true, true, Some(t)) => Some(t),
                (true, _, _) => Some(Instant::now()),
                (false, _, _) => None,
            };
            let quiet = done && activity == last_total;
            last_total = activity;
            match (quiet, idle_since) {
                (true, None) => idle_since = Some(Instant::now()),
                (true, Some(t)) if t.elapsed().as_secs_f64() >= opts.idle_seconds => break false,
                (true, Some(_)) => {}
                (false, _) => idle_since = None,
            }
            if opts.timeout > 0.0 && started.elapsed().as_secs_f64() > opts.timeout {
                return Err(format!(
                    "the crawl was not done after {} seconds (--timeout)",
                    opts.timeout
                ));
            }
        };
        let end = match settled_at {
            Some(t) if !stopped => t,
            _ => Instant::now(),
        };
        Ok((
            RunSummary {
                collections: summarize(slots),
                elapsed: end.duration_since(started).as_secs_f64(),
                feeding: self.distributors.is_some(),
                indexnow_dropped: indexnow_dropped(slots),
                rup: rup_counters(slots),
                ..RunSummary::default()
            },
            stopped,
        ))
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
        self.roles.detach();
    }

    /// Stops every role cleanly: each stops accepting, flushes its queues, logs, stores,
    /// statistics and WARC files, and returns (at most [`roles::STOP_WAIT`]); the next start
    /// on the same data directory resumes. `Err` names the roles that failed to.
    pub fn stop(&self) -> Result<(), String> {
        let failed = self.roles.stop();
        // Writers of a role that did not stop in time close their files all the same.
        crate::warc::close_all();
        match failed.is_empty() {
            true => Ok(()),
            false => Err(failed.join("; ")),
        }
    }
}
