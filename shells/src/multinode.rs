//! `crawlfleet multinode`: the multinode scheduler (MS-FSCMT 3.2), wiring
//! `core::sched::multinode` to the event loop and the resolver threads.
//!
//! One thread takes the events the loop has ready, feeds them to the state machine, routes what
//! the crawl queues hold (`pump`) and sends the resulting frames. A sync timer makes queues,
//! routes and logs durable every `--sync-ms`.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crawlfleet_core::datadir::DirLock;
use crawlfleet_core::marshal::Value;
use crawlfleet_core::sched::multinode::{Multinode, MultinodeOptions};
use crawlfleet_core::sched::{Outbox, PeerId};
use crawlfleet_net::{ConnId, Event, EventLoop, FscmtLengthFraming, Handle, Priority, TimerId};
use crossbeam_channel::select;
use log::{error, info, warn};

use crate::cli::MultinodeArgs;
use crate::resolver::Resolver;
use crate::stop::Stop;

const KEEPALIVE_TIMER: TimerId = TimerId(1);
const SYNC_TIMER: TimerId = TimerId(2);
/// Events handled before routing and sending. A frame batch is up to a socket read of frames
/// (hundreds of CMD_UM_URI), so a few of them already make a routing batch; more would only
/// lengthen the crawl queue, and every sync writes out what the queue holds.
const MAX_BATCH_EVENTS: usize = 8;

/// Unix seconds now: the project's one wall clock.
pub use crawlfleet_core::clock::unix_now as now_secs;

/// Reads collection configuration files: (name, dict) of every DomainSpecification, each
/// checked against the schema first ([`crate::configfile::load`]).
pub fn read_configs(files: &[std::path::PathBuf]) -> Result<Vec<(String, Value<'static>)>, String> {
    crate::configfile::load_all(files)
}

/// Takes a role's data directory: creates it, locks it against other processes (the lock lives
/// as long as the returned guard) and checks it can be written.
pub fn check_data_dir(dir: &Path) -> Result<DirLock, String> {
    let lock = DirLock::acquire(dir).map_err(|e| e.to_string())?;
    let probe = dir.join(".probe");
    std::fs::write(&probe, b"ok")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| format!("data dir {} is unusable: {e}", dir.display()))?;
    Ok(lock)
}

/// Sends frames grouped per destination and priority, high-priority groups first so they
/// overtake what is queued (MS-FSCMT 2.2.1). Frames for a destination `conn_of` does not know are
/// dropped with a log line.
pub fn send_grouped<K: Ord + Clone + std::fmt::Debug>(
    handle: &Handle,
    sends: impl IntoIterator<Item = (K, Priority, Vec<u8>)>,
    conn_of: impl Fn(&K) -> Option<ConnId>,
) -> Result<(), String> {
    for (to, prio, bytes) in group_frames(sends) {
        match conn_of(&to) {
            Some(c) => handle
                .send(c, prio, bytes)
                .map_err(|_| "the event loop stopped".to_string())?,
            None => warn!("{to:?} is not connected: frames dropped"),
        }
    }
    Ok(())
}

/// The frames of `sends` joined per destination and priority, in order within each group; the
/// groups high priority first, then by destination. A group of one frame keeps its buffer; a
/// larger one gets a buffer of its exact size, filled once.
pub fn group_frames<K: Ord>(
    sends: impl IntoIterator<Item = (K, Priority, Vec<u8>)>,
) -> Vec<(K, Priority, Vec<u8>)> {
    let mut sends: Vec<(bool, K, Vec<u8>)> = sends
        .into_iter()
        .map(|(to, prio, bytes)| (prio != Priority::High, to, bytes))
        .collect();
    // Stable: frames keep their order within a group.
    sends.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut groups = Vec::new();
    let mut it = sends.into_iter().peekable();
    while let Some((normal, to, first)) = it.next() {
        let same = |s: &(bool, K, Vec<u8>)| s.0 == normal && s.1 == to;
        let mut bytes = first;
        if it.peek().is_some_and(same) {
            let mut run = vec![bytes];
            while let Some(s) = it.next_if(same) {
                run.push(s.2);
            }
            bytes = Vec::with_capacity(run.iter().map(Vec::len).sum());
            for frame in &run {
                bytes.extend_from_slice(frame);
            }
        }
        let prio = if normal {
            Priority::Normal
        } else {
            Priority::High
        };
        groups.push((to, prio, bytes));
    }
    groups
}

/// Logs a data-directory failure and stops the event loop: a role stops rather than lose data.
pub fn fatal(handle: &Handle, e: impl std::fmt::Display) -> String {
    error!("{e}; stopping");
    let _ = handle.shutdown();
    e.to_string()
}

/// Sends an outbox's frames and closes what it asks.
pub fn deliver(
    handle: &Handle,
    conns: &HashMap<PeerId, ConnId>,
    out: Outbox<PeerId>,
) -> Result<(), String> {
    send_grouped(handle, out.sends, |p| conns.get(p).copied())?;
    // After the other frames; one buffer per peer, so each moves as it is.
    let bulk = out.bulk.into_iter().map(|(p, b)| (p, Priority::Normal, b));
    send_grouped(handle, bulk, |p| conns.get(p).copied())?;
    for peer in out.closes {
        if let Some(&c) = conns.get(&peer) {
            handle
                .close(c)
                .map_err(|_| "the event loop stopped".to_string())?;
        }
    }
    Ok(())
}

/// Runs the multinode scheduler until `stop` (or killed).
pub fn run(args: &MultinodeArgs, stop: &Stop) -> Result<(), String> {
    run_with(args, None, stop)
}

/// Runs the multinode scheduler until `stop` (or killed), storing the number of URIs waiting in its crawl
/// and deferred queues (all collections) into `queued` at every sync (used by `crawlfleet up`).
pub fn run_with(
    args: &MultinodeArgs,
    queued: Option<std::sync::Arc<std::sync::atomic::AtomicU64>>,
    stop: &Stop,
) -> Result<(), String> {
    let _lock = check_data_dir(&args.data_dir)?;
    let configs = read_configs(&args.config)?;
    let mut sm = Multinode::open(&args.data_dir, MultinodeOptions::default())
        .map_err(|e| format!("data dir {} is unusable: {e}", args.data_dir.display()))?;
    for (name, dict) in configs {
        sm.add_collection(name.as_bytes(), dict)
            .map_err(|e| format!("collection {name}: {e}"))?;
    }
    // The scheduler decodes every frame (the URI hot path once, on its own thread) and refuses
    // an undecodable one itself (3.2.5.1: closing an unregistered connection), so the loop only
    // cuts frames by their length.
    let spawned = EventLoop::builder()
        .framing(FscmtLengthFraming::default())
        .listen(args.listen)
        .thread_name("multinode-loop")
        .spawn()
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let handle = spawned.handle;
    let admin_opts = crate::admin::options(args.admin, &args.admin_opts)?;
    let mut admin = crate::admin::Admin::open(&args.data_dir, &admin_opts, now_secs())?;
    let admin_server = crate::admin::start(&admin_opts)?;
    admin.set_addr(admin_server.addr);
    crate::announce(format_args!(
        "crawlfleet multinode listening on {}",
        spawned.local_addrs[0]
    ));
    let stopped = |_| "the event loop stopped".to_string();
    let keepalive = Duration::from_secs_f64(args.timers.keepalive.max(1.0));
    handle
        .set_timer(KEEPALIVE_TIMER, keepalive, Some(keepalive))
        .map_err(stopped)?;
    let sync = Duration::from_millis(args.timers.sync_ms.max(1));
    handle
        .set_timer(SYNC_TIMER, sync, Some(sync))
        .map_err(stopped)?;
    let resolver = Resolver::new(4);
    let mut conns: HashMap<PeerId, ConnId> = HashMap::new();
    let mut more = false;
    loop {
        if stop.is_set() {
            // Stop accepting (every connection closes: the nodes keep what they hold and
            // register again with the next start), then make everything durable.
            let _ = handle.shutdown();
            admin_server.stop();
            sm.sync().map_err(|e| format!("stopping: {e}"))?;
            admin.flush(&mut sm, now_secs());
            info!("multinode scheduler stopped: crawl queues, routes and statistics written");
            return Ok(());
        }
        let mut first = None;
        if more {
            // Routing has work left: take what is ready, without waiting.
            if let Ok(ev) = spawned.events.try_recv() {
                first = Some(ev);
            }
        } else {
            select! {
                recv(spawned.events) -> ev => match ev {
                    Ok(ev) => first = Some(ev),
                    Err(_) => return Err("the event loop stopped".into()),
                },
                recv(resolver.answers) -> a => {
                    if let Ok((host, addrs)) = a {
                        sm.dns_resolved(&host, addrs, now_secs());
                    }
                }
                recv(admin_server.calls) -> m => {
                    if let Ok(m) = m {
                        admin.handle(&mut sm, m, now_secs());
                    }
                }
                recv(stop.receiver()) -> _ => continue,
            }
        }
        while let Ok(m) = admin_server.calls.try_recv() {
            admin.handle(&mut sm, m, now_secs());
        }
        while let Ok((host, addrs)) = resolver.answers.try_recv() {
            sm.dns_resolved(&host, addrs, now_secs());
        }
        resolver.feed_stats(admin.stats_mut());
        let now = now_secs();
        let mut event = first;
        let mut handled = 0;
        while let Some(ev) = event.take() {
            let r = match ev {
                Event::Accepted { conn, peer, .. } => {
                    info!("{conn} accepted from {peer}");
                    conns.insert(conn.as_u64(), conn);
                    sm.peer_connected(conn.as_u64());
                    Ok(())
                }
                Event::Frames(batch) => {
                    let peer = batch.conn().as_u64();
                    sm.handle_frames(peer, batch.iter().map(|(_, body)| body), now)
                }
                Event::Closed { conn, reason, .. } => {
                    info!("{conn} closed: {reason}");
                    conns.remove(&conn.as_u64());
                    sm.peer_closed(conn.as_u64())
                }
                Event::Timer(KEEPALIVE_TIMER) => {
                    sm.keepalive_tick();
                    Ok(())
                }
                Event::Timer(SYNC_TIMER) => {
                    if let Some(q) = &queued {
                        let n: u64 = sm
                            .collections()
                            .iter()
                            .filter_map(|(name, _)| sm.queued(name))
                            .map(|(a, b)| a + b)
                            .sum();
                        q.store(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    sm.sync()
                }
                Event::Timer(_) | Event::Connected { .. } | Event::ConnectFailed { .. } => Ok(()),
            };
            if let Err(e) = r {
                return Err(fatal(&handle, e));
            }
            handled += 1;
            if handled < MAX_BATCH_EVENTS {
                event = spawned.events.try_recv().ok();
            }
        }
        // The nodes' statistics, each in the refresh cycle it names (MS-FSCMT 3.2.5.6).
        admin.apply_reports(sm.take_stat_reports(), now);
        let taken = sm.pump(now).map_err(|e| fatal(&handle, e))?;
        more = taken > 0;
        let out = sm.take_output();
        for host in &out.lookups {
            resolver.lookup(host.clone());
        }
        deliver(&handle, &conns, out)?;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// The grouping as a map of (normal priority, destination) to the frames joined in order.
    fn model(sends: &[(u8, Priority, Vec<u8>)]) -> Vec<(u8, Priority, Vec<u8>)> {
        let mut m: BTreeMap<(bool, u8), Vec<u8>> = BTreeMap::new();
        for (to, prio, bytes) in sends {
            m.entry((*prio != Priority::High, *to))
                .or_default()
                .extend_from_slice(bytes);
        }
        m.into_iter()
            .map(|((normal, to), b)| {
                let p = if normal {
                    Priority::Normal
                } else {
                    Priority::High
                };
                (to, p, b)
            })
            .collect()
    }

    #[test]
    fn frames_group_per_destination_and_priority_in_order() {
        let mut rng = fastrand::Rng::with_seed(0x28_0004);
        for _ in 0..2_000 {
            let sends: Vec<(u8, Priority, Vec<u8>)> = (0..rng.usize(..40))
                .map(|i| {
                    let prio = if rng.u8(..4) == 0 {
                        Priority::High
                    } else {
                        Priority::Normal
                    };
                    let frame = vec![i as u8; rng.usize(..9)];
                    (rng.u8(..5), prio, frame)
                })
                .collect();
            let got = group_frames(sends.clone());
            assert_eq!(got, model(&sends), "{sends:?}");
        }
    }
}
