//! `up`'s progress: an indicatif bar on a terminal, or one plain line every 10 s elsewhere (a
//! log file, CI), each with pages fetched, entries queued (the multinode scheduler's crawl
//! queue, the nodes' queues and the entries their engines hold for a site), pages/s, bytes/s
//! and errors (`--progress never|auto|always`). With `--log-format json` the plain lines, and
//! every other line `up` writes to standard error ([`tell`]), are log records instead.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// When `up` shows progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProgressMode {
    /// Never.
    Never,
    /// A bar when standard error is a terminal, a plain line every 10 s otherwise.
    Auto,
    /// Plain lines every 10 s, on a terminal too (no bar).
    Always,
}

/// What a progress report shows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Figures {
    /// Pages fetched so far (this run).
    pub fetched: u64,
    /// Documents stored (this run).
    pub stored: u64,
    /// Entries waiting: crawl queues of the multinode scheduler and the nodes, and entries
    /// the nodes' engines hold for their sites.
    pub queued: u64,
    /// Fetch errors (this run).
    pub errors: u64,
    /// Pages per second over the last second or more.
    pub pages_per_sec: f64,
    /// Bytes received per second over the same time.
    pub bytes_per_sec: f64,
}

impl Figures {
    /// The figures as one line.
    pub fn line(&self) -> String {
        format!(
            "{} pages fetched, {} stored, {} queued, {:.0} pages/s, {}/s, {} errors",
            self.fetched,
            self.stored,
            self.queued,
            self.pages_per_sec,
            human_bytes(self.bytes_per_sec),
            self.errors
        )
    }
}

fn human_bytes(b: f64) -> String {
    match b {
        b if b >= 1e9 => format!("{:.1} GB", b / 1e9),
        b if b >= 1e6 => format!("{:.1} MB", b / 1e6),
        b if b >= 1e3 => format!("{:.1} kB", b / 1e3),
        b => format!("{b:.0} B"),
    }
}

/// The target of the progress lines when log records are JSON (`up` lets them through at info
/// while it shows only warnings of the rest).
const PROGRESS_TARGET: &str = "crawlfleet::progress";

/// The target of `up`'s other lines when log records are JSON (let through at info too).
const TELL_TARGET: &str = "crawlfleet::up";

/// Writes a line for the operator to standard error: as it is with text logs, or as a log
/// record of `level` when log records are JSON, so that standard error stays one object a line.
pub fn tell(level: log::Level, line: std::fmt::Arguments<'_>) {
    match crate::log_format() {
        crate::cli::LogFormat::Text => eprintln!("{line}"),
        crate::cli::LogFormat::Json => log::log!(target: TELL_TARGET, level, "{line}"),
    }
}

/// Shows progress as the mode says.
pub struct Progress {
    bar: Option<ProgressBar>,
    lines_every: Option<Duration>,
    last_line: Instant,
    started: Instant,
}

impl Progress {
    /// Progress for `mode`; nothing with `quiet` (`--json`). `every` is the plain lines'
    /// interval.
    pub fn new(mode: ProgressMode, quiet: bool, every: Duration) -> Progress {
        // Log records as JSON leave no room for a bar: plain lines, which are records then.
        let terminal =
            std::io::stderr().is_terminal() && crate::log_format() == crate::cli::LogFormat::Text;
        let (bar, lines) = match (mode, quiet, terminal) {
            (ProgressMode::Never, _, _) | (_, true, _) => (false, false),
            (ProgressMode::Auto, false, true) => (true, false),
            (ProgressMode::Auto, false, false) | (ProgressMode::Always, false, _) => (false, true),
        };
        let bar = bar.then(|| {
            let b = ProgressBar::new_spinner();
            b.set_style(
                ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            b
        });
        let now = Instant::now();
        Progress {
            bar,
            lines_every: lines.then_some(every),
            last_line: now,
            started: now,
        }
    }

    /// Shows the figures (the bar at once, a line when one is due).
    pub fn show(&mut self, f: &Figures) {
        if let Some(b) = &self.bar {
            b.set_message(f.line());
            b.tick();
        }
        if let Some(every) = self.lines_every {
            if self.last_line.elapsed() >= every {
                self.last_line = Instant::now();
                let line = format!(
                    "progress {:.0} s: {}",
                    self.started.elapsed().as_secs_f64(),
                    f.line()
                );
                match crate::log_format() {
                    crate::cli::LogFormat::Text => eprintln!("{line}"),
                    crate::cli::LogFormat::Json => log::info!(target: PROGRESS_TARGET, "{line}"),
                }
            }
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}
