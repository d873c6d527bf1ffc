//! The crawl engine's HTTP/1.1 and HTTPS client: a [`Fetcher`] runs a poll thread on the
//! project's one reactor (`reactor.rs`, the same turn as the message loop's; no async runtime),
//! takes [`FetchRequest`]s over a channel and answers each with exactly one [`FetchResult`] on
//! [`Fetcher::results`].
//!
//! The poll thread keeps a keep-alive pool keyed by (scheme, address, host), caps the number of
//! open sockets (requests beyond it wait; an idle socket of another key is closed to make
//! room), retries once on a fresh connection a request whose reused connection died before
//! answering, decodes chunked transfer coding and gzip / deflate content coding with the
//! decoded size capped at the request's `max_body`, and enforces per-request connect and total
//! timeouts from one heap of deadlines. HTTPS runs rustls (ring provider) over the same
//! non-blocking sockets, trusting the webpki roots plus [`FetcherOptions::extra_roots`].
//!
//! ```no_run
//! use std::time::Duration;
//! use crawlfleet_net::fetch::{FetchRequest, Fetcher, FetcherOptions};
//!
//! let fetcher = Fetcher::spawn(FetcherOptions::default()).unwrap();
//! fetcher
//!     .submit(FetchRequest {
//!         id: 1,
//!         url: "http://localhost:8080/index.html".parse().unwrap(),
//!         addr: "127.0.0.1:8080".parse().unwrap(),
//!         headers: vec![("Accept".into(), "text/html".into())],
//!         max_body: 1 << 20,
//!         connect_timeout: Duration::from_secs(5),
//!         timeout: Duration::from_secs(30),
//!         head: false,
//!         http10: false,
//!         post: None,
//!     })
//!     .unwrap();
//! let done = fetcher.results.recv().unwrap();
//! match done.result {
//!     Ok(resp) => println!("{} {} bytes", resp.status, resp.body.len()),
//!     Err(e) => println!("{}: {e}", done.url),
//! }
//! fetcher.shutdown();
//! ```

mod conn;
mod http;
mod pool;
#[cfg(test)]
mod tests;
mod tls;

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::Waker;

use crate::reactor::Reactor;

/// Settings of a [`Fetcher`].
#[derive(Clone, Debug)]
pub struct FetcherOptions {
    /// Most sockets open at once (connecting, busy or idle). Default 512.
    pub max_connections: usize,
    /// An idle keep-alive connection is closed after this long. Default 15 s.
    pub idle_timeout: Duration,
    /// The `User-Agent` header of every request (unless the request sets its own).
    pub user_agent: String,
    /// Certificates trusted as roots besides the webpki roots (a test's self-signed CA).
    pub extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
    /// Keep the bytes of every exchange as they went over the wire ([`Response::wire`]), for
    /// archiving (WARC). Default false; [`Fetcher::keep_wire`] changes it.
    pub keep_wire: bool,
}

impl Default for FetcherOptions {
    fn default() -> FetcherOptions {
        FetcherOptions {
            max_connections: 512,
            idle_timeout: Duration::from_secs(15),
            user_agent: concat!("crawlfleet/", env!("CARGO_PKG_VERSION")).to_string(),
            extra_roots: Vec::new(),
            keep_wire: false,
        }
    }
}

/// One document to fetch.
#[derive(Clone, Debug)]
pub struct FetchRequest {
    /// The caller's id, given back in the [`FetchResult`].
    pub id: u64,
    /// `http` or `https`; the host is already ASCII (the url crate applies IDNA).
    pub url: url::Url,
    /// Where to connect (the scheduler resolved the host), IPv4 or IPv6.
    pub addr: SocketAddr,
    /// Extra request headers (If-None-Match, If-Modified-Since, Accept...). A `User-Agent`,
    /// `Accept-Encoding` or `Connection` given here replaces the fetcher's own; `Host` is always
    /// the fetcher's.
    pub headers: Vec<(String, String)>,
    /// Most body bytes kept (after decoding); beyond it the body is cut off and `truncated` set.
    pub max_body: usize,
    /// Limit on the TCP connect of a fresh connection.
    pub connect_timeout: Duration,
    /// Limit on the whole request, connect included, counted from when it got a connection
    /// (time spent waiting for a free socket under `max_connections` is not counted; see
    /// [`FetchResult::queued`]).
    pub timeout: Duration,
    /// Send HEAD instead of GET.
    pub head: bool,
    /// Ask in HTTP/1.0 (a collection's `use_http_1_1` off): the request line says HTTP/1.0,
    /// `Connection: close` is sent, and the connection is closed after the response.
    pub http10: bool,
    /// Send POST with this body instead of GET (a form login's submission): `Content-Length`
    /// is sent, a `Content-Type` belongs in `headers`. A POST always goes on a fresh
    /// connection, so it is never sent twice (RFC 9112 section 9.3.1.1: a non-idempotent
    /// request is not retried).
    pub post: Option<Vec<u8>>,
}

/// A complete response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code of the final response (1xx interim responses are skipped).
    pub status: u16,
    /// Header fields in arrival order, names lower-case. `content-encoding` stays as the server
    /// sent it although gzip / deflate were removed from `body`.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body with chunked transfer coding and gzip / deflate content coding removed (another
    /// content coding is kept as sent). Empty for HEAD, 204 and 304.
    pub body: Vec<u8>,
    /// The body was longer than `max_body` (after decoding) and was cut off there.
    pub truncated: bool,
    /// The request went over a kept-alive connection that had served an earlier request.
    pub reused_connection: bool,
    /// The exchange as sent and received, with [`FetcherOptions::keep_wire`].
    pub wire: Option<Box<Wire>>,
}

/// One exchange's bytes as they went over the wire (plaintext, for HTTPS).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wire {
    /// The request head as written.
    pub request: Vec<u8>,
    /// The response as read: any 1xx interim heads, the final head and the body with its
    /// transfer and content codings, up to where the reader stopped (a truncated body ends
    /// at `max_body` decoded bytes or a little beyond).
    pub response: Vec<u8>,
    /// The address the request went to.
    pub peer: SocketAddr,
}

impl Response {
    /// The value of the first header field called `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// Why a fetch failed.
#[derive(Debug)]
pub enum FetchError {
    /// The server refused the connection (nothing listens on that port).
    Refused,
    /// The TCP connect did not finish within `connect_timeout`.
    ConnectTimeout,
    /// The request did not finish within `timeout`.
    Timeout,
    /// TLS failed (handshake, certificate, bad record).
    Tls(String),
    /// The server's bytes are not HTTP/1.x (bad status line, bad chunk size, head too long...).
    Protocol(String),
    /// A socket error, or the connection closed before the response was complete.
    Io(io::Error),
    /// A gzip / deflate body did not decode.
    Decode(String),
    /// The fetcher shut down before the request finished.
    Shutdown,
    /// The request cannot be sent: unsupported scheme, no host, or a header with a line break.
    InvalidRequest(String),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Refused => f.write_str("connection refused"),
            FetchError::ConnectTimeout => f.write_str("connect timed out"),
            FetchError::Timeout => f.write_str("request timed out"),
            FetchError::Tls(e) => write!(f, "TLS error: {e}"),
            FetchError::Protocol(e) => write!(f, "HTTP protocol error: {e}"),
            FetchError::Io(e) => write!(f, "I/O error: {e}"),
            FetchError::Decode(e) => write!(f, "content decoding error: {e}"),
            FetchError::Shutdown => f.write_str("fetcher shut down"),
            FetchError::InvalidRequest(e) => write!(f, "invalid request: {e}"),
        }
    }
}

impl std::error::Error for FetchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FetchError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for FetchError {
    fn from(e: io::Error) -> FetchError {
        match e.kind() {
            io::ErrorKind::ConnectionRefused => FetchError::Refused,
            _ => FetchError::Io(e),
        }
    }
}

/// The answer to one [`FetchRequest`].
#[derive(Debug)]
pub struct FetchResult {
    /// The request's id.
    pub id: u64,
    /// The request's URL.
    pub url: url::Url,
    /// The response, or why there is none.
    pub result: Result<Response, FetchError>,
    /// When the request got a connection (its submission time if it never got one).
    pub started: Instant,
    /// From `started` until the result was sent.
    pub elapsed: Duration,
    /// How long the request waited for a free socket before `started`.
    pub queued: Duration,
    /// Bytes read from the network for this request: the response head and body as they
    /// came (TLS records for HTTPS, the handshake of a fresh connection included), an earlier
    /// attempt's too, whether or not it succeeded.
    pub net_read: u64,
    /// Bytes written to the network for it: the request (TLS records for HTTPS).
    pub net_written: u64,
}

/// State shared by the [`Fetcher`] handle and its poll thread.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Requests submitted and not yet answered. Incremented before a request enters the
    /// channel, decremented after its result left, so it never undercounts.
    in_flight: AtomicUsize,
    /// Set once by shutdown; the poll thread exits at its next turn.
    stop: AtomicBool,
    /// Sockets open now (connecting, busy or idle); written by the poll thread only.
    open: AtomicUsize,
    /// Most sockets ever open at once; written by the poll thread only.
    peak: AtomicUsize,
    /// Connections ever opened (each a TCP handshake, and for HTTPS a TLS one); written by
    /// the poll thread only.
    opened: AtomicU64,
    /// Requests started from now on keep their wire bytes.
    keep_wire: AtomicBool,
    /// A wake-up of the poll thread is on its way and it has not yet taken the submissions
    /// (set by the submitters, cleared by the poll thread before it takes them): submissions
    /// meanwhile ride on that wake-up instead of writing the eventfd again.
    wake_pending: AtomicBool,
}

/// A request on its way to the poll thread, with its submission time.
#[derive(Debug)]
pub(crate) struct Submitted {
    req: FetchRequest,
    at: Instant,
}

/// The fetch client: submit requests, read results from [`results`](Fetcher::results).
#[derive(Debug)]
pub struct Fetcher {
    /// One [`FetchResult`] per submitted request, in completion order.
    pub results: Receiver<FetchResult>,
    submit: Sender<Submitted>,
    waker: Arc<Waker>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Fetcher {
    /// Starts the poll thread. Fails when the poll or waker cannot be created, or an extra root
    /// certificate is not a usable CA certificate.
    pub fn spawn(opts: FetcherOptions) -> io::Result<Fetcher> {
        let tls = tls::client_config(&opts.extra_roots)?;
        let mut reactor = Reactor::new(pool::EVENT_CAPACITY, "fetch")?;
        let waker = reactor.waker();
        let registry = reactor.registry().try_clone()?;
        let (submit, submitted) = crossbeam_channel::unbounded();
        let (done, results) = crossbeam_channel::unbounded();
        let shared = Arc::new(Shared {
            in_flight: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            opened: AtomicU64::new(0),
            keep_wire: AtomicBool::new(opts.keep_wire),
            wake_pending: AtomicBool::new(false),
        });
        let mut driver = pool::Driver::new(registry, opts, tls, submitted, done, shared.clone());
        let thread = std::thread::Builder::new()
            .name("fetch".into())
            .spawn(move || {
                if let Err(e) = reactor.run(&mut driver) {
                    log::error!("fetch: poll failed, stopping the fetcher: {e}");
                }
                driver.finish();
            })?;
        Ok(Fetcher {
            results,
            submit,
            waker,
            shared,
            thread: Some(thread),
        })
    }

    /// Queues a request and wakes the poll thread. Fails with [`FetchError::InvalidRequest`]
    /// for a request that cannot be sent, [`FetchError::Shutdown`] when the poll thread is gone.
    pub fn submit(&self, req: FetchRequest) -> Result<(), FetchError> {
        validate(&req)?;
        self.enqueue(req).map_err(|b| b.1)?;
        self.wake()
    }

    /// Queues several requests with one wake-up of the poll thread. A request that cannot be
    /// sent is refused alone and returned with why (it gets no [`FetchResult`]); every other
    /// one is queued. When the poll thread is gone, every request comes back
    /// ([`FetchError::Shutdown`]).
    pub fn submit_many(
        &self,
        reqs: impl IntoIterator<Item = FetchRequest>,
    ) -> Vec<(FetchRequest, FetchError)> {
        let mut refused = Vec::new();
        let mut queued = 0usize;
        for req in reqs {
            if let Err(e) = validate(&req) {
                refused.push((req, e));
                continue;
            }
            match self.enqueue(req) {
                Ok(()) => queued += 1,
                Err(back) => refused.push(*back),
            }
        }
        if queued > 0 {
            if let Err(e) = self.wake() {
                log::warn!("fetch: {queued} requests queued and the poll thread gone: {e}");
            }
        }
        refused
    }

    /// Requests submitted and not yet answered.
    pub fn in_flight(&self) -> usize {
        // Relaxed: a gauge; no other memory is published through it.
        self.shared.in_flight.load(Ordering::Relaxed)
    }

    /// Sockets open now: connecting, busy or idle in the pool (at most `max_connections`).
    pub fn open_connections(&self) -> usize {
        // Relaxed: a gauge.
        self.shared.open.load(Ordering::Relaxed)
    }

    /// The most sockets that were ever open at once.
    pub fn peak_connections(&self) -> usize {
        // Relaxed: a gauge.
        self.shared.peak.load(Ordering::Relaxed)
    }

    /// The connections opened so far: with keep-alive, far fewer than the requests answered.
    pub fn opened_connections(&self) -> u64 {
        // Relaxed: a counter.
        self.shared.opened.load(Ordering::Relaxed)
    }

    /// Whether responses of requests started from now on carry [`Response::wire`].
    pub fn keep_wire(&self, on: bool) {
        // Relaxed: a setting read when a request starts; no other memory goes with it.
        self.shared.keep_wire.store(on, Ordering::Relaxed);
    }

    /// Stops the poll thread; requests not yet finished are answered [`FetchError::Shutdown`].
    /// Dropping the fetcher does the same.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// Queues a request that passed [`validate`]; gives it back when the poll thread is gone.
    fn enqueue(&self, req: FetchRequest) -> Result<(), Box<(FetchRequest, FetchError)>> {
        // Relaxed: see `in_flight`.
        self.shared.in_flight.fetch_add(1, Ordering::Relaxed);
        self.submit
            .send(Submitted {
                req,
                at: Instant::now(),
            })
            .map_err(|back| {
                self.shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                Box::new((back.0.req, FetchError::Shutdown))
            })
    }

    fn wake(&self) -> Result<(), FetchError> {
        // AcqRel pairs with the poll thread's swap before it takes submissions: `true` means
        // a wake-up is pending and the poll thread's later swap sees what was queued before
        // this one; `false` means it may be asleep with nothing pending, so wake it.
        if self.shared.wake_pending.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.waker.wake().map_err(|e| {
            log::warn!("fetch: cannot wake the poll thread: {e}");
            FetchError::Shutdown
        })
    }

    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        // Release pairs with the poll thread's Acquire: it sees every request sent before.
        self.shared.stop.store(true, Ordering::Release);
        if let Err(e) = self.waker.wake() {
            log::warn!("fetch: cannot wake the poll thread to stop it: {e}");
        }
        if thread.join().is_err() {
            log::error!("fetch: the poll thread panicked");
        }
    }
}

impl Drop for Fetcher {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Refuses requests the poll thread could not send.
fn validate(req: &FetchRequest) -> Result<(), FetchError> {
    let bad = |m: String| Err(FetchError::InvalidRequest(m));
    if !matches!(req.url.scheme(), "http" | "https") {
        return bad(format!(
            "scheme {:?} is neither http nor https",
            req.url.scheme()
        ));
    }
    if req.url.host_str().is_none_or(str::is_empty) {
        return bad("URL without host".into());
    }
    for (name, value) in &req.headers {
        let broken = |s: &str| s.bytes().any(|b| b == b'\r' || b == b'\n');
        if name.is_empty() || broken(name) || broken(value) || name.contains(':') {
            return bad(format!("header {name:?} is not a single header line"));
        }
        // A POST's framing is the fetcher's (RFC 9112 6.3: one Content-Length, no other).
        let framing = ["content-length", "transfer-encoding"];
        if req.post.is_some() && framing.iter().any(|f| name.eq_ignore_ascii_case(f)) {
            return bad(format!(
                "header {name:?} on a POST: its body's length is the fetcher's"
            ));
        }
    }
    if req.post.is_some() && req.head {
        return bad("both HEAD and POST".into());
    }
    Ok(())
}
