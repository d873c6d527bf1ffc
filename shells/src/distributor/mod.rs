//! `crawlfleet distributor`: a content distributor (MS-FSCDFT 3), wiring
//! `core::distributor` to the event loop.
//!
//! Two threads: this one answers the frames the loop cuts (dispatcher_node and `__ping` from
//! the node's own state, at once), and a worker ([`worker`]) runs the election on the loop's
//! check timer and carries out the calls that need the cluster (register_dispatcher resolves a
//! proxy, 3.1.4.1; the master forwards session_factory calls, 3.6). The worker uses the
//! blocking name server client, each call bounded by `--call-timeout-ms`: the election is a
//! short sequence of dependent calls (resolve, then ping what it returned, then unbind, then
//! bind), which reads as straight code on a thread and would be a state machine of callbacks
//! on the loop's outgoing links; on its own thread it can never stall the loop's answers, so a
//! backup pinging this node is answered even while this node waits on a dead master.
//!
//! Input that is not a request (garbage, an unknown method or object, a field of the wrong
//! type) is answered with the exception, logged (rate-limited) and its connection closed; the
//! loop keeps the port limits every role keeps.

mod admin;
mod feeder;
pub mod index;
mod search;
pub mod status;
mod worker;
pub mod xmlrpc;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crawlfleet_core::datadir::DirLock;
use crawlfleet_core::distributor::feed::MAX_SESSION_REQUEST;
use crawlfleet_core::distributor::ids::SessionIds;
use crawlfleet_core::distributor::wire::frame_limits;
use crawlfleet_core::distributor::{DispatcherNode, Handled, Serving, PORT_OFFSET};
use crawlfleet_net::{Event, EventLoop, FscmtLengthFraming, Priority, TimerId};
use crossbeam_channel::{bounded, TrySendError};
use log::{info, warn};

use crate::cli::DistributorArgs;

/// Largest request frame body but a session's: a few short strings and a guarantee_set.
pub use crawlfleet_core::distributor::wire::MAX_REQUEST;

/// Most `feed` requests waiting for the index thread.
const FEED_QUEUE: usize = 1024;

/// The check timer (MS-FSCDFT 3.3.2, 3.4.2).
const CHECK_TIMER: TimerId = TimerId(1);

/// What the frame-answering thread and the worker share.
pub(crate) struct Shared {
    /// The dispatcher_node state.
    pub node: DispatcherNode,
    /// Which of the master's objects to answer.
    pub serving: Serving,
    /// "master", "backup" or "undecided", for get_status.
    pub role: &'static str,
}

/// Runs a distributor until `stop` (or killed).
pub fn run(args: &DistributorArgs, stop: &crate::stop::Stop) -> Result<(), String> {
    if let Some(cmd) = &args.command {
        return admin::run(cmd);
    }
    let missing = |flag: &str| format!("distributor: --{flag} is required");
    let data_dir = args
        .data_dir
        .as_deref()
        .ok_or_else(|| missing("data-dir"))?;
    let node_id = args.node_id.ok_or_else(|| missing("node-id"))?;
    let nameserver = args.nameserver.ok_or_else(|| missing("nameserver"))?;
    let (ip, base) = match (args.listen, args.base_port) {
        (Some(a), _) => (a.ip(), a.port()),
        (None, Some(p)) => ([0, 0, 0, 0].into(), p),
        (None, None) => return Err("distributor: --listen or --base-port is required".into()),
    };
    // Base port 0: a free port for base + 390, the base following from it.
    let want = if base == 0 {
        0
    } else {
        base.checked_add(PORT_OFFSET)
            .ok_or_else(|| format!("base port {base} + {PORT_OFFSET} is not a port"))?
    };
    let (listener, external) = bind_pair(ip, want)?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let base = local
        .port()
        .checked_sub(PORT_OFFSET)
        .ok_or_else(|| format!("port {} is below {PORT_OFFSET}: no base port", local.port()))?;
    let host = args.host.clone().unwrap_or_else(|| ip.to_string());

    let _lock = DirLock::acquire(data_dir).map_err(|e| e.to_string())?;
    let unusable = |e: std::io::Error| format!("data dir {} is unusable: {e}", data_dir.display());
    let node = DispatcherNode::open(data_dir, node_id, &host, base, &args.collections)
        .map_err(unusable)?;
    let ids = SessionIds::open(data_dir, node_id as u16).map_err(unusable)?;
    let held: Vec<String> = node.collections().map(str::to_owned).collect();
    let mut indexes = feeder::open_all(data_dir, &held)
        .map_err(|e| format!("data dir {} is unusable: {e}", data_dir.display()))?;
    let search = search::Search::start(data_dir)?;
    for (c, ix) in &mut indexes {
        search.attach_or_log(c, ix);
    }
    let mut node = node;
    for (c, ix) in &indexes {
        node.set_indexed(c, ix.live());
    }
    info!(
        "distributor {}: collections {:?}",
        node_id,
        node.collections().collect::<Vec<_>>()
    );
    let shared = Arc::new(Mutex::new(Shared {
        node,
        serving: Serving::default(),
        role: "undecided",
    }));

    let limits = frame_limits();
    let spawned = EventLoop::builder()
        .framing(FscmtLengthFraming { limits })
        .listen_std(listener)
        .listen_std(external)
        .max_in_role(2 * MAX_SESSION_REQUEST)
        .answer_half_closed(true)
        .thread_name("distributor-loop")
        .spawn()
        .map_err(|e| format!("cannot listen on {local}: {e}"))?;
    let handle = spawned.handle;
    let interval = Duration::from_millis(args.check_interval_ms);
    let (work_tx, work_rx) = bounded(1024);
    let (feed_tx, feed_rx) = bounded::<feeder::Job>(FEED_QUEUE);
    let queue = feeder::Queue::default();
    let index_thread = feeder::spawn(
        queue.clone(),
        data_dir.to_path_buf(),
        indexes,
        Arc::clone(&shared),
        handle.clone(),
        feed_rx,
        search.clone(),
    )?;
    // Set while a tick waits for the worker; the worker clears it when the tick starts.
    let tick_queued = Arc::new(AtomicBool::new(true));
    worker::spawn(
        worker::Config {
            node_id,
            host,
            port: local.port(),
            nameserver,
            timeout: Duration::from_millis(args.call_timeout_ms),
        },
        ids,
        Arc::clone(&shared),
        handle.clone(),
        work_rx,
        Arc::clone(&tick_queued),
    )?;
    // Start the election at once, then on every tick.
    let _ = work_tx.try_send(worker::Job::Tick);
    handle
        .set_timer(CHECK_TIMER, interval, Some(interval))
        .map_err(|_| "the event loop stopped".to_string())?;
    info!("sessions of external clients on {}", spawned.local_addrs[1]);
    crate::announce(format_args!(
        "crawlfleet distributor {} listening on {}",
        node_id, spawned.local_addrs[0]
    ));
    if let Some(addr) = args.admin {
        let shared = Arc::clone(&shared);
        let dir = data_dir.to_path_buf();
        let auth = crate::admin::access(&args.access)?;
        let readers = search.readers.clone();
        let at = xmlrpc::start(addr, args.admin_max_body, shared, readers, dir, auth)?;
        crate::announce(format_args!(
            "crawlfleet distributor {node_id} admin on http://{at}/RPC2"
        ));
    }
    let stopped = |_| "the event loop stopped".to_string();
    loop {
        let event = crossbeam_channel::select! {
            recv(spawned.events) -> ev => match ev {
                Ok(ev) => ev,
                Err(_) => break,
            },
            recv(stop.receiver()) -> _ => {
                // Stop accepting and close the sessions; the index thread ends after the
                // groups it took (each committed before its answer), then the full-text
                // indexes commit what they were sent. What a client got no answer for, it
                // feeds again.
                let _ = handle.shutdown();
                drop(feed_tx);
                let _ = index_thread.join();
                search.flush(Duration::from_secs(3));
                info!("distributor {node_id} stopped: content indexes committed");
                return Ok(());
            }
        };
        match event {
            Event::Accepted { conn, peer, .. } => log::debug!("{conn} accepted from {peer}"),
            Event::Frames(batch) => {
                let conn = batch.conn();
                let mut out = Vec::new();
                let mut close = None;
                let mut feeds = Vec::new();
                {
                    let mut sh = shared
                        .lock()
                        .map_err(|_| "the worker panicked".to_string())?;
                    let (serving, role) = (sh.serving, sh.role);
                    for (_, body) in batch.iter() {
                        match sh.node.handle_frame(body, &limits, serving, role) {
                            Handled::Answer(answer) => {
                                answer.reply.encode_frame(&mut out);
                                if let Some(why) = answer.close {
                                    close = Some(why);
                                    break;
                                }
                            }
                            Handled::Feed(feed) => feeds.push(feeder::Job { conn, feed }),
                            Handled::Forward { id, call } => {
                                let job = worker::Job::Forward { conn, id, call };
                                if let Err(TrySendError::Full(job)) = work_tx.try_send(job) {
                                    worker::busy(&job, &mut out);
                                }
                            }
                        }
                    }
                }
                if !out.is_empty() {
                    handle.send(conn, Priority::Normal, out).map_err(stopped)?;
                }
                for job in feeds {
                    // A full queue answers at once (transient), so that this thread keeps
                    // answering pings and memory stays bounded while the disk is slow.
                    if let Err(job) = queue.offer(&feed_tx, job) {
                        let (conn, out) = feeder::busy(job, &shared);
                        handle.send(conn, Priority::Normal, out).map_err(stopped)?;
                    }
                }
                if let Some(why) = close {
                    crawlfleet_core::warn_limited!(
                        "distributor-bad-request",
                        "{conn}: {why}; closing the connection"
                    );
                    handle.close(conn).map_err(stopped)?;
                }
            }
            Event::Timer(_) => {
                // One tick queued at most: a worker slowed by a dead peer does not pile up
                // ticks (3.4.5 counts failed pings, not elapsed ticks).
                if !tick_queued.swap(true, Ordering::AcqRel) {
                    let _ = work_tx.try_send(worker::Job::Tick);
                }
            }
            Event::Closed { conn, reason, .. } => log::debug!("{conn} closed: {reason}"),
            Event::Connected { .. } | Event::ConnectFailed { .. } => {}
        }
    }
    warn!("the event loop stopped");
    Err("the event loop stopped".into())
}

/// Binds base port + 390 (`want`; 0: a free port) and the port after it, for sessions of
/// external clients (MS-FSCDFT 3.5.4.2). With a free port picked, a taken port after it means
/// picking another pair.
fn bind_pair(ip: std::net::IpAddr, want: u16) -> Result<(TcpListener, TcpListener), String> {
    let mut tries = 0;
    loop {
        let first = crawlfleet_net::reserve::bind(SocketAddr::new(ip, want))
            .map_err(|e| format!("cannot listen on {ip}:{want}: {e}"))?;
        let port = first.local_addr().map_err(|e| e.to_string())?.port();
        let next = port
            .checked_add(1)
            .map(|p| crawlfleet_net::reserve::bind(SocketAddr::new(ip, p)));
        match next {
            Some(Ok(second)) => return Ok((first, second)),
            Some(Err(_)) | None if want == 0 && tries < 64 => tries += 1,
            Some(Err(e)) => return Err(format!("cannot listen on {ip}:{}: {e}", port + 1)),
            None => return Err(format!("port {port} + 1 is not a port")),
        }
    }
}
