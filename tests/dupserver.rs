//! The duplicate server and replica as real processes on loopback (MS-FSCMT 3.3.5, 3.4.5):
//! sequencing over sockets, persistence across SIGKILL, the replica holding every acknowledged
//! add, hostile input, and the replica's lag as `/metrics` shows it while the replica stalls.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::util::{temp_dir, Client, Role};

use crawlfleet_core::frame::{self, Priority};
use crawlfleet_core::marshal::Value;
use crawlfleet_core::msg::{Checksum, Message, PpdupChecksum, PpdupSetConfig};

fn dupserver(dir: &Path, extra: &[&str]) -> Role {
    let mut args = vec![
        "dupserver",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    Role::start(&args)
}

fn dupreplica(dir: &Path) -> Role {
    Role::start(&[
        "dupreplica",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir.to_str().unwrap(),
    ])
}

/// Asks the server at `addr`, as another node, to add checksums 0..n with other URIs: each
/// answer must name the URI node "na" added first (`http://a/<i>`) as the owner.
fn assert_owned_by_a(addr: SocketAddr, n: u32) {
    let mut b = Client::connect(addr);
    let probes: Vec<_> = (0..n)
        .map(|i| add("c", "nb", format!("http://b/{i}"), cs(i)))
        .collect();
    b.send_many(&probes);
    for i in 0..n {
        assert_eq!(owner_of(&b.recv_reply()), format!("http://a/{i}"));
    }
}

fn set_config(coll: &str) -> Message<'static> {
    Message::PpdupSetConfig(PpdupSetConfig {
        config: Value::Dict(vec![(
            Value::owned_bytes(coll.as_bytes().to_vec()),
            Value::Dict(vec![]),
        )]),
        vclock: 1,
        collection: None,
    })
}

fn cs(i: u32) -> Checksum {
    let mut c = [0xa5u8; 16];
    c[..4].copy_from_slice(&i.to_le_bytes());
    Checksum(c)
}

fn add(coll: &str, node: &str, uri: String, c: Checksum) -> Message<'static> {
    Message::PpdupAdd(PpdupChecksum {
        collection: coll.as_bytes().to_vec().into(),
        node_id: node.as_bytes().to_vec().into(),
        uri: uri.into_bytes().into(),
        checksum: c,
        ppdup_id: None,
        dbname: None,
    })
}

fn owner_of(m: &Message<'_>) -> String {
    match m {
        Message::PpdupAddOk(ok) => String::from_utf8_lossy(ok.owner_uri.as_deref().unwrap()).into(),
        other => panic!("expected PPDUP_ADD_OK, got {other:?}"),
    }
}

#[test]
fn owner_rule_and_promote_over_sockets() {
    let dir = temp_dir("owner");
    let server = dupserver(dir.path(), &[]);
    let mut a = Client::connect(server.addr());
    let mut b = Client::connect(server.addr());
    a.send(&set_config("c"));
    assert!(matches!(a.recv_reply(), Message::PpdupConfigAck(ack) if ack.vclock == 1));
    b.send(&set_config("c"));
    b.recv_reply();
    a.send(&add("c", "na", "http://a/".into(), cs(1)));
    assert_eq!(owner_of(&a.recv_reply()), "http://a/");
    b.send(&add("c", "nb", "http://b/".into(), cs(1)));
    assert_eq!(owner_of(&b.recv_reply()), "http://a/");
    let mut rm = add("c", "na", "http://a/".into(), cs(1));
    if let Message::PpdupAdd(x) = rm {
        rm = Message::PpdupRemove(x);
    }
    a.send(&rm);
    let mut got_a = [a.recv_reply(), a.recv_reply()];
    got_a.sort_by_key(|m| m.command() as i64);
    assert!(matches!(got_a[0], Message::PpdupRemoveOk(_)));
    assert!(matches!(&got_a[1], Message::PpdupPromoteReq(p) if p.checksum == cs(1)));
    assert!(matches!(b.recv_reply(), Message::PpdupPromoteReq(p) if p.checksum == cs(1)));
    // Unknown collection: PPDUP_ERROR, and the connection stays.
    a.send(&add("nope", "na", "http://a/".into(), cs(2)));
    assert!(
        matches!(&a.recv_reply(), Message::PpdupError(e) if &e.why[..] == b"unknown collection")
    );
    a.send(&Message::PpdupKeepalive);
    assert!(matches!(a.recv_reply(), Message::PpdupKeepaliveAck));
}

#[test]
fn acknowledged_adds_survive_sigkill() {
    let dir = temp_dir("sigkill");
    let server = dupserver(dir.path(), &[]);
    let mut a = Client::connect(server.addr());
    a.send(&set_config("c"));
    a.recv_reply();
    let n = 20_000u32;
    let batch: Vec<_> = (0..n)
        .map(|i| add("c", "na", format!("http://a/{i}"), cs(i)))
        .collect();
    a.send_many(&batch);
    for _ in 0..n {
        assert!(matches!(a.recv_reply(), Message::PpdupAddOk(_)));
    }
    server.kill();
    let server = dupserver(dir.path(), &[]);
    assert_owned_by_a(server.addr(), n);
}

#[test]
fn the_replica_holds_every_acknowledged_add_when_the_server_dies() {
    let rdir = temp_dir("replica-r");
    let sdir = temp_dir("replica-s");
    let replica = dupreplica(rdir.path());
    let raddr = replica.addr().to_string();
    let server = dupserver(sdir.path(), &["--replica", &raddr]);
    let mut a = Client::connect(server.addr());
    a.send(&set_config("c"));
    a.recv_reply();
    let n = 5_000u32;
    let batch: Vec<_> = (0..n)
        .map(|i| add("c", "na", format!("http://a/{i}"), cs(i)))
        .collect();
    a.send_many(&batch);
    for i in 0..n {
        assert_eq!(owner_of(&a.recv_reply()), format!("http://a/{i}"));
    }
    server.kill();
    // A node scheduler failing over asks the replica directly.
    assert_owned_by_a(replica.addr(), n);
}

#[test]
fn hostile_input_closes_only_its_own_connection() {
    let dir = temp_dir("hostile");
    let server = dupserver(dir.path(), &[]);
    let mut good = Client::connect(server.addr());
    good.send(&set_config("c"));
    good.recv_reply();
    // A client that never reads, flooding keep-alives.
    let mut deaf = TcpStream::connect(server.addr()).unwrap();
    let mut flood = Vec::new();
    for _ in 0..20_000 {
        frame::encode_message(&Message::PpdupKeepalive, Priority::Normal, &mut flood);
    }
    deaf.write_all(&flood).unwrap();
    // Tuples nested 100 deep (the limit is 64).
    let mut deep = b"(\x01\x00\x00\x00".repeat(100);
    deep.push(b'N');
    let deep_frame = [&(deep.len() as u32).to_be_bytes()[..], &deep].concat();
    let hostile: [&[u8]; 3] = [
        b"\xff\xff\xff\xffgarbage", // huge length prefix
        b"\x00\x00\x00\x05hello",   // garbage body
        &deep_frame,
    ];
    for bytes in hostile {
        let mut bad = Client::connect(server.addr());
        bad.stream.write_all(bytes).unwrap();
        assert!(
            bad.recv().is_none(),
            "the server closes a connection sending {bytes:?}"
        );
    }
    good.send(&add("c", "na", "http://a/".into(), cs(7)));
    assert_eq!(owner_of(&good.recv_reply()), "http://a/");
    drop(deaf);
}

#[test]
fn an_unusable_data_dir_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_crawlfleet"))
        .args([
            "dupserver",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            "/proc/version",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("data dir /proc/version"));
}

#[test]
fn the_failover_client_loses_no_acknowledged_add_when_the_server_is_killed_under_load() {
    use crawlfleet_net::{Event, EventLoop, TimerId};
    use crawlfleet_shells::dupclient::{DupClient, Target};

    let rdir = temp_dir("failover-r");
    let sdir = temp_dir("failover-s");
    let replica = dupreplica(rdir.path());
    let raddr = replica.addr().to_string();
    let server = dupserver(sdir.path(), &["--replica", &raddr]);
    let lp = EventLoop::builder().spawn().unwrap();
    let tick = Duration::from_millis(200);
    lp.handle.set_timer(TimerId(1), tick, Some(tick)).unwrap();
    let mut client =
        DupClient::new(lp.handle.clone(), server.addr(), Some(replica.addr()), 2).unwrap();
    client.send(&set_config("c")).unwrap();

    let total = 30_000u32;
    let kill_at = 10_000u32;
    let window = 500u32;
    let mut next = 0u32;
    let mut acked = 0u32;
    let mut server = Some(server);
    let started = std::time::Instant::now();
    while acked < total {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "stalled at {acked} acks"
        );
        while next < total && next - acked < window {
            client
                .send(&add("c", "na", format!("http://a/{next}"), cs(next)))
                .unwrap();
            next += 1;
        }
        let ev = lp
            .events
            .recv_timeout(Duration::from_secs(5))
            .expect("events keep coming");
        if let Event::Timer(_) = ev {
            client.on_keepalive().unwrap();
            continue;
        }
        for m in client.on_event(ev).unwrap() {
            match m {
                Message::PpdupAddOk(ok) => {
                    // Answers come in order: this one is for checksum `acked`.
                    assert_eq!(&ok.uri[..], format!("http://a/{acked}").as_bytes());
                    assert_eq!(ok.owner_uri.as_deref(), Some(&ok.uri[..]));
                    acked += 1;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        if acked >= kill_at {
            if let Some(s) = server.take() {
                s.kill(); // SIGKILL, mid-stream: hundreds of adds are in flight
            }
        }
    }
    assert_eq!(client.target(), Target::Replica);
    lp.handle.shutdown().unwrap();
    // Every acknowledged add is in the replica.
    assert_owned_by_a(replica.addr(), total);
}

#[test]
fn conf_remove_discards_until_conf_remove2_over_sockets() {
    use crawlfleet_core::msg::{CollectionOnly, PpdupConfRemove};
    // MS-FSCMT 3.3.5.2 and 3.3.5.3 (figure 13).
    let dir = temp_dir("confremove");
    let server = dupserver(dir.path(), &[]);
    let mut a = Client::connect(server.addr());
    a.send(&set_config("c"));
    a.recv_reply();
    a.send(&add("c", "na", "http://a/".into(), cs(1)));
    assert_eq!(owner_of(&a.recv_reply()), "http://a/");
    a.send(&Message::PpdupConfRemove(PpdupConfRemove {
        collection: b"c".to_vec().into(),
        ppdup_id: None,
    }));
    a.send(&add("c", "na", "http://a/".into(), cs(2)));
    // The add was discarded: the next answer is the keep-alive's.
    a.send(&Message::PpdupKeepalive);
    assert!(matches!(a.recv_reply(), Message::PpdupKeepaliveAck));
    a.send(&Message::PpdupConfRemove2(CollectionOnly {
        collection: b"c".to_vec().into(),
    }));
    a.send(&add("c", "na", "http://a/".into(), cs(2)));
    assert!(
        matches!(&a.recv_reply(), Message::PpdupError(e) if &e.why[..] == b"unknown collection")
    );
    // Configured again, the collection starts empty.
    a.send(&set_config("c"));
    a.recv_reply();
    a.send(&add("c", "nb", "http://b/".into(), cs(1)));
    assert_eq!(owner_of(&a.recv_reply()), "http://b/");
}

/// A sample of `/metrics` at `addr` (the first of that name).
fn metric(addr: &str, name: &str) -> Option<f64> {
    let (status, _, text) = crate::metrics::get(addr, "/metrics");
    assert_eq!(status, 200);
    crawlfleet_core::metrics::parse(&text)
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| s.value)
}

/// Sends `sig` (STOP or CONT) to process `pid`.
fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

#[test]
fn the_replicas_lag_in_seconds_grows_while_it_stalls_and_clears_when_it_answers() {
    let rdir = temp_dir("lag-r");
    let sdir = temp_dir("lag-s");
    let replica = dupreplica(rdir.path());
    let metrics = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let raddr = replica.addr().to_string();
    let server = dupserver(
        sdir.path(),
        &["--replica", &raddr, "--metrics-listen", &metrics],
    );
    let lag = |unit: &str| {
        metric(
            &metrics,
            &format!("crawlfleet_dupserver_replica_lag_{unit}"),
        )
        .unwrap()
    };
    crate::util::wait_until("the replica connected", || {
        metric(&metrics, "crawlfleet_dupserver_replica_connected") == Some(1.0)
    });
    let mut a = Client::connect(server.addr());
    a.send(&set_config("c"));
    a.recv_reply();
    a.send(&add("c", "na", "http://a/0".into(), cs(0)));
    assert_eq!(owner_of(&a.recv_reply()), "http://a/0");
    crate::util::wait_until("nothing pending", || lag("seconds") == 0.0);

    // The replica stalls: a new checksum is forwarded and waits for its PPDUP_ADD_OK
    // (MS-FSCMT 3.3.5.4), and its age is the lag.
    let pid = replica.child.id();
    signal(pid, "STOP");
    a.send(&add("c", "na", "http://a/1".into(), cs(1)));
    crate::util::wait_until("a lag of half a second", || {
        lag("messages") == 1.0 && lag("seconds") >= 0.5
    });
    let first = lag("seconds");
    crate::util::wait_until("the lag to grow", || lag("seconds") > first);
    signal(pid, "CONT");
    assert_eq!(owner_of(&a.recv_reply()), "http://a/1");
    crate::util::wait_until("the lag to clear", || {
        lag("seconds") == 0.0 && lag("messages") == 0.0
    });
}
