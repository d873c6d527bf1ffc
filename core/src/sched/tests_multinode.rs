//! The multinode scheduler's state machine driven message by message (MS-FSCMT 3.2.5): collection
//! removal with CMD_UM_DELETE_OK (3.2.5.14), relays and statistics aggregation (3.2.5.6), DNS
//! lookups (3.2.5.4), and the routing of CMD_UM_URI (3.2.5.5): straight to a known node, through
//! the queue otherwise, read ahead in wire order.

use super::*;

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
    // n1 comes back on another connection: the route holds, the new connection gets them,
    // and the two it never confirmed again (retain.rs).
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
            (7, b"http://www.a.com/1".to_vec()),
            (7, b"http://www.a.com/2".to_vec()),
            (7, b"http://www.a.com/3".to_vec()),
            (7, b"http://www.a.com/4".to_vec())
        ]
    );
}

#[test]
fn entries_a_node_did_not_confirm_are_routed_again_when_its_connection_closes() {
    // MS-FSCMT has no acknowledgement for CMD_UM_URI (2.2.3.3). A CMD_UM_KEEPALIVE goes behind
    // the entries forwarded since the last sync tick, and its CMD_UM_KEEPALIVE_ACK (3.2.5.3)
    // confirms them; entries unconfirmed when the connection closes are routed again.
    let dir = tmp("mn-retain");
    let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    m.add_collection(b"c", config(&[], None)).unwrap();
    register_node(&mut m, 1, "n1");
    m.take_output();
    for i in 1..=3 {
        handle_as_frame(&mut m, 1, &uri_msg(&format!("http://www.a.com/{i}")));
    }
    m.pump(0).unwrap();
    m.sync().unwrap();
    let out = decoded(m.take_output());
    let order: Vec<_> = out.iter().map(|(_, _, x)| x.command()).collect();
    use crate::msg::Command;
    assert_eq!(
        order.iter().rev().take(2).collect::<Vec<_>>(),
        vec![&Command::CmdUmKeepalive, &Command::CmdUmUri],
        "the keep-alive goes behind the entries: {order:?}"
    );
    assert_eq!(m.retained_count(1), 3);
    // An idle tick sends nothing more.
    m.sync().unwrap();
    assert!(decoded(m.take_output()).is_empty());
    // The answer confirms the three; two more are forwarded and never confirmed.
    m.handle_message(1, Message::CmdUmKeepaliveAck, 0).unwrap();
    assert_eq!(m.retained_count(1), 0);
    for i in 4..=5 {
        handle_as_frame(&mut m, 1, &uri_msg(&format!("http://www.a.com/{i}")));
    }
    assert_eq!(forwarded_uris(m.take_output()).len(), 2);
    m.sync().unwrap();
    m.take_output();
    m.peer_closed(1).unwrap();
    assert_eq!(m.counters().uris_requeued, 2);
    register_node(&mut m, 7, "n1");
    m.pump(0).unwrap();
    let mut sent = forwarded_uris(m.take_output());
    sent.sort();
    assert_eq!(
        sent,
        vec![
            (7, b"http://www.a.com/4".to_vec()),
            (7, b"http://www.a.com/5".to_vec())
        ]
    );
    // Sent again, they are kept again until the new connection confirms them.
    assert_eq!(m.retained_count(7), 2);
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

#[test]
fn a_refused_first_frame_closes_the_connection_and_drops_the_rest_of_its_read() {
    // 3.2.5.1: the first frame must be a CMD_UM_INIT. A connection whose first frame is not is
    // closed, and a CMD_UM_INIT that arrived in the same read behind it registers nothing.
    let dir = tmp("mn-refused-first");
    let mut m = Multinode::open(dir.path(), MultinodeOptions::default()).unwrap();
    m.peer_connected(9);
    let frames: Vec<Vec<u8>> = [
        Message::CmdUmKeepalive,
        Message::CmdUmInit(Init {
            node_id: b("sneaky"),
            xmlrpc_host: b("h"),
            xmlrpc_port: 1,
        }),
    ]
    .iter()
    .map(|msg| {
        let mut bytes = Vec::new();
        frame::encode_message(msg, Priority::Normal, &mut bytes);
        bytes[4..].to_vec()
    })
    .collect();
    m.handle_frames(9, frames.iter().map(Vec::as_slice), 0)
        .unwrap();
    let out = m.take_output();
    assert_eq!(out.closes, vec![9]);
    assert!(m.nodes().is_empty(), "registered {:?}", m.nodes());
    // A later read of the same connection (before its close takes effect) is dropped too.
    m.handle_frames(9, frames.iter().map(Vec::as_slice), 0)
        .unwrap();
    assert!(m.take_output().closes.is_empty());
    assert!(m.nodes().is_empty());
}
