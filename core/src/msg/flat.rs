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
    entry_end(&mut c)?;
    frame_end(&mut c)?;
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
    let entry = c.entry_rest(limits)?;
    let priority = frame_end(&mut c)?;
    let u = UriMsg {
        collection: Cow::Borrowed(collection),
        entry,
    };
    Some((priority, u.into_message(urgent)))
}

/// A bare crawl queue entry (a crawl queue record, 2.2.2.2) in the layout [`put_entry`] writes,
/// read as [`decode_uri`] reads the one a CMD_UM_URI carries; `None` for anything else, which
/// the caller then hands to the general decoder (with `limits`, which this checks as it would).
pub(crate) fn decode_entry<'a>(rec: &'a [u8], limits: &Limits) -> Option<CrawlQueueEntry<'a>> {
    // Containers: the entry, a URI structure or the redirect list (or extra dict), a redirect.
    if rec.len() > limits.max_size || limits.max_depth < 2 {
        return None;
    }
    let mut c = Cursor { buf: rec };
    if c.seq(tag::TUPLE)? != 9 || c.string()? != CrawlQueueEntry::IDENTIFIER {
        return None;
    }
    // `entry_rest` counts depths as inside a URI message, two containers (the frame tuple and
    // the message dict) deeper than a bare entry.
    let e = c.entry_rest(&Limits {
        max_depth: limits.max_depth.saturating_add(2),
        max_size: limits.max_size,
    })?;
    c.buf.is_empty().then_some(e)
}

/// The URI and URI flags of a bare crawl queue entry, for exactly the records [`decode_entry`]
/// reads (every part checked as it checks it, none built): what the node scheduler's site
/// dispatch and conditional requests read of a queue record, which decoding the whole entry
/// (two URI structures of fourteen parts each) made cost several times more.
pub(crate) fn peek_entry<'a>(rec: &'a [u8], limits: &Limits) -> Option<(&'a [u8], i64)> {
    if rec.len() > limits.max_size || limits.max_depth < 2 {
        return None;
    }
    let mut c = Cursor { buf: rec };
    if c.seq(tag::TUPLE)? != 9 || c.string()? != CrawlQueueEntry::IDENTIFIER {
        return None;
    }
    let limits = Limits {
        max_depth: limits.max_depth.saturating_add(2),
        max_size: limits.max_size,
    };
    let uri = c.skip_uri()?;
    c.skip_uri()?;
    let uri_flags = c.int()?.into();
    c.int()?;
    for _ in 0..redirect_count(&mut c, &limits)? {
        c.redirect()?;
    }
    entry_end(&mut c)?;
    c.buf.is_empty().then_some((uri, uri_flags))
}

impl<'a> Cursor<'a> {
    /// A crawl queue entry after its identifier, up to its empty extra dict, as [`put_entry`]
    /// writes it.
    fn entry_rest(&mut self, limits: &Limits) -> Option<CrawlQueueEntry<'a>> {
        let uri = self.uri()?;
        let referrer = self.uri()?;
        let uri_flags = self.int()?.into();
        let frame_flags = self.int()?.into();
        let n = redirect_count(self, limits)?;
        // At least 14 bytes a redirect: never reserve more than the input can hold.
        let mut redirects = Vec::with_capacity(n.min(self.buf.len() / 14));
        for _ in 0..n {
            let (from, kind) = self.redirect()?;
            redirects.push(Redirect {
                from: Cow::Borrowed(from),
                kind: kind.into(),
            });
        }
        let (queue_flags, refresh_cycle) = entry_end(self)?;
        Some(CrawlQueueEntry {
            uri,
            referrer,
            uri_flags,
            frame_flags,
            redirects,
            queue_flags,
            refresh_cycle,
            extra: Vec::new(),
        })
    }
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

/// The entry after its redirects: the queue flags, the refresh cycle and the empty extra dict.
fn entry_end(c: &mut Cursor<'_>) -> Option<(i64, i64)> {
    let queue_flags = c.int()?.into();
    let refresh_cycle = c.int()?.into();
    if c.take(2)? != [tag::DICT, tag::NULL] {
        return None;
    }
    Some((queue_flags, refresh_cycle))
}

/// The rest of a URI message's body after its entry: the end of the message dict and the
/// frame's priority.
fn frame_end(c: &mut Cursor<'_>) -> Option<Priority> {
    if c.take(1)? != [tag::NULL] {
        return None;
    }
    let priority = Priority::from_i64(c.int()?.into())?;
    c.buf.is_empty().then_some(priority)
}

#[cfg(test)]
mod tests;
