//! The sender thread: one blocking TCP connection to the link store, one message at a time
//! (MS-FSWASDR 3.1.5: send, wait for `ack\n` or `failed\n`), and the backlog for the rest.
//!
//! Messages leave in the order they were sealed. While the backlog holds anything, new
//! messages join its end, so the store receives them in order once it is back; the backlog is
//! retried every `retry_interval`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crawlfleet_core::links::{ACK, FAILED};
use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::backlog::Backlog;
use super::{Sealed, Shared, ToSender};

/// Why one attempt failed.
#[derive(Debug)]
enum SendError {
    Io(io::Error),
    Failed,
    Garbled(Vec<u8>),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Io(e) => write!(f, "{e}"),
            SendError::Failed => f.write_str("the link store answered failed"),
            SendError::Garbled(b) => write!(
                f,
                "the link store answered {:?}",
                String::from_utf8_lossy(b)
            ),
        }
    }
}

struct Sender {
    shared: Arc<Shared>,
    conn: Option<TcpStream>,
    backlog: Backlog,
    next_retry: Instant,
    /// A failure was logged and no success came since: log the next ones at debug level.
    quiet: bool,
}

impl Sender {
    fn connect(&mut self) -> io::Result<&mut TcpStream> {
        if self.conn.is_none() {
            let cfg = &self.shared.cfg;
            let s = TcpStream::connect_timeout(&cfg.server, cfg.io_timeout)?;
            s.set_read_timeout(Some(cfg.io_timeout))?;
            s.set_write_timeout(Some(cfg.io_timeout))?;
            s.set_nodelay(true)?;
            self.conn = Some(s);
        }
        // Set just above.
        self.conn
            .as_mut()
            .ok_or_else(|| io::Error::other("no connection"))
    }

    fn attempt(&mut self, wire: &[u8]) -> Result<(), SendError> {
        let s = self.connect().map_err(SendError::Io)?;
        s.write_all(wire).map_err(SendError::Io)?;
        // The answer is `ack\n` or `failed\n` (2.2.2).
        let mut answer = Vec::with_capacity(8);
        let mut byte = [0u8; 1];
        while answer.last() != Some(&b'\n') && answer.len() < FAILED.len() {
            match s.read(&mut byte) {
                Ok(0) => {
                    return Err(SendError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the link store closed the connection without an answer",
                    )))
                }
                Ok(_) => answer.push(byte[0]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(SendError::Io(e)),
            }
        }
        match &answer[..] {
            a if a == ACK => Ok(()),
            a if a == FAILED => Err(SendError::Failed),
            _ => Err(SendError::Garbled(answer)),
        }
    }

    /// One attempt; on failure the connection is dropped (a fresh one is opened next time).
    fn try_send(&mut self, wire: &[u8], lines: u64) -> bool {
        match self.attempt(wire) {
            Ok(()) => {
                let c = &self.shared.counters;
                c.acked_messages.fetch_add(1, Ordering::Relaxed);
                c.acked_lines.fetch_add(lines, Ordering::Relaxed);
                if self.quiet {
                    log::info!("link store {} reachable again", self.shared.cfg.server);
                    self.quiet = false;
                }
                true
            }
            Err(e) => {
                self.conn = None;
                self.shared
                    .counters
                    .failed_attempts
                    .fetch_add(1, Ordering::Relaxed);
                if self.quiet {
                    log::debug!("link store {}: {e}", self.shared.cfg.server);
                } else {
                    log::warn!(
                        "link store {}: {e}; keeping link data in the backlog",
                        self.shared.cfg.server
                    );
                    self.quiet = true;
                }
                self.next_retry = Instant::now() + self.shared.cfg.retry_interval;
                false
            }
        }
    }

    fn keep(&mut self, s: &Sealed) {
        if let Err(e) = self.backlog.push(&s.wire, s.lines) {
            log::error!(
                "link backlog: cannot keep a message of {} lines: {e}; it is lost",
                s.lines
            );
            self.shared
                .counters
                .dropped_messages
                .fetch_add(1, Ordering::Relaxed);
        }
        self.publish();
    }

    fn publish(&self) {
        let c = &self.shared.counters;
        c.backlog_messages
            .store(self.backlog.len() as u64, Ordering::Relaxed);
        c.backlog_bytes
            .store(self.backlog.bytes(), Ordering::Relaxed);
        c.dropped_messages
            .fetch_max(self.backlog.dropped(), Ordering::Relaxed);
    }

    fn handle(&mut self, s: Sealed) {
        if !(self.backlog.is_empty() && self.try_send(&s.wire, s.lines)) {
            self.keep(&s);
        }
        self.shared.give_back(s.wire);
    }

    /// Resends the backlog, oldest first, until it is empty or an attempt fails.
    fn drain(&mut self) {
        loop {
            let (entry, wire) = match self.backlog.oldest() {
                Ok(Some(x)) => x,
                Ok(None) => break,
                Err(e) => {
                    log::error!("link backlog: cannot read the oldest message: {e}; dropping it");
                    let _ = self.backlog.remove_oldest();
                    continue;
                }
            };
            if !self.try_send(&wire, entry.lines) {
                break;
            }
            if let Err(e) = self.backlog.remove_oldest() {
                log::error!("link backlog: cannot remove a sent message: {e}");
            }
        }
        self.publish();
    }
}

/// Runs until the batcher is dropped; then makes one last attempt and leaves the rest in the
/// backlog.
pub(super) fn run(shared: Arc<Shared>, rx: Receiver<ToSender>, backlog: Backlog) {
    let age = shared.cfg.max_batch_age;
    let tick = (age / 2).clamp(Duration::from_millis(10), Duration::from_millis(200));
    let mut s = Sender {
        shared,
        conn: None,
        backlog,
        next_retry: Instant::now(),
        quiet: false,
    };
    s.publish();
    loop {
        match rx.recv_timeout(tick) {
            Ok(ToSender::Send(m)) => s.handle(m),
            Ok(ToSender::Flush(done)) => {
                s.drain();
                let _ = done.send(());
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
        for m in s.shared.seal_aged(age) {
            s.handle(m);
        }
        if !s.backlog.is_empty() && Instant::now() >= s.next_retry {
            s.drain();
        }
    }
    for m in s.shared.seal_aged(Duration::ZERO) {
        s.handle(m);
    }
    if !s.backlog.is_empty() {
        s.drain();
    }
    if !s.backlog.is_empty() {
        log::warn!(
            "link client stopping with {} message(s) in the backlog {}",
            s.backlog.len(),
            s.shared.cfg.backlog_dir.display()
        );
    }
}
