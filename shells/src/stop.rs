//! A clean stop for every role: SIGINT or SIGTERM asks each role's loop to stop accepting,
//! flush its queues, logs, stores and statistics, and return; the process then exits 0 and the
//! next start resumes from what was flushed. A second signal while the first is handled ends the
//! process at once with status 130, and a stop that hangs ends it after [`STOP_DEADLINE`] with
//! status 1 (a systemd `TimeoutStopSec` or an operator's second Ctrl-C need not wait for it).
//!
//! A [`Stop`] is the receiving end of a channel whose only sender a [`StopTrigger`] drops: every
//! clone sees the channel disconnected at once, so a role adds `recv(stop.receiver())` to the
//! `select!` it already waits in, and a stop wakes every role of the process together.
//!
//! ```
//! let (trigger, stop) = crawlfleet_shells::stop::Stop::pair();
//! assert!(!stop.is_set());
//! trigger.fire();
//! assert!(stop.is_set());
//! ```

use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use parking_lot::Mutex;

/// How long a role may take to stop cleanly after a signal before the process exits anyway
/// (status 1). Roles stop within a second; the bound only catches a stuck flush.
pub const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// Set once the process has been asked to stop (a clone of every role's [`Stop`]).
#[derive(Clone, Debug)]
pub struct Stop {
    rx: Receiver<()>,
}

/// Fires a [`Stop`] (and all its clones).
#[derive(Debug, Default)]
pub struct StopTrigger {
    tx: Mutex<Option<Sender<()>>>,
}

impl StopTrigger {
    /// Asks every role holding the matching [`Stop`] to stop; further calls do nothing.
    pub fn fire(&self) {
        self.tx.lock().take();
    }
}

impl Stop {
    /// A stop that never comes (roles run until the process ends).
    pub fn never() -> Stop {
        Stop {
            rx: crossbeam_channel::never(),
        }
    }

    /// A stop and the trigger that fires it.
    pub fn pair() -> (StopTrigger, Stop) {
        let (tx, rx) = crossbeam_channel::bounded(0);
        (
            StopTrigger {
                tx: Mutex::new(Some(tx)),
            },
            Stop { rx },
        )
    }

    /// Ready (disconnected) once the stop is asked: `recv(stop.receiver())` in a `select!`.
    pub fn receiver(&self) -> &Receiver<()> {
        &self.rx
    }

    /// Whether the stop has been asked.
    pub fn is_set(&self) -> bool {
        matches!(self.rx.try_recv(), Err(TryRecvError::Disconnected))
    }

    /// Waits until the stop is asked or `timeout` passes; true when asked.
    pub fn wait(&self, timeout: Duration) -> bool {
        matches!(
            self.rx.recv_timeout(timeout),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected)
        )
    }
}

/// The process's stop on SIGINT and SIGTERM: the first signal fires it (and starts the
/// [`STOP_DEADLINE`] watchdog), a second one exits at once with status 130. Installed once;
/// later calls return the same stop.
pub fn on_signals() -> Result<Stop, String> {
    static INSTALLED: Mutex<Option<Stop>> = Mutex::new(None);
    let mut installed = INSTALLED.lock();
    if let Some(s) = &*installed {
        return Ok(s.clone());
    }
    let (trigger, stop) = Stop::pair();
    let (mut read, write) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    let asked = Arc::new(AtomicBool::new(false));
    use signal_hook::consts::{SIGINT, SIGTERM};
    for sig in [SIGINT, SIGTERM] {
        let w = write
            .try_clone()
            .map_err(|e| format!("cannot handle signals: {e}"))?;
        // The conditional exit first, so that the first signal only sets the flag (actions run
        // in the order they were registered).
        signal_hook::flag::register_conditional_shutdown(sig, 130, asked.clone())
            .and_then(|_| signal_hook::flag::register(sig, asked.clone()))
            .and_then(|_| signal_hook::low_level::pipe::register(sig, w))
            .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
    }
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut byte = [0u8; 1];
            // One byte per signal; the first is the one that counts.
            if read.read(&mut byte).is_err() {
                return;
            }
            log::info!("stopping on a signal (again to force it)");
            trigger.fire();
            std::thread::sleep(STOP_DEADLINE);
            log::error!("the clean stop took more than {STOP_DEADLINE:?}: exiting");
            eprintln!("crawlfleet: the clean stop took more than {STOP_DEADLINE:?}: exiting");
            std::process::exit(1);
        })
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    *installed = Some(stop.clone());
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigger_wakes_every_clone() {
        let (trigger, stop) = Stop::pair();
        let other = stop.clone();
        assert!(!stop.wait(Duration::from_millis(1)));
        trigger.fire();
        assert!(stop.is_set() && other.is_set());
        assert!(other.wait(Duration::from_secs(60)));
        trigger.fire();
        assert!(!Stop::never().is_set());
    }
}
