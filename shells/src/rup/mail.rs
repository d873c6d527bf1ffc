//! Sending the update reports (draft-cosmo 3.2: "MIME compliant e-mail messages") over SMTP
//! with lettre, on a thread of their own, so that a slow or unreachable mail server never holds
//! up the HTTP answers or the modification log.
//!
//! A message is `text/plain; charset=us-ascii` whose body is the report with CRLF line ends
//! (its lines are kept under 1,000 bytes, so it goes as 7bit, byte for byte). The role thread
//! hands over one [`Mail`] at a time per robot and learns how each went from a [`Sent`].

use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use lettre::message::header::ContentType;
use lettre::transport::smtp::SmtpTransport;
use lettre::{Message, Transport};

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

/// Starts the sending thread: mails from `rx`, outcomes to `tx`, through the SMTP server at
/// `smtp` (plain SMTP, no TLS: a relay on loopback or the local network), from `from`.
pub fn spawn(
    smtp: std::net::SocketAddr,
    from: String,
    url_base: String,
    rx: Receiver<Mail>,
    tx: Sender<Sent>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("rup-mail".into())
        .spawn(move || {
            let transport = SmtpTransport::builder_dangerous(smtp.ip().to_string())
                .port(smtp.port())
                .timeout(Some(Duration::from_secs(20)))
                .build();
            for mail in rx {
                let result = send(&transport, &from, &url_base, &mail);
                if tx.send(Sent { mail, result }).is_err() {
                    return;
                }
            }
        })
}

fn send(t: &SmtpTransport, from: &str, url_base: &str, m: &Mail) -> Result<(), String> {
    let msg = Message::builder()
        .from(from.parse().map_err(|e| format!("From {from}: {e}"))?)
        .to(m.to.parse().map_err(|e| format!("To {}: {e}", m.to))?)
        .subject(format!("RUP update report {} for {url_base}", m.seq))
        .header(ContentType::parse("text/plain; charset=us-ascii").map_err(|e| e.to_string())?)
        // lettre ends the data with CRLF "." CRLF after the body, the CRLF being its own: the
        // report's last line end is that one, so the message holds the report exactly.
        .body(m.body.strip_suffix("\r\n").unwrap_or(&m.body).to_owned())
        .map_err(|e| e.to_string())?;
    t.send(&msg).map(|_| ()).map_err(|e| e.to_string())
}
