//! The scheduler state machines driven message by message: the node scheduler's site manager
//! (3.1.5.21 START_CRAWL_IP with the 30-minute block and the 10-sites-per-IP rule), quarantine
//! (3.1.5.17-18), suspend (3.1.5.4), feeding (3.1.5.6), refresh (3.1.5.9), the duplicate-server
//! messages (3.1.5.22-27) and statistics (3.1.6). The multinode scheduler's tests (3.2.5) are in
//! `tests_multinode.rs`, sharing the helpers here.

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
    // The 13 entries now wait in memory, not in the queue; each record is held once (the
    // waiting entry's: the in-flight journal keeps its length).
    assert_eq!(n.queued(b"c"), Some((0, 0)));
    let (held, bytes) = n.queued_in_memory(b"c").unwrap();
    assert_eq!(held, 13);
    assert!(
        bytes > 13 * "http://10.0.0.1:8000/x".len() as u64,
        "{bytes}"
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
    assert_eq!(n.active_site_count(b"c"), 10);
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
    // Every site that ends closes its START_CRAWL_IP with a STOP_CRAWL_IP naming it
    // (2.2.4.12); the multinode scheduler frees the IP after the last one.
    n.take_output();
    for i in 0..10 {
        n.site_done(b"c", &format!("10.0.0.1:{}", 8000 + i))
            .unwrap();
    }
    let stops: Vec<_> = decoded(n.take_output())
        .into_iter()
        .filter_map(|(_, _, m)| match m {
            Message::CmdUmStopCrawlIp(s) => Some(String::from_utf8_lossy(&s.site).into_owned()),
            _ => None,
        })
        .collect();
    let want: Vec<String> = (0..10).map(|i| format!("10.0.0.1:{}", 8000 + i)).collect();
    assert_eq!(stops, want, "one STOP_CRAWL_IP per site that ends");
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
    assert_eq!(n.active_site_count(b"c"), 0);
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
fn a_keepalive_is_answered_once_the_uris_before_it_are_durable() {
    // MS-FSCMT 3.1.5.1: CMD_UM_KEEPALIVE is answered with CMD_UM_KEEPALIVE_ACK. The answer
    // waits for the next sync, so it confirms the CMD_UM_URI received before it (the
    // multinode scheduler keeps a copy of each until then).
    let (mut n, _dir) = node("keepalive");
    n.multinode_connected();
    n.conf_add(b"c", config(&[], None)).unwrap();
    n.take_output();
    let acks = |out: Outbox<Dest>| {
        decoded(out)
            .into_iter()
            .filter(|(to, _, m)| *to == MN && *m == Message::CmdUmKeepaliveAck)
            .count()
    };
    n.handle_message(&MN, uri("c", "http://www.example.com/a"), 0)
        .unwrap();
    n.handle_message(&MN, Message::CmdUmKeepalive, 0).unwrap();
    n.handle_message(&MN, Message::CmdUmKeepalive, 0).unwrap();
    assert_eq!(acks(n.take_output()), 0, "not before the sync");
    n.sync().unwrap();
    assert_eq!(acks(n.take_output()), 2, "one answer per keep-alive");
    n.sync().unwrap();
    assert_eq!(acks(n.take_output()), 0);
    // Keep-alives of a connection that closed are not answered on the next one.
    n.handle_message(&MN, Message::CmdUmKeepalive, 0).unwrap();
    n.multinode_closed();
    n.multinode_connected();
    n.sync().unwrap();
    assert_eq!(acks(n.take_output()), 0);
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

#[path = "tests_multinode.rs"]
mod multinode;

#[test]
fn unanswered_adds_go_again_when_a_duplicate_server_connects() {
    // A PPDUP_ADD whose connection closed before its PPDUP_ADD_OK (3.1.5.23) goes again after
    // the SET_CONFIG of the next connection (3.1.5.11), to the same server or to the replica
    // the shell failed over to: otherwise its document waits for an answer that never comes.
    let (mut n, _dir) = node("adds-again");
    let (server, replica) = ("198.18.0.21:14200", "198.18.0.22:14200");
    let list = |s: &str| Value::list(vec![Value::owned_bytes(s.as_bytes().to_vec())]);
    let cfg = dict(vec![
        ("start_uris", Value::list(Vec::new())),
        (
            "ppdup",
            dict(vec![
                ("dupservers", list(server)),
                ("replicas", list(replica)),
            ]),
        ),
    ]);
    n.dup_connected(server);
    n.conf_add(b"c", cfg).unwrap();
    assert_eq!(n.dup_replica(server).as_deref(), Some(replica));
    assert_eq!(n.dup_replica(replica), None);
    let doc = crate::crawl::Document {
        collection: b"c".to_vec(),
        uri: b"http://a.com/x".to_vec(),
        checksum: Checksum([9; 16]),
        status: 200,
        headers: Vec::new(),
        body: b"x".to_vec(),
        uri_flags: 0,
        redirected_from: Vec::new(),
        seq: 0,
    };
    assert_eq!(n.document(Box::new(doc)).unwrap(), None);
    n.take_output();
    let sent = |n: &mut NodeScheduler| -> Vec<String> {
        decoded(n.take_output())
            .into_iter()
            .filter_map(|(to, _, m)| match (to, m) {
                (Dest::Dup(a), Message::PpdupSetConfig(_)) => Some(format!("{a} SET_CONFIG")),
                (Dest::Dup(a), Message::PpdupAdd(c)) => {
                    Some(format!("{a} ADD {}", String::from_utf8_lossy(&c.uri)))
                }
                _ => None,
            })
            .collect()
    };
    n.dup_closed(server);
    n.dup_connected(server);
    assert_eq!(
        sent(&mut n),
        [
            format!("{server} SET_CONFIG"),
            format!("{server} ADD http://a.com/x")
        ]
    );
    // Answered: the document is fed, and the next connection sends only the configuration.
    let ok = PpdupAddOk {
        collection: b("c"),
        node_id: b("n1"),
        uri: b("http://a.com/x"),
        owner_uri: Some(b("http://a.com/x")),
        ppdup_id: None,
        dbname: None,
    };
    n.handle_message(&Dest::Dup(server.into()), Message::PpdupAddOk(ok), 0)
        .unwrap();
    let fates: Vec<_> = n.take_verdicts().into_iter().map(|v| v.fate).collect();
    assert_eq!(fates, [crate::sched::node::Fate::Added]);
    n.dup_closed(server);
    n.dup_connected(server);
    assert_eq!(sent(&mut n), [format!("{server} SET_CONFIG")]);
}

/// A collection whose variable_delay suspends it now reads as state 8 (MS-FSCADM 2.2.3.3,
/// "Variable delay suspended" in 2.2.5); without the period, as its own state.
#[test]
fn a_collection_suspended_by_its_variable_delay_reports_state_8() {
    let (mut n, _dir) = node("vdelay");
    n.conf_add(b"plain", config(&[], None)).unwrap();
    let mut suspended = config(&[], None);
    if let Value::Dict(pairs) = &mut suspended {
        pairs.push((
            Value::owned_bytes(b"variable_delay".to_vec()),
            dict(vec![(
                "Mon-Sun:0-24",
                Value::owned_bytes(b"suspend".to_vec()),
            )]),
        ));
    }
    n.conf_add(b"night", suspended).unwrap();
    assert_eq!(n.reported_state(b"plain"), Some(conf_state::ACTIVE));
    assert_eq!(
        n.reported_state(b"night"),
        Some(conf_state::SUSPENDED_VARIABLE_DELAY)
    );
}
