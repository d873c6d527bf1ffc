//! The limits every port keeps (DESIGN.md, "PortLimits every port keeps"), enforced by the loop for
//! every connection whatever its framing:
//!
//! - Output: an accepted connection with more than [`PortLimits::max_queued_output`] bytes
//!   queued is not read until its queue is down to half of that. Its peer's bytes wait in the
//!   socket (TCP flow control slows the peer down); other connections are served as before. A
//!   peer that sends requests and never reads their answers costs at most the cap plus the
//!   answers to what it sent before the cap was reached. Outgoing links are always read (the
//!   role bounds what it sends on them), so two roles linked both ways cannot stop reading each
//!   other at once.
//! - Input waiting for the role: messages of one connection handed to the role and not yet
//!   dropped by it are counted; past [`PortLimits::max_in_role`] the connection is not read until
//!   the role has worked through them. A peer flooding requests cannot fill the event channel
//!   ahead of every other connection's, so another client's request waits behind at most that
//!   much of the flood.
//! - Input: the framing's maximum message length bounds one connection's partial message; a
//!   [`PartialBudget`] bounds the bytes that all connections sharing it (by default every loop
//!   of the process) hold in partial messages. Past the budget, the connection of this loop
//!   that holds the most is closed ([`CloseReason::MemoryCap`](crate::CloseReason::MemoryCap)).
//! - Time: a connection holding part of a message, or an accepted one that has not sent a
//!   whole message since it opened (an unfinished handshake), is closed once
//!   [`PortLimits::idle_timeout`] passes without a message completing
//!   ([`CloseReason::IdleTimeout`](crate::CloseReason::IdleTimeout)). Each message must arrive
//!   whole within that time of its first byte, so a peer trickling bytes is cut off too.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mio::Waker;

/// The default per-connection cap on queued output: 4 MiB.
pub const DEFAULT_MAX_QUEUED_OUTPUT: usize = 4 << 20;
/// The default cap on one connection's messages waiting for the role: 1 MiB.
pub const DEFAULT_MAX_IN_ROLE: usize = 1 << 20;
/// The default process-wide budget for partial messages: 128 MiB (two messages of the largest
/// size the marshal limits allow, 64 MiB, at once).
pub const DEFAULT_PARTIAL_BUDGET: usize = 128 << 20;
/// The default idle timeout for a partial message or an unfinished handshake: 60 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes held in partial inbound messages, counted across every loop that shares this budget,
/// and the most they may reach. Cheap to clone (clones share the count).
#[derive(Clone, Debug)]
pub struct PartialBudget {
    inner: Arc<BudgetInner>,
}

#[derive(Debug)]
struct BudgetInner {
    held: AtomicUsize,
    cap: usize,
}

impl PartialBudget {
    /// A budget of its own with room for `cap` bytes (for a loop that must not share, such as a
    /// test's).
    pub fn new(cap: usize) -> Self {
        PartialBudget {
            inner: Arc::new(BudgetInner {
                held: AtomicUsize::new(0),
                cap,
            }),
        }
    }

    /// The budget every loop shares unless its builder is given another:
    /// [`DEFAULT_PARTIAL_BUDGET`], or `CRAWLFLEET_PARTIAL_BUDGET` bytes when that is set in the
    /// environment when the first loop starts.
    pub fn process() -> Self {
        static PROCESS: OnceLock<PartialBudget> = OnceLock::new();
        PROCESS
            .get_or_init(|| {
                let cap = std::env::var("CRAWLFLEET_PARTIAL_BUDGET")
                    .ok()
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(DEFAULT_PARTIAL_BUDGET);
                PartialBudget::new(cap)
            })
            .clone()
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.inner.held.load(Ordering::Relaxed)
    }

    /// The cap.
    pub fn cap(&self) -> usize {
        self.inner.cap
    }

    /// Moves one connection's share from `was` to `now` bytes; returns the total held after.
    pub(crate) fn update(&self, was: usize, now: usize) -> usize {
        if now >= was {
            self.inner.held.fetch_add(now - was, Ordering::Relaxed) + (now - was)
        } else {
            self.inner.held.fetch_sub(was - now, Ordering::Relaxed) - (was - now)
        }
    }
}

/// A loop's limits; set through the [`Builder`](crate::Builder).
#[derive(Clone, Debug)]
pub struct PortLimits {
    /// Queued output past which a connection is not read (resumed at half).
    pub max_queued_output: usize,
    /// Bytes of one connection's messages handed to the role and not yet dropped by it past
    /// which the connection is not read.
    pub max_in_role: usize,
    /// Bytes all connections sharing it may hold in partial messages.
    pub partial: PartialBudget,
    /// How long a partial message or an unfinished handshake may wait for a message to
    /// complete; `None` never times out.
    pub idle_timeout: Option<Duration>,
}

impl Default for PortLimits {
    fn default() -> Self {
        PortLimits {
            max_queued_output: DEFAULT_MAX_QUEUED_OUTPUT,
            max_in_role: DEFAULT_MAX_IN_ROLE,
            partial: PartialBudget::process(),
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
        }
    }
}

impl PortLimits {
    /// How often the loop looks for idle connections: a quarter of the timeout, at least every
    /// 50 ms and at most every 5 s.
    pub(crate) fn sweep_period(&self) -> Option<Duration> {
        self.idle_timeout.map(|t| {
            (t / 4)
                .max(Duration::from_millis(50))
                .min(Duration::from_secs(5))
        })
    }
}

/// One connection's bytes handed to the role in batches it has not dropped yet.
pub(crate) struct InRole {
    bytes: AtomicUsize,
    cap: usize,
    /// Woken when the count comes back down to the cap, so the loop reads the connection again.
    waker: Arc<Waker>,
}

impl fmt::Debug for InRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InRole")
            .field("bytes", &self.bytes.load(Ordering::Relaxed))
            .field("cap", &self.cap)
            .finish()
    }
}

impl InRole {
    pub(crate) fn new(cap: usize, waker: Arc<Waker>) -> Arc<Self> {
        Arc::new(InRole {
            bytes: AtomicUsize::new(0),
            cap,
            waker,
        })
    }

    /// True when the role holds any of this connection's messages.
    pub(crate) fn holds_any(&self) -> bool {
        self.bytes.load(Ordering::Acquire) > 0
    }

    /// True when the role holds more than the cap of this connection's messages.
    pub(crate) fn over_cap(&self) -> bool {
        self.bytes.load(Ordering::Acquire) > self.cap
    }

    /// Counts `len` bytes handed to the role until the returned guard is dropped.
    pub(crate) fn hand(self: &Arc<Self>, len: usize) -> InRoleGuard {
        self.bytes.fetch_add(len, Ordering::AcqRel);
        InRoleGuard {
            of: Arc::clone(self),
            len,
        }
    }
}

/// Bytes of a batch while the role holds it (see [`InRole`]).
pub(crate) struct InRoleGuard {
    of: Arc<InRole>,
    len: usize,
}

impl InRoleGuard {
    /// Another guard for the same bytes (a clone of the batch).
    pub(crate) fn again(&self) -> InRoleGuard {
        self.of.hand(self.len)
    }
}

impl Drop for InRoleGuard {
    fn drop(&mut self) {
        let before = self.of.bytes.fetch_sub(self.len, Ordering::AcqRel);
        if before > self.of.cap && before - self.len <= self.of.cap {
            // The loop may be waiting for this; a stopped loop has nothing to read any more.
            let _ = self.of.waker.wake();
        }
    }
}

impl fmt::Debug for InRoleGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InRoleGuard({} bytes)", self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_counts_what_its_clones_hold() {
        let b = PartialBudget::new(100);
        let c = b.clone();
        assert_eq!(b.update(0, 60), 60);
        assert_eq!(c.update(0, 50), 110);
        assert_eq!(b.update(60, 10), 60);
        assert_eq!(c.update(50, 0), 10);
        assert_eq!(b.held(), 10);
        assert_eq!(
            PartialBudget::new(7).held(),
            0,
            "a new budget shares nothing"
        );
    }
}
