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

pub mod xmlrpc;
pub mod status;
mod worker;

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crawlfleet_core::datadir::DirLock;
use crawlfleet_core::distributor::ids::SessionIds;
use crawlfleet_core::distributor::{DispatcherNode, Handled, Serving, PORT_OFFSET};
use crawlfleet_core::marshal::Limits;
use crawlfleet_net::{Event, EventLoop, FscmtLengthFraming, Priority, TimerId};
use crossbeam_channel::{bounded, TrySendError};
use log::{info, warn};

use crate::cli::DistributorArgs;

/// Largest request frame body: a request is a few short strings and a guarantee_set.
pub const MAX_REQUEST: usize = 64 << 10;

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

/// Runs a distributor until killed.
pub fn run(args: &DistributorArgs) -> Result<(), String> {
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
    let listener = TcpListener::bind(SocketAddr::new(ip, want))
        .map_err(|e| format!("cannot listen on {ip}:{want}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let base = local
        .port()
        .checked_sub(PORT_OFFSET)
        .ok_or_else(|| format!("port {} is below {PORT_OFFSET}: no base port", local.port()))?;
    let host = args.host.clone().unwrap_or_else(|| ip.to_string());

    let _lock = DirLock::acquire(&args.data_dir).map_err(|e| e.to_string())?;
    let unusable =
        |e: std::io::Error| format!("data dir {} is unusable: {e}", args.data_dir.display());
    let node = DispatcherNode::open(&args.data_dir, args.node_id, &host, base, &args.collections)
        .map_err(unusable)?;
    let ids = SessionIds::open(&args.data_dir, args.node_id as u16).map_err(unusable)?;
    info!(
        "distributor {}: collections {:?}",
        args.node_id,
        node.collections().collect::<Vec<_>>()
    );
    let shared = Arc::new(Mutex::new(Shared {
        node,
        serving: Serving::default(),
        role: "undecided",
    }));

    let limits = Limits {
        max_size: MAX_REQUEST,
        ..Limits::default()
    };
    let spawned = EventLoop::builder()
        .framing(FscmtLengthFraming { limits })
        .listen_std(listener)
        .answer_half_closed(true)
        .thread_name("distributor-loop")
        .spawn()
        .map_err(|e| format!("cannot listen on {local}: {e}"))?;
    let handle = spawned.handle;
    let interval = Duration::from_millis(args.check_interval_ms);
    let (work_tx, work_rx) = bounded(1024);
    // Set while a tick waits for the worker; the worker clears it when the tick starts.
    let tick_queued = Arc::new(AtomicBool::new(true));
    worker::spawn(
        worker::Config {
            node_id: args.node_id,
            host,
            port: local.port(),
            nameserver: args.nameserver,
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
    crate::announce(format_args!(
        "crawlfleet distributor {} listening on {}",
        args.node_id, spawned.local_addrs[0]
    ));
    let readers = xmlrpc::Readers::default();
    if let Some(addr) = args.admin {
        let shared = Arc::clone(&shared);
        let dir = args.data_dir.clone();
        let at = xmlrpc::start(addr, args.admin_max_body, shared, readers.clone(), dir)?;
        crate::announce(format_args!(
            "crawlfleet distributor {} admin on http://{at}/RPC2",
            args.node_id
        ));
    }
    let stopped = |_| "the event loop stopped".to_string();
    while let Ok(event) = spawned.events.recv() {
        match event {
            Event::Accepted { conn, peer, .. } => log::debug!("{conn} accepted from {peer}"),
            Event::Frames(batch) => {
                let conn = batch.conn();
                let mut out = Vec::new();
                let mut close = None;
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
