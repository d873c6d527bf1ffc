//! `crawlfleet linkstore`: the link store, the server side of MS-FSWASDR.
//!
//! It listens on base port + 291 (2.1), reads data messages (a marshal dict and the terminator,
//! see [`framing`]) on any number of connections, several per connection, and stores each in
//! the log of its application and collection ([`crawlfleet_core::links::LinkLog`], under
//! `<data dir>/<application>/<collection>.log`). Messages that arrive together are made durable
//! together (one write and one fdatasync per log and group) and only then answered `ack\n`
//! (3.2.5). `failed\n` answers a message that cannot be unmarshalled, names no known
//! application, or cannot be written or synced; a message over the size limit gets `failed\n`
//! and its connection is closed.
//!
//! The network side is crawlfleet-net's event loop; this module's thread does the disk work,
//! so a slow disk never stalls reading.

pub mod framing;
pub mod query;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crawlfleet_core::datadir::DirLock;
use crawlfleet_core::links::{
    log_path, parse_message, stored_logs, Application, LinkLog, LogError, ACK, FAILED,
};
use crawlfleet_net::{ConnId, Event, EventLoop, Handle, Priority};
use crossbeam_channel::Receiver;
use log::{debug, error, info};

use crate::cli::LinkstoreArgs;
use crate::metrics::roles::SharedLinks;
use crate::stop::Stop;
use framing::{is_refusal, WasdrFraming};

/// The link store's port is the base port plus this (MS-FSWASDR 1.5, 2.1).
pub const PORT_OFFSET: u16 = 291;

/// The base port when none is given (the FAST installations' default).
pub const DEFAULT_BASE_PORT: u16 = 13000;

/// A group is committed once it holds this many message bytes, even if more are waiting.
const GROUP_BYTES: usize = 32 << 20;

/// Where the store keeps its data and how large a message may be.
#[derive(Clone, Debug)]
pub struct StoreOptions {
    /// The data directory (created if missing).
    pub data_dir: PathBuf,
    /// Largest message accepted, in bytes (without the terminator).
    pub max_message: usize,
}

/// The logs, by application and collection.
struct Store {
    dir: PathBuf,
    logs: Vec<LinkLog>,
    by_key: HashMap<(Application, Vec<u8>), usize>,
    /// Per log, its (application, collection) as `/metrics` labels them.
    keys: Vec<(String, String)>,
}

/// What a message of the current group will be answered.
enum Answer {
    /// Appended to log number `log`: `ack\n` if its commit succeeds.
    Stored {
        /// The log.
        log: usize,
        /// Lines in the message's batch fields.
        lines: u64,
        /// The message's bytes.
        bytes: u64,
    },
    /// `failed\n`.
    Failed,
    /// `failed\n`, then close the connection.
    Refuse,
}

/// A log's (application, collection) labels.
fn label(app: Application, coll: &[u8]) -> (String, String) {
    (
        app.name().to_string(),
        String::from_utf8_lossy(coll).into_owned(),
    )
}

impl Store {
    fn open(dir: &Path) -> Result<Store, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the data dir {}: {e}", dir.display()))?;
        let mut store = Store {
            dir: dir.to_owned(),
            logs: Vec::new(),
            by_key: HashMap::new(),
            keys: Vec::new(),
        };
        let existing = stored_logs(dir).map_err(|e| e.to_string())?;
        for (app, coll, path) in existing {
            let (log, rec) = LinkLog::open(&path).map_err(|e| e.to_string())?;
            info!(
                "{}: {} messages ({} bytes)",
                path.display(),
                rec.messages,
                rec.intact_len
            );
            store.keys.push(label(app, &coll));
            store.by_key.insert((app, coll), store.logs.len());
            store.logs.push(log);
        }
        Ok(store)
    }

    fn log_for(&mut self, app: Application, coll: &[u8]) -> Result<usize, LogError> {
        if let Some(&i) = self.by_key.get(&(app, coll.to_vec())) {
            return Ok(i);
        }
        let path = log_path(&self.dir, app, coll);
        let err = |action, error| LogError {
            path: path.clone(),
            action,
            error,
        };
        if let Some(parent) = path.parent() {
            if !parent.is_dir() {
                std::fs::create_dir_all(parent).map_err(|e| err("create directory", e))?;
                crawlfleet_core::checksum::wal::sync_parent(parent)
                    .map_err(|e| err("sync directory", e))?;
            }
        }
        let (log, _) = LinkLog::open(&path)?;
        info!("{}: new log", path.display());
        self.keys.push(label(app, coll));
        self.by_key.insert((app, coll.to_vec()), self.logs.len());
        self.logs.push(log);
        Ok(self.logs.len() - 1)
    }

    /// A data message (MS-FSWASDR 2.2.1), following 3.2.5 "Message Processing Events and
    /// Sequencing Rules" (server): unmarshalled to find its application and collection, then
    /// queued in that log; [`serve`] answers it `ack\n` once the log's group is on disk, and
    /// `failed\n` when it cannot be unmarshalled or written (2.2.2).
    fn on_data_message(&mut self, conn: ConnId, body: &[u8]) -> Answer {
        let msg = match parse_message(body) {
            Ok(m) => m,
            Err(e) => {
                crawlfleet_core::warn_limited!(
                    "linkstore-refused",
                    "{conn}: refusing a message of {} bytes: {e}",
                    body.len()
                );
                return Answer::Failed;
            }
        };
        match self.log_for(msg.application, &msg.collection) {
            Ok(i) => {
                self.logs[i].append(body);
                Answer::Stored {
                    log: i,
                    lines: msg.lines() as u64,
                    bytes: body.len() as u64,
                }
            }
            Err(e) => {
                error!("{conn}: cannot store a message: {e}");
                Answer::Failed
            }
        }
    }

    /// Commits every log with queued messages; returns the logs whose commit failed.
    fn commit(&mut self) -> HashSet<usize> {
        let mut failed = HashSet::new();
        for (i, log) in self.logs.iter_mut().enumerate() {
            let n = log.pending_messages();
            if n == 0 {
                continue;
            }
            if let Err(e) = log.commit() {
                error!("{n} message(s) not stored: {e}");
                failed.insert(i);
            }
        }
        failed
    }
}

/// A running link store.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// Stops the event loop (and with it the store thread).
    pub handle: Handle,
    /// The store thread; returns why it stopped.
    pub join: JoinHandle<Result<(), String>>,
}

/// Opens the store under `opts.data_dir` and serves it on `listen` until `stop`.
pub fn start(listen: SocketAddr, opts: &StoreOptions, stop: Stop) -> Result<Running, String> {
    start_with(listen, opts, SharedLinks::default(), stop)
}

/// [`start`], counting what is stored into `view` (for `/metrics`).
pub fn start_with(
    listen: SocketAddr,
    opts: &StoreOptions,
    view: SharedLinks,
    stop: Stop,
) -> Result<Running, String> {
    let lock = DirLock::acquire(&opts.data_dir).map_err(|e| e.to_string())?;
    let store = Store::open(&opts.data_dir)?;
    let spawned = EventLoop::builder()
        .listen(listen)
        .answer_half_closed(true)
        .framing(WasdrFraming::new(opts.max_message))
        .thread_name("linkstore-loop")
        .spawn()
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let handle = spawned.handle.clone();
    let events = spawned.events;
    let loop_handle = spawned.handle;
    let join = std::thread::Builder::new()
        .name("linkstore-store".into())
        .spawn(move || {
            // The data directory stays locked as long as the store is served.
            let _lock = lock;
            serve(events, loop_handle, store, view, stop)
        })
        .map_err(|e| format!("cannot start the store thread: {e}"))?;
    Ok(Running {
        addr: spawned.local_addrs[0],
        handle,
        join,
    })
}

/// The store thread: takes what arrived, commits it as one group, answers.
fn serve(
    events: Receiver<Event>,
    handle: Handle,
    mut store: Store,
    view: SharedLinks,
    stop: Stop,
) -> Result<(), String> {
    let mut refused: HashSet<ConnId> = HashSet::new();
    let mut answers: Vec<(ConnId, Answer)> = Vec::new();
    let stopped = |_| "the event loop stopped".to_string();
    loop {
        let first = crossbeam_channel::select! {
            recv(events) -> ev => ev,
            recv(stop.receiver()) -> _ => {
                // Every group taken so far is committed and answered: stop accepting and close
                // the connections (a client sends again what it got no answer for).
                let _ = handle.shutdown();
                info!("link store stopped: every message answered is on disk");
                return Ok(());
            }
        };
        let Ok(first) = first else {
            return Err("the event loop stopped".into());
        };
        let mut next = Some(first);
        let mut bytes = 0;
        while let Some(ev) = next.take() {
            match ev {
                Event::Frames(batch) => {
                    let conn = batch.conn();
                    for (priority, body) in &batch {
                        if refused.contains(&conn) {
                            continue;
                        }
                        if is_refusal(priority, body) {
                            crawlfleet_core::warn_limited!(
                                "linkstore-oversized",
                                "{conn}: message over the size limit; answering failed and closing"
                            );
                            refused.insert(conn);
                            answers.push((conn, Answer::Refuse));
                            continue;
                        }
                        bytes += body.len();
                        answers.push((conn, store.on_data_message(conn, body)));
                    }
                }
                Event::Accepted { conn, peer, .. } => debug!("{conn} accepted from {peer}"),
                Event::Closed { conn, reason, .. } => {
                    refused.remove(&conn);
                    debug!("{conn} closed: {reason}");
                }
                _ => {}
            }
            if bytes < GROUP_BYTES {
                next = events.try_recv().ok();
            }
        }
        // MS-FSWASDR 3.2.5: answer only after the data is on disk.
        let failed = store.commit();
        let mut counted = view.lock();
        for (conn, answer) in answers.drain(..) {
            let ok = matches!(answer, Answer::Stored { log, .. } if !failed.contains(&log));
            match answer {
                Answer::Stored { log, lines, bytes } if ok => {
                    let c = counted.stored.entry(store.keys[log].clone()).or_default();
                    c.batches += 1;
                    c.lines += lines;
                    c.bytes += bytes;
                }
                _ => counted.failed += 1,
            }
            let reply = if ok { ACK } else { FAILED };
            handle
                .send(conn, Priority::Normal, reply.to_vec())
                .map_err(stopped)?;
            if matches!(answer, Answer::Refuse) {
                handle.close(conn).map_err(stopped)?;
            }
        }
        drop(counted);
    }
}

/// The listening address `args` ask for: `--listen`, or loopback on base port + 291.
pub fn listen_addr(args: &LinkstoreArgs) -> Result<SocketAddr, String> {
    match args.listen {
        Some(a) => Ok(a),
        None => {
            let port = args.base_port.checked_add(PORT_OFFSET).ok_or_else(|| {
                format!("base port {} + {PORT_OFFSET} is not a port", args.base_port)
            })?;
            Ok(SocketAddr::from(([127, 0, 0, 1], port)))
        }
    }
}

/// Runs the link store until `stop` (or killed).
pub fn run(args: &LinkstoreArgs, stop: &Stop) -> Result<(), String> {
    // A file size limit (RLIMIT_FSIZE) must make a write fail (EFBIG, answered `failed\n`),
    // not kill the store with SIGXFSZ. A caught signal does that as an ignored one does: the
    // handler (signal-hook's, which only sets a flag nobody reads) replaces the default action,
    // and the write that crossed the limit returns EFBIG.
    signal_hook::flag::register(
        signal_hook::consts::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    )
    .map_err(|e| format!("cannot catch SIGXFSZ: {e}"))?;
    let listen = listen_addr(args)?;
    let view = SharedLinks::default();
    let _metrics = match args.metrics_listen {
        Some(addr) => Some(crate::metrics::serve(
            addr,
            crate::metrics::roles::link_route(view.clone()),
            &args.access,
        )?),
        None => None,
    };
    let running = start_with(
        listen,
        &StoreOptions {
            data_dir: args.data_dir.clone(),
            max_message: args.max_message,
        },
        view,
        stop.clone(),
    )?;
    // Scripts (and the tests) read the bound address from this line.
    crate::announce(format_args!(
        "crawlfleet linkstore listening on {}",
        running.addr
    ));
    running
        .join
        .join()
        .map_err(|_| "the store thread panicked".to_string())?
}
