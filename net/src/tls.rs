//! TLS on accepted connections (a listener built with [`crate::Builder::tls`]): a rustls
//! server session between the socket and the connection's read buffer and send queue.
//!
//! [`Io`] is what [`crate::conn`] reads from and writes to: the plain socket, or the session
//! over it. The loop's registration stays the socket's (edge-triggered, readable and writable),
//! so the only extra duty is the session's own output (handshake records, encrypted data
//! rustls holds while the socket is full): it is written after every read, and a flush counts
//! as done only once the session holds nothing more ([`Io::flush_tls`]); a writable edge
//! brings the loop back to what is left.

use std::io::{self, Read, Write};
use std::net::Shutdown;

use std::sync::Arc;

use mio::net::TcpStream;
use rustls::{ServerConfig, ServerConnection};

use crate::ids::LinkId;

use crate::io_util::would_block;

/// The socket and, on a TLS listener's connection, its session.
pub(crate) struct Io<'a> {
    pub(crate) stream: &'a mut TcpStream,
    pub(crate) tls: Option<&'a mut ServerConnection>,
}

/// The session for a new connection: a TLS one for an accepted connection (no `link`) when
/// the loop has a TLS configuration.
pub(crate) fn session(
    config: Option<&Arc<ServerConfig>>,
    link: Option<LinkId>,
) -> io::Result<Option<Box<ServerConnection>>> {
    match (config, link) {
        (Some(c), None) => ServerConnection::new(Arc::clone(c))
            .map(|s| Some(Box::new(s)))
            .map_err(io::Error::other),
        _ => Ok(None),
    }
}

fn blocked() -> io::Error {
    io::Error::from(io::ErrorKind::WouldBlock)
}

impl Io<'_> {
    /// Writes what the session holds until it holds nothing (`Ok(true)`) or the socket is full
    /// (`Ok(false)`); a plain connection holds nothing.
    pub(crate) fn flush_tls(&mut self) -> io::Result<bool> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return Ok(true);
        };
        while tls.wants_write() {
            match tls.write_tls(self.stream) {
                Ok(_) => {}
                Err(e) if would_block(&e) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Shuts the write side: after a TLS close_notify (written if the socket takes it).
    pub(crate) fn shutdown_write(&mut self) -> io::Result<()> {
        if let Some(tls) = self.tls.as_deref_mut() {
            tls.send_close_notify();
            let _ = self.flush_tls();
        }
        self.stream.shutdown(Shutdown::Write)
    }
}

impl Read for Io<'_> {
    /// Plaintext; `Ok(0)` at the end of the stream (close_notify or the socket's end), and a
    /// session that fails (a bad record, a failed handshake) is an `InvalidData` error after
    /// its alert is written.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_deref_mut() else {
            return self.stream.read(buf);
        };
        loop {
            match tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if would_block(&e) => {}
                Err(e) => return Err(e),
            }
            if tls.read_tls(self.stream)? == 0 {
                return Ok(0);
            }
            let processed = tls.process_new_packets();
            // Handshake answers and alerts leave now; a full socket keeps them for the
            // writable edge.
            let flushed = Io {
                stream: self.stream,
                tls: Some(&mut *tls),
            }
            .flush_tls();
            if let Err(e) = processed {
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            flushed?;
        }
    }
}

impl Write for Io<'_> {
    /// Takes plaintext into the session once what it held before is written, and writes the
    /// records out as far as the socket takes them.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.tls.is_none() {
            return self.stream.write(buf);
        }
        if !self.flush_tls()? {
            return Err(blocked());
        }
        let Some(tls) = self.tls.as_deref_mut() else {
            return Err(blocked());
        };
        let n = tls.writer().write(buf)?;
        self.flush_tls()?;
        if n == 0 && !buf.is_empty() {
            return Err(blocked());
        }
        Ok(n)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self.tls {
            None => self.stream.write_vectored(bufs),
            Some(_) => {
                let first = bufs
                    .iter()
                    .find(|b| !b.is_empty())
                    .map_or(&[][..], |b| &b[..]);
                self.write(first)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.flush_tls()? {
            true => Ok(()),
            false => Err(blocked()),
        }
    }
}
