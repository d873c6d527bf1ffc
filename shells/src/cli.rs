//! The command line: one subcommand per role or tool.

use std::net::SocketAddr;
use std::path::PathBuf;

pub use crate::admin::auth::AdminAccess;
use clap::{Args, Parser, Subcommand};

mod distribution;
pub use distribution::{
    DistributorArgs, DistributorCommand, DistributorsArgs, IndexArgs, NameserverArgs,
    NameserverCommand, NameserverConn, SearchArgs, TripleArgs,
};

/// crawlfleet: a multinode web crawler fabric speaking the FAST crawler protocols.
#[derive(Debug, Parser)]
#[command(name = "crawlfleet", version, about, long_about = None)]
pub struct Cli {
    /// The mode to run.
    #[command(subcommand)]
    pub command: Command,
    /// Log records on standard error as text, or as JSON for log shippers: one object per
    /// line with timestamp (RFC 3339, UTC), level, target, message and role.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// How the roles' threads are scheduled: `batch` (SCHED_BATCH: a thread woken with work
    /// does not preempt the one running, so hand-overs between a node's threads cost fewer
    /// context switches) or `normal` (the system's default). The environment variable is
    /// inherited by the roles a command starts as processes.
    #[arg(long, global = true, value_enum, env = "CRAWLFLEET_SCHED", default_value_t = crate::schedpolicy::Sched::Batch)]
    pub sched: crate::schedpolicy::Sched,
}

/// How log records are written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line each: time, level, target, message.
    #[default]
    Text,
    /// One JSON object per line: timestamp, level, target, message, role.
    Json,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print FSCMT frames (or bare marshal values) as JSON lines, or encode them back.
    ///
    /// Each frame becomes one line: {"priority": 0, "command": "PPDUP_ADD", "message": {...}}.
    /// A name server frame (docs/nameserver.md) says what it is instead of "command":
    /// {"nameserver": "request bind" | "result" | "exception resolve_exception", ...}.
    /// Tuples are JSON arrays; lists are {"$list": [...]}; byte strings that are not UTF-8 are
    /// {"$hex": "..."}; see `crawlfleet_core::marshal::json` for every form. Lines read back
    /// with --encode give the same bytes.
    Inspect(InspectArgs),
    /// Run a duplicate server (MS-FSCMT 3.3): the global document checksum store.
    Dupserver(DupServerArgs),
    /// Run a duplicate server replica (MS-FSCMT 3.4), which also serves node schedulers that fail
    /// over to it.
    Dupreplica(DupArgs),
    /// Run the multinode scheduler (MS-FSCMT 3.2): node registration, DNS, the crawl queue and
    /// site routing for every node scheduler.
    Multinode(MultinodeArgs),
    /// Run a node scheduler (MS-FSCMT 3.1) under a multinode scheduler, or standalone.
    Node(NodeArgs),
    /// Measure crawlfleet's parts under load: runs the `crawlfleet-bench` executable (beside
    /// this one, or on PATH) with the arguments that follow; `crawlfleet bench --help` lists the
    /// benchmarks.
    #[command(disable_help_flag = true)]
    Bench(BenchArgs),
    /// Run a whole cluster in one process on loopback (duplicate server and replica, multinode
    /// scheduler, node schedulers) and crawl: real sites (--config) or a generated web
    /// (--synthetic-web).
    Up(UpArgs),
    /// Call one administrative method (MS-FSCADM) of a node or multinode scheduler.
    Admin(AdminArgs),
    /// Serve a generated web on loopback addresses (for crawl tests and benchmarks) until
    /// killed, printing its start URIs; or write it out for nginx with --nginx-dir.
    Synthweb(SynthwebArgs),
    /// Run the link store (MS-FSWASDR): receives WebAnalyzer / SPRel link data on base port +
    /// 291 and stores it durably by application and collection.
    Linkstore(LinkstoreArgs),
    /// Query the link store's data: in-links, anchor texts, out-links or equivalents of a URL.
    Links(LinksArgs),
    /// List the documents a node scheduler fed for a collection (its document log), one line
    /// each: sequence number, operation, HTTP status, URI, MD5 checksum in hex, body size.
    Docs(DocsArgs),
    /// Run the name server the content distributors elect their master through (bind,
    /// resolve, unbind and list of object references; docs/nameserver.md), or call it:
    /// `crawlfleet nameserver list --nameserver HOST:PORT`.
    Nameserver(NameserverArgs),
    /// Run a content distributor: elects the master through the name server and serves
    /// dispatcher_node (MS-FSCDFT 3; docs/distributor.md).
    Distributor(DistributorArgs),
    /// Print the master distributor, the registered dispatcher nodes, and per distributor its
    /// sessions and load.
    Distributors(DistributorsArgs),
    /// List the live documents of a content collection's index in one or more distributors'
    /// data directories (merged by document id, latest version first): URI, time, seq, MD5 in
    /// hex, HTTP status, body size.
    Index(IndexArgs),
    /// Search the documents fed to content distributors: ranked URIs with snippets, from the
    /// full-text index of a collection in each --data-dir (read-only: works beside a running
    /// distributor), merged by score, each URI once.
    Search(SearchArgs),
    /// Run a RUP server (draft-cosmo; docs/rup.md): serves a directory over HTTP with
    /// /rupinfo.txt and the RUP CGI, keeps a modification log of it, and mails registered
    /// robots their update reports.
    RupServer(crate::rup::RupServerArgs),
    /// Check collection configuration files: `crawlfleet config check FILE.xml`.
    Config(crate::configfile::ConfigArgs),
    /// Write a commented starter configuration, a seed file and a small site into DIR, and
    /// print the commands that crawl them.
    Init(crate::starter::InitArgs),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell).
    Completions(crate::starter::CompletionsArgs),
    /// Print the man page (roff), or write one per subcommand with --dir.
    Man(crate::starter::ManArgs),
    /// Hand one RUP update report (a mail, on standard input) to the node scheduler whose data
    /// directory is --data-dir: for delivery from a mail server's pipe (docs/rup.md "The
    /// robot"). Exits 0 once the mail is durable in the node's spool.
    RupDeliver(RupDeliverArgs),
}

impl Command {
    /// A long-running role of the crawl (its threads take `--sched`); `up` runs its roles in
    /// threads of their own, which take it there.
    pub fn is_role(&self) -> bool {
        matches!(
            self,
            Command::Dupserver(_)
                | Command::Dupreplica(_)
                | Command::Multinode(_)
                | Command::Node(_)
                | Command::Linkstore(_)
                | Command::Nameserver(_)
                | Command::Distributor(_)
                | Command::RupServer(_)
        )
    }
}

/// Arguments of `crawlfleet rup-deliver`.
#[derive(Debug, Args)]
pub struct RupDeliverArgs {
    /// The node scheduler's data directory.
    #[arg(long)]
    pub data_dir: PathBuf,
}

/// Arguments of `crawlfleet docs`.
#[derive(Debug, Args)]
pub struct DocsArgs {
    /// A node scheduler's data directory (the documents are under
    /// `collections/<collection>/docs`), or a cluster's: the directory given to `crawlfleet up`
    /// (or scripts/netns-cluster.sh), whose node directories node1, node2... are listed in turn,
    /// each line ending with the node's name.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The collection.
    pub collection: String,
    /// Start at this sequence number (of each node's log, in a cluster).
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// List the documents held while feeding is suspended (`docs-held`) instead.
    #[arg(long)]
    pub held: bool,
    /// One JSON object per line, with the time and the response headers.
    #[arg(long)]
    pub json: bool,
    /// With --json: include the body (as text when it is UTF-8, else as base64).
    #[arg(long, requires = "json")]
    pub body: bool,
}

/// Arguments of `crawlfleet up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Collection configuration files (XML, see docs/collection-config.md).
    #[arg(long)]
    pub config: Vec<PathBuf>,
    /// Serve a generated web of HOSTS:PAGES on loopback (127.77.x.y) and crawl it.
    #[arg(long, value_name = "HOSTS:PAGES")]
    pub synthetic_web: Option<String>,
    /// Seed of the generated web.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// First address of the generated web's hosts.
    #[arg(long, default_value = "127.77.0.1")]
    pub web_base: std::net::Ipv4Addr,
    /// Port of the generated web's hosts (default: a free one).
    #[arg(long)]
    pub web_port: Option<u16>,
    /// Append every request the generated web answers to this file (tab-separated:
    /// address:port, path, status, start, end, connection).
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// The generated web's collection: seconds between requests to one site (default 0).
    #[arg(long)]
    pub web_delay: Option<f64>,
    /// The generated web's collection: concurrent requests per site (max_pending, default 2).
    #[arg(long)]
    pub web_connections: Option<u32>,
    /// The generated web's collection: sites a node crawls at once (max_sites, default 128).
    #[arg(long)]
    pub web_max_sites: Option<u32>,
    /// The generated web's pages change over time: PERCENT%/SECONDS (e.g. 1%/10), a seeded
    /// schedule; their Last-Modified, ETag and sitemap lastmod follow (docs/sitemaps.md).
    #[arg(long, value_name = "PERCENT%/SECONDS")]
    pub web_changes: Option<crawlfleet_core::synthweb::ChangeSchedule>,
    /// The generated web does not publish RUP (docs/rup.md): its sitemaps alone then drive
    /// the refresh cycles.
    #[arg(long)]
    pub no_web_rup: bool,
    /// Node schedulers.
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Content distributors started (with a name server) for the nodes to feed; 0 keeps the
    /// documents in the nodes' document logs.
    #[arg(long, default_value_t = 2)]
    pub distributors: usize,
    /// Feed the content distributors of this existing name server instead of starting any
    /// (the crawl's collections are added to each of them).
    #[arg(long, conflicts_with = "distributors")]
    pub nameserver: Option<SocketAddr>,
    /// Data directory (default: $XDG_STATE_HOME/crawlfleet/up, else
    /// ~/.local/state/crawlfleet/up). The same one again resumes the cluster on the same
    /// addresses with its statistics; one a running `up` holds is refused.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Start over: remove what an earlier cluster left in the data directory first.
    #[arg(long)]
    pub fresh: bool,
    /// The multinode scheduler's administrative (XML-RPC) address (default: the one of the
    /// last run on this data directory, else a free port); written to DATA/admin.addr.
    #[arg(long)]
    pub admin_listen: Option<SocketAddr>,
    /// Who may use the administrative ports of the roles `up` starts; the admin token is also
    /// written to DATA/admin.token for `crawlfleet admin --data-dir`.
    #[command(flatten)]
    pub access: AdminAccess,
    /// Progress: a bar on a terminal and a plain line every 10 s elsewhere (auto), plain
    /// lines always, or none.
    #[arg(long, value_enum, default_value = "auto")]
    pub progress: crate::up::progress::ProgressMode,
    /// Seconds between plain progress lines.
    #[arg(long, default_value_t = 10.0, hide = true)]
    pub progress_interval: f64,
    /// Stop when every collection is crawled, and print per-collection statistics.
    #[arg(long)]
    pub until_idle: bool,
    /// Seconds with nothing queued, fetching or moving before the crawl counts as done.
    #[arg(long, default_value_t = 2.0)]
    pub idle_seconds: f64,
    /// With --until-idle: give up (exit non-zero) after this many seconds; 0 waits forever.
    #[arg(long, default_value_t = 0.0)]
    pub timeout: f64,
    /// Print the summary as JSON (nothing else on standard output).
    #[arg(long)]
    pub json: bool,
    /// No progress (the same as --progress never).
    #[arg(long, hide = true)]
    pub no_progress: bool,
    /// Archive every fetched exchange of every collection to WARC/1.1 files under DIR
    /// (DIR/COLLECTION/NODE/, with a CDXJ index beside each file; docs/warc.md).
    #[arg(long, value_name = "DIR")]
    pub warc: Option<PathBuf>,
}

impl UpArgs {
    /// The progress mode, `--no-progress` included.
    pub fn progress_mode(&self) -> crate::up::progress::ProgressMode {
        match self.no_progress {
            true => crate::up::progress::ProgressMode::Never,
            false => self.progress,
        }
    }
}

/// Arguments of `crawlfleet admin`.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The scheduler's administrative address (its --admin). Default: the cluster of
    /// --data-dir, else the `crawlfleet up` of the default data directory when it runs, else
    /// 127.0.0.1:14101.
    #[arg(long, conflicts_with = "data_dir")]
    pub server: Option<String>,
    /// The data directory of a `crawlfleet up` cluster: its admin.addr names the address (and
    /// its admin.token, when there is one, the token).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// A file holding the administrative port's token (its --admin-token-file, or a read-only
    /// one), sent as `Authorization: Bearer TOKEN`.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Call over TLS (HTTPS), trusting the certificates in this PEM file (the port's
    /// --admin-tls-cert, or its issuer's).
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    /// The method: its FSCADM name (CollectionGetList) or in kebab case (collection-get-list);
    /// system.listMethods, system.methodHelp and system.methodSignature too.
    pub command: String,
    /// The method's arguments in order; an array of URIs takes every remaining argument; a
    /// string argument `@path` is the content of a local file.
    #[arg(allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// Settings of the administrative interface (MS-FSCADM) of the scheduler roles.
#[derive(Debug, Args)]
pub struct AdminOpts {
    /// Seconds between merges of the statistics delta into the current cycle (FSCADM 2.2.4.4
    /// says 1-2 minutes); statistics are persisted at each merge.
    #[arg(long, default_value_t = 60.0)]
    pub stats_merge: f64,
    /// Refresh cycles of statistics retained besides the complete one.
    #[arg(long, default_value_t = 8)]
    pub stats_cycles: usize,
    /// Largest XML-RPC request body accepted, in bytes.
    #[arg(long, default_value_t = 16 << 20)]
    pub admin_max_body: usize,
    /// Another role the dashboard shows, from its /metrics: NAME=HOST:PORT (repeatable; e.g.
    /// dupserver=10.0.0.5:14210, the address of its --metrics-listen).
    #[arg(long = "dashboard-peer", value_name = "NAME=HOST:PORT",
          value_parser = crate::dashboard::peers::parse_peer)]
    pub dashboard_peers: Vec<(String, SocketAddr)>,
    /// Who may use the administrative port.
    #[command(flatten)]
    pub access: AdminAccess,
}

/// Arguments of `crawlfleet synthweb`.
#[derive(Debug, Args)]
pub struct SynthwebArgs {
    /// HOSTS:PAGES, e.g. 20:500 (tree pages per host; see crawlfleet_core::synthweb).
    #[arg(long)]
    pub web: crawlfleet_core::synthweb::WebSpec,
    /// The first host's address; host i listens on the i-th address from it (.0 and .255
    /// skipped).
    #[arg(long, default_value = "127.77.0.1")]
    pub base: std::net::Ipv4Addr,
    /// The port every host listens on (default: one free on --base).
    #[arg(long)]
    pub port: Option<u16>,
    /// The seed of every random choice.
    #[arg(long, default_value_t = crawlfleet_core::synthweb::WebSpec::DEFAULT_SEED)]
    pub seed: u64,
    /// Only ordinary pages with links: no robots rules, redirects, duplicates or other traps.
    #[arg(long)]
    pub plain: bool,
    /// Append every request to this file (tab-separated: address:port, path, status, start,
    /// end, connection; times in Unix seconds).
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// Write the web as static files and nginx.conf into this directory and exit.
    #[arg(long)]
    pub nginx_dir: Option<PathBuf>,
    /// Write a collection configuration (XML) for crawling the web to this file.
    #[arg(long)]
    pub collection: Option<PathBuf>,
    /// The collection name in --collection.
    #[arg(long, default_value = "synthweb")]
    pub collection_name: String,
}

/// Arguments of `crawlfleet linkstore`.
#[derive(Debug, Args)]
pub struct LinkstoreArgs {
    /// Address to listen on (default: 127.0.0.1 on base port + 291; port 0 picks a free port,
    /// printed on standard output).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// The base port the listening port derives from (MS-FSWASDR 2.1: base port + 291).
    #[arg(long, default_value_t = 13000)]
    pub base_port: u16,
    /// Directory of the logs, one per application and collection (created if missing).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Largest message accepted, in bytes; a longer one is answered failed and its connection
    /// closed.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_message: usize,
    /// Serve `GET /metrics` (Prometheus text format) on this address.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Who may read --metrics-listen: tokens and TLS as on an administrative port (a token is
    /// required off loopback).
    #[command(flatten)]
    pub access: AdminAccess,
}

/// Arguments of `crawlfleet links`.
#[derive(Debug, Args)]
pub struct LinksArgs {
    /// The link store's data directory.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Only this collection (default: all).
    #[arg(long)]
    pub collection: Option<String>,
    /// Print one JSON object instead of tab-separated lines.
    #[arg(long, global = true)]
    pub json: bool,
    /// The query.
    #[command(subcommand)]
    pub query: LinksQuery,
}

/// The queries of `crawlfleet links`.
#[derive(Debug, Subcommand)]
pub enum LinksQuery {
    /// Hyperlinks to URL: linking document, intra/inter site, timestamp, anchor text.
    Inlinks {
        /// The URL.
        url: String,
    },
    /// The anchor texts of hyperlinks to URL, most frequent first.
    Anchors {
        /// The URL.
        url: String,
    },
    /// Hyperlinks of the document URL (its newest crawl).
    Outlinks {
        /// The URL.
        url: String,
    },
    /// The equivalence class (redirects) URL belongs to, and its SPRel duplicates.
    Equivalents {
        /// The URL.
        url: String,
    },
}

impl LinksQuery {
    /// The queried URL.
    pub fn url(&self) -> &str {
        match self {
            LinksQuery::Inlinks { url }
            | LinksQuery::Anchors { url }
            | LinksQuery::Outlinks { url }
            | LinksQuery::Equivalents { url } => url,
        }
    }

    /// The query's name.
    pub fn name(&self) -> &'static str {
        match self {
            LinksQuery::Inlinks { .. } => "inlinks",
            LinksQuery::Anchors { .. } => "anchors",
            LinksQuery::Outlinks { .. } => "outlinks",
            LinksQuery::Equivalents { .. } => "equivalents",
        }
    }
}

/// Timers and sync settings shared by the scheduler roles.
#[derive(Debug, Args)]
pub struct SchedTimers {
    /// Keep-Alive timer in seconds (MS-FSCMT 3.1.2, 3.2.2; at least 1).
    #[arg(long, default_value_t = 120.0)]
    pub keepalive: f64,
    /// Group sync of crawl queues and routes, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub sync_ms: u64,
}

/// Arguments of `crawlfleet multinode`.
#[derive(Debug, Args)]
pub struct MultinodeArgs {
    /// Address node schedulers connect to (port 0 picks a free port, printed on standard
    /// output).
    #[arg(long, default_value = "127.0.0.1:14100")]
    pub listen: SocketAddr,
    /// The administrative (XML-RPC) address.
    #[arg(long, default_value = "127.0.0.1:14101")]
    pub admin: SocketAddr,
    /// Directory of collections, crawl queues, routes and logs (created if missing).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Collection configuration files (XML, see docs/collection-config.md), added at start.
    #[arg(long)]
    pub config: Vec<PathBuf>,
    /// Timers.
    #[command(flatten)]
    pub timers: SchedTimers,
    /// The administrative interface.
    #[command(flatten)]
    pub admin_opts: AdminOpts,
}

/// Arguments of `crawlfleet node`.
#[derive(Debug, Args)]
pub struct NodeArgs {
    /// The node identifier (PKT_NODE_ID); required unless --standalone.
    #[arg(long, required_unless_present = "standalone")]
    pub node_id: Option<String>,
    /// The multinode scheduler to register with; required unless --standalone.
    #[arg(
        long,
        required_unless_present = "standalone",
        conflicts_with = "standalone"
    )]
    pub multinode: Option<SocketAddr>,
    /// Run without a multinode scheduler (FSCADM IsDistributed = 0).
    #[arg(long)]
    pub standalone: bool,
    /// The administrative (XML-RPC) address, reported in CMD_UM_INIT (PKT_XMLRPCPRT).
    #[arg(long, default_value = "127.0.0.1:14111")]
    pub admin: SocketAddr,
    /// Directory of collections, crawl queues and routes (created if missing).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Collection configuration files (standalone only; a multinode scheduler sends them).
    #[arg(long, requires = "standalone")]
    pub config: Vec<PathBuf>,
    /// Duplicate Server Keep-Alive timer in seconds (3.1.2).
    #[arg(long, default_value_t = 120.0)]
    pub dup_keepalive: f64,
    /// Quarantine timer in seconds (3.1.2).
    #[arg(long, default_value_t = 5.0)]
    pub quarantine_interval: f64,
    /// Statistics timer in seconds (3.1.2).
    #[arg(long, default_value_t = 60.0)]
    pub stats_interval: f64,
    /// Seconds a site is blocked after START_CRAWL_IP refuses it (3.1.5.21).
    #[arg(long, default_value_t = 1800)]
    pub block_seconds: i64,
    /// The link store (MS-FSWASDR) that receives the link data of crawled pages; batches it
    /// does not acknowledge wait in the data dir's link-backlog and are sent again.
    #[arg(long)]
    pub linkstore: Option<SocketAddr>,
    /// The name server of the content distributors: every collection's documents are fed
    /// through sessions on them (docs/distributor.md "Feeding sessions"); without it they stay
    /// in the document log.
    #[arg(long)]
    pub nameserver: Option<SocketAddr>,
    /// Receive RUP update reports (draft-cosmo 3.2) by SMTP on this address (docs/rup.md "The
    /// robot"); `crawlfleet rup-deliver` takes them on standard input instead.
    #[arg(long)]
    pub rup_smtp: Option<SocketAddr>,
    /// Requests open at once and sockets the fetcher keeps (connecting, busy or idle
    /// keep-alive). A site started holds its collection's `max_pending` of them, so a node
    /// crawls at most connections / max_pending sites at once, and each collection at most its
    /// `max_sites` (docs/collection-config.md). Polite crawls of many sites (a `delay` of
    /// seconds) need room for many sites: raise both.
    #[arg(long, default_value_t = DEFAULT_CONNECTIONS, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub connections: u32,
    /// Multinode keep-alive and sync.
    #[command(flatten)]
    pub timers: SchedTimers,
    /// The administrative interface.
    #[command(flatten)]
    pub admin_opts: AdminOpts,
}

/// A node's default `--connections`.
pub const DEFAULT_CONNECTIONS: u32 = 512;

/// Arguments shared by the duplicate server and its replica.
#[derive(Debug, Args)]
pub struct DupArgs {
    /// Address to listen on (loopback unless told otherwise; port 0 picks a free port, printed
    /// on standard output).
    #[arg(long, default_value = "127.0.0.1:14200")]
    pub listen: SocketAddr,
    /// Directory of the checksum store's log and snapshots (created if missing).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Node identifier sent as PKT_PPDUP_ID (default: dup-<listen address>).
    #[arg(long)]
    pub node_id: Option<String>,
    /// Keep-Alive timer in seconds (MS-FSCMT 3.3.2; at least 1).
    #[arg(long, default_value_t = 120.0)]
    pub keepalive: f64,
    /// Serve `GET /metrics` (Prometheus text format) on this address.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Who may read --metrics-listen: tokens and TLS as on an administrative port (a token is
    /// required off loopback).
    #[command(flatten)]
    pub access: AdminAccess,
}

/// Arguments of `crawlfleet dupserver`.
#[derive(Debug, Args)]
pub struct DupServerArgs {
    /// Listening address, data dir, node id, keep-alive.
    #[command(flatten)]
    pub common: DupArgs,
    /// The replica to forward every checksum message to (MS-FSCMT 3.3.5).
    #[arg(long)]
    pub replica: Option<SocketAddr>,
}

/// Arguments of `crawlfleet bench`: passed on to `crawlfleet-bench` untouched.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The benchmark and its arguments (`route --json`, `dup --target HOST:PORT`, `--help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<std::ffi::OsString>,
}

/// Arguments of `crawlfleet inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Input file; standard input when absent or "-".
    pub input: Option<PathBuf>,
    /// The input (or, with --encode, the output) is hex text rather than binary; whitespace in
    /// hex input is ignored.
    #[arg(long)]
    pub hex: bool,
    /// Read JSON lines and write the frames (or values, with --raw) they describe.
    #[arg(long)]
    pub encode: bool,
    /// Bare marshal values without the 4-byte length header, one after another, each optionally
    /// followed by the link store terminator 2E 2E 2E 00 00 00 00 (MS-FSWASDR 2.2.1).
    #[arg(long)]
    pub raw: bool,
    /// Largest frame accepted, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_frame: usize,
    /// Deepest container nesting accepted.
    #[arg(long, default_value_t = 64)]
    pub max_depth: usize,
}
