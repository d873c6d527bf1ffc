//! The command line of `crawlfleet-bench` (also run as `crawlfleet bench`): one subcommand per
//! benchmark.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Load and capacity measurements of crawlfleet's parts, printed for people or (with `--json`)
/// as one JSON object for scripts. `crawlfleet bench ARGS` runs this program with ARGS.
#[derive(Debug, Parser)]
#[command(name = "crawlfleet-bench", version, about, long_about = None)]
pub struct Cli {
    /// The benchmark to run.
    #[command(subcommand)]
    pub command: BenchCommand,
    /// How the crawlfleet roles' threads are scheduled (`crawlfleet --sched`); the peers a
    /// benchmark runs (nginx, wrk, redis-server, Scrapy, spider) keep the system's default.
    #[arg(long, global = true, value_enum, env = "CRAWLFLEET_SCHED", default_value_t = crawlfleet_shells::schedpolicy::Sched::Batch)]
    pub sched: crawlfleet_shells::schedpolicy::Sched,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The duplicate server's checksum store: memory per entry, durable add rate, snapshot and
    /// restart time.
    Dupstore(BenchDupstoreArgs),
    /// Pipelined PPDUP_ADD load against a running duplicate server, optionally compared with
    /// redis-server SET NX in the same run.
    Dup(BenchDupArgs),
    /// CMD_UM_URI throughput through a multinode scheduler to N node-side peers.
    Route(BenchRouteArgs),
    /// Push+pop rate of the persistent crawl queue on encoded crawl queue entries, optionally
    /// compared with redis-server LPUSH/RPOP pipelined in the same run; or, with --fill, a queue
    /// of N entries on disk.
    Queue(BenchQueueArgs),
    /// Link lines per second a link store child process ingests and acknowledges.
    Links(BenchLinksArgs),
    /// Pages per second a whole cluster crawls from a plain synthetic web served by nginx,
    /// against wrk's requests per second and Scrapy's pages per second on the same pages.
    Crawl(BenchCrawlArgs),
    /// Pages per second of a refresh cycle (conditional GET, mostly 304) over a plain
    /// synthetic web served by nginx that a cluster crawled before.
    Refresh(BenchRefreshArgs),
    /// What a client that floods a running role costs it: the role's peak resident memory and
    /// a well-behaved client's round trips meanwhile (pipelined requests never read, or partial
    /// messages held open).
    Flood(BenchFloodArgs),
    /// Durable feeding operations acknowledged per second through content distributor
    /// sessions (one session, then four spread over the distributors), optionally compared with
    /// redis-server XADD pipelined on the same payloads in the same run.
    Feed(BenchFeedArgs),
    /// A crawl at scale, every role a process of its own: pages/s over time, peak resident
    /// memory per role, memory per queued URI and per checksum entry, disk per page, restart
    /// after SIGKILL.
    Scale(BenchScaleArgs),
    /// Runs a crawlfleet role (`role multinode ...`, `role linkstore ...`: any `crawlfleet`
    /// subcommand): the benchmarks that measure a role in a child process of its own start this
    /// executable so, and need no `crawlfleet` binary beside it.
    #[command(hide = true)]
    Role(RoleArgs),
}

/// Arguments of the hidden `crawlfleet-bench role`.
#[derive(Debug, Args)]
pub struct RoleArgs {
    /// A `crawlfleet` command line without the program name.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 1..)]
    pub args: Vec<OsString>,
}

/// Arguments of `crawlfleet bench refresh`.
#[derive(Debug, Args)]
pub struct BenchRefreshArgs {
    /// The web and the cluster crawling it.
    #[command(flatten)]
    pub web: BenchWebArgs,
    /// The fraction of pages changed between the crawl and the refresh cycle: `0.01` or
    /// `1%`.
    #[arg(long, default_value = "5%", value_parser = fraction)]
    pub changed: f64,
    /// The ways of finding what changed, each measured with a cluster of its own:
    /// `conditional` (every page, If-None-Match / If-Modified-Since), `sitemaps` (a
    /// /sitemap.xml per host with each page's lastmod), `rup` (a rup-server per host mails
    /// the changes to the nodes, draft-cosmo).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "conditional,sitemaps,rup"
    )]
    pub methods: Vec<RefreshMethod>,
    /// Give up on each crawl after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Print one JSON object (rate, pages, not_modified, ok_200, unchanged, modified,
    /// complete, first_crawl_rate, ...).
    #[arg(long)]
    pub json: bool,
}

/// How `crawlfleet bench refresh` finds the pages that changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RefreshMethod {
    /// Every stored page fetched again with If-None-Match / If-Modified-Since.
    Conditional,
    /// Sitemaps with lastmod: only pages whose lastmod is newer than their last fetch.
    Sitemaps,
    /// RUP (draft-cosmo): a rup-server per host reports the changed pages by mail.
    Rup,
}

impl RefreshMethod {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RefreshMethod::Conditional => "conditional",
            RefreshMethod::Sitemaps => "sitemaps",
            RefreshMethod::Rup => "rup",
        }
    }
}

/// A fraction written `0.01` or `1%`.
fn fraction(s: &str) -> Result<f64, String> {
    let (num, scale) = match s.strip_suffix('%') {
        Some(p) => (p, 100.0),
        None => (s, 1.0),
    };
    num.trim()
        .parse::<f64>()
        .map(|x| x / scale)
        .map_err(|e| format!("{s:?} is not a fraction (0.01) or a percentage (1%): {e}"))
}

/// The plain synthetic web (served by nginx) and the cluster crawling it, for `crawlfleet bench
/// crawl` and `crawlfleet bench refresh`.
#[derive(Debug, Args)]
pub struct BenchWebArgs {
    /// The plain synthetic web: HOSTS:PAGES.
    #[arg(long, default_value = "50:2000")]
    pub web: crawlfleet_core::synthweb::WebSpec,
    /// First address of the web's hosts.
    #[arg(long, default_value = "127.77.0.1")]
    pub base: std::net::Ipv4Addr,
    /// Node schedulers.
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Concurrent requests per site (max_pending); bench crawl gives Scrapy the same.
    #[arg(long, default_value_t = 8)]
    pub connections: u32,
}

impl BenchWebArgs {
    /// The web: plain (only ordinary pages with links).
    pub fn spec(&self) -> crawlfleet_core::synthweb::WebSpec {
        crawlfleet_core::synthweb::WebSpec {
            plain: true,
            ..self.web
        }
    }
}

/// Arguments of `crawlfleet bench crawl`.
#[derive(Debug, Args)]
pub struct BenchCrawlArgs {
    /// The web and the cluster crawling it.
    #[command(flatten)]
    pub web: BenchWebArgs,
    /// Seconds of wrk, and the most Scrapy runs.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Give up on crawlfleet's crawl after this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// The Python that has scrapy installed.
    #[arg(long, default_value = "python3")]
    pub python: PathBuf,
    /// No Scrapy run.
    #[arg(long)]
    pub skip_scrapy: bool,
    /// spider_cli's `spider` executable: run it (one process per host, robots.txt obeyed) in
    /// its default concurrent mode and with `crawl --sync`, each until it ends or for at most
    /// --spider-timeout.
    #[arg(long)]
    pub spider: Option<PathBuf>,
    /// Stop spider's processes of a mode still running after this many seconds.
    #[arg(long, default_value_t = 600)]
    pub spider_timeout: u64,
    /// No wrk run.
    #[arg(long)]
    pub skip_wrk: bool,
    /// Copy nginx's access log of the run to this file (tab-separated: host, path, status,
    /// `$msec`, request time, connection), to see the crawl's rate over time.
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// Print one JSON object (rate, wrk_rate, scrapy_rate, spider_rate, spider_sync_rate, pages,
    /// ratio_scrapy, ratio_wrk, ratio_spider, ratio_spider_sync, complete, ...).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet bench links`.
#[derive(Debug, Args)]
pub struct BenchLinksArgs {
    /// Link lines in all.
    #[arg(long, default_value_t = 10_000_000)]
    pub lines: u64,
    /// Connections, one sending thread each.
    #[arg(long, default_value_t = 2)]
    pub connections: usize,
    /// Link lines per message.
    #[arg(long, default_value_t = 20_000)]
    pub batch_lines: usize,
    /// A running link store (default: start one on a fresh data dir).
    #[arg(long)]
    pub target: Option<SocketAddr>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet bench route`.
#[derive(Debug, Args)]
pub struct BenchRouteArgs {
    /// A running multinode scheduler with a collection named "bench" (default: start one on
    /// a fresh data dir).
    #[arg(long)]
    pub target: Option<SocketAddr>,
    /// Node connections; each sends its share and counts what is routed to it.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// URIs in all.
    #[arg(long, default_value_t = 1_000_000)]
    pub total: u64,
    /// Distinct sites (registrable domains) the URIs are spread over.
    #[arg(long, default_value_t = 10_000)]
    pub sites: u64,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Print one JSON object (rate, uris, sent, nodes, sites, seconds).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet bench queue`.
#[derive(Debug, Args)]
pub struct BenchQueueArgs {
    /// Entries to push and pop.
    #[arg(long, default_value_t = 10_000_000)]
    pub total: u64,
    /// Entries pushed before they are popped.
    #[arg(long, default_value_t = 1000)]
    pub window: u64,
    /// A new, empty directory for the queue (default: a temporary one, removed afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Sync policy: always, manual, or an interval in milliseconds.
    #[arg(long, default_value = "100")]
    pub sync: String,
    /// Segment file size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub segment_bytes: u64,
    /// Instead of the rate: push N entries, report disk use and resident memory, then pop them
    /// all checking their order.
    #[arg(long)]
    pub fill: Option<u64>,
    /// A redis-server to run the same number of pipelined LPUSH then RPOP against.
    #[arg(long)]
    pub vs_redis: Option<SocketAddr>,
    /// Redis commands per round trip.
    #[arg(long, default_value_t = 1000)]
    pub pipeline: u64,
    /// Redis connections, one thread and one list each.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Print one JSON object (rate, ops_rate; with --vs-redis peer_rate and ratio).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet bench dup`.
#[derive(Debug, Args)]
pub struct BenchDupArgs {
    /// The duplicate server.
    #[arg(long)]
    pub target: SocketAddr,
    /// Connections, one load thread each.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Requests in flight per connection.
    #[arg(long, default_value_t = 256)]
    pub pipeline: usize,
    /// How a connection keeps its pipeline full: `windows` writes `--pipeline` requests and reads
    /// all their answers before the next window (redis-benchmark -P); `stream` writes a new
    /// request for every answer, so `--pipeline` stay in flight (a node scheduler sends adds as
    /// its documents finish).
    #[arg(long, value_enum, default_value_t = Flow::Windows)]
    pub flow: Flow,
    /// Adds in all.
    #[arg(long, default_value_t = 2_000_000)]
    pub total: u64,
    /// Fraction of adds that repeat an earlier checksum (duplicate documents).
    #[arg(long, default_value_t = 0.1)]
    pub dup_ratio: f64,
    /// A redis-server to run the same number of pipelined `SET <checksum> <uri> NX` against.
    #[arg(long)]
    pub vs_redis: Option<SocketAddr>,
    /// A second redis-server, keeping the duplicate server's guarantee (`appendonly yes`,
    /// `appendfsync always`: every write on disk before its answer), to run the same requests
    /// against with the same connections, pipeline and flow.
    #[arg(long)]
    pub vs_redis_durable: Option<SocketAddr>,
    /// Print one JSON object (rate, p50_us, p99_us; with --vs-redis peer_rate and ratio; with
    /// --vs-redis-durable durable_peer_rate and ratio_durable).
    #[arg(long)]
    pub json: bool,
}

/// How `bench dup` pipelines its requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Flow {
    /// Lock-step windows of `--pipeline` requests.
    Windows,
    /// `--pipeline` requests in flight at all times.
    Stream,
}

impl Flow {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Flow::Windows => "windows",
            Flow::Stream => "stream",
        }
    }
}

/// Arguments of `crawlfleet bench feed`.
#[derive(Debug, Args)]
pub struct BenchFeedArgs {
    /// A running name server whose distributors to feed (the benchmark makes sure each holds
    /// the collection); without it the benchmark starts a name server and `--distributors`.
    #[arg(long)]
    pub nameserver: Option<SocketAddr>,
    /// Distributors started when no `--nameserver` is given.
    #[arg(long, default_value_t = 2)]
    pub distributors: usize,
    /// The content collection fed.
    #[arg(long, default_value = "bench")]
    pub collection: String,
    /// Documents fed per run (split over its sessions).
    #[arg(long, default_value_t = 100_000)]
    pub docs: u64,
    /// Bytes of each document's body.
    #[arg(long, default_value_t = 2048)]
    pub body_bytes: usize,
    /// Operations per feed request (per redis pipeline batch).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Requests in flight per session (per redis connection).
    #[arg(long, default_value_t = 8)]
    pub window: usize,
    /// The runs: sessions fed at once in each, one after the other.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub sessions: Vec<usize>,
    /// A redis-server to XADD the same documents to, with as many connections as sessions.
    #[arg(long)]
    pub vs_redis: Option<SocketAddr>,
    /// Print one JSON object: {docs, body_bytes, batch, window, runs: [{sessions, placed_on,
    /// ops, rate, p50_us, p99_us, and with --vs-redis peer_rate, peer_p50_us, peer_p99_us,
    /// ratio}]}.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet bench flood`.
#[derive(Debug, Args)]
pub struct BenchFloodArgs {
    /// What the flooding connections send.
    #[arg(long, value_enum)]
    pub load: FloodLoad,
    /// The port flooded.
    #[arg(long)]
    pub target: SocketAddr,
    /// The process behind it, whose memory is sampled (/proc/PID/status: VmRSS, VmHWM).
    #[arg(long)]
    pub pid: u32,
    /// Seconds of flood (and of holding partial messages).
    #[arg(long, default_value_t = 10.0)]
    pub seconds: f64,
    /// Flooding connections (default: 1 for the pipelined loads, 32 for the partial ones).
    #[arg(long)]
    pub connections: Option<usize>,
    /// The size a partial message announces, in MiB; all of it but the last MiB is sent.
    #[arg(long, default_value_t = 60)]
    pub frame_mib: u32,
    /// The well-behaved client's round trip: `auto` is the one the load's port speaks.
    #[arg(long, value_enum, default_value_t = FloodProbe::Auto)]
    pub probe: FloodProbe,
    /// The well-behaved client's server (default: --target).
    #[arg(long)]
    pub probe_target: Option<SocketAddr>,
    /// Print one JSON object (rss_peak_mb, hwm_mb, round_trips, p50_us, p99_us, sent, closed,
    /// ...).
    #[arg(long)]
    pub json: bool,
}

/// What `bench flood` sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FloodLoad {
    /// Pipelined PPDUP_ADD (after a PPDUP_SET_CONFIG), answers never read.
    PpdupAdd,
    /// Pipelined XML-RPC CollectionGetList calls over HTTP/1.1, answers never read.
    Xmlrpc,
    /// An FSCMT frame header announcing --frame-mib, then most of its body.
    PartialFscmt,
    /// An HTTP POST whose Content-Length is --frame-mib, then most of its body.
    PartialHttp,
    /// A link store message: a marshal string declaring --frame-mib, then most of it.
    PartialWasdr,
}

impl FloodLoad {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            FloodLoad::PpdupAdd => "ppdup-add",
            FloodLoad::Xmlrpc => "xmlrpc",
            FloodLoad::PartialFscmt => "partial-fscmt",
            FloodLoad::PartialHttp => "partial-http",
            FloodLoad::PartialWasdr => "partial-wasdr",
        }
    }
}

/// The well-behaved client of `bench flood`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FloodProbe {
    /// The one the load's port speaks.
    Auto,
    /// None.
    None,
    /// PPDUP_ADD round trips (duplicate server).
    Ppdup,
    /// XML-RPC CollectionGetList calls (administrative port).
    Xmlrpc,
    /// One-document link store messages, each answered `ack`.
    Wasdr,
}

impl FloodProbe {
    /// The flag's spelling.
    pub fn name(self) -> &'static str {
        match self {
            FloodProbe::Auto => "auto",
            FloodProbe::None => "none",
            FloodProbe::Ppdup => "ppdup",
            FloodProbe::Xmlrpc => "xmlrpc",
            FloodProbe::Wasdr => "wasdr",
        }
    }
}

/// Arguments of `crawlfleet bench dupstore`.
#[derive(Debug, Args)]
pub struct BenchDupstoreArgs {
    /// A new, empty directory for the store's files.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Entries to add.
    #[arg(long, default_value_t = 10_000_000)]
    pub entries: u64,
    /// Shards of the store.
    #[arg(long, default_value_t = 64)]
    pub shards: usize,
    /// Adds per group commit (fdatasync).
    #[arg(long, default_value_t = 4096)]
    pub batch: u64,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet bench scale`.
#[derive(Debug, Args)]
pub struct BenchScaleArgs {
    /// Hosts of the synthetic web, one loopback address each.
    #[arg(long, default_value_t = 10_000)]
    pub hosts: usize,
    /// Pages in all (each host gets pages / hosts).
    #[arg(long, default_value_t = 1_000_000)]
    pub pages: usize,
    /// Node schedulers.
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Concurrent requests per site (max_pending).
    #[arg(long, default_value_t = 2)]
    pub connections: u32,
    /// Sites a node crawls at once (the collection's max_sites; the default is what 512
    /// connections hold at max_pending 2).
    #[arg(long, default_value_t = 256)]
    pub max_sites: u32,
    /// Each node's `--connections` (requests open at once and fetcher sockets).
    #[arg(long, default_value_t = 512)]
    pub node_connections: u32,
    /// Seconds between requests to a site (the collection's delay).
    #[arg(long, default_value_t = 0.0)]
    pub delay: f64,
    /// First address of the web's hosts.
    #[arg(long, default_value = "127.90.0.1")]
    pub base: std::net::Ipv4Addr,
    /// SIGKILL every role once this fraction of the pages was fetched and start them again
    /// from their data (0: no kill).
    #[arg(long, default_value_t = 0.5)]
    pub kill_at: f64,
    /// Then crawl the same number of pages on this many hosts, for the ratio of crawl times.
    #[arg(long)]
    pub versus_hosts: Option<usize>,
    /// Work directory (on disk; default: under the temporary directory); removed at the end.
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Give up after this many seconds (0: never).
    #[arg(long, default_value_t = 0.0)]
    pub timeout: f64,
    /// Give up when no new page was fetched for this many seconds.
    #[arg(long, default_value_t = 120.0)]
    pub stall: f64,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}
