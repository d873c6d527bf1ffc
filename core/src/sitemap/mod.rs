//! Sitemaps (the sitemaps.org protocol, 0.9): reading a sitemap or a sitemap index into the
//! URLs it lists with their `<lastmod>`, within the protocol's limits and its scope rule.
//!
//! ```
//! use crawlfleet_core::sitemap::{read, Kind, Scope};
//!
//! let xml = br#"<?xml version="1.0" encoding="UTF-8"?>
//! <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
//!   <url><loc>http://example.com/a.html</loc><lastmod>2005-01-01</lastmod></url>
//!   <url><loc>http://other.example/b.html</loc></url>
//! </urlset>"#;
//! let url = url::Url::parse("http://example.com/sitemap.xml").unwrap();
//! let map = read(xml, &Scope::of_file(&url)).unwrap();
//! assert_eq!(map.kind, Kind::UrlSet);
//! assert_eq!(map.entries.len(), 1);
//! assert_eq!(map.entries[0].lastmod, Some(1_104_537_600));
//! assert_eq!(map.out_of_scope, 1);
//! ```
//!
//! Decisions, each from the protocol text:
//! - Limits ("Sitemap file format"): at most 50,000 URLs and 50 MB (52,428,800 bytes)
//!   uncompressed per file. A larger file is refused whole ([`SitemapError`]); a gzip body is
//!   inflated at most one byte past the limit, never unbounded.
//! - gzip: a body that starts with the gzip magic bytes is inflated (a `.xml.gz` file served
//!   as `application/gzip`); a `Content-Encoding: gzip` body arrives already decoded.
//! - Scope ("Sitemap file location"): a sitemap lists URLs of its own host (scheme, host and
//!   port) under its own directory; one named in robots.txt ("Specifying the Sitemap location
//!   in your robots.txt file") covers its whole host. A `<loc>` out of scope is skipped and
//!   counted. A sitemap index lists sitemaps of its own host.
//! - `<loc>` is an absolute http or https URL of fewer than 2,048 characters; `<lastmod>` a W3C
//!   Datetime ([`parse_w3c_datetime`]), a bad one counting as absent.
//! - XML sitemaps only: the protocol's plain-text and RSS forms are not read.

mod lastmod;
mod plain;

use std::borrow::Cow;
use std::fmt;
use std::io::Read;

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::Event;
use quick_xml::Reader;
use url::Url;

pub use lastmod::parse_w3c_datetime;

/// URLs one sitemap file (or sitemaps one index) may list.
pub const MAX_URLS: usize = 50_000;
/// Bytes one sitemap file may hold, uncompressed.
pub const MAX_BYTES: usize = 52_428_800;
/// Characters of a `<loc>` ("less than 2,048 characters").
pub const MAX_LOC: usize = 2_047;

/// What a sitemap file is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `<urlset>`: pages.
    UrlSet,
    /// `<sitemapindex>`: more sitemaps.
    Index,
}

/// One `<url>` (or `<sitemap>` of an index).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The absolute URL, as parsed (normalized by the URL parser).
    pub loc: String,
    /// `<lastmod>`, Unix seconds (UTC).
    pub lastmod: Option<i64>,
}

/// A sitemap file read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sitemap {
    /// A URL set or an index.
    pub kind: Kind,
    /// The entries in scope, in file order.
    pub entries: Vec<Entry>,
    /// `<loc>`s skipped as out of the file's scope.
    pub out_of_scope: u64,
    /// Entries skipped for a missing or unusable `<loc>`.
    pub bad: u64,
    /// Entries read in all (each counts against [`MAX_URLS`]).
    pub seen: u64,
}

/// Why a sitemap file was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SitemapError {
    /// More than [`MAX_BYTES`] uncompressed.
    TooLarge {
        /// The limit.
        limit: usize,
    },
    /// More than [`MAX_URLS`] entries.
    TooManyUrls {
        /// The limit.
        limit: usize,
    },
    /// The gzip stream is broken.
    Gzip(String),
    /// The XML is not well formed, or not UTF-8 (sitemaps.org: "must be UTF-8 encoded").
    Xml(String),
    /// The root element is neither `urlset` nor `sitemapindex`.
    NotASitemap(String),
}

impl fmt::Display for SitemapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SitemapError::TooLarge { limit } => {
                write!(
                    f,
                    "more than {limit} bytes uncompressed (sitemaps.org limit)"
                )
            }
            SitemapError::TooManyUrls { limit } => {
                write!(f, "more than {limit} URLs (sitemaps.org limit)")
            }
            SitemapError::Gzip(e) => write!(f, "bad gzip stream: {e}"),
            SitemapError::Xml(e) => write!(f, "bad XML: {e}"),
            SitemapError::NotASitemap(root) => {
                write!(
                    f,
                    "root element <{root}> is neither urlset nor sitemapindex"
                )
            }
        }
    }
}

impl std::error::Error for SitemapError {}

/// The URLs a sitemap may list: one origin, paths under a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scope {
    origin: String,
    prefix: String,
}

impl Scope {
    /// The scope of a sitemap found at `url`: its host, its directory ("Sitemap file
    /// location").
    pub fn of_file(url: &Url) -> Scope {
        let path = url.path();
        let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        Scope {
            origin: url.origin().ascii_serialization(),
            prefix: if dir.is_empty() {
                "/".into()
            } else {
                dir.into()
            },
        }
    }

    /// The scope of a sitemap named in a robots.txt: the whole host.
    pub fn of_host(url: &Url) -> Scope {
        Scope {
            origin: url.origin().ascii_serialization(),
            prefix: "/".into(),
        }
    }

    /// True when `url` is in scope.
    pub fn contains(&self, url: &Url) -> bool {
        url.origin().ascii_serialization() == self.origin && url.path().starts_with(&self.prefix)
    }

    /// True when `url` is on the scope's host (what an index may name).
    pub fn same_host(&self, url: &Url) -> bool {
        url.origin().ascii_serialization() == self.origin
    }

    /// [`Scope::contains`] for a plain URL (`plain::plain_url`) whose origin is its first
    /// `origin` bytes.
    fn contains_plain(&self, url: &str, origin: usize) -> bool {
        self.same_host_plain(url, origin) && url[origin..].starts_with(&self.prefix)
    }

    /// [`Scope::same_host`] for a plain URL whose origin is its first `origin` bytes.
    fn same_host_plain(&self, url: &str, origin: usize) -> bool {
        url[..origin] == self.origin
    }
}

/// The body of a sitemap response, inflated when it is gzip, refused past [`MAX_BYTES`].
pub fn inflate(body: &[u8]) -> Result<Cow<'_, [u8]>, SitemapError> {
    let too_large = SitemapError::TooLarge { limit: MAX_BYTES };
    if !body.starts_with(&[0x1f, 0x8b]) {
        return if body.len() > MAX_BYTES {
            Err(too_large)
        } else {
            Ok(Cow::Borrowed(body))
        };
    }
    let mut out = Vec::new();
    flate2::read::MultiGzDecoder::new(body)
        .take(MAX_BYTES as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| SitemapError::Gzip(e.to_string()))?;
    if out.len() > MAX_BYTES {
        return Err(too_large);
    }
    Ok(Cow::Owned(out))
}

/// Reads a sitemap body (gzip or not) whose URLs must lie in `scope`.
pub fn read(body: &[u8], scope: &Scope) -> Result<Sitemap, SitemapError> {
    let xml = inflate(body)?;
    let text = std::str::from_utf8(&xml).map_err(|e| SitemapError::Xml(e.to_string()))?;
    parse(text, scope)
}

/// Which text is being gathered.
#[derive(Clone, Copy, PartialEq)]
enum Field {
    None,
    Loc,
    Lastmod,
}

fn parse(text: &str, scope: &Scope) -> Result<Sitemap, SitemapError> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let xml_err = |e: &dyn fmt::Display, at: u64| SitemapError::Xml(format!("at byte {at}: {e}"));
    let mut map = Sitemap {
        kind: Kind::UrlSet,
        entries: Vec::new(),
        out_of_scope: 0,
        bad: 0,
        seen: 0,
    };
    let mut root: Option<Kind> = None;
    let mut depth = 0usize;
    // Inside an entry (<url> or <sitemap> at depth 2): its <loc> and <lastmod> text.
    let mut in_entry = false;
    let mut field = Field::None;
    let (mut loc, mut lastmod) = (String::new(), String::new());
    loop {
        let at = reader.buffer_position();
        let ev = reader.read_event().map_err(|e| xml_err(&e, at))?;
        match ev {
            Event::Start(e) if depth == 0 => {
                map.kind = root_kind(e.local_name().as_ref())?;
                root = Some(map.kind);
                depth = 1;
            }
            Event::Empty(e) if depth == 0 => {
                map.kind = root_kind(e.local_name().as_ref())?;
                root = Some(map.kind);
            }
            Event::Start(e) => {
                depth += 1;
                let name = e.local_name();
                let entry_name = match map.kind {
                    Kind::UrlSet => "url",
                    Kind::Index => "sitemap",
                };
                if depth == 2 && name.as_ref() == entry_name {
                    in_entry = true;
                    loc.clear();
                    lastmod.clear();
                } else if depth == 3 && in_entry {
                    field = match name.as_ref() {
                        "loc" => Field::Loc,
                        "lastmod" => Field::Lastmod,
                        _ => Field::None,
                    };
                }
            }
            Event::Empty(_) => {}
            Event::End(_) => {
                if depth == 2 && in_entry {
                    in_entry = false;
                    entry(&mut map, scope, &loc, &lastmod)?;
                }
                field = Field::None;
                depth = depth.saturating_sub(1);
            }
            Event::Text(t) if field != Field::None => {
                push(&mut loc, &mut lastmod, field, &t.xml10_content());
            }
            Event::CData(t) if field != Field::None => {
                push(&mut loc, &mut lastmod, field, &t.xml10_content());
            }
            Event::GeneralRef(r) if field != Field::None => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    Ok(None) => match resolve_predefined_entity(r.as_ref()) {
                        Some(s) => s.to_string(),
                        None => {
                            return Err(xml_err(&format!("unknown entity &{};", r.as_ref()), at))
                        }
                    },
                    Err(e) => return Err(xml_err(&e, at)),
                };
                push(&mut loc, &mut lastmod, field, &resolved);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if root.is_none() {
        return Err(SitemapError::NotASitemap(String::new()));
    }
    Ok(map)
}

fn root_kind(name: &str) -> Result<Kind, SitemapError> {
    match name {
        "urlset" => Ok(Kind::UrlSet),
        "sitemapindex" => Ok(Kind::Index),
        other => Err(SitemapError::NotASitemap(other.to_string())),
    }
}

fn push(loc: &mut String, lastmod: &mut String, field: Field, s: &str) {
    let (dst, max) = match field {
        Field::Loc => (loc, MAX_LOC + 1),
        Field::Lastmod => (lastmod, 64),
        Field::None => return,
    };
    // Bounded: a longer value is unusable anyway (and then refused as such).
    if dst.len() <= max {
        dst.push_str(s);
    }
}

/// Takes one entry: checked, scoped, counted against the limit.
fn entry(map: &mut Sitemap, scope: &Scope, loc: &str, lastmod: &str) -> Result<(), SitemapError> {
    map.seen += 1;
    if map.seen > MAX_URLS as u64 {
        return Err(SitemapError::TooManyUrls { limit: MAX_URLS });
    }
    let loc = loc.trim();
    // Most sitemaps list URLs the parser would give back as they are: those are scoped by
    // their text (`plain`).
    if let Some(origin) = (loc.len() <= MAX_LOC)
        .then(|| plain::plain_url(loc))
        .flatten()
    {
        let in_scope = match map.kind {
            Kind::UrlSet => scope.contains_plain(loc, origin),
            Kind::Index => scope.same_host_plain(loc, origin),
        };
        if !in_scope {
            map.out_of_scope += 1;
            return Ok(());
        }
        map.entries.push(Entry {
            loc: loc.to_string(),
            lastmod: parse_w3c_datetime(lastmod),
        });
        return Ok(());
    }
    let url = (loc.len() <= MAX_LOC)
        .then(|| Url::parse(loc).ok())
        .flatten()
        .filter(|u| matches!(u.scheme(), "http" | "https"));
    let Some(url) = url else {
        map.bad += 1;
        return Ok(());
    };
    let in_scope = match map.kind {
        Kind::UrlSet => scope.contains(&url),
        Kind::Index => scope.same_host(&url),
    };
    if !in_scope {
        map.out_of_scope += 1;
        return Ok(());
    }
    map.entries.push(Entry {
        loc: url.into(),
        lastmod: parse_w3c_datetime(lastmod),
    });
    Ok(())
}

#[cfg(test)]
mod tests;
