//! The fetcher's driver on the reactor (`crate::reactor`): a slab of connections (slab key = mio token), the keep-alive pool keyed by
//! (scheme, address, host), the queue of requests waiting for a socket under `max_connections`,
//! and one min-heap of request deadlines.
//!
//! Each turn of the reactor: poll (sleeping until the next deadline or idle expiry at most),
//! drive the connections that had events, take new submissions, fire due deadlines, close expired idle
//! connections, and hand free sockets to waiting requests.
//!
//! Timers are lazy: a connection has at most one live heap entry, for the earliest deadline it
//! had when armed. A later request on the same connection does not push another; when the entry
//! surfaces, the connection's current deadline is checked and re-armed if still ahead. So the
//! heap holds about one entry per connection, not one per request.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::event::Event;
use mio::{Interest, Registry, Token};
use rustls::ClientConfig;
use slab::Slab;

use super::conn::{Conn, Job, Phase, Step};
use super::{FetchError, FetchRequest, FetchResult, FetcherOptions, Response, Shared, Submitted};
use crate::reactor::{Turn, WAKER};

/// Readiness events taken per poll.
pub(super) const EVENT_CAPACITY: usize = 1024;

/// The idle pool's key: scheme, address and a hash of the host name. Many hosts behind one
/// address (name-based virtual hosts, a CDN) each get a list of their own, so taking or
/// closing an idle connection does not walk every idle connection to that address; a list's
/// connections are still checked for their host (two names may share a hash).
type IdleKey = (bool, SocketAddr, u64);

fn idle_key(https: bool, addr: SocketAddr, host: &str) -> IdleKey {
    use std::hash::BuildHasher;
    (
        https,
        addr,
        foldhash::fast::FixedState::default().hash_one(host),
    )
}

/// EMFILE or ENFILE: the process or the system is out of file descriptors.
fn out_of_descriptors(e: &std::io::Error) -> bool {
    use rustix::io::Errno;
    Errno::from_io_error(e).is_some_and(|n| n == Errno::MFILE || n == Errno::NFILE)
}

/// A request not on a connection yet.
#[derive(Debug)]
struct Pending {
    req: FetchRequest,
    submitted: Instant,
    /// Second attempt after a reused connection died: must go on a fresh connection.
    retried: bool,
    /// Bytes (read, written) of an earlier attempt.
    net: (u64, u64),
}

/// An idle connection in age order, valid while the connection is still idle in that round.
#[derive(Debug)]
struct IdleMark {
    id: usize,
    uid: u64,
    idle_gen: u64,
    since: Instant,
}

/// The poll thread's state.
pub(super) struct Driver {
    /// A clone of the reactor's registry.
    registry: Registry,
    opts: FetcherOptions,
    tls: Arc<ClientConfig>,
    submitted: Receiver<Submitted>,
    done: Sender<FetchResult>,
    shared: Arc<Shared>,
    conns: Slab<Conn>,
    /// Idle connections per [`IdleKey`] (https, address, a hash of the host name), most
    /// recently used last; the host itself is checked on the connection (no allocation per
    /// lookup). Looked up for every request: foldhash, not SipHash (the addresses are the
    /// scheduler's, resolved and allowed, not a peer's choice).
    idle: HashMap<IdleKey, Vec<usize>, foldhash::fast::RandomState>,
    /// Idle connections oldest first, for the idle timeout and for eviction. Marks of
    /// connections that were reused or closed are skipped when met, and purged when they pile up.
    idle_order: VecDeque<IdleMark>,
    waiting: VecDeque<Pending>,
    /// Read buffers ([`super::http::MAX_HEAD`] bytes each) not lent to a connection. A
    /// connection holds one only while a request is in flight and gives it back here when it
    /// goes idle or closes, so thousands of idle keep-alive connections hold no buffer, and a
    /// request never waits on zeroing a new one once the pool has grown: the buffers ever made
    /// are as many as requests were ever in flight at once (at most `max_connections`).
    spare_bufs: Vec<Box<[u8]>>,
    /// `(deadline, slab key, uid)`.
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    next_uid: u64,
}

impl Turn for Driver {
    fn connections(&self) -> usize {
        self.conns.len()
    }

    fn opened(&self) -> u64 {
        // Relaxed: a counter, written by this thread only.
        self.shared.opened.load(Ordering::Relaxed)
    }

    /// Sleeps until the earliest request deadline or idle expiry.
    fn poll_timeout(&mut self) -> Option<Duration> {
        self.next_wakeup()
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Drives the connection the event is for (the waker's only ends the sleep: submissions
    /// are taken after the events).
    fn on_event(&mut self, ev: &Event) {
        if ev.token() != WAKER {
            self.on_ready(ev.token().0, ev.is_read_closed() || ev.is_error());
        }
    }

    /// Takes new submissions, fires due deadlines, closes expired idle connections and hands
    /// free sockets to waiting requests; stops once the fetcher shuts down.
    fn after_events(&mut self) -> ControlFlow<()> {
        // Acquire pairs with the Release in `Fetcher::stop`.
        if self.shared.stop.load(Ordering::Acquire) {
            return ControlFlow::Break(());
        }
        let now = Instant::now();
        // Before taking submissions: one queued after this wakes the thread again (see
        // `Fetcher::wake`).
        self.shared.wake_pending.swap(false, Ordering::AcqRel);
        while let Ok(s) = self.submitted.try_recv() {
            let p = Pending {
                req: s.req,
                submitted: s.at,
                retried: false,
                net: (0, 0),
            };
            if self.waiting.is_empty() {
                self.dispatch(p, now);
            } else {
                self.waiting.push_back(p); // first come, first served
            }
        }
        self.fire_timers(now);
        self.expire_idle(now);
        self.pump_waiting(now);
        ControlFlow::Continue(())
    }
}

impl Driver {
    pub(super) fn new(
        registry: Registry,
        opts: FetcherOptions,
        tls: Arc<ClientConfig>,
        submitted: Receiver<Submitted>,
        done: Sender<FetchResult>,
        shared: Arc<Shared>,
    ) -> Driver {
        Driver {
            registry,
            opts: FetcherOptions {
                max_connections: opts.max_connections.max(1),
                ..opts
            },
            tls,
            submitted,
            done,
            shared,
            conns: Slab::new(),
            idle: HashMap::default(),
            idle_order: VecDeque::new(),
            waiting: VecDeque::new(),
            spare_bufs: Vec::new(),
            timers: BinaryHeap::new(),
            next_uid: 0,
        }
    }

    /// Answers every request not finished with [`FetchError::Shutdown`]; the poll thread's
    /// last act, after the reactor stopped running this driver.
    pub(super) fn finish(mut self) {
        self.answer_all_shutdown();
    }

    /// The earliest deadline or idle expiry.
    fn next_wakeup(&self) -> Option<Instant> {
        let timer = self.timers.peek().map(|Reverse((at, ..))| *at);
        let idle = self
            .idle_order
            .front()
            .map(|m| m.since + self.opts.idle_timeout);
        match (timer, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// `read_closed`: the event reported the peer's FIN or an error (see `conn.rs`).
    fn on_ready(&mut self, id: usize, read_closed: bool) {
        let Some(conn) = self.conns.get_mut(id) else {
            return;
        };
        if conn.phase == Phase::Idle {
            if !conn.settle() {
                log::debug!(
                    "fetch: idle connection to {} ({}) closed by the server",
                    conn.addr,
                    conn.host
                );
                self.close(id);
            }
            return;
        }
        let step = conn.drive(read_closed);
        self.after(id, step);
    }

    /// Carries out what a connection's step came to.
    fn after(&mut self, id: usize, step: Step) {
        let Some(conn) = self.conns.get_mut(id) else {
            return;
        };
        match step {
            Step::Pending => self.arm(id),
            Step::Done(resp, keep) => {
                conn.served += 1;
                let Some(mut job) = conn.job.take() else {
                    return;
                };
                let keep = keep && conn.settle();
                let (r, w) = conn.take_net();
                job.net = (job.net.0 + r, job.net.1 + w);
                if keep {
                    self.spare_bufs.extend(conn.take_buf());
                    conn.phase = Phase::Idle;
                    conn.idle_gen += 1;
                    let mark = IdleMark {
                        id,
                        uid: conn.uid,
                        idle_gen: conn.idle_gen,
                        since: Instant::now(),
                    };
                    self.idle
                        .entry(idle_key(conn.https, conn.addr, &conn.host))
                        .or_default()
                        .push(id);
                    self.idle_order.push_back(mark);
                    self.purge_idle_marks();
                } else {
                    self.close(id);
                }
                self.answer(job.req, job.submitted, job.started, Ok(resp), job.net);
            }
            Step::Failed(e) => {
                let Some(mut job) = conn.job.take() else {
                    return;
                };
                let (r, w) = conn.take_net();
                job.net = (job.net.0 + r, job.net.1 + w);
                self.close(id);
                // A kept-alive connection the server dropped before answering: the request never
                // reached it, so once more on a fresh connection (RFC 9112 section 9.3.1).
                let stale =
                    matches!(e, FetchError::Io(_)) && job.reused && !job.got_bytes && !job.retried;
                if stale {
                    log::debug!(
                        "fetch: {} failed on a reused connection ({e}), retrying",
                        job.req.url
                    );
                    let p = Pending {
                        req: job.req,
                        submitted: job.submitted,
                        retried: true,
                        net: job.net,
                    };
                    self.dispatch(p, Instant::now());
                } else {
                    log::debug!("fetch: {}: {e}", job.req.url);
                    self.answer(job.req, job.submitted, job.started, Err(e), job.net);
                }
            }
        }
    }

    /// Puts a request on a pooled connection, a new one, or the waiting queue.
    fn dispatch(&mut self, p: Pending, now: Instant) {
        // A POST never takes a kept-alive connection: one the server dropped would leave the
        // submission's fate unknown, and it is not sent twice (RFC 9112 section 9.3.1.1).
        if !p.retried && p.req.post.is_none() {
            if let Some(id) = self.take_idle(&p.req) {
                self.start(id, p, now);
                return;
            }
        }
        if self.conns.len() >= self.opts.max_connections && !self.evict_idle() {
            self.waiting.push_back(p);
            return;
        }
        self.next_uid += 1;
        let conn = match Conn::connect(&p.req, self.next_uid, &self.tls) {
            Ok(c) => c,
            Err(FetchError::Io(e)) if out_of_descriptors(&e) && !self.conns.is_empty() => {
                // The process has no descriptor left: the sockets open now are as many as it
                // can hold, so they become the limit, and the request waits for one of them
                // (an idle one is closed for it at once) rather than failing.
                log::warn!(
                    "fetch: out of file descriptors at {} sockets ({e}); keeping at most that many",
                    self.conns.len()
                );
                self.opts.max_connections = self.conns.len();
                if self.evict_idle() {
                    return self.dispatch(p, now);
                }
                self.waiting.push_front(p);
                return;
            }
            Err(e) => return self.answer(p.req, p.submitted, now, Err(e), p.net),
        };
        let entry = self.conns.vacant_entry();
        let id = entry.key();
        let conn = entry.insert(conn);
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(e) = self
            .registry
            .register(&mut conn.stream, Token(id), interest)
        {
            self.conns.remove(id);
            return self.answer(p.req, p.submitted, now, Err(FetchError::Io(e)), p.net);
        }
        // Relaxed: a counter, written by this thread only.
        self.shared.opened.fetch_add(1, Ordering::Relaxed);
        self.count_open();
        self.start(id, p, now);
    }

    /// Publishes the open-socket gauges.
    fn count_open(&self) {
        let open = self.conns.len();
        // Relaxed: gauges read for statistics only.
        self.shared.open.store(open, Ordering::Relaxed);
        self.shared.peak.fetch_max(open, Ordering::Relaxed);
    }

    fn start(&mut self, id: usize, p: Pending, now: Instant) {
        let mut job = Job::new(p.req, p.submitted, p.retried, now);
        job.net = p.net;
        let Some(conn) = self.conns.get_mut(id) else {
            return;
        };
        // Relaxed: see `Fetcher::keep_wire`.
        let keep_wire = self.shared.keep_wire.load(Ordering::Relaxed);
        if !conn.has_buf() {
            conn.give_buf(self.spare_bufs.pop().unwrap_or_else(Conn::new_buf));
        }
        let step = conn.start(job, &self.opts.user_agent, keep_wire);
        self.after(id, step);
    }

    /// Hands free sockets to waiting requests, first come first served.
    fn pump_waiting(&mut self, now: Instant) {
        while let Some(p) = self.waiting.front() {
            let free = self.conns.len() < self.opts.max_connections;
            if !free
                && !self.has_idle_for(&p.req)
                && !self.idle_order.iter().any(|m| self.is_idle(m))
            {
                return;
            }
            let Some(p) = self.waiting.pop_front() else {
                return;
            };
            self.dispatch(p, now);
        }
    }

    fn has_idle_for(&self, req: &FetchRequest) -> bool {
        let host = req.url.host_str().unwrap_or_default();
        let key = idle_key(req.url.scheme() == "https", req.addr, host);
        self.idle.get(&key).is_some_and(|ids| {
            ids.iter()
                .any(|&id| self.conns.get(id).is_some_and(|c| &*c.host == host))
        })
    }

    /// Takes the most recently used idle connection of the request's key.
    fn take_idle(&mut self, req: &FetchRequest) -> Option<usize> {
        let host = req.url.host_str().unwrap_or_default();
        let ids = self
            .idle
            .get_mut(&idle_key(req.url.scheme() == "https", req.addr, host))?;
        let i = ids
            .iter()
            .rposition(|&id| self.conns.get(id).is_some_and(|c| &*c.host == host))?;
        let id = ids.remove(i);
        if let Some(conn) = self.conns.get_mut(id) {
            conn.phase = Phase::Busy; // its idle mark is stale from here on
        }
        Some(id)
    }

    fn is_idle(&self, m: &IdleMark) -> bool {
        self.conns
            .get(m.id)
            .is_some_and(|c| c.uid == m.uid && c.phase == Phase::Idle && c.idle_gen == m.idle_gen)
    }

    /// Closes the oldest idle connection (of any key). False when there is none.
    fn evict_idle(&mut self) -> bool {
        while let Some(m) = self.idle_order.pop_front() {
            if self.is_idle(&m) {
                self.close(m.id);
                return true;
            }
        }
        false
    }

    /// Closes idle connections past the idle timeout.
    fn expire_idle(&mut self, now: Instant) {
        while let Some(m) = self.idle_order.front() {
            if !self.is_idle(m) {
                self.idle_order.pop_front();
            } else if m.since + self.opts.idle_timeout <= now {
                let id = m.id;
                self.idle_order.pop_front();
                self.close(id);
            } else {
                return;
            }
        }
    }

    /// Drops stale idle marks once they outnumber the connections.
    fn purge_idle_marks(&mut self) {
        if self.idle_order.len() > 2 * self.conns.len() + 64 {
            let mut order = std::mem::take(&mut self.idle_order);
            order.retain(|m| self.is_idle(m));
            self.idle_order = order;
        }
    }

    fn close(&mut self, id: usize) {
        let Some(mut conn) = self.conns.try_remove(id) else {
            return;
        };
        self.spare_bufs.extend(conn.take_buf());
        self.count_open();
        if let Err(e) = self.registry.deregister(&mut conn.stream) {
            log::debug!("fetch: deregistering a socket to {}: {e}", conn.addr);
        }
        if conn.phase == Phase::Idle {
            let key = idle_key(conn.https, conn.addr, &conn.host);
            if let Some(ids) = self.idle.get_mut(&key) {
                ids.retain(|&i| i != id);
                if ids.is_empty() {
                    self.idle.remove(&key);
                }
            }
        }
    }

    /// Makes sure the connection's current deadline has a heap entry at or before it.
    fn arm(&mut self, id: usize) {
        let Some(conn) = self.conns.get_mut(id) else {
            return;
        };
        let Some(at) = conn.deadline() else { return };
        if conn.armed_at.is_none_or(|armed| at < armed) {
            conn.armed_at = Some(at);
            self.timers.push(Reverse((at, id, conn.uid)));
        }
    }

    fn fire_timers(&mut self, now: Instant) {
        while let Some(&Reverse((at, id, uid))) = self.timers.peek() {
            if at > now {
                return;
            }
            self.timers.pop();
            let Some(conn) = self.conns.get_mut(id) else {
                continue;
            };
            if conn.uid != uid || conn.armed_at != Some(at) {
                continue; // superseded by an earlier entry, or the slot was recycled
            }
            conn.armed_at = None;
            let Some(deadline) = conn.deadline() else {
                continue;
            };
            if deadline > now {
                self.arm(id);
                continue;
            }
            let Some(job) = &conn.job else { continue };
            let e = if conn.phase == Phase::Connecting && job.connect_deadline <= now {
                FetchError::ConnectTimeout
            } else {
                FetchError::Timeout
            };
            self.after(id, Step::Failed(e));
        }
    }

    /// Sends a request's result.
    fn answer(
        &self,
        req: FetchRequest,
        submitted: Instant,
        started: Instant,
        result: Result<Response, FetchError>,
        net: (u64, u64),
    ) {
        let now = Instant::now();
        let res = FetchResult {
            id: req.id,
            url: req.url,
            result,
            started,
            elapsed: now.saturating_duration_since(started),
            queued: started.saturating_duration_since(submitted),
            net_read: net.0,
            net_written: net.1,
        };
        if self.done.send(res).is_err() {
            log::debug!(
                "fetch: result of request {} dropped: nobody reads results",
                req.id
            );
        }
        // Relaxed: a gauge (see `Fetcher::in_flight`); decremented after the result left.
        self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    /// On stop: every request not answered yet gets `Shutdown`.
    fn answer_all_shutdown(&mut self) {
        let now = Instant::now();
        let jobs: Vec<(Job, (u64, u64))> = self
            .conns
            .drain()
            .filter_map(|mut c| {
                let net = c.take_net();
                c.job.take().map(|j| (j, net))
            })
            .collect();
        self.count_open();
        for (job, (r, w)) in jobs {
            let net = (job.net.0 + r, job.net.1 + w);
            let e = Err(FetchError::Shutdown);
            self.answer(job.req, job.submitted, job.started, e, net);
        }
        for p in std::mem::take(&mut self.waiting) {
            self.answer(p.req, p.submitted, now, Err(FetchError::Shutdown), p.net);
        }
        while let Ok(s) = self.submitted.try_recv() {
            let e = Err(FetchError::Shutdown);
            self.answer(s.req, s.at, now, e, (0, 0));
        }
    }
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("conns", &self.conns.len())
            .field("waiting", &self.waiting.len())
            .field("timers", &self.timers.len())
            .finish_non_exhaustive()
    }
}
