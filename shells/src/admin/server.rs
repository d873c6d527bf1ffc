//! The XML-RPC server of FSCADM 2.1: HTTP/1.1 POST /RPC2 on net's event loop.
//!
//! The loop cuts requests with [`HttpFraming`] (head at most 16 KiB and 64 fields, body at most
//! the configured `max_body`); a thread of this module reads them. Each request body is parsed
//! here ([`crawlfleet_core::xmlrpc::parse_call`]); a body that is not a valid `methodCall` is
//! answered at once with a fault (faultCode 1, 2.2.7), as is a call that is not one of the
//! FSCADM methods with its arguments ([`AdminCall::parse`]). A valid call goes to the role loop
//! as [`AdminMsg::Call`] over a crossbeam channel with a [`Responder`]; the role loop answers
//! through it and the reply comes back here, to be written through the loop's [`Handle`].
//! Answers leave in request order per connection, and a connection has one call at a time with
//! the role loop: a pipelined request waits for the answer to the one before it. Connections
//! are kept alive (HTTP/1.1 default, HTTP/1.0 with `Connection: keep-alive`). `Expect: 100-continue` is not answered: the client sends the
//! body after its own wait. Other paths get 404, other methods 405, a POST without
//! Content-Length 411; what the framing refuses gets its status (400, 411, 413, 431, 501: see
//! [`crawlfleet_net::http`]) and the connection is closed after the answer: its further bytes
//! are not read. The statistics tick (2.2.4.4) is a timer of the loop.
//!
//! The schedulers' server also answers `GET /metrics` and the dashboard (`/`, its files,
//! `/api/dashboard`; docs/metrics.md): the files from the binary at once, the other two as
//! pages the role loop renders ([`AdminMsg::View`]), in order with the calls; a GET of another
//! path gets 404. Every request, whatever it asks, passes this one dispatch ([`request`]).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::xmlrpc::{self, Limits, Value, FAULT_CODE};

use super::auth::{read_only_method, Access, AdminAuth};
use super::AdminCall;
use crawlfleet_net::http::{self, HttpFraming, Request};
use crawlfleet_net::{ConnId, Event, EventLoop, FrameBatch, Handle, Priority, TimerId};
use crossbeam_channel::{select, Receiver, Sender};
use log::{debug, info, warn};

/// The statistics timer.
const TICK: TimerId = TimerId(1);
/// The dashboard's sampling timer (where the role loop renders the pages).
const SAMPLE: TimerId = TimerId(2);
/// Seconds between two samples of the dashboard's history.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Write fences (see [`Http::flush`]) are timers numbered from here.
const FENCE_BASE: u64 = 1 << 32;

/// What the server hands the role loop: FSCADM calls ([`AdminCall`]) for the schedulers, the
/// calls of another parser for a role that serves other methods ([`spawn_with`]).
#[derive(Debug)]
pub enum AdminMsg<C = AdminCall> {
    /// A method call to answer through the responder.
    Call {
        /// The method and its arguments.
        call: C,
        /// Where the answer goes.
        reply: Responder,
    },
    /// The statistics timer: merge deltas, persist (FSCADM 2.2.4.4).
    Tick,
    /// A page the role loop renders (`GET /metrics`, the dashboard's JSON), answered through
    /// [`Responder::send_page`].
    View {
        /// Which page.
        view: View,
        /// Where the answer goes.
        reply: Responder,
    },
    /// The dashboard's sampling timer ([`SAMPLE_EVERY`]): record what its charts show.
    Sample,
}

/// The pages of the admin port that the role loop renders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// `GET /metrics`: the Prometheus text format.
    Metrics,
    /// `GET /api/dashboard`: the dashboard's JSON.
    Dashboard,
}

/// What the role loop answered.
enum Body {
    /// An XML-RPC response or fault.
    Xml(Vec<u8>),
    /// A page: content type and body.
    Page(&'static str, Vec<u8>),
}

/// A reply on its way back: the connection, the request's serial, the answer.
type Reply = (ConnId, u64, Body);

/// The way back to the connection that made a call.
#[derive(Debug)]
pub struct Responder {
    conn: ConnId,
    serial: u64,
    tx: Sender<Reply>,
}

impl Responder {
    /// Sends the method's result, or a fault (faultCode 1) with `Err`'s text.
    pub fn send(self, r: Result<Value, String>) {
        let body = match r {
            Ok(v) => xmlrpc::encode_response(&v),
            Err(e) => xmlrpc::encode_fault(FAULT_CODE, &e),
        };
        // The server may be gone (shutdown); nothing is waiting then.
        let _ = self.tx.send((self.conn, self.serial, Body::Xml(body)));
    }

    /// Answers a [`View`] with a page (status 200).
    pub fn send_page(self, content_type: &'static str, body: Vec<u8>) {
        let _ = self
            .tx
            .send((self.conn, self.serial, Body::Page(content_type, body)));
    }
}

/// A running server.
pub struct Server<C = AdminCall> {
    /// Calls and ticks.
    pub calls: Receiver<AdminMsg<C>>,
    /// The address it listens on.
    pub addr: SocketAddr,
    /// The server's event loop, for [`Server::stop`] (none when it could not start).
    pub(crate) handle: Option<Handle>,
}

impl<C> Server<C> {
    /// Stops accepting and closes every connection (a role's clean stop); the server's thread
    /// ends with its loop.
    pub fn stop(&self) {
        if let Some(h) = &self.handle {
            let _ = h.shutdown();
        }
    }
}

/// Reads a method call into a role's typed call; `Err` is the fault's text.
pub type Parse<C> = fn(&str, &[Value]) -> Result<C, String>;

/// Requests on a path other than /RPC2 that a role answers itself, in the server's thread
/// (the node's IndexNow endpoint, `crate::node::indexnow`).
pub trait Route: Send + Sync {
    /// The whole HTTP answer to `req` (the connection kept open after it when `keep_alive`),
    /// or `None` when the request is not the route's.
    fn answer(&self, req: &Request<'_>, keep_alive: bool) -> Option<Vec<u8>>;

    /// Whether `req` is one of the route's requests that carry their own proof and so need no
    /// admin token (IndexNow's key file); by default every request needs one.
    fn public(&self, _req: &Request<'_>) -> bool {
        false
    }
}

/// What a server answers besides the calls its parser reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Serves {
    /// The XML-RPC methods only (and the route's requests).
    Calls,
    /// The FSCADM methods with their introspection, `/metrics` and the dashboard (`/`, its
    /// files, `/api/dashboard`); the role loop renders `/metrics` and the dashboard's JSON
    /// ([`AdminMsg::View`]) and takes the dashboard's samples ([`AdminMsg::Sample`]).
    Scheduler,
}

/// Starts the server of the FSCADM methods on `addr`, ticking every `tick`, open to every
/// request on loopback.
pub fn spawn(addr: SocketAddr, tick: Duration, limits: Limits) -> io::Result<Server> {
    spawn_serving(
        addr,
        Some(tick),
        limits,
        Serves::Scheduler,
        |method, params| AdminCall::parse(method, params).map_err(|e| e.to_string()),
        None,
        AdminAuth::default(),
    )
}

/// Starts a server on `addr`, ticking every `tick`, whose calls `parse` reads (a call it
/// refuses is answered with its fault at once).
pub fn spawn_with<C: Send + 'static>(
    addr: SocketAddr,
    tick: Duration,
    limits: Limits,
    parse: Parse<C>,
    auth: AdminAuth,
) -> io::Result<Server<C>> {
    spawn_serving(addr, Some(tick), limits, Serves::Calls, parse, None, auth)
}

/// [`spawn_with`], `route` answering the requests it takes first (the distributor's
/// `/metrics`).
pub fn spawn_with_route<C: Send + 'static>(
    addr: SocketAddr,
    tick: Duration,
    limits: Limits,
    parse: Parse<C>,
    route: Arc<dyn Route>,
    auth: AdminAuth,
) -> io::Result<Server<C>> {
    spawn_serving(
        addr,
        Some(tick),
        limits,
        Serves::Calls,
        parse,
        Some(route),
        auth,
    )
}

/// A server of `route` alone on `addr` (`/metrics` of the roles without an administrative
/// interface, `--metrics-listen`): every other request is refused as the administrative
/// server refuses it, an XML-RPC call with a fault; `auth` is checked as on every
/// administrative port. Keep the returned server's receiver: the server stops when it is
/// dropped.
pub fn spawn_route(
    addr: SocketAddr,
    route: Arc<dyn Route>,
    auth: AdminAuth,
) -> io::Result<Server<std::convert::Infallible>> {
    spawn_serving(
        addr,
        None,
        Limits::default(),
        Serves::Calls,
        |_, _| Err("this port serves GET /metrics only".to_string()),
        Some(route),
        auth,
    )
}

/// [`spawn_with`] for the FSCADM methods, `route` answering the requests it takes before they
/// are read as XML-RPC (the node's IndexNow endpoint).
pub fn spawn_routed(
    addr: SocketAddr,
    tick: Duration,
    limits: Limits,
    parse: Parse<AdminCall>,
    route: Option<Arc<dyn Route>>,
    auth: AdminAuth,
) -> io::Result<Server<AdminCall>> {
    spawn_serving(
        addr,
        Some(tick),
        limits,
        Serves::Scheduler,
        parse,
        route,
        auth,
    )
}

/// [`spawn_with`], ticking every `tick` when given; `serves` says what else than the calls
/// is answered (with the introspection methods for the FSCADM table, [`super::introspect`]);
/// `route` answers the requests it takes before anything else; `auth` is checked for every
/// request (a port off loopback without a token is refused: [`AdminAuth::check_listen`]).
fn spawn_serving<C: Send + 'static>(
    addr: SocketAddr,
    tick: Option<Duration>,
    limits: Limits,
    serves: Serves,
    parse: Parse<C>,
    route: Option<Arc<dyn Route>>,
    auth: AdminAuth,
) -> io::Result<Server<C>> {
    auth.check_listen(addr)
        .map_err(|e| io::Error::new(io::ErrorKind::PermissionDenied, e))?;
    let mut builder = EventLoop::builder()
        .framing(HttpFraming::new(limits.max_body))
        .answer_half_closed(true)
        .listen(addr)
        .thread_name(format!("admin-loop {addr}"));
    if let Some(tls) = auth.tls() {
        builder = builder.tls(Arc::clone(tls));
    }
    let scheme = if auth.tls().is_some() {
        "https"
    } else {
        "http"
    };
    let lp = builder.spawn().map_err(io::Error::other)?;
    let local = lp.local_addrs.first().copied().unwrap_or(addr);
    let stopped = |e| io::Error::other(format!("admin event loop: {e}"));
    if let Some(tick) = tick {
        lp.handle
            .set_timer(TICK, tick, Some(tick))
            .map_err(stopped)?;
    }
    if serves == Serves::Scheduler {
        lp.handle
            .set_timer(SAMPLE, SAMPLE_EVERY, Some(SAMPLE_EVERY))
            .map_err(stopped)?;
    }
    let (calls_tx, calls) = crossbeam_channel::unbounded();
    let (replies_tx, replies) = crossbeam_channel::unbounded();
    let mut s = Http {
        handle: lp.handle.clone(),
        calls: calls_tx,
        replies_tx,
        limits,
        parse,
        serves,
        route,
        auth,
        conns: HashMap::new(),
        fences: HashMap::new(),
        serial: 0,
    };
    let events = lp.events;
    let handle = lp.handle.clone();
    std::thread::Builder::new()
        .name("admin-xmlrpc".into())
        .spawn(move || {
            s.run(&events, &replies);
            let _ = s.handle.shutdown();
            match lp.join.join() {
                Ok(Err(e)) => warn!("administrative interface stopped: {e}"),
                Err(_) => warn!("administrative interface: the event loop panicked"),
                Ok(Ok(())) => {}
            }
        })?;
    match serves {
        Serves::Scheduler => {
            info!("administrative interface on {scheme}://{local}/ (XML-RPC at /RPC2, /metrics)")
        }
        Serves::Calls => info!("administrative interface (XML-RPC) on {scheme}://{local}/RPC2"),
    }
    Ok(Server {
        calls,
        addr: local,
        handle: Some(handle),
    })
}

/// One request's place in its connection's answer order.
struct Slot<C> {
    serial: u64,
    state: SlotState<C>,
    /// Whether the connection stays open after this answer.
    keep_alive: bool,
    /// The batch the request came in, held until it is answered (see [`Http::requests`]).
    _batch: Arc<FrameBatch>,
}

/// Where a request stands.
enum SlotState<C> {
    /// The whole HTTP answer.
    Answer(Vec<u8>),
    /// A call or a page for the role loop, waiting for the requests before it to be answered.
    Call(ForRole<C>),
    /// With the role loop.
    Waiting,
}

/// What a request asks of the role loop.
enum ForRole<C> {
    /// A method call.
    Call(C),
    /// A page.
    View(View),
}

impl<C> ForRole<C> {
    fn message(self, reply: Responder) -> AdminMsg<C> {
        match self {
            ForRole::Call(call) => AdminMsg::Call { call, reply },
            ForRole::View(view) => AdminMsg::View { view, reply },
        }
    }
}

/// A connection's requests not yet answered, oldest first.
struct Conn<C> {
    peer: SocketAddr,
    slots: VecDeque<Slot<C>>,
    /// An answer that closes the connection has been sent: the rest is not answered.
    closing: bool,
    /// Answers were sent since the last call was handed on (see [`Http::flush`]).
    answered: bool,
    /// The write fence's timer, while one is set.
    fence: Option<TimerId>,
}

/// The server's thread: HTTP requests in, XML-RPC calls out to the role loop, answers back.
struct Http<C> {
    handle: Handle,
    calls: Sender<AdminMsg<C>>,
    replies_tx: Sender<Reply>,
    limits: Limits,
    parse: Parse<C>,
    /// What is answered besides the calls.
    serves: Serves,
    route: Option<Arc<dyn Route>>,
    /// Checked for every request ([`request`]).
    auth: AdminAuth,
    conns: HashMap<ConnId, Conn<C>>,
    /// The connection each write fence is for.
    fences: HashMap<TimerId, ConnId>,
    serial: u64,
}

/// An answer that is not a method's result.
fn plain(status: u16, text: &str, extra: &[(&str, &str)], keep_alive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    http::write_response(
        &mut out,
        status,
        "text/plain",
        extra,
        format!("{text}\n").as_bytes(),
        keep_alive,
    );
    out
}

/// A page (the dashboard's files and JSON, /metrics): not cached, the figures change.
fn page(status: u16, content_type: &str, body: &[u8], keep_alive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    http::write_response(
        &mut out,
        status,
        content_type,
        &[("Cache-Control", "no-store")],
        body,
        keep_alive,
    );
    out
}

/// An XML-RPC answer (a result or a fault, 2.1: always 200).
fn xml(body: &[u8], keep_alive: bool) -> Vec<u8> {
    let mut out = Vec::new();
    http::write_response(&mut out, 200, "text/xml", &[], body, keep_alive);
    out
}

impl<C> Http<C> {
    /// Runs until the role loop or the event loop is gone.
    fn run(&mut self, events: &Receiver<Event>, replies: &Receiver<Reply>) {
        loop {
            select! {
                recv(events) -> ev => {
                    let Ok(ev) = ev else { return };
                    if !self.event(ev) {
                        return;
                    }
                }
                recv(replies) -> r => {
                    // `self` holds a sender: the channel never disconnects.
                    if let Ok((conn, serial, body)) = r {
                        if !self.reply(conn, serial, body) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// Handles one loop event; false when the role loop is gone.
    fn event(&mut self, ev: Event) -> bool {
        match ev {
            Event::Accepted { conn, peer, .. } => {
                debug!("admin connection from {peer}");
                self.conns.insert(
                    conn,
                    Conn {
                        peer,
                        slots: VecDeque::new(),
                        closing: false,
                        answered: false,
                        fence: None,
                    },
                );
            }
            Event::Frames(batch) => return self.requests(Arc::new(batch)),
            Event::Closed { conn, .. } => {
                if let Some(fence) = self.conns.remove(&conn).and_then(|c| c.fence) {
                    self.fences.remove(&fence);
                }
            }
            Event::Timer(TICK) => return self.calls.send(AdminMsg::Tick).is_ok(),
            Event::Timer(SAMPLE) => return self.calls.send(AdminMsg::Sample).is_ok(),
            Event::Timer(fence) => {
                let Some(conn) = self.fences.remove(&fence) else {
                    return true;
                };
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.fence = None;
                    c.answered = false;
                }
                return self.flush(conn);
            }
            Event::Connected { .. } | Event::ConnectFailed { .. } => {}
        }
        true
    }

    /// Reads the requests of one batch, in order; false when the role loop is gone.
    ///
    /// Each request's slot keeps the batch it came in until it is answered: the event loop counts
    /// a connection's batches the role still holds and stops reading it past its cap, so a
    /// client pipelining requests without reading the answers costs bounded memory.
    fn requests(&mut self, batch: Arc<FrameBatch>) -> bool {
        let conn = batch.conn();
        for i in 0..batch.len() {
            let Some(c) = self.conns.get_mut(&conn) else {
                break;
            };
            if c.closing {
                break;
            }
            self.serial += 1;
            let (state, keep_alive) = match batch.refusal(i) {
                Some(r) => {
                    warn!(
                        "admin request from {} refused: {} {}",
                        c.peer, r.status, r.why
                    );
                    let why = if r.status == 413 {
                        format!("{} ({} bytes)", r.why, self.limits.max_body)
                    } else {
                        r.why.to_string()
                    };
                    (SlotState::Answer(plain(r.status, &why, &[], false)), false)
                }
                None => match batch.raw(i).and_then(Request::parse) {
                    Some(req) => request(
                        &req,
                        c.peer,
                        &self.limits,
                        self.parse,
                        self.serves,
                        self.route.as_deref(),
                        &self.auth,
                    ),
                    // The framing cut it as a request: not reached.
                    None => (
                        SlotState::Answer(plain(400, "malformed request", &[], false)),
                        false,
                    ),
                },
            };
            c.slots.push_back(Slot {
                serial: self.serial,
                state,
                keep_alive,
                _batch: Arc::clone(&batch),
            });
            // A request after one that closes is not answered: stop reading them.
            c.closing |= !keep_alive;
        }
        self.flush(conn)
    }

    /// The role loop's answer to request `serial` of `conn`; false when the role loop is gone.
    fn reply(&mut self, conn: ConnId, serial: u64, body: Body) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return true; // The client left.
        };
        if let Some(slot) = c.slots.iter_mut().find(|s| s.serial == serial) {
            slot.state = SlotState::Answer(match body {
                Body::Xml(b) => xml(&b, slot.keep_alive),
                Body::Page(ty, b) => page(200, ty, &b, slot.keep_alive),
            });
        }
        self.flush(conn)
    }

    /// Sends the answers at the front of `conn`'s queue, in request order, and hands the next
    /// call to the role loop; false when the role loop is gone.
    ///
    /// A call behind an answer just sent waits for a write fence: a zero-delay timer of the
    /// loop, which carries out commands in order, writes what they queued, then fires due
    /// timers. So each answer is on the wire before the next call starts, as when every
    /// request waited for the answer before it, and quick answers do not pile up into one
    /// write.
    fn flush(&mut self, conn: ConnId) -> bool {
        let Some(c) = self.conns.get_mut(&conn) else {
            return true;
        };
        while let Some(slot) = c.slots.front_mut() {
            match std::mem::replace(&mut slot.state, SlotState::Waiting) {
                SlotState::Waiting => break,
                SlotState::Call(pending) if c.answered => {
                    slot.state = SlotState::Call(pending);
                    if c.fence.is_none() {
                        let fence = TimerId(FENCE_BASE + slot.serial);
                        if self.handle.set_timer(fence, Duration::ZERO, None).is_err() {
                            return true; // The loop has stopped; Closed follows.
                        }
                        c.fence = Some(fence);
                        self.fences.insert(fence, conn);
                    }
                    break;
                }
                SlotState::Call(pending) => {
                    let reply = Responder {
                        conn,
                        serial: slot.serial,
                        tx: self.replies_tx.clone(),
                    };
                    if self.calls.send(pending.message(reply)).is_ok() {
                        break;
                    }
                    let f = xmlrpc::encode_fault(FAULT_CODE, "the scheduler stopped");
                    let _ = self.handle.send(conn, Priority::Normal, xml(&f, false));
                    let _ = self.handle.close(conn);
                    c.slots.clear();
                    c.closing = true;
                    return false;
                }
                SlotState::Answer(answer) => {
                    let keep_alive = slot.keep_alive;
                    c.slots.pop_front();
                    // A stopped loop has closed the connection; its Closed event says so.
                    let _ = self.handle.send(conn, Priority::Normal, answer);
                    c.answered = true;
                    if !keep_alive {
                        c.slots.clear();
                        let _ = self.handle.close(conn);
                        break;
                    }
                }
            }
        }
        true
    }
}

/// Answers one request, or makes it a call for the role loop; with whether the connection
/// stays open after it. Every request passes the token check first, whatever its path
/// ([`super::auth`]): 401 with the challenges without a valid token, 403 for a read-only token
/// asking for a change.
#[allow(clippy::too_many_arguments)]
fn request<C>(
    req: &Request<'_>,
    peer: SocketAddr,
    limits: &Limits,
    parse: Parse<C>,
    serves: Serves,
    route: Option<&dyn Route>,
    auth: &AdminAuth,
) -> (SlotState<C>, bool) {
    let ka = req.keep_alive();
    let public = route.is_some_and(|r| r.public(req));
    let header = req
        .header("authorization")
        .and_then(|v| std::str::from_utf8(v).ok());
    let access = match (public, auth.access(header)) {
        (true, _) => Access::Full,
        (false, Ok(a)) => a,
        (false, Err(why)) => {
            crawlfleet_core::warn_limited!(
                "admin-unauthorized",
                "admin request {} {} from {peer} refused: {why}",
                req.method,
                req.path
            );
            let challenges = AdminAuth::challenges();
            let extra: Vec<(&str, &str)> =
                challenges.iter().map(|(n, v)| (*n, v.as_str())).collect();
            return (
                SlotState::Answer(plain(401, "an admin token is required", &extra, ka)),
                ka,
            );
        }
    };
    let forbidden = |what: &str| {
        crawlfleet_core::warn_limited!(
            "admin-forbidden",
            "admin request from {peer} refused: {what} with a read-only token"
        );
        let text = format!("{what}: the read-only token does not allow it");
        (SlotState::Answer(plain(403, &text, &[], ka)), ka)
    };
    let views = matches!(req.method, "GET" | "HEAD");
    if access == Access::ReadOnly && !views && req.path != "/RPC2" {
        return forbidden(&format!("{} {}", req.method, req.path));
    }
    if let Some(answer) = route.and_then(|r| r.answer(req, ka)) {
        return (SlotState::Answer(answer), ka);
    }
    let answer = |status, text, extra: &[(&str, &str)], ka| {
        (SlotState::Answer(plain(status, text, extra, ka)), ka)
    };
    let introspect = serves == Serves::Scheduler;
    if introspect && req.method == "GET" && req.path != "/RPC2" {
        let path = req.path.split_once('?').map_or(req.path, |(p, _)| p);
        match path {
            "/metrics" => return (SlotState::Call(ForRole::View(View::Metrics)), ka),
            "/api/dashboard" => return (SlotState::Call(ForRole::View(View::Dashboard)), ka),
            _ => {}
        }
        if let Some((ty, body)) = crate::dashboard::asset(path) {
            return (SlotState::Answer(page(200, ty, body, ka)), ka);
        }
        return answer(404, "not found: the dashboard is at /", &[], ka);
    }
    if req.method != "POST" {
        return answer(405, "only POST /RPC2", &[("Allow", "POST")], ka);
    }
    if req.header("content-length").is_none() {
        return answer(411, "Content-Length required", &[], false);
    }
    if req.path != "/RPC2" {
        return answer(404, "XML-RPC is at /RPC2", &[], ka);
    }
    let call = xmlrpc::parse_call(req.body, limits).map_err(|e| e.to_string());
    if let Ok(c) = &call {
        if access == Access::ReadOnly && !read_only_method(&c.method) {
            return forbidden(&c.method);
        }
    }
    if let Some(answer) = call
        .as_ref()
        .ok()
        .filter(|_| introspect)
        .and_then(|c| super::introspect::answer(&c.method, &c.params))
    {
        let body = match answer {
            Ok(v) => xmlrpc::encode_response(&v),
            Err(e) => xmlrpc::encode_fault(FAULT_CODE, &e),
        };
        return (SlotState::Answer(xml(&body, ka)), ka);
    }
    match call.and_then(|c| parse(&c.method, &c.params)) {
        Ok(call) => (SlotState::Call(ForRole::Call(call)), ka),
        Err(e) => {
            warn!("admin request refused: {e}");
            let f = xmlrpc::encode_fault(FAULT_CODE, &e);
            (SlotState::Answer(xml(&f, ka)), ka)
        }
    }
}
