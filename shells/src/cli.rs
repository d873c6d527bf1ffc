//! The command line: one subcommand per role or tool.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// crawlfleet: a multinode web crawler fabric speaking the FAST crawler protocols.
#[derive(Debug, Parser)]
#[command(name = "crawlfleet", version, about, long_about = None)]
pub struct Cli {
    /// The mode to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print FSCMT frames (or bare marshal values) as JSON lines, or encode them back.
    ///
    /// Each frame becomes one line: {"priority": 0, "command": "PPDUP_ADD", "message": {...}}.
    /// Tuples are JSON arrays; lists are {"$list": [...]}; byte strings that are not UTF-8 are
    /// {"$hex": "..."}; see `crawlfleet_core::marshal::json` for every form. Lines read back
    /// with --encode give the same bytes.
    Inspect(InspectArgs),
}

/// Arguments of `crawlfleet inspect`.
#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Input file; standard input when absent or "-".
    pub input: Option<PathBuf>,
    /// The input (or, with --encode, the output) is hex text rather than binary; whitespace in
    /// hex input is ignored.
    #[arg(long)]
    pub hex: bool,
    /// Read JSON lines and write the frames (or values, with --raw) they describe.
    #[arg(long)]
    pub encode: bool,
    /// Bare marshal values without the 4-byte length header, one after another, each optionally
    /// followed by the link store terminator 2E 2E 2E 00 00 00 00 (MS-FSWASDR 2.2.1).
    #[arg(long)]
    pub raw: bool,
    /// Largest frame accepted, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub max_frame: usize,
    /// Deepest container nesting accepted.
    #[arg(long, default_value_t = 64)]
    pub max_depth: usize,
}
