//! Exponential backoff between reconnect attempts of an outgoing link.

use std::time::Duration;

/// How long an outgoing link waits between connection attempts: `initial` after the first
/// failure, doubling after each further failure, never more than `max`. A successful connection
/// resets it, so the first reconnect after a lost connection waits `initial`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// The first delay.
    pub initial: Duration,
    /// The cap.
    pub max: Duration,
}

impl Default for BackoffPolicy {
    /// 50 ms doubling to a 5 s cap.
    fn default() -> Self {
        BackoffPolicy {
            initial: Duration::from_millis(50),
            max: Duration::from_secs(5),
        }
    }
}

/// The backoff state of one link.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    policy: BackoffPolicy,
    next: Duration,
}

impl Backoff {
    /// A fresh state: the next delay is `policy.initial` (at least 1 ms, so a zero policy cannot
    /// spin the loop).
    pub(crate) fn new(policy: BackoffPolicy) -> Self {
        let mut b = Backoff {
            policy,
            next: Duration::ZERO,
        };
        b.reset();
        b
    }

    /// The delay before the next attempt; doubles the one after.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = d.saturating_mul(2).min(self.cap());
        d
    }

    /// Back to the initial delay.
    pub(crate) fn reset(&mut self) {
        self.next = self.policy.initial.max(MIN_DELAY).min(self.cap());
    }

    fn cap(&self) -> Duration {
        self.policy.max.max(MIN_DELAY)
    }
}

const MIN_DELAY: Duration = Duration::from_millis(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new(BackoffPolicy::default());
        let got: Vec<u64> = (0..10).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(got, [50, 100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(50));
    }

    #[test]
    fn zero_policy_does_not_spin() {
        let mut b = Backoff::new(BackoffPolicy {
            initial: Duration::ZERO,
            max: Duration::ZERO,
        });
        assert_eq!(b.next_delay(), MIN_DELAY);
        assert_eq!(b.next_delay(), MIN_DELAY);
    }
}
