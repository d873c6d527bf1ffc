//! Crawl counters of one collection, named as the statistics of MS-FSCADM 2.2.4.9: continuous
//! counts, and the histograms HTTPResponse, URISkip (2.2.3.1 codes), DocSkip (2.2.3.2 codes)
//! and MimeType.

use std::collections::BTreeMap;

use super::types::Failure;
use crate::marshal::Value;

/// URI skip codes (MS-FSCADM 2.2.3.1).
pub mod uri_skip {
    /// The document said nofollow.
    pub const NOFOLLOW: &str = "nf";
    /// Scheme not allowed.
    pub const SCHEME: &str = "ch";
    /// Excluded by the URI rules.
    pub const URI: &str = "ur";
    /// Disallowed by robots.txt.
    pub const ROBOTS: &str = "ro";
    /// Excluded by the host name rules.
    pub const DOMAIN: &str = "do";
    /// Already queued in this refresh cycle.
    pub const CACHE: &str = "ic";
    /// Deeper than the configured crawl depth.
    pub const DEPTH: &str = "de";
}

/// Web document skip codes (MS-FSCADM 2.2.3.2).
pub mod doc_skip {
    /// Invalid HTTP header.
    pub const HEADER: &str = "he";
    /// MIME type not allowed.
    pub const MIME: &str = "mi";
    /// A response header line is excluded by the configuration (`exclude_headers`).
    pub const HEADER_EXCLUDED: &str = "hx";
    /// Download timed out.
    pub const TIMEOUT: &str = "ti";
    /// Larger than max_doc_size.
    pub const TOO_LARGE: &str = "tl";
    /// Content-Encoding not supported or undecodable.
    pub const ENCODING: &str = "en";
    /// Chunked encoding could not be decoded.
    pub const CHUNK: &str = "cu";
    /// A redirect without a usable target.
    pub const NO_REDIRECT_TARGET: &str = "nr";
    /// `<meta name="robots" content="noindex">`.
    pub const NOINDEX: &str = "ni";
    /// Identical to a document of another URI.
    pub const DUPLICATE: &str = "cs";
    /// Only partly downloaded.
    pub const INCOMPLETE: &str = "in";
    /// Connection not established.
    pub const CONNECT: &str = "co";
    /// Connection timed out.
    pub const CONNECT_TIMEOUT: &str = "ct";
    /// Network error.
    pub const NETWORK: &str = "ne";
    /// Empty document.
    pub const EMPTY: &str = "em";
    /// Empty HTTP header.
    pub const EMPTY_HEADER: &str = "eh";
    /// Anything else.
    pub const OTHER: &str = "ot";
}

/// The smallest and largest samples of the per-document counters over a while.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Extremes {
    /// (smallest, largest) document in bytes.
    pub doc_size: Option<(u64, u64)>,
    /// (shortest, longest) download in seconds.
    pub dl_time: Option<(f64, f64)>,
}

impl Extremes {
    fn merge(&mut self, o: &Extremes) {
        if let Some((lo, hi)) = o.doc_size {
            let (a, b) = self.doc_size.unwrap_or((lo, hi));
            self.doc_size = Some((a.min(lo), b.max(hi)));
        }
        if let Some((lo, hi)) = o.dl_time {
            let (a, b) = self.dl_time.unwrap_or((lo, hi));
            self.dl_time = Some((a.min(lo), b.max(hi)));
        }
    }
}

/// The continuous counters and histograms of MS-FSCADM 2.2.4.9 a crawl engine keeps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CrawlCounters {
    /// URIs taken from the queue and requested.
    pub processed: u64,
    /// HTTP responses received.
    pub downloaded: u64,
    /// Documents stored (new or modified).
    pub stored: u64,
    /// Modified documents.
    pub modified: u64,
    /// Unchanged documents.
    pub unchanged: u64,
    /// Deleted documents.
    pub deleted: u64,
    /// Bytes received from web servers.
    pub read_net: u64,
    /// Bytes sent to web servers.
    pub write_net: u64,
    /// Documents with a Last-Modified header.
    pub has_last_mod: u64,
    /// Documents with an ETag header.
    pub has_etag: u64,
    /// Seconds spent downloading.
    pub dl_time: f64,
    /// Downloads timed in `dl_time` (requests answered or failed).
    pub downloads: u64,
    /// Longest download, seconds.
    pub dl_time_max: f64,
    /// Bytes of documents.
    pub doc_size: u64,
    /// Documents measured in `doc_size`.
    pub docs: u64,
    /// Largest document.
    pub doc_size_max: u64,
    /// The smallest and largest document and download since the statistics last took them
    /// ([`CrawlCounters::take_extremes`]): what a statistics delta's DocSizeMax / DLTimeMax
    /// are made of (MS-FSCADM 2.2.5, per document).
    pub extremes: Extremes,
    /// Fetches that failed and will be retried.
    pub retries: u64,
    /// robots.txt files with a Sitemap directive.
    pub has_sitemap: u64,
    /// Sitemap files read (sitemaps.org; not an FSCADM counter).
    pub sitemaps_read: u64,
    /// Sitemap files refused: a failed fetch, not 2xx, over the limits, bad XML.
    pub sitemaps_refused: u64,
    /// Stored URIs a refresh cycle did not fetch because their sitemap `<lastmod>` is not
    /// newer than their last fetch.
    pub sitemap_skipped: u64,
    /// Links to other sites.
    pub local_fwd: u64,
    /// Links within the site.
    pub local: u64,
    /// Redirects followed.
    pub redirects: u64,
    /// HTTP status -> count.
    pub http_response: BTreeMap<u16, u64>,
    /// URI skip code -> count.
    pub uri_skip: BTreeMap<&'static str, u64>,
    /// Document skip code -> count.
    pub doc_skip: BTreeMap<&'static str, u64>,
    /// Content-Type -> count.
    pub mime_type: BTreeMap<String, u64>,
}

impl CrawlCounters {
    /// Counts a stored-size document of `bytes` (DocSize, one sample per document).
    pub fn count_doc(&mut self, bytes: u64) {
        self.doc_size += bytes;
        self.docs += 1;
        self.doc_size_max = self.doc_size_max.max(bytes);
        self.extremes.merge(&Extremes {
            doc_size: Some((bytes, bytes)),
            dl_time: None,
        });
    }

    /// Counts a download that took `secs` (DLTime, one sample per download).
    pub fn count_download(&mut self, secs: f64) {
        let secs = secs.max(0.0);
        self.dl_time += secs;
        self.downloads += 1;
        self.dl_time_max = self.dl_time_max.max(secs);
        self.extremes.merge(&Extremes {
            doc_size: None,
            dl_time: Some((secs, secs)),
        });
    }

    /// The extremes since the last call, which starts them again.
    pub fn take_extremes(&mut self) -> Extremes {
        std::mem::take(&mut self.extremes)
    }

    /// Counts a skipped URI.
    pub fn skip_uri(&mut self, code: &'static str) {
        *self.uri_skip.entry(code).or_default() += 1;
    }

    /// Counts a skipped document.
    pub fn skip_doc(&mut self, code: &'static str) {
        *self.doc_skip.entry(code).or_default() += 1;
    }

    /// Documents skipped, all codes.
    pub fn docs_skipped(&self) -> u64 {
        self.doc_skip.values().sum()
    }

    /// URIs skipped, all codes.
    pub fn uris_skipped(&self) -> u64 {
        self.uri_skip.values().sum()
    }

    /// Fetches that failed at the network level (co, ct, ne, ti, he, cu, en, eh, ot).
    pub fn errors(&self) -> u64 {
        use doc_skip::*;
        [
            CONNECT,
            CONNECT_TIMEOUT,
            NETWORK,
            TIMEOUT,
            HEADER,
            CHUNK,
            ENCODING,
            EMPTY_HEADER,
            OTHER,
        ]
        .iter()
        .map(|c| self.doc_skip.get(c).copied().unwrap_or(0))
        .sum()
    }

    /// The continuous counts under their MS-FSCADM 2.2.4.9 names.
    pub fn continuous(&self) -> [(&'static str, f64); 16] {
        [
            ("Processed", self.processed as f64),
            ("Downloaded", self.downloaded as f64),
            ("Stored", self.stored as f64),
            ("Modified", self.modified as f64),
            ("Unchanged", self.unchanged as f64),
            ("Deleted", self.deleted as f64),
            ("ReadNet", self.read_net as f64),
            ("WriteNet", self.write_net as f64),
            ("HasLastMod", self.has_last_mod as f64),
            ("HasETag", self.has_etag as f64),
            ("DLTime", self.dl_time),
            ("DocSize", self.doc_size as f64),
            ("Retries", self.retries as f64),
            ("HasSitemap", self.has_sitemap as f64),
            ("LocalFwd", self.local_fwd as f64),
            ("Local", self.local as f64),
        ]
    }

    /// The histograms under their MS-FSCADM 2.2.4.9 names, buckets as strings.
    pub fn histograms(&self) -> [(&'static str, Vec<(String, u64)>); 4] {
        [
            (
                "HTTPResponse",
                self.http_response
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
            ),
            (
                "URISkip",
                self.uri_skip
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
            ),
            (
                "DocSkip",
                self.doc_skip
                    .iter()
                    .map(|(k, v)| (k.to_string(), *v))
                    .collect(),
            ),
            (
                "MimeType",
                self.mime_type
                    .iter()
                    .map(|(k, v)| (k.clone(), *v))
                    .collect(),
            ),
        ]
    }

    /// What was counted since `old` (an earlier copy of these counters).
    pub fn since(&self, old: &CrawlCounters) -> CrawlCounters {
        fn hist<K: Ord + Clone>(
            now: &BTreeMap<K, u64>,
            old: &BTreeMap<K, u64>,
        ) -> BTreeMap<K, u64> {
            now.iter()
                .filter_map(|(k, v)| {
                    let d = v.saturating_sub(old.get(k).copied().unwrap_or(0));
                    (d > 0).then(|| (k.clone(), d))
                })
                .collect()
        }
        CrawlCounters {
            processed: self.processed.saturating_sub(old.processed),
            downloaded: self.downloaded.saturating_sub(old.downloaded),
            stored: self.stored.saturating_sub(old.stored),
            modified: self.modified.saturating_sub(old.modified),
            unchanged: self.unchanged.saturating_sub(old.unchanged),
            deleted: self.deleted.saturating_sub(old.deleted),
            read_net: self.read_net.saturating_sub(old.read_net),
            write_net: self.write_net.saturating_sub(old.write_net),
            has_last_mod: self.has_last_mod.saturating_sub(old.has_last_mod),
            has_etag: self.has_etag.saturating_sub(old.has_etag),
            dl_time: (self.dl_time - old.dl_time).max(0.0),
            downloads: self.downloads.saturating_sub(old.downloads),
            dl_time_max: self.dl_time_max,
            doc_size: self.doc_size.saturating_sub(old.doc_size),
            docs: self.docs.saturating_sub(old.docs),
            doc_size_max: self.doc_size_max,
            extremes: self.extremes,
            retries: self.retries.saturating_sub(old.retries),
            has_sitemap: self.has_sitemap.saturating_sub(old.has_sitemap),
            sitemaps_read: self.sitemaps_read.saturating_sub(old.sitemaps_read),
            sitemaps_refused: self.sitemaps_refused.saturating_sub(old.sitemaps_refused),
            sitemap_skipped: self.sitemap_skipped.saturating_sub(old.sitemap_skipped),
            local_fwd: self.local_fwd.saturating_sub(old.local_fwd),
            local: self.local.saturating_sub(old.local),
            redirects: self.redirects.saturating_sub(old.redirects),
            http_response: hist(&self.http_response, &old.http_response),
            uri_skip: hist(&self.uri_skip, &old.uri_skip),
            doc_skip: hist(&self.doc_skip, &old.doc_skip),
            mime_type: hist(&self.mime_type, &old.mime_type),
        }
    }

    /// Adds `other` into `self`.
    pub fn merge(&mut self, other: &CrawlCounters) {
        self.processed += other.processed;
        self.downloaded += other.downloaded;
        self.stored += other.stored;
        self.modified += other.modified;
        self.unchanged += other.unchanged;
        self.deleted += other.deleted;
        self.read_net += other.read_net;
        self.write_net += other.write_net;
        self.has_last_mod += other.has_last_mod;
        self.has_etag += other.has_etag;
        self.dl_time += other.dl_time;
        self.downloads += other.downloads;
        self.dl_time_max = self.dl_time_max.max(other.dl_time_max);
        self.doc_size += other.doc_size;
        self.docs += other.docs;
        self.doc_size_max = self.doc_size_max.max(other.doc_size_max);
        self.extremes.merge(&other.extremes);
        self.retries += other.retries;
        self.has_sitemap += other.has_sitemap;
        self.sitemaps_read += other.sitemaps_read;
        self.sitemaps_refused += other.sitemaps_refused;
        self.sitemap_skipped += other.sitemap_skipped;
        self.local_fwd += other.local_fwd;
        self.local += other.local;
        self.redirects += other.redirects;
        for (k, v) in &other.http_response {
            *self.http_response.entry(*k).or_default() += v;
        }
        for (k, v) in &other.uri_skip {
            *self.uri_skip.entry(k).or_default() += v;
        }
        for (k, v) in &other.doc_skip {
            *self.doc_skip.entry(k).or_default() += v;
        }
        for (k, v) in &other.mime_type {
            *self.mime_type.entry(k.clone()).or_default() += v;
        }
    }

    /// The counters as a marshal dict with the attribute names of MS-FSCADM 2.2.4.9 (histogram
    /// keys as strings, as the spec asks of HTTPResponse).
    pub fn to_value(&self) -> Value<'static> {
        let s = |x: &str| Value::owned_bytes(x.as_bytes().to_vec());
        let mut pairs: Vec<(Value<'static>, Value<'static>)> = self
            .continuous()
            .iter()
            .map(|(k, v)| (s(k), Value::Float(*v)))
            .collect();
        for (k, buckets) in self.histograms() {
            let h = buckets
                .into_iter()
                .map(|(b, n)| (s(&b), Value::Float(n as f64)))
                .collect();
            pairs.push((s(k), Value::Dict(h)));
        }
        Value::Dict(pairs)
    }
}

/// The document skip code of a failed fetch (MS-FSCADM 2.2.3.2).
pub(super) fn failure_code(f: &Failure) -> &'static str {
    match f {
        Failure::Refused => doc_skip::CONNECT,
        Failure::ConnectTimeout => doc_skip::CONNECT_TIMEOUT,
        Failure::Timeout => doc_skip::TIMEOUT,
        Failure::Network(_) => doc_skip::NETWORK,
        Failure::Protocol(_) => doc_skip::HEADER,
        Failure::Decode(_) => doc_skip::ENCODING,
    }
}
