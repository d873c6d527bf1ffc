//! The scheduler state machines driven message by message: the node scheduler's site manager
//! (3.1.5.21 START_CRAWL_IP with the 30-minute block and the 10-sites-per-IP rule), quarantine
//! (3.1.5.17-18), suspend (3.1.5.4), feeding (3.1.5.6), refresh (3.1.5.9), the duplicate-server
//! messages (3.1.5.22-27) and statistics (3.1.6); the multinode scheduler's collection removal
//! with DELETE_OK (3.2.5.14), relays, and statistics aggregation (3.2.5.6).

use std::borrow::Cow;
use tempfile::TempDir;

use super::dns::DnsEntry;
use super::multinode::{merge_stats, Multinode, MultinodeOptions};
use super::node::{Dest, NodeOptions, NodeScheduler};
use super::{parse_record, Outbox};
use crate::frame::{self, Priority};
use crate::marshal::{Limits, Value};
use crate::msg::types::conf_state;
use crate::msg::{
    AddrInfo, Checksum, CollectionOnly, ConfRefresh, ConfSpec, ConfState, ConfSuspend,
    CrawlQueueEntry, DnsRequest, FeedingSuspend, Init, Message, PpdupAddOk, PpdupConfigAck,
    PpdupPromoteReq, PpdupRemoveOk, PreemptSite, Quarantine, StartCrawlIpReply, Stat, UriMsg,
    UriStructure,
};

fn tmp(name: &str) -> TempDir {
    TempDir::with_prefix(format!("crawlfleet-sched-{name}-")).unwrap()
}

fn b(s: &str) -> Cow<'static, [u8]> {
    Cow::Owned(s.as_bytes().to_vec())
}

fn dict(pairs: Vec<(&str, Value<'static>)>) -> Value<'static> {
    super::collections::meta(pairs)
}

fn config(start: &[&str], dup: Option<&str>) -> Value<'static> {
    let mut p = vec![(
        "start_uris",
        Value::list(
            start
                .iter()
                .map(|s| Value::owned_bytes(s.as_bytes().to_vec()))
                .collect(),
        ),
    )];
    if let Some(d) = dup {
        p.push((
            "ppdup",
            dict(vec![(
                "dupservers",
                Value::list(vec![Value::owned_bytes(d.as_bytes().to_vec())]),
            )]),
        ));
    }
    dict(p)
}

fn entry(uri: &str) -> CrawlQueueEntry<'static> {
    CrawlQueueEntry::new(UriStructure::unparsed(b(uri)))
}

fn uri(coll: &str, u: &str) -> Message<'static> {
    Message::CmdUmUri(UriMsg {
        collection: b(coll),
        entry: entry(u),
    })
}

/// The messages of an outbox, decoded, with their destinations.
/// Bulk buffers come after the other frames, split into one entry per frame.
fn decoded<D: Clone>(out: Outbox<D>) -> Vec<(D, Priority, Message<'static>)> {
    let bulk = out.bulk.into_iter().map(|(d, b)| (d, Priority::Normal, b));
    let mut v = Vec::new();
    for (d, p, bytes) in out.sends.into_iter().chain(bulk) {
        let mut rest = &bytes[..];
        while let Some((body, n)) = frame::split(rest, &Limits::default()).unwrap() {
            let (_, m) = frame::decode_message(body, &Limits::default()).unwrap();
            v.push((d.clone(), p, m.into_owned()));
            rest = &rest[n..];
        }
        assert!(rest.is_empty(), "a partial frame");
    }
    v
}

/// A node scheduler on a scratch directory, which lives as long as the guard.
fn node(name: &str) -> (NodeScheduler, TempDir) {
    let dir = tmp(name);
    let n = NodeScheduler::open(dir.path(), NodeOptions::new(b"n1")).unwrap();
    (n, dir)
}

const MN: Dest = Dest::Multinode;

fn start_reply(coll: &str, ip: &str, site: &str, allowed: bool) -> Message<'static> {
    Message::CmdUmStartCrawlIpReply(StartCrawlIpReply {
        collection: b(coll),
        ip: b(ip),
        site: b(site),
        store_id: 0,
        allowed,
    })
}

#[test]
fn sites_start_only_with_permission_and_at_most_ten_per_ip() {
    let (mut n, _dir) = node("permission");
    n.handle_message(
        &MN,
        Message::CmdAdmConfAdd(ConfSpec {
            collection: b("c"),
            config: config(&[], None),
            epoch: None,
        }),
        0,
    )
    .unwrap();
    for i in 0..12 {
        n.handle_message(&MN, uri("c", &format!("http://10.0.0.1:{}/x", 8000 + i)), 0)
            .unwrap();
    }
    n.handle_message(&MN, uri("c", "http://10.0.0.2/y"), 0)
        .unwrap();
    n.take_output();
    n.dispatch(100, 1000).unwrap();
    // An IP-literal site needs no DNS: one START_CRAWL_IP request per site.
    let asks: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(_, _, m)| match m {
            Message::CmdUmStartCrawlIp(s) => Some((s.ip.to_vec(), s.site.to_vec())),
            _ => None,
        })
        .collect();
    assert_eq!(asks.len(), 13);
    assert!(
        n.take_ready(100).is_empty(),
        "nothing is fetched before permission"
    );
    // Refused: blocked 30 minutes, entries back at the front of the queue.
    n.handle_message(&MN, start_reply("c", "10.0.0.2", "10.0.0.2", false), 1000)
        .unwrap();
    assert!(n.is_held(b"c", "10.0.0.2", 1000));
    assert!(n.is_held(b"c", "10.0.0.2", 1000 + 1799));
    assert!(!n.is_held(b"c", "10.0.0.2", 1000 + 1800));
    // Allowed: ten sites on 10.0.0.1 start, the eleventh and twelfth are blocked.
    for i in 0..12 {
        let site = format!("10.0.0.1:{}", 8000 + i);
        n.handle_message(&MN, start_reply("c", "10.0.0.1", &site, true), 1000)
            .unwrap();
    }
    assert_eq!(n.active_sites(b"c").len(), 10);
    assert!(n.is_held(b"c", "10.0.0.1:8010", 1000) && n.is_held(b"c", "10.0.0.1:8011", 1000));
    let ready = n.take_ready(100);
    assert_eq!(ready.len(), 10);
    assert!(ready.iter().all(|r| r.ip == "10.0.0.1"));
    // Blocked sites' entries wait in the quarantine queue when dispatched again...
    n.dispatch(100, 1001).unwrap();
    assert_eq!(n.queued(b"c"), Some((0, 3)));
    // ... and come back when the block ends (Quarantine timer).
    n.quarantine_tick(1000 + 1800).unwrap();
    assert_eq!(n.queued(b"c"), Some((3, 0)));
    // A site that ends releases its IP only when it was the last one on it.
    n.take_output();
    for i in 0..10 {
        n.site_done(b"c", &format!("10.0.0.1:{}", 8000 + i));
    }
    let stops: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter(|(_, _, m)| matches!(m, Message::CmdUmStopCrawlIp(_)))
        .collect();
    assert_eq!(
        stops.len(),
        1,
        "one STOP_CRAWL_IP when the IP's last site ends"
    );
}

#[test]
fn names_are_resolved_through_the_multinode_scheduler() {
    let (mut n, _dir) = node("dns");
    n.conf_add(b"c", config(&[], None)).unwrap();
    n.handle_message(&MN, uri("c", "http://www.example.com/a"), 0)
        .unwrap();
    n.handle_message(&MN, uri("c", "http://www.example.com/b"), 0)
        .unwrap();
    n.handle_message(&MN, uri("c", "http://gone.example.net/"), 0)
        .unwrap();
    n.take_output();
    n.dispatch(100, 10).unwrap();
    let reqs: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(_, _, m)| match m {
            Message::CmdUmDnsRequest(r) => Some(r.host.to_vec()),
            _ => None,
        })
        .collect();
    assert_eq!(
        reqs,
        vec![b"www.example.com".to_vec(), b"gone.example.net".to_vec()]
    );
    // 3.1.5.19: the answer goes to the DNS database, and the site asks for its IP.
    let addr = AddrInfo {
        family: 2,
        socktype: 1,
        protocol: 6,
        canonname: b(""),
        address: b("93.184.216.34"),
        port: 0,
    };
    let reply = Message::CmdUmDnsReply(crate::msg::DnsReply {
        collection: b(""),
        host: b("www.example.com"),
        addrinfo: Some(vec![addr]),
        resolved_at: 10,
        ttl: 300,
    });
    n.handle_message(&MN, reply, 10).unwrap();
    assert!(n.dns(b"www.example.com", 309).is_some());
    assert!(n.dns(b"www.example.com", 310).is_none());
    let asks: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(_, _, m)| match m {
            Message::CmdUmStartCrawlIp(s) => Some((s.ip.to_vec(), s.site.to_vec())),
            _ => None,
        })
        .collect();
    assert_eq!(
        asks,
        vec![(b"93.184.216.34".to_vec(), b"www.example.com".to_vec())]
    );
    // A failed lookup drops the site's entries (counted).
    n.dns_answer(
        "gone.example.net",
        DnsEntry {
            addrinfo: None,
            resolved_at: 10,
            ttl: 60,
        },
        10,
    )
    .unwrap();
    assert_eq!(n.counters(b"c").unwrap().uris_dropped, 1);
    n.handle_message(
        &MN,
        start_reply("c", "93.184.216.34", "www.example.com", true),
        11,
    )
    .unwrap();
    assert_eq!(n.take_ready(10).len(), 2);
}

#[test]
fn quarantine_suspend_preempt_and_feeding() {
    let (mut n, dir) = node("quarantine");
    n.conf_add(b"c", config(&[], None)).unwrap();
    n.handle_message(&MN, uri("c", "http://10.1.1.1/a"), 0)
        .unwrap();
    n.dispatch(10, 0).unwrap();
    n.handle_message(&MN, start_reply("c", "10.1.1.1", "10.1.1.1", true), 0)
        .unwrap();
    assert_eq!(n.active_sites(b"c").len(), 1);
    // 3.1.5.17: the active site stops, its entry waits; new entries for it are set aside.
    n.take_output();
    let q = Quarantine {
        collection: b("c"),
        site: b("10.1.1.1"),
        seconds: 60,
    };
    n.handle_message(&MN, Message::CmdUmQuarantineSite(q), 100)
        .unwrap();
    assert!(n.active_sites(b"c").is_empty());
    assert!(decoded(n.take_output())
        .iter()
        .any(|(_, _, m)| matches!(m, Message::CmdUmStopCrawlIp(_))));
    n.handle_message(&MN, uri("c", "http://10.1.1.1/b"), 100)
        .unwrap();
    n.dispatch(10, 101).unwrap();
    assert_eq!(n.queued(b"c"), Some((0, 2)));
    n.quarantine_tick(159).unwrap();
    assert_eq!(n.queued(b"c"), Some((0, 2)), "still quarantined");
    n.quarantine_tick(160).unwrap();
    assert_eq!(
        n.queued(b"c"),
        Some((2, 0)),
        "released at the end of the period"
    );
    // 3.1.5.4: suspended collections are not dispatched; state 4 persists.
    n.handle_message(
        &MN,
        Message::CmdAdmConfSuspend(ConfSuspend {
            collection: b("c"),
            state: 4,
        }),
        200,
    )
    .unwrap();
    n.dispatch(10, 200).unwrap();
    assert_eq!(n.queued(b"c"), Some((2, 0)));
    // A state outside 4, 5, 8 is refused.
    n.handle_message(
        &MN,
        Message::CmdAdmConfSuspend(ConfSuspend {
            collection: b("c"),
            state: 2,
        }),
        200,
    )
    .unwrap();
    assert_eq!(n.collections(), vec![(b"c".to_vec(), 4)]);
    // 3.1.5.6: feeding per destination and for all.
    let f = |suspend, d: Option<Vec<&str>>| {
        Message::CmdAdmConfFeedingSuspend(FeedingSuspend {
            collection: b("c"),
            suspend,
            destinations: d.map(|v| v.into_iter().map(b).collect()),
        })
    };
    n.handle_message(&MN, f(true, Some(vec!["default: web"])), 0)
        .unwrap();
    assert_eq!(
        n.feeding(b"c"),
        Some((false, vec![b"default: web".to_vec()]))
    );
    n.handle_message(&MN, f(true, None), 0).unwrap();
    n.handle_message(&MN, f(false, None), 0).unwrap();
    assert_eq!(n.feeding(b"c"), Some((false, vec![])));
    n.handle_message(&MN, f(true, Some(vec!["x"])), 0).unwrap();
    drop(n);
    // Persisted: state and feeding survive a restart.
    let mut n = NodeScheduler::open(dir.path(), NodeOptions::new(b"n1")).unwrap();
    assert_eq!(n.collections(), vec![(b"c".to_vec(), 4)]);
    assert_eq!(n.feeding(b"c"), Some((false, vec![b"x".to_vec()])));
    // Resume, then PREEMPT of an active site puts its entries back (3.1.5.13).
    n.handle_message(
        &MN,
        Message::CmdAdmConfResume(CollectionOnly { collection: b("c") }),
        300,
    )
    .unwrap();
    n.dispatch(10, 300).unwrap();
    n.handle_message(&MN, start_reply("c", "10.1.1.1", "10.1.1.1", true), 300)
        .unwrap();
    assert_eq!(n.active_sites(b"c").len(), 1);
    let p = PreemptSite {
        collection: b("c"),
        site: b("10.1.1.1"),
        requeue: true,
    };
    n.handle_message(&MN, Message::CmdAdmPreemptSite(p.clone()), 300)
        .unwrap();
    assert!(n.active_sites(b"c").is_empty());
    assert_eq!(n.queued(b"c"), Some((2, 0)));
    // Ignored when the site is not being crawled.
    n.handle_message(&MN, Message::CmdAdmPreemptSite(p), 300)
        .unwrap();
    assert_eq!(n.queued(b"c"), Some((2, 0)));
    // 3.1.5.20: CONF_STATE sets the state.
    n.handle_message(
        &MN,
        Message::CmdUmConfState(ConfState {
            collection: b("c"),
            state: conf_state::BLOCKED,
        }),
        0,
    )
    .unwrap();
    assert_eq!(n.collections(), vec![(b"c".to_vec(), 2)]);
}

#[test]
fn refresh_duplicate_server_messages_and_statistics() {
    let (mut n, _dir) = node("refresh");
    let d = Dest::Dup("127.0.0.1:9".into());
    n.dup_connected("127.0.0.1:9");
    n.conf_add(
        b"c",
        config(&["http://a.com/", "http://b.com/"], Some("127.0.0.1:9")),
    )
    .unwrap();
    let out = decoded(n.take_output());
    let Some((_, _, Message::PpdupSetConfig(sc))) = out
        .iter()
        .find(|(_, _, m)| matches!(m, Message::PpdupSetConfig(_)))
    else {
        panic!("SET_CONFIG sent: {out:?}")
    };
    assert_eq!(sc.vclock, 1);
    // 3.1.5.22: a stale CONFIG_ACK is discarded, the matching one marks the server updated.
    n.handle_message(&d, Message::PpdupConfigAck(PpdupConfigAck { vclock: 0 }), 0)
        .unwrap();
    assert_eq!(n.dup_status(), vec![("127.0.0.1:9".into(), true, false)]);
    n.handle_message(&d, Message::PpdupConfigAck(PpdupConfigAck { vclock: 1 }), 0)
        .unwrap();
    assert_eq!(n.dup_status(), vec![("127.0.0.1:9".into(), true, true)]);
    // 3.1.5.9: a refresh starts a new cycle and requeues the start URIs (not routed here:
    // forwarded to the multinode scheduler).
    let r = ConfRefresh {
        collection: b("c"),
        subcollection: None,
        options: 0x2,
    };
    n.handle_message(&MN, Message::CmdAdmConfRefresh(r), 0)
        .unwrap();
    assert_eq!(n.refresh_cycle(b"c"), Some(1));
    let fwd: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(to, _, m)| match m {
            Message::CmdUmUri(u) if to == MN => {
                Some((u.entry.uri.uri.to_vec(), u.entry.refresh_cycle))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        fwd,
        vec![
            (b"http://a.com/".to_vec(), 1),
            (b"http://b.com/".to_vec(), 1)
        ]
    );
    // 3.1.5.23 / 3.1.5.25: an owned add enters the checksum database; PROMOTE_REQ re-crawls it.
    let cs = Checksum([7; 16]);
    let doc = crate::crawl::Document {
        collection: b"c".to_vec(),
        uri: b"http://a.com/x".to_vec(),
        checksum: cs,
        status: 200,
        headers: vec![("etag".into(), b"\"v1\"".to_vec())],
        body: b"<p>x</p>".to_vec(),
        uri_flags: 0,
        redirected_from: Vec::new(),
        seq: 0,
    };
    assert_eq!(
        n.document(Box::new(doc)).unwrap(),
        None,
        "asks the duplicate server"
    );
    let ok = PpdupAddOk {
        collection: b("c"),
        node_id: b("n1"),
        uri: b("http://a.com/x"),
        owner_uri: Some(b("http://a.com/x")),
        ppdup_id: None,
        dbname: None,
    };
    n.handle_message(&d, Message::PpdupAddOk(ok), 0).unwrap();
    assert_eq!(
        n.checksum_owners(b"c", &cs),
        vec![b"http://a.com/x".to_vec()]
    );
    let v = n.take_verdicts();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].fate, crate::sched::node::Fate::Added);
    n.take_output();
    n.handle_message(
        &d,
        Message::PpdupPromoteReq(PpdupPromoteReq {
            collection: b("c"),
            checksum: cs,
        }),
        0,
    )
    .unwrap();
    let urg: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(_, _, m)| match m {
            Message::CmdUmUriUrg(u) => Some(u.entry.uri_flags),
            _ => None,
        })
        .collect();
    assert_eq!(urg, vec![crate::msg::types::uri_flags::URIF_PROMOTE]);
    // A duplicate (owned by another URI) does not enter the database.
    assert!(n.ppdup_add(b"c", b"http://b.com/y", cs));
    let dup = PpdupAddOk {
        collection: b("c"),
        node_id: b("n1"),
        uri: b("http://b.com/y"),
        owner_uri: Some(b("http://a.com/x")),
        ppdup_id: None,
        dbname: None,
    };
    n.handle_message(&d, Message::PpdupAddOk(dup), 0).unwrap();
    assert_eq!(n.checksum_owners(b"c", &cs).len(), 1);
    // 3.1.6: CMD_UM_STAT carries deltas: the second tick reports only what happened since.
    n.take_output();
    n.stats_tick();
    let first = decoded(n.take_output());
    n.stats_tick();
    let second = decoded(n.take_output());
    let fwd_of = |v: &[(Dest, Priority, Message<'static>)]| match &v[0].2 {
        Message::CmdUmStat(Stat { stats, .. }) => {
            stats.get(b"uris_forwarded").and_then(Value::as_i64)
        }
        _ => None,
    };
    assert_eq!(
        fwd_of(&first),
        Some(3),
        "two refreshed start URIs and one promoted URI"
    );
    assert_eq!(fwd_of(&second), Some(0));
    // Keep-alives: an unanswered one is logged and a new one sent (3.1.6).
    n.dup_keepalive_tick();
    n.dup_keepalive_tick();
    let kas = decoded(n.take_output());
    assert_eq!(
        kas.iter()
            .filter(|(_, _, m)| *m == Message::PpdupKeepalive)
            .count(),
        2
    );
}

/// Connects node `id` on connection `peer` with its CMD_UM_INIT; its routes are not in yet.
fn connect_node(m: &mut Multinode, peer: u64, id: &str) {
    m.peer_connected(peer);
    let init = Message::CmdUmInit(Init {
        node_id: b(id),
        xmlrpc_host: b("h"),
        xmlrpc_port: 1,
    });
    m.handle_message(peer, init, 0).unwrap();
}

/// Registers node `id` on connection `peer`, answering CMD_UM_ASK_ROUTE for "c" at once.
fn register_node(m: &mut Multinode, peer: u64, id: &str) {
    connect_node(m, peer, id);
    m.handle_message(
        peer,
        Message::CmdUmLastRoute(CollectionOnly { collection: b("c") }),
        0,
    )
    .unwrap();
}

/// Registers nodes n1 (peer 1) and n2 (peer 2).
fn register_two_nodes(m: &mut Multinode) {
    register_node(m, 1, "n1");
    register_node(m, 2, "n2");
}

#[test]
fn the_multinode_scheduler_removes_a_collection_after_every_delete_ok() {
    let dir = tmp("mn-remove");
    let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    m.add_collection(b"c", config(&["http://a.com/"], None))
        .unwrap();
    register_two_nodes(&mut m);
    assert_eq!(m.pump(0).unwrap(), 1);
    m.take_output();
    assert!(m.remove_collection(b"c").unwrap());
    let out = decoded(m.take_output());
    assert_eq!(
        out.iter()
            .filter(|(_, _, x)| matches!(x, Message::CmdAdmConfRemove(_)))
            .count(),
        2
    );
    assert_eq!(m.collections(), vec![(b"c".to_vec(), conf_state::REMOVING)]);
    // Re-adding while removing is refused (the zombie state).
    m.add_collection(b"c", config(&[], None)).unwrap();
    assert_eq!(m.collections(), vec![(b"c".to_vec(), conf_state::REMOVING)]);
    m.handle_message(
        1,
        Message::CmdUmDeleteOk(CollectionOnly { collection: b("c") }),
        0,
    )
    .unwrap();
    assert_eq!(m.collections().len(), 1, "n2 has not answered");
    // A node that disconnects no longer holds removal up.
    m.peer_closed(2).unwrap();
    assert!(m.collections().is_empty());
    assert_eq!(m.routing().count(b"c"), 0);
    drop(m);
    let m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    assert!(m.collections().is_empty(), "removal persists");
}

#[test]
fn relays_statistics_and_suspension() {
    let dir = tmp("mn-relay");
    let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    m.add_collection(b"c", config(&["http://www.a.com/"], None))
        .unwrap();
    register_two_nodes(&mut m);
    m.pump(0).unwrap();
    m.take_output();
    // A site operation goes to the node the site is routed to; a collection one to all.
    let q = Quarantine {
        collection: b("c"),
        site: b("www.a.com"),
        seconds: 5,
    };
    assert!(m.relay(&Message::CmdUmQuarantineSite(q)));
    let out = m.take_output();
    assert_eq!(out.sends.len(), 1);
    assert_eq!(
        out.sends[0].0, 1,
        "a.com was routed to n1 (fewest routes, smallest id)"
    );
    let r = ConfRefresh {
        collection: b("c"),
        subcollection: None,
        options: 2,
    };
    assert!(m.relay(&Message::CmdAdmConfRefresh(r)));
    assert_eq!(m.take_output().sends.len(), 2);
    assert!(!m.relay(&Message::CmdAdmConfRefresh(ConfRefresh {
        collection: b("nope"),
        subcollection: None,
        options: 2
    })));
    // Suspension reaches every node and a node registering later.
    assert!(m.set_suspended(b"c", Some(4)).unwrap());
    assert_eq!(m.take_output().sends.len(), 2);
    connect_node(&mut m, 3, "n3");
    let to3: Vec<_> = decoded(m.take_output())
        .into_iter()
        .map(|(_, _, x)| x.command())
        .collect();
    assert!(
        to3.contains(&crate::msg::Command::CmdAdmConfSuspend),
        "{to3:?}"
    );
    // 3.2.5.6: deltas add up, per collection and per node.
    for (peer, n) in [(1, 3), (2, 4), (1, 5)] {
        let s = Stat {
            collection: b("c"),
            stats: dict(vec![
                ("uris_queued", Value::int(n)),
                ("rate", Value::Float(0.5)),
            ]),
        };
        m.handle_message(peer, Message::CmdUmStat(s), 0).unwrap();
    }
    let st = m.statistics(b"c").unwrap();
    assert_eq!(st.get(b"uris_queued").and_then(Value::as_i64), Some(12));
    assert_eq!(st.get(b"rate").and_then(Value::as_f64), Some(1.5));
    assert_eq!(
        m.node_statistics(b"c", b"n1")
            .unwrap()
            .get(b"uris_queued")
            .and_then(Value::as_i64),
        Some(8)
    );
    let mut acc = dict(vec![("l", Value::list(vec![Value::int(1), Value::int(2)]))]);
    merge_stats(
        &mut acc,
        &dict(vec![
            ("l", Value::list(vec![Value::int(10), Value::int(20)])),
            ("new", Value::int(1)),
        ]),
    );
    assert_eq!(
        acc,
        dict(vec![
            ("l", Value::list(vec![Value::int(11), Value::int(22)])),
            ("new", Value::int(1))
        ])
    );
}

#[test]
fn queue_records_keep_the_urgent_mark() {
    let e = entry("http://a.com/");
    let r = super::record(&e, true);
    let (back, urgent) = parse_record(&r).unwrap();
    assert!(urgent);
    assert_eq!(back, e);
    assert!(parse_record(b"").is_err());
    assert!(parse_record(b"\x07junk").is_err());
}

#[test]
fn uris_forwarded_just_before_the_multinode_died_go_again_when_it_is_back() {
    let (mut n, _dir) = node("resend");
    n.multinode_connected();
    n.conf_add(b"c", config(&[], None)).unwrap();
    n.take_output();
    // A link to a site not routed here: forwarded (CMD_UM_URI carries no acknowledgement).
    assert!(n.add_uri(b"c", &entry("http://a.com/x"), false).unwrap());
    let forwarded = |out: Outbox<Dest>| -> Vec<Vec<u8>> {
        decoded(out)
            .into_iter()
            .filter_map(|(to, _, m)| match m {
                Message::CmdUmUri(u) if to == MN => Some(u.entry.uri.uri.to_vec()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(forwarded(n.take_output()), [b"http://a.com/x".to_vec()]);
    // The multinode scheduler dies before its queue sync; a URI arrives meanwhile (held by
    // the shell until the connection is back).
    n.multinode_closed();
    assert!(n.add_uri(b"c", &entry("http://b.com/y"), false).unwrap());
    assert_eq!(forwarded(n.take_output()), [b"http://b.com/y".to_vec()]);
    n.multinode_connected();
    assert_eq!(forwarded(n.take_output()), [b"http://a.com/x".to_vec()]);
    // Sent once again, not on every connection.
    n.multinode_closed();
    n.multinode_connected();
    assert!(forwarded(n.take_output()).is_empty());
}

#[test]
fn a_modified_document_keeps_its_new_checksum_after_remove_ok() {
    let (mut n, _dir) = node("remove-ok");
    let d = Dest::Dup("127.0.0.1:9".into());
    n.dup_connected("127.0.0.1:9");
    n.conf_add(b"c", config(&[], Some("127.0.0.1:9"))).unwrap();
    let fetched = |body: &[u8]| crate::crawl::Document {
        collection: b"c".to_vec(),
        uri: b"http://a.com/x".to_vec(),
        checksum: Checksum({
            use md5::Digest;
            md5::Md5::digest(body).into()
        }),
        status: 200,
        headers: Vec::new(),
        body: body.to_vec(),
        uri_flags: 0,
        redirected_from: Vec::new(),
        seq: 0,
    };
    let add_ok = || {
        Message::PpdupAddOk(PpdupAddOk {
            collection: b("c"),
            node_id: b("n1"),
            uri: b("http://a.com/x"),
            owner_uri: Some(b("http://a.com/x")),
            ppdup_id: None,
            dbname: None,
        })
    };
    let (v1, v2) = (fetched(b"one"), fetched(b"two"));
    let (old, new) = (v1.checksum, v2.checksum);
    assert_eq!(n.document(Box::new(v1)).unwrap(), None);
    n.handle_message(&d, add_ok(), 0).unwrap();
    assert_eq!(n.document(Box::new(v2)).unwrap(), None);
    n.handle_message(&d, add_ok(), 0).unwrap();
    let fates: Vec<_> = n.take_verdicts().into_iter().map(|v| v.fate).collect();
    assert_eq!(
        fates,
        [
            crate::sched::node::Fate::Added,
            crate::sched::node::Fate::Modified
        ]
    );
    // The old checksum is released with PPDUP_REMOVE (3.1.5.23); its answer (3.1.5.24) takes
    // the URI out of the database under that checksum only.
    let removes: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(_, _, m)| match m {
            Message::PpdupRemove(r) => Some(r.checksum),
            _ => None,
        })
        .collect();
    assert_eq!(removes, [old]);
    n.handle_message(
        &d,
        Message::PpdupRemoveOk(PpdupRemoveOk {
            collection: b("c"),
            uri: b("http://a.com/x"),
            node_id: None,
            ppdup_id: None,
            dbname: None,
        }),
        0,
    )
    .unwrap();
    assert!(n.checksum_owners(b"c", &old).is_empty());
    assert_eq!(
        n.checksum_owners(b"c", &new),
        vec![b"http://a.com/x".to_vec()]
    );
}

#[test]
fn one_lookup_per_host_when_routing_and_a_node_ask_at_once() {
    let dir = tmp("mn-dns-once");
    let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    m.add_collection(b"c", config(&["http://www.a.com/"], None))
        .unwrap();
    register_two_nodes(&mut m);
    // Routing the start URI's site looks its host up (for CMD_UM_ADD_ROUTE's addrinfo).
    m.pump(0).unwrap();
    let out = m.take_output();
    assert_eq!(out.lookups, ["www.a.com"]);
    // A node asks for the same host before the answer (3.2.5.4): no second lookup.
    let ask = DnsRequest {
        collection: b("c"),
        host: b("www.a.com"),
    };
    m.handle_message(1, Message::CmdUmDnsRequest(ask), 0)
        .unwrap();
    assert!(m.take_output().lookups.is_empty());
    // The answer goes to the node that asked.
    m.dns_resolved("www.a.com", None, 0);
    let replies: Vec<_> = decoded(m.take_output())
        .into_iter()
        .filter(|(_, _, x)| matches!(x, Message::CmdUmDnsReply(_)))
        .map(|(to, _, _)| to)
        .collect();
    assert_eq!(replies, [1]);
}

#[test]
fn questions_lost_with_the_multinode_are_asked_again_when_it_is_back() {
    let (mut n, _dir) = node("ask-again");
    n.multinode_connected();
    n.conf_add(b"c", config(&[], None)).unwrap();
    for u in [
        "http://10.0.0.1/a",
        "http://10.0.0.2/b",
        "http://www.a.com/c",
    ] {
        n.handle_message(&MN, uri("c", u), 0).unwrap();
    }
    n.dispatch(100, 1000).unwrap();
    n.handle_message(&MN, start_reply("c", "10.0.0.1", "10.0.0.1", true), 1000)
        .unwrap();
    n.take_output();
    // The multinode scheduler dies with the other two questions unanswered, and comes back
    // knowing nothing.
    n.multinode_closed();
    n.multinode_connected();
    let mut asked: Vec<String> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(_, _, m)| match m {
            Message::CmdUmStartCrawlIp(s) => {
                Some(format!("start {}", String::from_utf8_lossy(&s.site)))
            }
            Message::CmdUmDnsRequest(d) => {
                Some(format!("dns {}", String::from_utf8_lossy(&d.host)))
            }
            _ => None,
        })
        .collect();
    asked.sort();
    // The active site's lock is claimed again too (a restarted multinode has none).
    assert_eq!(asked, ["dns www.a.com", "start 10.0.0.1", "start 10.0.0.2"]);
}

/// The URIs forwarded in `out` as CMD_UM_URI, with the peer each went to.
fn forwarded_uris(out: Outbox<u64>) -> Vec<(u64, Vec<u8>)> {
    decoded(out)
        .into_iter()
        .filter_map(|(to, _, m)| match m {
            Message::CmdUmUri(u) => Some((to, u.entry.uri.uri.to_vec())),
            _ => None,
        })
        .collect()
}

fn uri_msg(uri: &str) -> Message<'static> {
    Message::CmdUmUri(UriMsg {
        collection: b("c"),
        entry: CrawlQueueEntry::new(UriStructure::unparsed(b(uri))),
    })
}

#[test]
fn a_routed_site_follows_its_node_to_a_new_connection() {
    // 3.2.5.5 step 2: an entry goes to the node its site is routed to, over that node's
    // connection as it is now (the pump remembers attribute -> connection between entries).
    let dir = tmp("mn-reconnect");
    let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    m.add_collection(b"c", config(&[], None)).unwrap();
    register_two_nodes(&mut m);
    for uri in ["http://www.a.com/1", "http://www.a.com/2"] {
        m.handle_message(2, uri_msg(uri), 0).unwrap();
    }
    m.pump(0).unwrap();
    let sent = forwarded_uris(m.take_output());
    assert_eq!(
        sent,
        vec![
            (1, b"http://www.a.com/1".to_vec()),
            (1, b"http://www.a.com/2".to_vec())
        ],
        "a.com routed to n1 (fewest routes, smallest id)"
    );
    // n1 goes away: its entries wait, none is sent to the closed connection.
    m.peer_closed(1).unwrap();
    m.take_output();
    m.handle_message(2, uri_msg("http://www.a.com/3"), 0)
        .unwrap();
    m.pump(0).unwrap();
    assert!(forwarded_uris(m.take_output()).is_empty());
    // n1 comes back on another connection: the route holds, the new connection gets them.
    register_node(&mut m, 7, "n1");
    m.handle_message(2, uri_msg("http://www.a.com/4"), 0)
        .unwrap();
    for _ in 0..3 {
        m.pump(0).unwrap();
    }
    let mut sent = forwarded_uris(m.take_output());
    sent.sort();
    assert_eq!(
        sent,
        vec![
            (7, b"http://www.a.com/3".to_vec()),
            (7, b"http://www.a.com/4".to_vec())
        ]
    );
}

/// `m` handed `msg` as the frame body it would arrive in.
fn handle_as_frame(m: &mut Multinode, peer: u64, msg: &Message<'_>) {
    let mut bytes = Vec::new();
    frame::encode_message(msg, Priority::Normal, &mut bytes);
    m.handle_frame(peer, &bytes[4..], 0).unwrap();
}

#[test]
fn an_entry_goes_straight_to_its_node_only_when_nothing_waits_before_it() {
    // 3.2.5.5: an entry is enqueued at the back of the crawl queue and forwarded when extracted.
    // With the queue empty and its site's node known, the multinode scheduler forwards it at
    // once; a new site, or entries already waiting, keep the queue's order.
    let dir = tmp("mn-direct");
    let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    m.add_collection(b"c", config(&[], None)).unwrap();
    register_node(&mut m, 1, "n1");
    m.take_output();
    // A new site waits for the pump's routing decision.
    handle_as_frame(&mut m, 1, &uri_msg("http://www.a.com/1"));
    assert!(forwarded_uris(m.take_output()).is_empty());
    m.pump(0).unwrap();
    let sent = forwarded_uris(m.take_output());
    assert_eq!(sent, vec![(1, b"http://www.a.com/1".to_vec())]);
    // Routed, queue empty: forwarded as it is handled.
    handle_as_frame(&mut m, 1, &uri_msg("http://www.a.com/2"));
    let sent = forwarded_uris(m.take_output());
    assert_eq!(sent, vec![(1, b"http://www.a.com/2".to_vec())]);
    // A new site queued first: the routed site's entry waits behind it.
    handle_as_frame(&mut m, 1, &uri_msg("http://www.b.com/1"));
    handle_as_frame(&mut m, 1, &uri_msg("http://www.a.com/3"));
    assert!(forwarded_uris(m.take_output()).is_empty());
    assert_eq!(m.pump(0).unwrap(), 2);
    let sent = forwarded_uris(m.take_output());
    assert_eq!(
        sent,
        vec![
            (1, b"http://www.b.com/1".to_vec()),
            (1, b"http://www.a.com/3".to_vec())
        ]
    );
    // While the node's routes are being rebuilt (a node registered and has not answered
    // CMD_UM_LAST_ROUTE), entries wait in the queue.
    connect_node(&mut m, 2, "n2");
    m.take_output();
    handle_as_frame(&mut m, 1, &uri_msg("http://www.a.com/4"));
    m.pump(0).unwrap();
    assert!(forwarded_uris(m.take_output()).is_empty());
    let last = Message::CmdUmLastRoute(CollectionOnly { collection: b("c") });
    m.handle_message(2, last, 0).unwrap();
    m.pump(0).unwrap();
    let sent = forwarded_uris(m.take_output());
    assert_eq!(sent, vec![(1, b"http://www.a.com/4".to_vec())]);
    let c = m.counters();
    assert_eq!((c.uris_received, c.uris_forwarded), (5, 5));
}

#[test]
fn frames_read_ahead_take_effect_in_wire_order() {
    // Multinode::handle_frames reads canonical CMD_UM_URI ahead of routing them; the result
    // must be exactly that of handling the frames one by one: the same frames to the same
    // nodes in the same order, the same counters.
    let frame_of = |m: &Message<'_>| {
        let mut bytes = Vec::new();
        frame::encode_message(m, Priority::Normal, &mut bytes);
        bytes[4..].to_vec()
    };
    let mut with_extra = entry("http://www.b.com/extra");
    with_extra.extra = vec![(Value::bytes(b"rss"), Value::bytes(b"1"))];
    let urgent = Message::CmdUmUriUrg(UriMsg {
        collection: b("c"),
        entry: entry("http://www.a.com/urgent"),
    });
    let mut batch: Vec<Vec<u8>> = Vec::new();
    for i in 0..40 {
        // Routed sites, a new one every few frames, and frames the read-ahead leaves alone.
        let site = ["www.a.com", "www.b.com", "x.a.com"][i % 3];
        batch.push(frame_of(&uri_msg(&format!("http://{site}/{i}"))));
        match i % 10 {
            // New sites late in the batch: what follows one waits in the queue behind it.
            3 if i >= 30 => batch.push(frame_of(&uri_msg(&format!("http://new{i}.org/")))),
            5 => batch.push(frame_of(&Message::CmdUmKeepalive)),
            6 => batch.push(frame_of(&Message::CmdUmUri(UriMsg {
                collection: b("c"),
                entry: with_extra.clone(),
            }))),
            7 => batch.push(frame_of(&uri_msg("mailto:someone@a.com"))),
            8 => batch.push(frame_of(&uri("unknown", "http://www.a.com/"))),
            9 => batch.push(frame_of(&urgent)),
            _ => {}
        }
    }
    // A node that connects within the batch: its frames are handled as they come.
    let init = frame_of(&Message::CmdUmInit(Init {
        node_id: b("n3"),
        xmlrpc_host: b("h"),
        xmlrpc_port: 1,
    }));
    let late = [
        init,
        frame_of(&Message::CmdUmLastRoute(CollectionOnly {
            collection: b("c"),
        })),
        frame_of(&uri_msg("http://www.a.com/late")),
    ];
    let run = |name: &str, read_ahead: bool| {
        let dir = tmp(name);
        let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
        m.add_collection(b"c", config(&[], None)).unwrap();
        register_two_nodes(&mut m);
        for u in [
            "http://www.a.com/0",
            "http://www.b.com/0",
            "http://x.a.com/0",
        ] {
            handle_as_frame(&mut m, 1, &uri_msg(u));
        }
        m.pump(0).unwrap();
        m.take_output();
        m.peer_connected(3);
        if read_ahead {
            m.handle_frames(1, batch.iter().map(Vec::as_slice), 0)
                .unwrap();
            m.handle_frames(3, late.iter().map(Vec::as_slice), 0)
                .unwrap();
        } else {
            for f in &batch {
                m.handle_frame(1, f, 0).unwrap();
            }
            for f in &late {
                m.handle_frame(3, f, 0).unwrap();
            }
        }
        let before_pump = decoded(m.take_output());
        while m.pump(0).unwrap() > 0 {}
        let after_pump = decoded(m.take_output());
        let c = m.counters();
        (
            before_pump,
            after_pump,
            (
                c.uris_received,
                c.uris_forwarded,
                c.uris_unroutable,
                c.bad_frames,
            ),
        )
    };
    let one_by_one = run("mn-ahead-1", false);
    let read_ahead = run("mn-ahead-2", true);
    // Routed sites went straight to their nodes as the frames were handled.
    assert!(
        forwarded(&one_by_one.0) >= 20,
        "{}",
        forwarded(&one_by_one.0)
    );
    assert!(one_by_one.2 .2 >= 4, "the mailto URIs are unroutable");
    assert_eq!(read_ahead, one_by_one);
}

fn forwarded(out: &[(u64, Priority, Message<'static>)]) -> usize {
    out.iter()
        .filter(|(_, _, m)| matches!(m, Message::CmdUmUri(_) | Message::CmdUmUriUrg(_)))
        .count()
}
