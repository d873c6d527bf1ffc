//! The RUP tests' peers: an SMTP receiver (std::net, recording every message it accepts, able
//! to refuse for a while) and a plain HTTP/1.1 client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One message an SMTP client handed over.
#[derive(Clone, Debug)]
pub struct Mail {
    pub to: Vec<String>,
    /// The header fields, as sent (dot-stuffing undone).
    pub head: String,
    /// The body: everything after the blank line, CRLF line ends kept.
    pub body: String,
}

/// An SMTP receiver on loopback, answering every connection on a thread of its own.
pub struct Smtp {
    pub addr: SocketAddr,
    pub mails: Arc<Mutex<Vec<Mail>>>,
    /// While set, RCPT TO is answered 451 (a temporary failure).
    pub refuse: Arc<AtomicBool>,
    /// RCPT TO answered 451 so far.
    pub refused: Arc<AtomicUsize>,
}

impl Smtp {
    pub fn start() -> Smtp {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let s = Smtp {
            addr: l.local_addr().unwrap(),
            mails: Arc::default(),
            refuse: Arc::default(),
            refused: Arc::default(),
        };
        let (mails, refuse, refused) = (s.mails.clone(), s.refuse.clone(), s.refused.clone());
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let (m, r, n) = (mails.clone(), refuse.clone(), refused.clone());
                std::thread::spawn(move || {
                    let _ = session(c, &m, &r, &n);
                });
            }
        });
        s
    }

    /// The mails to `to`, in the order they arrived.
    pub fn to(&self, to: &str) -> Vec<Mail> {
        let m = self.mails.lock().unwrap();
        m.iter()
            .filter(|m| m.to.iter().any(|t| t == to))
            .cloned()
            .collect()
    }
}

fn session(
    c: TcpStream,
    mails: &Mutex<Vec<Mail>>,
    refuse: &AtomicBool,
    refused: &AtomicUsize,
) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut w = c.try_clone()?;
    let mut r = BufReader::new(c);
    w.write_all(b"220 test ESMTP\r\n")?;
    let mut to = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let cmd = line.trim_end().to_ascii_uppercase();
        let reply: &[u8] = if cmd.starts_with("EHLO") || cmd.starts_with("HELO") {
            b"250 test\r\n"
        } else if cmd.starts_with("MAIL FROM:") {
            to.clear();
            b"250 OK\r\n"
        } else if cmd.starts_with("RCPT TO:") {
            if refuse.load(Ordering::SeqCst) {
                refused.fetch_add(1, Ordering::SeqCst);
                b"451 try again later\r\n"
            } else {
                let addr = line.trim_end()[8..]
                    .trim()
                    .trim_matches(['<', '>'])
                    .to_owned();
                to.push(addr);
                b"250 OK\r\n"
            }
        } else if cmd == "DATA" {
            w.write_all(b"354 go on\r\n")?;
            let mut data = String::new();
            loop {
                line.clear();
                if r.read_line(&mut line)? == 0 {
                    return Ok(());
                }
                if line == ".\r\n" {
                    break;
                }
                data.push_str(line.strip_prefix('.').unwrap_or(&line));
            }
            let (head, body) = data.split_once("\r\n\r\n").unwrap_or((&data, ""));
            mails.lock().unwrap().push(Mail {
                to: std::mem::take(&mut to),
                head: head.to_owned(),
                body: body.to_owned(),
            });
            b"250 accepted\r\n"
        } else if cmd == "QUIT" {
            w.write_all(b"221 bye\r\n")?;
            return Ok(());
        } else if cmd == "RSET" || cmd == "NOOP" {
            b"250 OK\r\n"
        } else {
            b"502 not implemented\r\n"
        };
        w.write_all(reply)?;
    }
}

/// An HTTP answer: status, header fields (names in lower case), body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `raw` (a whole request, `Connection: close`) and reads the answer to the end.
pub fn http_raw(addr: SocketAddr, raw: &str) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(raw.as_bytes()).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete answer");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// A request with `extra` header lines (each ending in CRLF).
pub fn http(addr: SocketAddr, method: &str, target: &str, extra: &str) -> Answer {
    http_raw(
        addr,
        &format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n{extra}\r\n"),
    )
}

/// A form-urlencoded POST to the CGI.
pub fn post(addr: SocketAddr, form: &str) -> Answer {
    http_raw(
        addr,
        &format!(
            "POST /rup-cgi HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
            form.len()
        ),
    )
}

/// The text inside the answer document's `<pre>` (the report or the answer's line).
pub fn pre(a: &Answer) -> String {
    let start = a.body.find("<pre>\n").expect("an HTML document with <pre>") + 6;
    let end = a.body.find("</pre>").unwrap();
    a.body[start..end].to_owned()
}
