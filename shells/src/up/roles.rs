//! The roles `crawlfleet up` runs on threads of its process: starting each, and stopping them
//! all cleanly (each role flushes what it holds and returns, as on a signal when it runs alone).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::stop::{Stop, StopTrigger};

/// How long [`Roles::stop`] waits for the roles to stop.
pub const STOP_WAIT: Duration = Duration::from_secs(5);

/// The threads of a cluster's roles and the stop they watch.
pub struct Roles {
    /// Set once the cluster is detached: a role that stops after that has nothing to tell.
    detached: AtomicBool,
    trigger: StopTrigger,
    stop: Stop,
    threads: Mutex<Vec<(String, RoleThread)>>,
}

/// A role's thread; it returns why the role stopped, if not on a stop.
type RoleThread = JoinHandle<Result<(), String>>;

/// Shared by the cluster and the code that starts its roles.
pub type RolesRef = Arc<Roles>;

impl Roles {
    /// No role yet.
    pub fn new() -> RolesRef {
        let (trigger, stop) = Stop::pair();
        Arc::new(Roles {
            detached: AtomicBool::new(false),
            trigger,
            stop,
            threads: Mutex::new(Vec::new()),
        })
    }

    /// From now on a role that stops only logs it instead of ending the process.
    pub fn detach(&self) {
        self.detached.store(true, Ordering::Release);
    }

    /// Asks every role to stop and waits (at most [`STOP_WAIT`]) until each has; what went
    /// wrong, one line per role that failed or did not stop in time.
    pub fn stop(&self) -> Vec<String> {
        self.trigger.fire();
        let threads = std::mem::take(&mut *self.threads.lock());
        let until = Instant::now() + STOP_WAIT;
        let mut failed = Vec::new();
        for (name, t) in threads {
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
            if !t.is_finished() {
                failed.push(format!("{name} did not stop within {STOP_WAIT:?}"));
                continue;
            }
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => failed.push(format!("{name}: {e}")),
                Err(_) => failed.push(format!("{name} panicked")),
            }
        }
        failed
    }
}

/// Runs role `name` on a thread of its own: `f` until the cluster's stop. A role that fails
/// before the stop ends the process (status 1) unless the cluster is detached.
pub fn spawn_role(
    name: &str,
    roles: &RolesRef,
    f: impl FnOnce(&Stop) -> Result<(), String> + Send + 'static,
) -> Result<(), String> {
    let label = name.to_string();
    let r = roles.clone();
    let t = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            // The role's policy, inherited by the threads it starts.
            crate::schedpolicy::apply();
            let result = f(&r.stop);
            if let Err(e) = &result {
                if r.detached.load(Ordering::Acquire) {
                    log::debug!("{label} stopped after the cluster was detached: {e}");
                } else if r.stop.is_set() {
                    log::error!("{label}: {e}");
                } else {
                    log::error!("{label} stopped: {e}");
                    // The record above is the line when log records are JSON.
                    if crate::log_format() == crate::cli::LogFormat::Text {
                        eprintln!("crawlfleet up: {label} stopped: {e}");
                    }
                    std::process::exit(1);
                }
            }
            result
        })
        .map_err(|e| format!("cannot start {name}: {e}"))?;
    roles.threads.lock().push((name.to_string(), t));
    Ok(())
}
