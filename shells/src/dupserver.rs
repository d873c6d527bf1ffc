//! `crawlfleet dupserver` and `crawlfleet dupreplica`: the duplicate server and its replica
//! (MS-FSCMT 3.3, 3.4), wiring `core::dupserver` to the event loop.
//!
//! One thread takes the events the loop has ready, two at a time, and feeds them to the state
//! machine, then writes the write-ahead log for them and hands their replies to a second thread,
//! the syncer, which sends them only after its fdatasync of the log returned (group commit,
//! pipelined: while the syncer waits for the disk, the first thread handles the next events, and
//! every batch written meanwhile shares the next fdatasync). Frames to the replica leave after
//! every event, before the commit (see `crawlfleet_core::dupserver`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::checksum::durable::DupStores;
use crawlfleet_core::checksum::wal::SyncPoint;
use crawlfleet_core::datadir::DirLock;
use crawlfleet_core::dupserver::{DupServer, Mode, PeerId};
use crawlfleet_net::{
    ConnId, Event, EventLoop, FscmtLengthFraming, Handle, LinkId, Priority, TimerId,
};
use crossbeam_channel::{Receiver, Sender};
use log::{error, info, warn};
use parking_lot::Mutex;

use crate::cli::DupArgs;
use crate::stop::Stop;

const KEEPALIVE_TIMER: TimerId = TimerId(1);
const SNAPSHOT_TIMER: TimerId = TimerId(2);
/// Start a snapshot when the log grows past this.
const SNAPSHOT_AFTER_BYTES: u64 = 256 << 20;
/// Shards written per snapshot tick (every 100 ms), so the loop never stops for long.
const SNAPSHOT_SHARDS_PER_TICK: usize = 4;
/// Shards of each collection's checksum store.
const SHARDS: usize = 64;
/// Events handled before the log is written and handed to the syncer. An event is a socket
/// read of frames (a node's whole pipeline window, typically), so two already make a group;
/// taking more only delays the fdatasync of the first while the thread works on the rest
/// (measured: 2 gives 15-40% more adds/s than 4, 1 or 4096 under four pipelining nodes).
const MAX_BATCH_EVENTS: usize = 2;
/// Events taken from the loop's channel ahead of their handling, so that the replica's answers
/// are handled before node windows the loop read earlier (see [`Ahead`]).
const LOOKAHEAD: usize = 8;

/// The next events, a few taken from the event loop's channel ahead of their handling: the
/// replica's frames (its _OKs, which release the answers held for the nodes) are handled
/// first, so that the answers leave without waiting behind the node windows read before them
/// (each a millisecond of handling). Frames of one connection keep their order, and so do all
/// other events; only the replica's frames move ahead, and of different connections' frames
/// no order is promised.
struct Ahead<T> {
    events: VecDeque<T>,
}

impl<T> Default for Ahead<T> {
    fn default() -> Self {
        Ahead {
            events: VecDeque::new(),
        }
    }
}

impl<T> Ahead<T> {
    fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The next event to handle, `received` (an event just taken from the channel, the oldest)
    /// and what the channel holds (up to [`LOOKAHEAD`]) taken first; None when nothing is
    /// ready.
    fn next(
        &mut self,
        received: Option<T>,
        channel: &Receiver<T>,
        first: impl Fn(&T) -> bool,
    ) -> Option<T> {
        self.events.extend(received);
        while self.events.len() < LOOKAHEAD {
            match channel.try_recv() {
                Ok(ev) => self.events.push_back(ev),
                Err(_) => break,
            }
        }
        match self.events.iter().position(first) {
            Some(i) if i > 0 => self.events.remove(i),
            _ => self.events.pop_front(),
        }
    }
}

/// True for frames from the replica (`replica`: its connection while it is up).
fn from_replica(ev: &Event, replica: Option<ConnId>) -> bool {
    matches!(ev, Event::Frames(b) if Some(b.conn()) == replica)
}

/// One batch's replies, to send once `sync` is durable.
struct Commit {
    sync: SyncPoint,
    frames: Vec<(ConnId, Vec<u8>)>,
}

/// The newest log point the syncer made durable and whose waiting answers it has handed to the
/// event loop, with the number of commits it has handed over in all, shared with the main
/// thread.
type Synced = Arc<Mutex<(Option<SyncPoint>, u64)>>;

/// What the main thread reads of [`Synced`] once a batch: the newest durable point, and whether
/// every one of the `queued` commits it gave the syncer has been handed to the event loop. Only
/// then may an answer leave at once: a commit still with the syncer holds earlier answers, which
/// an answer sent at once would overtake even when the point it waits for is durable already
/// (a node reads its answers in order).
fn synced_now(synced: &Synced, queued: u64) -> (Option<SyncPoint>, bool) {
    let s = synced.lock();
    (s.0.clone(), s.1 == queued)
}

/// How many commits at the head of `group` (in the order queued) wait for points `synced`
/// covers: those the syncer sends before its fdatasync. A durable commit behind one that waits
/// is not counted: its answers would pass that one's.
fn durable_prefix(group: &[Commit], synced: Option<&SyncPoint>) -> usize {
    group
        .iter()
        .take_while(|c| synced.is_some_and(|done| c.sync.covered_by(done)))
        .count()
}

/// The syncer thread: takes every commit queued, sends at once the replies of the first ones
/// already durable (up to one that is not), makes the log durable with one fdatasync (per log file: a snapshot may have started
/// a new one), then sends the other replies in order. On a failed fdatasync nothing more is
/// sent: it reports the error and stops the event loop.
fn syncer(commits: Receiver<Commit>, handle: Handle, failed: Sender<String>, shared: Synced) {
    let mut synced: Option<SyncPoint> = None;
    let mut handed = 0u64;
    let mut group = Vec::new();
    let send = |frames: Vec<(ConnId, Vec<u8>)>| {
        frames
            .into_iter()
            .try_for_each(|(conn, bytes)| handle.send(conn, Priority::Normal, bytes))
    };
    while let Ok(first) = commits.recv() {
        group.push(first);
        group.extend(commits.try_iter());
        // Answers whose records are durable already (released by the replica's _OK after the
        // fdatasync of their batch) leave now, not after the next fdatasync; but only up to the
        // first commit that must wait: one behind it holds later answers, which must not pass
        // its answers (a node reads its answers in order), whatever point they wait for.
        for c in group.drain(..durable_prefix(&group, synced.as_ref())) {
            if send(c.frames).is_err() {
                return;
            }
            handed += 1;
        }
        // The newest point of each file in the group; older ones of the same file are covered.
        let mut points: Vec<&SyncPoint> = Vec::new();
        for c in &group {
            match points.iter_mut().find(|p| p.same_file(&c.sync)) {
                Some(p) if p.len() < c.sync.len() => *p = &c.sync,
                Some(_) => {}
                None => points.push(&c.sync),
            }
        }
        for p in points {
            if synced.as_ref().is_some_and(|done| p.covered_by(done)) {
                continue;
            }
            if let Err(e) = p.sync() {
                // Nothing may be acknowledged that is not durable: stop rather than lie.
                error!("cannot commit the log: {e}; stopping");
                let _ = failed.send(format!("cannot commit the log: {e}"));
                let _ = handle.shutdown();
                return;
            }
            synced = Some(p.clone());
        }
        for c in group.drain(..) {
            if send(c.frames).is_err() {
                return;
            }
            handed += 1;
        }
        // Published only once the answers it covers are handed to the loop: the main thread
        // sends an answer of a durable batch at once, and it must not pass an earlier answer
        // to the same peer still waiting here (a node reads its answers in order).
        *shared.lock() = (synced.clone(), handed);
    }
}

/// The connection of `peer`; None, logged, when it has closed (its frames are dropped).
fn conn_of(conns: &HashMap<PeerId, ConnId>, peer: PeerId) -> Option<ConnId> {
    let conn = conns.get(&peer).copied();
    if conn.is_none() {
        warn!("dropping frames to a closed connection");
    }
    conn
}

/// Sends frames that need no commit (those to the replica, and answers whose records are
/// durable already). Err when the event loop has stopped.
fn send_now(
    handle: &Handle,
    conns: &HashMap<PeerId, ConnId>,
    frames: Vec<(PeerId, Vec<u8>)>,
) -> Result<(), ()> {
    for (peer, bytes) in frames {
        if let Some(conn) = conn_of(conns, peer) {
            handle.send(conn, Priority::Normal, bytes).map_err(|_| ())?;
        }
    }
    Ok(())
}

/// Takes the data directory (locked against other processes while the guard lives) and opens
/// its stores before anything listens.
fn open_stores(dir: &Path) -> Result<(DirLock, DupStores), String> {
    let lock = DirLock::acquire(dir).map_err(|e| e.to_string())?;
    let (stores, rec) = DupStores::open(dir, SHARDS)
        .map_err(|e| format!("data dir {} is unusable: {e}", dir.display()))?;
    info!(
        "data dir {}: {} collection(s), {} checksum(s) recovered in {:.2} s ({} log records replayed)",
        dir.display(),
        rec.collections,
        rec.entries,
        rec.elapsed.as_secs_f64(),
        rec.records_replayed
    );
    Ok((lock, stores))
}

/// Publishes what `sm` has done for `/metrics`.
fn publish(sm: &DupServer, view: &crate::metrics::roles::SharedDup) {
    let c = sm.counters();
    let stores = sm.stores();
    let entries = stores
        .collection_names()
        .map(|n| {
            let len = stores.collection(n).map_or(0, |c| c.store.len());
            (String::from_utf8_lossy(n).into_owned(), len as u64)
        })
        .collect();
    let mut v = view.lock();
    v.adds = c.adds;
    v.removes = c.removes;
    v.entries = entries;
    v.wal_bytes = stores.wal_len();
    v.replica = sm.replica_lag();
    v.replica_oldest = sm.replica_oldest_pending();
}

/// Runs a duplicate server (`replica` given: forwarding to it) or a replica until `stop` (or
/// killed).
pub fn run(
    mode: Mode,
    args: &DupArgs,
    replica: Option<SocketAddr>,
    stop: &Stop,
) -> Result<(), String> {
    let (_lock, stores) = open_stores(&args.data_dir)?;
    let node_id = args
        .node_id
        .clone()
        .unwrap_or_else(|| format!("dup-{}", args.listen));
    let mut sm = DupServer::new(mode, node_id.as_bytes(), stores, replica.is_some());
    // The state machine decodes every frame (PPDUP_ADD and its kin once, without allocating) and
    // tells an invalid one, whose connection is then closed here, so the loop only cuts frames
    // by their length header.
    let spawned = EventLoop::builder()
        .framing(FscmtLengthFraming::default())
        .listen(args.listen)
        .answer_half_closed(true)
        .thread_name(match mode {
            Mode::Server => "dupserver-loop",
            Mode::Replica => "dupreplica-loop",
        })
        .spawn()
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let handle = spawned.handle;
    let role = match mode {
        Mode::Server => "dupserver",
        Mode::Replica => "dupreplica",
    };
    // `/metrics` (--metrics-listen): the view is published at every snapshot tick.
    let view = crate::metrics::roles::SharedDup::default();
    view.lock().role = role;
    let _metrics = match args.metrics_listen {
        Some(addr) => Some(crate::metrics::serve(
            addr,
            crate::metrics::roles::dup_route(view.clone()),
            &args.access,
        )?),
        None => None,
    };
    // Scripts (and the tests) read the bound address from this line.
    crate::announce(format_args!(
        "crawlfleet {role} listening on {}",
        spawned.local_addrs[0]
    ));
    let keepalive = Duration::from_secs_f64(args.keepalive.max(1.0));
    let stopped = |_| "the event loop stopped".to_string();
    handle
        .set_timer(KEEPALIVE_TIMER, keepalive, Some(keepalive))
        .map_err(stopped)?;
    let tick = Duration::from_millis(100);
    handle
        .set_timer(SNAPSHOT_TIMER, tick, Some(tick))
        .map_err(stopped)?;
    let replica_link: Option<LinkId> = match replica {
        Some(addr) => {
            info!("forwarding to the replica at {addr}");
            Some(handle.connect(addr).map_err(stopped)?)
        }
        None => None,
    };
    let mut conns: HashMap<PeerId, ConnId> = HashMap::new();
    // The replica's connection while it is up (its frames are handled first: `Ahead`).
    let mut replica_conn: Option<ConnId> = None;
    let mut ahead = Ahead::default();
    // Connections closed for an undecodable frame, until their `Closed`.
    let mut refused: HashSet<ConnId> = HashSet::new();
    let (commit_tx, commit_rx) = crossbeam_channel::unbounded::<Commit>();
    let (failed_tx, failed_rx) = crossbeam_channel::bounded::<String>(1);
    let syncer_handle = handle.clone();
    let synced: Synced = Arc::default();
    let syncer_synced = synced.clone();
    // Sync points of recent batches that forwarded to the replica, oldest first: the answers
    // the replica's _OKs release wait for these (see `Outgoing::after_batch`).
    let mut points: VecDeque<(u64, SyncPoint)> = VecDeque::new();
    // Commits given to the syncer so far (see `synced_now`).
    let mut queued_commits = 0u64;
    let syncer_thread = std::thread::Builder::new()
        .name(format!("{role}-sync"))
        .spawn(move || syncer(commit_rx, syncer_handle, failed_tx, syncer_synced))
        .map_err(|e| format!("cannot start the log syncer: {e}"))?;
    let stopped_by_syncer = |failed_rx: &Receiver<String>| {
        failed_rx
            .try_recv()
            .unwrap_or_else(|_| "the event loop stopped".into())
    };

    loop {
        let ready = if ahead.is_empty() || stop.is_set() {
            None
        } else {
            ahead.next(None, &spawned.events, |ev| from_replica(ev, replica_conn))
        };
        let first = match ready {
            Some(ev) => Some(ev),
            None => crossbeam_channel::select! {
                recv(spawned.events) -> ev => match ev {
                    Ok(ev) => ahead.next(Some(ev), &spawned.events, |ev| {
                        from_replica(ev, replica_conn)
                    }),
                    Err(_) => None,
                },
                recv(stop.receiver()) -> _ => {
                    // Stop accepting and close every connection, let the syncer send the
                    // answers it holds, then make every record written durable (those without
                    // answers too: they would otherwise wait for a later group).
                    let _ = handle.shutdown();
                    drop(commit_tx);
                    let _ = syncer_thread.join();
                    if let Ok(e) = failed_rx.try_recv() {
                        return Err(e);
                    }
                    let out = sm
                        .write_log()
                        .map_err(|e| format!("stopping: cannot write the log: {e}"))?;
                    out.sync
                        .sync()
                        .map_err(|e| format!("stopping: cannot commit the log: {e}"))?;
                    info!("{role} stopped: the checksum log is durable");
                    return Ok(());
                }
            },
        };
        let Some(first) = first else {
            drop(commit_tx);
            let _ = syncer_thread.join();
            return Err(stopped_by_syncer(&failed_rx));
        };
        // One clock reading per batch of events: the forwards of the batch are stamped with it
        // (the replica's lag in seconds).
        sm.set_clock(std::time::Instant::now());
        let mut event = Some(first);
        let mut handled = 0;
        while let Some(ev) = event.take() {
            // The replica's _OKs release answers: the batch ends with them, so that those
            // answers leave now rather than after the next event's handling.
            let replica_frames = from_replica(&ev, replica_conn);
            match ev {
                Event::Accepted { conn, peer, .. } => {
                    info!("{conn} accepted from {peer}");
                    conns.insert(conn.as_u64(), conn);
                    sm.peer_connected(conn.as_u64());
                }
                Event::Connected { conn, link, peer } => {
                    conns.insert(conn.as_u64(), conn);
                    if Some(link) == replica_link {
                        info!("connected to the replica at {peer}");
                        replica_conn = Some(conn);
                        sm.replica_connected(conn.as_u64());
                    }
                }
                Event::ConnectFailed {
                    addr,
                    error,
                    retry_in,
                    ..
                } => {
                    warn!("replica {addr} unreachable ({error}); retrying in {retry_in:?}");
                }
                // Frames the loop read after an undecodable one are not handled.
                Event::Frames(batch) if refused.contains(&batch.conn()) => {}
                Event::Frames(batch) => {
                    let conn = batch.conn();
                    let bodies = batch.iter().map(|(_, body)| body);
                    if let Err(e) = sm.handle_frames(conn.as_u64(), bodies, batch.data().len()) {
                        // What came before it is answered (if the connection still takes it).
                        crawlfleet_core::warn_limited!(
                            "dupserver-undecodable",
                            "{conn}: undecodable frame: {e}; closing the connection"
                        );
                        refused.insert(conn);
                        if handle.close(conn).is_err() {
                            return Err(stopped_by_syncer(&failed_rx));
                        }
                    }
                    if send_now(&handle, &conns, sm.take_direct()).is_err() {
                        return Err(stopped_by_syncer(&failed_rx));
                    }
                }
                Event::Closed { conn, reason, .. } => {
                    info!("{conn} closed: {reason}");
                    if replica_conn == Some(conn) {
                        replica_conn = None;
                    }
                    refused.remove(&conn);
                    conns.remove(&conn.as_u64());
                    sm.peer_closed(conn.as_u64());
                }
                Event::Timer(KEEPALIVE_TIMER) => sm.keepalive_tick(),
                Event::Timer(SNAPSHOT_TIMER) => {
                    if _metrics.is_some() {
                        publish(&sm, &view);
                    }
                    let stores = sm.stores_mut();
                    if !stores.snapshot_in_progress() && stores.wal_len() > SNAPSHOT_AFTER_BYTES {
                        info!("log at {} MiB: starting a snapshot", stores.wal_len() >> 20);
                        if let Err(e) = stores.start_snapshot() {
                            error!("snapshot: {e}");
                        }
                    }
                    if stores.snapshot_in_progress() {
                        match stores.snapshot_step(SNAPSHOT_SHARDS_PER_TICK) {
                            Ok(true) => info!("snapshot written"),
                            Ok(false) => {}
                            Err(e) => error!("snapshot: {e}"),
                        }
                    }
                }
                Event::Timer(_) => {}
            }
            handled += 1;
            if handled < MAX_BATCH_EVENTS && !replica_frames {
                event = ahead.next(None, &spawned.events, |ev| from_replica(ev, replica_conn));
            }
        }
        // Group commit: write the batch's log records; the syncer sends the replies once they
        // are durable. Forwards to the replica leave now.
        let out = match sm.write_log() {
            Ok(out) => out,
            Err(e) => {
                // Nothing may be acknowledged that is not durable: stop rather than lie.
                error!("cannot write the log: {e}; stopping");
                let _ = handle.shutdown();
                return Err(format!("cannot write the log: {e}"));
            }
        };
        let conn_of = |peer: PeerId| conn_of(&conns, peer);
        // Answers released by the replica wait only for the batch that holds their records:
        // sent now when it is durable already (the usual case: the local fdatasync ran while
        // the replica synced), else after the sync of that batch's point. A point of an older
        // log file is durable: a snapshot commits the log before it starts the next file.
        let (done, all_handed) = synced_now(&synced, queued_commits);
        let durable = |p: &SyncPoint| {
            all_handed
                && (!p.same_file(&out.sync) || done.as_ref().is_some_and(|d| p.covered_by(d)))
        };
        while points.front().is_some_and(|(_, p)| durable(p)) {
            points.pop_front();
        }
        let forwarded = out.forwarded;
        // This batch's point is listed before the released answers are placed: an answer of
        // this very batch (its _OK read in the same batch of events) waits for its sync too.
        if forwarded {
            points.push_back((out.batch, out.sync.clone()));
        }
        let mut now = out.now;
        let mut earlier: Vec<(u64, Commit)> = Vec::new();
        for (batch, peer, bytes) in out.after_batch {
            // A batch no longer listed was durable when it left the list; while earlier answers
            // are still with the syncer, its answers follow them there, behind the newest
            // durable point (the syncer sends commits in the order given, whatever their
            // points: a durable one goes early only behind nothing that waits).
            let p = match points.iter().find(|(b, _)| *b == batch) {
                Some((_, p)) if !durable(p) => p,
                _ if all_handed => {
                    now.push((peer, bytes));
                    continue;
                }
                _ => done
                    .as_ref()
                    .filter(|d| d.same_file(&out.sync))
                    .unwrap_or(&out.sync),
            };
            let Some(conn) = conn_of(peer) else { continue };
            match earlier.last_mut() {
                Some((b, c)) if *b == batch => c.frames.push((conn, bytes)),
                _ => earlier.push((
                    batch,
                    Commit {
                        sync: p.clone(),
                        frames: vec![(conn, bytes)],
                    },
                )),
            }
        }
        if send_now(&handle, &conns, now).is_err() {
            return Err(stopped_by_syncer(&failed_rx));
        }
        let frames: Vec<(ConnId, Vec<u8>)> = out
            .after_sync
            .into_iter()
            .filter_map(|(peer, bytes)| Some((conn_of(peer)?, bytes)))
            .collect();
        // A batch that forwarded is synced now even without replies of its own, so that the
        // local fdatasync runs while the replica makes the same records durable: the answers the
        // replica's _OKs release wait for this point.
        if !frames.is_empty() || forwarded {
            earlier.push((
                out.batch,
                Commit {
                    sync: out.sync,
                    frames,
                },
            ));
        }
        // Records without replies become durable with a later group.
        for (_, commit) in earlier {
            if commit_tx.send(commit).is_err() {
                return Err(stopped_by_syncer(&failed_rx));
            }
            queued_commits += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_commit_behind_one_that_waits_is_not_sent_before_it() {
        use crawlfleet_core::recordlog::{Format, LogWriter, Options};
        let dir = tempfile::tempdir().unwrap();
        let opts = Options::new(Format::plain("test log", 64));
        // Two log files, as after a snapshot started a new one: the old file's point is durable,
        // the new file's is not.
        let mut old = LogWriter::create(&dir.path().join("a.log"), b"", opts).unwrap();
        old.append(b"x");
        let old_point = old.write_pending().unwrap();
        let mut new = LogWriter::create(&dir.path().join("b.log"), b"", opts).unwrap();
        new.append(b"y");
        let new_point = new.write_pending().unwrap();
        let commit = |sync: &SyncPoint| Commit {
            sync: sync.clone(),
            frames: Vec::new(),
        };
        let synced = Some(&old_point);
        // Queued: one waiting for the new file, then one already durable.
        let group = [commit(&new_point), commit(&old_point)];
        assert_eq!(durable_prefix(&group, synced), 0);
        // The durable ones ahead of it go at once, not the one after.
        let group = [
            commit(&old_point),
            commit(&old_point),
            commit(&new_point),
            commit(&old_point),
        ];
        assert_eq!(durable_prefix(&group, synced), 2);
        assert_eq!(durable_prefix(&group, None), 0);
        assert_eq!(durable_prefix(&group, Some(&new_point)), 0);
    }

    #[test]
    fn the_replica_frames_taken_ahead_are_handled_first_and_the_rest_in_order() {
        let (tx, rx) = crossbeam_channel::unbounded();
        // Events 1..=20; the replica's are the multiples of 5.
        for ev in 2..=20u32 {
            tx.send(ev).unwrap();
        }
        let urgent = |ev: &u32| ev.is_multiple_of(5);
        let mut ahead = Ahead::default();
        let mut got = Vec::new();
        // The first event comes from a blocking receive, the others from what is taken ahead.
        got.extend(ahead.next(Some(1), &rx, urgent));
        while let Some(ev) = ahead.next(None, &rx, urgent) {
            got.push(ev);
        }
        // A replica frame goes ahead of the events taken in before it (at most LOOKAHEAD in
        // all: 15 is not seen before 7 is handled); the others keep their order.
        assert_eq!(
            got,
            [5, 1, 10, 2, 3, 4, 6, 15, 7, 8, 9, 11, 20, 12, 13, 14, 16, 17, 18, 19]
        );
        assert!(ahead.is_empty() && rx.is_empty());
        // Nothing urgent: in order.
        for ev in [1, 2, 3] {
            tx.send(ev).unwrap();
        }
        let mut ahead = Ahead::default();
        let got: Vec<u32> = std::iter::from_fn(|| ahead.next(None, &rx, |_| false)).collect();
        assert_eq!(got, [1, 2, 3]);
    }
}
