//! The node scheduler as a real process on loopback (MS-FSCMT 3.1.5), with the test as its
//! multinode scheduler and duplicate server, and a fleet of one real multinode scheduler and
//! three real node schedulers; crawl queues are read back from the data directory after SIGKILL.

use super::*;

struct FakePeer {
    listener: TcpListener,
}

impl FakePeer {
    fn new() -> FakePeer {
        FakePeer {
            listener: TcpListener::bind("127.0.0.1:0").unwrap(),
        }
    }
    fn addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap()
    }
    fn accept(&self) -> Client {
        self.listener.set_nonblocking(false).unwrap();
        let (s, _) = self.listener.accept().unwrap();
        Client::from_stream(s)
    }
}

fn node(data: &Path, mn: SocketAddr, id: &str) -> Role {
    Role::start(&[
        "node",
        "--node-id",
        id,
        "--multinode",
        &mn.to_string(),
        "--admin",
        "127.0.0.1:15111",
        "--data-dir",
        data.to_str().unwrap(),
        "--sync-ms",
        "20",
        "--quarantine-interval",
        "0.2",
    ])
}

fn conf(name: &str, dict: Value<'static>) -> Message<'static> {
    Message::CmdAdmConfAdd(ConfSpec {
        collection: b(name),
        config: dict,
        epoch: None,
    })
}

fn dict_with(sites: &[&str], dup: Option<SocketAddr>) -> Value<'static> {
    let xml_dir = temp_dir(&format!("cfg-{}", fastrand::u32(..)));
    let p = config_xml(xml_dir.path(), "c", 0, dup);
    let mut d = crawlfleet_core::config::parse_xml(&std::fs::read_to_string(p).unwrap())
        .unwrap()
        .remove(0)
        .1;
    if let Value::Dict(pairs) = &mut d {
        pairs.retain(|(k, _)| k.as_bytes() != Some(b"start_uris"));
        let list = sites
            .iter()
            .map(|s| Value::owned_bytes(s.as_bytes().to_vec()))
            .collect();
        pairs.push((
            Value::owned_bytes(b"start_uris".to_vec()),
            Value::list(list),
        ));
    }
    d
}

/// The entries in a node's crawl queue for `coll` (read after the node was killed).
fn queued(data: &Path, coll: &str) -> Vec<(String, bool)> {
    let dir = collection_dir(data, coll.as_bytes());
    let mut q = CrawlQueue::open(&dir.join("queue"), QueueOptions::default()).unwrap();
    // Entries the node had taken and not finished are journaled; a restart queues them again
    // at the front, as done here.
    let (mut j, pending) = crawlfleet_core::sched::inflight::Inflight::open(
        &dir.join("inflight"),
        q.resumed_generation(),
    )
    .unwrap();
    for r in pending.iter().rev() {
        q.push_front(r).unwrap();
    }
    q.sync().unwrap();
    j.reset().unwrap();
    let mut out = Vec::new();
    while let Some(rec) = q.pop_front().unwrap() {
        let (e, urgent) = parse_record(&rec).unwrap();
        out.push((String::from_utf8_lossy(&e.uri.uri).into_owned(), urgent));
    }
    out
}

#[test]
fn a_node_registers_answers_routes_and_its_queue_survives_sigkill() {
    let dir = temp_dir("node-basic");
    let data = dir.path().join("data");
    let fake_mn = FakePeer::new();
    let fake_dup = FakePeer::new();
    let n = node(&data, fake_mn.addr(), "n1");
    let mut mn = fake_mn.accept();
    // 2.2.4.1: INIT first, with the node id and the admin port.
    let m = mn.recv().unwrap();
    assert_eq!(m, init_of("n1", 15111));
    mn.send(&conf("web", dict_with(&[], Some(fake_dup.addr()))));
    // 3.1.5.11 via CONF_ADD: the duplicate server gets PPDUP_SET_CONFIG with vector clock 1.
    let mut dup = fake_dup.accept();
    let m = wait_dup(&mut dup, |m| matches!(m, Message::PpdupSetConfig(_)));
    let Message::PpdupSetConfig(sc) = m else {
        unreachable!()
    };
    assert_eq!(sc.vclock, 1);
    assert_eq!(sc.collection.as_deref(), Some(&b"web"[..]));
    assert!(
        sc.config
            .get(b"web")
            .and_then(|s| s.get(b"dupservers"))
            .is_some(),
        "only the ppdup section: {sc:?}"
    );
    // Routes: one to us, one elsewhere (3.1.5.7); ASK_ROUTE lists both, then LAST_ROUTE (3.1.5.8).
    for (node_id, attr) in [("n1", "mine.com"), ("n2", "theirs.com")] {
        mn.send(&Message::CmdUmAddRoute(AddRoute {
            collection: b("web"),
            node_id: b(node_id),
            routing_attr: b(attr),
            site: b(&format!("www.{attr}")),
            addrinfo: None,
            ttl: 0,
        }));
    }
    mn.send(&Message::CmdUmAskRoute(CollectionOnly {
        collection: b("web"),
    }));
    let m = wait_for(&mut mn, "ADD_ROUTE list", |m| {
        matches!(m, Message::CmdUmAddRoutes(_))
    });
    let Message::CmdUmAddRoutes(r) = m else {
        unreachable!()
    };
    let got: BTreeSet<(Vec<u8>, Vec<u8>)> = r
        .routes
        .iter()
        .map(|(a, n)| (a.to_vec(), n.to_vec()))
        .collect();
    assert_eq!(
        got,
        BTreeSet::from([
            (b"mine.com".to_vec(), b"n1".to_vec()),
            (b"theirs.com".to_vec(), b"n2".to_vec())
        ])
    );
    wait_for(&mut mn, "LAST_ROUTE", |m| {
        matches!(m, Message::CmdUmLastRoute(_))
    });
    // CONF_UPDATE: SET_CONFIG with the next clock; start URIs requeued: ours stay local, the
    // others go to the multinode scheduler (3.1.5.11, 3.1 forward links).
    mn.send(&Message::CmdAdmConfUpdate(ConfSpec {
        collection: b("web"),
        config: dict_with(
            &[
                "http://www.mine.com/",
                "http://www.theirs.com/",
                "http://new.net/",
            ],
            Some(fake_dup.addr()),
        ),
        epoch: None,
    }));
    let m = wait_dup(&mut dup, |m| matches!(m, Message::PpdupSetConfig(_)));
    let Message::PpdupSetConfig(sc) = m else {
        unreachable!()
    };
    assert_eq!(sc.vclock, 2);
    let mut forwarded = BTreeSet::new();
    while forwarded.len() < 2 {
        let m = wait_for(&mut mn, "forwarded start URIs", |m| {
            matches!(m, Message::CmdUmUri(_))
        });
        let Message::CmdUmUri(u) = m else {
            unreachable!()
        };
        forwarded.insert(String::from_utf8_lossy(&u.entry.uri.uri).into_owned());
    }
    assert_eq!(
        forwarded,
        BTreeSet::from([
            "http://new.net/".to_string(),
            "http://www.theirs.com/".to_string()
        ])
    );
    // 3.1.5.2 / 3.1.5.3: URIs to the back, URGs to the front.
    for i in 0..500 {
        mn.send(&Message::CmdUmUri(UriMsg {
            collection: b("web"),
            entry: entry(&format!("http://www.mine.com/{i}")),
        }));
    }
    mn.send(&Message::CmdUmUriUrg(UriMsg {
        collection: b("web"),
        entry: entry("http://www.mine.com/urgent"),
    }));
    // The keep-alive round trip shows every frame before it was handled (3.1.5.1).
    mn.send(&Message::CmdUmKeepalive);
    wait_for(&mut mn, "KEEPALIVE_ACK", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
    // PPDUP_KEEPALIVE from the duplicate server is answered (3.1.5.27).
    dup.send(&Message::PpdupKeepalive);
    wait_dup(&mut dup, |m| *m == Message::PpdupKeepaliveAck);
    std::thread::sleep(Duration::from_millis(300)); // several 20 ms sync points
    n.kill(); // SIGKILL
    let q = queued(&data, "web");
    // Nothing lost: what the node had taken from its queue (the start URI, waiting for its
    // name) comes back first, then the urgent entry at the front of the queue, then the rest in
    // order.
    assert_eq!(q.len(), 502, "start URI + 500 + urgent");
    assert!(q.contains(&("http://www.mine.com/urgent".to_string(), true)));
    let rest: Vec<&str> = q
        .iter()
        .map(|(u, _)| u.as_str())
        .filter(|u| !u.ends_with("/urgent") && *u != "http://www.mine.com/")
        .collect();
    assert_eq!(rest.len(), 500);
    for (i, u) in rest.iter().enumerate() {
        assert_eq!(*u, format!("http://www.mine.com/{i}"));
    }
    // Restarted on the same data dir, it registers again and still knows its routes.
    let _n = node(&data, fake_mn.addr(), "n1");
    let mut mn = fake_mn.accept();
    assert_eq!(mn.recv().unwrap(), init_of("n1", 15111));
    mn.send(&Message::CmdUmAskRoute(CollectionOnly {
        collection: b("web"),
    }));
    let m = wait_for(&mut mn, "ADD_ROUTE list", |m| {
        matches!(m, Message::CmdUmAddRoutes(_))
    });
    let Message::CmdUmAddRoutes(r) = m else {
        unreachable!()
    };
    assert_eq!(r.routes.len(), 2);
    // 3.1.5.12: CONF_REMOVE: PPDUP_CONF_REMOVE and CONF_REMOVE2 to the duplicate server, then
    // DELETE_OK, and the collection's files are gone.
    let mut dup = fake_dup.accept();
    wait_dup(&mut dup, |m| matches!(m, Message::PpdupSetConfig(_)));
    mn.send(&Message::CmdAdmConfRemove(CollectionOnly {
        collection: b("web"),
    }));
    wait_dup(&mut dup, |m| matches!(m, Message::PpdupConfRemove(_)));
    wait_dup(&mut dup, |m| matches!(m, Message::PpdupConfRemove2(_)));
    let m = wait_for(&mut mn, "DELETE_OK", |m| {
        matches!(m, Message::CmdUmDeleteOk(_))
    });
    assert_eq!(
        m,
        Message::CmdUmDeleteOk(CollectionOnly {
            collection: b("web")
        })
    );
    assert!(!collection_dir(&data, b"web").exists());
}

fn init_of(node: &str, port: i64) -> Message<'static> {
    Message::CmdUmInit(Init {
        node_id: b(node),
        xmlrpc_host: b("127.0.0.1"),
        xmlrpc_port: port,
    })
}

fn wait_dup(c: &mut Client, want: impl Fn(&Message<'static>) -> bool) -> Message<'static> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < deadline);
        let m = c
            .recv()
            .expect("the node stays connected to the duplicate server");
        if want(&m) {
            return m;
        }
    }
}

#[test]
fn a_node_suspends_quarantines_and_deletes_over_the_wire() {
    let dir = temp_dir("node-admin");
    let data = dir.path().join("data");
    let fake_mn = FakePeer::new();
    let n = node(&data, fake_mn.addr(), "n1");
    let mut mn = fake_mn.accept();
    assert_eq!(mn.recv().unwrap(), init_of("n1", 15111));
    mn.send(&conf("web", dict_with(&[], None)));
    for i in 0..10 {
        let site = if i % 2 == 0 { "a.com" } else { "b.com" };
        mn.send(&Message::CmdUmUri(UriMsg {
            collection: b("web"),
            entry: entry(&format!("http://{site}/{i}")),
        }));
    }
    // 3.1.5.16: delete two URIs; 3.1.5.15: delete a whole site.
    mn.send(&Message::CmdUmDeleteUris(
        crawlfleet_core::msg::DeleteUris {
            collection: b("web"),
            uris: vec![(b("a.com"), vec![b("http://a.com/0"), b("http://a.com/2")])],
            info: vec![(
                Value::owned_bytes(b"errcode".to_vec()),
                Value::owned_bytes(b"USR".to_vec()),
            )],
        },
    ));
    mn.send(&Message::CmdUmDeleteSite(
        crawlfleet_core::msg::DeleteSite {
            collection: b("web"),
            site: b("b.com"),
        },
    ));
    // 3.1.5.18: quarantine with requeue puts the site's entries at the front; c.com has none
    // here, and nothing is queued for it (its root page was, before: nobody asked for it).
    mn.send(&Message::CmdUmQuarantineSiteRequeue(Quarantine {
        collection: b("web"),
        site: b("c.com"),
        seconds: 60,
    }));
    // 3.1.5.4: suspend (state 4), persisted.
    mn.send(&Message::CmdAdmConfSuspend(
        crawlfleet_core::msg::ConfSuspend {
            collection: b("web"),
            state: 4,
        },
    ));
    mn.send(&Message::CmdUmKeepalive);
    wait_for(&mut mn, "KEEPALIVE_ACK", |m| {
        *m == Message::CmdUmKeepaliveAck
    });
    std::thread::sleep(Duration::from_millis(300));
    n.kill();
    let q: Vec<String> = queued(&data, "web").into_iter().map(|(u, _)| u).collect();
    assert_eq!(
        q,
        vec!["http://a.com/4", "http://a.com/6", "http://a.com/8"]
    );
    let meta = crawlfleet_core::sched::node::read_meta(&collection_dir(&data, b"web").join("meta"))
        .unwrap();
    assert_eq!(meta.get(b"state").and_then(Value::as_i64), Some(4));
}

fn routes_of(data: &Path, coll: &str) -> BTreeMap<String, String> {
    // A copy, so the running node's file is never touched.
    let copy = temp_dir(&format!("routes-copy-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&copy).unwrap();
    let _ = std::fs::copy(data.join("routes"), copy.path().join("routes"));
    let db = crawlfleet_core::routing::RoutingDb::open(&copy.path().join("routes")).unwrap();
    db.routes(coll.as_bytes())
        .map(|(a, n)| {
            (
                String::from_utf8_lossy(a).into_owned(),
                String::from_utf8_lossy(n).into_owned(),
            )
        })
        .collect()
}

#[test]
fn one_multinode_and_three_nodes_route_every_site_once_and_a_killed_node_comes_back() {
    let dir = temp_dir("cluster");
    let cfg = config_xml(dir.path(), "web", 30, None);
    let mn = multinode(&dir.path().join("mn"), &[&cfg], &[]);
    let ids = ["n1", "n2", "n3"];
    let data: Vec<PathBuf> = ids.iter().map(|i| dir.path().join(i)).collect();
    let mut nodes: Vec<Option<Role>> = ids
        .iter()
        .zip(&data)
        .map(|(id, d)| Some(node(d, mn.addr(), id)))
        .collect();
    // Every node learns all 30 routes (CMD_UM_ADD_ROUTE to every node, persisted by each).
    let deadline = Instant::now() + Duration::from_secs(30);
    while data.iter().any(|d| routes_of(d, "web").len() < 30) {
        assert!(Instant::now() < deadline, "routes did not reach every node");
        std::thread::sleep(Duration::from_millis(100));
    }
    let table = routes_of(&data[0], "web");
    for d in &data[1..] {
        assert_eq!(routes_of(d, "web"), table);
    }
    std::thread::sleep(Duration::from_millis(500)); // the nodes' 20 ms sync points
                                                    // Kill n2 and bring it back on the same data dir: it registers again.
    nodes[1].take().unwrap().kill();
    nodes[1] = Some(node(&data[1], mn.addr(), "n2"));
    // A probe node sends a link to a site of n2; it reaches the new n2.
    let (mut probe, _) = register(mn.addr(), "probe");
    answer_ask(&mut probe);
    let n2_site = table
        .iter()
        .find(|(_, n)| *n == "n2")
        .map(|(a, _)| a.clone())
        .unwrap();
    let link = format!("http://www.{n2_site}/after-restart");
    probe.send(&Message::CmdUmUri(UriMsg {
        collection: b("web"),
        entry: entry(&link),
    }));
    // Node schedulers crawl what they are given (here the names do not resolve, so the entries
    // end quickly); what each took in is in its seen set, synced with its queue.
    let seen_by = |d: &Path, u: &str| {
        crawlfleet_core::sched::seen::SeenSet::open(&collection_dir(d, b"web").join("seen"))
            .unwrap()
            .contains(u.as_bytes())
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        for n in nodes.iter_mut() {
            n.take().unwrap().kill();
        }
        if seen_by(&data[1], &link) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted n2 never got {link}"
        );
        nodes = ids
            .iter()
            .zip(&data)
            .map(|(id, d)| Some(node(d, mn.addr(), id)))
            .collect();
    }
    // Each URI reached only the node its site is routed to.
    let mut uris: Vec<String> = (0..30)
        .map(|i| format!("http://www.site{i}.com/"))
        .collect();
    uris.push(link.clone());
    for u in &uris {
        let attr = u
            .trim_start_matches("http://www.")
            .split('/')
            .next()
            .unwrap();
        let at: Vec<&str> = ids
            .iter()
            .zip(&data)
            .filter(|(_, d)| seen_by(d, u))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(at, [table[attr].as_str()], "{u} reached {at:?}");
    }
    for id in ids {
        assert_eq!(table.values().filter(|n| *n == id).count(), 10, "{table:?}");
    }
}
