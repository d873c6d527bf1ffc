//! The sequencing rules of MS-FSCMT 3.3.5 and 3.4.5 (figures 12-16), peer by peer.

use std::borrow::Cow;

use super::*;
use crate::marshal::{Limits, Value};
use crate::msg::{Key, MessageError, PpdupChecksum};
use tempfile::TempDir;

pub(super) const NODE_A: PeerId = 1;
pub(super) const NODE_B: PeerId = 2;
pub(super) const REPLICA: PeerId = 9;

/// A server on a fresh store in a scratch directory, which lives as long as the guard.
pub(super) fn server(name: &str, mode: Mode, with_replica: bool) -> (DupServer, TempDir) {
    let dir = TempDir::with_prefix(format!("crawlfleet-dupsm-{name}-")).unwrap();
    let (stores, _) = DupStores::open(dir.path(), 4).unwrap();
    let mut s = DupServer::new(mode, b"dup-1", stores, with_replica);
    s.peer_connected(NODE_A);
    s.peer_connected(NODE_B);
    (s, dir)
}

pub(super) fn b(s: &str) -> Bytes<'static> {
    Cow::Owned(s.as_bytes().to_vec())
}

pub(super) fn cs(i: u8) -> Checksum {
    Checksum([i; 16])
}

pub(super) fn set_config(coll: &str, vc: i64) -> Message<'static> {
    Message::PpdupSetConfig(PpdupSetConfig {
        config: Value::Dict(vec![(
            Value::owned_bytes(coll.as_bytes().to_vec()),
            Value::Dict(vec![(Value::bytes(b"compact"), Value::int(1))]),
        )]),
        vclock: vc,
        collection: Some(b(coll)),
    })
}

pub(super) fn add(coll: &str, node: &str, uri: &str, c: Checksum) -> Message<'static> {
    Message::PpdupAdd(PpdupChecksum {
        collection: b(coll),
        node_id: b(node),
        uri: b(uri),
        checksum: c,
        ppdup_id: None,
        dbname: None,
    })
}

pub(super) fn remove(coll: &str, node: &str, uri: &str, c: Checksum) -> Message<'static> {
    match add(coll, node, uri, c) {
        Message::PpdupAdd(x) => Message::PpdupRemove(x),
        _ => unreachable!(),
    }
}

/// Everything sent since the last call, decoded, one entry per frame.
pub(super) fn sent(s: &mut DupServer) -> Vec<(PeerId, Message<'static>)> {
    decoded(s.flush().unwrap())
}

/// `(peer, frames)` entries decoded, one entry per frame.
fn decoded(entries: Vec<(PeerId, Vec<u8>)>) -> Vec<(PeerId, Message<'static>)> {
    let mut out = Vec::new();
    for (p, frames) in entries {
        let mut rest = &frames[..];
        while !rest.is_empty() {
            let (body, used) = frame::split(rest, &Limits::default()).unwrap().unwrap();
            let (_, m) = frame::decode_message(body, &Limits::default()).unwrap();
            out.push((p, m.into_owned()));
            rest = &rest[used..];
        }
    }
    out
}

pub(super) fn add_ok(coll: &str, node: &str, uri: &str, owner: &str) -> Message<'static> {
    Message::PpdupAddOk(PpdupAddOk {
        collection: b(coll),
        node_id: b(node),
        uri: b(uri),
        owner_uri: Some(b(owner)),
        ppdup_id: None,
        dbname: None,
    })
}

#[test]
fn set_config_is_acknowledged_at_once_with_the_vector_clock() {
    // 3.3.5.1 steps 1-2 (figure 12, without a replica).
    let (mut s, _dir) = server("setconfig", Mode::Server, false);
    s.handle_message(NODE_A, set_config("example", 7));
    assert_eq!(
        sent(&mut s),
        vec![(
            NODE_A,
            Message::PpdupConfigAck(PpdupConfigAck { vclock: 7 })
        )]
    );
    assert!(s.stores().collection(b"example").is_some());
}

#[test]
fn the_first_adder_owns_and_every_add_ok_names_the_owner() {
    // 3.3.5.4 without a replica (figure 14).
    let (mut s, _dir) = server("owner", Mode::Server, false);
    s.handle_message(NODE_A, set_config("c", 1));
    sent(&mut s);
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    s.handle_message(NODE_B, add("c", "nb", "http://b/", cs(1)));
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    assert_eq!(
        sent(&mut s),
        vec![
            (NODE_A, add_ok("c", "na", "http://a/", "http://a/")),
            (NODE_B, add_ok("c", "nb", "http://b/", "http://a/")),
            (NODE_A, add_ok("c", "na", "http://a/", "http://a/")),
        ]
    );
}

#[test]
fn bad_input_is_answered_with_ppdup_error_naming_the_problem() {
    let (mut s, _dir) = server("errors", Mode::Server, false);
    s.handle_message(NODE_A, add("nope", "na", "http://a/", cs(1)));
    let out = sent(&mut s);
    assert_eq!(
        out,
        vec![(
            NODE_A,
            Message::PpdupError(PpdupError {
                collection: b("nope"),
                why: b("unknown collection")
            })
        )]
    );
    // A checksum that is not 16 bytes, and a missing key, as raw frames.
    s.handle_message(NODE_A, set_config("c", 1));
    sent(&mut s);
    let frame_of = |pairs: Vec<(&'static str, Value<'static>)>| {
        let d: crate::marshal::Dict<'static> = pairs
            .into_iter()
            .map(|(k, v)| (Value::bytes(k.as_bytes()), v))
            .collect();
        let mut out = Vec::new();
        frame::encode_dict(&d, Priority::Normal, &mut out);
        out
    };
    let short = frame_of(vec![
        ("cm", Value::int(52)),
        ("dn", Value::bytes(b"c")),
        ("id", Value::bytes(b"na")),
        ("ur", Value::bytes(b"u")),
        ("cs", Value::bytes(b"0123")),
    ]);
    s.handle_frame(NODE_A, &short[4..]).expect("a valid frame");
    let missing = frame_of(vec![("cm", Value::int(52)), ("dn", Value::bytes(b"c"))]);
    s.handle_frame(NODE_B, &missing[4..])
        .expect("a valid frame");
    let out = sent(&mut s);
    assert_eq!(out.len(), 2);
    let why = |m: &Message<'_>| match m {
        Message::PpdupError(e) => String::from_utf8_lossy(&e.why).into_owned(),
        other => panic!("{other:?}"),
    };
    assert!(why(&out[0].1).contains("PKT_CSUM"), "{}", why(&out[0].1));
    assert_eq!(
        why(&out[1].1),
        MessageError::MissingKey(Key::Id).to_string()
    );
    assert_eq!(out[1].0, NODE_B);
}

/// The shell cuts frames by their length only (MS-FSCMT 2.2.1), so a body that is not a marshal
/// `(dict, priority)` reaches `handle_frames`: it is the error returned (the shell closes the
/// connection on it), what came before it is answered, and nothing after it is handled.
#[test]
fn an_invalid_frame_ends_the_socket_read_and_is_the_shells_to_close_on() {
    let (mut s, _dir) = server("invalid", Mode::Server, false);
    s.handle_message(NODE_A, set_config("c", 1));
    sent(&mut s);
    let frame = |m: &Message<'_>| {
        let mut out = Vec::new();
        frame::encode_message(m, Priority::Normal, &mut out);
        out
    };
    let first = frame(&add("c", "na", "http://a/", cs(1)));
    let after = frame(&add("c", "na", "http://b/", cs(2)));
    let bodies: [&[u8]; 3] = [&first[4..], b"\xffjunk", &after[4..]];
    let e = s.handle_frames(NODE_A, bodies, 4096).unwrap_err();
    assert!(matches!(e, FrameError::Marshal(_)), "{e:?}");
    assert_eq!(
        sent(&mut s),
        vec![(NODE_A, add_ok("c", "na", "http://a/", "http://a/"))]
    );
    assert_eq!(s.counters().adds, 1);
    // A valid frame that is not a message for this role is refused with PPDUP_ERROR instead.
    let promote = frame(&Message::PpdupPromoteReq(PpdupPromoteReq {
        collection: b("c"),
        checksum: cs(1),
    }));
    s.handle_frames(NODE_A, [&promote[4..]], 64)
        .expect("a valid frame");
    assert!(matches!(
        &sent(&mut s)[..],
        [(NODE_A, Message::PpdupError(_))]
    ));
}

/// Every answer to a window of adds leaves in one buffer per node, as the shell hands it to
/// the connection, byte for byte what the general encoder writes.
#[test]
fn a_windows_answers_share_one_buffer_per_node() {
    let (mut s, _dir) = server("window", Mode::Server, false);
    s.handle_message(NODE_A, set_config("c", 1));
    s.handle_message(NODE_B, set_config("c", 2));
    sent(&mut s);
    let mut wire = Vec::new();
    let mut ends = Vec::new();
    for i in 0..100u8 {
        let uri = format!("http://a/{i}");
        // Every fourth add repeats the checksum of the one before.
        let m = add("c", "na", &uri, cs(i - u8::from(i % 4 == 3)));
        frame::encode_message(&m, Priority::Normal, &mut wire);
        ends.push(wire.len());
    }
    let bodies = ends.iter().scan(0, |start, &end| {
        let body = &wire[*start + 4..end];
        *start = end;
        Some(body)
    });
    s.handle_frames(NODE_A, bodies, wire.len())
        .expect("valid frames");
    let out = s.flush().unwrap();
    assert_eq!(out.len(), 1, "one buffer for the node");
    let mut expected = Vec::new();
    for i in 0..100u8 {
        let uri = format!("http://a/{i}");
        let owner = format!("http://a/{}", i - u8::from(i % 4 == 3));
        let ok = add_ok("c", "na", &uri, &owner);
        frame::encode_dict(&ok.to_dict(), Priority::Normal, &mut expected);
    }
    assert_eq!(out[0], (NODE_A, expected));
}

#[test]
fn remove_by_the_owner_promotes_on_every_node_of_the_collection() {
    // 3.3.5.5 (figure 16, without a replica).
    let (mut s, _dir) = server("remove", Mode::Server, false);
    s.peer_connected(3);
    s.handle_message(NODE_A, set_config("c", 1));
    s.handle_message(NODE_B, set_config("c", 1));
    s.handle_message(3, set_config("other", 1));
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    s.handle_message(NODE_B, add("c", "nb", "http://b/", cs(1)));
    sent(&mut s);
    // Not the owner: answered, nothing changes, nobody promoted.
    s.handle_message(NODE_B, remove("c", "nb", "http://b/", cs(1)));
    let out = sent(&mut s);
    assert_eq!(out.len(), 1);
    assert!(matches!(out[0], (NODE_B, Message::PpdupRemoveOk(_))));
    assert!(s
        .stores()
        .collection(b"c")
        .unwrap()
        .store
        .get(&cs(1))
        .is_some());
    // The owner: removed, PROMOTE_REQ to both nodes of "c" (not to the node of "other").
    s.handle_message(NODE_A, remove("c", "na", "http://a/", cs(1)));
    let mut out = sent(&mut s);
    out.sort_by_key(|(p, m)| (*p, m.command() as i64));
    let promote = Message::PpdupPromoteReq(PpdupPromoteReq {
        collection: b("c"),
        checksum: cs(1),
    });
    assert_eq!(out.len(), 3, "{out:?}");
    assert_eq!(out[1], (NODE_A, promote.clone()));
    assert_eq!(out[2], (NODE_B, promote));
    assert!(matches!(&out[0], (NODE_A, Message::PpdupRemoveOk(r)) if &r.uri[..] == b"http://a/"));
    assert!(s
        .stores()
        .collection(b"c")
        .unwrap()
        .store
        .get(&cs(1))
        .is_none());
}

#[test]
fn a_peer_reconnected_under_its_number_is_promoted_for_the_collection_it_adds_to_again() {
    // The collection a peer's messages were admitted for last is checked again once the peer
    // comes back: the new connection's collections (3.3.5.5 step 5) include it.
    let (mut s, _dir) = server("readmit", Mode::Server, false);
    s.handle_message(NODE_A, set_config("c", 1));
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    s.peer_closed(NODE_A);
    s.peer_connected(NODE_A);
    s.handle_message(NODE_A, add("c", "na", "http://a/2", cs(2)));
    sent(&mut s);
    s.handle_message(NODE_A, remove("c", "na", "http://a/", cs(1)));
    let out = sent(&mut s);
    assert!(
        out.iter()
            .any(|(p, m)| *p == NODE_A && matches!(m, Message::PpdupPromoteReq(_))),
        "{out:?}"
    );
}

#[test]
fn conf_remove_discards_messages_until_conf_remove2() {
    // 3.3.5.2 and 3.3.5.3 (figure 13).
    let (mut s, _dir) = server("confremove", Mode::Server, false);
    s.handle_message(NODE_A, set_config("c", 1));
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    sent(&mut s);
    s.handle_message(
        NODE_A,
        Message::PpdupConfRemove(PpdupConfRemove {
            collection: b("c"),
            ppdup_id: None,
        }),
    );
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(2)));
    assert_eq!(
        sent(&mut s),
        vec![],
        "discarded while the removal is in progress"
    );
    assert!(s.stores().collection(b"c").is_none());
    s.handle_message(
        NODE_A,
        Message::PpdupConfRemove2(crate::msg::CollectionOnly { collection: b("c") }),
    );
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(2)));
    assert!(matches!(
        sent(&mut s)[..],
        [(NODE_A, Message::PpdupError(_))]
    ));
}

#[test]
fn with_a_replica_a_new_checksum_is_answered_after_the_replicas_add_ok() {
    // 3.3.5.1 step 3 and 3.3.5.4 with a replica (figures 12 and 14).
    let (mut s, _dir) = server("replica", Mode::Server, true);
    s.replica_connected(REPLICA);
    sent(&mut s); // empty resync
    s.handle_message(NODE_A, set_config("c", 5));
    assert_eq!(
        sent(&mut s),
        vec![(
            NODE_A,
            Message::PpdupConfigAck(PpdupConfigAck { vclock: 5 })
        )],
        "acknowledged at once; the replica gets it with the next checksum message"
    );
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    s.handle_message(NODE_B, add("c", "nb", "http://b/", cs(1)));
    let out = sent(&mut s);
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(matches!(&out[0], (REPLICA, Message::PpdupSetConfig(sc)) if sc.vclock > 0));
    match &out[1] {
        (REPLICA, Message::PpdupAdd(fwd)) => {
            assert_eq!(fwd.ppdup_id.as_deref(), Some(&b"dup-1"[..]));
            assert!(fwd.dbname.is_some());
            assert_eq!(&fwd.uri[..], b"http://a/");
        }
        other => panic!("{other:?}"),
    }
    // The replica acknowledges: node A is answered, then node B's queued add.
    s.handle_message(REPLICA, ok_of(&out[1].1));
    assert_eq!(
        sent(&mut s),
        vec![
            (NODE_A, add_ok("c", "na", "http://a/", "http://a/")),
            (NODE_B, add_ok("c", "nb", "http://b/", "http://a/")),
        ]
    );
    // A stale CONFIG_ACK is ignored; the current one ends the transition.
    let awaited = s.replica.as_ref().unwrap().awaiting_ack.unwrap();
    s.handle_message(
        REPLICA,
        Message::PpdupConfigAck(PpdupConfigAck {
            vclock: awaited - 1,
        }),
    );
    assert_eq!(s.replica.as_ref().unwrap().awaiting_ack, Some(awaited));
    s.handle_message(
        REPLICA,
        Message::PpdupConfigAck(PpdupConfigAck { vclock: awaited }),
    );
    assert_eq!(s.replica.as_ref().unwrap().awaiting_ack, None);
}

#[test]
fn the_replica_overwrites_forwarded_adds_and_serves_nodes_directly() {
    // 3.4.5.3; and failover: a node's own PPDUP_ADD makes the replica act as the server.
    let (mut r, _dir) = server("replica-side", Mode::Replica, false);
    r.handle_message(REPLICA, set_config("c", 1));
    sent(&mut r);
    let mut fwd = add("c", "na", "http://a/", cs(1));
    if let Message::PpdupAdd(x) = &mut fwd {
        x.ppdup_id = Some(b("dup-1"));
        x.dbname = Some(b("/data/c"));
    }
    r.handle_message(REPLICA, fwd);
    let out = sent(&mut r);
    match &out[..] {
        [(REPLICA, Message::PpdupAddOk(ok))] => {
            assert_eq!(ok.ppdup_id.as_deref(), Some(&b"dup-1"[..]));
            assert_eq!(ok.dbname.as_deref(), Some(&b"/data/c"[..]));
        }
        other => panic!("{other:?}"),
    }
    r.handle_message(NODE_B, add("c", "nb", "http://b/", cs(1)));
    assert_eq!(
        sent(&mut r),
        vec![(NODE_B, add_ok("c", "nb", "http://b/", "http://a/"))]
    );
}

#[test]
fn keepalives_are_answered_and_sent_on_the_timer() {
    let (mut s, _dir) = server("keepalive", Mode::Server, false);
    s.handle_message(NODE_A, Message::PpdupKeepalive);
    assert_eq!(sent(&mut s), vec![(NODE_A, Message::PpdupKeepaliveAck)]);
    s.keepalive_tick();
    let mut out = sent(&mut s);
    out.sort_by_key(|(p, _)| *p);
    assert_eq!(
        out,
        vec![
            (NODE_A, Message::PpdupKeepalive),
            (NODE_B, Message::PpdupKeepalive)
        ]
    );
    s.handle_message(NODE_A, Message::PpdupKeepaliveAck);
    assert!(!s.peers[&NODE_A].keepalive_pending);
    assert!(s.peers[&NODE_B].keepalive_pending);
}

#[test]
fn a_reconnecting_replica_is_resynchronized_in_full() {
    let (mut s, _dir) = server("resync", Mode::Server, true);
    s.handle_message(NODE_A, set_config("c", 1));
    for i in 0..10 {
        s.handle_message(NODE_A, add("c", "na", &format!("http://a/{i}"), cs(i)));
    }
    sent(&mut s); // no replica yet: answered alone
    s.replica_connected(REPLICA);
    let out = sent(&mut s);
    assert!(out.iter().all(|(p, _)| *p == REPLICA));
    assert!(matches!(out[0].1, Message::PpdupConfRemove(_)));
    assert!(matches!(out[1].1, Message::PpdupSetConfig(_)));
    assert_eq!(
        out.iter()
            .filter(|(_, m)| matches!(m, Message::PpdupAdd(_)))
            .count(),
        10
    );
    // Their ADD_OKs wake nobody.
    for _ in 0..10 {
        s.handle_message(REPLICA, add_ok("c", "na", "x", "x"));
    }
    assert_eq!(sent(&mut s), vec![]);
}

#[test]
fn acknowledged_adds_survive_a_restart() {
    let (mut s, dir) = server("durable", Mode::Server, false);
    s.handle_message(NODE_A, set_config("c", 1));
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    assert_eq!(sent(&mut s).len(), 2);
    drop(s);
    // Reopen the same directory.
    let (stores, rec) = DupStores::open(dir.path(), 4).unwrap();
    assert_eq!(rec.entries, 1);
    assert_eq!(
        stores.collection(b"c").unwrap().store.get(&cs(1)),
        Some((&b"http://a/"[..], &b"na"[..]))
    );
}

#[test]
fn forwards_leave_before_the_local_commit_and_answers_wait_for_it_and_the_replica() {
    // 3.3.5.4: the node is answered only after the replica's PPDUP_ADD_OK; our own rule: and only
    // after the local log is durable. The forward itself need not wait for the local commit.
    let (mut s, _dir) = server("early-forward", Mode::Server, true);
    s.replica_connected(REPLICA);
    sent(&mut s);
    s.handle_message(NODE_A, set_config("c", 5));
    sent(&mut s);
    let before = s.write_log().unwrap().sync.len();
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    let out = s.write_log().unwrap();
    let add_batch = out.batch;
    assert!(out.after_sync.is_empty(), "nothing answered before the _OK");
    assert!(
        out.sync.len() > before,
        "the add is in the log the sync covers"
    );
    let now = decoded(out.now);
    assert_eq!(now.len(), 2, "{now:?}");
    assert!(matches!(&now[0], (REPLICA, Message::PpdupSetConfig(_))));
    let (REPLICA, Message::PpdupAdd(fwd)) = now[1].clone() else {
        panic!("{now:?}")
    };
    s.handle_message(
        REPLICA,
        Message::PpdupAddOk(PpdupAddOk {
            collection: fwd.collection,
            node_id: fwd.node_id,
            uri: fwd.uri,
            owner_uri: None,
            ppdup_id: fwd.ppdup_id,
            dbname: fwd.dbname,
        }),
    );
    // Another node's add is logged in the batch that brings the replica's _OK.
    s.handle_message(NODE_B, add("c", "nb", "http://b/", cs(2)));
    let out = s.write_log().unwrap();
    assert!(out.batch > add_batch);
    assert!(out.after_sync.is_empty());
    let (batches, answers): (Vec<u64>, Vec<_>) = out
        .after_batch
        .into_iter()
        .map(|(b, p, f)| (b, (p, f)))
        .unzip();
    assert_eq!(
        batches,
        vec![add_batch],
        "the answer waits for the sync point of the batch that logged the add, not for this one"
    );
    assert_eq!(
        decoded(answers),
        vec![(NODE_A, add_ok("c", "na", "http://a/", "http://a/"))]
    );
    let now = decoded(out.now);
    assert!(
        matches!(&now[..], [(REPLICA, Message::PpdupAdd(_))]),
        "{now:?}"
    );
}

#[test]
fn held_answers_go_out_in_order_when_the_replica_is_lost_and_conf_remove_drops_its_own() {
    // 3.3.5.4 with the replica gone: the local log has every add, so what waited is answered;
    // 3.3.5.2: a removed collection's held answers are discarded with it.
    let (mut s, _dir) = server("lost-replica", Mode::Server, true);
    s.replica_connected(REPLICA);
    sent(&mut s);
    s.handle_message(NODE_A, set_config("c", 1));
    s.handle_message(NODE_A, set_config("d", 2));
    sent(&mut s);
    s.handle_message(NODE_A, add("c", "na", "http://a/1", cs(1)));
    s.handle_message(NODE_B, add("c", "nb", "http://b/1", cs(1))); // waits behind
    s.handle_message(NODE_A, add("d", "na", "http://a/2", cs(2)));
    let out = sent(&mut s);
    assert!(out.iter().all(|(p, _)| *p == REPLICA), "{out:?}");
    s.handle_message(
        NODE_A,
        Message::PpdupConfRemove(PpdupConfRemove {
            collection: b("d"),
            ppdup_id: None,
        }),
    );
    sent(&mut s);
    s.peer_closed(REPLICA);
    assert_eq!(
        sent(&mut s),
        vec![
            (NODE_A, add_ok("c", "na", "http://a/1", "http://a/1")),
            (NODE_B, add_ok("c", "nb", "http://b/1", "http://a/1")),
        ]
    );
}

#[test]
fn a_replica_nodes_failed_over_to_keeps_its_checksums_through_the_servers_resync() {
    // Failover (module docs): the replica answers a node itself; then the server comes back and
    // resynchronizes it in full (PPDUP_CONF_REMOVE, SET_CONFIG, every entry it holds). What the
    // replica acknowledged alone stays, with its owner (3.3.5.4), beside the server's entries.
    let (mut r, _dir) = server("replica-resync", Mode::Replica, false);
    let from_server = |m: Message<'static>| match m {
        Message::PpdupAdd(mut x) => {
            x.ppdup_id = Some(b("dup-1"));
            Message::PpdupAdd(x)
        }
        other => other,
    };
    let answers = |r: &mut DupServer| -> Vec<(PeerId, Message<'static>)> {
        sent(r)
            .into_iter()
            .filter(|(_, m)| matches!(m, Message::PpdupAddOk(_)))
            .collect()
    };
    r.handle_message(REPLICA, set_config("c", 1));
    r.handle_message(REPLICA, from_server(add("c", "na", "http://a/", cs(1))));
    sent(&mut r);
    // The node fails over to the replica.
    r.handle_message(NODE_B, set_config("c", 1));
    r.handle_message(NODE_B, add("c", "nb", "http://b/", cs(2)));
    assert_eq!(
        answers(&mut r),
        vec![(NODE_B, add_ok("c", "nb", "http://b/", "http://b/"))]
    );
    // The server is back.
    r.handle_message(
        REPLICA,
        Message::PpdupConfRemove(PpdupConfRemove {
            collection: b("c"),
            ppdup_id: Some(b("dup-1")),
        }),
    );
    r.handle_message(REPLICA, set_config("c", 2));
    r.handle_message(REPLICA, from_server(add("c", "na", "http://a/", cs(1))));
    sent(&mut r);
    r.handle_message(NODE_A, add("c", "na", "http://a2/", cs(1)));
    r.handle_message(NODE_A, add("c", "na", "http://b2/", cs(2)));
    assert_eq!(
        answers(&mut r),
        vec![
            (NODE_A, add_ok("c", "na", "http://a2/", "http://a/")),
            (NODE_A, add_ok("c", "na", "http://b2/", "http://b/")),
        ]
    );
}

/// The replica's _OK for a forwarded PPDUP_ADD.
pub(super) fn ok_of(fwd: &Message<'static>) -> Message<'static> {
    let Message::PpdupAdd(fwd) = fwd.clone() else {
        panic!("{fwd:?}")
    };
    Message::PpdupAddOk(PpdupAddOk {
        collection: fwd.collection,
        node_id: fwd.node_id,
        uri: fwd.uri,
        owner_uri: None,
        ppdup_id: fwd.ppdup_id,
        dbname: fwd.dbname,
    })
}

#[test]
fn the_replicas_lag_is_the_batch_time_of_the_oldest_unacknowledged_forward() {
    use std::time::Duration;
    let (mut s, _dir) = server("lag", Mode::Server, true);
    assert_eq!(s.replica_oldest_pending(), None, "nothing forwarded");
    s.replica_connected(REPLICA);
    sent(&mut s);
    s.handle_message(NODE_A, set_config("c", 1));
    sent(&mut s);
    // Two batches: checksums 1 and 2 at t0, checksum 3 at t1.
    let t0 = Instant::now();
    let t1 = t0 + Duration::from_secs(3);
    s.set_clock(t0);
    s.handle_message(NODE_A, add("c", "na", "http://a/1", cs(1)));
    s.handle_message(NODE_A, add("c", "na", "http://a/2", cs(2)));
    s.set_clock(t1);
    s.handle_message(NODE_B, add("c", "nb", "http://b/3", cs(3)));
    let fwds: Vec<Message<'static>> = sent(&mut s)
        .into_iter()
        .filter(|(p, m)| *p == REPLICA && matches!(m, Message::PpdupAdd(_)))
        .map(|(_, m)| m)
        .collect();
    assert_eq!(fwds.len(), 3);
    assert_eq!(s.replica_lag(), Some((true, 3)));
    assert_eq!(s.replica_oldest_pending(), Some(t0));
    // One _OK: the first batch still has a forward pending.
    s.handle_message(REPLICA, ok_of(&fwds[0]));
    assert_eq!(s.replica_oldest_pending(), Some(t0));
    s.handle_message(REPLICA, ok_of(&fwds[1]));
    assert_eq!(
        s.replica_oldest_pending(),
        Some(t1),
        "the next batch's time"
    );
    s.handle_message(REPLICA, ok_of(&fwds[2]));
    assert_eq!(s.replica_oldest_pending(), None, "every forward answered");
    assert_eq!(s.replica_lag(), Some((true, 0)));

    // A resynchronization counts as forwards of its batch; losing the replica forgets them.
    let t2 = t1 + Duration::from_secs(1);
    s.set_clock(t2);
    s.replica_connected(REPLICA + 1);
    assert_eq!(s.replica_oldest_pending(), Some(t2), "three entries resent");
    s.peer_closed(REPLICA + 1);
    assert_eq!(s.replica_oldest_pending(), None);

    // A replica's own figure: it forwards nowhere.
    let (replica, _rdir) = server("lag-replica", Mode::Replica, false);
    assert_eq!(replica.replica_oldest_pending(), None);
}

/// Frames read from the wire (the borrowed view of PPDUP_ADD and its kin, straight to the
/// handlers) and the same messages handed over typed give the same frames out: the forwards to
/// the replica (but for the data directory each names), the answers its _OKs release byte for
/// byte, a remove of a checksum the node does not own.
#[test]
fn frames_from_the_wire_are_handled_as_the_typed_messages() {
    let frame = |m: &Message<'_>| {
        let mut out = Vec::new();
        frame::encode_message(m, Priority::Normal, &mut out);
        out
    };
    let (mut typed, _d1) = server("typed", Mode::Server, true);
    let (mut wire, _d2) = server("wire", Mode::Server, true);
    for s in [&mut typed, &mut wire] {
        s.replica_connected(REPLICA);
        s.handle_message(NODE_A, set_config("c", 5));
        s.handle_message(NODE_B, set_config("c", 6));
    }
    assert_eq!(typed.flush().unwrap(), wire.flush().unwrap());
    let steps = [
        (NODE_A, add("c", "na", "http://a/1", cs(1))),
        (NODE_B, add("c", "nb", "http://b/1", cs(1))),
        (NODE_A, add("c", "na", "http://a/2", cs(2))),
        (NODE_B, remove("c", "nb", "http://b/9", cs(9))),
    ];
    for (peer, m) in &steps {
        typed.handle_message(*peer, m.clone());
        let f = frame(m);
        wire.handle_frames(*peer, [&f[4..]], f.len()).unwrap();
    }
    let (a, b) = (typed.flush().unwrap(), wire.flush().unwrap());
    assert_eq!(same_dir(&a), same_dir(&b));
    // The replica answers each forward (3.4.5.3): the node is answered, then what waited.
    let forwards: Vec<Message<'static>> = decoded(a)
        .into_iter()
        .filter(|(p, m)| *p == REPLICA && matches!(m, Message::PpdupAdd(_)))
        .map(|(_, m)| m)
        .collect();
    assert_eq!(forwards.len(), 2, "{forwards:?}");
    for fwd in &forwards {
        let ok = ok_of(fwd);
        typed.handle_message(REPLICA, ok.clone());
        let f = frame(&ok);
        wire.handle_frames(REPLICA, [&f[4..]], f.len()).unwrap();
    }
    let (a, b) = (typed.flush().unwrap(), wire.flush().unwrap());
    assert_eq!(a, b);
    assert_eq!(
        decoded(a),
        vec![
            (NODE_A, add_ok("c", "na", "http://a/1", "http://a/1")),
            (NODE_A, add_ok("c", "na", "http://a/2", "http://a/2")),
            // Node B's add waited behind the forward of its checksum: a duplicate now.
            (NODE_B, add_ok("c", "nb", "http://b/1", "http://a/1")),
        ]
    );
}

/// Decoded frames with PKT_DBNAME of forwards (the server's data directory, a different
/// scratch directory for each server of a test) replaced by its last component.
pub(super) fn same_dir(entries: &[(PeerId, Vec<u8>)]) -> Vec<(PeerId, Message<'static>)> {
    decoded(entries.to_vec())
        .into_iter()
        .map(|(p, m)| match m {
            Message::PpdupAdd(mut c) => {
                let db = c.dbname.take().expect("a forward names the database");
                c.dbname = db
                    .rsplit(|&b| b == b'/')
                    .next()
                    .map(|n| b(std::str::from_utf8(n).unwrap()));
                (p, Message::PpdupAdd(c))
            }
            m => (p, m),
        })
        .collect()
}

#[test]
fn a_batch_whose_forwards_left_early_is_still_marked_for_its_sync() {
    // Fsync before acknowledgement on both sides (3.3.5.4 and our durability rule): forwards
    // taken after each event leave `now` empty, yet the batch's records must be made durable
    // locally before the answers the replica's _OKs release for them.
    let (mut s, _dir) = server("forwarded-early", Mode::Server, true);
    s.replica_connected(REPLICA);
    sent(&mut s);
    s.handle_message(NODE_A, set_config("c", 5));
    sent(&mut s);
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    let direct = decoded(s.take_direct());
    assert!(
        matches!(direct.last(), Some((REPLICA, Message::PpdupAdd(_)))),
        "{direct:?}"
    );
    let out = s.write_log().unwrap();
    assert!(out.now.is_empty());
    assert!(
        out.forwarded,
        "the batch forwarded: its sync point must be synced"
    );
    // The next batch forwards nothing.
    let out = s.write_log().unwrap();
    assert!(!out.forwarded);
}
