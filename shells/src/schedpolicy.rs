//! The CPU scheduling policy of the crawl's threads (`--sched`, `CRAWLFLEET_SCHED`).
//!
//! A crawl is throughput work: its threads hand each other work all the time (a node's thread
//! wakes its fetcher with requests, the fetcher wakes the node with pages, the node wakes its
//! event loop with frames for the duplicate server, the multinode scheduler and the link
//! store). Under Linux's default policy a thread that wakes another is usually preempted by it
//! on the spot, so on a busy machine every hand-over costs a context switch and the cache of
//! the thread that was running. `SCHED_BATCH` (sched(7): "for 'batch' style execution of
//! processes") keeps the fair share of CPU time and the nice value, and only stops a woken
//! thread from preempting the one running: the woken thread runs when a CPU is free or the
//! running thread's slice ends, by which time it usually has more than one item to take.
//! docs/performance.md ("Sixteenth round") has the measurements.
//!
//! The policy is set per thread and inherited by the threads a thread starts: a role's thread
//! (`up`'s [`crate::up::roles::spawn_role`]) or a role process's main thread sets it first, and
//! its fetchers, event loops and sync helpers inherit it. Processes a benchmark starts as peers
//! (nginx, wrk, Scrapy, spider) are started from threads that keep the default policy.

use std::sync::atomic::{AtomicU8, Ordering};

/// How the roles' threads are scheduled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Sched {
    /// `SCHED_BATCH`: a woken thread does not preempt the running one (the default).
    #[default]
    Batch,
    /// The system's default policy (`SCHED_OTHER`), as any other program.
    Normal,
}

impl Sched {
    /// The policy's name on the command line and in `CRAWLFLEET_SCHED`.
    pub fn name(self) -> &'static str {
        match self {
            Sched::Batch => "batch",
            Sched::Normal => "normal",
        }
    }
}

/// The policy [`choose`] set: 0 batch, 1 normal.
static CHOSEN: AtomicU8 = AtomicU8::new(0);

/// Sets the policy [`apply`] gives threads (the command line's `--sched`).
pub fn choose(s: Sched) {
    CHOSEN.store(
        match s {
            Sched::Batch => 0,
            Sched::Normal => 1,
        },
        Ordering::Relaxed,
    );
}

/// The policy [`choose`] set ([`Sched::Batch`] unless told otherwise).
pub fn chosen() -> Sched {
    match CHOSEN.load(Ordering::Relaxed) {
        1 => Sched::Normal,
        _ => Sched::Batch,
    }
}

/// Gives the calling thread the chosen policy; the threads it starts from now on inherit it.
/// A refusal (a sandbox that forbids `sched_setscheduler`) is logged and the thread keeps the
/// policy it had: scheduling changes speed, never what a role does.
pub fn apply() {
    if let Err(e) = set_this_thread(chosen()) {
        log::debug!("scheduling policy {:?} not set: {e}", chosen());
    }
}

/// Sets the calling thread's policy to `s` (priority 0, as both policies require).
pub fn set_this_thread(s: Sched) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let policy = match s {
            Sched::Batch => libc::SCHED_BATCH,
            Sched::Normal => libc::SCHED_OTHER,
        };
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param for the call.
        let rc = unsafe { libc::sched_setscheduler(0, policy, &param) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = s;
    Ok(())
}

/// The calling thread's policy: `Some(Batch)`, `Some(Normal)`, or `None` for any other
/// (a real-time or idle policy an administrator gave the process).
pub fn of_this_thread() -> Option<Sched> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: pid 0 is the calling thread; the call only reads its policy.
        match unsafe { libc::sched_getscheduler(0) } {
            libc::SCHED_BATCH => Some(Sched::Batch),
            libc::SCHED_OTHER => Some(Sched::Normal),
            _ => None,
        }
    }
    #[cfg(not(target_os = "linux"))]
    Some(Sched::Normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Sched::name`] is the name clap parses `--sched` and `CRAWLFLEET_SCHED` with, for
    /// every policy: the variable set from it is read back as the same policy.
    #[test]
    fn each_policy_name_is_the_one_the_command_line_takes() {
        use clap::ValueEnum;
        for s in Sched::value_variants() {
            let clap_name = s.to_possible_value().map(|v| v.get_name().to_string());
            assert_eq!(clap_name.as_deref(), Some(s.name()));
            assert_eq!(Sched::from_str(s.name(), false), Ok(*s));
        }
    }

    /// Each policy is set on the calling thread only, and a thread it starts inherits it.
    #[test]
    #[cfg(target_os = "linux")]
    fn a_thread_takes_the_policy_and_its_threads_inherit_it() {
        std::thread::spawn(|| {
            set_this_thread(Sched::Batch).unwrap();
            assert_eq!(of_this_thread(), Some(Sched::Batch));
            let child = std::thread::spawn(of_this_thread).join().unwrap();
            assert_eq!(child, Some(Sched::Batch));
            set_this_thread(Sched::Normal).unwrap();
            assert_eq!(of_this_thread(), Some(Sched::Normal));
            let child = std::thread::spawn(of_this_thread).join().unwrap();
            assert_eq!(child, Some(Sched::Normal));
        })
        .join()
        .unwrap();
    }
}
