//! Fuzzes the link store's framing (MS-FSWASDR 2.2.1: a marshal dict, then the terminator
//! `2E 2E 2E 00 00 00 00`): cut all at once and byte by byte, with a small and a large size limit.
//! The invariants live in ../wasdr_invariants.rs, which tests/fuzz_corpus.rs replays the corpus
//! through.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../wasdr_invariants.rs"]
mod wasdr_invariants;

fuzz_target!(|data: &[u8]| wasdr_invariants::check(data));
