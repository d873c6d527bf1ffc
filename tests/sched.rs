//! The multinode scheduler and node schedulers as real processes on loopback (MS-FSCMT 3.1.5,
//! 3.2.5). The test plays the other side of each conversation over a socket: node schedulers
//! toward a real multinode scheduler, and the multinode scheduler and a duplicate server toward a
//! real node scheduler (in `sched/node.rs`); crawl queues are read back from the data directory
//! after SIGKILL.

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
    let stop = |site: &str| {
        Message::CmdUmStopCrawlIp(StopCrawlIp {
            collection: b("web"),
            ip: b("10.0.0.1"),
            site: b(site),
        })
    };
    // Each STOP is read before n2 asks: n1's next question on the same connection is
    // answered after it.
    n1.send(&stop("a.com"));
    n1.send(&ask("10.0.0.9", "z.com"));
    assert!(answer(&mut n1));
    n2.send(&ask("10.0.0.1", "b.com"));
    assert!(!answer(&mut n2), "n1 still crawls c.com on the IP");
    n1.send(&stop("c.com"));
    n1.send(&ask("10.0.0.9", "z.com"));
    assert!(answer(&mut n1));
    n2.send(&ask("10.0.0.1", "b.com"));
    assert!(
        answer(&mut n2),
        "released by the STOP_CRAWL_IP of its last site"
    );
    // A node that disconnects releases its IP addresses.
    n2.send(&ask("10.0.0.2", "d.com"));
    assert!(answer(&mut n2));
    drop(n2);
    crate::util::wait_until("n2's IP address released when it disconnected", || {
        n1.send(&ask("10.0.0.2", "d.com"));
        answer(&mut n1)
    });
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
    let logs = data.join("logs").join("web");
    crate::util::wait_until("the log lines written at the next sync", || {
        std::fs::read_to_string(logs.join("fetch.log")).is_ok_and(|t| t == "fetch line\n")
    });
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

// The node scheduler, with the test as its multinode scheduler and duplicate server.
mod node;

// The multinode scheduler on a full disk.
mod diskfull;
