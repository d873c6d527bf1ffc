use super::*;
use crate::frame::{self, Priority};
use crate::marshal::Value;

const DISPATCHER: &str = "esp/subsystems/processing/dispatcher";

fn aor(object_id: &str, interface_type: &str, version: &str, port: u16) -> Aor {
    Aor {
        name: DISPATCHER.into(),
        object_id: object_id.into(),
        host: "127.0.0.1".into(),
        port,
        interface_type: interface_type.into(),
        interface_version: version.into(),
    }
}

fn factory(object_id: &str) -> Aor {
    aor(object_id, "processing::session_factory", "5.1", 13390)
}

fn master(object_id: &str) -> Aor {
    aor(object_id, "processing::master_dispatcher", "5.0", 13390)
}

fn raised(r: Result<Value<'static>, Raised>) -> Exception {
    r.expect_err("an exception").exception
}

/// The body of a frame carrying `dict`.
fn body(dict: Vec<(Value<'static>, Value<'static>)>) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_dict(&dict, Priority::Normal, &mut out);
    out.split_off(frame::HEADER_LEN)
}

fn request_body(call: Call) -> Vec<u8> {
    let mut out = Vec::new();
    Request {
        object: NAMESERVER_OBJECT.into(),
        id: 9,
        call,
    }
    .encode_frame(&mut out);
    out.split_off(frame::HEADER_LEN)
}

#[test]
fn bindings_are_keyed_by_the_triple() {
    // MS-FSCDFT 3.1.3 and 3.3.3: two interfaces bound under one name.
    let mut ns = NameServer::in_memory();
    ns.on_bind(&factory("cd1-f"), None).unwrap();
    ns.on_bind(&master("cd1-m"), None).unwrap();
    assert_eq!(
        ns.on_resolve(&factory("x").triple()).unwrap(),
        factory("cd1-f").to_value()
    );
    assert_eq!(
        ns.on_resolve(&master("x").triple()).unwrap(),
        master("cd1-m").to_value()
    );
    let other_version = aor("x", "processing::session_factory", "5.0", 1).triple();
    assert_eq!(raised(ns.on_resolve(&other_version)), Exception::Resolve);
    assert_eq!(ns.bindings().count(), 2);
}

#[test]
fn resolve_of_an_unbound_triple_raises_resolve_exception() {
    // MS-FSCDFT 3.4.3: no master yet.
    let ns = NameServer::in_memory();
    let e = ns.on_resolve(&factory("x").triple()).unwrap_err();
    assert_eq!(e.exception, Exception::Resolve);
    assert!(e.what.contains("not bound"), "{}", e.what);
}

#[test]
fn bind_over_another_object_raises_unless_it_names_it() {
    let mut ns = NameServer::in_memory();
    ns.on_bind(&factory("cd1"), None).unwrap();
    assert_eq!(raised(ns.on_bind(&factory("cd2"), None)), Exception::Bind);
    assert_eq!(
        raised(ns.on_bind(&factory("cd2"), Some("cd3"))),
        Exception::Bind
    );
    // The same reference again is a no-op; the same object elsewhere updates its reference.
    ns.on_bind(&factory("cd1"), None).unwrap();
    let mut moved = factory("cd1");
    moved.port = 14390;
    ns.on_bind(&moved, None).unwrap();
    assert_eq!(ns.on_resolve(&moved.triple()).unwrap(), moved.to_value());
    // A take-over names the object it replaces.
    ns.on_bind(&factory("cd2"), Some("cd1")).unwrap();
    assert_eq!(
        ns.on_resolve(&moved.triple()).unwrap(),
        factory("cd2").to_value()
    );
}

#[test]
fn unbind_with_the_wrong_object_id_is_refused() {
    // MS-FSCDFT 3.4.5: a late racer unbinding the dead master's session_factory must not
    // remove the winner's fresh binding.
    let mut ns = NameServer::in_memory();
    ns.on_bind(&factory("cd1"), None).unwrap();
    let t = factory("x").triple();
    ns.on_unbind(&t, Some("cd1")).unwrap();
    ns.on_bind(&factory("cd2"), None).unwrap();
    assert_eq!(raised(ns.on_unbind(&t, Some("cd1"))), Exception::Unbind);
    assert_eq!(ns.on_resolve(&t).unwrap(), factory("cd2").to_value());
    assert_eq!(ns.on_unbind(&t, None).unwrap(), factory("cd2").to_value());
    assert_eq!(raised(ns.on_unbind(&t, None)), Exception::Unbind);
}

#[test]
fn two_racing_backups_end_with_one_master() {
    // Both saw cd1 dead; each unbinds it by id, then binds. Whatever the interleaving, one
    // bind succeeds.
    let t = factory("x").triple();
    for order in [[2, 3, 2, 3], [2, 2, 3, 3], [3, 2, 2, 3]] {
        let mut ns = NameServer::in_memory();
        ns.on_bind(&factory("cd1"), None).unwrap();
        let mut unbound = [false; 4];
        let mut masters = Vec::new();
        for who in order {
            let id = format!("cd{who}");
            if !unbound[who] {
                unbound[who] = true;
                let _ = ns.on_unbind(&t, Some("cd1"));
            } else if ns.on_bind(&factory(&id), None).is_ok() {
                masters.push(id);
            }
        }
        assert_eq!(masters.len(), 1, "order {order:?}: {masters:?}");
    }
}

#[test]
fn the_table_has_a_limit() {
    let mut ns = NameServer::in_memory();
    ns.set_max_bindings(1);
    ns.on_bind(&factory("cd1"), None).unwrap();
    assert_eq!(raised(ns.on_bind(&master("cd1"), None)), Exception::Bind);
    // Rebinding an existing triple is not a new binding.
    ns.on_bind(&factory("cd1"), None).unwrap();
}

#[test]
fn bindings_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ns, rec) = NameServer::open(dir.path()).unwrap();
    assert_eq!(rec.bindings, 0);
    ns.on_bind(&factory("cd1"), None).unwrap();
    ns.on_bind(&master("cd1"), None).unwrap();
    ns.on_bind(&aor("n1", "processing::dispatcher_node", "5.1", 1), None)
        .unwrap();
    ns.on_unbind(&master("x").triple(), Some("cd1")).unwrap();
    drop(ns);
    let (ns, rec) = NameServer::open(dir.path()).unwrap();
    assert_eq!(
        rec,
        Recovery {
            bindings: 2,
            damaged: None
        }
    );
    assert_eq!(
        ns.on_resolve(&factory("x").triple()).unwrap(),
        factory("cd1").to_value()
    );
    assert_eq!(
        raised(ns.on_resolve(&master("x").triple())),
        Exception::Resolve
    );
}

#[test]
fn a_damaged_file_keeps_the_records_before_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ns, _) = NameServer::open(dir.path()).unwrap();
    ns.on_bind(&factory("cd1"), None).unwrap();
    ns.on_bind(&master("cd1"), None).unwrap();
    drop(ns);
    let path = dir.path().join(BINDINGS_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (ns, rec) = NameServer::open(dir.path()).unwrap();
    assert_eq!(rec.bindings, 1);
    assert_eq!(rec.damaged, Some("record check mismatch"));
    assert_eq!(ns.bindings().count(), 1);
}

#[test]
fn a_failed_write_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut ns, _) = NameServer::open(&dir.path().join("gone")).unwrap();
    // The directory does not exist: the replacement cannot be written.
    assert_eq!(
        raised(ns.on_bind(&factory("cd1"), None)),
        Exception::Storage
    );
    assert_eq!(
        raised(ns.on_resolve(&factory("x").triple())),
        Exception::Resolve
    );
}

#[test]
fn requests_round_trip_through_frames() {
    let calls = [
        Call::Bind {
            aor: factory("cd1"),
            replaces: Some("cd0".into()),
        },
        Call::Bind {
            aor: factory("cd1"),
            replaces: None,
        },
        Call::Resolve(factory("x").triple()),
        Call::Unbind {
            triple: master("x").triple(),
            object_id: Some("cd1".into()),
        },
        Call::List,
        Call::Ping,
    ];
    for call in calls {
        let b = request_body(call.clone());
        let f = frame::decode_body(&b, &Limits::default()).unwrap();
        let req = Request::from_dict(&f.message).unwrap();
        assert_eq!(req.call, call);
        assert_eq!(req.id, 9);
    }
}

#[test]
fn frames_are_answered_and_broken_ones_marked_for_closing() {
    let limits = Limits::default();
    let mut ns = NameServer::in_memory();
    let a = ns.handle_frame(&request_body(Call::Ping), &limits);
    assert_eq!(a.reply.outcome, Ok(Value::Bool(true)));
    assert_eq!(a.reply.id, Some(9));
    assert_eq!(a.close, None);
    // Refused by the rules: answered, the connection stays.
    let a = ns.handle_frame(&request_body(Call::Resolve(factory("x").triple())), &limits);
    assert_eq!(a.reply.outcome.unwrap_err().exception, Exception::Resolve);
    assert_eq!(a.close, None);
    // Garbage.
    let a = ns.handle_frame(b"\xffgarbage", &limits);
    assert_eq!(a.reply.id, None);
    assert_eq!(a.reply.outcome.unwrap_err().exception, Exception::BadFrame);
    assert!(a.close.is_some());
    // An unknown method, with its id.
    let unknown = body(vec![
        (Value::bytes(b"object"), Value::bytes(b"nameserver")),
        (Value::bytes(b"method"), Value::bytes(b"rebind")),
        (Value::bytes(b"id"), Value::int(4)),
        (Value::bytes(b"args"), Value::Dict(vec![])),
    ]);
    let a = ns.handle_frame(&unknown, &limits);
    assert_eq!(a.reply.id, Some(4));
    assert_eq!(
        a.reply.outcome.unwrap_err().exception,
        Exception::UnknownMethod
    );
    assert!(a.close.is_some());
    // An object the name server does not serve.
    let mut b = Vec::new();
    Request {
        object: "cd1-f".into(),
        id: 5,
        call: Call::Ping,
    }
    .encode_frame(&mut b);
    let a = ns.handle_frame(&b[frame::HEADER_LEN..], &limits);
    assert_eq!(
        a.reply.outcome.unwrap_err().exception,
        Exception::UnknownObject
    );
}

#[test]
fn a_wrong_argument_type_names_the_field() {
    let mut aor = factory("cd1").to_value();
    if let Value::Dict(d) = &mut aor {
        d[3].1 = Value::bytes(b"13390");
    }
    let bad = body(vec![
        (Value::bytes(b"object"), Value::bytes(b"nameserver")),
        (Value::bytes(b"method"), Value::bytes(b"bind")),
        (Value::bytes(b"id"), Value::int(1)),
        (
            Value::bytes(b"args"),
            Value::Dict(vec![(Value::bytes(b"aor"), aor)]),
        ),
    ]);
    let f = frame::decode_body(&bad, &Limits::default()).unwrap();
    assert_eq!(
        Request::from_dict(&f.message),
        Err((
            Some(1),
            WireError::WrongType {
                field: "args.aor.port",
                expected: "int",
                found: "string"
            }
        ))
    );
    let missing = body(vec![(Value::bytes(b"method"), Value::bytes(b"list"))]);
    let f = frame::decode_body(&missing, &Limits::default()).unwrap();
    assert_eq!(
        Request::from_dict(&f.message),
        Err((None, WireError::Missing("id")))
    );
}

#[test]
fn replies_round_trip() {
    let replies = [
        Reply {
            id: Some(3),
            outcome: Ok(factory("cd1").to_value()),
        },
        Reply {
            id: None,
            outcome: Err(Raised {
                exception: Exception::BadFrame,
                what: "no".into(),
            }),
        },
    ];
    for r in replies {
        let mut out = Vec::new();
        r.encode_frame(&mut out);
        let back = Reply::decode_body(&out[frame::HEADER_LEN..], &Limits::default()).unwrap();
        assert_eq!(back, r);
    }
    for e in Exception::ALL {
        assert_eq!(Exception::from_name(e.name()), Some(e));
    }
}
