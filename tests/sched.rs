//! The multinode scheduler and node schedulers as real processes on loopback (MS-FSCMT 3.1.5,
//! 3.2.5). The test plays the other side of each conversation over a socket: node schedulers
//! toward a real multinode scheduler, and the multinode scheduler and a duplicate server toward a
//! real node scheduler; crawl queues are read back from the data directory after SIGKILL.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crawlfleet_core::marshal::Value;
use crawlfleet_core::msg::{
    AddRoute, CollectionOnly, ConfSpec, CrawlQueueEntry, DnsRequest, Init, Log, Message,
    Quarantine, StartCrawlIp, StopCrawlIp, UriMsg, UriStructure,
};
use crawlfleet_core::queue::{CrawlQueue, QueueOptions};
use crawlfleet_core::sched::{node::collection_dir, parse_record};

use crate::util::{temp_dir, Client, Role};

fn b(s: &str) -> std::borrow::Cow<'static, [u8]> {
    std::borrow::Cow::Owned(s.as_bytes().to_vec())
}

/// A collection configuration with start URIs on `sites` distinct registrable domains.
fn config_xml(dir: &Path, name: &str, sites: usize, dupserver: Option<SocketAddr>) -> PathBuf {
    let mut members = String::new();
    for i in 0..sites {
        members.push_str(&format!("<member>http://www.site{i}.com/</member>"));
    }
    let ppdup = dupserver.map_or(String::new(), |a| {
        format!(
            r#"<section name="ppdup"><attrib name="dupservers" type="list-string"><member>{a}</member></attrib></section>"#
        )
    });
    let xml = format!(
        r#"<?xml version="1.0"?>
<CrawlerConfig>
  <DomainSpecification name="{name}">
    <attrib name="start_uris" type="list-string">{members}</attrib>
    <attrib name="delay" type="real">1.0</attrib>
    {ppdup}
  </DomainSpecification>
</CrawlerConfig>
"#
    );
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(format!("{name}.xml"));
    std::fs::write(&p, xml).unwrap();
    p
}

fn multinode(data: &Path, configs: &[&Path], extra: &[&str]) -> Role {
    let mut args = vec![
        "multinode".to_string(),
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--data-dir".into(),
        data.to_str().unwrap().into(),
    ];
    for c in configs {
        args.push("--config".into());
        args.push(c.to_str().unwrap().into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    Role::start(&a)
}

fn init(node: &str) -> Message<'static> {
    Message::CmdUmInit(Init {
        node_id: b(node),
        xmlrpc_host: b("127.0.0.1"),
        xmlrpc_port: 15000,
    })
}

/// Reads messages until `want` matches one (answering keep-alives); panics after 20 s.
fn wait_for(
    c: &mut Client,
    what: &str,
    mut want: impl FnMut(&Message<'static>) -> bool,
) -> Message<'static> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        let m = c
            .recv()
            .unwrap_or_else(|| panic!("connection closed waiting for {what}"));
        if m == Message::CmdUmKeepalive {
            c.send(&Message::CmdUmKeepaliveAck);
            continue;
        }
        if want(&m) {
            return m;
        }
    }
}

/// A fake node: registers, answers ASK_ROUTE with `routes` and LAST_ROUTE, and returns the
/// client with the CONF_ADDs it received.
fn register(addr: SocketAddr, node: &str) -> (Client, Vec<Message<'static>>) {
    let mut c = Client::connect(addr);
    c.send(&init(node));
    (c, Vec::new())
}

/// Waits for CMD_UM_ASK_ROUTE and answers CMD_UM_LAST_ROUTE (this fake node has no routes).
fn answer_ask(c: &mut Client) {
    let ask = wait_for(c, "ASK_ROUTE", |m| matches!(m, Message::CmdUmAskRoute(_)));
    let Message::CmdUmAskRoute(col) = ask else {
        unreachable!()
    };
    c.send(&Message::CmdUmLastRoute(CollectionOnly {
        collection: col.collection,
    }));
}

fn entry(uri: &str) -> CrawlQueueEntry<'static> {
    CrawlQueueEntry::new(UriStructure::unparsed(b(uri)))
}

#[test]
fn the_first_frame_must_be_init_and_node_ids_are_unique() {
    let dir = temp_dir("mn-init");
    let cfg = config_xml(dir.path(), "web", 3, None);
    let mn = multinode(&dir.path().join("data"), &[&cfg], &[]);
    // 3.2.5.1: any other first frame closes the connection.
    let mut rogue = Client::connect(mn.addr());
    rogue.send(&Message::CmdUmKeepalive);
    assert_eq!(
        rogue.recv(),
        None,
        "a non-INIT first frame closes the connection"
    );
    let mut garbage = Client::connect(mn.addr());
    garbage.stream.write_all(b"\x00\x00\x00\x03abc").unwrap();
    assert_eq!(
        garbage.recv(),
        None,
        "an undecodable first frame closes the connection"
    );
    // A node registers and gets CMD_ADM_CONF_ADD for every collection, then CMD_UM_ASK_ROUTE.
    let (mut n1, _) = register(mn.addr(), "n1");
    let add = wait_for(&mut n1, "CONF_ADD", |m| {
        matches!(m, Message::CmdAdmConfAdd(_))
    });
    let Message::CmdAdmConfAdd(ConfSpec {
        collection, config, ..
    }) = add
    else {
        unreachable!()
    };
    assert_eq!(&collection[..], b"web");
    let uris = config.get(b"start_uris").and_then(Value::as_list).unwrap();
    assert_eq!(uris.len(), 3);
    wait_for(&mut n1, "ASK_ROUTE", |m| {
        matches!(m, Message::CmdUmAskRoute(_))
    });
    // 3.2.5.1 step 1: a second connection with the same node id is closed.
    let mut dup = Client::connect(mn.addr());
    dup.send(&init("n1"));
    assert_eq!(
        dup.recv(),
        None,
        "a duplicate node id closes the connection"
    );
    // The registered node is unaffected: keep-alives are answered (3.2.5.2).
    n1.send(&Message::CmdUmKeepalive);
    wait_for(&mut n1, "KEEPALIVE_ACK", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
    // A registered node's undecodable frames (bad marshal; a valid marshal that is not a frame
    // tuple) are refused and logged by the scheduler, which keeps serving the node.
    n1.stream.write_all(b"\x00\x00\x00\x03abc").unwrap();
    n1.stream
        .write_all(b"\x00\x00\x00\x05i\x01\x00\x00\x00")
        .unwrap();
    n1.send(&Message::CmdUmKeepalive);
    wait_for(&mut n1, "KEEPALIVE_ACK after undecodable frames", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
    // A length beyond the frame limit closes that connection only, before its body arrives.
    n1.stream.write_all(&u32::MAX.to_be_bytes()).unwrap();
    let gone = (0..100).any(|_| n1.recv().is_none());
    assert!(gone, "an oversized length closes the connection");
    let (mut n2, _) = register(mn.addr(), "n2");
    n2.send(&Message::CmdUmKeepalive);
    wait_for(&mut n2, "KEEPALIVE_ACK from n2", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
}

use std::io::Write;

/// Collects ADD_ROUTE broadcasts and forwarded URIs on a fake node until `done`.
#[derive(Default)]
struct Seen {
    routes: BTreeMap<String, String>,
    route_msgs: usize,
    uris: Vec<(String, bool)>,
}

fn observe(c: &mut Client, seen: &mut Seen, until: impl Fn(&Seen) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !until(seen) {
        assert!(
            Instant::now() < deadline,
            "timed out: {} routes, {} uris",
            seen.routes.len(),
            seen.uris.len()
        );
        match c.recv().expect("the multinode scheduler stays connected") {
            Message::CmdUmKeepalive => c.send(&Message::CmdUmKeepaliveAck),
            Message::CmdUmAskRoute(col) => c.send(&Message::CmdUmLastRoute(CollectionOnly {
                collection: col.collection,
            })),
            Message::CmdUmAddRoute(AddRoute {
                node_id,
                routing_attr,
                ..
            }) => {
                seen.route_msgs += 1;
                let prev = seen.routes.insert(
                    String::from_utf8_lossy(&routing_attr).into_owned(),
                    String::from_utf8_lossy(&node_id).into_owned(),
                );
                assert!(
                    prev.is_none(),
                    "{} routed twice",
                    String::from_utf8_lossy(&routing_attr)
                );
            }
            Message::CmdUmUri(u) => seen.uris.push((
                String::from_utf8_lossy(&u.entry.uri.uri).into_owned(),
                false,
            )),
            Message::CmdUmUriUrg(u) => seen
                .uris
                .push((String::from_utf8_lossy(&u.entry.uri.uri).into_owned(), true)),
            _ => {}
        }
    }
}

#[test]
fn every_site_is_routed_to_exactly_one_node_and_routes_survive_a_restart() {
    let dir = temp_dir("mn-route");
    let cfg = config_xml(dir.path(), "web", 30, None);
    let data = dir.path().join("data");
    let mn = multinode(&data, &[&cfg], &[]);
    let mut nodes: Vec<(String, Client, Seen)> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| {
            let (c, _) = register(mn.addr(), n);
            (n.to_string(), c, Seen::default())
        })
        .collect();
    // Routing starts once every node answered CMD_UM_ASK_ROUTE (3.2.5.10).
    for (_, c, _) in nodes.iter_mut() {
        answer_ask(c);
    }
    // Every node hears every routing decision (3.2.5.5 step 2.2).
    for (_, c, seen) in nodes.iter_mut() {
        observe(c, seen, |s| s.routes.len() == 30);
    }
    let table = nodes[0].2.routes.clone();
    for (_, _, s) in &nodes {
        assert_eq!(s.routes, table, "every node hears the same routes");
    }
    // Balanced: 10 sites each.
    for (n, _, _) in &nodes {
        let count = table.values().filter(|v| *v == n).count();
        assert_eq!(count, 10, "node {n} got {count} of 30 sites: {table:?}");
    }
    // 3.2.5.5 step 2.3: each start URI went to the node its site is routed to, once.
    for (n, c, seen) in nodes.iter_mut() {
        observe(c, seen, |s| s.uris.len() == 10);
        for (uri, _) in &seen.uris {
            let attr = uri.trim_start_matches("http://www.").trim_end_matches('/');
            assert_eq!(table.get(attr), Some(&*n), "{uri} went to {n}");
        }
    }
    // A node sends a link to a new site, urgent: routed once, forwarded urgent (3.2.5.7).
    let (_, c1, _) = &mut nodes[0];
    c1.send(&Message::CmdUmUriUrg(UriMsg {
        collection: b("web"),
        entry: entry("http://news.fresh.org/a"),
    }));
    let mut route_to = String::new();
    for (_, c, seen) in nodes.iter_mut() {
        observe(c, seen, |s| s.routes.contains_key("fresh.org"));
        route_to = seen.routes["fresh.org"].clone();
    }
    let target = nodes.iter_mut().find(|(n, _, _)| *n == route_to).unwrap();
    observe(&mut target.1, &mut target.2, |s| s.uris.len() == 11);
    assert_eq!(
        target.2.uris.last().unwrap(),
        &("http://news.fresh.org/a".to_string(), true)
    );

    // SIGKILL the multinode scheduler; a new one on the same data dir keeps every route: a URI
    // for a known site goes to the same node without a new routing decision.
    mn.kill();
    let mn = multinode(&data, &[&cfg], &[]);
    let mut again: Vec<(String, Client, Seen)> = ["n1", "n2", "n3"]
        .iter()
        .map(|n| (n.to_string(), register(mn.addr(), n).0, Seen::default()))
        .collect();
    for (_, c, _) in again.iter_mut() {
        answer_ask(c);
    }
    let site7_node = table["site7.com"].clone();
    again[1].1.send(&Message::CmdUmUri(UriMsg {
        collection: b("web"),
        entry: entry("http://www.site7.com/page"),
    }));
    let t = again.iter_mut().find(|(n, _, _)| *n == site7_node).unwrap();
    observe(&mut t.1, &mut t.2, |s| {
        s.uris.iter().any(|(u, _)| u == "http://www.site7.com/page")
    });
    for (_, _, s) in &again {
        assert!(
            !s.routes.contains_key("site7.com"),
            "no new decision for a known site"
        );
    }
}

#[test]
fn routes_are_rebuilt_from_the_nodes_when_the_routing_database_is_lost() {
    let dir = temp_dir("mn-rebuild");
    let cfg = config_xml(dir.path(), "web", 0, None);
    let data = dir.path().join("data");
    let mn = multinode(&data, &[&cfg], &[]);
    let (mut n1, _) = register(mn.addr(), "n1");
    let (mut n2, _) = register(mn.addr(), "n2");
    answer_ask(&mut n1);
    answer_ask(&mut n2);
    mn.kill();
    std::fs::remove_file(data.join("routes")).unwrap();
    let mn = multinode(&data, &[&cfg], &[]);
    let (mut n1, _) = register(mn.addr(), "n1");
    let (mut n2, _) = register(mn.addr(), "n2");
    // n2 reports that it crawls example.org (2.2.4.9), then LAST_ROUTE; n1 has nothing.
    wait_for(&mut n2, "ASK_ROUTE", |m| {
        matches!(m, Message::CmdUmAskRoute(_))
    });
    n2.send(&Message::CmdUmAddRoutes(crawlfleet_core::msg::RouteList {
        collection: b("web"),
        routes: vec![(b("example.org"), b("n2"))],
    }));
    // A URI arriving before every node answered waits (3.2.5.10).
    n1.send(&Message::CmdUmUri(UriMsg {
        collection: b("web"),
        entry: entry("http://www.example.org/x"),
    }));
    n2.send(&Message::CmdUmLastRoute(CollectionOnly {
        collection: b("web"),
    }));
    wait_for(&mut n1, "ASK_ROUTE", |m| {
        matches!(m, Message::CmdUmAskRoute(_))
    });
    n1.send(&Message::CmdUmLastRoute(CollectionOnly {
        collection: b("web"),
    }));
    let m = wait_for(&mut n2, "the URI at n2", |m| {
        matches!(m, Message::CmdUmUri(_))
    });
    let Message::CmdUmUri(u) = m else {
        unreachable!()
    };
    assert_eq!(&u.entry.uri.uri[..], b"http://www.example.org/x");
}

/// Asks the multinode scheduler to resolve `host` (CMD_UM_DNS_REQUEST) and returns its answer.
fn resolve(c: &mut Client, host: &str) -> crawlfleet_core::msg::DnsReply<'static> {
    c.send(&Message::CmdUmDnsRequest(DnsRequest {
        collection: b("web"),
        host: b(host),
    }));
    let r = wait_for(c, "DNS_REPLY", |m| matches!(m, Message::CmdUmDnsReply(_)));
    let Message::CmdUmDnsReply(r) = r else {
        unreachable!()
    };
    r
}

#[test]
fn dns_crawl_ip_locks_conf_state_and_logs() {
    let dir = temp_dir("mn-misc");
    let cfg = config_xml(dir.path(), "web", 0, None);
    let data = dir.path().join("data");
    let mn = multinode(&data, &[&cfg], &["--keepalive", "1"]);
    let (mut n1, _) = register(mn.addr(), "n1");
    let (mut n2, _) = register(mn.addr(), "n2");
    // 3.2.5.4: resolved names get an addrinfo, failures None; PKT_DSPECNAME is "".
    let r = resolve(&mut n1, "localhost");
    assert_eq!(&r.collection[..], b"");
    assert_eq!(&r.host[..], b"localhost");
    let addrs = r.addrinfo.expect("localhost resolves");
    assert!(addrs
        .iter()
        .any(|a| &a.address[..] == b"127.0.0.1" || &a.address[..] == b"::1"));
    assert!(r.ttl > 0);
    let r = resolve(&mut n1, "no-such-host.invalid");
    assert_eq!(r.addrinfo, None);
    // 3.2.5.11 / 3.2.5.12: one node per IP address.
    let ask = |ip: &str, site: &str| {
        Message::CmdUmStartCrawlIp(StartCrawlIp {
            collection: b("web"),
            ip: b(ip),
            site: b(site),
            store_id: 0,
        })
    };
    let answer = |c: &mut Client| {
        let m = wait_for(c, "START_CRAWL_IP", |m| {
            matches!(m, Message::CmdUmStartCrawlIpReply(_))
        });
        let Message::CmdUmStartCrawlIpReply(r) = m else {
            unreachable!()
        };
        r.allowed
    };
    n1.send(&ask("10.0.0.1", "a.com"));
    assert!(answer(&mut n1));
    n2.send(&ask("10.0.0.1", "b.com"));
    assert!(!answer(&mut n2), "the IP is crawled by n1");
    n1.send(&ask("10.0.0.1", "c.com"));
    assert!(answer(&mut n1), "n1 may crawl more sites on its own IP");
    n1.send(&Message::CmdUmStopCrawlIp(StopCrawlIp {
        collection: b("web"),
        ip: b("10.0.0.1"),
        site: b("a.com"),
    }));
    n2.send(&ask("10.0.0.1", "b.com"));
    assert!(answer(&mut n2), "released by STOP_CRAWL_IP");
    // A node that disconnects releases its IP addresses.
    n2.send(&ask("10.0.0.2", "d.com"));
    assert!(answer(&mut n2));
    drop(n2);
    std::thread::sleep(Duration::from_millis(300));
    n1.send(&ask("10.0.0.2", "d.com"));
    assert!(answer(&mut n1));
    // 3.2.5.13: the collection's state.
    n1.send(&Message::CmdUmConfStateRequest(CollectionOnly {
        collection: b("web"),
    }));
    let m = wait_for(&mut n1, "CONF_STATE", |m| {
        matches!(m, Message::CmdUmConfState(_))
    });
    let Message::CmdUmConfState(s) = m else {
        unreachable!()
    };
    assert_eq!(s.state, 1);
    // 3.2.6: keep-alives arrive every second (wait_for answers them); one is seen here.
    let mut raw = Client::connect(mn.addr());
    raw.send(&init("n9"));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(
            Instant::now() < deadline,
            "no keep-alive from the multinode scheduler"
        );
        if raw.recv() == Some(Message::CmdUmKeepalive) {
            break;
        }
    }
    // 3.2.5.8: log lines go to the collection's log files.
    for (file, line) in [
        ("si", "site line"),
        ("dk", "fetch line\n"),
        ("zz", "unknown file"),
    ] {
        n1.send(&Message::CmdUmLog(Log {
            collection: b("web"),
            logfile: b(file),
            message: b(line),
        }));
    }
    // The sync timer flushes them; the keep-alive round trip shows they were handled.
    n1.send(&Message::CmdUmKeepalive);
    wait_for(&mut n1, "KEEPALIVE_ACK", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
    std::thread::sleep(Duration::from_millis(500));
    let logs = data.join("logs").join("web");
    assert_eq!(
        std::fs::read_to_string(logs.join("site.log")).unwrap(),
        "site line\n"
    );
    assert_eq!(
        std::fs::read_to_string(logs.join("fetch.log")).unwrap(),
        "fetch line\n"
    );
    assert_eq!(
        std::fs::read_dir(&logs).unwrap().count(),
        2,
        "unknown log files are refused"
    );
}

// ---- the node scheduler, with the test as its multinode scheduler and duplicate server ----------

struct FakePeer {
    listener: TcpListener,
}

impl FakePeer {
    fn new() -> FakePeer {
        FakePeer {
            listener: TcpListener::bind("127.0.0.1:0").unwrap(),
        }
    }
    fn addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap()
    }
    fn accept(&self) -> Client {
        self.listener.set_nonblocking(false).unwrap();
        let (s, _) = self.listener.accept().unwrap();
        Client::from_stream(s)
    }
}

fn node(data: &Path, mn: SocketAddr, id: &str) -> Role {
    Role::start(&[
        "node",
        "--node-id",
        id,
        "--multinode",
        &mn.to_string(),
        "--admin",
        "127.0.0.1:15111",
        "--data-dir",
        data.to_str().unwrap(),
        "--sync-ms",
        "20",
        "--quarantine-interval",
        "0.2",
    ])
}

fn conf(name: &str, dict: Value<'static>) -> Message<'static> {
    Message::CmdAdmConfAdd(ConfSpec {
        collection: b(name),
        config: dict,
        epoch: None,
    })
}

fn dict_with(sites: &[&str], dup: Option<SocketAddr>) -> Value<'static> {
    let xml_dir = temp_dir(&format!("cfg-{}", fastrand::u32(..)));
    let p = config_xml(xml_dir.path(), "c", 0, dup);
    let mut d = crawlfleet_core::config::parse_xml(&std::fs::read_to_string(p).unwrap())
        .unwrap()
        .remove(0)
        .1;
    if let Value::Dict(pairs) = &mut d {
        pairs.retain(|(k, _)| k.as_bytes() != Some(b"start_uris"));
        let list = sites
            .iter()
            .map(|s| Value::owned_bytes(s.as_bytes().to_vec()))
            .collect();
        pairs.push((
            Value::owned_bytes(b"start_uris".to_vec()),
            Value::list(list),
        ));
    }
    d
}

/// The entries in a node's crawl queue for `coll` (read after the node was killed).
fn queued(data: &Path, coll: &str) -> Vec<(String, bool)> {
    let dir = collection_dir(data, coll.as_bytes());
    let mut q = CrawlQueue::open(&dir.join("queue"), QueueOptions::default()).unwrap();
    // Entries the node had taken and not finished are journaled; a restart queues them again
    // at the front, as done here.
    let (mut j, pending) =
        crawlfleet_core::sched::inflight::Inflight::open(&dir.join("inflight")).unwrap();
    for r in pending.iter().rev() {
        q.push_front(r).unwrap();
    }
    q.sync().unwrap();
    j.reset().unwrap();
    let mut out = Vec::new();
    while let Some(rec) = q.pop_front().unwrap() {
        let (e, urgent) = parse_record(&rec).unwrap();
        out.push((String::from_utf8_lossy(&e.uri.uri).into_owned(), urgent));
    }
    out
}

#[test]
fn a_node_registers_answers_routes_and_its_queue_survives_sigkill() {
    let dir = temp_dir("node-basic");
    let data = dir.path().join("data");
    let fake_mn = FakePeer::new();
    let fake_dup = FakePeer::new();
    let n = node(&data, fake_mn.addr(), "n1");
    let mut mn = fake_mn.accept();
    // 2.2.4.1: INIT first, with the node id and the admin port.
    let m = mn.recv().unwrap();
    assert_eq!(m, init_of("n1", 15111));
    mn.send(&conf("web", dict_with(&[], Some(fake_dup.addr()))));
    // 3.1.5.11 via CONF_ADD: the duplicate server gets PPDUP_SET_CONFIG with vector clock 1.
    let mut dup = fake_dup.accept();
    let m = wait_dup(&mut dup, |m| matches!(m, Message::PpdupSetConfig(_)));
    let Message::PpdupSetConfig(sc) = m else {
        unreachable!()
    };
    assert_eq!(sc.vclock, 1);
    assert_eq!(sc.collection.as_deref(), Some(&b"web"[..]));
    assert!(
        sc.config
            .get(b"web")
            .and_then(|s| s.get(b"dupservers"))
            .is_some(),
        "only the ppdup section: {sc:?}"
    );
    // Routes: one to us, one elsewhere (3.1.5.7); ASK_ROUTE lists both, then LAST_ROUTE (3.1.5.8).
    for (node_id, attr) in [("n1", "mine.com"), ("n2", "theirs.com")] {
        mn.send(&Message::CmdUmAddRoute(AddRoute {
            collection: b("web"),
            node_id: b(node_id),
            routing_attr: b(attr),
            site: b(&format!("www.{attr}")),
            addrinfo: None,
            ttl: 0,
        }));
    }
    mn.send(&Message::CmdUmAskRoute(CollectionOnly {
        collection: b("web"),
    }));
    let m = wait_for(&mut mn, "ADD_ROUTE list", |m| {
        matches!(m, Message::CmdUmAddRoutes(_))
    });
    let Message::CmdUmAddRoutes(r) = m else {
        unreachable!()
    };
    let got: BTreeSet<(Vec<u8>, Vec<u8>)> = r
        .routes
        .iter()
        .map(|(a, n)| (a.to_vec(), n.to_vec()))
        .collect();
    assert_eq!(
        got,
        BTreeSet::from([
            (b"mine.com".to_vec(), b"n1".to_vec()),
            (b"theirs.com".to_vec(), b"n2".to_vec())
        ])
    );
    wait_for(&mut mn, "LAST_ROUTE", |m| {
        matches!(m, Message::CmdUmLastRoute(_))
    });
    // CONF_UPDATE: SET_CONFIG with the next clock; start URIs requeued: ours stay local, the
    // others go to the multinode scheduler (3.1.5.11, 3.1 forward links).
    mn.send(&Message::CmdAdmConfUpdate(ConfSpec {
        collection: b("web"),
        config: dict_with(
            &[
                "http://www.mine.com/",
                "http://www.theirs.com/",
                "http://new.net/",
            ],
            Some(fake_dup.addr()),
        ),
        epoch: None,
    }));
    let m = wait_dup(&mut dup, |m| matches!(m, Message::PpdupSetConfig(_)));
    let Message::PpdupSetConfig(sc) = m else {
        unreachable!()
    };
    assert_eq!(sc.vclock, 2);
    let mut forwarded = BTreeSet::new();
    while forwarded.len() < 2 {
        let m = wait_for(&mut mn, "forwarded start URIs", |m| {
            matches!(m, Message::CmdUmUri(_))
        });
        let Message::CmdUmUri(u) = m else {
            unreachable!()
        };
        forwarded.insert(String::from_utf8_lossy(&u.entry.uri.uri).into_owned());
    }
    assert_eq!(
        forwarded,
        BTreeSet::from([
            "http://new.net/".to_string(),
            "http://www.theirs.com/".to_string()
        ])
    );
    // 3.1.5.2 / 3.1.5.3: URIs to the back, URGs to the front.
    for i in 0..500 {
        mn.send(&Message::CmdUmUri(UriMsg {
            collection: b("web"),
            entry: entry(&format!("http://www.mine.com/{i}")),
        }));
    }
    mn.send(&Message::CmdUmUriUrg(UriMsg {
        collection: b("web"),
        entry: entry("http://www.mine.com/urgent"),
    }));
    // The keep-alive round trip shows every frame before it was handled (3.1.5.1).
    mn.send(&Message::CmdUmKeepalive);
    wait_for(&mut mn, "KEEPALIVE_ACK", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
    // PPDUP_KEEPALIVE from the duplicate server is answered (3.1.5.27).
    dup.send(&Message::PpdupKeepalive);
    wait_dup(&mut dup, |m| *m == Message::PpdupKeepaliveAck);
    std::thread::sleep(Duration::from_millis(300)); // several 20 ms sync points
    n.kill(); // SIGKILL
    let q = queued(&data, "web");
    // Nothing lost: what the node had taken from its queue (the start URI, waiting for its
    // name) comes back first, then the urgent entry at the front of the queue, then the rest in
    // order.
    assert_eq!(q.len(), 502, "start URI + 500 + urgent");
    assert!(q.contains(&("http://www.mine.com/urgent".to_string(), true)));
    let rest: Vec<&str> = q
        .iter()
        .map(|(u, _)| u.as_str())
        .filter(|u| !u.ends_with("/urgent") && *u != "http://www.mine.com/")
        .collect();
    assert_eq!(rest.len(), 500);
    for (i, u) in rest.iter().enumerate() {
        assert_eq!(*u, format!("http://www.mine.com/{i}"));
    }
    // Restarted on the same data dir, it registers again and still knows its routes.
    let _n = node(&data, fake_mn.addr(), "n1");
    let mut mn = fake_mn.accept();
    assert_eq!(mn.recv().unwrap(), init_of("n1", 15111));
    mn.send(&Message::CmdUmAskRoute(CollectionOnly {
        collection: b("web"),
    }));
    let m = wait_for(&mut mn, "ADD_ROUTE list", |m| {
        matches!(m, Message::CmdUmAddRoutes(_))
    });
    let Message::CmdUmAddRoutes(r) = m else {
        unreachable!()
    };
    assert_eq!(r.routes.len(), 2);
    // 3.1.5.12: CONF_REMOVE: PPDUP_CONF_REMOVE and CONF_REMOVE2 to the duplicate server, then
    // DELETE_OK, and the collection's files are gone.
    let mut dup = fake_dup.accept();
    wait_dup(&mut dup, |m| matches!(m, Message::PpdupSetConfig(_)));
    mn.send(&Message::CmdAdmConfRemove(CollectionOnly {
        collection: b("web"),
    }));
    wait_dup(&mut dup, |m| matches!(m, Message::PpdupConfRemove(_)));
    wait_dup(&mut dup, |m| matches!(m, Message::PpdupConfRemove2(_)));
    let m = wait_for(&mut mn, "DELETE_OK", |m| {
        matches!(m, Message::CmdUmDeleteOk(_))
    });
    assert_eq!(
        m,
        Message::CmdUmDeleteOk(CollectionOnly {
            collection: b("web")
        })
    );
    assert!(!collection_dir(&data, b"web").exists());
}

fn init_of(node: &str, port: i64) -> Message<'static> {
    Message::CmdUmInit(Init {
        node_id: b(node),
        xmlrpc_host: b("127.0.0.1"),
        xmlrpc_port: port,
    })
}

fn wait_dup(c: &mut Client, want: impl Fn(&Message<'static>) -> bool) -> Message<'static> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline);
        let m = c
            .recv()
            .expect("the node stays connected to the duplicate server");
        if want(&m) {
            return m;
        }
    }
}

#[test]
fn a_node_suspends_quarantines_and_deletes_over_the_wire() {
    let dir = temp_dir("node-admin");
    let data = dir.path().join("data");
    let fake_mn = FakePeer::new();
    let n = node(&data, fake_mn.addr(), "n1");
    let mut mn = fake_mn.accept();
    assert_eq!(mn.recv().unwrap(), init_of("n1", 15111));
    mn.send(&conf("web", dict_with(&[], None)));
    for i in 0..10 {
        let site = if i % 2 == 0 { "a.com" } else { "b.com" };
        mn.send(&Message::CmdUmUri(UriMsg {
            collection: b("web"),
            entry: entry(&format!("http://{site}/{i}")),
        }));
    }
    // 3.1.5.16: delete two URIs; 3.1.5.15: delete a whole site.
    mn.send(&Message::CmdUmDeleteUris(
        crawlfleet_core::msg::DeleteUris {
            collection: b("web"),
            uris: vec![(b("a.com"), vec![b("http://a.com/0"), b("http://a.com/2")])],
            info: vec![(
                Value::owned_bytes(b"errcode".to_vec()),
                Value::owned_bytes(b"USR".to_vec()),
            )],
        },
    ));
    mn.send(&Message::CmdUmDeleteSite(
        crawlfleet_core::msg::DeleteSite {
            collection: b("web"),
            site: b("b.com"),
        },
    ));
    // 3.1.5.18: quarantine with requeue puts the site at the front.
    mn.send(&Message::CmdUmQuarantineSiteRequeue(Quarantine {
        collection: b("web"),
        site: b("c.com"),
        seconds: 60,
    }));
    // 3.1.5.4: suspend (state 4), persisted.
    mn.send(&Message::CmdAdmConfSuspend(
        crawlfleet_core::msg::ConfSuspend {
            collection: b("web"),
            state: 4,
        },
    ));
    mn.send(&Message::CmdUmKeepalive);
    wait_for(&mut mn, "KEEPALIVE_ACK", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
    std::thread::sleep(Duration::from_millis(300));
    n.kill();
    let q: Vec<String> = queued(&data, "web").into_iter().map(|(u, _)| u).collect();
    assert_eq!(
        q,
        vec![
            "http://c.com/",
            "http://a.com/4",
            "http://a.com/6",
            "http://a.com/8"
        ]
    );
    let meta = crawlfleet_core::sched::node::read_meta(&collection_dir(&data, b"web").join("meta"))
        .unwrap();
    assert_eq!(meta.get(b"state").and_then(Value::as_i64), Some(4));
}

fn routes_of(data: &Path, coll: &str) -> BTreeMap<String, String> {
    // A copy, so the running node's file is never touched.
    let copy = temp_dir(&format!("routes-copy-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&copy).unwrap();
    let _ = std::fs::copy(data.join("routes"), copy.path().join("routes"));
    let db = crawlfleet_core::routing::RoutingDb::open(&copy.path().join("routes")).unwrap();
    db.routes(coll.as_bytes())
        .map(|(a, n)| {
            (
                String::from_utf8_lossy(a).into_owned(),
                String::from_utf8_lossy(n).into_owned(),
            )
        })
        .collect()
}

#[test]
fn one_multinode_and_three_nodes_route_every_site_once_and_a_killed_node_comes_back() {
    let dir = temp_dir("cluster");
    let cfg = config_xml(dir.path(), "web", 30, None);
    let mn = multinode(&dir.path().join("mn"), &[&cfg], &[]);
    let ids = ["n1", "n2", "n3"];
    let data: Vec<PathBuf> = ids.iter().map(|i| dir.path().join(i)).collect();
    let mut nodes: Vec<Option<Role>> = ids
        .iter()
        .zip(&data)
        .map(|(id, d)| Some(node(d, mn.addr(), id)))
        .collect();
    // Every node learns all 30 routes (CMD_UM_ADD_ROUTE to every node, persisted by each).
    let deadline = Instant::now() + Duration::from_secs(30);
    while data.iter().any(|d| routes_of(d, "web").len() < 30) {
        assert!(Instant::now() < deadline, "routes did not reach every node");
        std::thread::sleep(Duration::from_millis(100));
    }
    let table = routes_of(&data[0], "web");
    for d in &data[1..] {
        assert_eq!(routes_of(d, "web"), table);
    }
    std::thread::sleep(Duration::from_millis(500)); // the nodes' 20 ms sync points
                                                    // Kill n2 and bring it back on the same data dir: it registers again.
    nodes[1].take().unwrap().kill();
    nodes[1] = Some(node(&data[1], mn.addr(), "n2"));
    // A probe node sends a link to a site of n2; it reaches the new n2.
    let (mut probe, _) = register(mn.addr(), "probe");
    answer_ask(&mut probe);
    let n2_site = table
        .iter()
        .find(|(_, n)| *n == "n2")
        .map(|(a, _)| a.clone())
        .unwrap();
    let link = format!("http://www.{n2_site}/after-restart");
    probe.send(&Message::CmdUmUri(UriMsg {
        collection: b("web"),
        entry: entry(&link),
    }));
    // Node schedulers crawl what they are given (here the names do not resolve, so the entries
    // end quickly); what each took in is in its seen set, synced with its queue.
    let seen_by = |d: &Path, u: &str| {
        crawlfleet_core::sched::seen::SeenSet::open(&collection_dir(d, b"web").join("seen"))
            .unwrap()
            .contains(u.as_bytes())
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        for n in nodes.iter_mut() {
            n.take().unwrap().kill();
        }
        if seen_by(&data[1], &link) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted n2 never got {link}"
        );
        nodes = ids
            .iter()
            .zip(&data)
            .map(|(id, d)| Some(node(d, mn.addr(), id)))
            .collect();
    }
    // Each URI reached only the node its site is routed to.
    let mut uris: Vec<String> = (0..30)
        .map(|i| format!("http://www.site{i}.com/"))
        .collect();
    uris.push(link.clone());
    for u in &uris {
        let attr = u
            .trim_start_matches("http://www.")
            .split('/')
            .next()
            .unwrap();
        let at: Vec<&str> = ids
            .iter()
            .zip(&data)
            .filter(|(_, d)| seen_by(d, u))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(at, [table[attr].as_str()], "{u} reached {at:?}");
    }
    for id in ids {
        assert_eq!(table.values().filter(|n| *n == id).count(), 10, "{table:?}");
    }
}
