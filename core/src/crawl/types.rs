//! The crawl engine's vocabulary: its options, the fetches it asks for, what became of them,
//! and the actions it hands back to the node scheduler.

use std::borrow::Cow;

use super::engine::SiteKey;
use super::sitemaps::Found;
use crate::marshal::Value;
use crate::msg::{Checksum, CrawlQueueEntry, UriStructure};
use crate::sitemap::Sitemap;
use url::Url;

/// Tunables of the engine.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Seconds a parsed robots.txt is trusted.
    pub robots_ttl: f64,
    /// Seconds an idle site stays active before it is released.
    pub site_linger: f64,
    /// Entries held by the engine, all sites (the window of the crawl queue a node has in
    /// memory: the more of a site's entries it holds, the more pages a visit of the site
    /// fetches on one connection; 24,576 by default, ~2.5 MB of records on the synthetic web).
    pub max_queued: usize,
    /// Requests open at once, all sites.
    pub max_in_flight: usize,
    /// Seconds to establish a connection.
    pub connect_timeout: f64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            robots_ttl: 3600.0,
            site_linger: 1.0,
            max_queued: 24_576,
            max_in_flight: 512,
            connect_timeout: 10.0,
        }
    }
}

/// A fetch the engine wants made.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Identifies the outcome.
    pub id: u64,
    /// The absolute URL.
    pub url: String,
    /// `url` parsed, once: the fetcher connects with it and the engine resolves the page's
    /// links against it.
    pub parsed: Url,
    /// The address to connect to (the one the site was allowed for).
    pub ip: String,
    /// The port.
    pub port: u16,
    /// Request headers beyond Host and the connection's own.
    pub headers: Vec<(String, String)>,
    /// Longest body kept.
    pub max_body: usize,
    /// Seconds for the whole fetch.
    pub timeout: f64,
    /// Seconds to connect.
    pub connect_timeout: f64,
    /// Ask in HTTP/1.0, one request a connection (the collection's `use_http_1_1` off).
    pub http10: bool,
}

/// Why a fetch failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Failure {
    /// Connection refused.
    Refused,
    /// Connecting timed out.
    ConnectTimeout,
    /// The response did not complete in time.
    Timeout,
    /// Any other network error.
    Network(String),
    /// The server's bytes are not HTTP.
    Protocol(String),
    /// The body could not be decoded (chunked, gzip).
    Decode(String),
}

/// A response.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fetched {
    /// The status code.
    pub status: u16,
    /// Headers, names lower-case.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The decoded body.
    pub body: Vec<u8>,
    /// The body was cut at the size limit.
    pub truncated: bool,
    /// The body's MD5 (the document checksum), when computed beforehand together with other
    /// bodies' (`md5many`); the engine computes it otherwise.
    pub checksum: Option<[u8; 16]>,
}

impl Fetched {
    /// The first header named `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        header(&self.headers, name)
    }
}

/// The first of `headers` named `name`, in any case (the crawler keeps names lower-case; a
/// document log may hold others).
pub(crate) fn header<'a>(headers: &'a [(String, Vec<u8>)], name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_slice())
}

/// What became of a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The request's id.
    pub id: u64,
    /// The response or the failure.
    pub result: Result<Fetched, Failure>,
    /// Seconds the fetch took.
    pub elapsed: f64,
    /// Bytes read from the network for it: response heads and bodies as sent (TLS records for
    /// HTTPS), whether or not the fetch succeeded (MS-FSCADM 2.2.4.9 ReadNet).
    pub net_read: u64,
    /// Bytes written to the network for it: the request (TLS records for HTTPS; 2.2.4.9
    /// WriteNet).
    pub net_written: u64,
}

/// A fetched document that passed every check: next the duplicate check, then the store.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// The collection.
    pub collection: Vec<u8>,
    /// The URI.
    pub uri: Vec<u8>,
    /// The MD5 of the body.
    pub checksum: Checksum,
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
    /// The entry's URI flags (URIF_META_NOINDEX etc.).
    pub uri_flags: i64,
    /// The URIs that redirected to this one, first first (its equivalence class with it).
    pub redirected_from: Vec<Vec<u8>>,
    /// The entry's in-flight sequence number ([`crate::sched::node::Ready::seq`]): the node
    /// scheduler finishes the entry once the document is fed, so that a document fetched but
    /// not yet fed when the node dies is fetched again.
    pub seq: u64,
}

impl Document {
    /// The first response header named `name` (lower-case).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        header(&self.headers, name)
    }
}

/// A link of a fetched page, for the link store (MS-FSWASDR 2.2.1.3.1.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageLink {
    /// The absolute target.
    pub url: String,
    /// The anchor text.
    pub anchor: String,
    /// The target is on the page's own site.
    pub intra: bool,
}

/// Key of the depth of an entry in its extra metadata (only written when a collection limits
/// depth).
pub(super) const DEPTH_KEY: &[u8] = b"depth";

/// A link of [`Action::Links`] the crawl follows: queued by the node scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkToQueue {
    /// Its place in the action's `links`.
    pub link: usize,
    /// The depth its entry records, when the collection limits depth.
    pub depth: Option<u32>,
}

/// The crawl queue entries of the links `queue` names in `links`, found on page `from`, with
/// the page's (collection, crawl site) for those on the page's own site. The entries borrow
/// the action's URLs: queueing a page's links copies none of them.
pub fn link_entries<'a>(
    from: &'a [u8],
    links: &'a [PageLink],
    queue: &'a [LinkToQueue],
    key: &'a SiteKey,
    refresh_cycle: i64,
) -> impl Iterator<Item = (CrawlQueueEntry<'a>, Option<&'a SiteKey>)> + 'a {
    queue.iter().filter_map(move |q| {
        let l = links.get(q.link)?;
        let mut e = CrawlQueueEntry::new(UriStructure::unparsed(Cow::Borrowed(l.url.as_bytes())));
        e.referrer = UriStructure::unparsed(Cow::Borrowed(from));
        e.refresh_cycle = refresh_cycle;
        if let Some(depth) = q.depth {
            e.extra.push((
                Value::bytes(DEPTH_KEY),
                Value::owned_bytes(depth.to_string().into_bytes()),
            ));
        }
        Some((e, l.intra.then_some(key)))
    })
}

/// What the node scheduler does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Queue an entry (a link or a redirect target): the node scheduler keeps it or forwards it.
    Queue {
        /// The collection.
        collection: Vec<u8>,
        /// The entry.
        entry: Box<CrawlQueueEntry<'static>>,
        /// (collection, crawl site) of the entry when the engine knows it: a link to the
        /// page's own site (saves the node scheduler finding it again).
        site: Option<super::engine::SiteKey>,
    },
    /// Check and store a document.
    Document(Box<Document>),
    /// The links a fetched HTML page carries (those a crawler follows): those the crawl
    /// follows to be queued ([`link_entries`]; the node scheduler keeps or forwards each),
    /// then all of them for the link store.
    Links {
        /// The collection.
        collection: Vec<u8>,
        /// The page.
        from: Vec<u8>,
        /// The page's site as the link store's sitemap line gives it (MS-FSWASDR
        /// 2.2.1.3.1.7): its origin and `/`.
        site: String,
        /// Its links, each once.
        links: Vec<PageLink>,
        /// The links to queue, in the page's order.
        queue: Vec<LinkToQueue>,
        /// (collection, crawl site) of the page.
        key: SiteKey,
        /// The refresh cycle of the page's entry, its links' entries'.
        refresh_cycle: i64,
    },
    /// A conditional request was answered 304 Not Modified: the stored copy is current.
    Unchanged {
        /// The collection.
        collection: Vec<u8>,
        /// The URI.
        uri: Vec<u8>,
    },
    /// The server answered 404 or 410: a stored copy of the URI is to be deleted.
    Gone {
        /// The collection.
        collection: Vec<u8>,
        /// The URI.
        uri: Vec<u8>,
    },
    /// A site's robots.txt was read and the collection uses sitemaps: the sitemaps the site
    /// offers ([`super::sitemaps`]), for the node scheduler to queue.
    Sitemaps {
        /// The collection.
        collection: Vec<u8>,
        /// The crawl site.
        site: String,
        /// The sitemaps' URLs, with where each was found.
        urls: Vec<(String, Found)>,
    },
    /// A sitemap entry was fetched: what the sitemap lists, or why it lists nothing.
    Sitemap {
        /// The collection.
        collection: Vec<u8>,
        /// The crawl site.
        site: String,
        /// The sitemap's URL.
        url: String,
        /// Where it was found.
        found: Found,
        /// Its entries, or the reason it was refused.
        result: Result<Box<Sitemap>, String>,
    },
    /// The site has nothing more to fetch: release it (CMD_UM_STOP_CRAWL_IP).
    SiteDone {
        /// The collection.
        collection: Vec<u8>,
        /// The crawl site.
        site: String,
    },
}
