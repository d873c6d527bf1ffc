//! The fast path against the general codec: the same bytes written, the same messages read.

use super::*;
use crate::frame;
use crate::marshal::{self, Value};
use crate::msg::{
    read_ppdup, read_ppdup_command, Checksum, PpdupAddOk, PpdupChecksum, PpdupRemoveOk,
};

fn b(s: &str) -> Cow<'static, [u8]> {
    Cow::Owned(s.as_bytes().to_vec())
}

fn hot_messages() -> Vec<Message<'static>> {
    let add = PpdupChecksum {
        collection: b("coll"),
        node_id: b("node-1"),
        uri: b("http://www.example.com/a.html"),
        checksum: Checksum(*b"0123456789abcdef"),
        ppdup_id: None,
        dbname: None,
    };
    let fwd = PpdupChecksum {
        ppdup_id: Some(b("dup-1")),
        dbname: Some(b("/var/lib/dup/coll")),
        ..add.clone()
    };
    let ok = PpdupAddOk {
        collection: b("coll"),
        node_id: b("node-1"),
        uri: b("http://a/"),
        owner_uri: Some(b("http://b/")),
        ppdup_id: None,
        dbname: None,
    };
    let parsed = UriStructure {
        uri: b("http://www.example.com:8080/a/b.html?q=1"),
        scheme: b("http"),
        netloc: b("www.example.com:8080"),
        host: b("www.example.com"),
        port: Some(8080),
        path: b("/a/b.html"),
        query: b("q=1"),
        default_scheme: b("http"),
        skip_fragments: true,
        parsed: true,
        host_idna: b("www.example.com"),
        ..UriStructure::default()
    };
    let mut entry = CrawlQueueEntry::new(UriStructure::unparsed(b("http://a.example/x")));
    let plain = entry.clone();
    entry.referrer = parsed.clone();
    entry.uri_flags = 0x41;
    entry.queue_flags = 2;
    entry.refresh_cycle = 7;
    entry.redirects = vec![
        Redirect {
            from: b("http://a.example/"),
            kind: 301,
        },
        Redirect {
            from: b("http://a.example/y"),
            kind: -1,
        },
    ];
    let uri = |entry: CrawlQueueEntry<'static>| UriMsg {
        collection: b("coll"),
        entry,
    };
    let with_port = CrawlQueueEntry::new(parsed);
    vec![
        Message::CmdUmUri(uri(plain.clone())),
        Message::CmdUmUriUrg(uri(plain)),
        Message::CmdUmUri(uri(entry)),
        Message::CmdUmUriUrg(uri(with_port)),
        Message::PpdupAdd(add.clone()),
        Message::PpdupRemove(add),
        Message::PpdupAdd(fwd.clone()),
        Message::PpdupRemove(fwd),
        Message::PpdupAddOk(ok.clone()),
        Message::PpdupAddOk(PpdupAddOk {
            owner_uri: None,
            ppdup_id: Some(b("dup-1")),
            dbname: Some(b("")),
            ..ok
        }),
        Message::PpdupRemoveOk(PpdupRemoveOk {
            collection: b("coll"),
            uri: b("http://a/"),
            node_id: Some(b("n")),
            ppdup_id: None,
            dbname: None,
        }),
        Message::PpdupRemoveOk(PpdupRemoveOk {
            collection: b("coll"),
            uri: b("http://a/"),
            node_id: None,
            ppdup_id: Some(b("dup-1")),
            dbname: Some(b("/d")),
        }),
    ]
}

/// The general encoder: the message's dict built as values, pairs sorted by key.
fn general_frame(m: &Message<'_>, p: Priority) -> Vec<u8> {
    let mut out = Vec::new();
    frame::encode_dict(&m.to_dict(), p, &mut out);
    out
}

#[test]
fn fast_encoding_is_byte_for_byte_the_general_one() {
    for m in hot_messages() {
        for p in [Priority::Normal, Priority::High] {
            let mut fast = Vec::new();
            frame::encode_message(&m, p, &mut fast);
            assert_eq!(fast, general_frame(&m, p), "{m:?}");
        }
    }
}

/// What [`peek_uri`] must give for a body that [`decode`] read as `m`.
fn peek_of<'a>(m: &'a Message<'a>) -> Option<UriPeek<'a>> {
    match m {
        Message::CmdUmUri(u) | Message::CmdUmUriUrg(u) => Some(UriPeek {
            collection: &u.collection,
            urgent: matches!(m, Message::CmdUmUriUrg(_)),
            uri: &u.entry.uri.uri,
        }),
        _ => None,
    }
}

/// [`peek_uri`] agrees with [`decode`] on `body`, and [`read_ppdup_command`] with
/// [`read_ppdup`].
fn check_peek(body: &[u8], limits: &Limits) {
    assert_eq!(
        read_ppdup_command(body, limits),
        read_ppdup(body, limits).map(|(p, m)| (p, m.command())),
        "{body:?}"
    );
    let decoded = decode(body, limits);
    assert_eq!(
        peek_uri(body, limits),
        decoded.as_ref().and_then(|(_, m)| peek_of(m)),
        "{body:?}"
    );
}

#[test]
fn fast_decoding_reads_what_the_general_decoder_reads() {
    let limits = Limits::default();
    for m in hot_messages() {
        let f = general_frame(&m, Priority::High);
        let body = &f[4..];
        assert_eq!(decode(body, &limits), Some((Priority::High, m.clone())));
        check_peek(body, &limits);
        // Every single-byte change: the fast path either declines or agrees with the
        // general decoder.
        for i in 0..body.len() {
            for delta in [1u8, 0x80, 0xff] {
                let mut bad = body.to_vec();
                bad[i] = bad[i].wrapping_add(delta);
                check_peek(&bad, &limits);
                if let Some((p, fast)) = decode(&bad, &limits) {
                    let general = frame::decode_body(&bad, &limits).unwrap();
                    assert_eq!(general.priority, p);
                    assert_eq!(Message::from_dict(&general.message).unwrap(), fast);
                }
            }
        }
        // Truncations never decode.
        for n in 0..body.len() {
            assert_eq!(decode(&body[..n], &limits), None);
            assert_eq!(read_ppdup_command(&body[..n], &limits), None);
            assert_eq!(peek_uri(&body[..n], &limits), None);
        }
    }
}

#[test]
fn uri_messages_the_fast_path_cannot_carry_take_the_general_one() {
    let limits = Limits::default();
    let mut entry = CrawlQueueEntry::new(UriStructure::unparsed(b("http://a/")));
    entry.extra = vec![(Value::bytes(b"rss"), Value::bytes(b"1"))];
    let mut big = CrawlQueueEntry::new(UriStructure::unparsed(b("http://a/")));
    big.refresh_cycle = i64::from(i32::MAX) + 1;
    for entry in [entry, big] {
        let m = Message::CmdUmUri(UriMsg {
            collection: b("coll"),
            entry,
        });
        let mut fast = Vec::new();
        frame::encode_message(&m, Priority::Normal, &mut fast);
        assert_eq!(fast, general_frame(&m, Priority::Normal));
        assert_eq!(decode(&fast[4..], &limits), None);
        assert_eq!(peek_uri(&fast[4..], &limits), None);
        assert_eq!(frame::decode_message(&fast[4..], &limits).unwrap().1, m);
    }
    // A depth limit the entry does not fit is left to the general decoder to refuse.
    let m = Message::CmdUmUri(UriMsg {
        collection: b("coll"),
        entry: CrawlQueueEntry::new(UriStructure::unparsed(b("http://a/"))),
    });
    let mut f = Vec::new();
    frame::encode_message(&m, Priority::Normal, &mut f);
    let shallow = Limits {
        max_depth: 3,
        ..Limits::default()
    };
    assert_eq!(decode(&f[4..], &shallow), None);
    assert_eq!(peek_uri(&f[4..], &shallow), None);
    assert!(frame::decode_message(&f[4..], &shallow).is_err());
}

#[test]
fn other_layouts_are_left_to_the_general_decoder() {
    let limits = Limits::default();
    let m = &hot_messages()[0];
    // Keys out of the canonical order.
    let mut dict = m.to_dict();
    dict.reverse();
    let mut f = Vec::new();
    frame::encode_dict(&dict, Priority::Normal, &mut f);
    assert_eq!(decode(&f[4..], &limits), None);
    assert_eq!(
        frame::decode_message(&f[4..], &limits).unwrap().1,
        m.clone()
    );
    // An interned key string; an unknown extra key; a different command.
    let mut dict = m.to_dict();
    dict[0].0 = Value::Bytes(Cow::Borrowed(b"cs"), marshal::StrForm::Interned);
    let mut f = Vec::new();
    frame::encode_dict(&dict, Priority::Normal, &mut f);
    assert_eq!(decode(&f[4..], &limits), None);
    let mut dict = m.to_dict();
    dict.push((Value::bytes(b"zz"), Value::int(1)));
    let mut f = Vec::new();
    frame::encode_dict(&dict, Priority::Normal, &mut f);
    assert_eq!(decode(&f[4..], &limits), None);
    let mut f = Vec::new();
    frame::encode_message(&Message::PpdupKeepalive, Priority::Normal, &mut f);
    assert_eq!(decode(&f[4..], &limits), None);
    // Limits are honoured: a body over the size limit is not read here.
    let mut f = Vec::new();
    frame::encode_message(m, Priority::Normal, &mut f);
    let tight = Limits {
        max_size: f.len() - 5,
        ..Limits::default()
    };
    assert_eq!(decode(&f[4..], &tight), None);
}
