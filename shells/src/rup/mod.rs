//! `crawlfleet rup-server`: the server side of RUP (draft-cosmo; docs/rup.md).
//!
//! It serves `--root` over HTTP on net's event loop (the port limits of every role: the
//! framing's head and body caps, queued output, idle timeout, half-close), answers
//! `/rupinfo.txt` (3.1.1) and the CGI actions at the RUP-CGI URL (3.1.2, 3.3), keeps the
//! modification log of the root (a file watcher and a periodic rescan), and mails every
//! registered robot its update report (3.2) each latency period, on a thread of its own.
//!
//! One role thread owns the state (`core::rup`: the offer, the registry, the modification log)
//! and takes, in turn, the loop's requests, the watcher's paths, the mail thread's outcomes
//! and the loop's tick. Every answer that changes the registry is given after the change is on
//! disk; a report counts as sent (its sequence number and what it covered written down) only
//! once the SMTP server accepted it, and is retried until then, with the same number.

mod files;
pub(crate) mod mail;
mod scan;

use std::collections::HashSet;
use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use crawlfleet_core::datadir::DirLock;
use crawlfleet_core::rup::cgi::{self, Action, Offer};
use crawlfleet_core::rup::info::RupInfo;
use crawlfleet_core::rup::modlog::ModLog;
use crawlfleet_core::rup::registry::Registry;
use crawlfleet_core::rup::{Refusal, Span, Unit};
use crawlfleet_core::{clock, warn_limited};
use crawlfleet_net::http::{HttpFraming, Request};
use crawlfleet_net::{ConnId, Event, EventLoop, FrameBatch, Handle, Priority, TimerId};
use crossbeam_channel::{select, Receiver};
use log::info;

use crate::metrics::rup::SharedRup;
use files::Answer;

/// Arguments of `crawlfleet rup-server`.
#[derive(Debug, Args)]
pub struct RupServerArgs {
    /// The directory served (and watched for the modification log).
    #[arg(long)]
    pub root: PathBuf,
    /// Address to listen on (port 0 picks a free port, printed on standard output).
    #[arg(long)]
    pub listen: SocketAddr,
    /// Directory of the registry and the modification log (created if missing; locked while
    /// the server runs; not inside --root).
    #[arg(long)]
    pub data_dir: PathBuf,
    /// The SMTP server the reports are sent through (plain SMTP, no TLS).
    #[arg(long)]
    pub smtp: SocketAddr,
    /// The reports' sender address.
    #[arg(long)]
    pub from: String,
    /// The latency units offered, comma-separated: second, minute, hour, day, week, month.
    #[arg(long, default_value = "day,week,month")]
    pub latencies: String,
    /// How long the modification log is kept, INTEGER-UNIT (rupinfo.txt's MaxQuerySpan).
    #[arg(long, default_value = "4-week")]
    pub max_query_span: String,
    /// A pattern (regular expression) offered for robots' Exclude lists (repeatable).
    #[arg(long)]
    pub exclude: Vec<String>,
    /// A pattern (regular expression) offered for robots' IncludeOnly lists (repeatable).
    #[arg(long)]
    pub include_only: Vec<String>,
    /// The URL the site is known by, ending in '/' (default: http://LISTEN-ADDRESS/).
    #[arg(long)]
    pub url_base: Option<String>,
    /// The CGI's path (rupinfo.txt's RUP-CGI is URL-BASE plus this, without its '/').
    #[arg(long, default_value = "/rup-cgi")]
    pub cgi_path: String,
    /// Seconds between two full rescans of the root (the file watcher's safety net).
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub rescan_secs: u64,
    /// Seconds before a report the SMTP server did not take is tried again.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub retry_secs: u64,
    /// Largest CGI request body, in bytes.
    #[arg(long, default_value_t = 64 << 10)]
    pub max_body: usize,
    /// Append a line per answered request to this file: method, path (without the query),
    /// the CGI Action (`-` for other paths) and status, tab-separated.
    #[arg(long)]
    pub access_log: Option<PathBuf>,
    /// Serve `GET /metrics` (Prometheus text format) on this address (not on --listen, where
    /// a file named metrics is served like any other).
    #[arg(long)]
    pub metrics_listen: Option<SocketAddr>,
    /// Who may read --metrics-listen: tokens and TLS as on an administrative port (a token is
    /// required off loopback).
    #[command(flatten)]
    pub access: crate::cli::AdminAccess,
}

/// The role thread's tick: reports due, retries, rescans, expiry.
const TICK: TimerId = TimerId(1);
const TICK_EVERY: Duration = Duration::from_millis(250);

/// When the next tick is due: a quarter second from now, or just past the next whole second
/// when that comes first, so a report due at a second goes out then and not up to a tick later
/// (reports are due at whole Unix seconds; with a latency of seconds, every robot's report
/// leaves within milliseconds of the same second).
fn next_tick() -> Duration {
    let sub = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(Duration::ZERO, |d| {
            Duration::from_nanos(u64::from(d.subsec_nanos()))
        });
    let to_second = Duration::from_secs(1).saturating_sub(sub) + Duration::from_millis(2);
    to_second.min(TICK_EVERY)
}

/// The server's state, owned by the role thread.
struct Server {
    root: PathBuf,
    cgi_path: String,
    offer: Offer,
    rupinfo: String,
    registry: Registry,
    modlog: ModLog,
    handle: Handle,
    outbox: mail::Outbox,
    retry_secs: i64,
    rescan_every: Duration,
    last_rescan: Instant,
    /// Connections closing after their last answer: their further requests are not answered.
    closing: HashSet<ConnId>,
    /// `--access-log`.
    access: Option<std::fs::File>,
    /// What `/metrics` shows (`--metrics-listen`).
    stats: SharedRup,
}

/// Bytes of answers to one batch of a connection's pipelined requests past which the
/// connection is closed after the answer in hand: with the loop's cap on queued output, what a
/// client that never reads costs the server stays bounded whatever the size of the files.
const ANSWER_BUDGET: usize = 8 << 20;

fn parse_offer(args: &RupServerArgs, url_base: &str) -> Result<RupInfo, String> {
    let mut latencies = Vec::new();
    for name in args.latencies.split(',').map(str::trim) {
        let u =
            Unit::from_name(name).ok_or_else(|| format!("--latencies: unknown unit {name:?}"))?;
        if !latencies.contains(&u) {
            latencies.push(u);
        }
    }
    if latencies.is_empty() {
        return Err("--latencies: no unit".into());
    }
    let max_query_span: Span = args
        .max_query_span
        .parse()
        .map_err(|e| format!("--max-query-span: {e}"))?;
    if !args.cgi_path.starts_with('/') {
        return Err("--cgi-path must start with '/'".into());
    }
    Ok(RupInfo {
        cgi_url: format!("{url_base}{}", &args.cgi_path[1..]),
        latencies,
        exclude: args.exclude.clone(),
        include_only: args.include_only.clone(),
        max_query_span,
    })
}

/// A new registration key: 128 random bits from the kernel, in hex (unguessable).
pub(crate) fn new_key() -> Result<String, String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .map_err(|e| format!("no random bytes for a key: {e}"))?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Runs the server until `stop` (or killed).
pub fn run(args: &RupServerArgs, stop: &crate::stop::Stop) -> Result<(), String> {
    let root = args
        .root
        .canonicalize()
        .map_err(|e| format!("--root {}: {e}", args.root.display()))?;
    if !root.is_dir() {
        return Err(format!("--root {} is not a directory", root.display()));
    }
    std::fs::create_dir_all(&args.data_dir)
        .map_err(|e| format!("cannot create {}: {e}", args.data_dir.display()))?;
    let data = args.data_dir.canonicalize().map_err(|e| e.to_string())?;
    if data.starts_with(&root) {
        return Err("--data-dir must not be inside --root (its files would be logged)".into());
    }
    if !crawlfleet_core::rup::valid_email(&args.from) {
        return Err(format!(
            "--from {:?} is not a valid e-mail address",
            args.from
        ));
    }
    let _lock = DirLock::acquire(&data).map_err(|e| e.to_string())?;
    let registry = Registry::open(&data).map_err(|e| e.to_string())?;
    let modlog = ModLog::open(&data).map_err(|e| e.to_string())?;

    let lp = EventLoop::builder()
        .framing(HttpFraming::new(args.max_body))
        .answer_half_closed(true)
        .listen(args.listen)
        .thread_name("rup-loop")
        .spawn()
        .map_err(|e| e.to_string())?;
    let addr = lp.local_addrs.first().copied().unwrap_or(args.listen);
    let url_base = args
        .url_base
        .clone()
        .unwrap_or_else(|| format!("http://{addr}/"));
    if !url_base.ends_with('/') {
        return Err("--url-base must end with '/'".into());
    }
    let offer = Offer::new(parse_offer(args, &url_base)?, url_base.clone())?;
    let (mail_tx, mail_rx) = crossbeam_channel::unbounded();
    let (sent_tx, sent_rx) = crossbeam_channel::unbounded();
    let targets = mail::Targets::default();
    targets.write().push(args.smtp);
    mail::spawn(targets, args.from.clone(), mail_rx, sent_tx).map_err(|e| e.to_string())?;
    let stats = SharedRup::default();
    let _metrics = match args.metrics_listen {
        Some(addr) => Some(crate::metrics::serve(
            addr,
            crate::metrics::rup::route(stats.clone()),
            &args.access,
        )?),
        None => None,
    };
    let (watch_tx, watch_rx) = crossbeam_channel::unbounded();
    let _watcher = scan::watch(&root, watch_tx);
    lp.handle
        .set_timer(TICK, next_tick(), None)
        .map_err(|e| e.to_string())?;

    let mut s = Server {
        root,
        cgi_path: args.cgi_path.clone(),
        rupinfo: offer.info.render(),
        offer,
        registry,
        modlog,
        handle: lp.handle.clone(),
        outbox: mail::Outbox::new(mail_tx),
        retry_secs: args.retry_secs as i64,
        rescan_every: Duration::from_secs(args.rescan_secs),
        last_rescan: Instant::now(),
        closing: HashSet::new(),
        access: match &args.access_log {
            Some(p) => Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(|e| format!("--access-log {}: {e}", p.display()))?,
            ),
            None => None,
        },
        stats,
    };
    s.stats.lock().robots = s.registry.len() as u64;
    // What changed while the server was down.
    s.rescan();
    s.expire();
    info!(
        "RUP server: {} robots registered, {} files, modification log at {}",
        s.registry.len(),
        s.modlog.files().len(),
        s.modlog.head()
    );
    crate::announce(format_args!("crawlfleet rup-server listening on {addr}"));
    s.run(&lp.events, &watch_rx, &sent_rx, stop);
    let _ = lp.handle.shutdown();
    // Every registration and change was committed as it came; what the watcher saw last is
    // committed now.
    s.commit_modlog();
    info!("RUP server stopped");
    Ok(())
}

impl Server {
    fn run(
        &mut self,
        events: &Receiver<Event>,
        watch: &Receiver<Vec<PathBuf>>,
        sent: &Receiver<mail::Sent>,
        stop: &crate::stop::Stop,
    ) {
        loop {
            select! {
                recv(stop.receiver()) -> _ => return,
                recv(events) -> ev => match ev {
                    Ok(ev) => self.event(ev),
                    Err(_) => return,
                },
                recv(watch) -> paths => {
                    if let Ok(paths) = paths {
                        self.changed(paths, watch);
                    }
                }
                recv(sent) -> s => {
                    if let Ok(s) = s {
                        self.sent(s);
                    }
                }
            }
        }
    }

    fn event(&mut self, ev: Event) {
        match ev {
            Event::Frames(batch) => self.requests(&batch),
            Event::Closed { conn, .. } => {
                self.closing.remove(&conn);
            }
            Event::Timer(TICK) => self.tick(),
            _ => {}
        }
    }

    /// The watcher's paths (and any more already waiting), logged in one commit.
    fn changed(&mut self, first: Vec<PathBuf>, more: &Receiver<Vec<PathBuf>>) {
        let now = clock::unix_now();
        let mut paths: HashSet<PathBuf> = first.into_iter().collect();
        while let Ok(p) = more.try_recv() {
            paths.extend(p);
        }
        for p in paths {
            scan::look_at(&self.root, &p, &mut self.modlog, now);
        }
        self.commit_modlog();
    }

    fn rescan(&mut self) {
        let root = self.root.clone();
        scan::rescan(&root, &root, &mut self.modlog, clock::unix_now());
        self.commit_modlog();
        self.last_rescan = Instant::now();
    }

    fn commit_modlog(&mut self) {
        if let Err(e) = self.modlog.commit() {
            warn_limited!("rup-modlog", "modification log not written: {e}");
        }
        self.publish_modlog();
    }

    /// The modification log's figures for `/metrics` (after every change to it).
    fn publish_modlog(&self) {
        let kinds = self.modlog.changes().iter().map(|c| &c.kind);
        self.stats
            .lock()
            .set_modlog(kinds, self.modlog.files().len());
    }

    /// Drops the changes older than MaxQuerySpan (3.1.1: how long the server keeps them for
    /// GetIndex).
    fn expire(&mut self) {
        let span = self.offer.info.max_query_span.seconds() as i64;
        // Changes a robot with a latency longer than the span has not heard of yet stay
        // (reports only: GetIndex never reaches past the span).
        let unreported = self
            .registry
            .robots()
            .map(|r| r.sent_upto)
            .min()
            .unwrap_or(u64::MAX);
        if let Err(e) = self.modlog.expire(clock::unix_now() - span, unreported) {
            warn_limited!("rup-modlog", "modification log not compacted: {e}");
        }
        self.publish_modlog();
    }

    fn tick(&mut self) {
        let _ = self.handle.set_timer(TICK, next_tick(), None);
        if self.last_rescan.elapsed() >= self.rescan_every {
            self.rescan();
            self.expire();
        }
        let now = clock::unix_now();
        self.outbox
            .send_due(&self.registry, &self.offer, &self.modlog, now);
    }

    /// The mail thread's outcome for one report.
    fn sent(&mut self, s: mail::Sent) {
        let now = clock::unix_now();
        if !self.outbox.settle(&s, now, self.retry_secs) {
            self.stats.lock().reports_failed += 1;
            if let Err(e) = &s.result {
                warn_limited!(
                    "rup-mail",
                    "report {} to {} not sent (tried again in {} s): {e}",
                    s.mail.seq,
                    s.mail.to,
                    self.retry_secs
                );
            }
            return;
        }
        self.stats.lock().reports_sent += 1;
        if let Err(e) = mail::record_sent(&mut self.registry, &s.mail, now) {
            warn_limited!("rup-registry", "sequence number not written: {e}");
        }
    }

    /// Answers the requests of one batch, in order.
    fn requests(&mut self, batch: &FrameBatch) {
        let conn = batch.conn();
        // Bytes answered to this batch so far: past ANSWER_BUDGET the answer in hand is the
        // connection's last (DESIGN.md "Limits every port keeps").
        let mut answered = 0usize;
        for i in 0..batch.len() {
            if self.closing.contains(&conn) {
                return;
            }
            let (answer, keep_alive, head) = match batch.refusal(i) {
                Some(r) => {
                    warn_limited!("rup-http", "request refused: {} {}", r.status, r.why);
                    (Answer::text(r.status, r.why), false, false)
                }
                None => match batch.raw(i).and_then(Request::parse) {
                    Some(req) => {
                        let head = req.method == "HEAD";
                        let a = self.request(&req);
                        self.log_access(&req, a.status);
                        self.count(&req, a.status);
                        (a, req.keep_alive(), head)
                    }
                    None => (Answer::text(400, "malformed request"), false, false),
                },
            };
            // A few short pipelined requests can ask for far more than they weigh (a file of
            // megabytes each), all answered before the loop sees the connection's output
            // queue fill: once one batch's answers pass the budget, the connection closes
            // after the answer in hand, and the client asks again for the rest (RFC 9112
            // 9.3.2: a client retries idempotent requests left unanswered on a close).
            answered += answer.body.len();
            let keep_alive = keep_alive && !(answered > ANSWER_BUDGET && i + 1 < batch.len());
            let _ = self
                .handle
                .send(conn, Priority::Normal, response(&answer, keep_alive, head));
            if !keep_alive {
                self.closing.insert(conn);
                let _ = self.handle.close(conn);
            }
        }
    }

    /// The `Action` item of a request to the CGI (None for other paths, or without one).
    fn cgi_action(&self, req: &Request<'_>) -> Option<String> {
        let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
        if path != self.cgi_path {
            return None;
        }
        let form = if req.method == "POST" {
            req.body
        } else {
            query.as_bytes()
        };
        cgi::parse_form(form)
            .into_iter()
            .find(|(k, _)| k == "Action")
            .map(|(_, v)| v)
    }

    /// Counts an answered request for `/metrics`.
    fn count(&self, req: &Request<'_>, status: u16) {
        let path = req.path.split_once('?').map_or(req.path, |(p, _)| p);
        let mut stats = self.stats.lock();
        if path == self.cgi_path {
            stats.count_cgi(self.cgi_action(req).as_deref(), status);
            if status == 200 {
                stats.robots = self.registry.len() as u64;
            }
        } else if path != "/rupinfo.txt" && status == 200 {
            stats.files_served += 1;
        } else if status == 304 {
            stats.not_modified += 1;
        }
    }

    /// A line of `--access-log`.
    fn log_access(&mut self, req: &Request<'_>, status: u16) {
        use std::io::Write;
        if self.access.is_none() {
            return;
        }
        let path = req.path.split_once('?').map_or(req.path, |(p, _)| p);
        let action = self
            .cgi_action(req)
            .map_or_else(|| "-".to_owned(), |v| v.replace(['\t', '\n'], " "));
        let Some(f) = &mut self.access else {
            return;
        };
        if let Err(e) = writeln!(f, "{}\t{path}\t{action}\t{status}", req.method) {
            warn_limited!("rup-http", "access log: {e}");
        }
    }

    fn request(&mut self, req: &Request<'_>) -> Answer {
        let (path, query) = req.path.split_once('?').unwrap_or((req.path, ""));
        let field = |n| req.header(n).and_then(|v| std::str::from_utf8(v).ok());
        if path == self.cgi_path {
            let form = match req.method {
                "GET" => query.as_bytes(),
                "POST" => {
                    let ct = field("content-type").unwrap_or("application/x-www-form-urlencoded");
                    if !ct.split(';').next().is_some_and(|t| {
                        t.trim()
                            .eq_ignore_ascii_case("application/x-www-form-urlencoded")
                    }) {
                        return Answer::text(
                            400,
                            "the body must be application/x-www-form-urlencoded",
                        );
                    }
                    req.body
                }
                _ => {
                    let mut a = Answer::text(405, "the RUP CGI takes GET and POST");
                    a.extra.push(("Allow", "GET, POST".into()));
                    return a;
                }
            };
            return self.cgi(form);
        }
        if req.method != "GET" && req.method != "HEAD" {
            let mut a = Answer::text(405, "only GET and HEAD here");
            a.extra.push(("Allow", "GET, HEAD".into()));
            return a;
        }
        if path == "/rupinfo.txt" {
            return Answer {
                status: 200,
                content_type: "text/plain; charset=utf-8",
                extra: Vec::new(),
                body: self.rupinfo.clone().into_bytes(),
            };
        }
        files::serve(
            &self.root,
            path,
            field("if-none-match"),
            field("if-modified-since"),
        )
    }

    fn cgi(&mut self, form: &[u8]) -> Answer {
        let done = Action::parse(cgi::parse_form(form), &self.offer).and_then(|action| {
            let key = match &action {
                Action::Register { .. } => new_key().map_err(|e| Refusal {
                    status: 503,
                    reason: e,
                })?,
                _ => String::new(),
            };
            cgi::answer(
                action,
                &self.offer,
                &mut self.registry,
                &self.modlog,
                clock::unix_now(),
                || key,
            )
        });
        match done {
            Ok(doc) => Answer {
                status: 200,
                content_type: "text/html; charset=utf-8",
                extra: Vec::new(),
                body: doc.into_bytes(),
            },
            Err(r) => {
                warn_limited!("rup-cgi", "CGI request refused: {r}");
                Answer::text(r.status, &r.reason)
            }
        }
    }
}

/// The bytes of an answer: for HEAD and 304 the header fields without the body (HEAD keeps
/// the body's Content-Length; 304 sends none, RFC 9110 15.4.5).
fn response(a: &Answer, keep_alive: bool, head: bool) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::with_capacity(256 + a.body.len());
    let _ = write!(
        out,
        "HTTP/1.1 {} {}\r\nServer: crawlfleet\r\n",
        a.status,
        crawlfleet_net::http::reason_phrase(a.status)
    );
    if a.status != 304 {
        let _ = write!(
            out,
            "Content-Type: {}\r\nContent-Length: {}\r\n",
            a.content_type,
            a.body.len()
        );
    }
    for (n, v) in &a.extra {
        let _ = write!(out, "{n}: {v}\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    if !head && a.status != 304 {
        out.extend_from_slice(&a.body);
    }
    out
}
