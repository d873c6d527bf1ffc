//! Setting up an event loop: listeners, framing, channel size, reconnect and close timing.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crawlfleet_core::marshal::Limits;
use crossbeam_channel::Receiver;
use mio::net::TcpListener;
use mio::Interest;

use crate::backoff::BackoffPolicy;
use crate::event::Event;
use crate::event_loop::{listener_token, Config, EventLoop, Listener};
use crate::framing::{Framing, FscmtFraming};
use crate::handle::{Handle, Shared, WakeOnDrop};
use crate::limits::{PartialBudget, PortLimits};
use crate::reactor::Reactor;

/// Readiness events taken per poll.
const EVENT_CAPACITY: usize = 1024;

/// The event channel's default capacity, in events (a `Frames` event holds up to 256 KiB).
pub const DEFAULT_EVENT_CAPACITY: usize = 1024;

/// A listener to set up: an address to bind, or a socket bound already.
#[derive(Debug)]
enum ListenOn {
    Addr(SocketAddr),
    Std(std::net::TcpListener),
}

/// Configures and starts an [`EventLoop`]; from [`EventLoop::builder`].
#[derive(Debug)]
pub struct Builder<F> {
    listen: Vec<ListenOn>,
    framing: F,
    event_capacity: Option<usize>,
    config: Config,
    thread_name: String,
}

impl EventLoop<FscmtFraming> {
    /// A builder with FSCMT framing and default limits, no listeners, a bounded event channel
    /// of [`DEFAULT_EVENT_CAPACITY`], 50 ms-to-5 s reconnect backoff, a 10 s connect timeout
    /// and a 5 s linger.
    pub fn builder() -> Builder<FscmtFraming> {
        Builder {
            listen: Vec::new(),
            framing: FscmtFraming::default(),
            event_capacity: Some(DEFAULT_EVENT_CAPACITY),
            config: Config {
                backoff: BackoffPolicy::default(),
                connect_timeout: Duration::from_secs(10),
                linger: Duration::from_secs(5),
                limits: PortLimits::default(),
                answer_half_closed: false,
                tls: None,
            },
            thread_name: "crawlfleet-net".to_owned(),
        }
    }
}

impl Builder<FscmtFraming> {
    /// Sets the FSCMT frame limits (maximum body size and marshal nesting depth).
    pub fn limits(mut self, limits: Limits) -> Self {
        self.framing.limits = limits;
        self
    }
}

impl<F: Framing> Builder<F> {
    /// Adds a listener on `addr` (port 0 picks a free port; see
    /// [`Spawned::local_addrs`]). Its [`ListenerId`](crate::ListenerId) is its index among the
    /// listeners, in call order.
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen.push(ListenOn::Addr(addr));
        self
    }

    /// Adds a listener on a socket bound already (set non-blocking here).
    pub fn listen_std(mut self, listener: std::net::TcpListener) -> Self {
        self.listen.push(ListenOn::Std(listener));
        self
    }

    /// Uses another framing (each connection gets its own clone).
    pub fn framing<G: Framing>(self, framing: G) -> Builder<G> {
        Builder {
            listen: self.listen,
            framing,
            event_capacity: self.event_capacity,
            config: self.config,
            thread_name: self.thread_name,
        }
    }

    /// Bounds the event channel to `capacity` events (`None`: unbounded). While it is full the
    /// loop stops reading and accepting, leaving data in the sockets, so a slow role slows its
    /// peers down instead of losing data or growing memory.
    pub fn event_capacity(mut self, capacity: Option<usize>) -> Self {
        self.event_capacity = capacity;
        self
    }

    /// Sets the reconnect backoff of outgoing links.
    pub fn backoff(mut self, policy: BackoffPolicy) -> Self {
        self.config.backoff = policy;
        self
    }

    /// Sets how long a connection attempt may take before it counts as failed.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.config.connect_timeout = timeout;
        self
    }

    /// Speaks TLS on every accepted connection, with `config` (rustls; its certificate and
    /// key): the role sees the plaintext messages. Outgoing links stay plain.
    pub fn tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.config.tls = Some(config);
        self
    }

    /// Sets how long a graceful close may take to write what is queued and see the peer close.
    pub fn linger(mut self, linger: Duration) -> Self {
        self.config.linger = linger;
        self
    }

    /// Sets the per-connection cap on queued output (default
    /// [`DEFAULT_MAX_QUEUED_OUTPUT`](crate::DEFAULT_MAX_QUEUED_OUTPUT)): past it the loop stops
    /// reading the connection until its queue is down to half.
    pub fn max_queued_output(mut self, bytes: usize) -> Self {
        self.config.limits.max_queued_output = bytes;
        self
    }

    /// Sets how many bytes of one connection's messages the role may hold (handed over, not yet
    /// dropped) before the loop stops reading that connection (default
    /// [`DEFAULT_MAX_IN_ROLE`](crate::DEFAULT_MAX_IN_ROLE)).
    pub fn max_in_role(mut self, bytes: usize) -> Self {
        self.config.limits.max_in_role = bytes;
        self
    }

    /// Counts partial messages against `budget` instead of the process's
    /// ([`PartialBudget::process`]).
    pub fn partial_budget(mut self, budget: PartialBudget) -> Self {
        self.config.limits.partial = budget;
        self
    }

    /// Sets how long a partial message, an unfinished handshake or unread output may wait for
    /// a message to complete (default [`DEFAULT_IDLE_TIMEOUT`](crate::DEFAULT_IDLE_TIMEOUT);
    /// `None`: forever).
    pub fn idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.limits.idle_timeout = timeout;
        self
    }

    /// When a peer finishes sending (shuts its write side), keeps the connection open for the
    /// role's answers to what it sent, and closes it once the role holds none of its messages,
    /// everything queued is written and nothing more was queued for half a second (at the
    /// latest after the idle timeout). For request/answer ports (the duplicate server, the link
    /// store, HTTP). Off, the connection closes at the peer's end of stream, as a long-lived
    /// link between two roles wants (the role learns at once that its peer is gone).
    pub fn answer_half_closed(mut self, yes: bool) -> Self {
        self.config.answer_half_closed = yes;
        self
    }

    /// Names the thread [`Builder::spawn`] starts.
    pub fn thread_name(mut self, name: impl Into<String>) -> Self {
        self.thread_name = name.into();
        self
    }

    /// Binds the listeners and builds the loop, to be run on the caller's thread.
    pub fn build(self) -> Result<(EventLoop<F>, Handle, Receiver<Event>), BuildError> {
        let reactor = Reactor::new(EVENT_CAPACITY, &self.thread_name).map_err(BuildError::Poll)?;
        let mut listeners = Vec::with_capacity(self.listen.len());
        for (i, on) in self.listen.into_iter().enumerate() {
            let (mut socket, wanted) = match on {
                ListenOn::Addr(addr) => {
                    let l = crate::reserve::bind(addr).map_err(|e| BuildError::Bind(addr, e))?;
                    l.set_nonblocking(true).map_err(BuildError::Poll)?;
                    (TcpListener::from_std(l), Some(addr))
                }
                ListenOn::Std(l) => {
                    l.set_nonblocking(true).map_err(BuildError::Poll)?;
                    (TcpListener::from_std(l), None)
                }
            };
            let addr = socket.local_addr().map_err(BuildError::Poll)?;
            reactor
                .registry()
                .register(&mut socket, listener_token(i), Interest::READABLE)
                .map_err(|e| BuildError::Bind(wanted.unwrap_or(addr), e))?;
            listeners.push(Listener {
                socket,
                addr,
                pending: false,
            });
        }
        let waker = reactor.waker();
        let (cmd_tx, cmd_rx) = crossbeam_channel::unbounded();
        let (ev_tx, ev_rx) = match self.event_capacity {
            Some(cap) => crossbeam_channel::bounded(cap.max(1)),
            None => crossbeam_channel::unbounded(),
        };
        let wake_pending = Arc::new(AtomicBool::new(false));
        let handle = Handle {
            shared: Arc::new(Shared {
                commands: cmd_tx,
                waker: WakeOnDrop(Arc::clone(&waker)),
                wake_pending: Arc::clone(&wake_pending),
                next_link: AtomicU64::new(1),
            }),
        };
        let lp = EventLoop::from_parts(
            reactor,
            listeners,
            cmd_rx,
            wake_pending,
            ev_tx,
            self.framing,
            self.config,
        )
        .map_err(BuildError::Poll)?;
        Ok((lp, handle, ev_rx))
    }

    /// Binds the listeners and runs the loop on a new thread.
    pub fn spawn(self) -> Result<Spawned, BuildError> {
        let name = self.thread_name.clone();
        let (lp, handle, events) = self.build()?;
        let local_addrs = lp.local_addrs();
        let join = std::thread::Builder::new()
            .name(name)
            .spawn(move || lp.run())
            .map_err(BuildError::Spawn)?;
        Ok(Spawned {
            handle,
            events,
            join,
            local_addrs,
        })
    }
}

/// A running loop, from [`Builder::spawn`].
#[derive(Debug)]
pub struct Spawned {
    /// Sends commands to the loop.
    pub handle: Handle,
    /// Receives the loop's events.
    pub events: Receiver<Event>,
    /// The loop's thread; it ends after [`Handle::shutdown`].
    pub join: JoinHandle<Result<(), LoopError>>,
    /// The listeners' bound addresses, in `listen` order.
    pub local_addrs: Vec<SocketAddr>,
}

/// Why a loop could not be built.
#[derive(Debug)]
pub enum BuildError {
    /// A listener could not bind (or register) its address.
    Bind(SocketAddr, io::Error),
    /// Setting up the poll, the waker or a given listener failed.
    Poll(io::Error),
    /// The loop thread could not be started.
    Spawn(io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Bind(addr, e) => write!(f, "cannot listen on {addr}: {e}"),
            BuildError::Poll(e) => write!(f, "cannot set up the event loop: {e}"),
            BuildError::Spawn(e) => write!(f, "cannot start the event loop thread: {e}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Bind(_, e) | BuildError::Poll(e) | BuildError::Spawn(e) => Some(e),
        }
    }
}

/// Why a running loop stopped with an error.
#[derive(Debug)]
pub enum LoopError {
    /// `mio::Poll::poll` failed; the loop closed every connection and stopped.
    Poll(io::Error),
}

impl fmt::Display for LoopError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoopError::Poll(e) => write!(f, "event loop poll failed: {e}"),
        }
    }
}

impl std::error::Error for LoopError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoopError::Poll(e) => Some(e),
        }
    }
}
