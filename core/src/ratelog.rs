//! Rate-limited warnings (DESIGN.md "Limits every port keeps": logs of repeated errors are
//! rate-limited): at most one line per kind per second, the next line saying how many of that
//! kind were left out. A peer flooding bad input costs a line a second, not a line a message.
//!
//! ```
//! for i in 0..1000 {
//!     crawlfleet_core::warn_limited!("doc-example", "message {i} refused");
//! }
//! // One line was written; the next one after a second says 999 were suppressed.
//! ```

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The window within which one line per kind is written.
pub const WINDOW: Duration = Duration::from_secs(1);

/// Per kind: when its last line was written and how many were left out since.
fn table() -> &'static Mutex<HashMap<&'static str, (Instant, u64)>> {
    static TABLE: OnceLock<Mutex<HashMap<&'static str, (Instant, u64)>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// Whether a line of `kind` may be written now: `Some(n)` with the number left out since the
/// last one, or `None` (counted as left out).
pub fn admit(kind: &'static str) -> Option<u64> {
    admit_at(kind, Instant::now())
}

fn admit_at(kind: &'static str, now: Instant) -> Option<u64> {
    let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
    match t.get_mut(kind) {
        Some((last, left_out)) if now.duration_since(*last) < WINDOW => {
            *left_out += 1;
            None
        }
        Some((last, left_out)) => {
            *last = now;
            Some(std::mem::take(left_out))
        }
        None => {
            t.insert(kind, (now, 0));
            Some(0)
        }
    }
}

/// Writes an admitted line at warn level under `target`, with the count left out.
pub fn write(target: &str, left_out: u64, args: fmt::Arguments<'_>) {
    if left_out > 0 {
        log::warn!(target: target, "{args} ({left_out} more like it in the last second not logged)");
    } else {
        log::warn!(target: target, "{args}");
    }
}

/// `log::warn!` at most once per `kind` per second; see the module documentation.
#[macro_export]
macro_rules! warn_limited {
    ($kind:expr, $($arg:tt)+) => {
        if let Some(left_out) = $crate::ratelog::admit($kind) {
            $crate::ratelog::write(module_path!(), left_out, format_args!($($arg)+));
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_kind_per_window_and_the_next_counts_the_rest() {
        let t0 = Instant::now();
        assert_eq!(admit_at("test-a", t0), Some(0));
        for _ in 0..5 {
            assert_eq!(admit_at("test-a", t0 + Duration::from_millis(10)), None);
        }
        // Another kind is not held back by the first.
        assert_eq!(admit_at("test-b", t0), Some(0));
        assert_eq!(admit_at("test-a", t0 + WINDOW), Some(5));
        assert_eq!(admit_at("test-a", t0 + WINDOW * 3), Some(0));
    }
}
