//! MS-FSCMT conformance: a peer written from the spec alone (tests/conformance/fscmt_peer.py,
//! CPython's marshal, no crawlfleet code) against real roles on loopback. Each test names the
//! section it checks; docs/conformance.md lists them per message.

use std::io::{BufRead, BufReader, Read, Write};
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
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run `{shown}` (is python3 installed?): {e}"));
        let out = BufReader::new(child.stdout.take().unwrap());
        Peer { child, out, shown }
    }

    /// The port a listening scenario announced on its first line.
    pub(crate) fn port(&mut self) -> u16 {
        self.announced()["port"].as_u64().expect("a port") as u16
    }

    /// The next line the scenario announced (a JSON object).
    pub(crate) fn announced(&mut self) -> serde_json::Value {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        serde_json::from_str(line.trim()).unwrap_or_else(|_| {
            let rest = self.fail_text();
            panic!("`{}` announced {line:?}\n{rest}", self.shown)
        })
    }

    /// Writes a line to the scenario's standard input.
    pub(crate) fn tell(&mut self, line: &str) {
        let input = self.child.stdin.as_mut().expect("stdin is piped");
        writeln!(input, "{line}").unwrap();
        input.flush().unwrap();
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
    multinode_with(data, configs, "127.0.0.1:0", &admin, extra)
}

/// A multinode scheduler listening on `listen` with its administrative interface on `admin`.
pub(crate) fn multinode_at(
    data: &Path,
    configs: &[&str],
    listen: &str,
    admin: &str,
) -> (Role, String) {
    multinode_with(data, configs, listen, admin, &[])
}

fn multinode_with(
    data: &Path,
    configs: &[&str],
    listen: &str,
    admin: &str,
    extra: &[&str],
) -> (Role, String) {
    let admin = admin.to_owned();
    let mut args = vec![
        "multinode",
        "--listen",
        listen,
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

/// MS-FSCMT 3.1.5.4, 3.1.5.5 (through MS-FSCADM 2.2.9.20 CollectionSuspend and 2.2.9.18
/// CollectionResume on the multinode scheduler): a suspended collection fetches nothing on
/// any node until it is resumed.
#[test]
fn suspend_stops_fetching_on_every_node_until_resume() {
    let dir = temp_dir("cf-suspend");
    let admin = format!("127.0.0.1:{}", free_port());
    let tmp = dir.path().to_str().unwrap().to_owned();
    let mut peer = Peer::start(
        "conformance_fscmt",
        "suspend_stops_fetching",
        &["127.125.0", &tmp, &admin],
    );
    let cfg = peer.announced()["config"].as_str().unwrap().to_owned();
    let (mn, _) = multinode_at(&dir.path().join("mn"), &[&cfg], "127.0.0.1:0", &admin);
    let _nodes: Vec<Role> = ["n1", "n2"]
        .iter()
        .map(|id| node(&dir.path().join(id), mn.addr(), id, &[]))
        .collect();
    let got = peer.finish();
    eprintln!("requests before / after: {got}");
}

/// MS-FSCMT 3.1.5.13 CMD_ADM_PREEMPT_SITE and 3.1.5.18 CMD_UM_QUARANTINE_SITE_REQUEUE, with
/// 2.2.4.11 / 2.2.4.12: the site stops at once, every START_CRAWL_IP is closed by a
/// STOP_CRAWL_IP before the next, and nothing unqueued (the site's root) is fetched.
#[test]
fn preempt_and_quarantine_requeue_stop_the_site_and_close_its_claim() {
    let dir = temp_dir("cf-preempt");
    let mut peer = Peer::start("conformance_fscmt", "preempt_and_requeue", &["127.127.0"]);
    let port = peer.port();
    let _node = node(
        &dir.path().join("n"),
        SocketAddr::from(([127, 0, 0, 1], port)),
        "n1",
        &["--quarantine-interval", "0.2"],
    );
    peer.finish();
}

/// MS-FSCMT 3.1.5.21 and 3.2.5.11: a node scheduler's grants end with its connection to the
/// multinode scheduler; a refused re-claim keeps the site stopped until a grant.
#[test]
fn a_refused_reclaim_stops_the_site_until_granted() {
    let dir = temp_dir("cf-reclaim");
    let mut peer = Peer::start(
        "conformance_fscmt",
        "refused_reclaim_stops_site",
        &["127.128.0"],
    );
    let port = peer.port();
    let _node = node(
        &dir.path().join("n"),
        SocketAddr::from(([127, 0, 0, 1], port)),
        "n1",
        &["--block-seconds", "1", "--quarantine-interval", "0.2"],
    );
    peer.finish();
}

/// MS-FSCMT 3.1.5.17: a quarantine ends no earlier than the time asked.
#[test]
fn a_quarantine_ends_no_earlier_than_asked() {
    let dir = temp_dir("cf-quarantine");
    let mut peer = Peer::start(
        "conformance_fscmt",
        "quarantine_ends_no_earlier",
        &["127.129.0"],
    );
    let port = peer.port();
    let _node = node(
        &dir.path().join("n"),
        SocketAddr::from(([127, 0, 0, 1], port)),
        "n1",
        &["--quarantine-interval", "0.2"],
    );
    let got = peer.finish();
    eprintln!("quarantines ended after (s): {got}");
}

/// MS-FSCMT 3.2.5.11 and 3.1.5.21, one node scheduler per IP address: the multinode scheduler
/// is SIGKILLed and restarted mid-crawl; a node's claims end with the connection, a refused
/// re-claim stops the site, and the web never serves one address to two nodes at once. The
/// peer adds the collection (CollectionAdd) once both nodes are registered, so that its sites
/// are routed over both whichever node registers first.
#[test]
fn one_node_per_ip_across_multinode_restarts() {
    let dir = temp_dir("cf-one-ip");
    let admin = format!("127.0.0.1:{}", free_port());
    let listen = format!("127.0.0.1:{}", free_port());
    let restarts = 3;
    let mut peer = Peer::start(
        "conformance_fscmt",
        "one_node_per_ip",
        &["127.126.0", &restarts.to_string()],
    );
    let mn_data = dir.path().join("mn");
    let (mut mn, _) = multinode_at(&mn_data, &[], &listen, &admin);
    let fast = ["--block-seconds", "1", "--quarantine-interval", "0.2"];
    let nodes: Vec<Role> = ["n1", "n2"]
        .iter()
        .map(|id| node(&dir.path().join(id), mn.addr(), id, &fast))
        .collect();
    let pids: Vec<String> = nodes.iter().map(|n| n.child.id().to_string()).collect();
    peer.tell(&pids.join(" "));
    peer.tell(&admin);
    for _ in 0..restarts {
        peer.announced();
        mn.kill();
        mn = multinode_at(&mn_data, &[], &listen, &admin).0;
        peer.tell("restarted");
    }
    let got = peer.finish();
    eprintln!("requests: {got}");
}

/// MS-FSCMT 2.2.3.10 / 3.1.5.9 CMD_ADM_CONF_REFRESH of a subcollection, the test playing the
/// multinode scheduler: the subcollection's crawled pages are requested again, the rest of the
/// collection's are not; an unknown subcollection refreshes nothing and is logged (CMD_UM_LOG).
#[test]
fn a_subcollection_refresh_fetches_its_pages_again() {
    let dir = temp_dir("cf-subrefresh");
    let mut peer = Peer::start("conformance_fscmt", "subcollection_refresh", &["127.132.0"]);
    let port = peer.port();
    let _node = node(
        &dir.path().join("n"),
        SocketAddr::from(([127, 0, 0, 1], port)),
        "n1",
        &[],
    );
    let got = peer.finish();
    eprintln!("requests per page: {got}");
}

/// A node scheduler registering with a spec peer playing its multinode scheduler (which
/// announced its port first), sending CMD_UM_STAT every 0.3 s.
fn stat_node(dir: &Path, peer: &mut Peer) -> Role {
    let port = peer.port();
    node(
        &dir.join("n"),
        SocketAddr::from(([127, 0, 0, 1], port)),
        "n1",
        &["--stats-interval", "0.3", "--quarantine-interval", "0.2"],
    )
}

/// MS-FSCMT 2.2.4.6 / 3.1.6 CMD_UM_STAT with PKT_DATA as MS-FSCADM 2.2.5: every key of the
/// structure, DocSizeAvg / DocSizeMax and DLTimeAvg / DLTimeMax per document, ReadNet and
/// WriteNet every byte read from and written to the web (heads and requests included).
#[test]
fn node_stat_carries_every_key_of_the_flattened_structure() {
    let dir = temp_dir("cf-stat-keys");
    let mut peer = Peer::start("conformance_fscmt", "node_stat_keys", &["127.130.0"]);
    let _node = stat_node(dir.path(), &mut peer);
    let got = peer.finish();
    eprintln!("CMD_UM_STAT: {got}");
}

/// MS-FSCMT 3.1.5.15 CMD_UM_DELETE_SITE and 3.1.5.16 CMD_UM_DELETE_URIS: Deleted and
/// DocumentStore (MS-FSCADM 2.2.5) follow the deletes in the node's CMD_UM_STAT.
#[test]
fn node_stat_counts_deletes() {
    let dir = temp_dir("cf-stat-deletes");
    let mut peer = Peer::start("conformance_fscmt", "node_stat_deletes", &["127.131.0"]);
    let _node = stat_node(dir.path(), &mut peer);
    peer.finish();
}

/// MS-FSCADM 2.2.4.5 / 2.2.4.9 Epoch in the node's CMD_UM_STAT across a CMD_ADM_CONF_REFRESH
/// (MS-FSCMT 3.1.5.9): what was crawled before is reported with Epoch 0, what after with 1.
#[test]
fn node_stat_reports_each_refresh_cycle_with_its_epoch() {
    let dir = temp_dir("cf-stat-cycles");
    let mut peer = Peer::start("conformance_fscmt", "node_stat_cycles", &["127.132.0"]);
    let _node = stat_node(dir.path(), &mut peer);
    let got = peer.finish();
    eprintln!("epochs: {got}");
}

/// MS-FSCMT 3.2.5.6 CMD_UM_STAT on the multinode scheduler, read through MS-FSCADM 2.2.10.6
/// CollectionGetStatistics2 and 2.2.10.5: the 2.2.5 structures two nodes report go to the
/// refresh cycle their Epoch names (a late one too), every key aggregated as what it means.
#[test]
fn multinode_aggregates_node_statistics_per_refresh_cycle() {
    let dir = temp_dir("cf-mn-stat");
    let cfg = config_xml(dir.path(), "web", "http://127.0.0.1:9/");
    let (mn, admin) = multinode(&dir.path().join("mn"), &[&cfg], &[]);
    let peer = Peer::start(
        "conformance_fscmt",
        "mn_aggregates_per_cycle",
        &[&mn.addr().to_string(), &admin],
    );
    let got = peer.finish();
    eprintln!("{got}");
}
