//! WARC/1.1 archives of fetched exchanges (ISO 28500:2017, the IIPC's "WARC File Format 1.1"),
//! with a CDXJ index beside each file.
//!
//! A [`WarcWriter`] owns one directory. Each file opens with a `warcinfo` record; every
//! [`Exchange`] becomes a `response` record (or a `revisit`: profile server-not-modified for a
//! 304, identical-payload-digest for a payload archived before) followed by its `request`
//! record, the two linked by `WARC-Concurrent-To`. Every record is one gzip member. Files are
//! named `PREFIX-YYYYMMDDhhmmssSSS-SERIAL-HOSTNAME.warc.gz` (WARC 1.1 annex C), carry the
//! suffix `.open` while written, and are renamed when closed, after their index
//! (`PREFIX-...-HOSTNAME.cdxj`) was written and synced. A file left `.open` by a crash is cut
//! back to its last whole member, indexed and closed when the directory is opened again.
//!
//! Pure data and files: the writer has no thread of its own; the node runs it on one.
//!
//! ```
//! use crawlfleet_core::warc::{Exchange, WarcOptions, WarcWriter};
//!
//! let dir = std::env::temp_dir().join(format!("warc-doc-{}", std::process::id()));
//! let mut w = WarcWriter::open(WarcOptions::new(&dir, "crawl", "host1")).unwrap();
//! w.write(&Exchange {
//!     uri: "http://example.com/".into(),
//!     ip: Some("127.0.0.1".parse().unwrap()),
//!     date_ms: 1_764_000_000_000,
//!     request: b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n".to_vec(),
//!     response: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi".to_vec(),
//!     truncated: false,
//! })
//! .unwrap();
//! w.close().unwrap();
//! assert_eq!(w.stats().records, 3); // warcinfo, response, request
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

mod cdxj;
mod record;
#[cfg(test)]
mod tests;
mod writer;

use std::net::IpAddr;

pub use cdxj::{surt, CdxEntry};
pub use record::{
    gzip_member, parse_response, record_bytes, HttpHead, PROFILE_IDENTICAL, PROFILE_NOT_MODIFIED,
};
pub use writer::{recover, WarcOptions, WarcStats, WarcWriter};

/// One fetched exchange, as the fetcher sent and received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// The request's absolute URI (`WARC-Target-URI`).
    pub uri: String,
    /// The address the request went to (`WARC-IP-Address`).
    pub ip: Option<IpAddr>,
    /// When the response was read, in milliseconds since the Unix epoch (`WARC-Date`).
    pub date_ms: i64,
    /// The request head as written.
    pub request: Vec<u8>,
    /// The response as read (status line, header fields, the body with its codings).
    pub response: Vec<u8>,
    /// The body was cut off at the crawl's size limit (`WARC-Truncated: length`).
    pub truncated: bool,
}

/// `sha1:` and the base32 (RFC 4648) SHA-1 of the concatenated parts: the form
/// `WARC-Block-Digest` and `WARC-Payload-Digest` take (WARC 1.1 section 5.8, 5.9).
pub fn sha1_base32(parts: &[&[u8]]) -> String {
    use sha1::Digest;
    let mut h = sha1::Sha1::new();
    for p in parts {
        h.update(p);
    }
    format!("sha1:{}", data_encoding::BASE32.encode(&h.finalize()))
}

/// A fresh `<urn:uuid:...>` record id (WARC 1.1 section 5.2), random (version 4).
pub fn record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

/// The calendar fields of a time in milliseconds since the Unix epoch (UTC).
fn fields(ms: i64) -> (i64, u32, u32, i64, i64, i64, i64) {
    let secs = ms.div_euclid(1000);
    let (y, m, d) = crate::rup::civil_from_days(secs.div_euclid(86_400));
    let s = secs.rem_euclid(86_400);
    (y, m, d, s / 3600, s / 60 % 60, s % 60, ms.rem_euclid(1000))
}

/// `WARC-Date` (WARC 1.1 section 5.4, W3C ISO 8601 in UTC, to the second):
/// `2026-11-25T09:26:00Z`.
pub fn warc_date(ms: i64) -> String {
    let (y, m, d, hh, mm, ss, _) = fields(ms);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// The 14-digit timestamp of CDX(J) lines: `20261125092600`.
pub fn timestamp14(ms: i64) -> String {
    let (y, m, d, hh, mm, ss, _) = fields(ms);
    format!("{y:04}{m:02}{d:02}{hh:02}{mm:02}{ss:02}")
}

/// The 17-digit timestamp of file names (WARC 1.1 annex C): `20261125092600123`.
pub fn timestamp17(ms: i64) -> String {
    let (y, m, d, hh, mm, ss, milli) = fields(ms);
    format!("{y:04}{m:02}{d:02}{hh:02}{mm:02}{ss:02}{milli:03}")
}
