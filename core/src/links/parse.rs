//! Reading a received data message (MS-FSWASDR 2.2.1) and the lines of its batch fields.

use std::borrow::Cow;

use super::build::{Operation, EMPTY_DUPLICATE};
use super::{cut, Application, CidHash, LinkError};
use crate::marshal::{self, Limits, Value};

/// One batch entry: key and value.
pub type Field<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

/// A data message as received: its entries, borrowing from the received bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received<'a> {
    /// The `application` entry (2.2.1.1).
    pub application: Application,
    /// The `collection` entry (2.2.1.2).
    pub collection: Cow<'a, [u8]>,
    /// The `batch` entries (2.2.1.3), key and value, in wire order.
    pub fields: Vec<Field<'a>>,
}

impl Received<'_> {
    /// Lines in all fields.
    pub fn lines(&self) -> usize {
        self.fields.iter().map(|(_, v)| memchr_count(v)).sum()
    }
}

/// Line feeds in `v`: memchr's vectorized count (its iterator's `count` does not stop at each
/// match).
fn memchr_count(v: &[u8]) -> usize {
    memchr::memchr_iter(b'\n', v).count()
}

fn into_bytes(v: Value<'_>) -> Option<Cow<'_, [u8]>> {
    match v {
        Value::Bytes(b, _) => Some(b),
        _ => None,
    }
}

/// Unmarshals a data message (the bytes before the terminator) and checks its shape: a dict
/// with an `application` of 2.2.1.1, a string `collection` and a `batch` dict of strings.
pub fn parse_message(body: &[u8]) -> Result<Received<'_>, LinkError> {
    let limits = Limits {
        max_size: usize::MAX,
        ..Limits::default()
    };
    let value = marshal::from_bytes(body, &limits).map_err(LinkError::Unmarshal)?;
    let Value::Dict(pairs) = value else {
        return Err(LinkError::NotADict);
    };
    let (mut app, mut coll, mut batch) = (None, None, None);
    for (k, v) in pairs {
        match k.as_bytes() {
            Some(b"application") => app = Some(v),
            Some(b"collection") => coll = Some(v),
            Some(b"batch") => batch = Some(v),
            _ => {}
        }
    }
    let app = app
        .and_then(into_bytes)
        .ok_or(LinkError::MissingEntry("application"))?;
    let application =
        Application::from_name(&app).ok_or_else(|| LinkError::UnknownApplication(cut(&app)))?;
    let collection = coll
        .and_then(into_bytes)
        .ok_or(LinkError::MissingEntry("collection"))?;
    let Some(Value::Dict(entries)) = batch else {
        return Err(LinkError::MissingEntry("batch"));
    };
    let mut fields = Vec::with_capacity(entries.len());
    for (k, v) in entries {
        let key = into_bytes(k).ok_or(LinkError::MissingEntry("batch"))?;
        match into_bytes(v) {
            Some(v) => fields.push((key, v)),
            None => return Err(LinkError::FieldNotString(cut(&key))),
        }
    }
    Ok(Received {
        application,
        collection,
        fields,
    })
}

/// One line of a batch field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// `links` (2.2.1.3.1.1).
    Link {
        /// The linking document.
        from: CidHash,
        /// The link target.
        to: CidHash,
        /// Same site.
        intra: bool,
        /// Extraction time, seconds since 1970 UTC.
        ts: u64,
        /// The anchor text (may be empty).
        anchor: &'a [u8],
    },
    /// `urieq` (2.2.1.3.1.2).
    UriEq {
        /// The document.
        doc: CidHash,
        /// A member of its equivalence class.
        member: CidHash,
        /// Extraction time.
        ts: u64,
    },
    /// `eqrepr` (2.2.1.3.1.3).
    EqRepr {
        /// The document.
        doc: CidHash,
        /// Its URL.
        url: &'a [u8],
        /// Extraction time.
        ts: u64,
        /// The URLs of the class.
        class: Vec<&'a [u8]>,
    },
    /// `delete` (2.2.1.3.1.4).
    Delete {
        /// The document.
        doc: CidHash,
        /// When the delete was received.
        ts: u64,
    },
    /// `no_links` (2.2.1.3.1.5).
    NoLinks {
        /// The document's URL.
        url: &'a [u8],
        /// The document.
        doc: CidHash,
        /// Extraction time.
        ts: u64,
    },
    /// `urimap` (2.2.1.3.1.6).
    UriMap {
        /// The URL.
        url: &'a [u8],
        /// Its CIDHASH.
        doc: CidHash,
    },
    /// `sitemap` (2.2.1.3.1.7).
    SiteMap {
        /// The document.
        doc: CidHash,
        /// Its site.
        site: &'a [u8],
    },
    /// SPRel `uris` (2.2.1.3.2.1).
    Uri {
        /// The document's URL.
        url: &'a [u8],
        /// Processing time.
        ts: u64,
        /// The operation.
        op: Operation,
        /// The DUPLICATE column; `None` for C7 82.
        duplicate: Option<&'a [u8]>,
    },
}

/// The fields of a batch key this module reads.
const FIELDS: [&str; 8] = [
    "links", "urieq", "eqrepr", "delete", "no_links", "urimap", "sitemap", "uris",
];

/// Parses every line of every known field of `msg`, in order, and calls `each` with the
/// record or the error of a malformed line. Keys that 2.2.1.3 does not define are skipped.
pub fn parse_records<'a>(
    msg: &'a Received<'_>,
    mut each: impl FnMut(Result<Record<'a>, LinkError>),
) {
    for (key, value) in &msg.fields {
        let Some(&field) = FIELDS.iter().find(|f| f.as_bytes() == key.as_ref()) else {
            continue;
        };
        for line in value.split(|&c| c == b'\n') {
            if line.is_empty() {
                continue; // after the last `\n`
            }
            each(parse_line(field, line).ok_or_else(|| LinkError::BadLine {
                field,
                line: cut(line),
            }));
        }
    }
}

/// Splits off the text before the next space.
fn word<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
    let r: &'a [u8] = rest;
    match r.iter().position(|&c| c == b' ') {
        Some(i) => {
            *rest = &r[i + 1..];
            Some(&r[..i])
        }
        None => {
            *rest = &[];
            Some(r)
        }
    }
}

fn hash(b: Option<&[u8]>) -> Option<CidHash> {
    CidHash::from_text(b?)
}

fn ts(b: Option<&[u8]>) -> Option<u64> {
    let b = b?;
    if b.is_empty() || b.len() > 19 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0u64, |n, &c| n * 10 + u64::from(c - b'0')))
}

fn nonempty(b: Option<&[u8]>) -> Option<&[u8]> {
    b.filter(|u| !u.is_empty())
}

fn parse_line<'a>(field: &'static str, line: &'a [u8]) -> Option<Record<'a>> {
    let mut r = line;
    let rec = match field {
        "links" => {
            let from = hash(word(&mut r))?;
            let to = hash(word(&mut r))?;
            let intra = match word(&mut r)? {
                b"1" => true,
                b"0" => false,
                _ => return None,
            };
            let ts = ts(word(&mut r))?;
            // The anchor text is the rest of the line, spaces included.
            return Some(Record::Link {
                from,
                to,
                intra,
                ts,
                anchor: r,
            });
        }
        "urieq" => Record::UriEq {
            doc: hash(word(&mut r))?,
            member: hash(word(&mut r))?,
            ts: ts(word(&mut r))?,
        },
        "eqrepr" => {
            let doc = hash(word(&mut r))?;
            let url = nonempty(word(&mut r))?;
            let ts = ts(word(&mut r))?;
            let class = r.split(|&c| c == 0).filter(|m| !m.is_empty()).collect();
            return Some(Record::EqRepr {
                doc,
                url,
                ts,
                class,
            });
        }
        "delete" => Record::Delete {
            doc: hash(word(&mut r))?,
            ts: ts(word(&mut r))?,
        },
        "no_links" => Record::NoLinks {
            url: nonempty(word(&mut r))?,
            doc: hash(word(&mut r))?,
            ts: ts(word(&mut r))?,
        },
        "urimap" => Record::UriMap {
            url: nonempty(word(&mut r))?,
            doc: hash(word(&mut r))?,
        },
        "sitemap" => Record::SiteMap {
            doc: hash(word(&mut r))?,
            site: nonempty(word(&mut r))?,
        },
        "uris" => {
            let url = nonempty(word(&mut r))?;
            let ts = ts(word(&mut r))?;
            let op = Operation::from_name(word(&mut r)?)?;
            let dup = nonempty(word(&mut r))?;
            Record::Uri {
                url,
                ts,
                op,
                duplicate: (dup != EMPTY_DUPLICATE).then_some(dup),
            }
        }
        _ => return None,
    };
    // Every field but the last-column ones ends after its last word.
    r.is_empty().then_some(rec)
}
