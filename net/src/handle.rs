//! What goes into the event loop: [`Handle`] puts commands on a crossbeam channel and wakes the
//! loop's `mio::Poll` through its `Waker`.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crawlfleet_core::frame::Priority;
use crossbeam_channel::Sender;

use crate::ids::{ConnId, LinkId, TimerId};

/// A command for the loop.
#[derive(Debug)]
pub(crate) enum Command {
    Send {
        conn: ConnId,
        priority: Priority,
        bytes: Vec<u8>,
    },
    Close(ConnId),
    Connect(LinkId, SocketAddr),
    Disconnect(LinkId),
    SetTimer {
        id: TimerId,
        after: Duration,
        repeat: Option<Duration>,
    },
    CancelTimer(TimerId),
    Shutdown,
}

/// The loop has stopped (shut down, or failed); the command was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopStopped;

impl fmt::Display for LoopStopped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the event loop has stopped")
    }
}

impl std::error::Error for LoopStopped {}

/// The state every clone of a [`Handle`] shares.
pub(crate) struct Shared {
    /// Declared before `waker`: fields drop in order, so when the last handle goes the channel
    /// is closed before the waker's drop wakes the loop to notice it.
    pub(crate) commands: Sender<Command>,
    pub(crate) waker: WakeOnDrop,
    /// Set by a handle that has woken the loop, cleared by the loop before it drains the command
    /// channel: a burst of commands costs one wake-up syscall, not one each.
    pub(crate) wake_pending: Arc<AtomicBool>,
    pub(crate) next_link: AtomicU64,
}

/// The loop's waker, which wakes it one last time when dropped (with the last handle) so that it
/// sees the closed command channel and stops. The loop holds another reference: if this drop
/// closed the waker's file descriptor, epoll would discard the wake-up with it.
pub(crate) struct WakeOnDrop(pub(crate) Arc<mio::Waker>);

impl Drop for WakeOnDrop {
    fn drop(&mut self) {
        let _ = self.0.wake();
    }
}

/// Controls a running event loop from any thread; cheap to clone.
///
/// Every method only queues a command: it never blocks and returns before the loop acts. When
/// the loop has stopped, it returns [`LoopStopped`]. When every handle is dropped, the loop shuts
/// down.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle").finish_non_exhaustive()
    }
}

impl Handle {
    fn command(&self, c: Command) -> Result<(), LoopStopped> {
        self.shared.commands.send(c).map_err(|_| LoopStopped)?;
        // Release pairs with the loop's Acquire swap: if we see `true` (a wake is pending and the
        // loop has not cleared it yet), the loop's later swap reads our write and so also sees
        // the command we queued before it; if we see `false`, we wake the loop ourselves.
        if !self.shared.wake_pending.swap(true, Ordering::AcqRel) {
            self.shared.waker.0.wake().map_err(|_| LoopStopped)?;
        }
        Ok(())
    }

    /// Queues `bytes` (one or more whole messages, already framed) for `conn`. A
    /// [`Priority::High`] send goes ahead of every normal send still queued for that connection,
    /// after the one being written (MS-FSCMT 2.2.1). A send to a connection that is closed, or
    /// closing, is dropped; the connection's `Closed` event tells the role so.
    pub fn send(
        &self,
        conn: ConnId,
        priority: Priority,
        bytes: Vec<u8>,
    ) -> Result<(), LoopStopped> {
        self.command(Command::Send {
            conn,
            priority,
            bytes,
        })
    }

    /// Closes `conn` gracefully: stops reading, writes what is queued, shuts down the write side
    /// and waits (at most the linger time) for the peer to close. `Closed` follows with
    /// [`CloseReason::LocalClose`](crate::CloseReason::LocalClose). For a link's connection the
    /// link reconnects; use [`Handle::disconnect`] to stop it.
    pub fn close(&self, conn: ConnId) -> Result<(), LoopStopped> {
        self.command(Command::Close(conn))
    }

    /// Opens an outgoing link to `addr` and keeps it up: each TCP connection is announced by
    /// `Connected` and ends with `Closed`; failed attempts by `ConnectFailed`; between attempts
    /// the loop waits per its [`BackoffPolicy`](crate::BackoffPolicy). The address is resolved
    /// already: the loop never blocks on DNS.
    pub fn connect(&self, addr: SocketAddr) -> Result<LinkId, LoopStopped> {
        let link = LinkId(self.shared.next_link.fetch_add(1, Ordering::Relaxed));
        self.command(Command::Connect(link, addr))?;
        Ok(link)
    }

    /// Stops keeping `link` up and closes its connection gracefully, if it has one.
    pub fn disconnect(&self, link: LinkId) -> Result<(), LoopStopped> {
        self.command(Command::Disconnect(link))
    }

    /// Sets timer `id` to fire `Event::Timer(id)` after `after`, then every `repeat` (at least
    /// 1 ms) if given. Replaces a timer already set with the same id.
    pub fn set_timer(
        &self,
        id: TimerId,
        after: Duration,
        repeat: Option<Duration>,
    ) -> Result<(), LoopStopped> {
        self.command(Command::SetTimer { id, after, repeat })
    }

    /// Cancels timer `id`: it fires no more. An `Event::Timer` already in the event channel is
    /// still delivered.
    pub fn cancel_timer(&self, id: TimerId) -> Result<(), LoopStopped> {
        self.command(Command::CancelTimer(id))
    }

    /// Stops the loop: each connection gets one non-blocking attempt to write what is queued,
    /// then is closed (`Closed` with [`CloseReason::Shutdown`](crate::CloseReason::Shutdown),
    /// while the event channel has room); then the event channel closes and the loop thread
    /// ends. Commands queued before this one are carried out first.
    pub fn shutdown(&self) -> Result<(), LoopStopped> {
        self.command(Command::Shutdown)
    }
}
