//! One TCP connection: its socket, read buffer, framing state and send queue.
//!
//! The handlers here only report what happened ([`ReadOutcome`], `io::Result`); the loop alone
//! sends events, deregisters and removes connections.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use crawlfleet_core::frame::Priority;
use mio::net::TcpStream;

use crate::event::{CloseReason, FrameBatch};
use crate::framing::{Framing, FramingError, Next};
use crate::ids::{ConnId, LinkId};
use crate::io_util::{interrupted, would_block};
use crate::limits::InRole;
use crate::sendq::{Flushed, SendQueue};
use crate::tls::Io;

/// Read buffer size when no message needs more.
const READ_BUF: usize = 16 << 10;
/// A framing's size hint below `filled + MIN_READ` is too small to be worth following.
const MIN_READ: usize = 4 << 10;
/// A read buffer grown past this for a large message goes back to `READ_BUF` once it is free.
const SHRINK_ABOVE: usize = 256 << 10;
/// Most bytes read from one connection in one turn of the loop, so one fast peer cannot starve
/// the others; the rest is read next turn.
const READ_BUDGET: usize = 1 << 20;
/// A batch is handed on once it holds this many bytes, even if the socket has more.
const MAX_BATCH: usize = 256 << 10;
/// Most message records reserved ahead for a batch (see `Conn::frames_room`).
const MAX_FRAMES_ROOM: usize = 1024;

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Outgoing, the TCP handshake not finished.
    Connecting,
    /// Reading and writing.
    Open,
    /// The peer has finished sending (read end of stream): no more reading, but the answers
    /// to what it sent are still written before the loop closes it (DESIGN.md: requests
    /// received before the peer's FIN are answered).
    Finishing,
    /// The role closed it: writing what is queued, no longer reading.
    Closing,
    /// Queue written and write side shut: discarding input until the peer closes.
    Draining,
}

/// How a read pass ended.
#[derive(Debug)]
pub(crate) enum ReadStatus {
    /// The socket is drained; wait for the next readable event.
    Drained,
    /// The socket may have more (budget or batch size reached); read again next turn.
    More,
    /// The peer finished sending (after the batch, if any, is delivered); answers may follow.
    Finished,
    /// The connection must close (after the batch, if any, is delivered).
    Close(CloseReason),
}

/// The result of [`Conn::read`]: messages to deliver, then what to do next.
#[derive(Debug)]
pub(crate) struct ReadOutcome {
    pub(crate) batch: Option<FrameBatch>,
    pub(crate) status: ReadStatus,
}

/// One connection.
#[derive(Debug)]
pub(crate) struct Conn<F> {
    pub(crate) id: ConnId,
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    pub(crate) state: State,
    /// The link this connection serves, for an outgoing one.
    pub(crate) link: Option<LinkId>,
    pub(crate) sendq: SendQueue,
    /// Queued in the loop's list of connections to flush after the current command burst.
    pub(crate) dirty: bool,
    /// Queued in the loop's list of connections to read again next turn.
    pub(crate) read_ready: bool,
    /// Not read because its queued output is over the cap (see `limits`); the loop reads it
    /// again once a flush brings the queue down to half.
    pub(crate) throttled: bool,
    /// Bytes this connection counts against the partial-message budget (see [`Conn::held`]).
    pub(crate) held: usize,
    /// Messages cut so far (for the idle sweep: a count that moved means progress).
    pub(crate) messages: u64,
    /// The message count and time the idle sweep last saw progress (or no partial message).
    pub(crate) mark: (u64, Instant),
    /// When the peer finished sending, and when the last send was queued after that.
    pub(crate) finished: Option<(Instant, Option<Instant>)>,
    /// This connection's messages the role holds (see `limits`).
    pub(crate) in_role: Arc<InRole>,
    /// In the loop's list of connections not read until the role works through their messages.
    pub(crate) held_back: bool,
    /// The framing refused this connection's input: nothing more is framed, what arrives is
    /// discarded until the role closes the connection (or the peer does).
    refused: bool,
    framing: F,
    /// `buf[..filled]` holds received bytes: complete messages in `buf[..framed]`, then the
    /// start of the next one. `buf.capacity()` is the room readable into without growing: reads
    /// go to the spare capacity, which is never zeroed first (zeroing each new or grown buffer
    /// was a tenth of a pipelined duplicate server's instructions).
    /// Invariant: `framed <= filled == buf.len()` (so the slicing below cannot panic); `framed`
    /// only grows by a message length checked against the unframed bytes.
    buf: Vec<u8>,
    /// The capacity `buf` starts with after it was given away with a batch: that buffer's (see
    /// [`Conn::make_room`]); a connection holds no buffer between a batch and its next read.
    room: usize,
    /// Messages the last batch held (at most [`MAX_FRAMES_ROOM`]): the next one's records are
    /// reserved for as many at its first message.
    frames_room: usize,
    filled: usize,
    framed: usize,
    /// Messages in `buf[..framed]`, handed on by [`Conn::take_batch`].
    batch: FrameBatch,
    /// The TLS session of a connection accepted on a TLS listener (`crate::tls`).
    tls: Option<Box<rustls::ServerConnection>>,
}

impl<F: Framing> Conn<F> {
    /// A connection around a socket that is registered with the loop's poll.
    pub(crate) fn new(
        id: ConnId,
        stream: TcpStream,
        peer: SocketAddr,
        state: State,
        link: Option<LinkId>,
        framing: F,
        in_role: Arc<InRole>,
    ) -> Self {
        Conn {
            id,
            stream,
            peer,
            state,
            link,
            sendq: SendQueue::default(),
            dirty: false,
            read_ready: false,
            throttled: false,
            held: 0,
            messages: 0,
            mark: (0, Instant::now()),
            finished: None,
            in_role,
            held_back: false,
            refused: false,
            framing,
            buf: Vec::new(),
            room: READ_BUF,
            frames_room: 0,
            filled: 0,
            framed: 0,
            batch: FrameBatch::new(id),
            tls: None,
        }
    }

    /// The connection speaking TLS through `tls` (`crate::tls`), when given.
    pub(crate) fn with_tls(mut self, tls: Option<Box<rustls::ServerConnection>>) -> Self {
        self.tls = tls;
        self
    }

    /// The socket, through the TLS session if there is one.
    fn io(&mut self) -> Io<'_> {
        Io {
            stream: &mut self.stream,
            tls: self.tls.as_deref_mut(),
        }
    }

    /// Queues a send, unless the connection is being closed (then the bytes are dropped and
    /// `false` is returned).
    pub(crate) fn queue(&mut self, priority: Priority, bytes: Vec<u8>) -> bool {
        match self.state {
            State::Open | State::Connecting => {
                self.sendq.push(priority, bytes);
                true
            }
            State::Finishing => {
                self.sendq.push(priority, bytes);
                if let Some((_, last_send)) = &mut self.finished {
                    *last_send = Some(Instant::now());
                }
                true
            }
            State::Closing | State::Draining => false,
        }
    }

    /// Bytes of output queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.sendq.unsent().bytes
    }

    /// True when the read buffer holds the start of a message that has not arrived whole.
    pub(crate) fn has_partial(&self) -> bool {
        self.filled > self.framed
    }

    /// What the connection holds for a partial message, to count against the budget: its read
    /// buffer, when a partial message has grown it past the normal size (every connection keeps
    /// a normal-sized buffer; that is not counted).
    pub(crate) fn held_now(&self) -> usize {
        if self.has_partial() && self.buf.capacity() > READ_BUF {
            self.buf.capacity()
        } else {
            0
        }
    }

    /// After a writable (or error) event on a connecting socket: `Ok(true)` when the handshake
    /// is done, `Ok(false)` when it is still under way, an error when it failed.
    pub(crate) fn finish_connect(&mut self) -> io::Result<bool> {
        if let Some(e) = self.stream.take_error()? {
            return Err(e);
        }
        match self.stream.peer_addr() {
            Ok(_) => {
                self.state = State::Open;
                // Small messages should leave at once; coalescing is done by the send queue.
                let _ = self.stream.set_nodelay(true);
                Ok(true)
            }
            Err(e) if e.kind() == io::ErrorKind::NotConnected || would_block(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Writes what is queued until done or the socket is full. A closing connection whose
    /// queue is written moves on to draining (write side shut).
    pub(crate) fn flush(&mut self) -> io::Result<Flushed> {
        if self.state == State::Connecting {
            return Ok(Flushed::Blocked);
        }
        let mut io = Io {
            stream: &mut self.stream,
            tls: self.tls.as_deref_mut(),
        };
        let mut flushed = self.sendq.flush_to(&mut io)?;
        // Done only once the TLS session holds no records either.
        if flushed == Flushed::Empty && !io.flush_tls()? {
            flushed = Flushed::Blocked;
        }
        if flushed == Flushed::Empty && self.state == State::Closing {
            self.state = State::Draining;
            io.shutdown_write()?;
        }
        Ok(flushed)
    }

    /// Starts a graceful close: no more reading or queueing; [`Conn::flush`] finishes it.
    pub(crate) fn begin_close(&mut self) {
        if matches!(self.state, State::Open | State::Finishing) {
            self.state = State::Closing;
        }
    }

    /// Reads until the socket is drained, the turn's budget is spent, or a batch is full; cuts
    /// complete messages with the framing. A draining connection discards what it reads.
    ///
    /// Drained is `WouldBlock`, or, with `short_drains`, a plain read that filled less than its
    /// room and ended on a whole message: TCP hands a read everything queued up to its size, so
    /// the socket was empty then, and whatever arrives later raises a new edge. The loop asks
    /// for that only on a readiness event that did not report the peer's FIN (a FIN already
    /// queued raises no further edge), and not when it comes back to a connection it left
    /// unread; it saves the `WouldBlock` read that ended about half the loops' reads. After a
    /// part of a message the pass reads on: the rest is often there already.
    pub(crate) fn read(&mut self, short_drains: bool) -> ReadOutcome {
        let status = match self.state {
            State::Open if self.refused => self.discard(CloseReason::PeerClosed),
            State::Open => self.read_messages(short_drains && self.tls.is_none()),
            State::Draining => self.discard(CloseReason::LocalClose),
            State::Connecting | State::Finishing | State::Closing => ReadStatus::Drained,
        };
        ReadOutcome {
            batch: self.take_batch(),
            status,
        }
    }

    fn read_messages(&mut self, short_drains: bool) -> ReadStatus {
        let mut budget = READ_BUDGET;
        let mut drained = false;
        loop {
            // Cut what the last read brought before deciding anything: a closing or failing
            // connection still delivers the messages that arrived whole.
            let needed = match self.cut_messages() {
                Ok(needed) => needed,
                Err(e) => return ReadStatus::Close(e.into()),
            };
            if self.refused {
                // Drop what followed the refused input, and whatever else comes.
                self.filled = self.framed;
                self.buf.truncate(self.framed);
                return self.discard(CloseReason::PeerClosed);
            }
            if drained && self.framed == self.filled {
                return ReadStatus::Drained;
            }
            if budget == 0 || self.framed >= MAX_BATCH {
                return ReadStatus::More;
            }
            if !self.make_room(needed) {
                // The buffer is full of complete messages: hand them on, then read on.
                return ReadStatus::More;
            }
            // A plain connection reads into the spare capacity, without zeroing it first; a
            // read may take the budget over by at most one buffer. A TLS session (the admin
            // port's, not a hot path) decrypts into zeroed room, cut back to what it read.
            let room = self.buf.capacity() - self.buf.len();
            let read = if self.tls.is_none() {
                rustix::io::read(&self.stream, rustix::buffer::spare_capacity(&mut self.buf))
                    .map_err(io::Error::from)
            } else {
                let start = self.filled;
                let want = (self.buf.capacity() - start).min(budget.max(1));
                self.buf.resize(start + want, 0);
                let mut io = Io {
                    stream: &mut self.stream,
                    tls: self.tls.as_deref_mut(),
                };
                let r = io.read(&mut self.buf[start..]);
                self.buf.truncate(start + *r.as_ref().unwrap_or(&0));
                r
            };
            match read {
                Ok(0) => {
                    if self.filled > self.framed {
                        log::debug!(
                            "{} ({}): peer closed {} bytes into a message",
                            self.id,
                            self.peer,
                            self.filled - self.framed
                        );
                    }
                    if self.state == State::Open {
                        self.state = State::Finishing;
                        self.finished = Some((Instant::now(), None));
                    }
                    return ReadStatus::Finished;
                }
                Ok(n) => {
                    // `spare_capacity` extended `buf` by the bytes read.
                    self.filled += n;
                    debug_assert_eq!(self.filled, self.buf.len());
                    budget = budget.saturating_sub(n);
                    drained = short_drains && n < room;
                }
                Err(e) if would_block(&e) => return ReadStatus::Drained,
                Err(e) if interrupted(&e) => {}
                Err(e) => return ReadStatus::Close(CloseReason::Io(e.into())),
            }
        }
    }

    /// Runs the framing over the unframed bytes, recording each complete message in the batch.
    /// Returns how many bytes (from `buf[framed]`) the next message needs at least.
    fn cut_messages(&mut self) -> Result<usize, FramingError> {
        loop {
            let pending = &self.buf[self.framed..self.filled];
            match self.framing.next(pending)? {
                Next::Message(m) => {
                    if m.len > pending.len() {
                        return Err(FramingError::Contract("message longer than the buffer"));
                    }
                    if self.batch.is_empty() {
                        // As many records as the last batch held: a pipelining peer's batches
                        // are not regrown record by record.
                        self.batch.reserve(self.frames_room);
                    }
                    self.batch.push(self.framed, m.len, m.body, m.priority)?;
                    self.framed += m.len;
                    self.messages += 1;
                }
                Next::Refused(r) => {
                    if r.len == 0 || r.len > pending.len() {
                        return Err(FramingError::Contract("refusal outside the buffer"));
                    }
                    self.batch.push_refusal(self.framed, r)?;
                    self.framed += r.len;
                    self.refused = true;
                    return Ok(0);
                }
                Next::Incomplete { needed } => {
                    if needed <= pending.len() {
                        return Err(FramingError::Contract(
                            "incomplete, yet needs no more bytes",
                        ));
                    }
                    return Ok(needed);
                }
            }
        }
    }

    /// Makes room to read into. Framed messages are never moved here, so returns `false` when
    /// the buffer is full of them, at its batch size, and must be handed on first.
    ///
    /// Growth doubles, capped at what the current message needs when the framing knows that (a
    /// length prefix). It never jumps straight to an announced length: memory follows the bytes
    /// that actually arrived (at most twice them), so peers announcing 64 MiB frames and
    /// trickling bytes cannot make the loop allocate 64 MiB each on a 4-byte claim.
    fn make_room(&mut self, needed: usize) -> bool {
        if self.filled < self.buf.capacity() {
            return true;
        }
        if self.framed > 0 {
            if self.buf.capacity() >= MAX_BATCH {
                return false;
            }
            // The peer sends more than the buffer holds (a pipelining client): grow it, up to
            // one batch, so that what arrived together is handed on (and answered) together
            // instead of in 16 KiB slices.
            let target = (self.buf.capacity() * 2).min(MAX_BATCH);
            self.buf.reserve_exact(target - self.filled);
            return true;
        }
        // Only the start of one message is in the buffer (filled == buf.capacity()). `needed`
        // has been checked against the framing's limit, so growth is bounded by it.
        // A buffer given away with a batch is followed by one of its size (`room`), allocated
        // here, at the first read: a pipelining peer fills it again without regrowing it by
        // doubling (a copy of everything read so far at each step), an idle one holds none.
        let floor = if self.buf.capacity() == 0 {
            self.room
        } else {
            READ_BUF
        };
        let doubled = (self.buf.capacity() * 2).max(floor);
        let target = if needed > self.filled + MIN_READ {
            doubled.min(needed).max(READ_BUF)
        } else {
            // No useful hint (or a small one): double.
            doubled
        };
        self.buf.reserve_exact(target - self.filled);
        true
    }

    /// Hands on the framed messages as one batch and moves the unframed tail to the front.
    fn take_batch(&mut self) -> Option<FrameBatch> {
        if self.batch.is_empty() {
            return None;
        }
        self.frames_room = self.batch.len().min(MAX_FRAMES_ROOM);
        let mut batch = std::mem::replace(&mut self.batch, FrameBatch::new(self.id));
        let framed = self.framed;
        if framed == self.filled && framed * 2 >= self.buf.capacity() {
            // The buffer is mostly complete messages (a pipelined window, or a large one): give
            // it away instead of copying it. The next starts at its size, up to a batch.
            self.room = self.buf.capacity().clamp(READ_BUF, MAX_BATCH);
            batch.set_data(std::mem::take(&mut self.buf));
        } else {
            batch.set_data(self.buf[..framed].to_vec());
            self.buf.drain(..framed);
            if self.buf.capacity() > SHRINK_ABOVE && self.filled - framed <= READ_BUF {
                // A large message has left; return to the normal size.
                self.buf.shrink_to(READ_BUF);
            }
        }
        self.filled -= framed;
        self.framed = 0;
        batch.hand_to_role(&self.in_role);
        Some(batch)
    }

    /// Reads and drops input until the peer closes (graceful close, after our write side shut;
    /// or after a refusal), which ends the connection for `eof`.
    fn discard(&mut self, eof: CloseReason) -> ReadStatus {
        let mut scratch = [0u8; 4096];
        let mut budget = READ_BUDGET;
        while budget > 0 {
            match self.io().read(&mut scratch) {
                Ok(0) => return ReadStatus::Close(eof),
                Ok(n) => budget = budget.saturating_sub(n),
                Err(e) if would_block(&e) => return ReadStatus::Drained,
                Err(e) if interrupted(&e) => {}
                Err(e) => return ReadStatus::Close(CloseReason::Io(e.into())),
            }
        }
        ReadStatus::More
    }
}
