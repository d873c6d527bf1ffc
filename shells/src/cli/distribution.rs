//! Arguments of the content distribution commands: `crawlfleet distributor`, `distributors`,
//! `index`, `search` and `nameserver`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::AdminAccess;

/// Arguments of `crawlfleet search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// A distributor's data directory (repeatable: the hits of all are merged).
    #[arg(long = "data-dir", required = true)]
    pub data_dirs: Vec<PathBuf>,
    /// The content collection.
    pub collection: String,
    /// The query: words that must all be in the title or text; "a phrase", -word,
    /// site:host.
    pub query: String,
    /// Print a JSON array of {uri, score, title, snippet, data_dir}.
    #[arg(long)]
    pub json: bool,
    /// Most hits printed (1-1000).
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
}

/// Arguments of `crawlfleet distributor`: the distributor's flags, or a client command.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct DistributorArgs {
    /// A client command instead of the distributor.
    #[command(subcommand)]
    pub command: Option<DistributorCommand>,
    /// The name server's address.
    #[arg(long, required = true)]
    pub nameserver: Option<SocketAddr>,
    /// HOST:BASEPORT: the objects are served on the base port + 390 (MS-FSCDFT 3.1.3). Base
    /// port 0 picks a free port for base + 390 (printed on standard output) and the base
    /// follows from it.
    #[arg(long, required_unless_present = "base_port")]
    pub listen: Option<SocketAddr>,
    /// The base port, listening on 0.0.0.0 (instead of --listen).
    #[arg(long, conflicts_with = "listen")]
    pub base_port: Option<u16>,
    /// The host name put in the bound references (default: the listen address's IP).
    #[arg(long)]
    pub host: Option<String>,
    /// Directory of the distributor's state (created if missing; locked while it runs).
    #[arg(long, required = true)]
    pub data_dir: Option<PathBuf>,
    /// This distributor's node id (MS-FSCDFT 3.5.1), unique in the cluster: 0-65535.
    #[arg(long, required = true, value_parser = clap::value_parser!(i64).range(0..=65535))]
    pub node_id: Option<i64>,
    /// A content collection this distributor holds (repeatable; kept in the data dir).
    #[arg(long = "collection")]
    pub collections: Vec<String>,
    /// Interval of the check-for-master and check-master-status timers (MS-FSCDFT 3.3.2,
    /// 3.4.2), in milliseconds.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(10..))]
    pub check_interval_ms: u64,
    /// Bound of every call to the name server or another distributor, in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..))]
    pub call_timeout_ms: u64,
    /// The administrative (XML-RPC) address: serves search(collection, query, limit) over
    /// the collections' full-text indexes (docs/distributor.md "Search").
    #[arg(long)]
    pub admin: Option<SocketAddr>,
    /// Who may use the administrative port.
    #[command(flatten)]
    pub access: AdminAccess,
    /// Largest administrative request body, in bytes.
    #[arg(long, default_value_t = 1 << 20)]
    pub admin_max_body: usize,
}

/// The client commands of `crawlfleet distributor`.
#[derive(Debug, Subcommand)]
pub enum DistributorCommand {
    /// Make a distributor hold a content collection (its `add_collection`, kept on its disk
    /// before the answer; docs/distributor.md). Name the distributor by its address, or by its
    /// node id through the name server.
    AddCollection {
        /// The distributor's address (base port + 390).
        #[arg(
            long,
            required_unless_present = "nameserver",
            conflicts_with = "nameserver"
        )]
        distributor: Option<SocketAddr>,
        /// Resolve the distributor's dispatcher_node at this name server (with --node-id).
        #[arg(long, requires = "node_id")]
        nameserver: Option<SocketAddr>,
        /// The distributor's node id (with --nameserver).
        #[arg(long)]
        node_id: Option<i64>,
        /// Seconds to wait for each connection and answer.
        #[arg(long, default_value_t = 10.0)]
        timeout: f64,
        /// The content collection.
        name: String,
    },
}

/// Arguments of `crawlfleet index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// A distributor's data directory (repeatable: the indexes are merged by document id, the
    /// latest version winning). Read without the distributor's lock, while it runs.
    #[arg(long = "data-dir", required = true)]
    pub data_dirs: Vec<PathBuf>,
    /// The content collection.
    pub collection: String,
    /// Show this document only, with its headers.
    #[arg(long)]
    pub uri: Option<String>,
    /// JSON instead of text: an array of documents (with --uri: one object, or null).
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet distributors`.
#[derive(Debug, Args)]
pub struct DistributorsArgs {
    /// Where the name server is.
    #[command(flatten)]
    pub conn: NameserverConn,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `crawlfleet nameserver`: the server's flags, or a client command.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct NameserverArgs {
    /// Address to listen on (port 0 picks a free port, printed on standard output).
    #[arg(long, required = true)]
    pub listen: Option<SocketAddr>,
    /// Directory of the bindings (created if missing; locked while the server runs).
    #[arg(long, required = true)]
    pub data_dir: Option<PathBuf>,
    /// Serve `GET /metrics` (Prometheus text format) on this address.
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Who may read --metrics-listen: tokens and TLS as on an administrative port (a token is
    /// required off loopback).
    #[command(flatten)]
    pub access: AdminAccess,
    /// A client command instead of the server.
    #[command(subcommand)]
    pub command: Option<NameserverCommand>,
}

/// Where a client command finds the name server.
#[derive(Debug, Args)]
pub struct NameserverConn {
    /// The name server's address.
    #[arg(long)]
    pub nameserver: SocketAddr,
    /// Seconds to wait for the connection and the answer.
    #[arg(long, default_value_t = 10.0)]
    pub timeout: f64,
}

/// The key of a binding (MS-FSCDFT 3.2.3).
#[derive(Debug, Args)]
pub struct TripleArgs {
    /// The bound name, e.g. esp/subsystems/processing/dispatcher.
    pub name: String,
    /// The interface type, e.g. processing::session_factory.
    pub interface_type: String,
    /// The interface version, e.g. 5.1.
    pub interface_version: String,
}

impl TripleArgs {
    /// As the core's key.
    pub fn triple(&self) -> crawlfleet_core::nameserver::Triple {
        crawlfleet_core::nameserver::Triple {
            name: self.name.clone(),
            interface_type: self.interface_type.clone(),
            interface_version: self.interface_version.clone(),
        }
    }
}

/// The client commands of `crawlfleet nameserver`.
#[derive(Debug, Subcommand)]
pub enum NameserverCommand {
    /// Print every binding: name, interface type, version, object id, host:port (tab-separated).
    List {
        #[command(flatten)]
        #[allow(missing_docs)]
        conn: NameserverConn,
        /// A JSON array of objects (name, object_id, host, port, interface_type,
        /// interface_version).
        #[arg(long)]
        json: bool,
    },
    /// Print the reference bound under a triple (object id, host:port); exits non-zero with
    /// resolve_exception when none is.
    Resolve {
        #[command(flatten)]
        #[allow(missing_docs)]
        conn: NameserverConn,
        #[command(flatten)]
        #[allow(missing_docs)]
        triple: TripleArgs,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Bind a reference.
    Bind {
        #[command(flatten)]
        #[allow(missing_docs)]
        conn: NameserverConn,
        #[command(flatten)]
        #[allow(missing_docs)]
        triple: TripleArgs,
        /// The object's id.
        #[arg(long)]
        object_id: String,
        /// The object's host.
        #[arg(long)]
        host: String,
        /// The object's port.
        #[arg(long)]
        port: u16,
        /// Take the binding over from this object id.
        #[arg(long)]
        replaces: Option<String>,
    },
    /// Remove a binding.
    Unbind {
        #[command(flatten)]
        #[allow(missing_docs)]
        conn: NameserverConn,
        #[command(flatten)]
        #[allow(missing_docs)]
        triple: TripleArgs,
        /// Remove it only when this object is the one bound.
        #[arg(long)]
        object_id: Option<String>,
    },
    /// Call __ping on an object the name server serves (its own: "nameserver").
    Ping {
        #[command(flatten)]
        #[allow(missing_docs)]
        conn: NameserverConn,
        /// The object id.
        #[arg(long, default_value = "nameserver")]
        object: String,
    },
}
