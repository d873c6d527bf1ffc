//! Fuzzes the collection configuration XML (FSCMT 2.2.2.3) against its writer and the typed
//! configuration built from it.
//! The invariants live in ../collection_invariants.rs, which tests/fuzz_corpus.rs replays the corpus
//! through.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../collection_invariants.rs"]
mod collection_invariants;

fuzz_target!(|data: &[u8]| collection_invariants::check(data));
