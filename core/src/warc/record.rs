//! One WARC record's bytes (WARC 1.1 section 4: version line, named fields, empty line, block,
//! two CRLFs), its gzip member (annex D.2: one member per record), and the little the writer
//! reads of an HTTP response: where the final head ends, the status and the media type.

use std::io::Write;

use flate2::write::GzEncoder;
use flate2::Compression;

/// `WARC-Profile` of a revisit answering a conditional request with 304 (WARC 1.1 6.7.2).
pub const PROFILE_NOT_MODIFIED: &str =
    "http://netpreserve.org/warc/1.1/revisit/server-not-modified";
/// `WARC-Profile` of a revisit whose payload was archived before (WARC 1.1 6.7.1).
pub const PROFILE_IDENTICAL: &str =
    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";

/// A record: `WARC/1.1`, the fields in the order given, `Content-Length` of the block (the
/// concatenated parts), the block, and the two CRLFs that end a record (WARC 1.1 section 4).
pub fn record_bytes(fields: &[(&str, &str)], block: &[&[u8]]) -> Vec<u8> {
    let len: usize = block.iter().map(|p| p.len()).sum();
    let mut out = Vec::with_capacity(len + 512);
    out.extend_from_slice(b"WARC/1.1\r\n");
    for (name, value) in fields {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        // A field value is one line: a line break in a URI would split the record's head.
        out.extend(value.bytes().filter(|&b| b != b'\r' && b != b'\n'));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {len}\r\n\r\n").as_bytes());
    for p in block {
        out.extend_from_slice(p);
    }
    out.extend_from_slice(b"\r\n\r\n");
    out
}

/// `data` as one gzip member (RFC 1952; no file name, modification time 0).
pub fn gzip_member(data: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(
        Vec::with_capacity(data.len() / 3 + 64),
        Compression::default(),
    );
    // Writing into a Vec cannot fail.
    let _ = e.write_all(data);
    e.finish().unwrap_or_default()
}

/// What the writer needs of a response as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpHead {
    /// Where the final response starts (after any 1xx interim responses).
    pub start: usize,
    /// Where its payload starts (after the final head's empty line).
    pub body: usize,
    /// The status code (0 when the status line does not parse).
    pub status: u16,
    /// The media type of `Content-Type`, lower case, without parameters; `unk` when absent.
    pub mime: String,
}

/// Finds the final response in `raw`: 1xx interim heads are skipped (RFC 9110 15.2). A head
/// without its empty line (cut off) runs to the end.
pub fn parse_response(raw: &[u8]) -> HttpHead {
    let mut start = 0;
    loop {
        let rest = &raw[start..];
        let end = find(rest, b"\r\n\r\n").map_or(rest.len(), |i| i + 4);
        let head = &rest[..end];
        let status = status_of(head);
        if (100..200).contains(&status) && end < rest.len() {
            start += end;
            continue;
        }
        return HttpHead {
            start,
            body: start + end,
            status,
            mime: mime_of(head),
        };
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The code of `HTTP/1.x NNN ...`.
fn status_of(head: &[u8]) -> u16 {
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut words = line.split(|&b| b == b' ');
    let version = words.next().unwrap_or_default();
    if !version.starts_with(b"HTTP/") {
        return 0;
    }
    let code = words.next().unwrap_or_default();
    std::str::from_utf8(code)
        .ok()
        .filter(|c| c.len() == 3)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The media type of the head's first `Content-Type` field.
fn mime_of(head: &[u8]) -> String {
    for line in head.split(|&b| b == b'\n').skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if !line[..colon].eq_ignore_ascii_case(b"content-type") {
            continue;
        }
        let value = &line[colon + 1..];
        let media = value.split(|&b| b == b';').next().unwrap_or_default();
        let media = String::from_utf8_lossy(media.trim_ascii()).to_ascii_lowercase();
        if !media.is_empty() {
            return media;
        }
    }
    "unk".to_string()
}
