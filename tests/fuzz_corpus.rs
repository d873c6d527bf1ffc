//! Replays the fuzz corpora (fuzz/corpus/<target>/) through the invariants each fuzz target
//! asserts (fuzz/<target>_invariants.rs), so a finding the fuzzer once made stays fixed without a
//! fuzzing toolchain.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::util::{checkout_path, hex, vectors};

#[path = "../fuzz/frame_invariants.rs"]
mod frame_invariants;

#[path = "../fuzz/wasdr_invariants.rs"]
mod wasdr_invariants;

#[path = "../fuzz/xmlrpc_invariants.rs"]
mod xmlrpc_invariants;

#[path = "../fuzz/collection_invariants.rs"]
mod collection_invariants;

#[path = "../fuzz/http_invariants.rs"]
mod http_invariants;

fn check_named(name: &str, data: &[u8], check: fn(&[u8])) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(data))) {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("{name} ({}): {why}", hex(data));
    }
}

/// Runs every file of fuzz/corpus/`target`/ through `check`; the corpus must hold at least
/// `min_files` files (so that a corpus lost by mistake does not pass unnoticed).
fn replay(target: &str, check: fn(&[u8]), min_files: usize) {
    let dir = checkout_path(&format!("fuzz/corpus/{target}"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    for path in &files {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        check_named(&path.display().to_string(), &data, check);
    }
    assert!(
        files.len() >= min_files,
        "only {} corpus files in {}",
        files.len(),
        dir.display()
    );
}

#[test]
fn every_corpus_file_passes_the_fuzz_invariants() {
    replay("frame", frame_invariants::check, 20);
}

#[test]
fn every_vector_passes_the_fuzz_invariants() {
    for v in vectors() {
        check_named(&v.name, &v.wire, frame_invariants::check);
        check_named(&v.name, v.marshal(), frame_invariants::check);
    }
}

#[test]
fn every_wasdr_corpus_file_passes_the_fuzz_invariants() {
    replay("wasdr", wasdr_invariants::check, 5);
}

#[test]
fn every_xmlrpc_corpus_file_passes_the_fuzz_invariants() {
    replay("xmlrpc", xmlrpc_invariants::check, 5);
}

#[test]
fn every_collection_corpus_file_passes_the_fuzz_invariants() {
    replay("collection", collection_invariants::check, 3);
}

#[test]
fn every_http_corpus_file_passes_the_fuzz_invariants() {
    replay("http", http_invariants::check, 5);
}
