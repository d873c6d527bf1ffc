//! `crawlfleet nameserver`: the name server the content distributors elect their master
//! through (MS-FSCDFT 3; ours, since MS-FSMW is not among our specs: docs/nameserver.md),
//! wiring `core::nameserver` to the event loop.
//!
//! The loop cuts frames by their length header alone and this thread decodes each one: a
//! request is answered in order on its connection; input that is not a request (garbage, an
//! unknown method or object, a field of the wrong type) is answered with the exception, logged
//! (rate-limited) and its connection closed. The loop keeps the port limits every role keeps
//! (queued output cap, partial frame budget, idle timeout) and answers what a half-closed peer
//! sent. A change of the bindings is durable before it is answered (`NameServer::on_bind`).

use crawlfleet_core::datadir::DirLock;
use crawlfleet_core::marshal::Limits;
use crawlfleet_core::nameserver::NameServer;
use crawlfleet_net::{Event, EventLoop, FscmtLengthFraming, Priority};
use log::{info, warn};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::cli::NameserverArgs;
use crate::stop::Stop;

/// Largest request frame body: a request is a few short strings (each at most
/// `MAX_FIELD_LEN`), so anything near this is hostile.
pub const MAX_REQUEST: usize = 64 << 10;

/// Runs the name server until `stop` (or killed), serving `/metrics` on `metrics` when given
/// (with the tokens and TLS of `access`).
pub fn run(
    listen: std::net::SocketAddr,
    data_dir: &std::path::Path,
    metrics: Option<std::net::SocketAddr>,
    access: &crate::cli::AdminAccess,
    stop: &Stop,
) -> Result<(), String> {
    let _lock = DirLock::acquire(data_dir).map_err(|e| e.to_string())?;
    let (mut ns, rec) = NameServer::open(data_dir)
        .map_err(|e| format!("data dir {} is unusable: {e}", data_dir.display()))?;
    info!(
        "data dir {}: {} binding(s) kept",
        data_dir.display(),
        rec.bindings
    );
    if let Some(why) = rec.damaged {
        warn!(
            "data dir {}: the bindings file is damaged ({why}); kept the {} binding(s) before it",
            data_dir.display(),
            rec.bindings
        );
    }
    let limits = Limits {
        max_size: MAX_REQUEST,
        ..Limits::default()
    };
    let spawned = EventLoop::builder()
        .framing(FscmtLengthFraming { limits })
        .listen(listen)
        .answer_half_closed(true)
        .thread_name("nameserver-loop")
        .spawn()
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let handle = spawned.handle;
    let bindings = std::sync::Arc::new(AtomicU64::new(ns.bindings().count() as u64));
    let _metrics = match metrics {
        Some(addr) => {
            let b = bindings.clone();
            Some(crate::metrics::serve(
                addr,
                crate::metrics::MetricsRoute::new(move |m| {
                    m.gauge(
                        "crawlfleet_nameserver_bindings",
                        "Object references bound (docs/nameserver.md).",
                        &[],
                        b.load(Ordering::Relaxed) as f64,
                    );
                }),
                access,
            )?)
        }
        None => None,
    };
    // Scripts (and the tests) read the bound address from this line.
    crate::announce(format_args!(
        "crawlfleet nameserver listening on {}",
        spawned.local_addrs[0]
    ));
    let stopped = |_| "the event loop stopped".to_string();
    loop {
        let event = crossbeam_channel::select! {
            recv(spawned.events) -> ev => match ev {
                Ok(ev) => ev,
                Err(_) => break,
            },
            recv(stop.receiver()) -> _ => {
                // Every change of the bindings was durable before it was answered.
                let _ = handle.shutdown();
                info!("name server stopped");
                return Ok(());
            }
        };
        match event {
            Event::Accepted { conn, peer, .. } => info!("{conn} accepted from {peer}"),
            Event::Frames(batch) => {
                let conn = batch.conn();
                let mut out = Vec::new();
                let mut close = None;
                for (_, body) in batch.iter() {
                    let answer = ns.handle_frame(body, &limits);
                    answer.reply.encode_frame(&mut out);
                    if let Some(why) = answer.close {
                        // Nothing after a broken request is read: the peer is out of step.
                        close = Some(why);
                        break;
                    }
                }
                handle.send(conn, Priority::Normal, out).map_err(stopped)?;
                bindings.store(ns.bindings().count() as u64, Ordering::Relaxed);
                if let Some(why) = close {
                    crawlfleet_core::warn_limited!(
                        "nameserver-bad-request",
                        "{conn}: {why}; closing the connection"
                    );
                    handle.close(conn).map_err(stopped)?;
                }
            }
            Event::Closed { conn, reason, .. } => info!("{conn} closed: {reason}"),
            Event::Connected { .. } | Event::ConnectFailed { .. } | Event::Timer(_) => {}
        }
    }
    Err("the event loop stopped".into())
}

/// `crawlfleet nameserver` with its arguments: the server, or one of the client commands.
pub fn main(args: &NameserverArgs, stop: &Stop) -> Result<std::process::ExitCode, String> {
    match &args.command {
        Some(cmd) => crate::nsclient::run(cmd),
        None => {
            let (Some(listen), Some(dir)) = (args.listen, args.data_dir.as_deref()) else {
                return Err("nameserver: --listen and --data-dir are required".into());
            };
            run(listen, dir, args.metrics_listen, &args.access, stop)
                .map(|()| std::process::ExitCode::SUCCESS)
        }
    }
}
