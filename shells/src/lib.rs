//! crawlfleet's roles and tools, each a small module wiring `crawlfleet-core` to
//! `crawlfleet-net`, behind the `crawlfleet` command line.
//!
//! `main` parses [`cli::Cli`] and calls [`run`], which dispatches to one documented function per
//! subcommand.
#![deny(missing_docs)]

pub mod admin;
pub mod bench;
pub mod cli;
pub mod configfile;
pub mod crawl;
pub mod dashboard;
pub mod distributor;
pub mod docs;
pub mod dupclient;
pub mod dupserver;
pub mod inspect;
pub mod linkclient;
pub mod linkstore;
pub mod login;
pub mod metrics;
pub mod multinode;
pub mod nameserver;
pub mod node;
pub mod nsclient;
pub mod resolver;
pub mod rup;
pub mod schedpolicy;
pub mod search;
pub mod sessionsink;
pub mod starter;
pub mod stop;
pub mod synthweb;
pub mod up;
pub mod warc;

use std::process::ExitCode;

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Silences [`announce`] (roles inside `crawlfleet up --json`, whose standard output is the
/// summary).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Prints a role's start line (scripts read bound addresses from it) and flushes.
pub fn announce(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

/// The whole program: logging, the command line, one subcommand.
pub fn main() -> ExitCode {
    main_from(std::env::args_os())
}

/// [`main`] on the command line `args` (the program name first): `crawlfleet-bench role ...`
/// runs a role in a benchmark's child process so.
pub fn main_from<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::{CommandFactory, FromArgMatches};
    tune_allocator();
    exit_quietly_on_closed_output();
    let open_files = raise_open_files_limit();
    let matches = cli::Cli::command().get_matches_from(args);
    let cli = cli::Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The subcommand's name is the role of JSON log records.
    let role = matches.subcommand_name().unwrap_or("crawlfleet");
    // `up` draws a progress line: only warnings unless RUST_LOG asks for more (and, as JSON,
    // the progress lines, which are log records then).
    let level = match cli.command {
        cli::Command::Up(_) => "warn,crawlfleet::progress=info,crawlfleet::up=info",
        _ => "info",
    };
    init_logging_as(level, cli.log_format, role);
    log_open_files_limit(open_files);
    schedpolicy::choose(cli.sched);
    run(cli)
}

/// What [`raise_open_files_limit`] found and did: the soft limit before, the one now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit the process started with (`None`: unlimited).
    pub was: Option<u64>,
    /// The soft limit now.
    pub now: Option<u64>,
}

/// Most descriptors asked for when the hard limit is unlimited (Linux refuses a soft limit over
/// `fs.nr_open`, 1,048,576 by default).
const OPEN_FILES_CEILING: u64 = 1 << 20;

/// Lifts the soft limit on open descriptors to the hard limit, as servers do at start (nginx's
/// `worker_rlimit_nofile`, Go's runtime since 1.19): a login shell's soft limit is often 1,024
/// while its hard limit is hundreds of thousands, and a node's fetcher (512 sockets), a link
/// store's clients or a synthetic web of 10,000 hosts (a listener each) need more than 1,024.
/// The hard limit stays; an administrator lowers it to bound a role. Call before threads start.
pub fn raise_open_files_limit() -> OpenFiles {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    let was = limit.current;
    let want = limit.maximum.map_or(OPEN_FILES_CEILING, |m| m);
    if was.is_some_and(|c| c < want) {
        limit.current = Some(want);
        if setrlimit(Resource::Nofile, limit).is_err() {
            return OpenFiles { was, now: was };
        }
    }
    OpenFiles {
        was,
        now: getrlimit(Resource::Nofile).current,
    }
}

/// One line once logging is up, when [`raise_open_files_limit`] changed the limit.
pub fn log_open_files_limit(open: OpenFiles) {
    let show = |l: Option<u64>| l.map_or("unlimited".to_string(), |n| n.to_string());
    if open.was != open.now {
        log::debug!(
            "open descriptors: soft limit raised from {} to {}",
            show(open.was),
            show(open.now)
        );
    }
}

/// Keeps glibc's allocator from handing memory back to the kernel after every batch. The roles
/// pass frame buffers of hundreds of KiB between threads (a routing thread fills one per node,
/// the event loop writes and frees it): by default glibc serves each from a fresh mmap, or trims
/// the heap top when it is freed, and every page is faulted in and zeroed again the next time.
/// Measured on the multinode scheduler routing 1 M URIs: its routing thread's system time fell
/// from 0.43-0.66 s to 0.18-0.20 s. The cost is that the heap keeps its peak size, up to the trim
/// threshold, until the process exits.
/// Call it first thing in `main`, before any thread starts (the benchmarks' binary does too).
pub fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        for (param, value) in [
            // Blocks below 32 MiB come from the heap, not from a mmap of their own.
            (libc::M_MMAP_THRESHOLD, 32 << 20),
            // A heap shrinks only when more than 512 MiB at its top are free...
            (libc::M_TRIM_THRESHOLD, 512 << 20),
            // ... and grows 64 MiB beyond each need, so growth is rare.
            (libc::M_TOP_PAD, 64 << 20),
        ] {
            // SAFETY: mallopt only sets allocator parameters; it is called before any thread
            // starts and with parameters glibc documents for it. A refusal (0) leaves glibc's
            // default in place, which is correct, only slower.
            unsafe { libc::mallopt(param, value) };
        }
    }
}

/// Makes a closed standard output or error (`crawlfleet admin ... | head`) a normal end of
/// the program, exit status 0, in every subcommand: Rust ignores SIGPIPE, so `println!` to a
/// closed pipe panics with "failed printing to stdout: Broken pipe", which this hook turns into
/// an exit instead of a panic message.
fn exit_quietly_on_closed_output() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        let printing = text.starts_with("failed printing to stdout")
            || text.starts_with("failed printing to stderr");
        if printing && text.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info)
    }));
}

/// Sends `log` records to stderr; `RUST_LOG` overrides the default level (info).
pub fn init_logging() {
    init_logging_at("info");
}

/// Sends `log` records to stderr; `RUST_LOG` overrides the default `level`.
pub fn init_logging_at(level: &str) {
    init_logging_as(level, cli::LogFormat::Text, "crawlfleet");
}

/// The format [`init_logging_as`] set: `LogFormat::Json` as 1.
static LOG_FORMAT: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// The format of the log records (`--log-format`), for output that must follow it (`up`'s
/// progress lines).
pub fn log_format() -> cli::LogFormat {
    match LOG_FORMAT.load(std::sync::atomic::Ordering::Relaxed) {
        1 => cli::LogFormat::Json,
        _ => cli::LogFormat::Text,
    }
}

/// Sends `log` records to stderr in `format`; `RUST_LOG` overrides the default `level`. As
/// JSON, every record is one line (a message's own line breaks are escaped) naming `role`.
pub fn init_logging_as(level: &str, format: cli::LogFormat, role: &str) {
    let env = env_logger::Env::default().default_filter_or(level);
    let mut builder = env_logger::Builder::from_env(env);
    match format {
        cli::LogFormat::Text => {
            builder.format_timestamp_millis();
        }
        cli::LogFormat::Json => {
            let role = role.to_owned();
            builder.format(move |buf, record| {
                use std::io::Write;
                let line = serde_json::json!({
                    "timestamp": buf.timestamp_millis().to_string(),
                    "level": record.level().as_str(),
                    "target": record.target(),
                    "message": record.args().to_string(),
                    "role": role,
                });
                writeln!(buf, "{line}")
            });
        }
    }
    if builder.try_init().is_ok() {
        let json = u8::from(format == cli::LogFormat::Json);
        LOG_FORMAT.store(json, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs one subcommand, printing its error (if any) to stderr. A role stops cleanly on SIGINT
/// or SIGTERM ([`stop`]): it flushes what it holds and returns, and the process exits 0.
pub fn run(cli: cli::Cli) -> ExitCode {
    let stop = stop::on_signals;
    // A role process's threads are the role's (`up` sets the policy in each role's thread, not
    // in its main thread, which starts no crawl work).
    if cli.command.is_role() {
        schedpolicy::apply();
    }
    let result = match cli.command {
        cli::Command::Inspect(args) => inspect::run(&args).map_err(|e| e.to_string()),
        cli::Command::Dupserver(args) => stop().and_then(|stop| {
            dupserver::run(
                crawlfleet_core::dupserver::Mode::Server,
                &args.common,
                args.replica,
                &stop,
            )
            .map(|()| ExitCode::SUCCESS)
        }),
        cli::Command::Dupreplica(args) => stop().and_then(|stop| {
            dupserver::run(
                crawlfleet_core::dupserver::Mode::Replica,
                &args,
                None,
                &stop,
            )
            .map(|()| ExitCode::SUCCESS)
        }),
        cli::Command::Multinode(args) => {
            stop().and_then(|stop| multinode::run(&args, &stop).map(|()| ExitCode::SUCCESS))
        }
        cli::Command::Node(args) => {
            stop().and_then(|stop| node::run(&args, &stop).map(|()| ExitCode::SUCCESS))
        }
        cli::Command::Up(args) => up::run(&args),
        cli::Command::Admin(args) => admin::cli::run(&args),
        cli::Command::Bench(args) => return bench::run(&args),
        cli::Command::Synthweb(args) => synthweb::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
        cli::Command::Linkstore(args) => {
            stop().and_then(|stop| linkstore::run(&args, &stop).map(|()| ExitCode::SUCCESS))
        }
        cli::Command::Links(args) => linkstore::query::run(&args).map(|()| ExitCode::SUCCESS),
        cli::Command::Docs(args) => docs::run(&args).map_err(|e| e.to_string()),
        cli::Command::Nameserver(args) => stop().and_then(|stop| nameserver::main(&args, &stop)),
        cli::Command::Distributor(args) => {
            stop().and_then(|stop| distributor::run(&args, &stop).map(|()| ExitCode::SUCCESS))
        }
        cli::Command::Distributors(args) => distributor::status::run(&args),
        cli::Command::Search(args) => search::run(&args),
        cli::Command::Index(args) => distributor::index::run(&args),
        cli::Command::RupServer(args) => {
            stop().and_then(|stop| rup::run(&args, &stop).map(|()| ExitCode::SUCCESS))
        }
        cli::Command::Config(args) => configfile::run(&args),
        cli::Command::Init(args) => starter::init(&args),
        cli::Command::Completions(args) => starter::completions(&args),
        cli::Command::Man(args) => starter::man(&args),
        cli::Command::RupDeliver(args) => {
            node::rup_spool::deliver(&args.data_dir).map(|()| ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            // A role's last word goes where its log records go, in their format.
            match log_format() {
                cli::LogFormat::Text => eprintln!("crawlfleet: {e}"),
                cli::LogFormat::Json => log::error!(target: "crawlfleet", "{e}"),
            }
            ExitCode::FAILURE
        }
    }
}
