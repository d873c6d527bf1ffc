//! Messages for a checksum whose forward awaits the replica's _OK wait behind it (MS-FSCMT
//! 3.3.5.4 step 5, 3.3.5.5), whichever of the store and the set in flight is looked at first.

use super::tests::{
    add, add_ok, cs, ok_of, remove, sent, server, set_config, NODE_A, NODE_B, REPLICA,
};
use super::*;
use crate::msg::PpdupChecksum;

/// The replica's PPDUP_REMOVE_OK for a forwarded PPDUP_REMOVE.
fn remove_ok_of(fwd: &Message<'static>) -> Message<'static> {
    let Message::PpdupRemove(PpdupChecksum {
        collection,
        node_id,
        uri,
        ppdup_id,
        dbname,
        ..
    }) = fwd.clone()
    else {
        panic!("{fwd:?}")
    };
    Message::PpdupRemoveOk(PpdupRemoveOk {
        collection,
        uri,
        node_id: Some(node_id),
        ppdup_id,
        dbname,
    })
}

fn forwards(out: &[(PeerId, Message<'static>)]) -> Vec<Message<'static>> {
    out.iter()
        .filter(|(p, m)| {
            *p == REPLICA && matches!(m, Message::PpdupAdd(_) | Message::PpdupRemove(_))
        })
        .map(|(_, m)| m.clone())
        .collect()
}

#[test]
fn an_add_waits_behind_a_forwarded_remove_of_its_checksum_and_a_duplicate_behind_a_forwarded_add() {
    let (mut s, _dir) = server("flight", Mode::Server, true);
    s.replica_connected(REPLICA);
    s.handle_message(NODE_A, set_config("c", 1));
    s.handle_message(NODE_B, set_config("c", 1));
    sent(&mut s);
    // An add in flight: a duplicate from another node waits (the store holds the checksum, and
    // nothing else is in flight but adds).
    s.handle_message(NODE_A, add("c", "na", "http://a/", cs(1)));
    s.handle_message(NODE_B, add("c", "nb", "http://b/", cs(1)));
    let fwd = forwards(&sent(&mut s));
    assert_eq!(fwd.len(), 1, "{fwd:?}");
    assert_eq!(s.flight.removes(), 0);
    s.handle_message(REPLICA, ok_of(&fwd[0]));
    assert_eq!(
        sent(&mut s),
        vec![
            (NODE_A, add_ok("c", "na", "http://a/", "http://a/")),
            (NODE_B, add_ok("c", "nb", "http://b/", "http://a/")),
        ]
    );
    // The owner removes it: the checksum leaves the store at once, its forward is in flight,
    // and an add of it by another node must wait for the replica's PPDUP_REMOVE_OK, though the
    // store no longer holds it.
    s.handle_message(NODE_A, remove("c", "na", "http://a/", cs(1)));
    assert_eq!(s.flight.removes(), 1);
    s.handle_message(NODE_B, add("c", "nb", "http://b/", cs(1)));
    // Another checksum is not held up meanwhile.
    s.handle_message(NODE_B, add("c", "nb", "http://b2/", cs(2)));
    let out = sent(&mut s);
    let fwd = forwards(&out);
    assert_eq!(fwd.len(), 2, "{out:?}");
    assert!(matches!(&fwd[0], Message::PpdupRemove(r) if r.checksum == cs(1)));
    assert!(matches!(&fwd[1], Message::PpdupAdd(a) if a.checksum == cs(2)));
    assert!(
        out.iter().all(|(p, _)| *p == REPLICA),
        "nothing answered before the replica: {out:?}"
    );
    let store = |s: &DupServer, c: u8| {
        s.stores()
            .collection(b"c")
            .unwrap()
            .store
            .get(&cs(c))
            .map(|(u, _)| u.to_vec())
    };
    assert_eq!(
        store(&s, 1),
        None,
        "the waiting add did not reach the store"
    );
    // The remove's _OK: node A answered, then the add that waited is handled: node B now owns
    // the checksum, and its add is forwarded in turn.
    s.handle_message(REPLICA, remove_ok_of(&fwd[0]));
    assert_eq!(s.flight.removes(), 0);
    let out = sent(&mut s);
    // (The forward leaves first: frames to the replica go before the commit.)
    assert!(
        out.iter().any(|(p, m)| *p == NODE_A
            && matches!(m, Message::PpdupRemoveOk(r) if &r.uri[..] == b"http://a/")),
        "{out:?}"
    );
    assert!(!out
        .iter()
        .any(|(p, m)| *p == NODE_B && matches!(m, Message::PpdupAddOk(_))));
    let again = forwards(&out);
    assert_eq!(again.len(), 1, "{out:?}");
    assert!(
        matches!(&again[0], Message::PpdupAdd(a) if a.checksum == cs(1) && &a.uri[..] == b"http://b/")
    );
    assert_eq!(store(&s, 1).as_deref(), Some(&b"http://b/"[..]));
    // The _OKs of cs(2) and of the add that waited answer node B, each with itself as owner.
    s.handle_message(REPLICA, ok_of(&fwd[1]));
    s.handle_message(REPLICA, ok_of(&again[0]));
    assert_eq!(
        sent(&mut s),
        vec![
            (NODE_B, add_ok("c", "nb", "http://b2/", "http://b2/")),
            (NODE_B, add_ok("c", "nb", "http://b/", "http://b/")),
        ]
    );
    assert_eq!(s.flight.len(), 0);
}
