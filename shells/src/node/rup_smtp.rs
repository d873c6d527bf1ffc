//! `crawlfleet node --rup-smtp HOST:PORT`: a small SMTP receiver (RFC 5321) for the RUP
//! robot's update reports (draft-cosmo 3.2: "MIME compliant e-mail messages"). It accepts
//! mail for the robot addresses of the node's collections only, puts each message in the spool
//! (`rup_spool`) durably before answering 250 (the sessions with a message at the same time
//! share one write and its syncs), and wakes the robot thread.
//!
//! A thread accepts, and each connection has a thread of its own, with the limits every port
//! keeps: at most [`MAX_SESSIONS`] at once (more are answered 421 and closed), lines of at most
//! [`MAX_LINE`] bytes (RFC 5321 4.5.3.1.4-6 allow 512 for a command and 1,000 for a text
//! line), a message of at most `rup_spool::MAX_MAIL` bytes (552), and a read timeout.

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::warn_limited;
use crossbeam_channel::Sender;
use parking_lot::RwLock;

use super::rup_spool;

/// Sessions served at once.
pub const MAX_SESSIONS: usize = 16;
/// Longest line read, CRLF included.
pub const MAX_LINE: usize = 4096;
/// A client silent this long is dropped (RFC 5321 4.5.3.2 suggests minutes; reports come
/// from a relay that writes at once).
const IDLE: Duration = Duration::from_secs(60);

/// What the receiver takes, as the robot thread keeps it up to date.
#[derive(Clone, Default)]
pub struct Recipients {
    /// The addresses mail is accepted for (the `rup.robot_email` of the collections),
    /// compared without regard to ASCII case.
    pub addresses: Arc<RwLock<HashSet<String>>>,
    /// The URL bases of the sites the robot registered with or is registering with: a report
    /// of another site is one the robot would drop (a mail server may deliver every report to
    /// every node, docs/rup.md), so it is accepted and dropped without being spooled.
    pub sites: Arc<RwLock<HashSet<String>>>,
}

/// A received TCP stream that acknowledges at once what it reads (TCP_QUICKACK after each
/// read, Linux; elsewhere a plain stream).
///
/// An SMTP client that writes a message and then its terminating `.` line in two writes
/// (lettre does) has Nagle's algorithm hold the small second write until the first is
/// acknowledged; a receiver that has nothing to answer yet (the line is not complete) delays
/// that acknowledgement, up to 40 ms on Linux. Each message then waited about 40 ms, and a
/// burst of reports (every site's at the same second) came in at a few per 40 ms.
pub struct QuickAck(pub TcpStream);

impl Read for QuickAck {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(buf)?;
        // Linux leaves quick-ack mode again on its own: set after every read.
        #[cfg(target_os = "linux")]
        let _ = rustix::net::sockopt::set_tcp_quickack(&self.0, true);
        Ok(n)
    }
}

/// Starts the receiver on `listen`; returns the address bound.
pub fn start(
    listen: SocketAddr,
    data_dir: &Path,
    recipients: Recipients,
    wake: Sender<()>,
) -> io::Result<SocketAddr> {
    let l = crawlfleet_net::reserve::bind(listen)?;
    let addr = l.local_addr()?;
    let spool = Arc::new(rup_spool::Spooler::new(data_dir));
    let live = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("rup-smtp".into())
        .spawn(move || {
            for c in l.incoming() {
                let mut c = match c {
                    Ok(c) => c,
                    Err(e) => {
                        warn_limited!("rup-smtp", "RUP SMTP receiver: accept: {e}");
                        std::thread::sleep(Duration::from_millis(50));
                        continue;
                    }
                };
                if live.fetch_add(1, Ordering::SeqCst) >= MAX_SESSIONS {
                    live.fetch_sub(1, Ordering::SeqCst);
                    let _ = c.write_all(b"421 too many sessions, try again later\r\n");
                    continue;
                }
                let (dd, rc, wk, lv) = (
                    spool.clone(),
                    recipients.clone(),
                    wake.clone(),
                    live.clone(),
                );
                let spawned = std::thread::Builder::new()
                    .name("rup-smtp-session".into())
                    .spawn(move || {
                        if let Err(e) = session(c, &dd, &rc, &wk) {
                            log::debug!("RUP SMTP session ended: {e}");
                        }
                        lv.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    live.fetch_sub(1, Ordering::SeqCst);
                }
            }
        })?;
    Ok(addr)
}

/// Reads one line (to LF) of at most [`MAX_LINE`] bytes; `None` at the end of the stream.
fn read_line(r: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<()>> {
    line.clear();
    let n = r.take(MAX_LINE as u64).read_until(b'\n', line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
    }
    Ok(Some(()))
}

/// The address of `MAIL FROM:<a>` / `RCPT TO:<a>` after the colon (parameters dropped).
fn path_of(arg: &str) -> String {
    let a = arg.trim();
    let a = match (a.find('<'), a.find('>')) {
        (Some(i), Some(j)) if i < j => &a[i + 1..j],
        _ => a.split_whitespace().next().unwrap_or(""),
    };
    a.to_ascii_lowercase()
}

fn session(
    c: TcpStream,
    spool: &rup_spool::Spooler,
    recipients: &Recipients,
    wake: &Sender<()>,
) -> io::Result<()> {
    c.set_read_timeout(Some(IDLE))?;
    c.set_write_timeout(Some(IDLE))?;
    let mut w = c.try_clone()?;
    let mut r = BufReader::new(QuickAck(c));
    w.write_all(b"220 crawlfleet RUP robot ESMTP\r\n")?;
    let mut line = Vec::new();
    let mut from: Option<String> = None;
    let mut to: Vec<String> = Vec::new();
    loop {
        match read_line(&mut r, &mut line) {
            Ok(Some(())) => {}
            Ok(None) => return Ok(()),
            Err(e) => {
                let _ = w.write_all(b"500 line too long\r\n");
                return Err(e);
            }
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\r', '\n']);
        let (verb, arg) = text.split_once(' ').unwrap_or((text, ""));
        let verb = verb.to_ascii_uppercase();
        let reply: String = match verb.as_str() {
            "EHLO" => format!(
                "250-crawlfleet\r\n250-8BITMIME\r\n250 SIZE {}\r\n",
                rup_spool::MAX_MAIL
            ),
            "HELO" => "250 crawlfleet\r\n".into(),
            "MAIL" => match arg.split_once(':') {
                Some((k, a)) if k.trim().eq_ignore_ascii_case("FROM") => {
                    from = Some(path_of(a));
                    to.clear();
                    "250 OK\r\n".into()
                }
                _ => "501 MAIL FROM:<address>\r\n".into(),
            },
            "RCPT" => match arg.split_once(':') {
                _ if from.is_none() => "503 MAIL first\r\n".into(),
                Some((k, a)) if k.trim().eq_ignore_ascii_case("TO") => {
                    let a = path_of(a);
                    if recipients.addresses.read().contains(&a) {
                        to.push(a);
                        "250 OK\r\n".into()
                    } else {
                        "550 no such robot here\r\n".into()
                    }
                }
                _ => "501 RCPT TO:<address>\r\n".into(),
            },
            "DATA" if to.is_empty() => "503 RCPT first\r\n".into(),
            "DATA" => {
                w.write_all(b"354 end with <CRLF>.<CRLF>\r\n")?;
                let reply = match data(&mut r, &mut line)? {
                    None => "552 message too large\r\n".to_owned(),
                    Some(mail) if !for_our_sites(&mail, recipients) => {
                        "250 not a report of this node's sites: dropped\r\n".to_owned()
                    }
                    Some(mail) => match spool.put(mail) {
                        Ok(_) => {
                            let _ = wake.try_send(());
                            "250 spooled\r\n".to_owned()
                        }
                        Err(e) => {
                            warn_limited!("rup-smtp", "RUP report not spooled: {e}");
                            "451 cannot spool now\r\n".to_owned()
                        }
                    },
                };
                from = None;
                to.clear();
                reply
            }
            "RSET" => {
                from = None;
                to.clear();
                "250 OK\r\n".into()
            }
            "NOOP" => "250 OK\r\n".into(),
            "VRFY" => "252 cannot verify\r\n".into(),
            "QUIT" => {
                w.write_all(b"221 bye\r\n")?;
                return Ok(());
            }
            _ => "502 not implemented\r\n".into(),
        };
        w.write_all(reply.as_bytes())?;
    }
}

/// False when `mail` is a report (3.2) of a site the robot did not register with; anything
/// else (a report of one of its sites, a mail that is no report) goes to the spool, where the
/// robot reads it as before.
fn for_our_sites(mail: &[u8], recipients: &Recipients) -> bool {
    let Ok(body) = super::rup::body_of(mail) else {
        return true;
    };
    match crawlfleet_core::rup::report::parse(&body) {
        Ok(rep) => {
            let ours = recipients.sites.read().contains(&rep.url_base);
            if !ours {
                log::debug!(
                    "a RUP report for {}, which this node did not register with: dropped",
                    rep.url_base
                );
            }
            ours
        }
        Err(_) => true,
    }
}

/// The message after DATA, dot-stuffing undone (RFC 5321 4.5.2), to the line holding a lone
/// "."; `None` when it grew past the limit (read to its end all the same, so the session can
/// go on).
fn data(r: &mut impl BufRead, line: &mut Vec<u8>) -> io::Result<Option<Vec<u8>>> {
    let mut mail = Vec::new();
    let mut over = false;
    loop {
        if read_line(r, line)?.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed inside DATA",
            ));
        }
        if line == b".\r\n" || line == b".\n" {
            return Ok((!over).then_some(mail));
        }
        let l = line.strip_prefix(b".").unwrap_or(line);
        if mail.len() + l.len() > rup_spool::MAX_MAIL {
            over = true;
            mail = Vec::new();
        }
        if !over {
            mail.extend_from_slice(l);
        }
    }
}
