//! The compact record layout of a crawl queue entry (FSCMT 2.2.2.2) in the queue's own files.
//!
//! The queue is private storage: no peer reads its files, so its records need not be marshal.
//! The marshal 9-tuple spends five bytes of framing on each of the 28 parts of its two URI
//! structures, most of them empty strings (an entry as the schedulers queue it took 215-250
//! bytes for a URI and a referrer of about 40 bytes each). Every byte a push writes is a byte
//! the next sync writes back and, for a growing queue, a fresh page the kernel faults in and
//! later write-protects again (docs/performance.md, thirteenth round); this layout takes about
//! 95 bytes for the same entry.
//!
//! ```text
//! record    = MAGIC uri uri flags:zig frame_flags:zig
//!             count:var { from:bytes kind:zig }   redirects
//!             queue_flags:zig refresh_cycle:zig
//! uri       = bits:u8 mask:u16le [port:zig] { bytes }   one per set bit of mask, in field order
//! bytes     = len:var octets
//! ```
//!
//! `var` is LEB128 (at most 10 bytes), `zig` a zigzag-mapped `var`. `bits`: 1 parsed, 2 skip
//! fragments, 4 port present, 8 default scheme "http" (then its mask bit is clear). `mask` bit
//! `i` is set when byte field `i` of [`FIELDS`] order is not empty. Entries with extra metadata
//! keep the marshal layout, as do the records queues written before this layout hold: a record
//! that does not start with [`MAGIC`] is read as marshal (a marshal tuple starts with `(`).

use std::borrow::Cow;

use crate::msg::{CrawlQueueEntry, Redirect, UriStructure};

/// First byte of a compact record; never the first byte of a marshal value.
pub(super) const MAGIC: u8 = 0xC1;

const PARSED: u8 = 1;
const SKIP_FRAGMENTS: u8 = 2;
const HAS_PORT: u8 = 4;
const SCHEME_HTTP: u8 = 8;
const KNOWN_BITS: u8 = PARSED | SKIP_FRAGMENTS | HAS_PORT | SCHEME_HTTP;
/// Index of the default scheme among the byte fields.
const DEFAULT_SCHEME: usize = 9;
const FIELDS: usize = 11;

fn fields<'u, 'a>(u: &'u UriStructure<'a>) -> [&'u Cow<'a, [u8]>; FIELDS] {
    [
        &u.uri,
        &u.scheme,
        &u.netloc,
        &u.host,
        &u.path,
        &u.query,
        &u.params,
        &u.fragment,
        &u.credentials,
        &u.default_scheme,
        &u.host_idna,
    ]
}

fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_zig(out: &mut Vec<u8>, v: i64) {
    put_var(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_var(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_uri(out: &mut Vec<u8>, u: &UriStructure<'_>) {
    let mut bits = 0;
    if u.parsed {
        bits |= PARSED;
    }
    if u.skip_fragments {
        bits |= SKIP_FRAGMENTS;
    }
    if u.port.is_some() {
        bits |= HAS_PORT;
    }
    let http = &*u.default_scheme == b"http";
    if http {
        bits |= SCHEME_HTTP;
    }
    let f = fields(u);
    let mut mask = 0u16;
    for (i, b) in f.iter().enumerate() {
        // The default scheme "http" is a bit of `bits`, not a string.
        let implied = i == DEFAULT_SCHEME && http;
        if !b.is_empty() && !implied {
            mask |= 1 << i;
        }
    }
    out.push(bits);
    out.extend_from_slice(&mask.to_le_bytes());
    if let Some(p) = u.port {
        put_zig(out, p);
    }
    for (i, b) in f.iter().enumerate() {
        if mask & (1 << i) != 0 {
            put_bytes(out, b);
        }
    }
}

/// Appends the compact record of `e`, or returns false (writing nothing) for an entry with
/// extra metadata, which keeps the marshal layout.
pub(super) fn encode(e: &CrawlQueueEntry<'_>, out: &mut Vec<u8>) -> bool {
    if !e.extra.is_empty() {
        return false;
    }
    out.reserve(
        32 + e.uri.uri.len()
            + e.uri.host.len()
            + e.uri.path.len()
            + e.uri.netloc.len()
            + e.referrer.uri.len(),
    );
    out.push(MAGIC);
    put_uri(out, &e.uri);
    put_uri(out, &e.referrer);
    put_zig(out, e.uri_flags);
    put_zig(out, e.frame_flags);
    put_var(out, e.redirects.len() as u64);
    for r in &e.redirects {
        put_bytes(out, &r.from);
        put_zig(out, r.kind);
    }
    put_zig(out, e.queue_flags);
    put_zig(out, e.refresh_cycle);
    true
}

/// Why a compact record could not be read.
pub(super) type Damage = &'static str;

/// A URI structure as read: its bits, its port and its byte fields in [`fields`] order.
type UriFields<'a> = (u8, Option<i64>, [&'a [u8]; FIELDS]);

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Result<u8, Damage> {
        let (&b, rest) = self.buf.split_first().ok_or("record ends early")?;
        self.buf = rest;
        Ok(b)
    }

    fn var(&mut self) -> Result<u64, Damage> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("integer longer than 64 bits")
    }

    fn zig(&mut self) -> Result<i64, Damage> {
        let v = self.var()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn bytes(&mut self) -> Result<&'a [u8], Damage> {
        let len = self.var()?;
        if len > self.buf.len() as u64 {
            return Err("string longer than the record");
        }
        let (b, rest) = self.buf.split_at(len as usize);
        self.buf = rest;
        Ok(b)
    }

    fn uri(&mut self) -> Result<UriStructure<'a>, Damage> {
        let (bits, port, f) = self.uri_fields()?;
        let b = |i: usize| Cow::Borrowed(f[i]);
        Ok(UriStructure {
            uri: b(0),
            scheme: b(1),
            netloc: b(2),
            host: b(3),
            port,
            path: b(4),
            query: b(5),
            params: b(6),
            fragment: b(7),
            credentials: b(8),
            default_scheme: b(9),
            skip_fragments: bits & SKIP_FRAGMENTS != 0,
            parsed: bits & PARSED != 0,
            host_idna: b(10),
        })
    }

    /// The number of redirects that follows; a redirect takes at least two bytes, so a count
    /// the rest of the record cannot hold is refused (and never reserved for).
    fn redirect_count(&mut self) -> Result<usize, Damage> {
        let n = self.var()?;
        if n > self.buf.len() as u64 / 2 {
            return Err("more redirects than the record holds");
        }
        Ok(n as usize)
    }

    /// The record has been read whole.
    fn end(&self) -> Result<(), Damage> {
        match self.buf.is_empty() {
            true => Ok(()),
            false => Err("bytes after the entry"),
        }
    }

    /// A URI structure's bits, port and byte fields (in [`fields`] order), checked as
    /// [`Reader::uri`] needs them.
    fn uri_fields(&mut self) -> Result<UriFields<'a>, Damage> {
        let bits = self.byte()?;
        if bits & !KNOWN_BITS != 0 {
            return Err("unknown URI structure bits");
        }
        let mask = u16::from_le_bytes([self.byte()?, self.byte()?]);
        if mask >> FIELDS != 0 {
            return Err("unknown URI structure fields");
        }
        let port = if bits & HAS_PORT != 0 {
            Some(self.zig()?)
        } else {
            None
        };
        let mut f: [&'a [u8]; FIELDS] = [b""; FIELDS];
        for (i, slot) in f.iter_mut().enumerate() {
            if mask & (1 << i) != 0 {
                *slot = self.bytes()?;
            }
        }
        if bits & SCHEME_HTTP != 0 {
            if mask & (1 << DEFAULT_SCHEME) != 0 {
                return Err("two default schemes");
            }
            f[DEFAULT_SCHEME] = b"http";
        }
        Ok((bits, port, f))
    }
}

/// The URI and URI flags of a record [`encode`] wrote, as [`decode`] gives them, without
/// building the entry (the queue's scheduler looks at every record it takes this way first);
/// the whole record is checked as [`decode`] checks it, so the two refuse the same records.
pub(super) fn peek(rec: &[u8]) -> Result<(&[u8], i64), Damage> {
    let mut r = Reader { buf: rec };
    if r.byte()? != MAGIC {
        return Err("not a compact record");
    }
    let (_, _, uri) = r.uri_fields()?;
    r.uri_fields()?;
    let uri_flags = r.zig()?;
    r.zig()?;
    for _ in 0..r.redirect_count()? {
        r.bytes()?;
        r.zig()?;
    }
    r.zig()?;
    r.zig()?;
    r.end()?;
    Ok((uri[0], uri_flags))
}

/// Reads a record [`encode`] wrote (starting with [`MAGIC`]); the entry borrows from `rec`.
pub(super) fn decode(rec: &[u8]) -> Result<CrawlQueueEntry<'_>, Damage> {
    let mut r = Reader { buf: rec };
    if r.byte()? != MAGIC {
        return Err("not a compact record");
    }
    let uri = r.uri()?;
    let referrer = r.uri()?;
    let uri_flags = r.zig()?;
    let frame_flags = r.zig()?;
    let n = r.redirect_count()?;
    let mut redirects = Vec::with_capacity(n);
    for _ in 0..n {
        let from = r.bytes()?;
        let kind = r.zig()?;
        redirects.push(Redirect {
            from: Cow::Borrowed(from),
            kind,
        });
    }
    let queue_flags = r.zig()?;
    let refresh_cycle = r.zig()?;
    r.end()?;
    let mut e = CrawlQueueEntry::new(uri);
    e.referrer = referrer;
    e.uri_flags = uri_flags;
    e.frame_flags = frame_flags;
    e.redirects = redirects;
    e.queue_flags = queue_flags;
    e.refresh_cycle = refresh_cycle;
    Ok(e)
}
