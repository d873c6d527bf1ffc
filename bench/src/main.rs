//! The `crawlfleet-bench` binary (also run as `crawlfleet bench`): parses the command line and
//! runs one benchmark.

use std::process::ExitCode;

/// mimalloc instead of glibc's malloc: allocating and freeing took a fifth of the instructions
/// of a crawl (callgrind of `bench crawl`); docs/performance.md ("Third round") has the figures.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    crawlfleet_bench::main()
}
