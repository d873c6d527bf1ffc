//! The RUP column of `crawlfleet bench refresh` (docs/rup.md): a `crawlfleet rup-server` per
//! host of the web, watching the files nginx serves, behind nginx (which passes `/rupinfo.txt`
//! and the CGI to it, so that its access log holds every request of the cycle), and a mail
//! relay that hands the servers' update reports to the nodes' `--rup-smtp` receivers.
//!
//! A rup-server sends every report to the one SMTP server it is given, and the multinode
//! scheduler decides which node crawls a site (the least loaded one when the site starts), so
//! the relay hands each report to every node, as a mail server with one alias per node would:
//! the node that registered with the report's site applies it, the others drop it (a log line
//! at most a second). The relay notes when each report arrived and how many paths it named,
//! which tells when the servers told the robots what changed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use lettre::address::Envelope;
use lettre::transport::smtp::SmtpTransport;
use lettre::Transport;
use parking_lot::Mutex;

use crate::crawl::err;
use crate::{BenchError, RoleChild};

/// The robot's address in the benchmark's collection.
pub(super) const ROBOT: &str = "robot@bench.example.org";
/// The rup-servers' sender.
const FROM: &str = "rup@bench.example.org";
/// The CGI's path on every site.
const CGI: &str = "/rup-cgi";
/// Concurrent deliveries to one node: as many sessions as its receiver serves at once (16),
/// as a mail server delivers a burst to one destination in parallel (Postfix, for one, up to
/// 20 connections by default). The receiver spools the mails of sessions waiting together
/// with one write (`rup_spool::Spooler`).
const DELIVERERS: usize = 16;

/// The port a host's rup-server listens on (beside nginx's, on the host's address).
fn rup_port(site: SocketAddr) -> SocketAddr {
    SocketAddr::new(site.ip(), site.port().wrapping_add(1))
}

/// What nginx adds to the server block of `site`: `/rupinfo.txt` and the CGI passed to the
/// site's rup-server.
pub(super) fn nginx_locations(site: SocketAddr) -> String {
    let up = rup_port(site);
    format!(
        "        location = /rupinfo.txt {{\n            proxy_pass http://{up};\n            \
         proxy_http_version 1.1;\n        }}\n        location = {CGI} {{\n            \
         proxy_pass http://{up};\n            proxy_http_version 1.1;\n        }}\n"
    )
}

/// A report the relay passed on.
#[derive(Clone, Debug)]
pub(super) struct Relayed {
    /// When it arrived (Unix seconds).
    pub(super) at: f64,
    /// Its URLBase.
    pub(super) url_base: String,
    /// The URLs its change lines named (a path may be on several lines of a report: each
    /// change the server saw is one).
    pub(super) urls: Vec<String>,
    /// When each node's receiver took it (answered 250), in no particular order.
    pub(super) delivered: Vec<f64>,
}

/// The rup-servers and the relay; the servers are stopped when this is dropped.
pub(super) struct RupSites {
    _servers: Vec<RoleChild>,
    /// Every report relayed so far, in arrival order.
    pub(super) relayed: Arc<Mutex<Vec<Relayed>>>,
    nodes: Sender<Vec<SocketAddr>>,
}

/// Starts the relay and a rup-server for each of `sites` over its web root (`root_of`),
/// offering a latency of seconds. The relay holds the reports until [`RupSites::deliver_to`]
/// names the nodes.
pub(super) fn start(
    dir: &Path,
    sites: &[SocketAddr],
    root_of: &dyn Fn(&SocketAddr) -> std::path::PathBuf,
) -> Result<RupSites, BenchError> {
    let relayed = Arc::new(Mutex::new(Vec::new()));
    let (nodes, nodes_rx) = crossbeam_channel::bounded(1);
    let relay = start_relay(nodes_rx, relayed.clone())?;
    let exe = std::env::current_exe().map_err(err("the benchmark's executable"))?;
    let mut servers = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        let data = dir.join(format!("rup-server-{i}"));
        std::fs::create_dir_all(&data).map_err(err("a rup-server's data directory"))?;
        let child = Command::new(&exe)
            .args(["role", "rup-server", "--root"])
            .arg(root_of(site))
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen", &rup_port(*site).to_string()])
            .args(["--url-base", &format!("http://{site}/")])
            .args(["--cgi-path", CGI])
            .args(["--smtp", &relay.to_string(), "--from", FROM])
            .args(["--latencies", "second", "--max-query-span", "1-hour"])
            .args(["--rescan-secs", "3600"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .map_err(err("cannot start a rup-server"))?;
        let mut server = RoleChild { child, dir: data };
        crate::read_announced(&mut server.child, "rup-server")?;
        servers.push(server);
    }
    Ok(RupSites {
        _servers: servers,
        relayed,
        nodes,
    })
}

impl RupSites {
    /// The nodes' SMTP receivers, to which the relay hands every report.
    pub(super) fn deliver_to(&self, nodes: &[SocketAddr]) {
        let _ = self.nodes.send(nodes.to_vec());
    }

    /// The URL bases that got a report so far.
    pub(super) fn heard(&self) -> std::collections::HashSet<String> {
        self.relayed
            .lock()
            .iter()
            .map(|r| r.url_base.clone())
            .collect()
    }

    /// The reports naming changes that arrived at or after `since`: (first arrival, last
    /// arrival, reports, distinct URLs named).
    pub(super) fn changes_since(&self, since: f64) -> (f64, f64, u64, u64) {
        let r = self.relayed.lock();
        let with: Vec<&Relayed> = r
            .iter()
            .filter(|m| m.at >= since && !m.urls.is_empty())
            .collect();
        let urls: std::collections::HashSet<&String> =
            with.iter().flat_map(|m| m.urls.iter()).collect();
        (
            with.iter().map(|m| m.at).fold(f64::INFINITY, f64::min),
            with.iter().map(|m| m.at).fold(0.0, f64::max),
            with.len() as u64,
            urls.len() as u64,
        )
    }

    /// The reports naming changes that arrived at or after `since`: each one's site
    /// (`address:port`, as nginx logs it), when the relay got it and when the last node took
    /// it (0 while none has).
    pub(super) fn arrivals_since(&self, since: f64) -> Vec<(String, f64, f64)> {
        self.relayed
            .lock()
            .iter()
            .filter(|m| m.at >= since && !m.urls.is_empty())
            .map(|m| {
                let site = m
                    .url_base
                    .trim_start_matches("http://")
                    .trim_end_matches('/');
                let took = m.delivered.iter().copied().fold(0.0, f64::max);
                (site.to_string(), m.at, took)
            })
            .collect()
    }
}

/// One message to deliver: envelope, the message as received, and its place among the
/// reports relayed (to note when each node took it), if it is one.
type Outgoing = (Envelope, Arc<Vec<u8>>, Option<usize>);

/// Starts the relay on a loopback port; returns its address. Messages wait until the nodes
/// are known (`nodes`), then go to each.
fn start_relay(
    nodes: Receiver<Vec<SocketAddr>>,
    relayed: Arc<Mutex<Vec<Relayed>>>,
) -> Result<SocketAddr, BenchError> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(err("the relay's port"))?;
    let addr = l.local_addr().map_err(err("the relay's port"))?;
    let (incoming, waiting) = crossbeam_channel::unbounded::<Outgoing>();
    let noted = relayed.clone();
    std::thread::spawn(move || {
        let Ok(nodes) = nodes.recv() else { return };
        let mut queues: Vec<Sender<Outgoing>> = Vec::new();
        for node in nodes {
            let (tx, rx) = crossbeam_channel::unbounded::<Outgoing>();
            for _ in 0..DELIVERERS {
                let (rx, noted) = (rx.clone(), noted.clone());
                std::thread::spawn(move || deliver(node, &rx, &noted));
            }
            queues.push(tx);
        }
        for m in waiting {
            for q in &queues {
                let _ = q.send(m.clone());
            }
        }
    });
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (q, r) = (incoming.clone(), relayed.clone());
            std::thread::spawn(move || {
                if let Err(e) = session(c, &q, &r) {
                    log::debug!("relay session: {e}");
                }
            });
        }
    });
    Ok(addr)
}

/// Hands messages to the receiver at `node`, trying again while it refuses (it answers 421
/// past its sessions).
fn deliver(node: SocketAddr, rx: &Receiver<Outgoing>, relayed: &Mutex<Vec<Relayed>>) {
    let t = SmtpTransport::builder_dangerous(node.ip().to_string())
        .port(node.port())
        .timeout(Some(Duration::from_secs(20)))
        .build();
    for (env, msg, report) in rx {
        for attempt in 0..50 {
            match t.send_raw(&env, &msg) {
                Ok(_) => {
                    let at = crate::refresh::unix_now();
                    if let Some(i) = report {
                        if let Some(r) = relayed.lock().get_mut(i) {
                            r.delivered.push(at);
                        }
                    }
                    break;
                }
                Err(e) => {
                    log::debug!("relay to {node} (attempt {attempt}): {e}");
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// One SMTP session (RFC 5321: HELO/EHLO, MAIL, RCPT, DATA, RSET, NOOP, QUIT): each message
/// is noted and queued for the nodes before the 250 that accepts it.
fn session(
    c: TcpStream,
    queue: &Sender<Outgoing>,
    relayed: &Mutex<Vec<Relayed>>,
) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut out = c.try_clone()?;
    // Acknowledged at once, as the node's receiver does (`QuickAck`): lettre, which the
    // rup-servers send with, writes a message's final "." apart from it.
    let mut r = BufReader::new(crawlfleet_shells::node::QuickAck(c).take(64 << 20));
    out.write_all(b"220 crawlfleet-bench relay\r\n")?;
    let (mut from, mut to) = (None, Vec::new());
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
        let arg = |l: &str| -> Option<String> {
            let (_, rest) = l.split_once(':')?;
            let a = rest.trim().trim_start_matches('<');
            Some(a.split('>').next().unwrap_or("").to_owned())
        };
        let reply: &[u8] = match verb.as_str() {
            "HELO" | "EHLO" => b"250 relay\r\n",
            "MAIL" => {
                from = arg(&line);
                to.clear();
                b"250 OK\r\n"
            }
            "RCPT" => {
                to.extend(arg(&line));
                b"250 OK\r\n"
            }
            "DATA" => {
                out.write_all(b"354 go on\r\n")?;
                let msg = read_data(&mut r)?;
                relay(&msg, from.take(), std::mem::take(&mut to), queue, relayed);
                b"250 OK\r\n"
            }
            "QUIT" => {
                out.write_all(b"221 bye\r\n")?;
                return Ok(());
            }
            "RSET" | "NOOP" => b"250 OK\r\n",
            _ => b"502 not here\r\n",
        };
        out.write_all(reply)?;
    }
}

/// The message up to the line ".", dots unstuffed, CRLF lines.
fn read_data(r: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut msg = Vec::new();
    loop {
        let mut line = Vec::new();
        if r.read_until(b'\n', &mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == b".\r\n" || line == b".\n" {
            return Ok(msg);
        }
        let l = line.strip_prefix(b".").unwrap_or(&line);
        msg.extend_from_slice(l);
    }
}

fn relay(
    msg: &[u8],
    from: Option<String>,
    to: Vec<String>,
    queue: &Sender<Outgoing>,
    relayed: &Mutex<Vec<Relayed>>,
) {
    let at = crate::refresh::unix_now();
    let report = mailparse::parse_mail(msg)
        .ok()
        .and_then(|m| m.get_body().ok())
        .and_then(|b| crawlfleet_core::rup::report::parse(&b).ok());
    let mut index = None;
    if let Some(rep) = report {
        let mut r = relayed.lock();
        index = Some(r.len());
        r.push(Relayed {
            at,
            url_base: rep.url_base.clone(),
            urls: rep
                .lines
                .iter()
                .flat_map(|l| l.2.iter().map(|p| rep.url(p)))
                .collect(),
            delivered: Vec::new(),
        });
    }
    let from = from.and_then(|f| f.parse().ok());
    let to: Vec<_> = to.iter().filter_map(|t| t.parse().ok()).collect();
    let Ok(env) = Envelope::new(from, to) else {
        return;
    };
    let _ = queue.send((env, Arc::new(msg.to_vec()), index));
}
