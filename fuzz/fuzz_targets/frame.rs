//! Fuzzes FSCMT frame splitting and decoding (MS-FSCMT 2.2.1) and the marshal codec under it.
//! The invariants live in ../frame_invariants.rs, which tests/fuzz_corpus.rs replays the corpus
//! through.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../frame_invariants.rs"]
mod frame_invariants;

fuzz_target!(|data: &[u8]| frame_invariants::check(data));
