//! Feeding sessions (docs/distributor.md "Feeding sessions") against real `crawlfleet
//! distributor` processes on loopback: a client written with CPython's marshal module alone
//! (tests/feed_peer.py) creates a session through the master's session_factory (MS-FSCDFT 3.6),
//! feeds adds, updates and removes, and checks every reply; the distributor is SIGKILLed right
//! after a reply and restarted on its data directory, the session recreated (3.5.4.3) and the
//! ops resent; `crawlfleet index --json` must then hold every acknowledged op exactly once.
//! Hostile input on a session gets a typed error and the process keeps serving.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;

use crawlfleet_core::distributor::index::{log_path, reader};
use serde_json::{json, Value as Json};

use crate::disk_full::Tmpfs;
use crate::distributor::{crawlfleet_json, guarantees, settle, status};
use crate::util::{nameserver, python3, temp_dir, Role};

const PEER: &str = include_str!("feed_peer.py");
const SF: &str = "dispatcher/1/session_factory";

/// Distributor 1 holding `web`, on `listen` (port 0: a free one).
fn distributor(ns: &Role, dir: &Path, listen: &str) -> Role {
    Role::start(&[
        "distributor",
        "--nameserver",
        &ns.addr().to_string(),
        "--listen",
        listen,
        "--data-dir",
        dir.to_str().unwrap(),
        "--node-id",
        "1",
        "--collection",
        "web",
        "--check-interval-ms",
        "100",
        "--call-timeout-ms",
        "2000",
    ])
}

/// Runs the peer against `addr` with `steps`; one parsed reply per step.
fn peer(addr: SocketAddr, steps: &[Json]) -> Vec<Json> {
    let input: String = steps.iter().map(|s| format!("{s}\n")).collect();
    let out = python3(
        PEER,
        &[&addr.ip().to_string(), &addr.port().to_string()],
        input.as_bytes(),
    );
    let r: Vec<Json> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(r.len(), steps.len(), "{out}");
    r
}

/// One op as the peer sends it, and what the index must then show for its document.
#[derive(Clone, Debug)]
struct Op {
    seq: i64,
    op: &'static str,
    doc: String,
    time: i64,
}

impl Op {
    fn checksum(&self) -> String {
        format!(
            "{:032x}",
            (self.seq as u128) * 0x9e37_79b9_7f4a_7c15 + self.time as u128
        )
    }

    fn body(&self) -> String {
        format!("<p>{} at {} (seq {})</p>", self.doc, self.time, self.seq)
    }

    fn wire(&self) -> Json {
        let mut o = json!({"seq": self.seq, "op": self.op, "doc": self.doc, "time": self.time});
        if self.op != "remove" {
            o["checksum"] = json!({"$hex": self.checksum()});
            o["status"] = json!(200);
            o["headers"] = json!([["content-type", {"$b": "text/html"}]]);
            o["body"] = json!({"$b": self.body()});
        }
        o
    }
}

fn feed(session: &str, id: i64, ops: &[Op]) -> Json {
    let ops: Vec<Json> = ops.iter().map(Op::wire).collect();
    json!({"object": session, "method": "feed", "id": id, "args": {"ops": ops}})
}

/// Round `r` of ops over 12 documents: adds, then updates, and every third round removes two.
fn round(r: i64, seq: &mut i64) -> Vec<Op> {
    (0..12)
        .map(|d| {
            *seq += 1;
            let op = match (r, d) {
                (0, _) => "add",
                (r, d) if r % 3 == 2 && d % 5 == 0 => "remove",
                _ => "update",
            };
            Op {
                seq: *seq,
                op,
                doc: format!("http://site{}.test/page{d}", d % 3),
                time: 1_700_000_000 + r,
            }
        })
        .collect()
}

/// Sends `batches` on `session` at the distributor's `session_addr`; asserts every op is
/// answered ok, in order.
fn feed_all(session_addr: SocketAddr, session: &str, batches: &[Vec<Op>], first_id: i64) {
    let steps: Vec<Json> = batches
        .iter()
        .enumerate()
        .map(|(i, b)| feed(session, first_id + i as i64, b))
        .collect();
    for (r, b) in peer(session_addr, &steps).iter().zip(batches) {
        let want: Vec<Json> = b.iter().map(|o| json!([o.seq, "ok"])).collect();
        assert_eq!(r["result"], Json::Array(want), "{r}");
    }
}

fn create(master: SocketAddr, id: i64, recreate: Option<i64>) -> Json {
    let mut args = json!({"collection": "web", "guarantees": guarantees(&[]), "priority": 0,
                          "external_client": false});
    let method = match recreate {
        Some(sid) => {
            args["id"] = json!(sid);
            "recreate"
        }
        None => "create",
    };
    let r = peer(
        master,
        &[json!({"object": SF, "method": method, "id": id, "args": args})],
    );
    assert!(r[0]["result"]["object_id"].is_string(), "{}", r[0]);
    r[0]["result"].clone()
}

fn addr_of(aor: &Json) -> SocketAddr {
    format!("{}:{}", aor["host"].as_str().unwrap(), aor["port"])
        .parse()
        .unwrap()
}

#[test]
fn acknowledged_ops_survive_sigkill_and_apply_exactly_once() {
    let dir = temp_dir("feed-kill");
    let ns = nameserver(&dir.path().join("ns"));
    let data = dir.path().join("d1");
    let d = distributor(&ns, &data, "127.0.0.1:0");
    settle(&ns, &[1].into());
    let listen = format!("127.0.0.1:{}", d.addr().port() - 390);
    let aor = create(d.addr(), 1, None);
    let session = aor["object_id"].as_str().unwrap().to_owned();
    let sid: i64 = session.rsplit('/').next().unwrap().parse().unwrap();
    let mut seq = 0;
    let mut acked: Vec<Op> = Vec::new();
    let batches: Vec<Vec<Op>> = (0..3).map(|r| round(r, &mut seq)).collect();
    feed_all(addr_of(&aor), &session, &batches, 10);
    acked.extend(batches.into_iter().flatten());
    // SIGKILL right after the last reply, then restart on the same data directory.
    d.kill();
    let d = distributor(&ns, &data, &listen);
    settle(&ns, &[1].into());
    let s = status(&ns);
    assert_eq!(
        s["distributors"][0]["sessions"][0]["id"], sid,
        "the session survives: {s}"
    );
    let again = create(d.addr(), 2, Some(sid));
    assert_eq!(again, aor, "recreate finds the session kept on disk");
    // Resend everything (applied once), then new rounds; an older copy sent late changes
    // nothing.
    let mut resend: Vec<Vec<Op>> = acked.chunks(12).map(<[Op]>::to_vec).collect();
    let old = Op {
        time: 1_600_000_000,
        ..acked[0].clone()
    };
    resend.push(vec![old]);
    resend.extend((3..6).map(|r| round(r, &mut seq)));
    feed_all(addr_of(&again), &session, &resend, 100);
    acked.extend(resend.into_iter().skip(4).flatten());
    let s = status(&ns);
    assert_eq!(s["distributors"][0]["load"], 0, "every op answered: {s}");
    d.kill();
    let _d = distributor(&ns, &data, &listen);

    // The latest acknowledged version of every document, live or removed.
    let mut latest: BTreeMap<String, Op> = BTreeMap::new();
    for o in &acked {
        if latest
            .get(&o.doc)
            .is_none_or(|l| (l.time, l.seq) < (o.time, o.seq))
        {
            latest.insert(o.doc.clone(), o.clone());
        }
    }
    let listed = crawlfleet_json(&[
        "index",
        "--data-dir",
        data.to_str().unwrap(),
        "web",
        "--json",
    ]);
    let got: BTreeMap<String, (i64, i64, String, i64)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let k = d["uri"].as_str().unwrap().to_owned();
            let v = (
                d["time"].as_i64().unwrap(),
                d["seq"].as_i64().unwrap(),
                d["checksum"].as_str().unwrap().to_owned(),
                d["size"].as_i64().unwrap(),
            );
            (k, v)
        })
        .collect();
    let want: BTreeMap<String, (i64, i64, String, i64)> = latest
        .values()
        .filter(|o| o.op != "remove")
        .map(|o| {
            let v = (o.time, o.seq, o.checksum(), o.body().len() as i64);
            (o.doc.clone(), v)
        })
        .collect();
    assert_eq!(got, want);
    assert!(
        latest.values().any(|o| o.op == "remove"),
        "the test removes"
    );
    // Exactly once: every acknowledged version has one record, and nothing else is there.
    let mut records: BTreeMap<(String, i64, i64), usize> = BTreeMap::new();
    reader::scan(&log_path(&data, "web"), 0, |op, _| {
        *records
            .entry((op.doc.clone(), op.time, op.seq as i64))
            .or_default() += 1;
        true
    })
    .unwrap();
    let versions: BTreeSet<(String, i64, i64)> = acked
        .iter()
        .filter(|o| o.time > 1_600_000_000)
        .map(|o| (o.doc.clone(), o.time, o.seq))
        .collect();
    assert!(records.values().all(|&n| n == 1), "{records:?}");
    assert_eq!(records.keys().cloned().collect::<BTreeSet<_>>(), versions);
    // --uri shows one document with its headers.
    let one = &want.keys().next().unwrap().clone();
    let doc = crawlfleet_json(&[
        "index",
        "--data-dir",
        data.to_str().unwrap(),
        "web",
        "--json",
        "--uri",
        one,
    ]);
    assert_eq!(
        doc["headers"],
        json!([["content-type", "text/html"]]),
        "{doc}"
    );
}

#[test]
fn hostile_input_on_a_session_gets_a_typed_error_and_the_distributor_keeps_serving() {
    let dir = temp_dir("feed-hostile");
    let ns = nameserver(&dir.path().join("ns"));
    let d = distributor(&ns, &dir.path().join("d1"), "127.0.0.1:0");
    settle(&ns, &[1].into());
    let aor = create(d.addr(), 1, None);
    let session = aor["object_id"].as_str().unwrap().to_owned();
    let at = addr_of(&aor);
    let here = json!({"connect": [at.ip().to_string(), at.port()]});
    let good = Op {
        seq: 7,
        op: "add",
        doc: "http://a.test/".into(),
        time: 5,
    };
    let mut no_time = good.wire();
    no_time["seq"] = json!(8);
    no_time.as_object_mut().unwrap().remove("time");
    let mut bad_sum = good.wire();
    bad_sum["seq"] = json!(9);
    bad_sum["checksum"] = json!({"$hex": "0011"});
    // A request over 64 KiB is fine on a session (up to 16 MiB), not on dispatcher_node.
    let mut big = good.wire();
    big["seq"] = json!(10);
    big["doc"] = json!("http://big.test/");
    big["body"] = json!({"$b": "x".repeat(1 << 20)});
    let dn = |id: i64| {
        json!({"object": "dispatcher/1/dispatcher_node", "method": "get_load",
                              "id": id, "args": {"pad": "y".repeat(70_000)}})
    };
    let steps = vec![
        // One malformed op fails alone (typed: malformed), the others apply.
        json!({"object": session, "method": "feed", "id": 1,
               "args": {"ops": [good.wire(), no_time, bad_sum, {"seq": 11, "op": "rename", "doc": "x", "time": 1}]}}),
        json!({"object": session, "method": "feed", "id": 2, "args": {"ops": [big]}}),
        // The request itself malformed: bad_request, closed.
        json!({"object": session, "method": "feed", "id": 3, "args": {"ops": "all"}}),
        json!({"eof": true}),
        here.clone(),
        json!({"object": session, "method": "feed", "id": 4, "args": {"ops": []}}),
        json!({"eof": true}),
        here.clone(),
        // An unknown method, an unknown session.
        json!({"object": session, "method": "truncate", "id": 5, "args": {}}),
        json!({"eof": true}),
        here.clone(),
        json!({"object": "dispatcher/1/session/999", "method": "feed", "id": 6, "args": {"ops": [good.wire()]}}),
        json!({"eof": true}),
        here.clone(),
        // Garbage, and a declared length over 16 MiB: closed.
        json!({"raw_hex": "0000000a00112233445566778899"}),
        json!({"eof": true}),
        here.clone(),
        json!({"raw_hex": "01000001ff"}),
        json!({"eof": true}),
        here.clone(),
        dn(7),
        json!({"eof": true}),
        here.clone(),
        // Still serving: the resend is answered ok, and close ends the session.
        json!({"object": session, "method": "feed", "id": 8, "args": {"ops": [good.wire()]}}),
        json!({"object": session, "method": "close", "id": 9, "args": {}}),
        json!({"object": session, "method": "__ping", "id": 10, "args": {}}),
    ];
    let r = peer(d.addr(), &[vec![here.clone()], steps].concat());
    let r = &r[1..];
    let res = &r[0]["result"];
    assert_eq!(res[0], json!([7, "ok"]), "{}", r[0]);
    for (i, seq) in [(1, 8), (2, 9), (3, 11)] {
        assert_eq!(res[i][0], seq, "{}", r[0]);
        assert_eq!(res[i][1], "failed");
        assert!(
            res[i][2].as_str().unwrap().starts_with("malformed: "),
            "{}",
            r[0]
        );
    }
    assert_eq!(r[1]["result"], json!([[10, "ok"]]), "a 1 MiB request");
    assert_eq!(r[2]["exception"], "bad_request", "{}", r[2]);
    assert_eq!(r[3], json!({"closed": true}));
    assert_eq!(r[5]["exception"], "bad_request", "{}", r[5]);
    assert_eq!(r[8]["exception"], "unknown_method", "{}", r[8]);
    assert_eq!(r[11]["exception"], "unknown_object", "{}", r[11]);
    assert_eq!(r[14]["exception"], "bad_frame", "{}", r[14]);
    assert_eq!(r[15], json!({"closed": true}));
    assert_eq!(r[17]["closed"], true, "{}", r[17]);
    assert_eq!(r[20]["exception"], "bad_request", "{}", r[20]);
    assert!(
        r[20]["what"].as_str().unwrap().contains("65536"),
        "{}",
        r[20]
    );
    assert_eq!(r[23]["result"], json!([[7, "ok"]]), "{}", r[23]);
    assert_eq!(r[24]["result"], Json::Null, "{}", r[24]);
    assert_eq!(r[25]["exception"], "unknown_object", "closed: {}", r[25]);
    let s = status(&ns);
    assert_eq!(s["distributors"][0]["indexed"], json!({"web": 2}), "{s}");
    assert_eq!(s["distributors"][0]["load"], 0, "{s}");
}

/// A full disk is an answer: on a 4 MiB tmpfs the ops that do not fit are answered `failed`
/// `disk_full: ...`, the distributor keeps serving, and once room returns (a filler file
/// removed) the same ops sent again are answered ok; every acknowledged op is in the index
/// exactly once. Needs root to mount the tmpfs; says so and passes without checking otherwise.
#[test]
fn a_full_disk_fails_ops_as_disk_full_and_feeding_resumes_when_room_returns() {
    let dir = temp_dir("feed-full");
    let Some(fs) = Tmpfs::mount(&dir.path().join("fs"), 4) else {
        eprintln!("skipped: cannot mount a tmpfs (not root)");
        return;
    };
    let data = fs.0.join("d1");
    let filler = fs.0.join("filler");
    std::fs::write(&filler, vec![1u8; 1 << 20]).unwrap();
    let ns = nameserver(&dir.path().join("ns"));
    let d = distributor(&ns, &data, "127.0.0.1:0");
    settle(&ns, &[1].into());
    let aor = create(d.addr(), 1, None);
    let session = aor["object_id"].as_str().unwrap().to_owned();
    let big = |seq: i64| {
        let o = Op {
            seq,
            op: "add",
            doc: format!("http://big.test/{seq}"),
            time: 7,
        };
        let mut w = o.wire();
        w["body"] = json!({"$b": "z".repeat(100_000)});
        (o, w)
    };
    let steps: Vec<Json> = (0..12)
        .map(|b| {
            let ops: Vec<Json> = (1..=4).map(|i| big(b * 4 + i).1).collect();
            json!({"object": session, "method": "feed", "id": b, "args": {"ops": ops}})
        })
        .collect();
    let mut acked = BTreeSet::new();
    let mut full = Vec::new();
    for r in peer(addr_of(&aor), &steps) {
        for e in r["result"].as_array().unwrap_or_else(|| panic!("{r}")) {
            let seq = e[0].as_i64().unwrap();
            match e[1].as_str() {
                Some("ok") => assert!(acked.insert(seq)),
                _ => {
                    let why = e[2].as_str().unwrap_or_default();
                    assert!(why.starts_with("disk_full: "), "{e}");
                    full.push(seq);
                }
            }
        }
    }
    assert!(!acked.is_empty() && !full.is_empty(), "{acked:?} {full:?}");
    // Room returns: the first failed ops sent again apply (once), with the load back at 0.
    std::fs::remove_file(&filler).unwrap();
    let again: Vec<i64> = full.iter().take(6).copied().collect();
    let ops: Vec<Json> = again.iter().map(|&s| big(s).1).collect();
    let r = peer(
        addr_of(&aor),
        &[json!({"object": session, "method": "feed", "id": 99, "args": {"ops": ops}})],
    );
    let want: Vec<Json> = again.iter().map(|s| json!([s, "ok"])).collect();
    assert_eq!(r[0]["result"], Json::Array(want), "{}", r[0]);
    acked.extend(again);
    let s = status(&ns);
    assert_eq!(s["distributors"][0]["load"], 0, "{s}");
    d.kill();
    let mut records: BTreeMap<i64, usize> = BTreeMap::new();
    reader::scan(&log_path(&data, "web"), 0, |op, _| {
        *records.entry(op.seq as i64).or_default() += 1;
        true
    })
    .unwrap();
    for seq in &acked {
        assert_eq!(records.get(seq), Some(&1), "op {seq}: {records:?}");
    }
}

#[test]
fn add_collection_from_the_command_line_by_address_or_node_id() {
    let dir = temp_dir("feed-addcoll");
    let ns = nameserver(&dir.path().join("ns"));
    let d = distributor(&ns, &dir.path().join("d1"), "127.0.0.1:0");
    settle(&ns, &[1].into());
    let run = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
            .args(["distributor", "add-collection"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
    };
    run(&["--distributor", &d.addr().to_string(), "news"]);
    run(&[
        "--nameserver",
        &ns.addr().to_string(),
        "--node-id",
        "1",
        "blogs",
    ]);
    let s = status(&ns);
    assert_eq!(
        s["distributors"][0]["collections"],
        json!(["blogs", "news", "web"]),
        "{s}"
    );
    assert_eq!(
        s["distributors"][0]["indexed"],
        json!({"blogs": 0, "news": 0, "web": 0})
    );
    // A session of the new collection feeds into its own index.
    let args = json!({"collection": "news", "guarantees": guarantees(&[]), "priority": 0,
                      "external_client": true});
    let r = peer(
        d.addr(),
        &[json!({"object": SF, "method": "create", "id": 1, "args": args})],
    );
    let aor = &r[0]["result"];
    assert_eq!(aor["port"], d.addr().port() + 1, "{aor}");
    let op = Op {
        seq: 1,
        op: "add",
        doc: "http://news.test/".into(),
        time: 1,
    };
    feed_all(
        addr_of(aor),
        aor["object_id"].as_str().unwrap(),
        &[vec![op]],
        1,
    );
    let s = status(&ns);
    assert_eq!(s["distributors"][0]["indexed"]["news"], 1, "{s}");
}
