//! The content side of `crawlfleet up`: a name server and N content distributors on loopback
//! (each with its own data directory under up's), or the name server and distributors of an
//! existing cluster (`--nameserver`), holding the crawl's collections; the nodes feed them
//! through sessions (docs/distributor.md "Feeding sessions").

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crawlfleet_core::distributor::election::triple;
use crawlfleet_core::distributor::{DISPATCHER_NODE, PORT_OFFSET, SESSION_FACTORY};
use crawlfleet_core::marshal::Value;
use log::info;

use super::roles::{spawn_role, RolesRef};
use super::wait_listening;
use crate::cli::DistributorArgs;
use crate::nsclient::NsClient;

/// Bound of every call up makes to the name server or a distributor.
const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// How long up waits for a master to be elected before the crawl starts.
const ELECTION_WAIT: Duration = Duration::from_secs(15);
/// The distributors' check timers (MS-FSCDFT 3.3.2, 3.4.2): short, so that a cluster on one
/// host elects its master at once.
const CHECK_INTERVAL_MS: u64 = 500;

/// Where the nodes feed.
#[derive(Clone, Debug)]
pub struct Distributors {
    /// The name server.
    pub nameserver: SocketAddr,
    /// The objects' addresses (base port + 390) of the distributors up started.
    pub started: Vec<SocketAddr>,
    /// The dispatcher_node objects the crawl's collections were added to.
    pub nodes: usize,
    /// The data directories of the distributors up started (for `crawlfleet index` and
    /// `crawlfleet search`).
    pub data_dirs: Vec<PathBuf>,
    /// Their administrative (XML-RPC `search`) addresses.
    pub admins: Vec<SocketAddr>,
}

/// What `up` feeds through.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeedingOptions {
    /// Distributors to start (0: none, the documents stay in the nodes' logs).
    pub distributors: usize,
    /// An existing name server whose distributors are used instead of starting any.
    pub nameserver: Option<SocketAddr>,
}

/// Starts (or finds) the name server and distributors and makes sure every distributor holds
/// `collections`; `None` when nothing feeds.
pub(super) fn start(
    data_dir: &Path,
    opts: &FeedingOptions,
    collections: &[String],
    roles: &RolesRef,
    access: &crate::cli::AdminAccess,
    addr: &mut dyn FnMut(&str) -> Result<SocketAddr, String>,
) -> Result<Option<Distributors>, String> {
    if let Some(ns) = opts.nameserver {
        let nodes = add_collections(ns, collections)?;
        return Ok(Some(Distributors {
            nameserver: ns,
            started: Vec::new(),
            data_dirs: Vec::new(),
            admins: Vec::new(),
            nodes,
        }));
    }
    if opts.distributors == 0 {
        return Ok(None);
    }
    let ns = addr("nameserver")?;
    let ns_dir = data_dir.join("nameserver");
    spawn_role("nameserver", roles, move |stop| {
        crate::nameserver::run(ns, &ns_dir, None, &crate::cli::AdminAccess::default(), stop)
    })?;
    wait_listening(ns);
    let mut started = Vec::new();
    let (mut data_dirs, mut admins) = (Vec::new(), Vec::new());
    for i in 1..=opts.distributors {
        // The objects' port (base + 390) is the free one; the base follows from it.
        let objects = with_next_held(addr(&format!("distributor{i}"))?)?;
        let base = objects.port().saturating_sub(PORT_OFFSET);
        let listen = SocketAddr::new(objects.ip(), base);
        let admin = addr(&format!("distributor{i}-admin"))?;
        data_dirs.push(data_dir.join(format!("distributor{i}")));
        admins.push(admin);
        let args = DistributorArgs {
            command: None,
            nameserver: Some(ns),
            listen: Some(listen),
            base_port: None,
            host: None,
            data_dir: Some(data_dir.join(format!("distributor{i}"))),
            admin: Some(admin),
            // Tokens only: the distributors' ports are on loopback.
            access: crate::cli::AdminAccess {
                admin_tls_cert: None,
                admin_tls_key: None,
                ..access.clone()
            },
            admin_max_body: 1 << 20,
            node_id: Some(i as i64),
            collections: collections.to_vec(),
            check_interval_ms: CHECK_INTERVAL_MS,
            call_timeout_ms: 1000,
        };
        spawn_role(&format!("distributor{i}"), roles, move |stop| {
            crate::distributor::run(&args, stop)
        })?;
        started.push(objects);
    }
    wait_for_master(ns)?;
    info!(
        "content distributors: name server {ns}, {} distributors holding {collections:?}",
        started.len()
    );
    Ok(Some(Distributors {
        nameserver: ns,
        nodes: started.len(),
        started,
        data_dirs,
        admins,
    }))
}

/// Waits (bounded) until a session_factory is bound: the nodes' first sessions find a master.
fn wait_for_master(ns: SocketAddr) -> Result<(), String> {
    let until = Instant::now() + ELECTION_WAIT;
    loop {
        let bound = NsClient::connect(ns, CALL_TIMEOUT)
            .and_then(|mut c| c.resolve(triple(SESSION_FACTORY)))
            .is_ok();
        if bound {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!(
                "no master content distributor elected through {ns} within {ELECTION_WAIT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Adds `collections` to every distributor bound at the name server `ns` (the `add_collection`
/// call, docs/distributor.md); returns how many distributors there are.
fn add_collections(ns: SocketAddr, collections: &[String]) -> Result<usize, String> {
    let mut c =
        NsClient::connect(ns, CALL_TIMEOUT).map_err(|e| format!("name server {ns}: {e}"))?;
    let list = c.list().map_err(|e| format!("name server {ns}: {e}"))?;
    let nodes: Vec<_> = list
        .into_iter()
        .filter(|a| (a.interface_type.as_str(), a.interface_version.as_str()) == DISPATCHER_NODE)
        .collect();
    if nodes.is_empty() {
        return Err(format!(
            "no content distributor is bound at the name server {ns}"
        ));
    }
    for node in &nodes {
        let addr = format!("{}:{}", node.host, node.port);
        let sa: SocketAddr = std::net::ToSocketAddrs::to_socket_addrs(&addr)
            .ok()
            .and_then(|mut i| i.next())
            .ok_or_else(|| format!("distributor {addr} does not resolve"))?;
        let mut d =
            NsClient::connect(sa, CALL_TIMEOUT).map_err(|e| format!("distributor {addr}: {e}"))?;
        for name in collections {
            let args = Value::Dict(vec![(
                Value::bytes(b"collection"),
                Value::owned_bytes(name.as_bytes().to_vec()),
            )]);
            d.call_method(&node.object_id, "add_collection", args)
                .map_err(|e| format!("distributor {addr}: add_collection {name}: {e}"))?;
        }
    }
    Ok(nodes.len())
}

/// Waits until every document the nodes made durable is settled by the distributors
/// (acknowledged or refused for good), at most `timeout`: `Err` says what is missing.
pub(super) fn wait_fed(
    slots: &[crate::crawl::StatusSlot],
    timeout: Duration,
) -> Result<(), String> {
    let since = Instant::now();
    let until = since + timeout;
    let mut settled_polls = 0;
    loop {
        std::thread::sleep(Duration::from_millis(100));
        // Statuses published after the wait began (a node publishes every 200 ms).
        let fresh = slots.iter().all(|s| s.lock().at.is_some_and(|t| t > since));
        let sum = super::summarize(slots);
        let missing: Vec<String> = sum
            .iter()
            .filter(|(_, s)| s.feed.pending > 0)
            .map(|(name, s)| format!("{name}: {} documents not acknowledged", s.feed.pending))
            .collect();
        settled_polls = if fresh && missing.is_empty() {
            settled_polls + 1
        } else {
            0
        };
        // Twice in a row: a status between a sync and the sink's next turn can lag.
        if settled_polls >= 2 {
            return Ok(());
        }
        if Instant::now() > until {
            return Err(format!(
                "the content distributors did not acknowledge every document within {timeout:?} ({})",
                if missing.is_empty() {
                    "no status from every node".to_string()
                } else {
                    missing.join(", ")
                }
            ));
        }
    }
}

/// A distributor binds its objects' port and the port after it (external sessions, MS-FSCDFT
/// 3.5.4.2). `objects` was picked and is held for it; the port after it is held here too, until
/// the distributor binds both. When that port is taken, by another program or by another role
/// of this process whose held socket the distributor's bind would otherwise take (the nodes then
/// reached a distributor at the multinode scheduler's address), the pair moves to two free
/// consecutive ports, `objects` released.
fn with_next_held(objects: SocketAddr) -> Result<SocketAddr, String> {
    if super::hold_next(objects) {
        return Ok(objects);
    }
    drop(crawlfleet_net::reserve::take(objects));
    super::held_pair_addr()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(a: SocketAddr) -> SocketAddr {
        SocketAddr::new(a.ip(), a.port() + 1)
    }

    #[test]
    fn a_distributor_never_takes_the_port_held_for_another_role() {
        // Two consecutive ports: the first picked for a distributor, the second held for
        // another role of this process (as `up` holds the multinode scheduler's).
        let picked = crate::up::held_pair_addr().unwrap();
        let objects = with_next_held(picked).unwrap();
        assert_ne!(objects, picked, "the distributor moves to another pair");
        let theirs = crawlfleet_net::reserve::take(next(picked));
        assert!(
            theirs.is_some(),
            "the other role's socket is still held for it"
        );
        assert!(crawlfleet_net::reserve::take(objects).is_some());
        assert!(crawlfleet_net::reserve::take(next(objects)).is_some());
        assert!(
            crawlfleet_net::reserve::take(picked).is_none(),
            "the first pick is given back"
        );
    }

    #[test]
    fn a_free_port_after_the_pick_is_held_with_it() {
        let picked = crate::up::held_pair_addr().unwrap();
        drop(crawlfleet_net::reserve::take(next(picked)));
        assert_eq!(with_next_held(picked).unwrap(), picked);
        assert!(crawlfleet_net::reserve::take(picked).is_some());
        assert!(crawlfleet_net::reserve::take(next(picked)).is_some());
    }
}
