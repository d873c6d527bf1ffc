//! Building the batch fields of a data message (MS-FSWASDR 2.2.1.3) and the message itself.
//!
//! The lines are written straight into each field's buffer, with no allocation per line: the
//! CIDHASH as 21 characters from a table, the timestamp's digits by `itoa`, the anchor text
//! copied and its line breaks blanked in place. A page's URL is hashed and checked once for all
//! its links (the batch remembers the last document URL it hashed).

use super::mapped::Mapped;
use super::{
    check_url, cidhash, cidhash_many, Application, CidHash, LinkError, CIDHASH_LEN, TERMINATOR,
};
use crate::marshal::{self, Value};

/// The DUPLICATE column of an SPRel `uris` line when there is no duplicate to name: the two
/// bytes C7 82 (2.2.1.3.2.1).
pub const EMPTY_DUPLICATE: &[u8; 2] = b"\xc7\x82";

/// The longest ASCII TIMESTAMP (`u64::MAX` has 20 digits).
const TS_MAX: usize = 20;

/// The fields of a WebAnalyzer batch (2.2.1.3.1.1-7), each a string of lines ending in `\n`.
///
/// The document-level methods ([`link`](Self::link), [`equivalence`](Self::equivalence),
/// [`no_links`](Self::no_links)) also write the `urimap` lines 2.2.1.3.1.6 asks for (every URL
/// of `links`, `urieq` and `no_links` with its CIDHASH), once per URL and batch. The `*_line`
/// methods write one line of one field and nothing else.
#[derive(Clone, Debug, Default)]
pub struct WebAnalyzerBatch {
    links: Vec<u8>,
    urieq: Vec<u8>,
    eqrepr: Vec<u8>,
    delete: Vec<u8>,
    no_links: Vec<u8>,
    urimap: Vec<u8>,
    sitemap: Vec<u8>,
    /// URLs already in `urimap`, by CIDHASH.
    mapped: Mapped,
    /// The last document URL hashed, so that a page's links hash and check it once.
    last: LastDoc,
    lines: usize,
}

/// A document URL already checked and hashed in this batch.
#[derive(Clone, Debug, Default)]
struct LastDoc {
    url: Vec<u8>,
    hash: Option<CidHash>,
    /// Its `urimap` line is written.
    mapped: bool,
}

/// Appends `ts` in ASCII digits (2.2.1.3.1.1 TIMESTAMP).
fn put_ts(out: &mut Vec<u8>, ts: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(ts).as_bytes());
}

/// Appends the anchor text, line feeds and carriage returns made spaces (they would end the
/// line): one copy, then the (rare) breaks blanked in place.
fn put_anchor(out: &mut Vec<u8>, anchor: &[u8]) {
    let start = out.len();
    out.extend_from_slice(anchor);
    for c in &mut out[start..] {
        if *c == b'\n' || *c == b'\r' {
            *c = b' ';
        }
    }
}

impl WebAnalyzerBatch {
    /// The CIDHASH of the document URL `doc`, checked for `field` (2.2.1.3.1): computed once
    /// while the same document comes back (a page's links, its `urimap` and `sitemap` lines).
    fn doc_hash(&mut self, field: &'static str, doc: &[u8]) -> Result<CidHash, LinkError> {
        if let Some(h) = self.last.hash {
            if self.last.url == doc {
                return Ok(h);
            }
        }
        check_url(field, doc)?;
        let h = cidhash(doc);
        self.last.url.clear();
        self.last.url.extend_from_slice(doc);
        self.last.hash = Some(h);
        self.last.mapped = self.mapped.contains(&h);
        Ok(h)
    }

    /// One `links` line (2.2.1.3.1.1): `<CIDHASH> <TO> <INTRA> <TIMESTAMP> <ANCHORTEXT>\n`.
    /// Line feeds and carriage returns in the anchor text become spaces (they would end the
    /// line).
    pub fn link_line(&mut self, from: &CidHash, to: &CidHash, intra: bool, ts: u64, anchor: &[u8]) {
        let out = &mut self.links;
        // Two CIDHASHes, the separators, INTRA, the timestamp and the line feed.
        out.reserve(2 * CIDHASH_LEN + 6 + TS_MAX + anchor.len());
        out.extend_from_slice(from.as_bytes());
        out.push(b' ');
        out.extend_from_slice(to.as_bytes());
        out.extend_from_slice(if intra { b" 1 " } else { b" 0 " });
        put_ts(out, ts);
        out.push(b' ');
        put_anchor(out, anchor);
        out.push(b'\n');
        self.lines += 1;
    }

    /// A hyperlink of the document `from` to `to` with its anchor text: a `links` line and the
    /// `urimap` lines of both URLs. `intra`: `to` is on the same site as `from`.
    pub fn link(
        &mut self,
        from: &[u8],
        to: &[u8],
        intra: bool,
        ts: u64,
        anchor: &[u8],
    ) -> Result<(), LinkError> {
        self.link_hashed(from, to, cidhash(to), intra, ts, anchor)
    }

    /// [`Self::link`] with `t`, the CIDHASH of `to`, computed by the caller: a caller with a
    /// page's links hashes them all first and [`Self::prefetch`]es their places.
    pub fn link_hashed(
        &mut self,
        from: &[u8],
        to: &[u8],
        t: CidHash,
        intra: bool,
        ts: u64,
        anchor: &[u8],
    ) -> Result<(), LinkError> {
        let f = self.doc_hash("links", from)?;
        check_url("links", to)?;
        debug_assert!(t == cidhash(to));
        self.link_line(&f, &t, intra, ts, anchor);
        self.map_doc(f);
        self.map(to, t);
        Ok(())
    }

    /// The `links` lines of page `from`, one per link as [`Self::link`] writes it, in order
    /// (`parts` gives a link's URL, anchor text and whether it is on the page's site); a link
    /// refused (a URL the protocol cannot carry) is handed to `refused` and the rest go on.
    /// The links' CIDHASHes are computed a few at a time and their places in the set of mapped
    /// URLs prefetched before any is looked up. Returns the lines written.
    pub fn page_links<T>(
        &mut self,
        from: &[u8],
        links: &[T],
        parts: impl Fn(&T) -> (&[u8], &[u8], bool),
        ts: u64,
        mut refused: impl FnMut(LinkError),
    ) -> usize {
        const AHEAD: usize = 16;
        let mut written = 0;
        for chunk in links.chunks(AHEAD) {
            let mut hashes = [CidHash([0; CIDHASH_LEN]); AHEAD];
            let mut urls: [&[u8]; AHEAD] = [&[]; AHEAD];
            for (u, l) in urls.iter_mut().zip(chunk) {
                *u = parts(l).0;
            }
            cidhash_many(&urls[..chunk.len()], &mut hashes[..chunk.len()]);
            for h in &hashes[..chunk.len()] {
                self.mapped.prefetch(h);
            }
            for (l, h) in chunk.iter().zip(hashes) {
                let (url, anchor, intra) = parts(l);
                match self.link_hashed(from, url, h, intra, ts, anchor) {
                    Ok(()) => written += 1,
                    Err(e) => refused(e),
                }
            }
        }
        written
    }

    /// Asks the CPU to bring the place of the CIDHASH `h` in the batch's set of mapped URLs
    /// into the cache (a hint: nothing the batch holds changes).
    #[inline]
    pub fn prefetch(&self, h: &CidHash) {
        self.mapped.prefetch(h);
    }

    /// One `urieq` line (2.2.1.3.1.2): `<CIDHASH> <MEMBER> <TIMESTAMP>\n`.
    pub fn urieq_line(&mut self, doc: &CidHash, member: &CidHash, ts: u64) {
        let out = &mut self.urieq;
        out.reserve(2 * CIDHASH_LEN + 3 + TS_MAX);
        out.extend_from_slice(doc.as_bytes());
        out.push(b' ');
        out.extend_from_slice(member.as_bytes());
        out.push(b' ');
        put_ts(out, ts);
        out.push(b'\n');
        self.lines += 1;
    }

    /// One `eqrepr` line (2.2.1.3.1.3): `<CIDHASH> <DOCUMENT ID> <TIMESTAMP> <EQREPR>\n`, the
    /// class's URLs separated by single NUL bytes.
    pub fn eqrepr_line(&mut self, doc: &[u8], ts: u64, class: &[&[u8]]) -> Result<(), LinkError> {
        let h = self.doc_hash("eqrepr", doc)?;
        for m in class {
            check_url("eqrepr", m)?;
        }
        let out = &mut self.eqrepr;
        out.extend_from_slice(h.as_bytes());
        out.push(b' ');
        out.extend_from_slice(doc);
        out.push(b' ');
        put_ts(out, ts);
        out.push(b' ');
        for (i, m) in class.iter().enumerate() {
            if i > 0 {
                out.push(0);
            }
            out.extend_from_slice(m);
        }
        out.push(b'\n');
        self.lines += 1;
        Ok(())
    }

    /// The equivalence class of the document `doc` (the URLs that redirect to it, in the order
    /// given): a `urieq` line per member, one `eqrepr` line, and the `urimap` lines.
    pub fn equivalence(&mut self, doc: &[u8], class: &[&[u8]], ts: u64) -> Result<(), LinkError> {
        let d = self.doc_hash("urieq", doc)?;
        for m in class {
            check_url("urieq", m)?;
        }
        for m in class {
            self.urieq_line(&d, &cidhash(m), ts);
        }
        self.eqrepr_line(doc, ts, class)?;
        self.map_doc(d);
        for m in class {
            self.map(m, cidhash(m));
        }
        Ok(())
    }

    /// A `delete` line (2.2.1.3.1.4): `<CIDHASH> <TIMESTAMP>\n`.
    pub fn delete(&mut self, doc: &[u8], ts: u64) -> Result<(), LinkError> {
        let h = self.doc_hash("delete", doc)?;
        let out = &mut self.delete;
        out.extend_from_slice(h.as_bytes());
        out.push(b' ');
        put_ts(out, ts);
        out.push(b'\n');
        self.lines += 1;
        Ok(())
    }

    /// A document without hyperlinks: a `no_links` line (2.2.1.3.1.5,
    /// `<DOCUMENT ID> <CIDHASH> <TIMESTAMP>\n`) and its `urimap` line.
    pub fn no_links(&mut self, doc: &[u8], ts: u64) -> Result<(), LinkError> {
        let h = self.doc_hash("no_links", doc)?;
        let out = &mut self.no_links;
        out.extend_from_slice(doc);
        out.push(b' ');
        out.extend_from_slice(h.as_bytes());
        out.push(b' ');
        put_ts(out, ts);
        out.push(b'\n');
        self.lines += 1;
        self.map_doc(h);
        Ok(())
    }

    /// A `urimap` line (2.2.1.3.1.6, `<DOCUMENT ID> <CIDHASH>\n`), unless this batch maps the
    /// URL already.
    pub fn urimap(&mut self, url: &[u8]) -> Result<(), LinkError> {
        let h = self.doc_hash("urimap", url)?;
        self.map_doc(h);
        Ok(())
    }

    /// The `urimap` line of the last document hashed (`h` its CIDHASH), unless written.
    fn map_doc(&mut self, h: CidHash) {
        if self.last.mapped {
            return;
        }
        self.last.mapped = true;
        let url = std::mem::take(&mut self.last.url);
        self.map(&url, h);
        self.last.url = url;
    }

    fn map(&mut self, url: &[u8], h: CidHash) {
        if !self.mapped.insert(h) {
            return;
        }
        if self.last.hash == Some(h) {
            self.last.mapped = true;
        }
        let out = &mut self.urimap;
        out.reserve(url.len() + CIDHASH_LEN + 2);
        out.extend_from_slice(url);
        out.push(b' ');
        out.extend_from_slice(h.as_bytes());
        out.push(b'\n');
        self.lines += 1;
    }

    /// A `sitemap` line (2.2.1.3.1.7): `<CIDHASH> <SITEURL>\n`.
    pub fn sitemap(&mut self, doc: &[u8], site: &[u8]) -> Result<(), LinkError> {
        let h = self.doc_hash("sitemap", doc)?;
        check_url("sitemap", site)?;
        let out = &mut self.sitemap;
        out.extend_from_slice(h.as_bytes());
        out.push(b' ');
        out.extend_from_slice(site);
        out.push(b'\n');
        self.lines += 1;
        Ok(())
    }

    /// The non-empty fields, by key, in the order of 2.2.1.3.1.1-7.
    pub fn fields(&self) -> Vec<(&'static str, &[u8])> {
        [
            ("links", &self.links),
            ("urieq", &self.urieq),
            ("eqrepr", &self.eqrepr),
            ("delete", &self.delete),
            ("no_links", &self.no_links),
            ("urimap", &self.urimap),
            ("sitemap", &self.sitemap),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k, v.as_slice()))
        .collect()
    }

    /// The value of field `key` (empty when absent).
    pub fn field(&self, key: &str) -> &[u8] {
        self.fields()
            .into_iter()
            .find(|(k, _)| *k == key)
            .map_or(&[][..], |(_, v)| v)
    }

    /// Lines written so far, all fields together.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Bytes of all fields together.
    pub fn byte_len(&self) -> usize {
        [
            &self.links,
            &self.urieq,
            &self.eqrepr,
            &self.delete,
            &self.no_links,
            &self.urimap,
            &self.sitemap,
        ]
        .iter()
        .map(|v| v.len())
        .sum()
    }

    /// True when no line was written.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }

    /// Empties the batch and keeps its buffers, so that the next batch is written into memory
    /// already grown and touched (a new batch grows each field from nothing to megabytes,
    /// faulting in fresh pages at every doubling). What is written after it is what a new
    /// batch would hold.
    pub fn clear(&mut self) {
        for field in [
            &mut self.links,
            &mut self.urieq,
            &mut self.eqrepr,
            &mut self.delete,
            &mut self.no_links,
            &mut self.urimap,
            &mut self.sitemap,
        ] {
            field.clear();
        }
        self.mapped.clear();
        self.last.url.clear();
        self.last.hash = None;
        self.last.mapped = false;
        self.lines = 0;
    }
}

/// The operation of an SPRel `uris` line (2.2.1.3.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `ADD`: the document was added to the index.
    Add,
    /// `DEL`: the document was deleted from the index.
    Del,
    /// `URLSCHCHANGE`.
    UrlSchChange,
}

impl Operation {
    /// The OPERATION column.
    pub fn name(self) -> &'static [u8] {
        match self {
            Operation::Add => b"ADD",
            Operation::Del => b"DEL",
            Operation::UrlSchChange => b"URLSCHCHANGE",
        }
    }

    /// The operation named `name`.
    pub fn from_name(name: &[u8]) -> Option<Operation> {
        match name {
            b"ADD" => Some(Operation::Add),
            b"DEL" => Some(Operation::Del),
            b"URLSCHCHANGE" => Some(Operation::UrlSchChange),
            _ => None,
        }
    }
}

/// The one field of an SPRel batch: `uris` (2.2.1.3.2.1).
#[derive(Clone, Debug, Default)]
pub struct SprelBatch {
    uris: Vec<u8>,
    lines: usize,
}

impl SprelBatch {
    /// The `uris` lines of one document, `<DOCUMENT ID> <TIMESTAMP> <OPERATION> <DUPLICATE>\n`,
    /// by the DUPLICATE rule of 2.2.1.3.2.1: for ADD and URLSCHCHANGE with a non-empty
    /// equivalence class, one line per member naming it; otherwise one line with the two bytes
    /// C7 82 ([`EMPTY_DUPLICATE`]). DEL always takes C7 82, whatever the class.
    pub fn uri(
        &mut self,
        doc: &[u8],
        ts: u64,
        op: Operation,
        class: &[&[u8]],
    ) -> Result<(), LinkError> {
        check_url("uris", doc)?;
        for m in class {
            check_url("uris", m)?;
        }
        if op == Operation::Del || class.is_empty() {
            self.line(doc, ts, op, EMPTY_DUPLICATE);
        } else {
            for m in class {
                self.line(doc, ts, op, m);
            }
        }
        Ok(())
    }

    fn line(&mut self, doc: &[u8], ts: u64, op: Operation, dup: &[u8]) {
        let out = &mut self.uris;
        out.extend_from_slice(doc);
        out.push(b' ');
        put_ts(out, ts);
        out.push(b' ');
        out.extend_from_slice(op.name());
        out.push(b' ');
        out.extend_from_slice(dup);
        out.push(b'\n');
        self.lines += 1;
    }

    /// The `uris` field.
    pub fn uris(&self) -> &[u8] {
        &self.uris
    }

    /// Lines written so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Bytes of the field.
    pub fn byte_len(&self) -> usize {
        self.uris.len()
    }

    /// True when no line was written.
    pub fn is_empty(&self) -> bool {
        self.lines == 0
    }
}

/// A data message (2.2.1) ready to encode: application, collection and the batch's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// The `application` entry.
    pub application: Application,
    /// The `collection` entry.
    pub collection: &'a [u8],
    /// The batch entries, by key, in the order they are written.
    pub fields: Vec<(&'a str, &'a [u8])>,
}

impl<'a> Message<'a> {
    /// A message carrying a WebAnalyzer batch.
    pub fn webanalyzer(collection: &'a [u8], batch: &'a WebAnalyzerBatch) -> Self {
        Message {
            application: Application::WebAnalyzer,
            collection,
            fields: batch.fields(),
        }
    }

    /// A message carrying an SPRel batch.
    pub fn sharepoint(collection: &'a [u8], batch: &'a SprelBatch) -> Self {
        Message {
            application: Application::SharePoint,
            collection,
            fields: vec![("uris", batch.uris())],
        }
    }

    /// The marshal dict `{application, collection, batch}` (entries in that order, as in the
    /// golden vectors; a dict's order carries no meaning).
    pub fn to_value(&self) -> Value<'a> {
        let batch = self
            .fields
            .iter()
            .map(|(k, v)| (Value::bytes(k.as_bytes()), Value::bytes(v)))
            .collect();
        Value::Dict(vec![
            (
                Value::bytes(b"application"),
                Value::bytes(self.application.name().as_bytes()),
            ),
            (Value::bytes(b"collection"), Value::bytes(self.collection)),
            (Value::bytes(b"batch"), Value::Dict(batch)),
        ])
    }

    /// The bytes [`Message::encode_into`] appends: a marshal string is its tag, a 4-byte
    /// length and its bytes; a dict is its tag, its pairs and a closing byte. (An estimate
    /// short of this grew a multi-megabyte buffer by doubling it, copying it whole.)
    pub fn encoded_len(&self) -> usize {
        const STR: usize = 5;
        let pair = |k: usize, v: usize| STR + k + STR + v;
        let batch = 2 + self
            .fields
            .iter()
            .map(|(k, v)| pair(k.len(), v.len()))
            .sum::<usize>();
        2 + pair("application".len(), self.application.name().len())
            + pair("collection".len(), self.collection.len())
            + STR
            + "batch".len()
            + batch
            + TERMINATOR.len()
    }

    /// Appends the marshal dict and the terminator: the bytes sent to the store. Room for the
    /// whole message is reserved first, so a buffer is grown once (not at all when it is a
    /// reused one already large enough). An empty buffer too small is replaced, not grown:
    /// growing it would copy its whole old allocation (the allocator does not know it is
    /// empty), megabytes for a reused wire buffer.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let need = self.encoded_len();
        if out.is_empty() && out.capacity() < need {
            *out = Vec::with_capacity(need);
        }
        out.reserve(need);
        marshal::encode_into(&self.to_value(), out);
        out.extend_from_slice(TERMINATOR);
    }

    /// The bytes sent to the store.
    pub fn to_wire(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }
}
