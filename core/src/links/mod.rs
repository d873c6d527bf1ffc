//! Link data for the link store (MS-FSWASDR, the WebAnalyzer/SPRel Data Receiving Protocol):
//! the CIDHASH of a URL, builders of the batch fields a crawler sends, the parser the store uses
//! on what it receives, the store's log and an index of the stored link graph.
//!
//! A data message (2.2.1) is a marshal dict `{application, collection, batch}` followed by the
//! terminator `2E 2E 2E 00 00 00 00`; the store answers `ack\n` or `failed\n` (2.2.2).
//!
//! ```
//! use crawlfleet_core::links::{cidhash, Application, Message, WebAnalyzerBatch};
//!
//! assert_eq!(cidhash(b"http://www.fourthcoffee.com/").as_str(), "7fD/x4S22g9fsZM8Kbi3+");
//! let mut batch = WebAnalyzerBatch::default();
//! batch.link(b"http://www.fourthcoffee.com/", b"http://www.fourthcoffee.com/about.html",
//!            true, 1244208852, b"about us").unwrap();
//! let msg = Message::webanalyzer(b"sp", &batch);
//! let wire = msg.to_wire();
//! assert!(wire.ends_with(crawlfleet_core::links::TERMINATOR));
//! let back = crawlfleet_core::links::parse_message(&wire[..wire.len() - 7]).unwrap();
//! assert_eq!(back.application, Application::WebAnalyzer);
//! ```

mod build;
#[cfg(test)]
mod build_tests;
mod index;
mod log;
mod mapped;
mod parse;
#[cfg(test)]
mod tests;

use std::fmt;

use md5::{Digest, Md5};

pub use build::{Message, Operation, SprelBatch, WebAnalyzerBatch, EMPTY_DUPLICATE};
pub use index::{Anchor, Equivalence, InLink, IndexBuilder, LinkIndex, OutLink, SprelEntry};
pub use log::{log_path, read_log, stored_logs, LinkLog, LogError, RecoveredLog};
pub use parse::{parse_message, parse_records, Received, Record};

/// The end of every data message (MS-FSWASDR 2.2.1).
pub const TERMINATOR: &[u8; 7] = b"...\0\0\0\0";

/// The answer to a message stored durably (2.2.2).
pub const ACK: &[u8] = b"ack\n";

/// The answer to a message that could not be unmarshalled or stored (2.2.2).
pub const FAILED: &[u8] = b"failed\n";

/// Length of a CIDHASH in characters (2.2.1.3.1.1).
pub const CIDHASH_LEN: usize = 21;

/// A CIDHASH (2.2.1.3.1.1): the first 21 characters of the standard base64 encoding of the MD5
/// of a URL. Always 21 ASCII characters of the base64 alphabet.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CidHash([u8; CIDHASH_LEN]);

impl CidHash {
    /// The 21 characters.
    pub fn as_bytes(&self) -> &[u8; CIDHASH_LEN] {
        &self.0
    }

    /// The 21 characters as text.
    pub fn as_str(&self) -> &str {
        // The bytes are base64 alphabet characters (ASCII): `cidhash` writes them and
        // `from_text` checks them, so this cannot fail.
        std::str::from_utf8(&self.0).unwrap_or("")
    }

    /// A CIDHASH read from text: exactly 21 characters of the standard base64 alphabet.
    pub fn from_text(text: &[u8]) -> Option<CidHash> {
        let arr: [u8; CIDHASH_LEN] = text.try_into().ok()?;
        arr.iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'+' || c == b'/')
            .then_some(CidHash(arr))
    }
}

impl fmt::Debug for CidHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CidHash({})", self.as_str())
    }
}

impl fmt::Display for CidHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The standard base64 alphabet (RFC 4648 section 4), by 6-bit value.
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The CIDHASH of `url` (MS-FSWASDR 2.2.1.3.1.1): base64 of its MD5, cut to 21 characters.
///
/// The 21 characters are the base64 of the digest's first 15 bytes (five groups of three
/// bytes, four characters each) and the top six bits of the sixteenth: written from the
/// alphabet table directly, without encoding the 24 characters and cutting them.
pub fn cidhash(url: &[u8]) -> CidHash {
    cidhash_of(Md5::digest(url).into())
}

/// The CIDHASHes of `urls` into `out` (as long), their MD5s computed together
/// ([`crate::md5many`]): a page's links, a few at a time.
pub fn cidhash_many(urls: &[&[u8]], out: &mut [CidHash]) {
    let mut digests = [[0u8; 16]; 32];
    for (urls, out) in urls
        .chunks(digests.len())
        .zip(out.chunks_mut(digests.len()))
    {
        let digests = &mut digests[..urls.len()];
        crate::md5many::md5_many(urls, digests);
        for (o, d) in out.iter_mut().zip(digests.iter()) {
            *o = cidhash_of(*d);
        }
    }
}

/// The CIDHASH of a URL whose MD5 is `digest`.
fn cidhash_of(digest: [u8; 16]) -> CidHash {
    let mut out = [0u8; CIDHASH_LEN];
    for (group, chars) in digest.chunks_exact(3).zip(out.chunks_exact_mut(4)) {
        let n = u32::from(group[0]) << 16 | u32::from(group[1]) << 8 | u32::from(group[2]);
        chars[0] = BASE64[(n >> 18) as usize & 63];
        chars[1] = BASE64[(n >> 12) as usize & 63];
        chars[2] = BASE64[(n >> 6) as usize & 63];
        chars[3] = BASE64[n as usize & 63];
    }
    out[CIDHASH_LEN - 1] = BASE64[usize::from(digest[15] >> 2)];
    CidHash(out)
}

/// The subsystem a data message is for (2.2.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Application {
    /// `webanalyzer`: link analysis (batch fields of 2.2.1.3.1).
    WebAnalyzer,
    /// `sharepoint`: SPRel (the `uris` field of 2.2.1.3.2).
    SharePoint,
}

impl Application {
    /// Both applications.
    pub const ALL: [Application; 2] = [Application::WebAnalyzer, Application::SharePoint];

    /// The value of the `application` entry.
    pub fn name(self) -> &'static str {
        match self {
            Application::WebAnalyzer => "webanalyzer",
            Application::SharePoint => "sharepoint",
        }
    }

    /// The application named `name`, if any.
    pub fn from_name(name: &[u8]) -> Option<Application> {
        match name {
            b"webanalyzer" => Some(Application::WebAnalyzer),
            b"sharepoint" => Some(Application::SharePoint),
            _ => None,
        }
    }
}

impl fmt::Display for Application {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why link data could not be built or read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// A URL that cannot stand in a line: empty, or holding a space, line feed, carriage return
    /// or NUL (the separators of 2.2.1.3.1).
    BadUrl {
        /// The field being built or read.
        field: &'static str,
        /// The URL (cut to 200 bytes).
        url: Vec<u8>,
    },
    /// The received bytes are not a marshal value.
    Unmarshal(crate::marshal::DecodeError),
    /// The message is not a dict.
    NotADict,
    /// A required entry (`application`, `collection`, `batch`) is missing or not of its type.
    MissingEntry(&'static str),
    /// The `application` entry names neither `webanalyzer` nor `sharepoint`.
    UnknownApplication(Vec<u8>),
    /// A batch entry whose value is not a string.
    FieldNotString(Vec<u8>),
    /// A line of a batch field that does not follow its format.
    BadLine {
        /// The field.
        field: &'static str,
        /// The line (cut to 200 bytes).
        line: Vec<u8>,
    },
}

fn cut(b: &[u8]) -> Vec<u8> {
    b[..b.len().min(200)].to_vec()
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::BadUrl { field, url } => write!(
                f,
                "{field}: URL {:?} is empty or holds a separator (space, LF, CR, NUL)",
                String::from_utf8_lossy(url)
            ),
            LinkError::Unmarshal(e) => write!(f, "cannot unmarshal the message: {e}"),
            LinkError::NotADict => f.write_str("the message is not a dict"),
            LinkError::MissingEntry(k) => write!(f, "the message has no valid {k:?} entry"),
            LinkError::UnknownApplication(a) => {
                write!(f, "unknown application {:?}", String::from_utf8_lossy(a))
            }
            LinkError::FieldNotString(k) => write!(
                f,
                "batch entry {:?} is not a string",
                String::from_utf8_lossy(k)
            ),
            LinkError::BadLine { field, line } => write!(
                f,
                "{field}: malformed line {:?}",
                String::from_utf8_lossy(line)
            ),
        }
    }
}

impl std::error::Error for LinkError {}

/// Checks that `url` can stand in a line of `field`.
///
/// The four separators are all at or below the space, so a URL whose lowest byte is above it
/// (nearly every URL; the minimum is one vectorized pass) holds none of them.
fn check_url(field: &'static str, url: &[u8]) -> Result<(), LinkError> {
    let lowest = url.iter().fold(u8::MAX, |m, &c| m.min(c));
    if url.is_empty()
        || (lowest <= b' ' && url.iter().any(|&c| matches!(c, b' ' | b'\n' | b'\r' | 0)))
    {
        return Err(LinkError::BadUrl {
            field,
            url: cut(url),
        });
    }
    Ok(())
}
