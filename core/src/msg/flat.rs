//! The hot messages read and written without the general machinery (no marshal values, no pair
//! list, no sort): the duplicate server's PPDUP_ADD, PPDUP_REMOVE, PPDUP_ADD_OK and
//! PPDUP_REMOVE_OK (MS-FSCMT 2.2.5), and the schedulers' CMD_UM_URI / CMD_UM_URI_URG (2.2.3.3,
//! 2.2.3.4, 2.2.4.5, 2.2.4.7) whose crawl queue entry carries no extra metadata. Encoding writes
//! exactly the bytes of the general encoder (keys in the canonical order of [`Key`], `'s'`
//! strings, `'i'` PKT_CMD). Decoding accepts only that canonical layout and answers `None` for
//! anything else, which then takes the general path: the fast path never refuses, and never
//! reads a frame differently from the general decoder (tested against it, byte mutations
//! included). The four PPDUP messages are read by [`super::ppdup_ref::read_ppdup`] (which the
//! duplicate server also calls itself, for the borrowed view), and built into messages here.

use std::borrow::Cow;

use super::{Command, CrawlQueueEntry, Key, Message, Redirect, UriMsg, UriStructure};
use crate::frame::Priority;
use crate::marshal::{tag, Limits};

fn put_key(out: &mut Vec<u8>, key: Key) {
    let k = key.wire().as_bytes();
    out.push(tag::STRING);
    out.extend_from_slice(&(k.len() as u32).to_le_bytes());
    out.extend_from_slice(k);
}

fn put_bytes(out: &mut Vec<u8>, key: Key, v: &[u8]) {
    put_key(out, key);
    out.push(tag::STRING);
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    out.extend_from_slice(v);
}

fn put_opt(out: &mut Vec<u8>, key: Key, v: &Option<Cow<'_, [u8]>>) {
    if let Some(v) = v {
        put_bytes(out, key, v);
    }
}

fn put_cmd(out: &mut Vec<u8>, cmd: Command) {
    put_key(out, Key::Cmd);
    out.push(tag::INT);
    out.extend_from_slice(&(cmd as i32).to_le_bytes());
}

/// Bytes a string pair takes at most beyond its value.
const PAIR: usize = 2 * 5 + 2;

/// Appends the marshal dict of a hot message, pairs in the canonical key order (the order
/// [`Key`] is declared in), or returns false for any other message.
pub(super) fn encode_dict(m: &Message<'_>, out: &mut Vec<u8>) -> bool {
    let len = |b: &[u8]| b.len() + PAIR;
    let opt = |b: &Option<Cow<'_, [u8]>>| b.as_deref().map_or(0, len);
    match m {
        Message::PpdupAdd(c) | Message::PpdupRemove(c) => {
            out.reserve(
                2 + 16
                    + len(&c.collection)
                    + len(&c.node_id)
                    + len(&c.uri)
                    + 3 * PAIR
                    + opt(&c.ppdup_id)
                    + opt(&c.dbname),
            );
            out.push(tag::DICT);
            put_bytes(out, Key::Checksum, &c.checksum.0);
            put_bytes(out, Key::CollectionName, &c.collection);
            put_bytes(out, Key::Id, &c.node_id);
            put_cmd(out, m.command());
            put_bytes(out, Key::Uri, &c.uri);
            put_opt(out, Key::PpdupId, &c.ppdup_id);
            put_opt(out, Key::DbName, &c.dbname);
        }
        Message::PpdupAddOk(a) => {
            out.reserve(
                2 + len(&a.collection)
                    + len(&a.node_id)
                    + len(&a.uri)
                    + PAIR
                    + opt(&a.owner_uri)
                    + opt(&a.ppdup_id)
                    + opt(&a.dbname),
            );
            out.push(tag::DICT);
            put_bytes(out, Key::CollectionName, &a.collection);
            put_bytes(out, Key::Id, &a.node_id);
            put_cmd(out, Command::PpdupAddOk);
            put_bytes(out, Key::Uri, &a.uri);
            put_opt(out, Key::OwnerUri, &a.owner_uri);
            put_opt(out, Key::PpdupId, &a.ppdup_id);
            put_opt(out, Key::DbName, &a.dbname);
        }
        Message::PpdupRemoveOk(r) => {
            out.push(tag::DICT);
            put_bytes(out, Key::CollectionName, &r.collection);
            put_opt(out, Key::Id, &r.node_id);
            put_cmd(out, Command::PpdupRemoveOk);
            put_bytes(out, Key::Uri, &r.uri);
            put_opt(out, Key::PpdupId, &r.ppdup_id);
            put_opt(out, Key::DbName, &r.dbname);
        }
        Message::CmdUmUri(u) | Message::CmdUmUriUrg(u) => {
            let start = out.len();
            out.push(tag::DICT);
            put_bytes(out, Key::CollectionName, &u.collection);
            put_cmd(out, m.command());
            put_key(out, Key::Data);
            if !put_entry(out, &u.entry) {
                out.truncate(start);
                return false;
            }
        }
        _ => return false,
    }
    out.push(tag::NULL);
    true
}

fn put_str(out: &mut Vec<u8>, v: &[u8]) {
    out.push(tag::STRING);
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    out.extend_from_slice(v);
}

/// An `'i'` integer, or false when `v` needs another form.
fn put_int(out: &mut Vec<u8>, v: i64) -> bool {
    let Ok(v) = i32::try_from(v) else {
        return false;
    };
    out.push(tag::INT);
    out.extend_from_slice(&v.to_le_bytes());
    true
}

fn put_seq(out: &mut Vec<u8>, t: u8, n: usize) {
    out.push(t);
    out.extend_from_slice(&(n as u32).to_le_bytes());
}

/// The URI structure 14-tuple (2.2.2.2.4), as [`UriStructure::to_value`] encodes it.
fn put_uri(out: &mut Vec<u8>, u: &UriStructure<'_>) -> bool {
    out.reserve(14 * 5 + u.uri.len() + u.netloc.len() + u.host.len() + u.path.len() + 16);
    put_seq(out, tag::TUPLE, 14);
    for b in [&u.uri, &u.scheme, &u.netloc, &u.host] {
        put_str(out, b);
    }
    match u.port {
        Some(p) => {
            if !put_int(out, p) {
                return false;
            }
        }
        None => out.push(tag::NONE),
    }
    for b in [
        &u.path,
        &u.query,
        &u.params,
        &u.fragment,
        &u.credentials,
        &u.default_scheme,
    ] {
        put_str(out, b);
    }
    put_int(out, u.skip_fragments.into());
    put_int(out, u.parsed.into());
    put_str(out, &u.host_idna);
    true
}

/// The crawl queue entry 9-tuple (2.2.2.2) when its extra metadata dict is empty; false (with
/// part of it written) otherwise.
fn put_entry(out: &mut Vec<u8>, e: &CrawlQueueEntry<'_>) -> bool {
    if !e.extra.is_empty() {
        return false;
    }
    put_seq(out, tag::TUPLE, 9);
    put_str(out, CrawlQueueEntry::IDENTIFIER);
    if !(put_uri(out, &e.uri)
        && put_uri(out, &e.referrer)
        && put_int(out, e.uri_flags)
        && put_int(out, e.frame_flags))
    {
        return false;
    }
    put_seq(out, tag::LIST, e.redirects.len());
    for r in &e.redirects {
        put_seq(out, tag::TUPLE, 2);
        put_str(out, &r.from);
        if !put_int(out, r.kind) {
            return false;
        }
    }
    if !(put_int(out, e.queue_flags) && put_int(out, e.refresh_cycle)) {
        return false;
    }
    out.push(tag::DICT);
    out.push(tag::NULL);
    true
}

/// A cursor over a frame body that gives up (None) on anything unexpected.
struct Cursor<'a> {
    buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = (self.buf.get(..n)?, self.buf.get(n..)?);
        self.buf = b;
        Some(a)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// An `'s'` string.
    fn string(&mut self) -> Option<&'a [u8]> {
        if self.u8()? != tag::STRING {
            return None;
        }
        let n = self.u32()? as usize;
        self.take(n)
    }

    /// An `'i'` integer.
    fn int(&mut self) -> Option<i32> {
        if self.u8()? != tag::INT {
            return None;
        }
        Some(self.u32()? as i32)
    }
}

/// Decodes a frame body holding a hot message in the canonical layout; `None` for anything
/// else (other commands, other key orders or string forms, missing or extra keys, any error),
/// which the caller then hands to the general decoder.
pub(crate) fn decode<'a>(body: &'a [u8], limits: &Limits) -> Option<(Priority, Message<'a>)> {
    decode_ppdup(body, limits).or_else(|| decode_uri(body, limits))
}

/// PPDUP_ADD, PPDUP_REMOVE, PPDUP_ADD_OK or PPDUP_REMOVE_OK as [`super::read_ppdup`] reads them.
fn decode_ppdup<'a>(body: &'a [u8], limits: &Limits) -> Option<(Priority, Message<'a>)> {
    let (priority, m) = super::ppdup_ref::read_ppdup(body, limits)?;
    Some((priority, m.into_message()))
}

impl<'a> Cursor<'a> {
    /// A sequence header of tag `t`, returning its length.
    fn seq(&mut self, t: u8) -> Option<usize> {
        if self.u8()? != t {
            return None;
        }
        Some(self.u32()? as usize)
    }

    fn key(&mut self, key: Key) -> Option<()> {
        (self.string()? == key.wire().as_bytes()).then_some(())
    }

    /// The URI structure 14-tuple as [`put_uri`] writes it.
    fn uri(&mut self) -> Option<UriStructure<'a>> {
        if self.seq(tag::TUPLE)? != 14 {
            return None;
        }
        let mut s = || self.string().map(Cow::Borrowed);
        let (uri, scheme, netloc, host) = (s()?, s()?, s()?, s()?);
        let port = match self.buf.first()? {
            &tag::NONE => {
                self.take(1)?;
                None
            }
            _ => Some(i64::from(self.int()?)),
        };
        let mut s = || self.string().map(Cow::Borrowed);
        let (path, query, params, fragment, credentials, default_scheme) =
            (s()?, s()?, s()?, s()?, s()?, s()?);
        let skip_fragments = self.int()? != 0;
        let parsed = self.int()? != 0;
        Some(UriStructure {
            uri,
            scheme,
            netloc,
            host,
            port,
            path,
            query,
            params,
            fragment,
            credentials,
            default_scheme,
            skip_fragments,
            parsed,
            host_idna: Cow::Borrowed(self.string()?),
        })
    }
}

impl<'a> Cursor<'a> {
    /// A URI structure 14-tuple checked as [`Cursor::uri`] reads it, without building it;
    /// gives entry 0, the URI.
    fn skip_uri(&mut self) -> Option<&'a [u8]> {
        if self.seq(tag::TUPLE)? != 14 {
            return None;
        }
        let uri = self.string()?;
        for _ in 0..3 {
            self.string()?;
        }
        if self.buf.first()? == &tag::NONE {
            self.take(1)?;
        } else {
            self.int()?;
        }
        for _ in 0..6 {
            self.string()?;
        }
        self.int()?;
        self.int()?;
        self.string()?;
        Some(uri)
    }

    /// A redirect 2-tuple: the URI redirected from and the kind.
    fn redirect(&mut self) -> Option<(&'a [u8], i32)> {
        if self.seq(tag::TUPLE)? != 2 {
            return None;
        }
        Some((self.string()?, self.int()?))
    }
}

/// The parts of a CMD_UM_URI / CMD_UM_URI_URG frame body that routing reads (2.2.4.5, 2.2.4.7),
/// borrowed from the body. [`peek_uri`] gives them for exactly the bodies [`decode`] reads as
/// these messages, without building the crawl queue entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UriPeek<'a> {
    /// PKT_DSPECNAME.
    pub collection: &'a [u8],
    /// CMD_UM_URI_URG rather than CMD_UM_URI.
    pub urgent: bool,
    /// Entry 0 of the entry's URI structure: the URI.
    pub uri: &'a [u8],
}

/// CMD_UM_URI / CMD_UM_URI_URG in the layout [`encode_dict`] writes, read as [`UriPeek`]: the
/// multinode scheduler's routing reads these three and forwards the body as it came. `None`
/// whenever [`decode`] would not give one of the two messages: every part is checked as
/// [`decode_uri`] checks it, and none is built.
pub fn peek_uri<'a>(body: &'a [u8], limits: &Limits) -> Option<UriPeek<'a>> {
    let (mut c, collection, urgent) = uri_head(body, limits)?;
    let uri = c.skip_uri()?;
    c.skip_uri()?;
    c.int()?;
    c.int()?;
    for _ in 0..redirect_count(&mut c, limits)? {
        c.redirect()?;
    }
    uri_tail(&mut c)?;
    Some(UriPeek {
        collection,
        urgent,
        uri,
    })
}

/// CMD_UM_URI / CMD_UM_URI_URG in the layout [`encode_dict`] writes: PKT_DSPECNAME, PKT_CMD,
/// PKT_DATA, and an entry with `'s'` strings, `'i'` integers and an empty extra dict.
fn decode_uri<'a>(body: &'a [u8], limits: &Limits) -> Option<(Priority, Message<'a>)> {
    let (mut c, collection, urgent) = uri_head(body, limits)?;
    let uri = c.uri()?;
    let referrer = c.uri()?;
    let uri_flags = c.int()?.into();
    let frame_flags = c.int()?.into();
    let n = redirect_count(&mut c, limits)?;
    // At least 14 bytes a redirect: never reserve more than the input can hold.
    let mut redirects = Vec::with_capacity(n.min(c.buf.len() / 14));
    for _ in 0..n {
        let (from, kind) = c.redirect()?;
        redirects.push(Redirect {
            from: Cow::Borrowed(from),
            kind: kind.into(),
        });
    }
    let (queue_flags, refresh_cycle, priority) = uri_tail(&mut c)?;
    let u = UriMsg {
        collection: Cow::Borrowed(collection),
        entry: CrawlQueueEntry {
            uri,
            referrer,
            uri_flags,
            frame_flags,
            redirects,
            queue_flags,
            refresh_cycle,
            extra: Vec::new(),
        },
    };
    Some((priority, u.into_message(urgent)))
}

/// A CMD_UM_URI body up to its entry's URI structure: the cursor there, the collection, and
/// whether the command is the urgent one.
fn uri_head<'a>(body: &'a [u8], limits: &Limits) -> Option<(Cursor<'a>, &'a [u8], bool)> {
    // Containers: the frame tuple, its dict, the entry, a URI structure or the redirect list.
    if body.len() > limits.max_size || limits.max_depth < 4 {
        return None;
    }
    let mut c = Cursor { buf: body };
    if c.take(6)? != b"(\x02\x00\x00\x00{" {
        return None;
    }
    c.key(Key::CollectionName)?;
    let collection = c.string()?;
    c.key(Key::Cmd)?;
    let urgent = match Command::from_i64(c.int()?.into())? {
        Command::CmdUmUri => false,
        Command::CmdUmUriUrg => true,
        _ => return None,
    };
    c.key(Key::Data)?;
    if c.seq(tag::TUPLE)? != 9 || c.string()? != CrawlQueueEntry::IDENTIFIER {
        return None;
    }
    Some((c, collection, urgent))
}

/// The redirect list's length.
fn redirect_count(c: &mut Cursor<'_>, limits: &Limits) -> Option<usize> {
    let n = c.seq(tag::LIST)?;
    // Each redirect is a tuple inside the list: one level deeper than a URI structure.
    if n > 0 && limits.max_depth < 5 {
        return None;
    }
    Some(n)
}

/// The entry after its redirects, and the rest of the body: the queue flags, the refresh
/// cycle, the empty extra dict, the end of the message dict and the frame's priority.
fn uri_tail(c: &mut Cursor<'_>) -> Option<(i64, i64, Priority)> {
    let queue_flags = c.int()?.into();
    let refresh_cycle = c.int()?.into();
    if c.take(2)? != [tag::DICT, tag::NULL] || c.take(1)? != [tag::NULL] {
        return None;
    }
    let priority = Priority::from_i64(c.int()?.into())?;
    if !c.buf.is_empty() {
        return None;
    }
    Some((queue_flags, refresh_cycle, priority))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame;
    use crate::marshal::{self, Value};
    use crate::msg::{Checksum, PpdupAddOk, PpdupChecksum, PpdupRemoveOk};

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

    /// [`peek_uri`] agrees with [`decode`] on `body`.
    fn check_peek(body: &[u8], limits: &Limits) {
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
}
