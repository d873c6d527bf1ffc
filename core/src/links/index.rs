//! An index of stored link data, by CIDHASH: in-links and anchor texts of a URL (by the `TO`
//! column of `links`), out-links (by the `CIDHASH` column), equivalents (`urieq` / `eqrepr`,
//! and SPRel `uris` duplicates), and URLs back from hashes (`urimap`, `no_links`, `eqrepr`).
//!
//! The index lives in memory and is built from the logs ([`IndexBuilder::add_log`]); the query
//! command rebuilds it at each start rather than keeping a second file in step with the log.
//!
//! Newer data replaces older data per document, by the TIMESTAMP column (2.2.1.3.1.1: "all
//! hyperlinks extracted from the document during a run have the same timestamp"): links of a
//! newer run replace the document's out-links, `no_links` and `delete` with a timestamp not
//! older than the run clear them, and a newer `urieq` run replaces the class. A message sent
//! twice (a retry after a lost `ack`) adds nothing: identical lines of one run count once.

use std::collections::HashMap;
use std::path::Path;

use super::build::Operation;
use super::{cidhash, parse_message, parse_records, read_log, CidHash, LogError, Received, Record};

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct StoredLink {
    to: CidHash,
    anchor: Vec<u8>,
    intra: bool,
}

#[derive(Clone, Debug, Default)]
struct DocLinks {
    ts: u64,
    links: Vec<StoredLink>,
}

#[derive(Clone, Debug, Default)]
struct Class {
    ts: u64,
    members: Vec<CidHash>,
    repr: Vec<Vec<u8>>,
}

/// The SPRel state of a document (2.2.1.3.2.1): its newest operation and duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SprelEntry {
    /// Processing time of the newest lines.
    pub ts: u64,
    /// Their operation.
    pub op: Option<Operation>,
    /// The DUPLICATE column of those lines (C7 82 lines add none).
    pub duplicates: Vec<Vec<u8>>,
}

/// Builds a [`LinkIndex`] from messages in the order they were stored.
#[derive(Debug, Default)]
pub struct IndexBuilder {
    ix: LinkIndex,
}

impl IndexBuilder {
    /// Adds every message of the log at `path`. Messages that do not parse (none should: the
    /// store checked them) and malformed lines are counted, not fatal.
    pub fn add_log(&mut self, path: &Path) -> Result<(), LogError> {
        read_log(path, |payload| match parse_message(payload) {
            Ok(m) => self.add_message(&m),
            Err(e) => {
                log::warn!("{}: skipping a stored message: {e}", path.display());
                self.ix.bad_messages += 1;
            }
        })?;
        Ok(())
    }

    /// Adds one received message.
    pub fn add_message(&mut self, m: &Received<'_>) {
        self.ix.messages += 1;
        parse_records(m, |r| match r {
            Ok(rec) => self.apply(&rec),
            Err(_) => self.ix.bad_lines += 1,
        });
    }

    /// Applies one record.
    pub fn apply(&mut self, rec: &Record<'_>) {
        let ix = &mut self.ix;
        match rec {
            Record::Link {
                from,
                to,
                intra,
                ts,
                anchor,
            } => {
                if ix.deleted.get(from).is_some_and(|d| d >= ts) {
                    return;
                }
                ix.deleted.remove(from);
                let d = ix.docs.entry(*from).or_default();
                if *ts > d.ts {
                    d.ts = *ts;
                    d.links.clear();
                }
                if *ts == d.ts {
                    d.links.push(StoredLink {
                        to: *to,
                        anchor: anchor.to_vec(),
                        intra: *intra,
                    });
                }
            }
            Record::NoLinks { url, doc, ts } => {
                ix.urls.insert(*doc, url.to_vec());
                let d = ix.docs.entry(*doc).or_default();
                if *ts >= d.ts {
                    d.ts = *ts;
                    d.links.clear();
                }
            }
            Record::Delete { doc, ts } => {
                if ix.docs.get(doc).is_none_or(|d| d.ts <= *ts) {
                    ix.docs.remove(doc);
                    ix.deleted.insert(*doc, *ts);
                }
                if ix.classes.get(doc).is_some_and(|c| c.ts <= *ts) {
                    ix.classes.remove(doc);
                }
            }
            Record::UriEq { doc, member, ts } => {
                let c = ix.classes.entry(*doc).or_default();
                if *ts > c.ts {
                    *c = Class {
                        ts: *ts,
                        ..Class::default()
                    };
                }
                if *ts == c.ts && !c.members.contains(member) {
                    c.members.push(*member);
                }
            }
            Record::EqRepr {
                doc,
                url,
                ts,
                class,
            } => {
                ix.urls.insert(*doc, url.to_vec());
                for m in class {
                    ix.urls.insert(cidhash(m), m.to_vec());
                }
                let c = ix.classes.entry(*doc).or_default();
                if *ts > c.ts {
                    *c = Class {
                        ts: *ts,
                        ..Class::default()
                    };
                }
                if *ts == c.ts {
                    c.repr = class.iter().map(|m| m.to_vec()).collect();
                }
            }
            Record::UriMap { url, doc } => {
                ix.urls.insert(*doc, url.to_vec());
            }
            Record::SiteMap { doc, site } => {
                ix.sites.insert(*doc, site.to_vec());
            }
            Record::Uri {
                url,
                ts,
                op,
                duplicate,
            } => {
                let e = ix.sprel.entry(url.to_vec()).or_default();
                if *ts > e.ts || e.op.is_none() {
                    *e = SprelEntry {
                        ts: *ts,
                        op: Some(*op),
                        duplicates: Vec::new(),
                    };
                }
                if let Some(d) = duplicate.filter(|_| *ts == e.ts && e.op == Some(*op)) {
                    if !e.duplicates.iter().any(|x| x == d) {
                        e.duplicates.push(d.to_vec());
                    }
                }
            }
        }
    }

    /// The finished index.
    pub fn finish(mut self) -> LinkIndex {
        let ix = &mut self.ix;
        for (from, d) in &mut ix.docs {
            d.links.sort_unstable();
            d.links.dedup();
            for (i, l) in d.links.iter().enumerate() {
                ix.inlinks.entry(l.to).or_default().push((*from, i as u32));
            }
        }
        for v in ix.inlinks.values_mut() {
            v.sort_unstable();
        }
        for (doc, c) in &ix.classes {
            for m in &c.members {
                ix.member_of.insert(*m, *doc);
            }
        }
        self.ix
    }
}

/// A hyperlink to the queried URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InLink<'a> {
    /// The linking document.
    pub from: CidHash,
    /// Its URL, when some `urimap` line gave it.
    pub from_url: Option<&'a [u8]>,
    /// Same site.
    pub intra: bool,
    /// The run's timestamp.
    pub ts: u64,
    /// The anchor text.
    pub anchor: &'a [u8],
}

/// A hyperlink of the queried URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutLink<'a> {
    /// The target.
    pub to: CidHash,
    /// Its URL, when known.
    pub to_url: Option<&'a [u8]>,
    /// Same site.
    pub intra: bool,
    /// The run's timestamp.
    pub ts: u64,
    /// The anchor text.
    pub anchor: &'a [u8],
}

/// An anchor text of links to the queried URL, with how many links carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor<'a> {
    /// The text.
    pub text: &'a [u8],
    /// Links carrying it.
    pub count: usize,
}

/// The equivalence class a URL belongs to (2.2.1.3.1.2-3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Equivalence<'a> {
    /// The document the class belongs to.
    pub doc: CidHash,
    /// Its URL, when known.
    pub doc_url: Option<&'a [u8]>,
    /// The timestamp of the class.
    pub ts: u64,
    /// The members (`urieq`), with their URLs when known.
    pub members: Vec<(CidHash, Option<&'a [u8]>)>,
    /// The class as `eqrepr` gave it.
    pub repr: Vec<&'a [u8]>,
}

/// The stored link graph, queryable by URL; from [`IndexBuilder`].
#[derive(Debug, Default)]
pub struct LinkIndex {
    urls: HashMap<CidHash, Vec<u8>>,
    docs: HashMap<CidHash, DocLinks>,
    /// Target -> (linking document, index in its links), sorted.
    inlinks: HashMap<CidHash, Vec<(CidHash, u32)>>,
    classes: HashMap<CidHash, Class>,
    member_of: HashMap<CidHash, CidHash>,
    deleted: HashMap<CidHash, u64>,
    sites: HashMap<CidHash, Vec<u8>>,
    sprel: HashMap<Vec<u8>, SprelEntry>,
    messages: u64,
    bad_messages: u64,
    bad_lines: u64,
}

impl LinkIndex {
    /// A builder.
    pub fn builder() -> IndexBuilder {
        IndexBuilder::default()
    }

    /// The URL of a CIDHASH, when some line mapped it.
    pub fn url_of(&self, h: &CidHash) -> Option<&[u8]> {
        self.urls.get(h).map(Vec::as_slice)
    }

    /// The hyperlinks to `url`, ordered by linking document.
    pub fn inlinks(&self, url: &[u8]) -> Vec<InLink<'_>> {
        let Some(list) = self.inlinks.get(&cidhash(url)) else {
            return Vec::new();
        };
        list.iter()
            .filter_map(|(from, i)| {
                let d = self.docs.get(from)?;
                let l = d.links.get(*i as usize)?;
                Some(InLink {
                    from: *from,
                    from_url: self.url_of(from),
                    intra: l.intra,
                    ts: d.ts,
                    anchor: &l.anchor,
                })
            })
            .collect()
    }

    /// The distinct non-empty anchor texts of the hyperlinks to `url`, most frequent first.
    pub fn anchors(&self, url: &[u8]) -> Vec<Anchor<'_>> {
        let mut counts: HashMap<&[u8], usize> = HashMap::new();
        for l in self.inlinks(url) {
            if !l.anchor.is_empty() {
                *counts.entry(l.anchor).or_default() += 1;
            }
        }
        let mut out: Vec<Anchor<'_>> = counts
            .into_iter()
            .map(|(text, count)| Anchor { text, count })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.text.cmp(b.text)));
        out
    }

    /// The hyperlinks of the document `url` (its newest run).
    pub fn outlinks(&self, url: &[u8]) -> Vec<OutLink<'_>> {
        let Some(d) = self.docs.get(&cidhash(url)) else {
            return Vec::new();
        };
        d.links
            .iter()
            .map(|l| OutLink {
                to: l.to,
                to_url: self.url_of(&l.to),
                intra: l.intra,
                ts: d.ts,
                anchor: &l.anchor,
            })
            .collect()
    }

    /// The equivalence class of `url`: its own when it is a document with one, else the class
    /// it is a member of.
    pub fn equivalents(&self, url: &[u8]) -> Option<Equivalence<'_>> {
        let h = cidhash(url);
        let doc = if self.classes.contains_key(&h) {
            h
        } else {
            *self.member_of.get(&h)?
        };
        let c = self.classes.get(&doc)?;
        Some(Equivalence {
            doc,
            doc_url: self.url_of(&doc),
            ts: c.ts,
            members: c.members.iter().map(|m| (*m, self.url_of(m))).collect(),
            repr: c.repr.iter().map(Vec::as_slice).collect(),
        })
    }

    /// The SPRel state of the document `url`.
    pub fn sprel(&self, url: &[u8]) -> Option<&SprelEntry> {
        self.sprel.get(url)
    }

    /// The site of the document `url` (`sitemap`).
    pub fn site_of(&self, url: &[u8]) -> Option<&[u8]> {
        self.sites.get(&cidhash(url)).map(Vec::as_slice)
    }

    /// True when the newest word on `url` is a `delete`.
    pub fn is_deleted(&self, url: &[u8]) -> bool {
        self.deleted.contains_key(&cidhash(url))
    }

    /// Messages read.
    pub fn messages(&self) -> u64 {
        self.messages
    }

    /// Stored messages that did not parse, and malformed lines.
    pub fn bad(&self) -> (u64, u64) {
        (self.bad_messages, self.bad_lines)
    }

    /// Documents with out-link data, and hyperlinks in all.
    pub fn link_counts(&self) -> (usize, usize) {
        (
            self.docs.len(),
            self.docs.values().map(|d| d.links.len()).sum(),
        )
    }
}
