//! The XML-RPC server of FSCADM 2.1: HTTP/1.1 POST /RPC2 on its own small mio thread.
//!
//! Each request body is parsed here ([`crawlfleet_core::xmlrpc::parse_call`]); a body that is
//! not a valid `methodCall` is answered at once with a fault (faultCode 1, 2.2.7). A valid call
//! goes to the role loop as [`AdminMsg::Call`] over a crossbeam channel with a [`Responder`];
//! the role loop answers through it and the reply is written when it comes back. Connections are
//! kept alive (HTTP/1.1 default, HTTP/1.0 with `Connection: keep-alive`); a pipelined request
//! waits until the reply before it is read. `Expect: 100-continue` is not answered: the client
//! sends the body after its own wait. Other paths get 404, other methods 405, a body without
//! Content-Length 411, a body over the limit 413 (and the connection closed: its bytes are not
//! read).

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::xmlrpc::{self, Limits, Value, FAULT_CODE};
use crossbeam_channel::{Receiver, Sender};
use log::{debug, info, warn};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
/// Request heads larger than this are refused (431).
const MAX_HEAD: usize = 16 << 10;
const MAX_HEADERS: usize = 64;

/// What the server hands the role loop.
#[derive(Debug)]
pub enum AdminMsg {
    /// A method call to answer through the responder.
    Call {
        /// The method name.
        method: String,
        /// The parameters.
        params: Vec<Value>,
        /// Where the answer goes.
        reply: Responder,
    },
    /// The statistics timer: merge deltas, persist (FSCADM 2.2.4.4).
    Tick,
}

/// The way back to the connection that made a call.
#[derive(Debug)]
pub struct Responder {
    token: usize,
    serial: u64,
    tx: Sender<(usize, u64, Vec<u8>)>,
    waker: Arc<Waker>,
}

impl Responder {
    /// Sends the method's result, or a fault (faultCode 1) with `Err`'s text.
    pub fn send(self, r: Result<Value, String>) {
        let body = match r {
            Ok(v) => xmlrpc::encode_response(&v),
            Err(e) => xmlrpc::encode_fault(FAULT_CODE, &e),
        };
        // The server thread may be gone (shutdown); nothing is waiting then.
        if self.tx.send((self.token, self.serial, body)).is_ok() {
            let _ = self.waker.wake();
        }
    }
}

/// A running server.
pub struct Server {
    /// Calls and ticks.
    pub calls: Receiver<AdminMsg>,
    /// The address it listens on.
    pub addr: SocketAddr,
}

/// Starts the server on `addr`, ticking every `tick`.
pub fn spawn(addr: SocketAddr, tick: Duration, limits: Limits) -> io::Result<Server> {
    let mut listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
    let (calls_tx, calls) = crossbeam_channel::unbounded();
    let (replies_tx, replies) = crossbeam_channel::unbounded();
    let mut s = Loop {
        poll,
        listener,
        conns: Slab::new(),
        calls: calls_tx,
        replies_tx,
        replies,
        waker,
        limits,
        serial: 0,
    };
    std::thread::Builder::new()
        .name("admin-xmlrpc".into())
        .spawn(move || {
            if let Err(e) = s.run(tick) {
                warn!("administrative interface stopped: {e}");
            }
        })?;
    info!("administrative interface (XML-RPC) on http://{local}/RPC2");
    Ok(Server { calls, addr: local })
}

struct Conn {
    stream: TcpStream,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    /// A call is with the role loop: its serial.
    waiting: Option<u64>,
    close_after_write: bool,
    keep_alive: bool,
}

struct Loop {
    poll: Poll,
    listener: TcpListener,
    conns: Slab<Conn>,
    calls: Sender<AdminMsg>,
    replies_tx: Sender<(usize, u64, Vec<u8>)>,
    replies: Receiver<(usize, u64, Vec<u8>)>,
    waker: Arc<Waker>,
    limits: Limits,
    serial: u64,
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

fn interrupted(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Interrupted
}

/// An HTTP response with `body`.
fn http(status: &str, ctype: &str, body: &[u8], keep_alive: bool, extra: &str) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nServer: crawlfleet\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n{extra}{}\r\n",
        body.len(),
        if keep_alive { "" } else { "Connection: close\r\n" }
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// What the head of the buffered request says.
enum Parsed {
    /// More bytes are needed.
    Partial,
    /// A call body to hand on, and the bytes it used.
    Call { body: Vec<u8>, used: usize },
    /// An answer to write now; `close` ends the connection after it.
    Answer {
        bytes: Vec<u8>,
        used: usize,
        close: bool,
    },
}

impl Loop {
    fn run(&mut self, tick: Duration) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        let mut next_tick = Instant::now() + tick;
        loop {
            let timeout = next_tick.saturating_duration_since(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, Some(timeout)) {
                if interrupted(&e) {
                    continue;
                }
                return Err(e);
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + tick;
                if self.calls.send(AdminMsg::Tick).is_err() {
                    return Ok(()); // the role loop is gone
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept()?,
                    WAKER => {}
                    Token(t) => {
                        if ev.is_readable() || ev.is_read_closed() {
                            self.readable(t);
                        }
                        if ev.is_writable() {
                            self.flush(t);
                        }
                    }
                }
            }
            while let Ok((t, serial, body)) = self.replies.try_recv() {
                self.reply(t, serial, body);
            }
        }
    }

    fn accept(&mut self) -> io::Result<()> {
        loop {
            match self.listener.accept() {
                Ok((mut stream, peer)) => {
                    let entry = self.conns.vacant_entry();
                    let t = Token(entry.key());
                    self.poll.registry().register(
                        &mut stream,
                        t,
                        Interest::READABLE | Interest::WRITABLE,
                    )?;
                    debug!("admin connection from {peer}");
                    entry.insert(Conn {
                        stream,
                        inbuf: Vec::new(),
                        out: Vec::new(),
                        waiting: None,
                        close_after_write: false,
                        keep_alive: true,
                    });
                }
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) if interrupted(&e) => {}
                Err(e) => {
                    warn!("admin accept: {e}");
                    return Ok(());
                }
            }
        }
    }

    fn close(&mut self, t: usize) {
        if self.conns.contains(t) {
            let mut c = self.conns.remove(t);
            let _ = self.poll.registry().deregister(&mut c.stream);
        }
    }

    fn readable(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else {
            return;
        };
        let mut chunk = [0u8; 16 << 10];
        loop {
            match c.stream.read(&mut chunk) {
                Ok(0) => {
                    // The peer is done sending; answer what is pending, then close.
                    c.close_after_write = true;
                    if c.waiting.is_none() && c.out.is_empty() {
                        self.close(t);
                        return;
                    }
                    break;
                }
                Ok(n) => c.inbuf.extend_from_slice(&chunk[..n]),
                Err(e) if would_block(&e) => break,
                Err(e) if interrupted(&e) => {}
                Err(e) => {
                    debug!("admin connection: {e}");
                    self.close(t);
                    return;
                }
            }
        }
        self.process(t);
    }

    /// Handles the buffered requests of `t` while it is not waiting for the role loop.
    fn process(&mut self, t: usize) {
        loop {
            let Some(c) = self.conns.get_mut(t) else {
                return;
            };
            if c.waiting.is_some() || c.inbuf.is_empty() {
                break;
            }
            match parse(&c.inbuf, &self.limits) {
                Parsed::Partial => break,
                Parsed::Answer { bytes, used, close } => {
                    c.inbuf.drain(..used);
                    c.out.extend_from_slice(&bytes);
                    if close {
                        c.close_after_write = true;
                        c.inbuf.clear();
                    }
                }
                Parsed::Call { body, used } => {
                    c.keep_alive = keep_alive(&c.inbuf[..used]);
                    c.inbuf.drain(..used);
                    match xmlrpc::parse_call(&body, &self.limits) {
                        Ok(call) => {
                            self.serial += 1;
                            c.waiting = Some(self.serial);
                            let msg = AdminMsg::Call {
                                method: call.method,
                                params: call.params,
                                reply: Responder {
                                    token: t,
                                    serial: self.serial,
                                    tx: self.replies_tx.clone(),
                                    waker: self.waker.clone(),
                                },
                            };
                            if self.calls.send(msg).is_err() {
                                let f = xmlrpc::encode_fault(FAULT_CODE, "the scheduler stopped");
                                c.waiting = None;
                                c.out
                                    .extend_from_slice(&http("200 OK", "text/xml", &f, false, ""));
                                c.close_after_write = true;
                            }
                        }
                        Err(e) => {
                            warn!("admin request refused: {e}");
                            let f = xmlrpc::encode_fault(FAULT_CODE, &e.to_string());
                            let ka = c.keep_alive;
                            c.out
                                .extend_from_slice(&http("200 OK", "text/xml", &f, ka, ""));
                            c.close_after_write |= !ka;
                        }
                    }
                }
            }
        }
        self.flush(t);
    }

    fn reply(&mut self, t: usize, serial: u64, body: Vec<u8>) {
        let Some(c) = self.conns.get_mut(t) else {
            return; // the client left
        };
        if c.waiting != Some(serial) {
            return; // a reply for an earlier connection in this slot
        }
        c.waiting = None;
        let ka = c.keep_alive;
        c.out
            .extend_from_slice(&http("200 OK", "text/xml", &body, ka, ""));
        c.close_after_write |= !ka;
        self.process(t);
    }

    fn flush(&mut self, t: usize) {
        let Some(c) = self.conns.get_mut(t) else {
            return;
        };
        while !c.out.is_empty() {
            match c.stream.write(&c.out) {
                Ok(0) => {
                    self.close(t);
                    return;
                }
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if would_block(&e) => return,
                Err(e) if interrupted(&e) => {}
                Err(e) => {
                    debug!("admin connection: {e}");
                    self.close(t);
                    return;
                }
            }
        }
        if c.close_after_write && c.waiting.is_none() {
            self.close(t);
        }
    }
}

/// Whether the connection stays open after answering the request whose head is in `head`.
fn keep_alive(head: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if req.parse(head).is_err() {
        return false;
    }
    let conn = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("connection"))
        .map(|h| String::from_utf8_lossy(h.value).to_ascii_lowercase());
    match req.version {
        Some(1) => conn.as_deref() != Some("close"),
        _ => conn.as_deref() == Some("keep-alive"),
    }
}

fn parse(buf: &[u8], limits: &Limits) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    let refuse = |status: &str, why: &str, extra: &str| Parsed::Answer {
        bytes: http(
            status,
            "text/plain",
            format!("{why}\n").as_bytes(),
            false,
            extra,
        ),
        used: buf.len(),
        close: true,
    };
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => {
            return refuse(
                "431 Request Header Fields Too Large",
                "request head too large",
                "",
            )
        }
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(httparse::Error::TooManyHeaders) => {
            return refuse(
                "431 Request Header Fields Too Large",
                "too many headers",
                "",
            )
        }
        Err(e) => return refuse("400 Bad Request", &format!("bad request: {e}"), ""),
    };
    let header = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    let length = match header("content-length").map(|v| v.parse::<usize>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => return refuse("400 Bad Request", "bad Content-Length", ""),
    };
    let chunked = header("transfer-encoding").is_some();
    let method = req.method.unwrap_or("");
    let path = req.path.unwrap_or("");
    if method != "POST" {
        // The body (if any) is skipped when its length is known; the connection stays.
        let used = head_len + length.unwrap_or(0);
        if chunked || buf.len() < used {
            if chunked {
                return refuse("405 Method Not Allowed", "only POST", "Allow: POST\r\n");
            }
            return Parsed::Partial;
        }
        return Parsed::Answer {
            bytes: http(
                "405 Method Not Allowed",
                "text/plain",
                b"only POST /RPC2\n",
                keep_alive(&buf[..head_len]),
                "Allow: POST\r\n",
            ),
            used,
            close: !keep_alive(&buf[..head_len]),
        };
    }
    let Some(len) = length.filter(|_| !chunked) else {
        return refuse("411 Length Required", "Content-Length required", "");
    };
    if len > limits.max_body {
        return refuse(
            "413 Payload Too Large",
            &format!(
                "request body of {len} bytes exceeds the limit of {}",
                limits.max_body
            ),
            "",
        );
    }
    if buf.len() < head_len + len {
        return Parsed::Partial;
    }
    let used = head_len + len;
    if path != "/RPC2" {
        let ka = keep_alive(&buf[..head_len]);
        return Parsed::Answer {
            bytes: http(
                "404 Not Found",
                "text/plain",
                b"XML-RPC is at /RPC2\n",
                ka,
                "",
            ),
            used,
            close: !ka,
        };
    }
    Parsed::Call {
        body: buf[head_len..used].to_vec(),
        used,
    }
}
