//! Replays the fuzz corpus (fuzz/corpus/frame/) through the invariants the `frame` fuzz target
//! asserts, so a finding the fuzzer once made stays fixed without a fuzzing toolchain.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::util::{checkout_path, hex, vectors};

#[path = "../fuzz/frame_invariants.rs"]
mod frame_invariants;

fn check_named(name: &str, data: &[u8]) {
    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| frame_invariants::check(data))) {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("{name} ({}): {why}", hex(data));
    }
}

#[test]
fn every_corpus_file_passes_the_fuzz_invariants() {
    let dir = checkout_path("fuzz/corpus/frame");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    for path in &files {
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        check_named(&path.display().to_string(), &data);
    }
    assert!(
        files.len() >= 20,
        "only {} corpus files in {}",
        files.len(),
        dir.display()
    );
}

#[test]
fn every_vector_passes_the_fuzz_invariants() {
    for v in vectors() {
        check_named(&v.name, &v.wire);
        check_named(&v.name, v.marshal());
    }
}
