//! Identifiers handed out by the event loop (connections, links, listeners) or chosen by the role
//! (timers).

use std::fmt;

/// One TCP connection, accepted or outgoing. Fresh for every TCP connection, never reused while
/// the loop runs (a reconnected link gets a new one), so a stale id can never reach another peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(u64);

impl ConnId {
    /// Packs the slab key (low 32 bits) with a serial number (high 32 bits) that tells apart the
    /// connections that occupy the same slab slot one after the other.
    pub(crate) fn new(key: usize, serial: u32) -> Option<Self> {
        let key = u32::try_from(key).ok()?;
        Some(ConnId(u64::from(serial) << 32 | u64::from(key)))
    }

    /// The slab key of the connection.
    pub(crate) fn key(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }

    /// The id as one integer, for logs and maps outside the loop.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn {}.{}", self.0 >> 32, self.0 & 0xffff_ffff)
    }
}

/// An outgoing connection that the loop keeps up (see [`Handle::connect`](crate::Handle::connect)):
/// the same id across reconnects, while each TCP connection under it gets a fresh [`ConnId`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub(crate) u64);

impl LinkId {
    /// The id as one integer.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for LinkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "link {}", self.0)
    }
}

/// A listening socket: its index in the order of the builder's `listen` calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ListenerId(pub usize);

impl fmt::Display for ListenerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "listener {}", self.0)
    }
}

/// A timer, named by the role: setting a timer with an id that is already set replaces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerId(pub u64);

impl fmt::Display for TimerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "timer {}", self.0)
    }
}
