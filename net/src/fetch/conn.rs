//! One client connection: a non-blocking socket, rustls on top for HTTPS, a fixed read buffer
//! while a request is in flight (the driver lends it and takes it back when the connection goes
//! idle, so an idle keep-alive connection holds no buffer), and the request in flight (at most
//! one: no pipelining).
//!
//! The driver calls [`Conn::drive`] on every readiness event; it finishes a pending connect,
//! writes what is queued and reads until `WouldBlock` or a complete response (edge-triggered
//! polling), feeding the [`ResponseReader`]. It reports a finished response or a typed error; closing,
//! pooling and retrying are the driver's.
//!
//! A response completed by a plain read that filled less than the room it was given leaves the
//! socket drained: TCP hands a read everything queued up to its size, so the socket was empty
//! then, and any byte or FIN arriving later raises a new edge. The one exception is a FIN that
//! arrived before the poll reported the event (no further edge comes for it): the event then
//! says `is_read_closed`, and the connection reads until `WouldBlock` as before. This saves
//! the `WouldBlock` read after every response (one `recvfrom` a page, a third of the fetcher's
//! system calls). A response not complete yet is read on until `WouldBlock`: its next segment
//! is often there already (a server writing the head and the body apart), and reading it now
//! saves a turn of the poll.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use mio::net::TcpStream;
use rustls::{ClientConfig, ClientConnection};

use super::http::{ResponseReader, MAX_HEAD};
use super::{tls, FetchError, FetchRequest, Response, Wire};
use crate::io_util::{interrupted, would_block};

/// Where a connection stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Phase {
    /// TCP connect in progress (a request is waiting on it).
    Connecting,
    /// A request is in flight.
    Busy,
    /// Kept alive in the pool, no request.
    Idle,
}

/// The request a connection is serving.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) req: FetchRequest,
    pub(super) submitted: Instant,
    /// When it got this connection.
    pub(super) started: Instant,
    /// This is the request's second attempt (the first died on a reused connection).
    pub(super) retried: bool,
    /// The connection had served an earlier request.
    pub(super) reused: bool,
    pub(super) connect_deadline: Instant,
    pub(super) deadline: Instant,
    /// Any response byte arrived: a failure now is not a stale keep-alive connection.
    pub(super) got_bytes: bool,
    reader: ResponseReader,
    /// The exchange's bytes, when the fetcher keeps them.
    wire: Option<Wire>,
    /// Bytes (read, written) on the network for this request, an earlier attempt's included.
    pub(super) net: (u64, u64),
}

impl Job {
    pub(super) fn new(req: FetchRequest, submitted: Instant, retried: bool, now: Instant) -> Job {
        let reader = ResponseReader::new(req.head, req.max_body);
        Job {
            connect_deadline: now + req.connect_timeout,
            deadline: now + req.timeout,
            req,
            submitted,
            started: now,
            retried,
            reused: false,
            got_bytes: false,
            reader,
            wire: None,
            net: (0, 0),
        }
    }
}

/// What [`Conn::drive`] came to.
#[derive(Debug)]
pub(super) enum Step {
    /// Waiting for the socket.
    Pending,
    /// The response, and whether the connection may carry another request.
    Done(Response, bool),
    /// The request failed; the connection must be closed.
    Failed(FetchError),
}

/// One read from the transport.
enum Filled {
    Data(usize),
    WouldBlock,
    Eof,
}

/// A client connection.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    tls: Option<Box<ClientConnection>>,
    /// The pool key: scheme, address, host.
    pub(super) https: bool,
    pub(super) addr: SocketAddr,
    pub(super) host: Box<str>,
    /// Unique over the fetcher's life: tells a recycled slab slot from the connection a timer
    /// or idle mark was set for.
    pub(super) uid: u64,
    pub(super) phase: Phase,
    /// Bumped each time the connection goes idle, to tell stale idle marks.
    pub(super) idle_gen: u64,
    /// Requests this connection has completed.
    pub(super) served: u64,
    pub(super) job: Option<Job>,
    /// The deadline of this connection's live timer entry, if one is queued.
    pub(super) armed_at: Option<Instant>,
    /// The read buffer ([`MAX_HEAD`] bytes while a request is in flight, empty when idle):
    /// unread response bytes are `buf[start..end]`.
    buf: Box<[u8]>,
    start: usize,
    end: usize,
    /// Plain HTTP: the request bytes not yet written (TLS copies them into rustls at once).
    out: Vec<u8>,
    out_pos: usize,
    /// The peer closed its side.
    eof: bool,
    /// The last read of a finished response left the socket drained (see the module
    /// documentation), so [`Conn::settle`] need not read it again. Taken by `settle`.
    drained: bool,
    /// Bytes read from and written to the socket since [`Conn::take_net`] (TLS records as
    /// they went, for HTTPS).
    net: (u64, u64),
}

impl Conn {
    /// Starts a non-blocking connect to `req.addr` (with a TLS session for https).
    pub(super) fn connect(
        req: &FetchRequest,
        uid: u64,
        tls: &Arc<ClientConfig>,
    ) -> Result<Conn, FetchError> {
        let https = req.url.scheme() == "https";
        let session = if https {
            Some(Box::new(tls::session(tls, &req.url)?))
        } else {
            None
        };
        let stream = TcpStream::connect(req.addr)?;
        // Requests and TLS handshake flights are written whole; waiting for acks only adds latency.
        if let Err(e) = stream.set_nodelay(true) {
            log::debug!("fetch: TCP_NODELAY on a socket to {}: {e}", req.addr);
        }
        Ok(Conn {
            stream,
            tls: session,
            https,
            addr: req.addr,
            host: req.url.host_str().unwrap_or_default().into(),
            uid,
            phase: Phase::Connecting,
            idle_gen: 0,
            served: 0,
            job: None,
            armed_at: None,
            buf: Box::default(),
            start: 0,
            end: 0,
            out: Vec::with_capacity(512),
            out_pos: 0,
            eof: false,
            drained: false,
            net: (0, 0),
        })
    }

    /// A new read buffer for [`Conn::give_buf`].
    pub(super) fn new_buf() -> Box<[u8]> {
        vec![0; MAX_HEAD].into_boxed_slice()
    }

    /// True when the connection holds a read buffer.
    pub(super) fn has_buf(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Lends the connection a read buffer (of [`Conn::new_buf`]'s size) for the request it is
    /// about to take on.
    pub(super) fn give_buf(&mut self, buf: Box<[u8]>) {
        debug_assert_eq!(buf.len(), MAX_HEAD);
        self.buf = buf;
        self.start = 0;
        self.end = 0;
    }

    /// Takes back the read buffer of a connection going idle or closing. `None` when it holds
    /// none, or still holds unread bytes (a connection that is then closed).
    pub(super) fn take_buf(&mut self) -> Option<Box<[u8]>> {
        if self.buf.is_empty() || self.start != self.end {
            return None;
        }
        self.start = 0;
        self.end = 0;
        Some(std::mem::take(&mut self.buf))
    }

    /// Bytes (read, written) on the socket since the last call.
    pub(super) fn take_net(&mut self) -> (u64, u64) {
        std::mem::take(&mut self.net)
    }

    /// The earliest deadline of the request in flight.
    pub(super) fn deadline(&self) -> Option<Instant> {
        let job = self.job.as_ref()?;
        Some(if self.phase == Phase::Connecting {
            job.connect_deadline.min(job.deadline)
        } else {
            job.deadline
        })
    }

    /// Takes on `job`: queues its request bytes (one buffer, written in one go) and, when the
    /// connection is up, writes them.
    /// With `keep_wire`, the request and response bytes are kept for [`Response::wire`].
    pub(super) fn start(&mut self, mut job: Job, user_agent: &str, keep_wire: bool) -> Step {
        job.reused = self.served > 0;
        self.start = 0;
        self.end = 0;
        encode_request(&job.req, user_agent, &mut self.out);
        job.wire = keep_wire.then(|| Wire {
            request: self.out.clone(),
            response: Vec::new(),
            peer: self.addr,
        });
        self.out_pos = 0;
        self.job = Some(job);
        if let Some(tls) = &mut self.tls {
            // rustls holds plaintext written before the handshake ends and sends it after.
            if let Err(e) = tls.writer().write_all(&self.out) {
                return Step::Failed(FetchError::Tls(e.to_string()));
            }
            self.out.clear();
        }
        if self.phase == Phase::Connecting {
            return Step::Pending;
        }
        self.phase = Phase::Busy;
        match self.flush() {
            Ok(()) => Step::Pending,
            Err(e) => Step::Failed(e.into()),
        }
    }

    /// Handles readiness of a connecting or busy connection. `read_closed`: the event said the
    /// peer's FIN (or an error) is already there, so the socket is read until `WouldBlock`.
    pub(super) fn drive(&mut self, read_closed: bool) -> Step {
        self.drained = false;
        if self.phase == Phase::Connecting {
            match self.connected() {
                Ok(true) => self.phase = Phase::Busy,
                Ok(false) => return Step::Pending,
                Err(e) => return Step::Failed(e.into()),
            }
        }
        if let Err(e) = self.flush() {
            return Step::Failed(e.into());
        }
        match self.read_response(!read_closed) {
            Ok(Some((resp, keep))) => Step::Done(resp, keep),
            Ok(None) => Step::Pending,
            Err(e) => Step::Failed(e),
        }
    }

    /// Checks an idle (or just finished) connection: drains the socket and says whether it is
    /// still good for another request (no EOF, no error, no stray bytes). A response whose last
    /// read left the socket drained needs no further read: anything arriving later raises an
    /// event, which brings the idle connection back here.
    pub(super) fn settle(&mut self) -> bool {
        let drained = std::mem::take(&mut self.drained);
        if self.eof || self.start != self.end {
            return false;
        }
        self.start = 0;
        self.end = 0;
        if drained {
            return true;
        }
        // Any byte read here means the connection is not good, so a small buffer does: the
        // read buffer goes back to the driver while the connection is idle.
        let mut scratch = [0u8; 256];
        let r = fill(
            &mut self.stream,
            self.tls.as_deref_mut(),
            &mut scratch,
            &mut self.net,
        );
        match r {
            Ok(Filled::WouldBlock) => self.flush().is_ok(),
            Ok(Filled::Data(_)) | Ok(Filled::Eof) | Err(_) => false,
        }
    }

    /// `Ok(true)` once the TCP connect finished.
    fn connected(&mut self) -> io::Result<bool> {
        if let Some(e) = self.stream.take_error()? {
            return Err(e);
        }
        match self.stream.peer_addr() {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes queued bytes until done or `WouldBlock`.
    fn flush(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            while tls.wants_write() {
                match tls.write_tls(&mut self.stream) {
                    Ok(n) => self.net.1 += n as u64,
                    Err(e) if would_block(&e) => break,
                    Err(e) if interrupted(&e) => {}
                    Err(e) => return Err(e),
                }
            }
            return Ok(());
        }
        while self.out_pos < self.out.len() {
            match self.stream.write(&self.out[self.out_pos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.out_pos += n;
                    self.net.1 += n as u64;
                }
                Err(e) if would_block(&e) => return Ok(()),
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads until `WouldBlock`, EOF or a complete response. `short_drains`: a response
    /// completed by a plain read that filled less than its room leaves the socket counted
    /// drained (see the module documentation).
    fn read_response(
        &mut self,
        short_drains: bool,
    ) -> Result<Option<(Response, bool)>, FetchError> {
        let short_drains = short_drains && self.tls.is_none();
        let Some(job) = &mut self.job else {
            return Err(FetchError::Protocol(
                "response bytes without a request".into(),
            ));
        };
        loop {
            if self.start == self.end {
                self.start = 0;
                self.end = 0;
            } else if self.end == self.buf.len() && self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.end == self.buf.len() {
                // The reader refuses heads, chunk lines and trailers this long before it gets here.
                return Err(FetchError::Protocol(
                    "response element larger than the read buffer".into(),
                ));
            }
            let room = self.buf.len() - self.end;
            let mut drained = false;
            let done = match fill(
                &mut self.stream,
                self.tls.as_deref_mut(),
                &mut self.buf[self.end..],
                &mut self.net,
            )? {
                Filled::WouldBlock => return Ok(None),
                Filled::Data(n) => {
                    drained = short_drains && n < room;
                    self.end += n;
                    job.got_bytes = true;
                    let fed = job.reader.feed(&self.buf[self.start..self.end])?;
                    if let Some(w) = &mut job.wire {
                        let read = &self.buf[self.start..self.start + fed.consumed];
                        w.response.extend_from_slice(read);
                    }
                    self.start += fed.consumed;
                    fed.done
                }
                Filled::Eof => {
                    self.eof = true;
                    job.reader.eof()?
                }
            };
            if done {
                let (mut resp, keep) = job.reader.take(job.reused)?;
                resp.wire = job.wire.take().map(Box::new);
                self.drained = drained;
                return Ok(Some((resp, keep && !self.eof && !job.req.http10)));
            }
            if self.eof {
                return Err(FetchError::Protocol(
                    "response incomplete at end of stream".into(),
                ));
            }
        }
    }
}

/// Reads response bytes (plaintext, for TLS) into `buf`, counting the bytes read from and
/// written to the socket in `net`.
fn fill(
    stream: &mut TcpStream,
    tls: Option<&mut ClientConnection>,
    buf: &mut [u8],
    net: &mut (u64, u64),
) -> Result<Filled, FetchError> {
    let Some(tls) = tls else {
        loop {
            return match stream.read(buf) {
                Ok(0) => Ok(Filled::Eof),
                Ok(n) => {
                    net.0 += n as u64;
                    Ok(Filled::Data(n))
                }
                Err(e) if would_block(&e) => Ok(Filled::WouldBlock),
                Err(e) if interrupted(&e) => continue,
                Err(e) => Err(e.into()),
            };
        }
    };
    let mut tcp_eof = false;
    loop {
        match tls.reader().read(buf) {
            Ok(0) => return Ok(Filled::Eof), // close_notify
            Ok(n) => return Ok(Filled::Data(n)),
            // Closed without close_notify: many servers do; the HTTP framing says if it matters.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Filled::Eof),
            Err(e) if would_block(&e) && tcp_eof => return Ok(Filled::Eof),
            Err(e) if would_block(&e) => {}
            Err(e) => return Err(FetchError::Tls(e.to_string())),
        }
        match tls.read_tls(stream) {
            Ok(0) => tcp_eof = true,
            Ok(n) => net.0 += n as u64,
            Err(e) if would_block(&e) => return Ok(Filled::WouldBlock),
            Err(e) if interrupted(&e) => continue,
            Err(e) => return Err(e.into()),
        }
        if let Err(e) = tls.process_new_packets() {
            // Best effort: tell the server why (rustls queued an alert).
            if let Ok(n) = tls.write_tls(stream) {
                net.1 += n as u64;
            }
            return Err(FetchError::Tls(e.to_string()));
        }
        // Handshake flights and key updates go out as soon as rustls has them.
        while tls.wants_write() {
            match tls.write_tls(stream) {
                Ok(n) => net.1 += n as u64,
                Err(e) if would_block(&e) => break,
                Err(e) if interrupted(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// True when the caller's headers include `name`.
fn caller_sets(req: &FetchRequest, name: &str) -> bool {
    req.headers
        .iter()
        .any(|(n, _)| n.eq_ignore_ascii_case(name))
}

/// Writes the request head (RFC 9112 section 3) into `out`.
pub(super) fn encode_request(req: &FetchRequest, user_agent: &str, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(match (&req.post, req.head) {
        (Some(_), _) => b"POST ",
        (None, true) => b"HEAD ",
        (None, false) => b"GET ",
    });
    let target = &req.url[url::Position::BeforePath..url::Position::AfterQuery];
    out.extend_from_slice(if target.is_empty() {
        b"/"
    } else {
        target.as_bytes()
    });
    out.extend_from_slice(if req.http10 {
        b" HTTP/1.0\r\nHost: "
    } else {
        b" HTTP/1.1\r\nHost: "
    });
    // RFC 9110 7.2: the port only when it is not the scheme's default (url leaves it out then).
    out.extend_from_slice(req.url.host_str().unwrap_or_default().as_bytes());
    if let Some(port) = req.url.port() {
        out.push(b':');
        push_decimal(out, port);
    }
    out.extend_from_slice(b"\r\n");
    if !caller_sets(req, "user-agent") {
        out.extend_from_slice(b"User-Agent: ");
        out.extend_from_slice(user_agent.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if !caller_sets(req, "accept-encoding") {
        out.extend_from_slice(b"Accept-Encoding: gzip, deflate\r\n");
    }
    if !caller_sets(req, "connection") {
        out.extend_from_slice(if req.http10 {
            b"Connection: close\r\n"
        } else {
            b"Connection: keep-alive\r\n"
        });
    }
    for (name, value) in &req.headers {
        if name.eq_ignore_ascii_case("host") {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if let Some(body) = &req.post {
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(body.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body);
        return;
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends `n` in decimal (no allocation, unlike `to_string`, for every request of a web on a
/// port of its own).
fn push_decimal(out: &mut Vec<u8>, n: u16) {
    let mut digits = [0u8; 5];
    let mut i = digits.len();
    let mut n = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::push_decimal;

    #[test]
    fn ports_are_written_as_to_string_writes_them() {
        for port in (0..=u16::MAX)
            .step_by(7)
            .chain([0, 1, 9, 10, 99, 100, 65_535])
        {
            let mut out = b"x:".to_vec();
            push_decimal(&mut out, port);
            assert_eq!(out, format!("x:{port}").into_bytes());
        }
    }
}
