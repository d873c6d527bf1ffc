//! Content distributors (MS-FSCDFT 3; docs/distributor.md) as real processes on loopback: a
//! name server and distributors started as separate `crawlfleet` processes, the master
//! SIGKILLed and restarted, and every dispatcher_node method (3.5.4) spoken by a peer written
//! with CPython's marshal module alone (tests/nameserver_peer.py).

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value as Json};

use crate::util::{nameserver, python3, temp_dir, wait_until, Role};

const PEER: &str = include_str!("nameserver_peer.py");
const CHECKSUM: i64 = -1_479_218_033;

/// A distributor holding the collection `web`, checking every 100 ms. A dead peer shows as a
/// refused connection on loopback; the generous call timeout keeps a busy machine from
/// dropping a live one.
pub(crate) fn distributor(ns: &Role, dir: &std::path::Path, node: i64) -> Role {
    Role::start(&[
        "distributor",
        "--nameserver",
        &ns.addr().to_string(),
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.join(format!("d{node}")).to_str().unwrap(),
        "--node-id",
        &node.to_string(),
        "--collection",
        "web",
        "--check-interval-ms",
        "100",
        "--call-timeout-ms",
        "2000",
    ])
}

pub(crate) fn crawlfleet_json(args: &[&str]) -> Json {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(args)
        .output()
        .expect("crawlfleet runs");
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// `crawlfleet distributors --json`.
pub(crate) fn status(ns: &Role) -> Json {
    crawlfleet_json(&[
        "distributors",
        "--json",
        "--nameserver",
        &ns.addr().to_string(),
    ])
}

/// The object id bound under the dispatcher name with `interface`.
fn bound(ns: &Role, interface: &str) -> Option<String> {
    let list = crawlfleet_json(&[
        "nameserver",
        "list",
        "--json",
        "--nameserver",
        &ns.addr().to_string(),
    ]);
    list.as_array()?
        .iter()
        .find(|a| {
            a["name"] == "esp/subsystems/processing/dispatcher" && a["interface_type"] == interface
        })
        .map(|a| a["object_id"].as_str().unwrap_or_default().to_owned())
}

/// The master's node id, when the master is settled: session_factory and master_dispatcher
/// bound to the same node, which says it is master, and `registered` exactly the nodes
/// registered with it.
fn settled(ns: &Role, registered: &BTreeSet<i64>) -> Option<i64> {
    let s = status(ns);
    let sf = s["master"]["object_id"].as_str()?.to_owned();
    let node: i64 = sf.split('/').nth(1)?.parse().ok()?;
    if bound(ns, "processing::master_dispatcher")? != format!("dispatcher/{node}/master_dispatcher")
    {
        return None;
    }
    let listed: BTreeSet<i64> = s["registered"]
        .as_array()?
        .iter()
        .filter_map(|d| d["node_id"].as_i64())
        .collect();
    let roles_ok = s["distributors"].as_array()?.iter().all(|d| {
        let id = d["node_id"].as_i64().unwrap_or(-1);
        !registered.contains(&id) || d["role"] == if id == node { "master" } else { "backup" }
    });
    (listed == *registered && roles_ok).then_some(node)
}

pub(crate) fn settle(ns: &Role, registered: &BTreeSet<i64>) -> i64 {
    let mut master = None;
    wait_until(&format!("one master, {registered:?} registered"), || {
        master = settled(ns, registered);
        master.is_some()
    });
    master.unwrap_or_default()
}

#[test]
fn distributors_elect_one_master_and_fail_over_when_it_is_killed() {
    let dir = temp_dir("dist-elect");
    let ns = nameserver(&dir.path().join("ns"));
    let mut nodes: Vec<Option<Role>> = vec![None, None, None, None];
    // Started one by one: the first is master, the others register as backups (MS-FSCDFT 3).
    for id in 1..=3i64 {
        nodes[id as usize] = Some(distributor(&ns, dir.path(), id));
        let want: BTreeSet<i64> = (1..=id).collect();
        assert_eq!(settle(&ns, &want), 1);
    }
    assert_eq!(
        bound(&ns, "processing::session_factory").as_deref(),
        Some("dispatcher/1/session_factory")
    );
    let all: BTreeSet<i64> = (1..=3).collect();
    // SIGKILL the master three times in a row; each time a backup takes over, the other
    // re-registers with it, and the old master comes back as a backup.
    for round in 1..=3 {
        let old = settle(&ns, &all);
        if let Some(role) = nodes[old as usize].take() {
            role.kill();
        }
        let started = Instant::now();
        let live: BTreeSet<i64> = all.iter().copied().filter(|&n| n != old).collect();
        let new = settle(&ns, &live);
        println!(
            "failover {round}: distributor {old} killed, distributor {new} master with {live:?} registered after {} ms",
            started.elapsed().as_millis()
        );
        assert_ne!(new, old);
        nodes[old as usize] = Some(distributor(&ns, dir.path(), old));
        assert_eq!(settle(&ns, &all), new, "the restarted master is a backup");
        assert_eq!(
            bound(&ns, "processing::session_factory"),
            Some(format!("dispatcher/{new}/session_factory"))
        );
    }
}

#[test]
fn two_distributors_started_together_against_a_dead_master_end_with_one_master() {
    let dir = temp_dir("dist-race");
    let ns = nameserver(&dir.path().join("ns"));
    // A master that died: its references are bound, nothing listens on its port.
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    for (interface, version, object) in [
        (
            "processing::session_factory",
            "5.1",
            "dispatcher/9/session_factory",
        ),
        (
            "processing::master_dispatcher",
            "5.0",
            "dispatcher/9/master_dispatcher",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args(["nameserver", "bind", "--nameserver", &ns.addr().to_string()])
            .args(["esp/subsystems/processing/dispatcher", interface, version])
            .args([
                "--object-id",
                object,
                "--host",
                "127.0.0.1",
                "--port",
                &dead_port,
            ])
            .output()
            .expect("crawlfleet runs");
        assert!(out.status.success(), "{out:?}");
    }
    // Both find the dead master at once, both unbind it and bind themselves (MS-FSCDFT 3.4.5):
    // one wins, the other registers with it.
    let both = std::thread::scope(|s| {
        let a = s.spawn(|| distributor(&ns, dir.path(), 2));
        let b = s.spawn(|| distributor(&ns, dir.path(), 3));
        (a.join(), b.join())
    });
    let (Ok(_a), Ok(_b)) = both else {
        panic!("a distributor did not start");
    };
    let master = settle(&ns, &[2, 3].into());
    assert!([2, 3].contains(&master));
    assert_eq!(
        bound(&ns, "processing::session_factory"),
        Some(format!("dispatcher/{master}/session_factory"))
    );
}

pub(crate) fn guarantees(items: &[Json]) -> Json {
    json!({"type": 9, "checksum": CHECKSUM, "guarantees": items})
}

fn feeding_priority(p: i64) -> Json {
    json!({"type": 7, "checksum": CHECKSUM, "priority": p})
}

fn spec(id: i64, collection: &str, g: Json, priority: i64, external: bool) -> Json {
    json!({"id": id, "collection": collection, "guarantees": g, "priority": priority, "external_client": external})
}

#[test]
fn dispatcher_node_methods_over_the_wire_from_python_marshal() {
    let dir = temp_dir("dist-wire");
    let ns = nameserver(&dir.path().join("ns"));
    let d = distributor(&ns, dir.path(), 5);
    let want: BTreeSet<i64> = [5].into();
    settle(&ns, &want);
    let port = d.addr().port() as i64;
    const DN: &str = "dispatcher/5/dispatcher_node";
    let call = |id: i64, method: &str, args: Json| json!({"object": DN, "method": method, "id": id, "args": args});
    let fp0 = guarantees(&[feeding_priority(0)]);
    let none = guarantees(&[]);
    let steps = vec![
        call(1, "create", spec(7, "web", fp0.clone(), 0, false)),
        call(2, "create", spec(8, "web", none.clone(), 0, true)),
        call(3, "create_session", {
            let mut a = spec(9, "web", fp0.clone(), 0, false);
            a["callback"] = Json::Null;
            a
        }),
        // recreate of a held id returns the held session (+ 391), of a new id creates one.
        call(4, "recreate", spec(8, "web", none.clone(), 0, false)),
        call(5, "recreate", spec(10, "web", none.clone(), 0, false)),
        call(6, "get_sessions", json!({})),
        call(7, "get_load", json!({})),
        // The two exceptions of 3.5.4, on the three methods that raise.
        call(8, "create", spec(11, "news", none.clone(), 0, false)),
        call(9, "create", spec(11, "web", none.clone(), 1, false)),
        call(
            10,
            "create_session",
            spec(11, "web", guarantees(&[feeding_priority(1)]), 0, false),
        ),
        call(
            11,
            "recreate",
            spec(
                11,
                "web",
                guarantees(&[json!({"type": 3, "checksum": CHECKSUM})]),
                0,
                false,
            ),
        ),
        call(12, "recreate", spec(11, "news", fp0.clone(), 0, false)),
        call(13, "destroy_session", json!({"id": 7})),
        call(14, "remove_sessions", json!({"coll": "web"})),
        call(15, "get_sessions", json!({})),
        // The master's session_factory hands out an id carrying its node id (ours, 3.6).
        json!({"object": "dispatcher/5/session_factory", "method": "create", "id": 16,
               "args": {"collection": "web", "guarantees": none.clone(), "priority": 0, "external_client": false}}),
        json!({"object": "dispatcher/5/session_factory", "method": "__ping", "id": 17, "args": {}}),
        // Hostile: an unknown method is answered, then the connection closed; the next
        // client is served.
        call(18, "format_disk", json!({})),
        json!({"eof": true}),
        json!({"reconnect": true}),
        json!({"raw_hex": "0000000a00112233445566778899"}),
        json!({"eof": true}),
        json!({"reconnect": true}),
        // A length header far over the request limit: closed unanswered.
        json!({"raw_hex": "7fffffff00"}),
        json!({"eof": true}),
        json!({"reconnect": true}),
        call(19, "__ping", json!({})),
    ];
    let input: String = steps.iter().map(|s| format!("{s}\n")).collect();
    let out = python3(PEER, &["127.0.0.1", &port.to_string()], input.as_bytes());
    let r: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(r.len(), steps.len(), "{out}");
    let result = |i: usize| {
        assert!(r[i].get("exception").is_none(), "{}", r[i]);
        &r[i]["result"]
    };
    let exception = |i: usize| {
        assert!(
            r[i]["what"].is_string(),
            "2.2.4 names the field what: {}",
            r[i]
        );
        r[i]["exception"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(result(0)["port"], port);
    assert_eq!(result(0)["interface_type"], "processing::session");
    assert_eq!(result(1)["port"], port + 1);
    assert_eq!(result(2)["port"], port);
    assert_eq!(
        result(3)["port"],
        port + 1,
        "recreate returns the existing session"
    );
    assert_eq!(result(4)["port"], port);
    assert_eq!(result(5), &json!([7, 8, 9, 10]));
    assert_eq!(result(6), &json!(0));
    assert_eq!(exception(7), "unknown_collection");
    for i in 8..=10 {
        assert_eq!(exception(i), "unsupported_guarantee_set", "step {i}");
    }
    assert_eq!(exception(11), "unknown_collection");
    assert_eq!(result(12), &Json::Null);
    assert_eq!(result(13), &json!([8, 9, 10]));
    assert_eq!(result(14), &json!([]));
    let session = result(15)["object_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let sid: i64 = session
        .rsplit('/')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1);
    assert_eq!(sid & 0xFFFF, 5, "{session}");
    assert_eq!(result(16), &json!(true));
    assert_eq!(exception(17), "unknown_method");
    assert_eq!(r[18], json!({"closed": true}));
    assert_eq!(r[20]["exception"], "bad_frame");
    assert_eq!(r[21], json!({"closed": true}));
    assert_eq!(r[23]["closed"], true, "{}", r[23]);
    assert_eq!(r[24], json!({"closed": true}));
    assert_eq!(result(26), &json!(true));
    // The session the master placed is listed by `crawlfleet distributors`.
    let s = status(&ns);
    assert_eq!(s["distributors"][0]["sessions"][0]["id"], sid, "{s}");
}

#[test]
fn the_master_spreads_sessions_by_load_and_forwards_to_the_holder() {
    let dir = temp_dir("dist-spread");
    let ns = nameserver(&dir.path().join("ns"));
    let d1 = distributor(&ns, dir.path(), 1);
    settle(&ns, &[1].into());
    let _d2 = distributor(&ns, dir.path(), 2);
    settle(&ns, &[1, 2].into());
    const SF: &str = "dispatcher/1/session_factory";
    let none = guarantees(&[]);
    let create = |id: i64| {
        json!({"object": SF, "method": "create", "id": id,
               "args": {"collection": "web", "guarantees": none.clone(), "priority": 0, "external_client": false}})
    };
    let steps: Vec<Json> = (1..=4).map(create).collect();
    let input: String = steps.iter().map(|s| format!("{s}\n")).collect();
    let out = python3(
        PEER,
        &["127.0.0.1", &d1.addr().port().to_string()],
        input.as_bytes(),
    );
    let placed: Vec<(i64, String)> = out
        .lines()
        .map(|l| {
            let r: Json = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            let oid = r["result"]["object_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{r}"))
                .to_owned();
            let mut parts = oid.split('/');
            let node = parts.nth(1).unwrap_or_default().to_owned();
            let id: i64 = parts.nth(1).and_then(|s| s.parse().ok()).unwrap_or(-1);
            (id, node)
        })
        .collect();
    // Equal loads: each new session goes to the node holding fewer (MS-FSCDFT 3.6).
    let on = |n: &str| placed.iter().filter(|p| p.1 == n).count();
    assert_eq!((on("1"), on("2")), (2, 2), "{placed:?}");
    let ids: BTreeSet<i64> = placed.iter().map(|p| p.0).collect();
    assert_eq!(ids.len(), 4, "ids are unique: {placed:?}");
    assert!(
        ids.iter().all(|id| id & 0xFFFF == 1),
        "the master's node id: {ids:?}"
    );
    // recreate and destroy_session go to the node holding the session.
    let (id, holder) = placed
        .iter()
        .find(|p| p.1 == "2")
        .cloned()
        .unwrap_or_default();
    let steps = [
        json!({"object": SF, "method": "recreate", "id": 5,
               "args": {"id": id, "collection": "web", "guarantees": none.clone(), "priority": 0, "external_client": false}}),
        json!({"object": SF, "method": "destroy_session", "id": 6, "args": {"id": id}}),
    ];
    let input: String = steps.iter().map(|s| format!("{s}\n")).collect();
    let out = python3(
        PEER,
        &["127.0.0.1", &d1.addr().port().to_string()],
        input.as_bytes(),
    );
    let r: Vec<Json> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert_eq!(r.len(), 2, "{out}");
    assert_eq!(
        r[0]["result"]["object_id"],
        format!("dispatcher/{holder}/session/{id}"),
        "{}",
        r[0]
    );
    assert_eq!(r[1]["result"], Json::Null, "{}", r[1]);
    let s = status(&ns);
    let held: Vec<i64> = s["distributors"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["node_id"] == 2)
        .flat_map(|d| d["sessions"].as_array().cloned().unwrap_or_default())
        .filter_map(|x| x["id"].as_i64())
        .collect();
    assert_eq!(held.len(), 1, "{s}");
    assert!(!held.contains(&id), "{s}");
}
