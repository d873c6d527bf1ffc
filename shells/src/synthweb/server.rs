//! The HTTP/1.1 server of the synthetic web: one mio thread for every host's listener, keep-alive
//! connections read with httparse, one request answered at a time per connection (pipelined
//! requests wait in the read buffer), delayed replies parked on a timer heap rather than a
//! sleeping thread, and bodies written as the socket takes them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::io::{self, BufWriter, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crawlfleet_core::synthweb::{Reply, SyntheticWeb};
use log::{debug, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use parking_lot::Mutex;
use slab::Slab;

use super::AccessRecord;

/// The waker's token; listeners are `0..hosts`, connections come after them.
pub(super) const WAKER: Token = Token(usize::MAX - 1);
/// The largest request head read; a longer one gets 431.
const MAX_HEAD: usize = 16 << 10;
/// Unanswered (pipelined) request bytes a client may send before it is cut off. Reads drain the
/// socket each time (edge-triggered readiness), so they cannot simply pause.
const MAX_BUFFERED: usize = 1 << 20;
/// Headers parsed per request.
const MAX_HEADERS: usize = 48;
/// Bodies up to this size go out in one buffer with the head.
const COALESCE: usize = 64 << 10;

/// What the loop shares with [`super::SynthServer`].
pub(super) struct Shared {
    pub stop: AtomicBool,
    pub log: Mutex<Vec<AccessRecord>>,
}

/// A reply on its way out.
struct Out {
    head: Vec<u8>,
    body: Vec<u8>,
    written: usize,
    ready_at: Option<Instant>,
    close: bool,
    path: String,
    status: u16,
    start: Instant,
}

impl Out {
    fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }
}

struct Conn {
    stream: TcpStream,
    host: SocketAddr,
    id: u64,
    rbuf: Vec<u8>,
    out: Option<Out>,
    peer_closed: bool,
}

/// The loop's state.
pub(super) struct Server {
    pub poll: Poll,
    pub listeners: Vec<(TcpListener, SocketAddr)>,
    pub web: Arc<SyntheticWeb>,
    pub shared: Arc<Shared>,
    pub file: Option<BufWriter<std::fs::File>>,
    conns: Slab<Conn>,
    timers: BinaryHeap<Reverse<(Instant, usize, u64)>>,
    next_conn: u64,
    /// The wall clock at `epoch`, to write log times as Unix seconds.
    epoch: (Instant, SystemTime),
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

fn interrupted(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

impl Server {
    pub fn new(
        poll: Poll,
        listeners: Vec<(TcpListener, SocketAddr)>,
        web: Arc<SyntheticWeb>,
        shared: Arc<Shared>,
        file: Option<BufWriter<std::fs::File>>,
    ) -> Server {
        Server {
            poll,
            listeners,
            web,
            shared,
            file,
            conns: Slab::new(),
            timers: BinaryHeap::new(),
            next_conn: 0,
            epoch: (Instant::now(), SystemTime::now()),
        }
    }

    /// Runs until the stop flag is set (and the waker woken).
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(1024);
        let first_conn = self.listeners.len();
        while !self.shared.stop.load(Ordering::Acquire) {
            let timeout = self
                .timers
                .peek()
                .map(|Reverse((t, _, _))| t.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if interrupted(&e) {
                    continue;
                }
                return Err(e);
            }
            for event in events.iter() {
                match event.token() {
                    WAKER => {}
                    Token(i) if i < first_conn => self.accept(i)?,
                    Token(i) => self.drive(i - first_conn, true),
                }
            }
            let now = Instant::now();
            while let Some(Reverse((t, key, id))) = self.timers.peek().copied() {
                if t > now {
                    break;
                }
                self.timers.pop();
                if self.conns.get(key).is_some_and(|c| c.id == id) {
                    self.drive(key, false);
                }
            }
            if let Some(f) = self.file.as_mut() {
                f.flush()?;
            }
        }
        Ok(())
    }

    /// Accepts every pending connection on listener `i`.
    fn accept(&mut self, i: usize) -> io::Result<()> {
        loop {
            let (stream, _) = match self.listeners[i].0.accept() {
                Ok(s) => s,
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) if interrupted(&e) => continue,
                Err(e) => {
                    // Out of descriptors and the like: refuse this one, keep serving.
                    warn!("synthweb: accept on {}: {e}", self.listeners[i].1);
                    return Ok(());
                }
            };
            let _ = stream.set_nodelay(true);
            let entry = self.conns.vacant_entry();
            let mut conn = Conn {
                stream,
                host: self.listeners[i].1,
                id: self.next_conn,
                rbuf: Vec::new(),
                out: None,
                peer_closed: false,
            };
            self.next_conn += 1;
            let token = Token(self.listeners.len() + entry.key());
            self.poll.registry().register(
                &mut conn.stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            entry.insert(conn);
        }
    }

    /// Reads (when `readable`), answers and writes what connection `key` allows; closes it when
    /// it is done or fails.
    fn drive(&mut self, key: usize, readable: bool) {
        let Some(conn) = self.conns.get_mut(key) else {
            return;
        };
        let result = step(conn, readable, &self.web, &mut self.timers, key, &mut |r| {
            log(&self.shared, &mut self.file, self.epoch, r)
        });
        let close = match result {
            Ok(done) => done,
            Err(e) => {
                debug!("synthweb: connection {} on {}: {e}", conn.id, conn.host);
                true
            }
        };
        if close {
            let mut conn = self.conns.remove(key);
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
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

/// The access record of `out`, answered on `conn` now.
fn answered(conn: &Conn, out: Out) -> AccessRecord {
    AccessRecord {
        host: conn.host,
        path: out.path,
        status: out.status,
        start: out.start,
        end: Instant::now(),
        conn: conn.id,
    }
}

/// One turn of a connection: read what is there, then answer requests in order while replies
/// are ready and the socket takes them. `Ok(true)` when the connection is finished.
fn step(
    conn: &mut Conn,
    readable: bool,
    web: &SyntheticWeb,
    timers: &mut BinaryHeap<Reverse<(Instant, usize, u64)>>,
    key: usize,
    log: &mut dyn FnMut(AccessRecord),
) -> io::Result<bool> {
    if readable && !conn.peer_closed {
        let mut buf = [0u8; 16 << 10];
        loop {
            match conn.stream.read(&mut buf) {
                Ok(0) => {
                    conn.peer_closed = true;
                    break;
                }
                Ok(n) => conn.rbuf.extend_from_slice(&buf[..n]),
                Err(e) if would_block(&e) => break,
                Err(e) if interrupted(&e) => continue,
                Err(e) => {
                    // A reset during an answer (a crawler closed a document over its size limit
                    // with the rest unread) can surface here before the next write fails: the
                    // request was answered all the same.
                    if let Some(out) = conn.out.take() {
                        log(answered(conn, out));
                    }
                    return Err(e);
                }
            }
            if conn.rbuf.len() > MAX_BUFFERED {
                return Err(io::Error::other("more than 1 MiB of requests unanswered"));
            }
        }
    }
    loop {
        if conn.out.is_none() {
            match parse(&mut conn.rbuf, web, conn.host) {
                Some(out) => {
                    if let Some(t) = out.ready_at {
                        timers.push(Reverse((t, key, conn.id)));
                    }
                    conn.out = Some(out);
                }
                None => return Ok(conn.peer_closed),
            }
        }
        let Some(out) = conn.out.as_mut() else {
            return Ok(false);
        };
        if out.ready_at.is_some_and(|t| t > Instant::now()) {
            return Ok(false);
        }
        out.ready_at = None;
        while out.written < out.len() {
            let buf = if out.written < out.head.len() {
                &out.head[out.written..]
            } else {
                &out.body[out.written - out.head.len()..]
            };
            match conn.stream.write(buf) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => out.written += n,
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) if interrupted(&e) => {}
                Err(e) => {
                    // The client went away during the answer (a crawler stops reading a
                    // document over its size limit): the request was answered all the same.
                    if let Some(out) = conn.out.take() {
                        log(answered(conn, out));
                    }
                    return Err(e);
                }
            }
        }
        let Some(out) = conn.out.take() else {
            return Ok(false);
        };
        let close = out.close;
        log(answered(conn, out));
        if close {
            let _ = conn.stream.flush();
            return Ok(true);
        }
    }
}

/// The next complete request of `rbuf` (taken out of it) and its reply, or `None` while the
/// head is incomplete. Malformed requests get a 4xx reply that closes the connection.
fn parse(rbuf: &mut Vec<u8>, web: &SyntheticWeb, host: SocketAddr) -> Option<Out> {
    if rbuf.is_empty() {
        return None;
    }
    let start = Instant::now();
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let refuse = |rbuf: &mut Vec<u8>, status: u16, path: &str| {
        rbuf.clear();
        let body = format!("{status} {}\n", reason(status)).into_bytes();
        let reply = Reply {
            status,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            body,
            delay: Duration::ZERO,
        };
        Some(out(reply, true, false, path.into(), start))
    };
    let used = match req.parse(rbuf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if rbuf.len() > MAX_HEAD => return refuse(rbuf, 431, ""),
        Ok(httparse::Status::Partial) => return None,
        Err(httparse::Error::TooManyHeaders) => return refuse(rbuf, 431, ""),
        Err(_) => return refuse(rbuf, 400, ""),
    };
    let target = req.path.unwrap_or("/");
    // An absolute-form target (RFC 9112 3.2.2) names the path after the authority.
    let path = match target.strip_prefix("http://") {
        Some(rest) => rest.find('/').map_or("/", |i| &rest[i..]),
        None => target,
    }
    .to_string();
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase())
    };
    if header("content-length").is_some_and(|v| v.trim() != "0")
        || header("transfer-encoding").is_some()
    {
        return refuse(rbuf, 400, &path);
    }
    let head_only = match req.method {
        Some("GET") => false,
        Some("HEAD") => true,
        _ => return refuse(rbuf, 405, &path),
    };
    let connection = header("connection").unwrap_or_default();
    let close = match req.version {
        Some(1) => connection.contains("close"),
        _ => !connection.contains("keep-alive"),
    };
    rbuf.drain(..used);
    let reply = web.respond(host, &path);
    Some(out(reply, close, head_only, path, start))
}

/// The bytes of a reply.
fn out(reply: Reply, close: bool, head_only: bool, path: String, start: Instant) -> Out {
    let mut head = String::with_capacity(256);
    let _ = write!(
        head,
        "HTTP/1.1 {} {}\r\nServer: crawlfleet-synthweb\r\n",
        reply.status,
        reason(reply.status)
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
        written: 0,
        ready_at: (!reply.delay.is_zero()).then(|| start + reply.delay),
        close,
        path,
        status: reply.status,
        start,
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        _ => "Unknown",
    }
}
