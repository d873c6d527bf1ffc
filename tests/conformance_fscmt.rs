//! MS-FSCMT conformance: a peer written from the spec alone (tests/conformance/fscmt_peer.py,
//! CPython's marshal, no crawlfleet code) against real roles on loopback. Each test names the
//! section it checks; docs/conformance.md lists them per message.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::util::{checkout_path, temp_dir, Role};

/// A port free at the time of asking.
pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scenario of a Python conformance suite (tests/conformance/SUITE.py) running as a peer.
pub(crate) struct Peer {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
    shown: String,
}

impl Peer {
    pub(crate) fn start(suite: &str, scenario: &str, args: &[&str]) -> Peer {
        let script = checkout_path(&format!("tests/conformance/{suite}.py"));
        let shown = format!("python3 {} {scenario} {}", script.display(), args.join(" "));
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(scenario)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run `{shown}` (is python3 installed?): {e}"));
        let out = BufReader::new(child.stdout.take().unwrap());
        Peer { child, out, shown }
    }

    /// The port a listening scenario announced on its first line.
    pub(crate) fn port(&mut self) -> u16 {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let v: serde_json::Value = serde_json::from_str(line.trim()).unwrap_or_else(|_| {
            let rest = self.fail_text();
            panic!("`{}` announced {line:?}\n{rest}", self.shown)
        });
        v["port"].as_u64().expect("a port") as u16
    }

    fn fail_text(&mut self) -> String {
        let _ = self.child.wait();
        let mut out = String::new();
        let _ = self.out.read_to_string(&mut out);
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        format!("--- stdout\n{out}\n--- stderr\n{err}")
    }

    /// Waits for the scenario and fails the test with its output unless every check passed.
    /// Returns the value of its last line's "ok".
    pub(crate) fn finish(mut self) -> serde_json::Value {
        let status = self.child.wait().unwrap();
        let mut out = String::new();
        self.out.read_to_string(&mut out).unwrap();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        assert!(
            status.success(),
            "`{}` failed ({status})\n--- stdout\n{out}\n--- stderr\n{err}",
            self.shown
        );
        let last = out.lines().last().unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(last).unwrap_or_default();
        v["ok"].clone()
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A collection configuration file with one start URI (MS-FSCCFG XML).
pub(crate) fn config_xml(dir: &Path, name: &str, start: &str) -> String {
    let xml = format!(
        r#"<?xml version="1.0"?>
<CrawlerConfig><DomainSpecification name="{name}">
<attrib name="start_uris" type="list-string"><member>{start}</member></attrib>
<attrib name="delay" type="real">1.0</attrib>
</DomainSpecification></CrawlerConfig>
"#
    );
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(format!("{name}.xml"));
    std::fs::write(&p, xml).unwrap();
    p.to_str().unwrap().to_owned()
}

/// A multinode scheduler on free ports with `configs` added at start; returns it and its
/// administrative address.
pub(crate) fn multinode(data: &Path, configs: &[&str], extra: &[&str]) -> (Role, String) {
    let admin = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "multinode",
        "--listen",
        "127.0.0.1:0",
        "--admin",
        &admin,
        "--data-dir",
        data.to_str().unwrap(),
        "--sync-ms",
        "20",
    ];
    for c in configs {
        args.push("--config");
        args.push(c);
    }
    args.extend_from_slice(extra);
    (Role::start(&args), admin)
}

/// A node scheduler registering with `mn`, on a free administrative port.
pub(crate) fn node(data: &Path, mn: SocketAddr, id: &str, extra: &[&str]) -> Role {
    let admin = format!("127.0.0.1:{}", free_port());
    let mn = mn.to_string();
    let mut args = vec![
        "node",
        "--node-id",
        id,
        "--multinode",
        &mn,
        "--admin",
        &admin,
        "--data-dir",
        data.to_str().unwrap(),
        "--sync-ms",
        "20",
    ];
    args.extend_from_slice(extra);
    Role::start(&args)
}

/// MS-FSCMT 2.2.3.11, 2.2.3.12 with 2.2.2.3.1: the multinode scheduler sends CMD_ADM_CONF_ADD
/// and CMD_ADM_CONF_UPDATE with PKT_DSPEC = {collection name: {parameters}}.
#[test]
fn multinode_sends_conf_add_and_update_in_the_spec_form() {
    let dir = temp_dir("cf-mn-conf");
    let cfg = config_xml(dir.path(), "web", "http://127.0.0.1:9/");
    let (mn, admin) = multinode(&dir.path().join("mn"), &[&cfg], &[]);
    let peer = Peer::start(
        "conformance_fscmt",
        "mn_sends_spec_conf",
        &[&mn.addr().to_string(), &admin],
    );
    peer.finish();
}

/// MS-FSCMT 3.1.5.10, 3.1.5.11 with 2.2.2.3.1 and 2.2.5.10: a node scheduler reads the spec's
/// PKT_DSPEC (the ppdup section reaches the duplicate server, the start URIs are requeued),
/// and still reads the flat form of earlier versions.
#[test]
fn node_reads_conf_add_and_update_in_the_spec_form() {
    let dir = temp_dir("cf-node-conf");
    let mut peer = Peer::start("conformance_fscmt", "node_reads_spec_conf", &[]);
    let port = peer.port();
    let _node = node(
        &dir.path().join("n"),
        SocketAddr::from(([127, 0, 0, 1], port)),
        "n1",
        &[],
    );
    peer.finish();
}
