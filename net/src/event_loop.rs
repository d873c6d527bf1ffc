//! The event loop: one thread, one `mio::Poll`, fixed tokens for the waker and the listeners,
//! a slab of connections whose keys are their tokens.
//!
//! Each turn: poll (sleeping until the next timer at most), handle socket events, carry out the
//! commands that handles queued, flush the connections those commands gave data to (one
//! coalesced write each), fire due timers, pass on events held back by a full channel, and
//! resume reads and accepts that were paused or cut short.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use mio::event::Event as MioEvent;
use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Registry, Token, Waker};
use slab::Slab;

use crate::backoff::{Backoff, BackoffPolicy};
use crate::builder::LoopError;
use crate::conn::{Conn, ReadStatus, State};
use crate::event::{CloseReason, Event, IoFailure};
use crate::framing::Framing;
use crate::handle::Command;
use crate::ids::{ConnId, LinkId, ListenerId};
use crate::io_util::{interrupted, would_block};
use crate::limits::{InRole, PortLimits};
use crate::reactor::{Reactor, Turn, WAKER};
use crate::sendq::Flushed;
use crate::timer::{TimerKey, Timers};

mod upkeep;

/// Most commands carried out per turn, so a flood of sends cannot starve reads.
const MAX_COMMANDS: usize = 16 << 10;
/// How often the loop checks whether a full event channel has drained.
const PAUSE_POLL: Duration = Duration::from_millis(2);
/// After a peer finished sending: how long the role must have been silent on the connection
/// (holding none of its messages, nothing queued) before it is closed.
const FINISH_QUIET: Duration = Duration::from_millis(500);
/// Wait before accepting again after an accept error (out of file descriptors, say).
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// The token of listener `i`.
pub(crate) fn listener_token(i: usize) -> Token {
    Token(usize::MAX - 1 - i)
}

/// Loop settings from the builder.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) backoff: BackoffPolicy,
    pub(crate) connect_timeout: Duration,
    pub(crate) linger: Duration,
    pub(crate) limits: PortLimits,
    /// Answer what a peer sent before it finished sending (see `Builder::answer_half_closed`).
    pub(crate) answer_half_closed: bool,
    /// TLS on accepted connections (see `Builder::tls`).
    pub(crate) tls: Option<Arc<rustls::ServerConfig>>,
}

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener {
    pub(crate) socket: TcpListener,
    pub(crate) addr: SocketAddr,
    /// Accepting stopped before `WouldBlock` (event channel full): resume when it drains.
    pub(crate) pending: bool,
}

/// An outgoing link the loop keeps up.
#[derive(Debug)]
struct Link {
    addr: SocketAddr,
    backoff: Backoff,
    /// The connection (connecting or up), if any.
    conn: Option<ConnId>,
}

/// A built event loop, ready to [`run`](EventLoop::run) on the current thread. Most callers use
/// [`Builder::spawn`](crate::Builder::spawn) instead, which runs it on a thread of its own.
#[derive(Debug)]
pub struct EventLoop<F> {
    reactor: Reactor,
    state: Loop<F>,
}

impl<F: Framing> EventLoop<F> {
    /// The bound addresses of the listeners, in `listen` order (the real port of a `:0` bind).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.state.listeners.iter().map(|l| l.addr).collect()
    }

    /// Runs until [`Handle::shutdown`](crate::Handle::shutdown), until every handle is dropped,
    /// or until the event receiver is dropped. Fails only if `mio::Poll` itself fails.
    pub fn run(self) -> Result<(), LoopError> {
        let EventLoop {
            mut reactor,
            mut state,
        } = self;
        reactor.run(&mut state).map_err(|e| {
            log::error!("event loop: poll failed: {e}");
            state.shutdown_all();
            LoopError::Poll(e)
        })
    }
}

/// The message loop's state: the [`Turn`] the reactor runs.
#[derive(Debug)]
pub(crate) struct Loop<F> {
    /// A clone of the reactor's registry, to register sockets while it runs this loop.
    registry: Registry,
    listeners: Vec<Listener>,
    conns: Slab<Conn<F>>,
    links: HashMap<LinkId, Link>,
    timers: Timers,
    commands: Receiver<Command>,
    /// The reactor's waker, handed to what the role holds so a drop can wake the loop.
    waker: Arc<Waker>,
    /// Shared with the handles; see `Handle::command` for the protocol.
    wake_pending: Arc<AtomicBool>,
    events: Sender<Event>,
    /// Events the channel had no room for, in order. While any wait here, the loop reads and
    /// accepts nothing (backpressure): no data is dropped and the loop itself never blocks.
    outbox: VecDeque<Event>,
    /// Connections to read again: cut short by the budget, or paused by backpressure.
    read_ready: Vec<ConnId>,
    /// Connections that commands gave data to this turn.
    dirty: Vec<ConnId>,
    /// Connections not read until the role works through their messages (see `limits`).
    held_back: Vec<ConnId>,
    framing: F,
    config: Config,
    serial: u32,
    /// Connections accepted or opened ([`Turn::opened`]).
    opened: u64,
    more_commands: bool,
    stopping: bool,
    expired: Vec<TimerKey>,
}

impl<F: Framing> EventLoop<F> {
    /// Assembles a loop from the builder's parts (listeners already registered on `reactor`).
    pub(crate) fn from_parts(
        reactor: Reactor,
        listeners: Vec<Listener>,
        commands: Receiver<Command>,
        wake_pending: Arc<AtomicBool>,
        events: Sender<Event>,
        framing: F,
        config: Config,
    ) -> io::Result<Self> {
        let mut timers = Timers::default();
        if let Some(period) = config.limits.sweep_period() {
            timers.set(TimerKey::IdleSweep, Instant::now() + period, Some(period));
        }
        let registry = reactor.registry().try_clone()?;
        let waker = reactor.waker();
        Ok(EventLoop {
            reactor,
            state: Loop {
                registry,
                listeners,
                conns: Slab::new(),
                links: HashMap::new(),
                timers,
                commands,
                waker,
                wake_pending,
                events,
                outbox: VecDeque::new(),
                read_ready: Vec::new(),
                dirty: Vec::new(),
                held_back: Vec::new(),
                framing,
                config,
                serial: 0,
                opened: 0,
                more_commands: false,
                stopping: false,
                expired: Vec::new(),
            },
        })
    }
}

impl<F: Framing> Turn for Loop<F> {
    fn poll_timeout(&mut self) -> Option<Duration> {
        self.next_timeout()
    }

    fn on_event(&mut self, ev: &MioEvent) {
        self.dispatch(ev);
    }

    /// Carries out the commands, flushes what they queued, fires due timers, passes on held
    /// events and resumes paused reads; stops once shut down.
    fn connections(&self) -> usize {
        self.conns.len()
    }

    fn opened(&self) -> u64 {
        self.opened
    }

    fn after_events(&mut self) -> ControlFlow<()> {
        self.drain_commands();
        self.flush_dirty();
        self.expire_timers();
        self.flush_outbox();
        if !self.paused() {
            self.resume();
        }
        if self.stopping {
            self.shutdown_all();
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

impl<F: Framing> Loop<F> {
    fn next_timeout(&mut self) -> Option<Duration> {
        let paused = self.paused();
        let resumable = !self.read_ready.is_empty() || self.listeners.iter().any(|l| l.pending);
        if self.stopping || self.more_commands || (!paused && resumable) {
            return Some(Duration::ZERO);
        }
        let now = Instant::now();
        let timer = self
            .timers
            .next_deadline()
            .map(|at| at.saturating_duration_since(now));
        if paused {
            Some(timer.map_or(PAUSE_POLL, |t| t.min(PAUSE_POLL)))
        } else {
            timer
        }
    }

    fn dispatch(&mut self, ev: &MioEvent) {
        let token = ev.token();
        if token == WAKER {
            return; // Commands are drained every turn.
        }
        let from_top = usize::MAX - 1 - token.0;
        if token.0 < WAKER.0 && from_top < self.listeners.len() {
            self.accept(from_top);
            return;
        }
        let Some(conn) = self.conns.get_mut(token.0) else {
            return; // A connection closed earlier in this batch of events.
        };
        let id = conn.id;
        if conn.state == State::Connecting {
            match conn.finish_connect() {
                Ok(false) => return,
                Ok(true) => self.link_up(id),
                Err(e) => return self.attempt_failed(id, e),
            }
        }
        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
            self.read_conn(id, !(ev.is_read_closed() || ev.is_error()));
        }
        if ev.is_writable() || ev.is_write_closed() || ev.is_error() {
            self.write_conn(id);
        }
    }

    // ---- connections -------------------------------------------------------------------

    fn conn_mut(&mut self, id: ConnId) -> Option<&mut Conn<F>> {
        self.conns.get_mut(id.key()).filter(|c| c.id == id)
    }

    fn insert_conn(
        &mut self,
        mut stream: TcpStream,
        peer: SocketAddr,
        state: State,
        link: Option<LinkId>,
    ) -> io::Result<ConnId> {
        let entry = self.conns.vacant_entry();
        let key = entry.key();
        if key >= usize::MAX - 1 - self.listeners.len() {
            return Err(io::Error::other("connection table full"));
        }
        self.serial = self.serial.wrapping_add(1);
        let id = ConnId::new(key, self.serial)
            .ok_or_else(|| io::Error::other("connection table full"))?;
        self.registry.register(
            &mut stream,
            Token(key),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let tls = crate::tls::session(self.config.tls.as_ref(), link)?;
        let in_role = InRole::new(self.config.limits.max_in_role, Arc::clone(&self.waker));
        entry.insert(
            Conn::new(id, stream, peer, state, link, self.framing.clone(), in_role).with_tls(tls),
        );
        self.opened += 1;
        Ok(id)
    }

    fn read_conn(&mut self, id: ConnId, short_drains: bool) {
        let paused = self.paused();
        let answer_half_closed = self.config.answer_half_closed;
        let max_out = self.config.limits.max_queued_output;
        let Some(conn) = self.conn_mut(id) else {
            return;
        };
        if paused {
            // Backpressure: leave the bytes in the socket until the channel drains.
            if !conn.read_ready {
                conn.read_ready = true;
                self.read_ready.push(id);
            }
            return;
        }
        if conn.link.is_none() && conn.state == State::Open && conn.queued() > max_out {
            // The peer is not reading what we send: leave its input in the socket until its
            // output drains (`write_conn` resumes it), so it costs no more memory. Only accepted
            // connections are held back: on our own outgoing links we always read, so two
            // roles that both stop reading each other can never wait on each other forever.
            if !conn.throttled {
                conn.throttled = true;
                log::debug!(
                    "{id} ({}): {} bytes queued unread; not reading it until they drain",
                    conn.peer,
                    conn.queued()
                );
            }
            return;
        }
        if conn.state == State::Open && conn.in_role.over_cap() {
            // The role has not worked through what this peer sent: read the others meanwhile.
            // Dropping the batches wakes the loop (see `limits::InRoleGuard`).
            if !conn.held_back {
                conn.held_back = true;
                self.held_back.push(id);
            }
            return;
        }
        let out = conn.read(short_drains);
        let (was, now) = (conn.held, conn.held_now());
        if was != now {
            conn.held = now;
            let total = self.config.limits.partial.update(was, now);
            if total > self.config.limits.partial.cap() {
                self.enforce_partial_budget();
            }
        }
        if let Some(batch) = out.batch {
            self.emit(Event::Frames(batch));
        }
        match out.status {
            ReadStatus::Drained => {}
            ReadStatus::More => {
                if let Some(conn) = self.conn_mut(id) {
                    if !conn.read_ready {
                        conn.read_ready = true;
                        self.read_ready.push(id);
                    }
                }
            }
            ReadStatus::Finished if !answer_half_closed => {
                self.close_conn(id, CloseReason::PeerClosed)
            }
            ReadStatus::Finished => {
                log::debug!("{id}: the peer finished sending; answering what it sent");
                let at = Instant::now() + FINISH_QUIET;
                self.timers.set(TimerKey::Conn(id), at, None);
            }
            ReadStatus::Close(reason) => self.close_conn(id, reason),
        }
    }

    fn write_conn(&mut self, id: ConnId) {
        let resume_at = self.config.limits.max_queued_output / 2;
        let Some(conn) = self.conn_mut(id) else {
            return;
        };
        let was_closing = conn.state == State::Closing;
        match conn.flush() {
            Ok(Flushed::Empty) if was_closing => {
                // Now draining: a FIN that came while we were not reading raised no new event,
                // so look for it now.
                self.read_conn(id, false);
            }
            Ok(_) => {
                if conn.throttled && conn.queued() <= resume_at {
                    conn.throttled = false;
                    if !conn.read_ready {
                        conn.read_ready = true;
                        self.read_ready.push(id);
                    }
                }
            }
            Err(e) if conn.state == State::Finishing => {
                // The peer closed both ways: nothing more can reach it.
                log::debug!("{id}: answers after the peer closed not delivered: {e}");
                self.close_conn(id, CloseReason::PeerClosed)
            }
            Err(e) => self.close_conn(id, CloseReason::Io(e.into())),
        }
    }

    /// Removes a connection that the role knows about and tells it so.
    fn close_conn(&mut self, id: ConnId, reason: CloseReason) {
        let Some(conn) = self.remove_conn(id) else {
            return;
        };
        let peer = conn.peer;
        upkeep::log_close(peer, id, &reason);
        self.emit(Event::Closed {
            conn: id,
            link: conn.link,
            reason,
            unsent: conn.sendq.unsent(),
        });
        if let Some(link) = conn.link {
            self.schedule_reconnect(link, id);
        }
    }

    /// Takes a connection out of the slab and the poll, with its deadline.
    fn remove_conn(&mut self, id: ConnId) -> Option<Conn<F>> {
        self.conn_mut(id)?;
        // `conn_mut` just found this key occupied, so `remove` cannot panic.
        let mut conn = self.conns.remove(id.key());
        let _ = self.registry.deregister(&mut conn.stream);
        self.timers.cancel(TimerKey::Conn(id));
        if conn.held > 0 {
            self.config.limits.partial.update(conn.held, 0);
            conn.held = 0;
        }
        Some(conn)
    }

    fn on_conn_deadline(&mut self, id: ConnId) {
        let Some(conn) = self.conn_mut(id) else {
            return;
        };
        match conn.state {
            State::Connecting => self.attempt_failed(
                id,
                io::Error::new(io::ErrorKind::TimedOut, "connect timed out"),
            ),
            State::Closing | State::Draining => self.close_conn(id, CloseReason::LingerExpired),
            State::Finishing => self.try_finish(id),
            State::Open => {}
        }
    }

    fn begin_close(&mut self, id: ConnId) {
        let linger = self.config.linger;
        let Some(conn) = self.conn_mut(id) else {
            log::debug!("close: {id} is already gone");
            return;
        };
        if !matches!(conn.state, State::Open | State::Finishing) {
            return;
        }
        log::debug!("{id}: closing at the role's request once its queue is written");
        conn.begin_close();
        self.timers
            .set(TimerKey::Conn(id), Instant::now() + linger, None);
        self.write_conn(id);
    }

    // ---- listeners ---------------------------------------------------------------------

    fn accept(&mut self, i: usize) {
        loop {
            if self.paused() {
                self.listeners[i].pending = true;
                return;
            }
            let listener = &self.listeners[i];
            match listener.socket.accept() {
                Ok((stream, peer)) => {
                    // Small messages should leave at once; coalescing is the send queue's job.
                    let _ = stream.set_nodelay(true);
                    match self.insert_conn(stream, peer, State::Open, None) {
                        Ok(conn) => self.emit(Event::Accepted {
                            conn,
                            listener: ListenerId(i),
                            peer,
                        }),
                        Err(e) => log::warn!("dropping {peer}: cannot register: {e}"),
                    }
                }
                Err(e) if would_block(&e) => return,
                Err(e) if interrupted(&e) || e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    log::warn!("{}: accept failed: {e}; retrying shortly", listener.addr);
                    let at = Instant::now() + ACCEPT_RETRY;
                    self.timers.set(TimerKey::AcceptRetry(i), at, None);
                    return;
                }
            }
        }
    }

    // ---- links -------------------------------------------------------------------------

    fn start_attempt(&mut self, link: LinkId) {
        let Some(l) = self.links.get(&link) else {
            return;
        };
        if l.conn.is_some() {
            return;
        }
        let addr = l.addr;
        let id = TcpStream::connect(addr)
            .and_then(|stream| self.insert_conn(stream, addr, State::Connecting, Some(link)));
        match id {
            Ok(id) => {
                if let Some(l) = self.links.get_mut(&link) {
                    l.conn = Some(id);
                }
                let at = Instant::now() + self.config.connect_timeout;
                self.timers.set(TimerKey::Conn(id), at, None);
            }
            Err(e) => self.link_attempt_failed(link, addr, e),
        }
    }

    /// A connecting socket failed: drop it (the role never saw it) and schedule a retry.
    fn attempt_failed(&mut self, id: ConnId, e: io::Error) {
        let Some(conn) = self.remove_conn(id) else {
            return;
        };
        if let Some(link) = conn.link {
            self.link_attempt_failed(link, conn.peer, e);
        }
    }

    fn link_attempt_failed(&mut self, link: LinkId, addr: SocketAddr, e: io::Error) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        l.conn = None;
        let retry_in = l.backoff.next_delay();
        log::debug!("{link}: connecting to {addr} failed: {e}; retrying in {retry_in:?}");
        self.timers
            .set(TimerKey::Reconnect(link), Instant::now() + retry_in, None);
        self.emit(Event::ConnectFailed {
            link,
            addr,
            error: IoFailure::from(&e),
            retry_in,
        });
    }

    fn link_up(&mut self, id: ConnId) {
        self.timers.cancel(TimerKey::Conn(id));
        let Some(conn) = self.conn_mut(id) else {
            return;
        };
        let peer = conn.peer;
        let Some(link) = conn.link else {
            return;
        };
        if let Some(l) = self.links.get_mut(&link) {
            l.backoff.reset();
        }
        log::debug!("{link}: connected to {peer} ({id})");
        self.emit(Event::Connected {
            conn: id,
            link,
            peer,
        });
    }

    fn schedule_reconnect(&mut self, link: LinkId, lost: ConnId) {
        let Some(l) = self.links.get_mut(&link) else {
            return; // Disconnected: let it go.
        };
        if l.conn != Some(lost) {
            return;
        }
        l.conn = None;
        let retry_in = l.backoff.next_delay();
        log::info!(
            "{link}: connection to {} lost; reconnecting in {retry_in:?}",
            l.addr
        );
        self.timers
            .set(TimerKey::Reconnect(link), Instant::now() + retry_in, None);
    }

    fn disconnect(&mut self, link: LinkId) {
        self.timers.cancel(TimerKey::Reconnect(link));
        let Some(l) = self.links.remove(&link) else {
            return;
        };
        let Some(id) = l.conn else {
            return;
        };
        match self.conn_mut(id).map(|c| c.state) {
            Some(State::Connecting) => {
                // The role never saw this connection: drop it without an event.
                self.remove_conn(id);
            }
            Some(_) => self.begin_close(id),
            None => {}
        }
    }

    // ---- commands, timers, events ------------------------------------------------------

    fn drain_commands(&mut self) {
        // Acquire pairs with the handles' Release; see `Handle::command`.
        self.wake_pending.swap(false, Ordering::AcqRel);
        self.more_commands = false;
        for _ in 0..MAX_COMMANDS {
            if self.stopping {
                return;
            }
            match self.commands.try_recv() {
                Ok(c) => self.command(c),
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    log::debug!("event loop: every handle is gone; shutting down");
                    self.stopping = true;
                    return;
                }
            }
        }
        self.more_commands = true;
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Send {
                conn: id,
                priority,
                bytes,
            } => {
                let Some(conn) = self.conn_mut(id) else {
                    return log::debug!("send: {id} is gone; dropped");
                };
                if !conn.queue(priority, bytes) {
                    return log::debug!("send: {id} is closing; dropped");
                }
                if !conn.dirty {
                    conn.dirty = true;
                    self.dirty.push(id);
                }
            }
            Command::Close(id) => self.begin_close(id),
            Command::Connect(link, addr) => {
                let backoff = Backoff::new(self.config.backoff);
                self.links.insert(
                    link,
                    Link {
                        addr,
                        backoff,
                        conn: None,
                    },
                );
                self.start_attempt(link);
            }
            Command::Disconnect(link) => self.disconnect(link),
            Command::SetTimer { id, after, repeat } => {
                let at = Instant::now() + after;
                self.timers.set(TimerKey::User(id), at, repeat);
            }
            Command::CancelTimer(id) => self.timers.cancel(TimerKey::User(id)),
            Command::Shutdown => self.stopping = true,
        }
    }

    fn flush_dirty(&mut self) {
        let dirty = std::mem::take(&mut self.dirty);
        for &id in &dirty {
            if let Some(conn) = self.conn_mut(id) {
                conn.dirty = false;
                self.write_conn(id);
            }
        }
        // Keep the allocation for the next turn.
        self.dirty = dirty;
        self.dirty.clear();
    }

    fn expire_timers(&mut self) {
        let mut expired = std::mem::take(&mut self.expired);
        self.timers.expire(Instant::now(), &mut expired);
        for key in expired.drain(..) {
            match key {
                TimerKey::User(id) => self.emit(Event::Timer(id)),
                TimerKey::Reconnect(link) => self.start_attempt(link),
                TimerKey::Conn(id) => self.on_conn_deadline(id),
                TimerKey::AcceptRetry(i) => self.accept(i),
                TimerKey::IdleSweep => self.sweep_idle(),
            }
        }
        self.expired = expired;
    }

    fn paused(&self) -> bool {
        !self.outbox.is_empty()
    }

    /// Sends an event, or holds it back (in order) while the channel is full.
    fn emit(&mut self, ev: Event) {
        if !self.outbox.is_empty() {
            self.outbox.push_back(ev);
            return;
        }
        match self.events.try_send(ev) {
            Ok(()) => {}
            Err(TrySendError::Full(ev)) => self.outbox.push_back(ev),
            Err(TrySendError::Disconnected(_)) => self.receiver_gone(),
        }
    }

    fn flush_outbox(&mut self) {
        while let Some(ev) = self.outbox.pop_front() {
            match self.events.try_send(ev) {
                Ok(()) => {}
                Err(TrySendError::Full(ev)) => {
                    self.outbox.push_front(ev);
                    return;
                }
                Err(TrySendError::Disconnected(_)) => return self.receiver_gone(),
            }
        }
    }

    fn receiver_gone(&mut self) {
        if !self.stopping {
            log::debug!("event loop: the event receiver is gone; shutting down");
        }
        self.stopping = true;
        self.outbox.clear();
    }

    /// Picks up reads and accepts that were paused or cut short.
    fn resume(&mut self) {
        for i in 0..self.listeners.len() {
            if std::mem::take(&mut self.listeners[i].pending) {
                self.accept(i);
            }
        }
        if !self.held_back.is_empty() {
            let mut held = std::mem::take(&mut self.held_back);
            held.retain(
                |&id| match self.conns.get_mut(id.key()).filter(|c| c.id == id) {
                    Some(conn) if conn.in_role.over_cap() => true,
                    Some(conn) => {
                        conn.held_back = false;
                        if !conn.read_ready {
                            conn.read_ready = true;
                            self.read_ready.push(id);
                        }
                        false
                    }
                    None => false,
                },
            );
            held.append(&mut self.held_back);
            self.held_back = held;
        }
        let ready = std::mem::take(&mut self.read_ready);
        for &id in &ready {
            if let Some(conn) = self.conn_mut(id) {
                conn.read_ready = false;
                self.read_conn(id, false);
            }
        }
    }

    /// Gives every connection one non-blocking chance to write what is queued, reports it
    /// closed while the channel has room, and drops everything.
    fn shutdown_all(&mut self) {
        self.flush_outbox();
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            let Some(mut conn) = self.conns.try_remove(key) else {
                continue;
            };
            let _ = self.registry.deregister(&mut conn.stream);
            if conn.state == State::Connecting {
                continue; // The role never saw it.
            }
            let _ = conn.flush();
            let closed = Event::Closed {
                conn: conn.id,
                link: conn.link,
                reason: CloseReason::Shutdown,
                unsent: conn.sendq.unsent(),
            };
            if self.outbox.is_empty() {
                let _ = self.events.try_send(closed);
            }
        }
        self.links.clear();
        self.outbox.clear();
    }
}
