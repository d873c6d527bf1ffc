//! The project's one wall clock: seconds since the Unix epoch, read by [`unix_now`] or, inside
//! a role that may be tested against time, through a [`Clock`] it was given, so that a test
//! advances time instead of sleeping.
//!
//! ```
//! use crawlfleet_core::clock::Clock;
//!
//! let clock = Clock::manual(1_700_000_000);
//! assert_eq!(clock.now(), 1_700_000_000);
//! clock.advance(3600);
//! assert_eq!(clock.now(), 1_700_003_600);
//! assert!(Clock::System.now() > 1_700_000_000);
//! ```

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch (0 for a clock set before 1970).
pub fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Seconds since the Unix epoch, rounded up: the time of an event that starts a period (a
/// quarantine, a block), so that the period, kept in whole seconds and ended by a timer reading
/// [`unix_now`], never ends before the time asked has passed.
pub fn unix_now_up() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| {
        let s = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        if d.subsec_nanos() > 0 {
            s.saturating_add(1)
        } else {
            s
        }
    })
}

/// Milliseconds since the Unix epoch (0 for a clock set before 1970), for records that keep
/// the time of an event to the millisecond (WARC file names).
pub fn unix_now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Where a role reads the time.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The system clock ([`unix_now`]).
    #[default]
    System,
    /// A clock that moves only when told to (shared by its clones).
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A manual clock reading `start`.
    pub fn manual(start: i64) -> Clock {
        Clock::Manual(Arc::new(AtomicI64::new(start)))
    }

    /// Seconds since the Unix epoch.
    pub fn now(&self) -> i64 {
        match self {
            Clock::System => unix_now(),
            Clock::Manual(t) => t.load(Ordering::Relaxed),
        }
    }

    /// [`Clock::now`] as the stores count time (never negative).
    pub fn now_u64(&self) -> u64 {
        u64::try_from(self.now()).unwrap_or(0)
    }

    /// Moves a manual clock `secs` ahead; the system clock cannot be moved.
    pub fn advance(&self, secs: i64) {
        if let Clock::Manual(t) = self {
            t.fetch_add(secs, Ordering::Relaxed);
        }
    }
}
