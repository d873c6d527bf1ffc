//! The administrative interface of the schedulers (MS-FSCADM): the XML-RPC server
//! ([`server`]), the 34 methods of 2.2.8-2.2.10 for both roles (read once into a typed
//! [`AdminCall`] by [`call`], run by [`methods`], [`management`] and [`status`] over the [`roles::Role`] trait
//! the node and multinode schedulers implement), statistics
//! ([`crawlfleet_core::stats`]), a blocking client ([`client`]) and `crawlfleet admin` ([`cli`]).
//!
//! A role shell starts the server with [`start`] and gives each [`server::AdminMsg`] it receives
//! to [`Admin::handle`] together with its scheduler core. The crawl engine feeds statistics
//! through [`Admin::stats_mut`] (see [`crawlfleet_core::stats::Stats::add`]).

pub mod auth;
pub mod call;
pub mod cli;
pub mod client;
pub mod introspect;
pub mod management;
pub mod methods;
pub mod roles;
pub mod server;
pub mod status;
pub mod tls;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::marshal::{self, Value as M};
use crawlfleet_core::metrics::Histogram;
use crawlfleet_core::stats::sites::SiteStats;
use crawlfleet_core::stats::Stats;
use crawlfleet_core::xmlrpc::Limits;
use log::{info, warn};

pub use call::{signature, AdminCall, CallError, Ty, METHODS};
pub use server::{AdminMsg, Responder, Server};

/// Settings of the administrative interface.
#[derive(Clone, Debug)]
pub struct AdminOptions {
    /// Where the server listens.
    pub addr: SocketAddr,
    /// Seconds between statistics merges (FSCADM 2.2.4.4: 1-2 minutes).
    pub merge_every: Duration,
    /// Refresh cycles of statistics retained (k of 2.2.4.3).
    pub retain_cycles: usize,
    /// Request bodies and nesting.
    pub limits: Limits,
    /// The other roles the dashboard shows: name and `/metrics` address.
    pub dashboard_peers: Vec<(String, SocketAddr)>,
    /// The tokens every request is checked against.
    pub auth: auth::AdminAuth,
}

/// The log levels of FSCADM 2.2.3.5.
pub mod log_level {
    /// Info.
    pub const INFO: i64 = 0x04;
    /// Debug.
    pub const DEBUG: i64 = 0x08;
    /// Warning.
    pub const WARNING: i64 = 0x10;
    /// Error.
    pub const ERROR: i64 = 0x20;
    /// Critical.
    pub const CRITICAL: i64 = 0x40;
    /// Verbose.
    pub const VERBOSE: i64 = 0x80;
    /// Every defined bit.
    pub const ALL: i64 = INFO | DEBUG | WARNING | ERROR | CRITICAL | VERBOSE;
}

/// The mask for the `log` crate's current level: that level and every more severe one.
pub fn mask_of(level: log::LevelFilter) -> i64 {
    use log_level::*;
    match level {
        log::LevelFilter::Off => 0,
        log::LevelFilter::Error => ERROR | CRITICAL,
        log::LevelFilter::Warn => WARNING | ERROR | CRITICAL,
        log::LevelFilter::Info => INFO | WARNING | ERROR | CRITICAL,
        log::LevelFilter::Debug => DEBUG | INFO | WARNING | ERROR | CRITICAL,
        log::LevelFilter::Trace => ALL,
    }
}

/// The `log` level for a mask: its most verbose bit.
pub fn level_of(mask: i64) -> log::LevelFilter {
    use log_level::*;
    if mask & VERBOSE != 0 {
        log::LevelFilter::Trace
    } else if mask & DEBUG != 0 {
        log::LevelFilter::Debug
    } else if mask & INFO != 0 {
        log::LevelFilter::Info
    } else if mask & WARNING != 0 {
        log::LevelFilter::Warn
    } else if mask & (ERROR | CRITICAL) != 0 {
        log::LevelFilter::Error
    } else {
        log::LevelFilter::Off
    }
}

/// Per collection, what the administrative interface keeps beside the scheduler core (persisted
/// in `admin.state`): for the multinode scheduler, which feeding destinations are suspended
/// (the nodes keep their own), and the log level. Refresh-only mode (2.2.10.1/2) is the
/// collection's `refresh_only` attribute, kept by the scheduler core with its configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdminState {
    /// Collection -> suspended feeding destinations ("" is every destination).
    pub feeding_suspended: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>,
    /// The log level mask set by SetLogLevel (0: the startup level).
    pub log_level: i64,
}

impl AdminState {
    fn to_value(&self) -> M<'static> {
        let names =
            |s: &BTreeSet<Vec<u8>>| M::list(s.iter().map(|n| M::owned_bytes(n.clone())).collect());
        let feeding = self
            .feeding_suspended
            .iter()
            .map(|(c, d)| (M::owned_bytes(c.clone()), names(d)))
            .collect();
        M::Dict(vec![
            (M::bytes(b"feeding"), M::Dict(feeding)),
            (M::bytes(b"log_level"), M::int(self.log_level)),
        ])
    }

    fn from_value(v: &M<'_>) -> Option<AdminState> {
        let names = |v: &M<'_>| -> Option<BTreeSet<Vec<u8>>> {
            v.as_list()?
                .iter()
                .map(|n| n.as_bytes().map(<[u8]>::to_vec))
                .collect()
        };
        let mut feeding = BTreeMap::new();
        for (c, d) in v.get(b"feeding")?.as_dict()? {
            feeding.insert(c.as_bytes()?.to_vec(), names(d)?);
        }
        Some(AdminState {
            feeding_suspended: feeding,
            log_level: v.get(b"log_level")?.as_i64()?,
        })
    }
}

/// The administrative interface of one scheduler: its statistics and state, persisted in the
/// data directory.
pub struct Admin {
    stats: Stats,
    stats_path: PathBuf,
    state: AdminState,
    state_path: PathBuf,
    /// Per collection, the last core counters folded into the statistics.
    seen: BTreeMap<Vec<u8>, BTreeMap<String, f64>>,
    /// The crawl engine's fetch times (a node's), for `/metrics`.
    fetch_latency: Option<Arc<Histogram>>,
    /// Where the server listens (shown by the dashboard).
    addr: SocketAddr,
    /// The dashboard's samples of the last hour.
    history: crate::dashboard::History,
    /// The other roles the dashboard shows.
    peers: Option<crate::dashboard::peers::Peers>,
    /// The port's admin token, which forwarded calls carry.
    token: Option<String>,
    /// Per crawl site (FSCADM 2.2.4.9), fed by a node's crawl engine; persisted beside the
    /// statistics.
    sites: SiteStats,
    sites_path: PathBuf,
}

impl Admin {
    /// Reads the statistics and state files of `data_dir` (missing files: empty).
    pub fn open(data_dir: &Path, opts: &AdminOptions, now: i64) -> Result<Admin, String> {
        let stats_path = data_dir.join("statistics");
        let state_path = data_dir.join("admin.state");
        let stats = Stats::load(&stats_path, opts.retain_cycles, now)?;
        let sites_path = data_dir.join("site-statistics");
        let sites = SiteStats::load(&sites_path)?;
        let state = match std::fs::read(&state_path) {
            Ok(b) => marshal::from_bytes(&b, &marshal::Limits::default())
                .ok()
                .and_then(|v| AdminState::from_value(&v))
                .ok_or_else(|| format!("{}: not an admin state file", state_path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => AdminState::default(),
            Err(e) => return Err(format!("{}: {e}", state_path.display())),
        };
        if state.log_level != 0 {
            log::set_max_level(level_of(state.log_level));
        }
        Ok(Admin {
            stats,
            stats_path,
            state,
            state_path,
            seen: BTreeMap::new(),
            fetch_latency: None,
            addr: opts.addr,
            history: Default::default(),
            peers: match opts.dashboard_peers.is_empty() {
                true => None,
                false => Some(crate::dashboard::peers::Peers::start(
                    opts.dashboard_peers.clone(),
                    opts.auth.token().map(str::to_owned),
                )?),
            },
            token: opts.auth.token().map(str::to_owned),
            sites,
            sites_path,
        })
    }

    /// The statistics, for the crawl engine to feed ([`Stats::add`], [`Stats::add_site`],
    /// [`Stats::hist`], [`Stats::set`], ...).
    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// The per-site statistics, for a node's crawl engine to feed
    /// ([`SiteStats::absorb`]).
    pub fn site_stats_mut(&mut self) -> &mut SiteStats {
        &mut self.sites
    }

    /// The statistics.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Shows the crawl engine's fetch times in `/metrics`.
    pub fn set_fetch_latency(&mut self, h: Arc<Histogram>) {
        self.fetch_latency = Some(h);
    }

    /// Says where the server listens (the address bound, for a port 0).
    pub fn set_addr(&mut self, addr: SocketAddr) {
        self.addr = addr;
    }

    /// Where the server listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The other roles the dashboard shows, when given.
    pub fn peers(&self) -> Option<&crate::dashboard::peers::Peers> {
        self.peers.as_ref()
    }

    /// The crawl engine's fetch times, when the role fetches.
    pub fn fetch_latency(&self) -> Option<&Histogram> {
        self.fetch_latency.as_deref()
    }

    /// The persisted state (refresh-only collections, ...).
    pub fn state(&self) -> &AdminState {
        &self.state
    }

    fn save_state(&self) -> Result<(), String> {
        use std::io::Write;
        let tmp = self.state_path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&marshal::to_bytes(&self.state.to_value()))?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.state_path)
        };
        write().map_err(|e| format!("cannot save {}: {e}", self.state_path.display()))
    }

    fn save_stats(&mut self) {
        if let Err(e) = self.stats.save(&self.stats_path) {
            warn!("cannot save statistics {}: {e}", self.stats_path.display());
        }
        if let Err(e) = self.sites.save(&self.sites_path) {
            warn!(
                "cannot save site statistics {}: {e}",
                self.sites_path.display()
            );
        }
    }

    /// Folds the role's latest counters into the statistics, merges them and writes the
    /// statistics file (the tick of FSCADM 2.2.4.4, and a clean stop: what was counted since the
    /// last tick is kept).
    pub fn flush(&mut self, role: &mut dyn roles::Role, now: i64) {
        self.absorb(role, now);
        self.stats.merge(now);
        self.save_stats();
    }

    /// One message from the server: a call answered through its responder, or the timer.
    pub fn handle(&mut self, role: &mut dyn roles::Role, msg: AdminMsg, now: i64) {
        match msg {
            AdminMsg::Tick => {
                let names: Vec<Vec<u8>> = role.collections().into_iter().map(|(n, _)| n).collect();
                self.sites.retain_collections(&names);
                self.flush(role, now);
            }
            AdminMsg::Call { call, reply } => {
                self.absorb(role, now);
                let method = call.name();
                match methods::call(self, role, call, now) {
                    methods::Outcome::Done(r) => {
                        if let Err(e) = &r {
                            info!("{method}: fault: {e}");
                        }
                        reply.send(r);
                    }
                    methods::Outcome::Forward { nodes, level } => {
                        let token = self.token.clone();
                        management::forward_log_level(nodes, level, reply, token)
                    }
                    methods::Outcome::Relay {
                        node,
                        method,
                        params,
                    } => management::relay(node, method, params, reply, self.token.clone()),
                }
            }
            AdminMsg::View {
                view: server::View::Metrics,
                reply,
            } => {
                self.absorb(role, now);
                let text = crate::metrics::sched::render(self, role);
                reply.send_page(crawlfleet_core::metrics::CONTENT_TYPE, text.into_bytes());
            }
            AdminMsg::View {
                view: server::View::Dashboard,
                reply,
            } => {
                self.absorb(role, now);
                let text = crate::dashboard::render(self, role, &self.history, now);
                reply.send_page("application/json", text.into_bytes());
            }
            AdminMsg::Sample => {
                self.absorb(role, now);
                let mut history = std::mem::take(&mut self.history);
                history.sample(self, role, now);
                self.history = history;
            }
        }
    }
}

/// Starts the administrative server of a role. When the address cannot be bound the role runs
/// on without its administrative interface (logged as an error): crawling must not stop because
/// of a port taken by another process. A port off loopback without a token is refused.
pub fn start(opts: &AdminOptions) -> Result<Server, String> {
    start_routed(opts, None)
}

/// [`start`], `route` answering the requests it takes (the node's IndexNow endpoint).
pub fn start_routed(
    opts: &AdminOptions,
    route: Option<Arc<dyn server::Route>>,
) -> Result<Server, String> {
    opts.auth.check_listen(opts.addr)?;
    let parse: server::Parse<AdminCall> =
        |method, params| AdminCall::parse(method, params).map_err(|e| e.to_string());
    let auth = opts.auth.clone();
    match server::spawn_routed(opts.addr, opts.merge_every, opts.limits, parse, route, auth) {
        Ok(s) => Ok(s),
        Err(e) => {
            log::error!(
                "cannot listen on {} for the administrative interface ({e}); running without it",
                opts.addr
            );
            Ok(Server {
                calls: crossbeam_channel::never(),
                addr: opts.addr,
                handle: None,
            })
        }
    }
}

/// The options of a role's `--admin` address and [`crate::cli::AdminOpts`]; `Err` when a token
/// file cannot be read, or the address is off loopback without a token.
pub fn options(addr: SocketAddr, o: &crate::cli::AdminOpts) -> Result<AdminOptions, String> {
    let auth = access(&o.access)?;
    auth.check_listen(addr)?;
    Ok(AdminOptions {
        addr,
        merge_every: Duration::from_secs_f64(o.stats_merge.max(1.0)),
        retain_cycles: o.stats_cycles.max(1),
        limits: Limits {
            max_body: o.admin_max_body,
            ..Limits::default()
        },
        dashboard_peers: o.dashboard_peers.clone(),
        auth,
    })
}

/// The tokens and TLS of [`crate::cli::AdminAccess`].
pub fn access(a: &crate::cli::AdminAccess) -> Result<auth::AdminAuth, String> {
    let auth = auth::AdminAuth::from_files(
        a.admin_token_file.as_deref(),
        a.admin_readonly_token_file.as_deref(),
    )?;
    match (&a.admin_tls_cert, &a.admin_tls_key) {
        (Some(cert), Some(key)) => Ok(auth.with_tls(tls::server_config(cert, key)?)),
        (None, None) => Ok(auth),
        _ => Err("--admin-tls-cert and --admin-tls-key go together".into()),
    }
}
