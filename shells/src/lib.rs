//! crawlfleet's roles and tools, each a small module wiring `crawlfleet-core` to
//! `crawlfleet-net`, behind the `crawlfleet` command line.
//!
//! `main` parses [`cli::Cli`] and calls [`run`], which dispatches to one documented function per
//! subcommand.
#![deny(missing_docs)]

pub mod bench;
pub mod cli;
pub mod dupclient;
pub mod dupserver;
pub mod inspect;
pub mod linkclient;
pub mod linkstore;
pub mod multinode;
pub mod node;
pub mod resolver;

use std::process::ExitCode;

/// The whole program: logging, the command line, one subcommand.
pub fn main() -> ExitCode {
    use clap::Parser;
    init_logging();
    run(cli::Cli::parse())
}

/// Sends `log` records to stderr; `RUST_LOG` overrides the default level (info).
pub fn init_logging() {
    let env = env_logger::Env::default().default_filter_or("info");
    let _ = env_logger::Builder::from_env(env)
        .format_timestamp_millis()
        .try_init();
}

/// Runs one subcommand, printing its error (if any) to stderr.
pub fn run(cli: cli::Cli) -> ExitCode {
    let result = match cli.command {
        cli::Command::Inspect(args) => inspect::run(&args).map_err(|e| e.to_string()),
        cli::Command::Dupserver(args) => dupserver::run(
            crawlfleet_core::dupserver::Mode::Server,
            &args.common,
            args.replica,
        )
        .map(|()| ExitCode::SUCCESS),
        cli::Command::Dupreplica(args) => {
            dupserver::run(crawlfleet_core::dupserver::Mode::Replica, &args, None)
                .map(|()| ExitCode::SUCCESS)
        }
        cli::Command::Multinode(args) => multinode::run(&args).map(|()| ExitCode::SUCCESS),
        cli::Command::Node(args) => node::run(&args).map(|()| ExitCode::SUCCESS),
        cli::Command::Bench(cli::BenchCommand::Dup(args)) => bench::dup::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
        cli::Command::Bench(cli::BenchCommand::Route(args)) => bench::route::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
        cli::Command::Bench(cli::BenchCommand::Dupstore(args)) => bench::dupstore::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
        cli::Command::Bench(cli::BenchCommand::Queue(args)) => bench::queue::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
        cli::Command::Bench(cli::BenchCommand::Links(args)) => bench::links::run(&args)
            .map(|()| ExitCode::SUCCESS)
            .map_err(|e| e.to_string()),
        cli::Command::Linkstore(args) => linkstore::run(&args).map(|()| ExitCode::SUCCESS),
        cli::Command::Links(args) => linkstore::query::run(&args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("crawlfleet: {e}");
            ExitCode::FAILURE
        }
    }
}
