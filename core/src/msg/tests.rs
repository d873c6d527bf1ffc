//! Round trips of every message shape, and the errors of MS-FSCMT 2.2.1.1 keys.

use std::borrow::Cow;

use super::types::{conf_state, queue_flags, refresh_options, uri_flags};
use super::*;
use crate::marshal::{IntForm, StrForm};

fn b(s: &'static str) -> Bytes<'static> {
    Cow::Borrowed(s.as_bytes())
}

fn uri() -> UriStructure<'static> {
    UriStructure {
        uri: b("http://www.contoso.com/a?b"),
        scheme: b("http"),
        netloc: b("www.contoso.com"),
        host: b("www.contoso.com"),
        port: Some(80),
        path: b("/a"),
        query: b("b"),
        default_scheme: b("http"),
        skip_fragments: true,
        parsed: true,
        host_idna: b("www.contoso.com"),
        ..Default::default()
    }
}

fn addr() -> AddrInfo<'static> {
    AddrInfo {
        family: 2,
        socktype: 1,
        protocol: 6,
        canonname: b("www.contoso.com"),
        address: b("192.0.2.10"),
        port: 0,
    }
}

/// One message of every variant, with optional fields both present and absent.
pub(crate) fn samples() -> Vec<Message<'static>> {
    let c = || b("example");
    let mut entry = CrawlQueueEntry::new(uri());
    entry.uri_flags = uri_flags::URIF_STARTURI | uri_flags::URIF_REDIRECT_301;
    entry.queue_flags = queue_flags::QF_PREPEND;
    entry.redirects.push(Redirect {
        from: b("http://contoso.com/"),
        kind: uri_flags::URIF_REDIRECT_301,
    });
    entry.extra.push((
        Value::bytes(b"title"),
        Value::Bytes(Cow::Borrowed(b"News"), StrForm::Plain),
    ));
    let cs = Checksum(*b"0123456789abcdef");
    let config = Value::Dict(vec![(
        Value::bytes(b"example"),
        Value::Dict(vec![(Value::bytes(b"delay"), Value::int(60))]),
    )]);
    vec![
        Message::CmdUmKeepalive,
        Message::CmdUmKeepaliveAck,
        Message::PpdupKeepalive,
        Message::PpdupKeepaliveAck,
        Message::CmdUmUri(UriMsg {
            collection: c(),
            entry: entry.clone(),
        }),
        Message::CmdUmUriUrg(UriMsg {
            collection: c(),
            entry,
        }),
        Message::CmdAdmConfSuspend(ConfSuspend {
            collection: c(),
            state: conf_state::SUSPENDED_USER,
        }),
        Message::CmdAdmConfResume(CollectionOnly { collection: c() }),
        Message::CmdAdmConfFeedingSuspend(FeedingSuspend {
            collection: c(),
            suspend: true,
            destinations: None,
        }),
        Message::CmdAdmConfFeedingSuspend(FeedingSuspend {
            collection: c(),
            suspend: false,
            destinations: Some(vec![b("default: news")]),
        }),
        Message::CmdUmAddRoute(AddRoute {
            collection: c(),
            node_id: b("49-47-67-86"),
            routing_attr: b("contoso.com"),
            site: b("www.contoso.com"),
            addrinfo: Some(vec![addr()]),
            ttl: 86400,
        }),
        Message::CmdUmAddRoute(AddRoute {
            collection: c(),
            node_id: b("n1"),
            routing_attr: b("contoso.com"),
            site: b("www.contoso.com"),
            addrinfo: None,
            ttl: 60,
        }),
        Message::CmdUmAddRoutes(RouteList {
            collection: c(),
            routes: vec![(b("contoso.com"), b("n1")), (b("fabrikam.com"), b("n2"))],
        }),
        Message::CmdUmAddRoutes(RouteList {
            collection: c(),
            routes: vec![],
        }),
        Message::CmdUmAskRoute(CollectionOnly { collection: c() }),
        Message::CmdAdmConfRefresh(ConfRefresh {
            collection: c(),
            subcollection: None,
            options: refresh_options::REFRESH_COLLECTION,
        }),
        Message::CmdAdmConfRefresh(ConfRefresh {
            collection: c(),
            subcollection: Some(b("sub")),
            options: refresh_options::REFRESH_SUBCOLLECTION,
        }),
        Message::CmdAdmConfAdd(ConfSpec {
            collection: c(),
            config: config.clone(),
            epoch: Some(3),
        }),
        Message::CmdAdmConfUpdate(ConfSpec {
            collection: c(),
            config: config.clone(),
            epoch: None,
        }),
        Message::CmdAdmConfRemove(CollectionOnly { collection: c() }),
        Message::CmdAdmPreemptSite(PreemptSite {
            collection: c(),
            site: b("www.contoso.com"),
            requeue: true,
        }),
        Message::CmdUmReprocessSite(ReprocessSite {
            collection: c(),
            site: b("www.contoso.com"),
            prefix: b("http://www.contoso.com/news/"),
            destination: None,
            exact: false,
        }),
        Message::CmdUmReprocessSite(ReprocessSite {
            collection: c(),
            site: b("www.contoso.com"),
            prefix: b("http://www.contoso.com/a"),
            destination: Some(b("default: news")),
            exact: true,
        }),
        Message::CmdUmDeleteSite(DeleteSite {
            collection: c(),
            site: b("www.contoso.com"),
        }),
        Message::CmdUmDeleteUris(DeleteUris {
            collection: c(),
            uris: vec![(b("www.contoso.com"), vec![b("http://www.contoso.com/a")])],
            info: vec![(Value::bytes(b"errcode"), Value::bytes(b"USR"))],
        }),
        Message::CmdUmQuarantineSite(Quarantine {
            collection: c(),
            site: b("www.contoso.com"),
            seconds: 3600,
        }),
        Message::CmdUmQuarantineSiteRequeue(Quarantine {
            collection: c(),
            site: b("www.contoso.com"),
            seconds: 60,
        }),
        Message::CmdUmDnsReply(DnsReply {
            collection: b(""),
            host: b("www.contoso.com"),
            addrinfo: Some(vec![addr(), addr()]),
            resolved_at: 1_245_064_336,
            ttl: 86400,
        }),
        Message::CmdUmDnsReply(DnsReply {
            collection: b(""),
            host: b("nowhere.invalid"),
            addrinfo: None,
            resolved_at: 1_245_064_336,
            ttl: 60,
        }),
        Message::CmdUmConfState(ConfState {
            collection: c(),
            state: conf_state::ACTIVE,
        }),
        Message::CmdUmConfStateRequest(CollectionOnly { collection: c() }),
        Message::CmdUmStartCrawlIp(StartCrawlIp {
            collection: c(),
            ip: b("192.0.2.10"),
            site: b("www.contoso.com"),
            store_id: 0,
        }),
        Message::CmdUmStartCrawlIpReply(StartCrawlIpReply {
            collection: c(),
            ip: b("192.0.2.10"),
            site: b("www.contoso.com"),
            store_id: 0,
            allowed: true,
        }),
        Message::CmdUmStopCrawlIp(StopCrawlIp {
            collection: c(),
            ip: b("192.0.2.10"),
            site: b("www.contoso.com"),
        }),
        Message::CmdUmInit(Init {
            node_id: b("70-86-12-20"),
            xmlrpc_host: b("host.contoso.com"),
            xmlrpc_port: 10000,
        }),
        Message::CmdUmDnsRequest(DnsRequest {
            collection: c(),
            host: b("www.contoso.com"),
        }),
        Message::CmdUmStat(Stat {
            collection: c(),
            stats: Value::Dict(vec![(
                Value::bytes(b"Processed"),
                Value::List(vec![Value::int(10), Value::Int(1 << 40, IntForm::Auto)]),
            )]),
        }),
        Message::CmdUmLog(Log {
            collection: c(),
            logfile: b("dk"),
            message: b("fetched"),
        }),
        Message::CmdUmLastRoute(CollectionOnly { collection: c() }),
        Message::CmdUmDeleteOk(CollectionOnly { collection: c() }),
        Message::PpdupAddOk(PpdupAddOk {
            collection: c(),
            node_id: b("n1"),
            uri: b("http://a/"),
            owner_uri: None,
            ppdup_id: None,
            dbname: None,
        }),
        Message::PpdupAddOk(PpdupAddOk {
            collection: c(),
            node_id: b("n1"),
            uri: b("http://a/"),
            owner_uri: Some(b("http://b/")),
            ppdup_id: Some(b("dup1")),
            dbname: Some(b("/data/example")),
        }),
        Message::PpdupError(PpdupError {
            collection: c(),
            why: b("unknown collection"),
        }),
        Message::PpdupAdd(PpdupChecksum {
            collection: c(),
            node_id: b("n1"),
            uri: b("http://a/"),
            checksum: cs,
            ppdup_id: None,
            dbname: None,
        }),
        Message::PpdupRemove(PpdupChecksum {
            collection: c(),
            node_id: b("n1"),
            uri: b("http://a/"),
            checksum: cs,
            ppdup_id: Some(b("dup1")),
            dbname: Some(b("/data/example")),
        }),
        Message::PpdupRemoveOk(PpdupRemoveOk {
            collection: c(),
            uri: b("http://a/"),
            node_id: Some(b("n1")),
            ppdup_id: None,
            dbname: None,
        }),
        Message::PpdupPromoteReq(PpdupPromoteReq {
            collection: c(),
            checksum: cs,
        }),
        Message::PpdupConfRemove(PpdupConfRemove {
            collection: c(),
            ppdup_id: Some(b("dup1")),
        }),
        Message::PpdupSetConfig(PpdupSetConfig {
            config,
            vclock: 1,
            collection: Some(c()),
        }),
        Message::PpdupConfigAck(PpdupConfigAck { vclock: 1 << 33 }),
        Message::PpdupConfRemove2(CollectionOnly { collection: c() }),
    ]
}

#[test]
fn every_command_has_a_sample_and_every_sample_round_trips() {
    let samples = samples();
    for cmd in Command::ALL {
        assert!(
            samples.iter().any(|m| m.command() == *cmd),
            "no sample for {cmd}"
        );
    }
    for m in &samples {
        let dict = m.to_dict();
        let back = Message::from_dict(&dict).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!(&back, m);
        assert_eq!(&m.into_owned(), m);
        // Bytes too: encode, decode, re-read.
        let mut wire = Vec::new();
        crate::frame::encode_message(m, crate::frame::Priority::High, &mut wire);
        let limits = crate::marshal::Limits::default();
        let (body, _) = crate::frame::split(&wire, &limits).unwrap().unwrap();
        let f = crate::frame::decode_body(body, &limits).unwrap();
        assert_eq!(f.priority, crate::frame::Priority::High);
        assert_eq!(Message::from_dict(&f.message).unwrap(), *m);
    }
}

#[test]
fn each_role_handles_what_its_table_lists() {
    // MS-FSCMT 2.2.3: 29 node scheduler messages (ADD_ROUTE, START_CRAWL_IP, CONF_STATE in
    // their node-bound shapes); 2.2.4: 14 multinode messages; 2.2.5: 12 duplicate server ones.
    let count = |role| {
        let mut cmds: Vec<_> = samples()
            .iter()
            .filter(|m| m.handled_by(role))
            .map(|m| m.command() as i64)
            .collect();
        cmds.sort();
        cmds.dedup();
        cmds.len()
    };
    assert_eq!(count(Role::NodeScheduler), 29);
    assert_eq!(count(Role::MultinodeScheduler), 14);
    assert_eq!(count(Role::DuplicateServer), 12);
    let reply = Message::CmdUmStartCrawlIpReply(StartCrawlIpReply {
        collection: b("c"),
        ip: b("i"),
        site: b("s"),
        store_id: 0,
        allowed: false,
    });
    assert!(reply.handled_by(Role::NodeScheduler));
    assert!(!reply.handled_by(Role::MultinodeScheduler));
}

fn dict(pairs: &[(&'static str, Value<'static>)]) -> crate::marshal::Dict<'static> {
    pairs
        .iter()
        .map(|(k, v)| (Value::bytes(k.as_bytes()), v.clone()))
        .collect()
}

#[test]
fn missing_key_is_named() {
    let d = dict(&[("cm", Value::int(52)), ("dn", Value::bytes(b"c"))]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::MissingKey(Key::Id))
    );
    let err = Message::from_dict(&dict(&[("dn", Value::bytes(b"c"))])).unwrap_err();
    assert_eq!(err, MessageError::MissingKey(Key::Cmd));
    assert_eq!(err.to_string(), "missing key PKT_CMD (\"cm\")");
}

#[test]
fn mistyped_key_is_named() {
    let d = dict(&[("cm", Value::int(10)), ("dn", Value::int(1))]);
    assert!(
        Message::from_dict(&d).is_ok(),
        "unused keys are not checked"
    );
    let d = dict(&[("cm", Value::int(4)), ("dn", Value::int(1))]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::WrongType {
            key: Key::CollectionName,
            expected: "string",
            found: "int"
        })
    );
    let d = dict(&[("cm", Value::bytes(b"52"))]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::WrongType {
            key: Key::Cmd,
            expected: "integer",
            found: "string"
        })
    );
}

#[test]
fn checksum_must_be_sixteen_bytes() {
    // MS-FSCMT 2.2.5.3: PKT_CSUM "MUST be 16 bytes".
    let d = dict(&[
        ("cm", Value::int(52)),
        ("dn", Value::bytes(b"c")),
        ("id", Value::bytes(b"n")),
        ("ur", Value::bytes(b"u")),
        ("cs", Value::bytes(b"short")),
    ]);
    let err = Message::from_dict(&d).unwrap_err();
    assert!(
        matches!(
            err,
            MessageError::WrongType {
                key: Key::Checksum,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn unknown_command_is_an_error() {
    for v in [-1, 29, 49, 62, 1 << 40] {
        let d = dict(&[("cm", Value::int(v))]);
        assert_eq!(Message::from_dict(&d), Err(MessageError::UnknownCommand(v)));
    }
}

#[test]
fn crawl_queue_entry_shape_errors_name_the_element() {
    let entry = CrawlQueueEntry::new(uri());
    let mut entry = entry.to_value();
    if let Value::Tuple(t) = &mut entry {
        t[3] = Value::bytes(b"not flags");
    }
    let d = dict(&[
        ("cm", Value::int(25)),
        ("dn", Value::bytes(b"c")),
        ("pd", entry.into_owned()),
    ]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::BadElement {
            key: Key::Data,
            structure: "crawl queue entry 9-tuple",
            index: 3,
            expected: "an integer"
        })
    );
    let d = dict(&[
        ("cm", Value::int(25)),
        ("dn", Value::bytes(b"c")),
        ("pd", Value::Tuple(vec![Value::bytes(b"WQE")])),
    ]);
    assert!(matches!(
        Message::from_dict(&d),
        Err(MessageError::BadLength {
            expected: 9,
            found: 1,
            ..
        })
    ));
}

#[test]
fn route_list_is_capped_at_256() {
    let routes = (0..257)
        .map(|_| Value::Tuple(vec![Value::bytes(b"a"), Value::bytes(b"n")]))
        .collect();
    let d = dict(&[
        ("cm", Value::int(7)),
        ("dn", Value::bytes(b"c")),
        ("pd", Value::List(routes)),
    ]);
    assert!(matches!(
        Message::from_dict(&d),
        Err(MessageError::BadLength { found: 257, .. })
    ));
}

#[test]
fn decode_message_reads_every_sample_with_or_without_the_flat_path() {
    let limits = crate::marshal::Limits::default();
    for m in samples() {
        for priority in [crate::frame::Priority::Normal, crate::frame::Priority::High] {
            let mut wire = Vec::new();
            crate::frame::encode_message(&m, priority, &mut wire);
            let (body, _) = crate::frame::split(&wire, &limits).unwrap().unwrap();
            assert_eq!(
                crate::frame::decode_message(body, &limits),
                Ok((priority, m.clone()))
            );
        }
    }
    // A missing key through the flat path is the same typed error.
    let d = dict(&[("cm", Value::int(52)), ("dn", Value::bytes(b"c"))]);
    let mut wire = Vec::new();
    crate::frame::encode_dict(&d, crate::frame::Priority::Normal, &mut wire);
    assert_eq!(
        crate::frame::decode_message(&wire[4..], &limits),
        Err(crate::frame::MessageFrameError::Message(
            MessageError::MissingKey(Key::Id)
        ))
    );
}

#[test]
fn the_table_cites_the_sections_of_the_roles_it_names() {
    // MS-FSCMT 2.2.3 lists what a node scheduler receives, 2.2.4 what the multinode scheduler
    // receives; the PPDUP_* commands are all in 2.2.5, and all reach the duplicate server.
    for m in samples() {
        let sections: Vec<&str> = m.spec_section().split(", ").collect();
        let cites = |part: &str| sections.iter().any(|s| s.starts_with(part));
        let name = m.command().name();
        if name.starts_with("PPDUP_") {
            assert!(sections.iter().all(|s| s.starts_with("2.2.5.")), "{name}");
            assert!(m.handled_by(Role::DuplicateServer), "{name}");
        } else {
            assert_eq!(m.handled_by(Role::NodeScheduler), cites("2.2.3."), "{name}");
            assert_eq!(
                m.handled_by(Role::MultinodeScheduler),
                cites("2.2.4."),
                "{name}"
            );
            assert!(!m.handled_by(Role::DuplicateServer), "{name}");
        }
    }
    let add = samples()
        .into_iter()
        .find(|m| m.command() == Command::PpdupAdd)
        .unwrap();
    assert_eq!(add.spec_section(), "2.2.5.3");
}

#[test]
fn commands_with_two_shapes_pick_theirs_by_pkt_data() {
    let t = |items: Vec<Value<'static>>| Value::Tuple(items);
    let s = |v: &'static str| Value::bytes(v.as_bytes());
    // CMD_UM_START_CRAWL_IP: 3 elements are the request (2.2.4.11), 4 the reply (2.2.3.22),
    // as a list too; any other length is refused naming both.
    let d = dict(&[
        ("cm", Value::int(16)),
        ("dn", s("c")),
        (
            "pd",
            Value::List(vec![s("ip"), s("site"), Value::int(1), Value::int(1)]),
        ),
    ]);
    assert!(matches!(
        Message::from_dict(&d),
        Ok(Message::CmdUmStartCrawlIpReply(StartCrawlIpReply {
            allowed: true,
            ..
        }))
    ));
    let d = dict(&[
        ("cm", Value::int(16)),
        ("dn", s("c")),
        (
            "pd",
            t(vec![
                s("ip"),
                s("site"),
                Value::int(1),
                Value::int(1),
                Value::int(1),
            ]),
        ),
    ]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::BadLength {
            key: Key::Data,
            structure: "start crawl IP 3-tuple (request) or 4-tuple (reply)",
            expected: 3,
            found: 5,
        })
    );
    // CMD_UM_ADD_ROUTE: a 5-tuple led by the node id is 2.2.3.8, anything else a route list
    // (2.2.4.9), whose errors it then gets.
    let d = dict(&[
        ("cm", Value::int(7)),
        ("dn", s("c")),
        (
            "pd",
            t(vec![
                Value::int(1),
                s("a"),
                s("s"),
                Value::None,
                Value::int(1),
            ]),
        ),
    ]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::WrongType {
            key: Key::Data,
            expected: "(routing attribute, node id) 2-tuple",
            found: "int",
        })
    );
    let d = dict(&[("cm", Value::int(7)), ("dn", s("c"))]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::MissingKey(Key::Data))
    );
    // CMD_UM_CONF_STATE: with PKT_DATA the state (2.2.3.21), without it the request (2.2.4.13).
    let d = dict(&[("cm", Value::int(20)), ("dn", s("c"))]);
    assert!(matches!(
        Message::from_dict(&d),
        Ok(Message::CmdUmConfStateRequest(_))
    ));
    let d = dict(&[("cm", Value::int(20)), ("dn", s("c")), ("pd", s("1"))]);
    assert_eq!(
        Message::from_dict(&d),
        Err(MessageError::WrongType {
            key: Key::Data,
            expected: "integer",
            found: "string",
        })
    );
}

#[test]
fn conf_add_carries_the_spec_form_and_reads_the_flat_form_too() {
    // MS-FSCMT 2.2.2.3.1: PKT_DSPEC is {collection name: {parameters}}.
    let params = Value::Dict(vec![(Value::bytes(b"delay"), Value::int(2))]);
    let m = Message::CmdAdmConfAdd(ConfSpec {
        collection: b("web"),
        config: params.clone(),
        epoch: None,
    });
    let d = m.to_dict();
    let ds = d
        .iter()
        .find(|(k, _)| k.as_bytes() == Some(b"ds"))
        .map(|(_, v)| v.clone())
        .unwrap();
    assert_eq!(
        ds,
        Value::Dict(vec![(Value::bytes(b"web"), params.clone())])
    );
    assert_eq!(Message::from_dict(&d).unwrap(), m);
    // The flat form of earlier versions: no entry named like the collection.
    let flat = dict(&[
        ("cm", Value::int(1)),
        ("dn", Value::bytes(b"web")),
        ("ds", params.clone()),
    ]);
    assert_eq!(Message::from_dict(&flat).unwrap(), m);
    // A parameter that happens to be named like the collection, but is no dictionary, is
    // still a parameter of the flat form.
    let odd = Value::Dict(vec![(Value::bytes(b"web"), Value::int(1))]);
    let flat = dict(&[
        ("cm", Value::int(0)),
        ("dn", Value::bytes(b"web")),
        ("ds", odd.clone()),
    ]);
    let Message::CmdAdmConfUpdate(c) = Message::from_dict(&flat).unwrap() else {
        panic!("CMD_ADM_CONF_UPDATE")
    };
    assert_eq!(c.config, odd);
}
