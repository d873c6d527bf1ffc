//! What every poll loop of the process reports to `/metrics`: how long its turns take (the
//! work between two polls, the latency an event waits behind), how many connections it holds,
//! and how many it has opened or accepted (how often its connections are replaced). A loop
//! registers when its [`Reactor`](crate::reactor::Reactor) is made and leaves the list when it
//! is dropped.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crawlfleet_core::metrics::Histogram;

/// One loop's figures.
#[derive(Debug)]
pub struct LoopStats {
    /// The loop's name: its thread's, with `#2`, `#3`... after it when loops of one name run
    /// at once (the node schedulers of `crawlfleet up`).
    pub name: String,
    /// Seconds each turn spent on its events, commands and timers.
    pub turns: Histogram,
    /// Connections open now (written by the loop's thread only, at the end of each turn).
    pub connections: AtomicU64,
    /// Connections opened or accepted since the loop started (written by the loop's thread
    /// only, at the end of each turn).
    pub opened: AtomicU64,
}

impl LoopStats {
    /// Connections open at the end of the last turn.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Connections opened or accepted up to the end of the last turn.
    pub fn opened(&self) -> u64 {
        self.opened.load(Ordering::Relaxed)
    }
}

static LOOPS: Mutex<Vec<Weak<LoopStats>>> = Mutex::new(Vec::new());

/// Registers a loop named `name`.
pub(crate) fn register(name: &str) -> Arc<LoopStats> {
    let mut loops = LOOPS.lock().unwrap_or_else(|e| e.into_inner());
    loops.retain(|w| w.strong_count() > 0);
    let live: Vec<String> = loops
        .iter()
        .filter_map(Weak::upgrade)
        .map(|l| l.name.clone())
        .collect();
    let mut unique = name.to_string();
    let mut n = 1;
    while live.contains(&unique) {
        n += 1;
        unique = format!("{name}#{n}");
    }
    let stats = Arc::new(LoopStats {
        name: unique,
        turns: Histogram::default(),
        connections: AtomicU64::new(0),
        opened: AtomicU64::new(0),
    });
    loops.push(Arc::downgrade(&stats));
    stats
}

/// Every loop of the process running now, in the order they started.
pub fn loops() -> Vec<Arc<LoopStats>> {
    let loops = LOOPS.lock().unwrap_or_else(|e| e.into_inner());
    loops.iter().filter_map(Weak::upgrade).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_among_live_loops() {
        let a = register("test-loopstats");
        let b = register("test-loopstats");
        assert_eq!(a.name, "test-loopstats");
        assert_eq!(b.name, "test-loopstats#2");
        drop(a);
        let c = register("test-loopstats");
        assert_eq!(c.name, "test-loopstats");
        let names: Vec<String> = loops().iter().map(|l| l.name.clone()).collect();
        assert!(names.contains(&"test-loopstats#2".to_string()));
        assert!(!names.contains(&"test-loopstats#3".to_string()));
    }
}
