//! The event loop's upkeep of the limits every port keeps (see `limits`): closing a connection
//! whose peer finished sending once it is answered, holding partial messages within their
//! budget, and the idle sweep.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use super::{Loop, FINISH_QUIET};
use crate::conn::State;
use crate::event::CloseReason;
use crate::framing::Framing;
use crate::ids::ConnId;
use crate::timer::TimerKey;

impl<F: Framing> Loop<F> {
    /// A connection whose peer finished sending closes once the role has answered: it holds
    /// none of its messages, everything queued is written and nothing was queued for
    /// `FINISH_QUIET`; or, at the latest, once the idle timeout (or linger) has passed.
    pub(super) fn try_finish(&mut self, id: ConnId) {
        let limit = self
            .config
            .limits
            .idle_timeout
            .unwrap_or(self.config.linger)
            .max(self.config.linger);
        let Some(conn) = self.conn_mut(id) else {
            return;
        };
        let Some((since, last_send)) = conn.finished else {
            return;
        };
        let now = Instant::now();
        let quiet = last_send.is_none_or(|t| now.duration_since(t) >= FINISH_QUIET);
        let answered = quiet && conn.sendq.is_empty() && !conn.in_role.holds_any();
        if answered || now.duration_since(since) >= limit {
            self.close_conn(id, CloseReason::PeerClosed);
        } else {
            self.timers
                .set(TimerKey::Conn(id), now + FINISH_QUIET, None);
        }
    }

    /// Partial messages hold more than the budget: closes this loop's connections that hold
    /// the most until the total is within it (or this loop holds nothing more).
    pub(super) fn enforce_partial_budget(&mut self) {
        let budget = self.config.limits.partial.clone();
        while budget.held() > budget.cap() {
            let Some((id, held)) = self
                .conns
                .iter()
                .filter(|(_, c)| c.held > 0)
                .max_by_key(|(_, c)| c.held)
                .map(|(_, c)| (c.id, c.held))
            else {
                return;
            };
            let reason = CloseReason::MemoryCap {
                held,
                total: budget.held(),
                cap: budget.cap(),
            };
            self.close_conn(id, reason);
        }
    }

    /// Closes open connections that have waited longer than the idle timeout for a message to
    /// complete: holding part of one, not read because their output does not drain, or accepted
    /// and silent since (see `limits`). Progress is a message cut since the last sweep.
    pub(super) fn sweep_idle(&mut self) {
        let Some(timeout) = self.config.limits.idle_timeout else {
            return;
        };
        let now = Instant::now();
        let mut idle = Vec::new();
        for (_, c) in self.conns.iter_mut() {
            if c.state != State::Open {
                continue; // Connecting and closing connections have deadlines of their own.
            }
            if c.messages != c.mark.0 {
                c.mark = (c.messages, now);
                continue;
            }
            let waiting = c.has_partial() || c.throttled || (c.link.is_none() && c.messages == 0);
            if !waiting {
                c.mark.1 = now;
            } else if now.duration_since(c.mark.1) >= timeout {
                idle.push(c.id);
            }
        }
        for id in idle {
            self.close_conn(id, CloseReason::IdleTimeout { after: timeout });
        }
    }
}

/// Logs why a connection closes: ordinary ends at debug level, the rest as rate-limited
/// warnings, one kind per reason.
pub(super) fn log_close(peer: SocketAddr, id: ConnId, reason: &CloseReason) {
    match reason {
        CloseReason::PeerClosed | CloseReason::LocalClose | CloseReason::Shutdown => {
            log::debug!("closing {peer} ({id}): {reason}")
        }
        CloseReason::IdleTimeout { .. } => {
            crawlfleet_core::warn_limited!("close-idle", "closing {peer} ({id}): {reason}")
        }
        CloseReason::MemoryCap { .. } => {
            crawlfleet_core::warn_limited!("close-memory", "closing {peer} ({id}): {reason}")
        }
        CloseReason::Oversized { .. } | CloseReason::BadFrame(_) => {
            crawlfleet_core::warn_limited!("close-bad-input", "closing {peer} ({id}): {reason}")
        }
        // A peer that went away (reset, broken pipe) is the peer's business, like a close.
        CloseReason::Io(e)
            if matches!(
                e.kind,
                io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
            ) =>
        {
            log::debug!("closing {peer} ({id}): {reason}")
        }
        CloseReason::Io(_) | CloseReason::LingerExpired => {
            crawlfleet_core::warn_limited!("close-io", "closing {peer} ({id}): {reason}")
        }
    }
}
