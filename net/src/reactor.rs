//! The one poll loop under every network loop of crawlfleet: it owns the `mio::Poll`, its event
//! buffer and its waker, and runs turns for a [`Turn`] (a driver): sleep until readiness or the
//! driver's next deadline, hand each readiness event to the driver, then let it do the rest of
//! its turn (commands, timers, queued work) and say whether to go on.
//!
//! Two drivers run on it:
//! - the message loop ([`EventLoop`](crate::EventLoop)): listeners, accepted connections and
//!   outgoing links cut by a [`Framing`](crate::Framing) (FSCMT frames, the link store's
//!   messages, HTTP requests), talking to its role over channels;
//! - the crawl engine's HTTP client ([`fetch`](crate::fetch)): a keep-alive pool of outgoing
//!   HTTP and HTTPS connections answering fetch requests.
//!
//! They differ in what a connection is (a framed peer of a role, or a pooled client socket with a
//! TLS session and one request in flight), not in how the loop turns; this module is the only
//! place a `Poll` is made.

use std::io;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::event::Event;
use mio::{Events, Poll, Registry, Token, Waker};

use crate::io_util::interrupted;
use crate::loopstats::{self, LoopStats};

/// The waker's token. Drivers give their sockets tokens well below it.
pub(crate) const WAKER: Token = Token(usize::MAX);

/// A driver of the [`Reactor`]: what a network loop does with each turn.
pub(crate) trait Turn {
    /// How long the coming poll may sleep: `None` until an event, zero when work is queued.
    fn poll_timeout(&mut self) -> Option<Duration>;
    /// One readiness event; the waker's comes with token [`WAKER`].
    fn on_event(&mut self, ev: &Event);
    /// The rest of the turn, after its events. `Break` ends [`Reactor::run`].
    fn after_events(&mut self) -> ControlFlow<()>;
    /// Connections the driver holds now (for `/metrics`).
    fn connections(&self) -> usize;
    /// Connections the driver has opened or accepted so far (for `/metrics`).
    fn opened(&self) -> u64;
}

/// A poll with its event buffer.
#[derive(Debug)]
pub(crate) struct Reactor {
    poll: Poll,
    events: Events,
    waker: Arc<Waker>,
    /// Turn times and connections, listed for `/metrics` ([`loopstats::loops`]).
    stats: Arc<LoopStats>,
}

impl Reactor {
    /// A new poll taking up to `capacity` readiness events per turn, with its waker registered,
    /// reporting as `name` ([`loopstats`]).
    pub(crate) fn new(capacity: usize, name: &str) -> io::Result<Reactor> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        Ok(Reactor {
            poll,
            events: Events::with_capacity(capacity),
            waker,
            stats: loopstats::register(name),
        })
    }

    /// Where sockets are registered. A driver keeps its own clone
    /// ([`Registry::try_clone`]) so it can register while the reactor runs it.
    pub(crate) fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// Wakes the poll from another thread (its events carry [`WAKER`]).
    pub(crate) fn waker(&self) -> Arc<Waker> {
        Arc::clone(&self.waker)
    }

    /// Runs turns until the driver breaks (`Ok`) or the poll fails (`Err`; an interrupted
    /// poll is retried).
    pub(crate) fn run<T: Turn>(&mut self, driver: &mut T) -> io::Result<()> {
        loop {
            let timeout = driver.poll_timeout();
            if let Err(e) = self.poll.poll(&mut self.events, timeout) {
                if interrupted(&e) {
                    continue;
                }
                return Err(e);
            }
            let woke = Instant::now();
            for ev in self.events.iter() {
                driver.on_event(ev);
            }
            let flow = driver.after_events();
            self.stats.turns.record(woke.elapsed().as_secs_f64());
            self.stats
                .connections
                .store(driver.connections() as u64, Ordering::Relaxed);
            self.stats.opened.store(driver.opened(), Ordering::Relaxed);
            if flow.is_break() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts turns and wake-ups; stops after a given number of turns.
    struct Counter {
        turns: usize,
        wakes: usize,
        stop_after: usize,
    }

    impl Turn for Counter {
        fn poll_timeout(&mut self) -> Option<Duration> {
            Some(Duration::from_millis(10))
        }
        fn on_event(&mut self, ev: &Event) {
            if ev.token() == WAKER {
                self.wakes += 1;
            }
        }
        fn connections(&self) -> usize {
            0
        }
        fn opened(&self) -> u64 {
            0
        }
        fn after_events(&mut self) -> ControlFlow<()> {
            self.turns += 1;
            if self.turns >= self.stop_after {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        }
    }

    #[test]
    fn turns_until_the_driver_breaks_and_delivers_the_waker() {
        let mut reactor = Reactor::new(16, "test-reactor").unwrap();
        reactor.waker().wake().unwrap();
        let mut c = Counter {
            turns: 0,
            wakes: 0,
            stop_after: 3,
        };
        reactor.run(&mut c).unwrap();
        assert_eq!(c.turns, 3);
        assert_eq!(c.wakes, 1, "the wake before run is seen in the first turn");
    }
}
