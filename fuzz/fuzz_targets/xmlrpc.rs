//! Fuzzes the XML-RPC body parsers (the transport of MS-FSCADM 2.1), `methodCall` and
//! `methodResponse`, against their encoders.
//! The invariants live in ../xmlrpc_invariants.rs, which tests/fuzz_corpus.rs replays the corpus
//! through.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../xmlrpc_invariants.rs"]
mod xmlrpc_invariants;

fuzz_target!(|data: &[u8]| xmlrpc_invariants::check(data));
