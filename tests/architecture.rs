//! docs/ARCHITECTURE.md against the code: every `on_<message>` handler the map names is defined
//! as a function under core/src, net/src or shells/src, and every handler of a wire message the
//! roles define (MS-FSCMT's `on_cmd_*`, `on_ppdup_*`, and the name server's methods under
//! core/src/nameserver) is in the map. Only files of the repository are read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::util::checkout_path;

/// The source trees searched for handlers.
const SOURCE_DIRS: [&str; 3] = ["core/src", "net/src", "shells/src"];

/// The trees whose every handler answers a method of the name server (docs/nameserver.md) or
/// of a content distributor (docs/distributor.md), or an MS-FSCDFT timer.
const NAMESERVER_DIRS: [&str; 2] = ["core/src/nameserver", "core/src/distributor"];

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Every `on_<name>` word in `text` (`on_` starting a word, at least one character after it).
fn handler_names(text: &str) -> BTreeSet<String> {
    let b = text.as_bytes();
    let mut names = BTreeSet::new();
    let mut i = 0;
    while let Some(at) = text[i..].find("on_") {
        let start = i + at;
        let mut end = start + 3;
        while end < b.len() && is_ident(b[end]) {
            end += 1;
        }
        if (start == 0 || !is_ident(b[start - 1])) && end > start + 3 {
            names.insert(text[start..end].to_string());
        }
        i = end;
    }
    names
}

/// Every function named `on_<name>` defined in `text`.
fn defined_handlers(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("fn on_") {
        let tail = &rest[at + 3..];
        let end = tail
            .bytes()
            .position(|c| !is_ident(c))
            .unwrap_or(tail.len());
        let before = rest[..at].bytes().last();
        if before.is_none_or(|c| !is_ident(c)) {
            out.insert(tail[..end].to_string());
        }
        rest = &tail[end..];
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for e in entries {
        let path = e.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The handlers defined in the source trees: every one, and those of wire messages (MS-FSCMT
/// messages and name server methods).
fn handlers_in_sources() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut all = BTreeSet::new();
    let mut nameserver = BTreeSet::new();
    for dir in SOURCE_DIRS {
        let mut files = Vec::new();
        rust_files(&checkout_path(dir), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            let defined = defined_handlers(&text);
            if NAMESERVER_DIRS
                .iter()
                .any(|d| f.starts_with(checkout_path(d)))
            {
                nameserver.extend(defined.iter().cloned());
            }
            all.extend(defined);
        }
    }
    let mut wire: BTreeSet<String> = all
        .iter()
        .filter(|n| n.starts_with("on_cmd_") || n.starts_with("on_ppdup_"))
        .cloned()
        .collect();
    // The name server's methods (bind, resolve, unbind, list, __ping) and the distributor's
    // (the seven of MS-FSCDFT 3.5.4, register_dispatcher, the check timers) at least.
    assert!(
        nameserver.len() >= 16,
        "name server handlers: {nameserver:?}"
    );
    wire.extend(nameserver);
    (all, wire)
}

/// The names `doc` mentions that no source defines.
fn missing(doc: &str, defined: &BTreeSet<String>) -> Vec<String> {
    handler_names(doc)
        .into_iter()
        .filter(|n| !defined.contains(n))
        .collect()
}

#[test]
fn every_handler_the_architecture_map_names_exists() {
    let doc = std::fs::read_to_string(checkout_path("docs/ARCHITECTURE.md")).unwrap();
    let named = handler_names(&doc);
    // The map names the handlers of three roles' messages: far more than a handful.
    assert!(
        named.len() > 40,
        "only {} handlers named: {named:?}",
        named.len()
    );
    let (defined, _) = handlers_in_sources();
    let missing = missing(&doc, &defined);
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md names handlers that no `fn` under {SOURCE_DIRS:?} defines: \
         {missing:?}"
    );
}

#[test]
fn every_wire_handler_is_in_the_architecture_map() {
    let doc = std::fs::read_to_string(checkout_path("docs/ARCHITECTURE.md")).unwrap();
    let named = handler_names(&doc);
    let (_, wire) = handlers_in_sources();
    let absent: Vec<&String> = wire.iter().filter(|n| !named.contains(*n)).collect();
    assert!(
        absent.is_empty(),
        "handlers of wire messages missing from docs/ARCHITECTURE.md: {absent:?}"
    );
}

#[test]
fn a_misspelt_handler_in_the_map_is_reported() {
    let defined: BTreeSet<String> = ["on_ppdup_add".to_string()].into();
    let doc = "| PPDUP_ADD | `on_ppdup_add` | 3.3.5.4 |\n| PPDUP_ADD | `on_ppdup_ad` |\n\
               on_<message> and on_* are not names; neither is mention_on_x.";
    assert_eq!(missing(doc, &defined), ["on_ppdup_ad"]);
    assert_eq!(
        defined_handlers("fn on_a(x: u8) {}\npub(super) fn on_b_c<'r>() {}\nfn won_d() {}"),
        BTreeSet::from(["on_a".to_string(), "on_b_c".to_string()])
    );
}
