//! The name server (docs/nameserver.md) as real processes on loopback: spoken to by a peer
//! written with CPython's marshal module alone (tests/nameserver_peer.py), restarted after a
//! SIGKILL, refused a held data directory, fed hostile input.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value as Json};

use crate::util::{nameserver, python3, temp_dir, Role};

const PEER: &str = include_str!("nameserver_peer.py");
const DISPATCHER: &str = "esp/subsystems/processing/dispatcher";

/// Runs the python peer against `ns` through `steps`; one reply per step.
fn speak(ns: &Role, steps: &[Json]) -> Vec<Json> {
    let addr = ns.addr();
    let input: String = steps.iter().map(|s| format!("{s}\n")).collect();
    let out = python3(
        PEER,
        &[&addr.ip().to_string(), &addr.port().to_string()],
        input.as_bytes(),
    );
    let replies: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(replies.len(), steps.len(), "one reply per step: {out}");
    replies
}

fn aor(object_id: &str, interface_type: &str, version: &str, port: u16) -> Json {
    json!({
        "name": DISPATCHER, "object_id": object_id, "host": "127.0.0.1", "port": port,
        "interface_type": interface_type, "interface_version": version,
    })
}

fn factory(object_id: &str) -> Json {
    aor(object_id, "processing::session_factory", "5.1", 13390)
}

fn master(object_id: &str) -> Json {
    aor(object_id, "processing::master_dispatcher", "5.0", 13390)
}

fn triple(interface_type: &str, version: &str) -> Json {
    json!({"name": DISPATCHER, "interface_type": interface_type, "interface_version": version})
}

fn bind(id: i64, aor: Json) -> Json {
    json!({"method": "bind", "id": id, "args": {"aor": aor}})
}

/// The exception a reply raises, checking it names the request.
fn exception(reply: &Json, id: i64) -> &str {
    assert_eq!(reply["id"], id, "{reply}");
    assert!(reply["what"].is_string(), "{reply}");
    reply["exception"]
        .as_str()
        .unwrap_or_else(|| panic!("no exception: {reply}"))
}

fn result(reply: &Json, id: i64) -> &Json {
    assert_eq!(reply["id"], id, "{reply}");
    assert!(reply.get("exception").is_none(), "{reply}");
    &reply["result"]
}

/// `crawlfleet nameserver list --json` against `ns`.
fn list_json(ns: &Role) -> Json {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["nameserver", "list", "--json", "--nameserver"])
        .arg(ns.addr().to_string())
        .output()
        .expect("crawlfleet runs");
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).expect("a JSON array")
}

#[test]
fn nameserver_speaks_its_wire_format_to_python_marshal() {
    let dir = temp_dir("ns-wire");
    let ns = nameserver(dir.path());
    let unbind = |id: i64, interface: &str, version: &str, object_id: &str| {
        let mut args = triple(interface, version);
        args["object_id"] = json!(object_id);
        json!({"method": "unbind", "id": id, "args": args})
    };
    let steps = [
        // MS-FSCDFT 3.4.3: no master yet.
        json!({"method": "resolve", "id": 1, "args": triple("processing::session_factory", "5.1")}),
        // 3.3.3 then 3.1.3: two interfaces under one name.
        bind(2, factory("cd1")),
        bind(3, master("cd1")),
        json!({"method": "resolve", "id": 4, "args": triple("processing::session_factory", "5.1")}),
        json!({"method": "resolve", "id": 5, "args": triple("processing::master_dispatcher", "5.0")}),
        // Bound to a live object: refused; named as the one replaced: taken over.
        bind(6, factory("cd2")),
        json!({"method": "bind", "id": 7, "args": {"aor": master("cd2"), "replaces": "cd1"}}),
        // 3.4.5: a late racer's unbind of the dead object does not remove the winner's.
        unbind(8, "processing::master_dispatcher", "5.0", "cd1"),
        unbind(9, "processing::session_factory", "5.1", "cd1"),
        unbind(10, "processing::session_factory", "5.1", "cd1"),
        json!({"method": "list", "id": 11}),
        json!({"method": "__ping", "id": 12}),
    ];
    let r = speak(&ns, &steps);
    assert_eq!(exception(&r[0], 1), "resolve_exception");
    assert_eq!(result(&r[1], 2), &Json::Null);
    assert_eq!(result(&r[2], 3), &Json::Null);
    assert_eq!(result(&r[3], 4), &factory("cd1"));
    assert_eq!(result(&r[4], 5), &master("cd1"));
    assert_eq!(exception(&r[5], 6), "bind_exception");
    assert_eq!(result(&r[6], 7), &Json::Null);
    assert_eq!(exception(&r[7], 8), "unbind_exception");
    assert_eq!(result(&r[8], 9), &factory("cd1"));
    assert_eq!(exception(&r[9], 10), "unbind_exception");
    assert_eq!(result(&r[10], 11), &json!([master("cd2")]));
    assert_eq!(result(&r[11], 12), &json!(true));
    assert!(r.iter().all(|reply| reply["priority"] == 0));
    // The list command prints the same.
    assert_eq!(list_json(&ns), json!([master("cd2")]));
}

#[test]
fn nameserver_keeps_its_bindings_across_a_sigkill() {
    let dir = temp_dir("ns-restart");
    let d = dir.path().to_str().unwrap();
    let ns = nameserver(Path::new(d));
    let node = aor("cd7-node", "processing::dispatcher_node", "5.1", 14390);
    let r = speak(
        &ns,
        &[
            bind(1, factory("cd1")),
            bind(2, master("cd1")),
            bind(3, node.clone()),
        ],
    );
    for (i, reply) in r.iter().enumerate() {
        assert_eq!(result(reply, i as i64 + 1), &Json::Null);
    }
    // Held: a second process on the directory is refused, naming the holder.
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["nameserver", "--listen", "127.0.0.1:0", "--data-dir", d])
        .output()
        .expect("crawlfleet runs");
    assert!(!out.status.success(), "a second name server started on {d}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("in use by process {}", ns.child.id())),
        "{err}"
    );
    ns.kill();
    let ns = nameserver(Path::new(d));
    // Listed in triple order: name, then interface type (dispatcher_node first).
    assert_eq!(list_json(&ns), json!([node, master("cd1"), factory("cd1")]));
}

#[test]
fn nameserver_answers_hostile_input_closes_and_serves_the_next_client() {
    let dir = temp_dir("ns-hostile");
    let ns = nameserver(dir.path());
    let ping = |id: i64| json!({"method": "__ping", "id": id});
    let mut bad_port = factory("cd1");
    bad_port["port"] = json!("13390");
    let steps = [
        // A frame whose body is not marshal: bad_frame, then the close.
        json!({"raw_hex": "00000005ffffffffff"}),
        json!({"eof": true}),
        json!({"reconnect": true}),
        // A length far over the request limit: closed before the body is awaited.
        json!({"raw_hex": "7fffffff00"}),
        json!({"reconnect": true}),
        json!({"method": "rebind", "id": 3}),
        json!({"eof": true}),
        json!({"reconnect": true}),
        bind(4, bad_port),
        json!({"eof": true}),
        json!({"reconnect": true}),
        json!({"method": "__ping", "id": 5, "object": "cd1-session-factory"}),
        json!({"eof": true}),
        json!({"reconnect": true}),
        // The process lives and serves the next client.
        ping(6),
    ];
    let r = speak(&ns, &steps);
    assert_eq!(r[0]["exception"], "bad_frame", "{}", r[0]);
    assert_eq!(r[0]["id"], Json::Null);
    assert_eq!(r[1], json!({"closed": true}));
    assert_eq!(r[3]["closed"], true, "{}", r[3]);
    assert_eq!(exception(&r[5], 3), "unknown_method");
    assert_eq!(r[6], json!({"closed": true}));
    assert_eq!(exception(&r[8], 4), "bad_request");
    assert!(
        r[8]["what"].as_str().unwrap().contains("args.aor.port"),
        "{}",
        r[8]
    );
    assert_eq!(r[9], json!({"closed": true}));
    assert_eq!(exception(&r[11], 5), "unknown_object");
    assert_eq!(r[12], json!({"closed": true}));
    assert_eq!(result(&r[14], 6), &json!(true));
}

#[test]
fn nameserver_answers_pipelined_requests_before_a_broken_one_and_after_a_half_close() {
    use crawlfleet_core::nameserver::{Call, Request};
    let dir = temp_dir("ns-pipeline");
    let ns = nameserver(dir.path());
    let mut wire = Vec::new();
    for id in 1..=2 {
        Request {
            object: "nameserver".into(),
            id,
            call: Call::Ping,
        }
        .encode_frame(&mut wire);
    }
    // A third frame whose body is not marshal, then a fourth request never read.
    wire.extend_from_slice(&[0, 0, 0, 2, 0xff, 0xff]);
    Request {
        object: "nameserver".into(),
        id: 4,
        call: Call::List,
    }
    .encode_frame(&mut wire);
    let ping = |id: i64| json!({"method": "__ping", "id": id, "half_close": true});
    let steps = [
        json!({"raw_hex": crate::util::hex(&wire), "replies": 3}),
        json!({"eof": true}),
        json!({"reconnect": true}),
        // Requests sent before the peer's FIN are answered (DESIGN.md "Limits every port
        // keeps": half-close).
        ping(5),
        json!({"eof": true}),
    ];
    let r = speak(&ns, &steps);
    assert_eq!(result(&r[0][0], 1), &json!(true));
    assert_eq!(result(&r[0][1], 2), &json!(true));
    assert_eq!(r[0][2]["exception"], "bad_frame", "{}", r[0][2]);
    assert_eq!(r[1], json!({"closed": true}));
    assert_eq!(result(&r[3], 5), &json!(true));
    assert_eq!(r[4], json!({"closed": true}));
}

#[test]
fn inspect_names_nameserver_frames() {
    let mut wire = Vec::new();
    crawlfleet_core::nameserver::Request {
        object: "nameserver".into(),
        id: 1,
        call: crawlfleet_core::nameserver::Call::List,
    }
    .encode_frame(&mut wire);
    let hex = crate::util::hex(&wire);
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args(["inspect", "--hex", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(hex.as_bytes())?;
            c.wait_with_output()
        })
        .expect("crawlfleet runs");
    assert!(out.status.success(), "{out:?}");
    let line: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(line["nameserver"], "request list", "{line}");
    assert_eq!(line["message"]["method"], "list", "{line}");
}

#[test]
fn docs_example_frames_decode_as_what_they_say() {
    use crawlfleet_core::frame;
    use crawlfleet_core::marshal::Limits;
    use crawlfleet_core::nameserver::{Reply, Request};
    let doc = std::fs::read_to_string(crate::util::checkout_path("docs/nameserver.md")).unwrap();
    let mut methods = Vec::new();
    let mut replies = 0;
    for block in doc.split("```hex\n").skip(1) {
        let hex = block.split("```").next().unwrap().trim();
        let wire = crate::util::unhex(hex);
        let (body, used) = frame::split(&wire, &Limits::default()).unwrap().unwrap();
        assert_eq!(used, wire.len(), "one whole frame: {hex}");
        let f = frame::decode_body(body, &Limits::default()).unwrap();
        match Request::from_dict(&f.message) {
            Ok(req) => methods.push(req.call.method()),
            Err(_) => {
                Reply::from_dict(&f.message).unwrap_or_else(|e| panic!("{e}: {hex}"));
                replies += 1;
            }
        }
    }
    assert_eq!(methods, ["bind", "resolve", "unbind", "list", "__ping"]);
    assert_eq!(replies, 3);
}
