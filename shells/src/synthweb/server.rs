//! The HTTP/1.1 server of the synthetic web on net's event loop: one listener per host, requests
//! cut by [`HttpFraming`], keep-alive connections answered one request at a time in order
//! (pipelined requests wait their turn, and a request's delay counts from when its turn
//! comes), delayed replies parked on a loop timer rather than a sleeping thread, and bodies
//! written by the loop as the socket takes them.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crawlfleet_core::synthweb::{Reply, SyntheticWeb};
use crawlfleet_net::http::{reason_phrase, Request};
use crawlfleet_net::{ConnId, Event, FrameBatch, Handle, Priority, TimerId};
use crossbeam_channel::{Receiver, TryRecvError};
use log::{debug, warn};
use parking_lot::Mutex;

use super::rup::{RupActivity, WebRup};
use super::AccessRecord;

/// Request bodies are refused (400); the framing refuses larger ones without reading them.
pub(super) const MAX_BODY: usize = 64 << 10;
/// Unanswered (pipelined) request bytes a client may send before it is cut off.
const MAX_BUFFERED: usize = 1 << 20;
/// Bodies up to this size go out in one buffer with the head.
const COALESCE: usize = 64 << 10;

/// What the server shares with [`super::SynthServer`].
pub(super) struct Shared {
    pub log: Mutex<Vec<AccessRecord>>,
    /// What the web's RUP servers did.
    pub rup: Arc<Mutex<RupActivity>>,
}

/// The RUP servers' tick (the reply delays' timers count up from 0).
pub(super) const RUP_TICK: TimerId = TimerId(u64::MAX);
/// How often it comes.
pub(super) const RUP_TICK_EVERY: Duration = Duration::from_millis(250);

/// A request waiting for its turn.
struct Pending {
    /// The path (and query) for the reply and the log.
    path: String,
    /// What is answered.
    what: Answer,
    /// Whether the connection closes after the answer.
    close: bool,
    /// Bytes the request took on the wire.
    len: usize,
    /// The request's If-None-Match (a changing web's pages have ETags).
    if_none_match: Option<String>,
}

enum Answer {
    Get,
    Head,
    /// A refusal with this status.
    Refuse(u16),
    /// `/rupinfo.txt` (no form) or the RUP CGI with its form (a GET's query, a POST's body).
    Rup(Option<Vec<u8>>),
}

/// A reply waiting for its delay.
struct Out {
    head: Vec<u8>,
    body: Vec<u8>,
    close: bool,
    path: String,
    status: u16,
    start: Instant,
}

struct Conn {
    host: SocketAddr,
    /// The connection's number in the access log.
    id: u64,
    pending: VecDeque<Pending>,
    /// Bytes of the requests in `pending`.
    buffered: usize,
    /// The reply waiting for its delay, and its timer.
    waiting: Option<(TimerId, Out)>,
    /// An answer that closes the connection has been sent.
    closing: bool,
}

/// The server's thread: requests in, replies out through the loop's handle.
pub(super) struct Server {
    pub handle: Handle,
    /// The host of each listener, by listener index.
    pub hosts: Vec<SocketAddr>,
    pub web: Arc<SyntheticWeb>,
    pub shared: Arc<Shared>,
    pub file: Option<BufWriter<std::fs::File>>,
    /// The hosts' RUP servers, when the web publishes RUP.
    rup: Option<WebRup>,
    conns: HashMap<ConnId, Conn>,
    timers: HashMap<TimerId, ConnId>,
    next_timer: u64,
    next_conn: u64,
    /// The wall clock at `epoch`, to write log times as Unix seconds.
    epoch: (Instant, SystemTime),
}

impl Server {
    pub fn new(
        handle: Handle,
        hosts: Vec<SocketAddr>,
        web: Arc<SyntheticWeb>,
        shared: Arc<Shared>,
        file: Option<BufWriter<std::fs::File>>,
        rup: Option<WebRup>,
    ) -> Server {
        Server {
            handle,
            hosts,
            web,
            shared,
            file,
            rup,
            conns: HashMap::new(),
            timers: HashMap::new(),
            next_timer: 0,
            next_conn: 0,
            epoch: (Instant::now(), SystemTime::now()),
        }
    }

    /// Runs until the loop stops; the access log file is flushed whenever no event waits.
    pub fn run(mut self, events: Receiver<Event>) -> io::Result<()> {
        while let Ok(ev) = events.recv() {
            self.event(ev);
            loop {
                match events.try_recv() {
                    Ok(ev) => self.event(ev),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return self.flush(),
                }
            }
            self.flush()?;
        }
        self.flush()
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.file.as_mut() {
            Some(f) => f.flush(),
            None => Ok(()),
        }
    }

    fn event(&mut self, ev: Event) {
        match ev {
            Event::Accepted { conn, listener, .. } => {
                let Some(&host) = self.hosts.get(listener.0) else {
                    return;
                };
                self.conns.insert(
                    conn,
                    Conn {
                        host,
                        id: self.next_conn,
                        pending: VecDeque::new(),
                        buffered: 0,
                        waiting: None,
                        closing: false,
                    },
                );
                self.next_conn += 1;
            }
            Event::Frames(batch) => self.requests(&batch),
            Event::Timer(RUP_TICK) => {
                if let Some(r) = self.rup.as_mut() {
                    r.tick();
                }
            }
            Event::Timer(t) => {
                if let Some(conn) = self.timers.remove(&t) {
                    self.delay_over(conn, t);
                }
            }
            Event::Closed { conn, reason, .. } => {
                if let Some(c) = self.conns.remove(&conn) {
                    debug!("synthweb: connection {} on {}: {reason}", c.id, c.host);
                    if let Some((t, _)) = c.waiting {
                        self.timers.remove(&t);
                        let _ = self.handle.cancel_timer(t);
                    }
                }
            }
            Event::Connected { .. } | Event::ConnectFailed { .. } => {}
        }
    }

    /// Queues the requests of a batch, then answers what can be answered.
    fn requests(&mut self, batch: &FrameBatch) {
        let id = batch.conn();
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        for i in 0..batch.len() {
            let len = batch.raw(i).map_or(0, <[u8]>::len);
            let p = match batch.refusal(i) {
                Some(r) => {
                    debug!("synthweb: refused on {}: {} {}", conn.host, r.status, r.why);
                    refused(r.status, len)
                }
                None => match batch.raw(i).and_then(Request::parse) {
                    Some(req) => pending(&req, len, self.rup.is_some()),
                    None => refused(400, len),
                },
            };
            conn.buffered += p.len;
            conn.pending.push_back(p);
        }
        if conn.buffered > MAX_BUFFERED {
            warn!(
                "synthweb: connection {} on {}: more than 1 MiB of requests unanswered",
                conn.id, conn.host
            );
            conn.pending.clear();
            conn.closing = true;
            let _ = self.handle.close(id);
            return;
        }
        self.advance(id);
    }

    /// Answers the requests of `id` in order until one waits for its delay.
    fn advance(&mut self, id: ConnId) {
        loop {
            let Some(conn) = self.conns.get_mut(&id) else {
                return;
            };
            if conn.waiting.is_some() || conn.closing {
                return;
            }
            let Some(p) = conn.pending.pop_front() else {
                return;
            };
            conn.buffered -= p.len;
            let start = Instant::now();
            let (reply, head_only) = match &p.what {
                Answer::Get => (self.web.respond(conn.host, &p.path), false),
                Answer::Head => (self.web.respond(conn.host, &p.path), true),
                Answer::Refuse(status) => (refusal(*status), false),
                Answer::Rup(form) => {
                    let host = conn.host;
                    let r = self
                        .rup
                        .as_mut()
                        .and_then(|r| r.respond(host, &p.path, form.as_deref()));
                    (r.unwrap_or_else(|| refusal(404)), false)
                }
            };
            let reply = match p.what {
                Answer::Get | Answer::Head => conditional(reply, p.if_none_match.as_deref()),
                _ => reply,
            };
            let Some(conn) = self.conns.get_mut(&id) else {
                return;
            };
            let delay = reply.delay;
            let out = out(reply, p.close, head_only, p.path, start);
            if delay.is_zero() {
                self.send(id, out);
                continue;
            }
            let t = TimerId(self.next_timer);
            self.next_timer += 1;
            if self.handle.set_timer(t, delay, None).is_err() {
                return; // The loop has stopped.
            }
            self.timers.insert(t, id);
            conn.waiting = Some((t, out));
        }
    }

    fn delay_over(&mut self, id: ConnId, t: TimerId) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        match conn.waiting.take() {
            Some((waited, out)) if waited == t => self.send(id, out),
            other => conn.waiting = other,
        }
        self.advance(id);
    }

    /// Hands a reply to the loop, logs it, and closes the connection after it if it says so.
    fn send(&mut self, id: ConnId, out: Out) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        // A stopped loop has closed the connection.
        let _ = self.handle.send(id, Priority::Normal, out.head);
        if !out.body.is_empty() {
            let _ = self.handle.send(id, Priority::Normal, out.body);
        }
        if out.close {
            conn.closing = true;
            conn.pending.clear();
            let _ = self.handle.close(id);
        }
        let record = AccessRecord {
            host: conn.host,
            path: out.path,
            status: out.status,
            start: out.start,
            end: Instant::now(),
            conn: conn.id,
        };
        log(&self.shared, &mut self.file, self.epoch, record);
    }
}

/// A request refused with `status`; the connection closes after the answer.
fn refused(status: u16, len: usize) -> Pending {
    Pending {
        path: String::new(),
        what: Answer::Refuse(status),
        close: true,
        len,
        if_none_match: None,
    }
}

/// What a request asks for. Only GET and HEAD without a body are served, and, when the web
/// publishes RUP (`rup`), `/rupinfo.txt` and the CGI by GET or POST.
fn pending(req: &Request<'_>, len: usize, rup: bool) -> Pending {
    // An absolute-form target (RFC 9112 3.2.2) names the path after the authority.
    let path = match req.path.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => req.path,
    }
    .to_string();
    let (bare, query) = path.split_once('?').unwrap_or((&path, ""));
    let what = if rup && bare == super::rup::CGI_PATH {
        match req.method {
            "GET" => Answer::Rup(Some(query.as_bytes().to_vec())),
            "POST" => Answer::Rup(Some(req.body.to_vec())),
            _ => Answer::Rup(None),
        }
    } else if rup && bare == "/rupinfo.txt" && matches!(req.method, "GET" | "HEAD") {
        Answer::Rup(None)
    } else if !req.body.is_empty() {
        Answer::Refuse(400)
    } else {
        match req.method {
            "GET" => Answer::Get,
            "HEAD" => Answer::Head,
            _ => Answer::Refuse(405),
        }
    };
    let close = matches!(what, Answer::Refuse(_)) || !req.keep_alive();
    Pending {
        path,
        what,
        close,
        len,
        if_none_match: req
            .header("if-none-match")
            .map(|v| String::from_utf8_lossy(v).trim().to_string()),
    }
}

/// A reply whose ETag the request's If-None-Match names becomes 304 Not Modified, without a
/// body (RFC 9110 13.1.2, 15.4.5).
fn conditional(mut reply: Reply, if_none_match: Option<&str>) -> Reply {
    if reply.status == 200 && if_none_match.is_some() && reply.header("ETag") == if_none_match {
        reply.status = 304;
        reply.body.clear();
    }
    reply
}

fn refusal(status: u16) -> Reply {
    Reply {
        status,
        headers: vec![("Content-Type".into(), "text/plain".into())],
        body: format!("{status} {}\n", reason_phrase(status)).into_bytes(),
        delay: Duration::ZERO,
    }
}

/// Records one answered request.
fn log(
    shared: &Shared,
    file: &mut Option<BufWriter<std::fs::File>>,
    epoch: (Instant, SystemTime),
    r: AccessRecord,
) {
    if let Some(f) = file.as_mut() {
        let unix = |t: Instant| {
            (epoch.1 + t.saturating_duration_since(epoch.0) - epoch.0.saturating_duration_since(t))
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        let line = format!(
            "{}\t{}\t{}\t{:.6}\t{:.6}\t{}\n",
            r.host,
            r.path,
            r.status,
            unix(r.start),
            unix(r.end),
            r.conn
        );
        if let Err(e) = f.write_all(line.as_bytes()) {
            warn!("synthweb: access log: {e}");
        }
    }
    shared.log.lock().push(r);
}

/// The bytes of a reply.
fn out(reply: Reply, close: bool, head_only: bool, path: String, start: Instant) -> Out {
    let mut head = String::with_capacity(256);
    let _ = write!(
        head,
        "HTTP/1.1 {} {}\r\nServer: crawlfleet-synthweb\r\n",
        reply.status,
        reason_phrase(reply.status)
    );
    for (n, v) in &reply.headers {
        let _ = write!(head, "{n}: {v}\r\n");
    }
    let _ = write!(
        head,
        "Content-Length: {}\r\nConnection: {}\r\n\r\n",
        reply.body.len(),
        if close { "close" } else { "keep-alive" }
    );
    let mut head = head.into_bytes();
    let mut body = if head_only { Vec::new() } else { reply.body };
    if body.len() <= COALESCE {
        head.append(&mut body);
    }
    Out {
        head,
        body,
        close,
        path,
        status: reply.status,
        start,
    }
}
