//! Helpers shared by the integration tests: where `shared/` is, hex, the golden wire vectors, and a
//! python3 runner that shows the command and its output when a check fails.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The terminator that follows a marshal dict on the link store socket (MS-FSWASDR 2.2.1).
pub const WASDR_TERMINATOR: &[u8] = b"\x2e\x2e\x2e\x00\x00\x00\x00";

/// `shared/`, which sits next to the checkout (specs, golden vectors).
pub fn shared_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared"))
}

/// A directory of the checkout, such as `fuzz/corpus/frame`.
pub fn checkout_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Lower-case hex.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{c:02x}")).collect()
}

/// Bytes from hex text; panics on anything else (test data is trusted to be hex).
pub fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "odd-length hex: {s}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|_| panic!("bad hex: {s}")))
        .collect()
}

/// Which wire framing a golden vector uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// MS-FSCMT 2.2.1: 4-byte big-endian length, then a marshal `(dict, priority)`.
    Fscmt,
    /// MS-FSWASDR 2.2.1: a bare marshal dict, then [`WASDR_TERMINATOR`].
    Wasdr,
}

/// One line of `vectors/wire-vectors.tsv`.
#[derive(Clone, Debug)]
pub struct Vector {
    /// The message name (first column).
    pub name: String,
    /// The bytes as they travel on the socket (second column).
    pub wire: Vec<u8>,
    /// Python's repr of the decoded value (third column).
    pub repr: String,
    /// Free text (fourth column), e.g. "spec 4.1: length 85".
    pub note: String,
}

impl Vector {
    /// WASDR lines are named `WASDR_*`; every other line is an FSCMT frame.
    pub fn framing(&self) -> Framing {
        if self.name.starts_with("WASDR_") {
            Framing::Wasdr
        } else {
            Framing::Fscmt
        }
    }

    /// The marshal bytes: the frame body after the length header, or the dict before the
    /// terminator. Panics when the framing around them is wrong.
    pub fn marshal(&self) -> &[u8] {
        match self.framing() {
            Framing::Fscmt => &self.wire[4..],
            Framing::Wasdr => self
                .wire
                .strip_suffix(WASDR_TERMINATOR)
                .unwrap_or_else(|| panic!("{}: no WASDR terminator", self.name)),
        }
    }
}

/// Every vector of `shared/vectors/wire-vectors.tsv`, `#` comment lines skipped.
pub fn vectors() -> Vec<Vector> {
    let path = shared_dir().join("vectors/wire-vectors.tsv");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let cols: Vec<&str> = line.split('\t').collect();
        assert!(cols.len() >= 3, "short vector line: {line}");
        out.push(Vector {
            name: cols[0].to_owned(),
            wire: unhex(cols[1]),
            repr: cols[2].to_owned(),
            note: cols.get(3).copied().unwrap_or("").to_owned(),
        });
    }
    assert!(!out.is_empty(), "no vectors in {}", path.display());
    out
}

/// The vector called `name`.
pub fn vector(name: &str) -> Vector {
    vectors()
        .into_iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("no vector {name}"))
}

/// Runs `python3 -c script args...` with `stdin` as its input and returns its stdout. Panics,
/// showing the command, its stdout and its stderr, when python3 is missing or fails: the
/// differential tests must not pass silently without their oracle.
pub fn python3(script: &str, args: &[&str], stdin: &[u8]) -> String {
    let shown = format!("python3 -c <script> {}", args.join(" "));
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{shown}` (is python3 installed?): {e}"));
    let mut input = child.stdin.take().expect("stdin was piped");
    let data = stdin.to_vec();
    // Write from a thread so that a python3 that answers while reading cannot deadlock us.
    let writer = std::thread::spawn(move || input.write_all(&data));
    let out = child.wait_with_output().expect("waiting for python3");
    let written = writer.join().expect("stdin writer thread");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || written.is_err() {
        let head: String = stdout.chars().take(2000).collect();
        panic!(
            "`{shown}` failed ({}; stdin write: {written:?})\n--- stdout (first 2000 chars)\n{head}\n--- stderr\n{stderr}",
            out.status
        );
    }
    stdout
}
