//! What the crawl store keeps per URI, and its log record encoding.
//!
//! Payload of a record (little-endian; byte strings carry a u32 length prefix):
//! - put: `1`, uri, checksum (16 bytes), first_seen u64, last_crawl u64, status u16, cycle u32,
//!   size u32, state u8 (0 stored, 1 duplicate of an unknown owner, 2 duplicate with the owner
//!   following, 3 deleted, 4 error), [owner], flags u8 (bit 0: an ETag follows, bit 1: a
//!   Last-Modified follows), [etag], [last_modified].
//! - remove: `2`, uri.

use crate::recordlog::{put_bytes, Cur};

/// Largest URI, duplicate owner URI, ETag or Last-Modified value accepted (64 KiB).
pub const MAX_FIELD: usize = 64 << 10;

/// Largest record payload a reader accepts: four fields at their limit and the fixed part.
pub(crate) const MAX_RECORD: usize = 4 * (MAX_FIELD + 4) + 64;

const OP_PUT: u8 = 1;
const OP_REMOVE: u8 = 2;

const STATE_STORED: u8 = 0;
const STATE_DUP_UNKNOWN: u8 = 1;
const STATE_DUP_OWNER: u8 = 2;
const STATE_DELETED: u8 = 3;
const STATE_ERROR: u8 = 4;

const HAS_ETAG: u8 = 1;
const HAS_LAST_MODIFIED: u8 = 2;

/// Where a crawled URI stands.
///
/// A 304 answer on refresh is not a state of its own: the record stays `Stored` with a new
/// `last_crawl` and `cycle` (the refresh counts it as unchanged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UriState {
    /// The document was fed (add or update).
    Stored,
    /// The document's checksum belongs to another URI (skip code `cs`); it was not fed.
    Duplicate {
        /// The owner URI when the duplicate server named it (PKT_OWNURI), else `None`.
        owner: Option<Vec<u8>>,
    },
    /// 404 or 410 on refresh, or deleted by an administrator (FSCMT 3.1.5.15-16); a delete was
    /// fed.
    Deleted,
    /// The fetch failed; `status` says how.
    Error,
}

/// What the crawl store keeps for one URI (FSCADM 3.3.1's minimum — which URIs were crawled,
/// their checksum and when — plus the HTTP validators and the refresh cycle).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UriRecord {
    /// MD5 of the document body (all zero when there was no body).
    pub checksum: [u8; 16],
    /// When the URI was first crawled, unix seconds.
    pub first_seen: u64,
    /// When the URI was last crawled, unix seconds.
    pub last_crawl: u64,
    /// The ETag of the last 200 answer, for If-None-Match.
    pub etag: Option<Vec<u8>>,
    /// The Last-Modified of the last 200 answer, for If-Modified-Since.
    pub last_modified: Option<Vec<u8>>,
    /// The HTTP status of the last fetch (or the engine's error code).
    pub status: u16,
    /// Where the URI stands.
    pub state: UriState,
    /// The refresh cycle of the last crawl.
    pub cycle: u32,
    /// Bytes of the document body.
    pub size: u32,
}

impl UriRecord {
    /// A record of a document fetched now (`first_seen` = `last_crawl` = `now`), stored, with
    /// no validators.
    pub fn stored(checksum: [u8; 16], now: u64, status: u16, cycle: u32, size: u32) -> Self {
        UriRecord {
            checksum,
            first_seen: now,
            last_crawl: now,
            etag: None,
            last_modified: None,
            status,
            state: UriState::Stored,
            cycle,
            size,
        }
    }

    /// The record without its validators when one is too long to keep ([`MAX_FIELD`]): the
    /// next fetch of the URI is then unconditional.
    pub(crate) fn keepable(self) -> UriRecord {
        match self.oversized() {
            Some(_) => UriRecord {
                etag: None,
                last_modified: None,
                ..self
            },
            None => self,
        }
    }

    /// The field over [`MAX_FIELD`], if any, with its length.
    pub(crate) fn oversized(&self) -> Option<(&'static str, usize)> {
        let fields = [
            ("etag", self.etag.as_deref()),
            ("last_modified", self.last_modified.as_deref()),
            (
                "duplicate owner",
                match &self.state {
                    UriState::Duplicate { owner } => owner.as_deref(),
                    _ => None,
                },
            ),
        ];
        fields
            .into_iter()
            .find_map(|(name, f)| f.filter(|f| f.len() > MAX_FIELD).map(|f| (name, f.len())))
    }
}

/// A decoded log record.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Op<'a> {
    Put(&'a [u8], UriRecord),
    Remove(&'a [u8]),
}

/// Appends the payload of a put record.
pub(crate) fn encode_put(out: &mut Vec<u8>, uri: &[u8], rec: &UriRecord) {
    out.push(OP_PUT);
    put_bytes(out, uri);
    out.extend_from_slice(&rec.checksum);
    out.extend_from_slice(&rec.first_seen.to_le_bytes());
    out.extend_from_slice(&rec.last_crawl.to_le_bytes());
    out.extend_from_slice(&rec.status.to_le_bytes());
    out.extend_from_slice(&rec.cycle.to_le_bytes());
    out.extend_from_slice(&rec.size.to_le_bytes());
    match &rec.state {
        UriState::Stored => out.push(STATE_STORED),
        UriState::Duplicate { owner: None } => out.push(STATE_DUP_UNKNOWN),
        UriState::Duplicate { owner: Some(o) } => {
            out.push(STATE_DUP_OWNER);
            put_bytes(out, o);
        }
        UriState::Deleted => out.push(STATE_DELETED),
        UriState::Error => out.push(STATE_ERROR),
    }
    let flags = if rec.etag.is_some() { HAS_ETAG } else { 0 }
        | if rec.last_modified.is_some() {
            HAS_LAST_MODIFIED
        } else {
            0
        };
    out.push(flags);
    if let Some(e) = &rec.etag {
        put_bytes(out, e);
    }
    if let Some(lm) = &rec.last_modified {
        put_bytes(out, lm);
    }
}

/// Appends the payload of a remove record.
pub(crate) fn encode_remove(out: &mut Vec<u8>, uri: &[u8]) {
    out.push(OP_REMOVE);
    put_bytes(out, uri);
}

/// Decodes a payload; `None` when it is malformed (treated as a damaged record).
pub(crate) fn decode(p: &[u8]) -> Option<Op<'_>> {
    let mut c = Cur(p);
    let op = c.u8()?;
    let uri = c.bytes()?;
    let out = match op {
        OP_PUT => {
            let checksum = c.array::<16>()?;
            let first_seen = c.u64()?;
            let last_crawl = c.u64()?;
            let status = c.u16()?;
            let cycle = c.u32()?;
            let size = c.u32()?;
            let state = match c.u8()? {
                STATE_STORED => UriState::Stored,
                STATE_DUP_UNKNOWN => UriState::Duplicate { owner: None },
                STATE_DUP_OWNER => UriState::Duplicate {
                    owner: Some(c.bytes()?.to_vec()),
                },
                STATE_DELETED => UriState::Deleted,
                STATE_ERROR => UriState::Error,
                _ => return None,
            };
            let flags = c.u8()?;
            if flags & !(HAS_ETAG | HAS_LAST_MODIFIED) != 0 {
                return None;
            }
            let etag = match flags & HAS_ETAG {
                0 => None,
                _ => Some(c.bytes()?.to_vec()),
            };
            let last_modified = match flags & HAS_LAST_MODIFIED {
                0 => None,
                _ => Some(c.bytes()?.to_vec()),
            };
            Op::Put(
                uri,
                UriRecord {
                    checksum,
                    first_seen,
                    last_crawl,
                    etag,
                    last_modified,
                    status,
                    state,
                    cycle,
                    size,
                },
            )
        }
        OP_REMOVE => Op::Remove(uri),
        _ => return None,
    };
    c.is_empty().then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_and_validator_combination_round_trips() {
        let states = [
            UriState::Stored,
            UriState::Duplicate { owner: None },
            UriState::Duplicate {
                owner: Some(b"http://a/owner".to_vec()),
            },
            UriState::Deleted,
            UriState::Error,
        ];
        for state in states {
            for (etag, lm) in [
                (None, None),
                (Some(b"\"e1\"".to_vec()), None),
                (None, Some(b"Tue, 15 Nov 1994 12:45:26 GMT".to_vec())),
                (Some(Vec::new()), Some(b"x".to_vec())),
            ] {
                let rec = UriRecord {
                    etag,
                    last_modified: lm,
                    state: state.clone(),
                    ..UriRecord::stored([9; 16], 1_700_000_000, 200, 3, 4096)
                };
                let mut p = Vec::new();
                encode_put(&mut p, b"http://a/x", &rec);
                assert_eq!(decode(&p), Some(Op::Put(b"http://a/x", rec)));
                // Any shorter payload is malformed, never a panic.
                for cut in 0..p.len() {
                    assert_eq!(decode(&p[..cut]), None, "cut at {cut}");
                }
            }
        }
        let mut p = Vec::new();
        encode_remove(&mut p, b"http://a/y");
        assert_eq!(decode(&p), Some(Op::Remove(b"http://a/y")));
        p.push(0);
        assert_eq!(decode(&p), None, "trailing bytes");
    }
}
