//! Helpers shared by the integration tests: where the test data is, hex, the golden wire vectors, and a
//! python3 runner that shows the command and its output when a check fails, role processes and
//! an FSCMT peer over a socket.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::Limits;
use crawlfleet_core::msg::Message;

/// The terminator that follows a marshal dict on the link store socket (MS-FSWASDR 2.2.1).
pub const WASDR_TERMINATOR: &[u8] = b"\x2e\x2e\x2e\x00\x00\x00\x00";

/// `tests/data/`: the golden vectors, byte-identical copies of `shared/vectors/` kept in the
/// repository so a fresh clone tests on its own.
pub fn data_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data"))
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

/// Every vector of `tests/data/wire-vectors.tsv`, `#` comment lines skipped.
pub fn vectors() -> Vec<Vector> {
    let path = data_dir().join("wire-vectors.tsv");
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

/// A role process, SIGKILLed when dropped.
pub struct Role {
    pub child: Child,
    /// The address the role printed it listens on (None for roles that do not listen).
    pub listen: Option<SocketAddr>,
}

impl Role {
    pub fn start(args: &[&str]) -> Role {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
        cmd.args(args)
            .env(
                "RUST_LOG",
                std::env::var("CF_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stderr(Stdio::inherit());
        Role::spawn(cmd)
    }

    /// Runs a prepared command (a role, maybe under a shell that limits it) and reads the line
    /// it announces itself with, which ends with its listening address.
    pub fn spawn(mut cmd: Command) -> Role {
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("crawlfleet runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.starts_with("crawlfleet "), "{cmd:?} printed {line:?}");
        let listen = line.trim().rsplit(' ').next().and_then(|a| a.parse().ok());
        Role { child, listen }
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.listen.expect("the role prints its listening address")
    }

    pub fn kill(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A name server (`crawlfleet nameserver`) on a free loopback port, its bindings in `dir`.
pub fn nameserver(dir: &Path) -> Role {
    Role::start(&[
        "nameserver",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.to_str().unwrap(),
    ])
}

pub use tempfile::TempDir;

/// A test's scratch directory (created empty, under a unique name starting with `name`), removed
/// with everything in it when the guard is dropped at the end of the test, whether it passed or
/// not.
pub fn temp_dir(name: &str) -> TempDir {
    TempDir::with_prefix(format!("crawlfleet-it-{name}-")).expect("a scratch directory")
}

/// A peer speaking FSCMT frames over one connection.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).unwrap())
    }

    /// A client over an accepted (or connected) stream.
    pub fn from_stream(stream: TcpStream) -> Client {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, m: &Message<'_>) {
        let mut out = Vec::new();
        frame::encode_message(m, Priority::Normal, &mut out);
        self.stream.write_all(&out).unwrap();
    }

    pub fn send_many(&mut self, ms: &[Message<'_>]) {
        let mut out = Vec::new();
        for m in ms {
            frame::encode_message(m, Priority::Normal, &mut out);
        }
        self.stream.write_all(&out).unwrap();
    }

    /// The next message; None when the server closed the connection.
    pub fn recv(&mut self) -> Option<Message<'static>> {
        let limits = Limits::default();
        loop {
            if let Some((body, used)) = frame::split(&self.buf, &limits).unwrap() {
                let (_, m) = frame::decode_message(body, &limits).unwrap();
                let m = m.into_owned();
                self.buf.drain(..used);
                return Some(m);
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("reading from the server: {e}"),
            }
        }
    }

    /// The next message that is not a keep-alive.
    pub fn recv_reply(&mut self) -> Message<'static> {
        loop {
            match self.recv().expect("the server answers") {
                Message::PpdupKeepalive => self.send(&Message::PpdupKeepaliveAck),
                m => return m,
            }
        }
    }
}

/// Polls `cond` until it holds, failing the test with `what` after 90 s: what a test waits for
/// instead of sleeping a fixed time. The deadline is generous because the whole suite runs its
/// roles as real processes at once on small shared machines: 30 s was once not enough for `up`
/// to start every role and archive its first page.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while !cond() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not within 90 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends SIGTERM to a process when dropped by a failing test: a test that fails before it stops
/// what it started (e.g. `up` before its SIGINT) leaves nothing running. A test that passed has
/// stopped and reaped the process itself, and its pid may belong to another process by then
/// (pids wrap at 32768 here), so nothing is sent.
pub struct KillOnDrop(pub u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new("kill").arg(self.0.to_string()).status();
        }
    }
}

/// Runs `crawlfleet up ... --json` as `up` (its log at warn), asserts that it succeeded and
/// returns its summary (the last line of its output).
pub fn up_summary(up: &mut std::process::Command) -> serde_json::Value {
    let out = up
        .env("RUST_LOG", "warn")
        .output()
        .expect("crawlfleet up runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim().lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

/// Reads one line of a `--json` output (e.g. `up --json`'s start record) as JSON.
pub fn json_line(out: &mut impl BufRead) -> serde_json::Value {
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
}

/// Stops `up` with SIGINT (as Ctrl-C does), waits for it to exit successfully, and returns the
/// summary it prints last, as JSON (`up --json`); `out` is the rest of its standard output.
pub fn stop_up_summary(
    up: &mut std::process::Child,
    out: &mut impl std::io::Read,
) -> serde_json::Value {
    let stopped = Command::new("kill")
        .args(["-INT", &up.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(up.wait().unwrap().success(), "{rest}");
    serde_json::from_str(rest.trim().lines().last().unwrap_or("")).unwrap()
}
