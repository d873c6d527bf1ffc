//! Sending the update reports (draft-cosmo 3.2: "MIME compliant e-mail messages") over SMTP
//! with lettre, on a thread of their own, so that a slow or unreachable mail server never holds
//! up the HTTP answers or the modification log. `crawlfleet rup-server` and the synthetic web
//! of `crawlfleet up` (synthweb/rup.rs) both send through it.
//!
//! A message is `text/plain; charset=us-ascii` whose body is the report with CRLF line ends
//! (its lines are kept under 1,000 bytes, so it goes as 7bit, byte for byte). The role thread
//! hands over one [`Mail`] at a time per robot and learns how each went from a [`Sent`].

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::rup::cgi::Offer;
use crawlfleet_core::rup::modlog::ModLog;
use crawlfleet_core::rup::registry::{Registry, Robot};
use crawlfleet_core::rup::report;
use crossbeam_channel::{Receiver, Sender};
use lettre::message::header::ContentType;
use lettre::transport::smtp::SmtpTransport;
use lettre::{Message, Transport};
use parking_lot::RwLock;

/// The reports' line end (mail: CRLF).
const NL: &str = "\r\n";

/// A report to send.
#[derive(Debug)]
pub struct Mail {
    /// The robot's key.
    pub key: String,
    /// The report's sequence number.
    pub seq: u64,
    /// The last modification log entry it covers.
    pub upto: u64,
    /// The robot's address.
    pub to: String,
    /// The site's URL base (the subject names it).
    pub url_base: String,
    /// The report (3.2), CRLF lines.
    pub body: String,
}

/// How a [`Mail`] went.
#[derive(Debug)]
pub struct Sent {
    /// The mail.
    pub mail: Mail,
    /// `Err` with why it was not accepted by the SMTP server.
    pub result: Result<(), String>,
}

/// Where the reports go: one SMTP server, or several that each get every report (as a mail
/// server with one alias per node of a cluster would deliver them; the node that registered
/// with the site applies it, docs/rup.md). Empty until known: a report then waits.
pub type Targets = Arc<RwLock<Vec<SocketAddr>>>;

/// The next report of robot `r` of the site of `offer` (3.2: numbered one past the last one
/// sent; 3.3.3: one each period, empty or not): the changes of `modlog` it has not heard of,
/// filtered by its patterns.
pub fn report_for(offer: &Offer, modlog: &ModLog, r: &Robot) -> Mail {
    let seq = r.seq + 1;
    let filter = offer.filter(&r.patterns);
    Mail {
        key: r.key.clone(),
        seq,
        upto: modlog.head(),
        to: r.email.clone(),
        url_base: offer.url_base.clone(),
        body: report::render(seq, &offer.url_base, modlog.since(r.sent_upto), &filter, NL),
    }
}

/// Records a report the SMTP server accepted: its number, what it covered and when the next
/// one is due. Nothing for a robot unregistered, re-registered or re-addressed meanwhile.
pub fn record_sent(registry: &mut Registry, mail: &Mail, now: i64) -> Result<(), String> {
    let Some(r) = registry.get(&mail.key) else {
        return Ok(());
    };
    if r.email != mail.to || r.seq + 1 != mail.seq {
        return Ok(());
    }
    let mut r = r.clone();
    let period = r.latency.seconds() as i64;
    r.seq = mail.seq;
    r.sent_upto = mail.upto;
    r.next_due += period;
    if r.next_due <= now {
        // Far behind (the server was down): the next one a period from now.
        r.next_due = now + period;
    }
    registry.update(r).map_err(|e| e.to_string())
}

/// The reports handed to the mail thread and not settled yet, and the robots whose last send
/// failed: what a RUP server (and each host of the synthetic web) keeps between its ticks.
pub struct Outbox {
    tx: Sender<Mail>,
    /// Robots (by key) whose report is with the mail thread.
    in_flight: HashSet<String>,
    /// Robots whose last report was not sent: not before this time.
    retry_at: HashMap<String, i64>,
}

impl Outbox {
    /// An outbox handing its mails to the mail thread through `tx`.
    pub fn new(tx: Sender<Mail>) -> Outbox {
        Outbox {
            tx,
            in_flight: HashSet::new(),
            retry_at: HashMap::new(),
        }
    }

    /// Hands the mail thread the report of every robot of `registry` due at `now` (3.3.3), but
    /// for those whose report is already with it or whose last send failed less than the retry
    /// time ago.
    pub fn send_due(&mut self, registry: &Registry, offer: &Offer, modlog: &ModLog, now: i64) {
        for key in registry.due(now) {
            if self.in_flight.contains(&key) || self.retry_at.get(&key).is_some_and(|t| *t > now) {
                continue;
            }
            let Some(r) = registry.get(&key) else {
                continue;
            };
            if self.tx.send(report_for(offer, modlog, r)).is_ok() {
                self.in_flight.insert(key);
            }
        }
    }

    /// Settles the mail thread's outcome `s`: a failed report is tried again `retry_secs` after
    /// `now`. True when it was sent (the caller then records it, [`record_sent`]).
    pub fn settle(&mut self, s: &Sent, now: i64, retry_secs: i64) -> bool {
        self.in_flight.remove(&s.mail.key);
        if s.result.is_err() {
            self.retry_at.insert(s.mail.key.clone(), now + retry_secs);
            return false;
        }
        self.retry_at.remove(&s.mail.key);
        true
    }
}

/// Starts the sending thread: mails from `rx`, outcomes to `tx`, through the SMTP servers of
/// `targets` (plain SMTP, no TLS: a relay on loopback or the local network), from `from`. A
/// mail counts as sent when one of them accepted it.
pub fn spawn(
    targets: Targets,
    from: String,
    rx: Receiver<Mail>,
    tx: Sender<Sent>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rup-mail".into())
        .spawn(move || {
            let mut transports: HashMap<SocketAddr, SmtpTransport> = HashMap::new();
            for mail in rx {
                let to: Vec<SocketAddr> = targets.read().clone();
                let mut result = Err("no SMTP server to send to yet".to_string());
                for smtp in to {
                    let transport = transports.entry(smtp).or_insert_with(|| {
                        SmtpTransport::builder_dangerous(smtp.ip().to_string())
                            .port(smtp.port())
                            .timeout(Some(Duration::from_secs(20)))
                            .build()
                    });
                    match send(transport, &from, &mail) {
                        Ok(()) => result = Ok(()),
                        Err(e) if result.is_err() => result = Err(format!("{smtp}: {e}")),
                        Err(_) => {}
                    }
                }
                if tx.send(Sent { mail, result }).is_err() {
                    return;
                }
            }
        })
}

fn send(t: &SmtpTransport, from: &str, m: &Mail) -> Result<(), String> {
    let msg = Message::builder()
        .from(from.parse().map_err(|e| format!("From {from}: {e}"))?)
        .to(m.to.parse().map_err(|e| format!("To {}: {e}", m.to))?)
        .subject(format!("RUP update report {} for {}", m.seq, m.url_base))
        .header(ContentType::parse("text/plain; charset=us-ascii").map_err(|e| e.to_string())?)
        // lettre ends the data with CRLF "." CRLF after the body, the CRLF being its own: the
        // report's last line end is that one, so the message holds the report exactly.
        .body(m.body.strip_suffix("\r\n").unwrap_or(&m.body).to_owned())
        .map_err(|e| e.to_string())?;
    t.send(&msg).map(|_| ()).map_err(|e| e.to_string())
}
