//! Fuzzes the HTTP/1.1 request framing of servers on the event loop (net's http::HttpFraming,
//! RFC 9112 6.3) and the request reader: cut all at once and byte by byte, under small and default
//! limits.
//! The invariants live in ../http_invariants.rs, which tests/fuzz_corpus.rs replays the corpus
//! through.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../http_invariants.rs"]
mod http_invariants;

fuzz_target!(|data: &[u8]| http_invariants::check(data));
