//! `crawlfleet node`: a node scheduler (MS-FSCMT 3.1), wiring `core::sched::node` to the event
//! loop: one link to the multinode scheduler (re-registering with CMD_UM_INIT on every
//! reconnect), one link per duplicate server the collections name (failing over to its replica
//! when it stays silent), the four timers of 3.1.2 and the sync timer of the crawl queues.

mod rup;
pub use rup::RupCounters;
mod rup_smtp;
pub use rup_smtp::QuickAck;
pub mod rup_spool;

use std::collections::{HashMap, VecDeque};
use std::net::ToSocketAddrs;
use std::time::Duration;

use crawlfleet_core::sched::dns::DnsEntry;
use crawlfleet_core::sched::multinode::SchedError;
use crawlfleet_core::sched::node::{Dest, NodeOptions, NodeScheduler};
use crawlfleet_net::fetch::FetchResult;
use crawlfleet_net::{ConnId, Event, EventLoop, Handle, LinkId, Priority, TimerId};
use crossbeam_channel::select;
use log::{info, warn};

use crate::cli::NodeArgs;
use crate::crawl::{Crawler, StatusSlot};
use crate::multinode::{check_data_dir, fatal, now_secs, read_configs, send_grouped};
use crate::resolver::Resolver;
use crate::stop::Stop;

pub mod indexnow;

const MN_KEEPALIVE_TIMER: TimerId = TimerId(1);
const DUP_KEEPALIVE_TIMER: TimerId = TimerId(2);
const QUARANTINE_TIMER: TimerId = TimerId(3);
const STATS_TIMER: TimerId = TimerId(4);
const SYNC_TIMER: TimerId = TimerId(5);
/// Wakes the crawl engine for sites whose delay has passed, and publishes the status.
const CRAWL_TIMER: TimerId = TimerId(6);
const CRAWL_TICK: Duration = Duration::from_millis(10);
/// Fetch results read per turn of the loop.
const MAX_RESULTS: usize = 1024;
const MAX_BATCH_EVENTS: usize = 1024;
/// Frames for the multinode scheduler kept while it is unreachable.
const MAX_HELD_FRAMES: usize = 1 << 20;
/// Keep-alive intervals a duplicate server may stay silent (or unreachable) before the node
/// fails over to its replica.
const DUP_MAX_MISSED: u32 = 3;

/// The link to one duplicate server the collections name, which fails over to its replica
/// (MS-FSCMT 3.4) once the server has been silent for [`DUP_MAX_MISSED`] keep-alive
/// intervals. The node keeps naming the server (`Dest::Dup`) either way.
struct DupLink {
    link: LinkId,
    /// When something last came from it (or the link was made).
    heard: std::time::Instant,
    on_replica: bool,
}

/// What an error of the scheduler does: a store without room pauses the crawl until space
/// returns (the sync timer tries again, `NodeScheduler::sync`); anything else stops the node.
fn answer(
    sm: &mut NodeScheduler,
    handle: &Handle,
    r: Result<(), SchedError>,
) -> Result<(), String> {
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.is_disk_full() => {
            sm.disk_full(&e);
            Ok(())
        }
        Err(e) => Err(fatal(handle, e)),
    }
}

/// Fetch results whose document checksums are computed together (`Crawler::hold_results`):
/// enough to fill the MD5 lanes, few enough that a batch's bodies are still in the cache when
/// their links are extracted.
const RESULT_BATCH: usize = 64;

/// Gives the crawler `first` and the fetch results waiting, [`MAX_RESULTS`] at most, in
/// batches of [`RESULT_BATCH`]; stops after a result whose sitemap queued URIs, which are
/// dispatched first (`crawler.step` in the loop), the rest of its batch held for the next turn.
fn read_results(
    crawler: &mut Crawler,
    sm: &mut NodeScheduler,
    handle: &Handle,
    first: Option<FetchResult>,
) -> Result<(), String> {
    let mut first = first;
    let mut read = 0;
    loop {
        if !crawler.has_held()
            && (read >= MAX_RESULTS || !crawler.hold_results(first.take(), RESULT_BATCH))
        {
            return Ok(());
        }
        while let Some(done) = crawler.read_held(sm) {
            read += 1;
            answer(sm, handle, done)?;
            if crawler.take_sitemap_queued() {
                return Ok(());
            }
        }
    }
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.001))
}

/// Runs a node scheduler until `stop` (or killed).
pub fn run(args: &NodeArgs, stop: &Stop) -> Result<(), String> {
    run_with(args, None, stop)
}

/// Runs a node scheduler until `stop` (or killed), publishing its crawl status into `status`
/// (used by `crawlfleet up`).
pub fn run_with(args: &NodeArgs, status: Option<StatusSlot>, stop: &Stop) -> Result<(), String> {
    let _lock = check_data_dir(&args.data_dir)?;
    let node_id = match (&args.node_id, args.standalone) {
        (Some(id), _) => id.clone(),
        (None, true) => "standalone".to_string(),
        (None, false) => return Err("--node-id is required".into()),
    };
    let admin_opts = crate::admin::options(args.admin, &args.admin_opts)?;
    let mut admin = crate::admin::Admin::open(&args.data_dir, &admin_opts, now_secs())?;
    // IndexNow submissions come in on the admin port (docs/indexnow.md).
    let (indexnow, indexnow_urls) =
        indexnow::IndexNow::start().map_err(|e| format!("cannot start IndexNow: {e}"))?;
    let route: std::sync::Arc<dyn crate::admin::server::Route> = indexnow;
    let admin_server = crate::admin::start_routed(&admin_opts, Some(route))?;
    admin.set_addr(admin_server.addr);
    let mut opts = NodeOptions::new(node_id.as_bytes());
    opts.standalone = args.standalone;
    // The bound address: --admin with port 0 reports the port picked.
    opts.xmlrpc = (
        admin_server.addr.ip().to_string().into_bytes(),
        i64::from(admin_server.addr.port()),
    );
    opts.block_seconds = args.block_seconds;
    let configs = read_configs(&args.config)?;
    let mut sm = NodeScheduler::open(&args.data_dir, opts)
        .map_err(|e| format!("data dir {} is unusable: {e}", args.data_dir.display()))?;
    for (name, dict) in configs {
        sm.conf_add(name.as_bytes(), dict)
            .map_err(|e| format!("collection {name}: {e}"))?;
    }
    let mut sink = match args.nameserver {
        Some(ns) => {
            let s = crate::sessionsink::SessionSink::start(ns, &args.data_dir)?;
            s.publish(&sm);
            Some(s)
        }
        None => None,
    };
    let spawned = EventLoop::builder()
        .thread_name("node-loop")
        .spawn()
        .map_err(|e| format!("cannot start the event loop: {e}"))?;
    let handle = spawned.handle;
    let stopped = |_| "the event loop stopped".to_string();
    let mn_link: Option<LinkId> = match args.multinode {
        Some(addr) => Some(handle.connect(addr).map_err(stopped)?),
        None => None,
    };
    crate::announce(format_args!("crawlfleet node {node_id} started"));
    for (id, every) in [
        (MN_KEEPALIVE_TIMER, secs(args.timers.keepalive.max(1.0))),
        (DUP_KEEPALIVE_TIMER, secs(args.dup_keepalive.max(1.0))),
        (QUARANTINE_TIMER, secs(args.quarantine_interval)),
        (STATS_TIMER, secs(args.stats_interval)),
        (
            SYNC_TIMER,
            Duration::from_millis(args.timers.sync_ms.max(1)),
        ),
        (CRAWL_TIMER, CRAWL_TICK),
    ] {
        handle.set_timer(id, every, Some(every)).map_err(stopped)?;
    }
    let resolver = Resolver::new(2);
    let links = match args.linkstore {
        Some(server) => {
            let cfg = crate::linkclient::LinkClientConfig::new(
                server,
                args.data_dir.join("link-backlog"),
            );
            Some(
                crate::linkclient::LinkBatcher::start(cfg)
                    .map_err(|e| format!("link store client: {e}"))?,
            )
        }
        None => None,
    };
    let mut crawler = Crawler::start(
        &format!("crawlfleet/{}", env!("CARGO_PKG_VERSION")),
        args.connections as usize,
        links,
    )
    .map_err(|e| format!("cannot start the fetcher: {e}"))?;
    // The RUP robot (node/rup.rs) and its SMTP receiver.
    let mut robot = rup::start(
        &args.data_dir,
        &format!("crawlfleet/{}", env!("CARGO_PKG_VERSION")),
    )?;
    if let Some(listen) = args.rup_smtp {
        let a = rup_smtp::start(
            listen,
            &args.data_dir,
            robot.recipients.clone(),
            robot.wake.clone(),
        )
        .map_err(|e| format!("RUP SMTP receiver on {listen}: {e}"))?;
        info!("RUP SMTP receiver listening on {a}");
    }
    crawler.archive_with(crate::warc::Archiver::new(&args.data_dir, &node_id));
    admin.set_fetch_latency(crawler.latency());
    // The statistics are fed every 200 ms; the status `up` watches is published every 50 ms,
    // so that the end of a crawl is seen soon after it (Cluster::watch_until).
    let mut published = std::time::Instant::now();
    let mut stats_fed = published;
    let mut cycles_seen = sm.cycles_begun();
    let mut mn_conn: Option<ConnId> = None;
    let mut held: VecDeque<(Priority, Vec<u8>)> = VecDeque::new();
    let mut dup_links: HashMap<LinkId, String> = HashMap::new();
    let mut unresolvable: std::collections::HashSet<String> = Default::default();
    let mut dup_conns: HashMap<String, ConnId> = HashMap::new();
    let mut conn_dest: HashMap<ConnId, Dest> = HashMap::new();
    let mut dup_state: HashMap<String, DupLink> = HashMap::new();
    let dup_silence = secs(args.dup_keepalive.max(1.0)) * DUP_MAX_MISSED;
    loop {
        if stop.is_set() {
            // Stop accepting and close every link (the multinode scheduler and the duplicate
            // servers hear of it as of any node leaving), then make everything durable.
            let _ = handle.shutdown();
            admin_server.stop();
            crawler.feed_stats(&mut sm, admin.stats_mut());
            let synced = sm.sync();
            if let Some(s) = &sink {
                s.publish(&sm);
            }
            admin.flush(&mut sm, now_secs());
            if let Some(slot) = &status {
                let mut st = crawler.status(&sm);
                st.rup = robot.counters();
                if let Some(s) = &sink {
                    s.fill_status(&mut st);
                }
                *slot.lock() = st;
            }
            synced.map_err(|e| format!("stopping: {e}"))?;
            // The crawler's WARC writers close their files and its link batcher hands what it
            // holds to the link store or its backlog as they drop; fetches under way are in
            // the in-flight journal, taken again by the next start.
            drop(crawler);
            drop(sink);
            info!("node {node_id} stopped: crawl queues, documents and statistics written");
            return Ok(());
        }
        // Connect to duplicate servers the collections name.
        for addr in sm.dup_servers() {
            if unresolvable.contains(&addr) || dup_links.values().any(|a| *a == addr) {
                continue;
            }
            match addr.to_socket_addrs().ok().and_then(|mut a| a.next()) {
                Some(sa) => {
                    let link = handle.connect(sa).map_err(stopped)?;
                    dup_links.insert(link, addr.clone());
                    let heard = std::time::Instant::now();
                    dup_state.insert(
                        addr,
                        DupLink {
                            link,
                            heard,
                            on_replica: false,
                        },
                    );
                }
                None => {
                    warn!("duplicate server address {addr:?} does not resolve");
                    unresolvable.insert(addr);
                }
            }
        }
        let mut first = None;
        if crawler.has_held() {
            // Results held back while a sitemap's URIs were dispatched (crawler.step below).
            read_results(&mut crawler, &mut sm, &handle, None)?;
        } else {
            select! {
                recv(spawned.events) -> ev => match ev {
                    Ok(ev) => first = Some(ev),
                    Err(_) => return Err("the event loop stopped".into()),
                },
                recv(resolver.answers) -> a => {
                    if let Ok((host, addrs)) = a {
                        let now = now_secs();
                        let e = DnsEntry { addrinfo: addrs, resolved_at: now, ttl: 3600 };
                        let r = sm.dns_answer(&host, e, now);
                        answer(&mut sm, &handle, r)?;
                    }
                }
                recv(crawler.results()) -> r => {
                    if let Ok(r) = r {
                        read_results(&mut crawler, &mut sm, &handle, Some(r))?;
                    }
                }
                recv(crawler.logins_done()) -> d => {
                    if let Ok(d) = d {
                        crawler.login_done(d);
                    }
                }
                recv(indexnow_urls) -> u => {
                    if let Ok(urls) = u {
                        let dropped = sm.indexnow_submitted(&urls);
                        if let Ok(n @ 1..) = dropped {
                            crawlfleet_core::warn_limited!(
                                "indexnow dropped",
                                "IndexNow: {n} URLs of hosts no collection covers dropped"
                            );
                        }
                        answer(&mut sm, &handle, dropped.map(|_| ()))?;
                    }
                }
                // The robot asked something (a report's pages): robot.pump below does it.
                recv(robot.asked) -> _ => {}
                recv(stop.receiver()) -> _ => continue,
                recv(admin_server.calls) -> m => {
                    if let Ok(m) = m {
                        // Rounded up: a quarantine asked now ends no earlier than asked (MS-FSCMT
                        // 3.1.5.17), the Quarantine timer reading the time rounded down.
                        admin.handle(&mut sm, m, crawlfleet_core::clock::unix_now_up());
                    }
                }
            }
        }
        let now = now_secs();
        let now_up = crawlfleet_core::clock::unix_now_up();
        let mut event = first;
        let mut handled = 0;
        while let Some(ev) = event.take() {
            let r = match ev {
                Event::Connected { conn, link, peer } => {
                    if Some(link) == mn_link {
                        info!("connected to the multinode scheduler at {peer}");
                        mn_conn = Some(conn);
                        conn_dest.insert(conn, Dest::Multinode);
                        sm.multinode_connected();
                        // CMD_UM_INIT first on the new connection (3.2.5.1).
                        handle
                            .send(conn, Priority::Normal, sm.init_frame())
                            .map_err(stopped)?;
                    } else if let Some(addr) = dup_links.get(&link) {
                        info!("connected to duplicate server {addr} at {peer}");
                        if let Some(d) = dup_state.get_mut(addr) {
                            d.heard = std::time::Instant::now();
                        }
                        dup_conns.insert(addr.clone(), conn);
                        conn_dest.insert(conn, Dest::Dup(addr.clone()));
                        sm.dup_connected(addr);
                    }
                    Ok(())
                }
                Event::ConnectFailed {
                    addr,
                    error,
                    retry_in,
                    ..
                } => {
                    warn!("{addr} unreachable ({error}); retrying in {retry_in:?}");
                    Ok(())
                }
                Event::Frames(batch) => {
                    let from = conn_dest.get(&batch.conn()).cloned();
                    if let Some(Dest::Dup(a)) = &from {
                        if let Some(d) = dup_state.get_mut(a) {
                            d.heard = std::time::Instant::now();
                        }
                    }
                    let mut r = Ok(());
                    if let Some(from) = from {
                        for (_, body) in batch.iter() {
                            // Rounded up, as for the administrative calls above.
                            r = sm.handle_frame(&from, body, now_up);
                            if r.is_err() {
                                break;
                            }
                        }
                    }
                    r
                }
                Event::Closed { conn, reason, .. } => match conn_dest.remove(&conn) {
                    Some(Dest::Multinode) => {
                        warn!("multinode scheduler connection closed: {reason}");
                        mn_conn = None;
                        sm.multinode_closed();
                        Ok(())
                    }
                    Some(Dest::Dup(addr)) => {
                        warn!("duplicate server {addr} connection closed: {reason}");
                        dup_conns.remove(&addr);
                        sm.dup_closed(&addr);
                        Ok(())
                    }
                    None => Ok(()),
                },
                Event::Timer(MN_KEEPALIVE_TIMER) => {
                    sm.multinode_keepalive_tick();
                    Ok(())
                }
                Event::Timer(DUP_KEEPALIVE_TIMER) => {
                    sm.dup_keepalive_tick();
                    for (addr, d) in dup_state.iter_mut() {
                        if d.on_replica || d.heard.elapsed() <= dup_silence {
                            continue;
                        }
                        let Some(replica) = sm.dup_replica(addr) else {
                            continue;
                        };
                        let Some(sa) = replica.to_socket_addrs().ok().and_then(|mut a| a.next())
                        else {
                            warn!("replica address {replica:?} does not resolve");
                            continue;
                        };
                        warn!(
                            "duplicate server {addr} silent for {dup_silence:?}: failing over to its replica {replica}"
                        );
                        handle.disconnect(d.link).map_err(stopped)?;
                        dup_links.remove(&d.link);
                        if let Some(c) = dup_conns.remove(addr) {
                            conn_dest.remove(&c);
                            sm.dup_closed(addr);
                        }
                        // On connecting, the replica gets the configurations and every add
                        // not answered yet (NodeScheduler::dup_connected).
                        d.link = handle.connect(sa).map_err(stopped)?;
                        dup_links.insert(d.link, addr.clone());
                        d.on_replica = true;
                        d.heard = std::time::Instant::now();
                    }
                    Ok(())
                }
                Event::Timer(QUARANTINE_TIMER) => {
                    sm.quarantine_tick(now).and_then(|()| sm.refresh_tick(now))
                }
                Event::Timer(STATS_TIMER) => {
                    // CMD_UM_STAT: the statistics gathered since the last one (3.1.6).
                    crawler.feed_stats(&mut sm, admin.stats_mut());
                    if let Some(s) = &mut sink {
                        s.feed_stats(admin.stats_mut());
                    }
                    for (name, r) in admin.stat_reports(&sm, now_secs()) {
                        sm.add_stat_report(&name, r);
                    }
                    sm.stats_tick();
                    Ok(())
                }
                Event::Timer(SYNC_TIMER) => {
                    let r = sm.sync();
                    // The documents just made durable may go to the distributors.
                    if let Some(s) = &sink {
                        s.publish(&sm);
                    }
                    r
                }
                Event::Timer(CRAWL_TIMER) => {
                    if stats_fed.elapsed() >= Duration::from_millis(200) {
                        crawler.feed_stats(&mut sm, admin.stats_mut());
                        crawler.feed_site_stats(&sm, admin.site_stats_mut());
                        if let Some(s) = &mut sink {
                            s.feed_stats(admin.stats_mut());
                        }
                        stats_fed = std::time::Instant::now();
                    }
                    if published.elapsed() >= Duration::from_millis(50) {
                        if let Some(slot) = &status {
                            let mut st = crawler.status(&sm);
                            st.rup = robot.counters();
                            if let Some(s) = &sink {
                                s.fill_status(&mut st);
                            }
                            *slot.lock() = st;
                        }
                        published = std::time::Instant::now();
                    }
                    Ok(())
                }
                Event::Timer(_) | Event::Accepted { .. } => Ok(()),
            };
            answer(&mut sm, &handle, r)?;
            handled += 1;
            if handled < MAX_BATCH_EVENTS {
                event = spawned.events.try_recv().ok();
            }
        }
        if sm.cycles_begun() != cycles_seen {
            // A refresh cycle began (the refresh timer, CMD_ADM_CONF_REFRESH, CollectionRefetch):
            // what was counted until now stays with the cycle that ended (FSCADM 2.2.10.6
            // "prev"), what comes next is the new cycle's.
            cycles_seen = sm.cycles_begun();
            crawler.feed_stats(&mut sm, admin.stats_mut());
            if let Some(s) = &mut sink {
                s.feed_stats(admin.stats_mut());
            }
            admin.follow_cycles(&sm, now_secs());
        }
        let pumped = robot.pump(&mut sm);
        answer(&mut sm, &handle, pumped)?;
        crawler.collect_verdicts(&mut sm);
        let stepped = crawler.step(&mut sm, now_secs());
        answer(&mut sm, &handle, stepped)?;
        let ended = sm.end_turn();
        answer(&mut sm, &handle, ended)?;
        let out = sm.take_output();
        for host in &out.lookups {
            resolver.lookup(host.clone());
        }
        resolver.feed_stats(admin.stats_mut());
        let mut to_mn: Vec<(Priority, Vec<u8>)> = Vec::new();
        let mut to_dup = Vec::new();
        let bulk = out.bulk.into_iter().map(|(d, b)| (d, Priority::Normal, b));
        for (dest, prio, bytes) in out.sends.into_iter().chain(bulk) {
            match dest {
                Dest::Multinode => to_mn.push((prio, bytes)),
                Dest::Dup(a) => to_dup.push((a, prio, bytes)),
            }
        }
        match mn_conn {
            Some(c) => {
                let mut normal = Vec::new();
                for (prio, bytes) in held.drain(..).chain(to_mn) {
                    if prio == Priority::High {
                        handle.send(c, prio, bytes).map_err(stopped)?;
                    } else {
                        normal.extend_from_slice(&bytes);
                    }
                }
                if !normal.is_empty() {
                    handle.send(c, Priority::Normal, normal).map_err(stopped)?;
                }
            }
            None if args.multinode.is_some() => {
                // Kept until the multinode scheduler is back (CMD_UM_INIT goes first then).
                for f in to_mn {
                    if held.len() >= MAX_HELD_FRAMES {
                        warn!("multinode scheduler unreachable: dropping a frame");
                        break;
                    }
                    held.push_back(f);
                }
            }
            None => {}
        }
        send_grouped(&handle, to_dup, |a| dup_conns.get(a).copied())?;
    }
}
