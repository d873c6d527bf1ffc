//! The complex data types of MS-FSCMT 2.2.2: addrinfo, the crawl queue entry, the URI structure
//! and their flag constants.

use std::borrow::Cow;

use super::reader::{elem_bool, elem_bytes, elem_int, elem_opt_int, items, Bytes};
use super::{Key, MessageError};
use crate::marshal::{Dict, Value};

/// MS-FSCMT 2.2.2.2.1 URI flag values (bitmask).
pub mod uri_flags {
    /// No flags.
    pub const URIF_NOFLAGS: i64 = 0x0000_0000;
    /// A start URI.
    pub const URIF_STARTURI: i64 = 0x0000_0001;
    /// Crawl even if already crawled this cycle.
    pub const URIF_FORCE: i64 = 0x0000_0002;
    /// Crawl the site even if already crawled this cycle.
    pub const URIF_FORCESITE: i64 = 0x0000_0004;
    /// Resubmit for indexing even if unchanged.
    pub const URIF_FORCE_REFEED: i64 = 0x0000_0008;
    /// Points to a JavaScript document.
    pub const URIF_JAVASCRIPT: i64 = 0x0000_0010;
    /// Found through a 301 response.
    pub const URIF_REDIRECT_301: i64 = 0x0000_0020;
    /// Found through a 302 response.
    pub const URIF_REDIRECT_302: i64 = 0x0000_0040;
    /// Delete the document if excluded by the configuration.
    pub const URIF_DEL_IF_EXCL: i64 = 0x0000_0080;
    /// Queued by a PPDUP_PROMOTE_REQ.
    pub const URIF_PROMOTE: i64 = 0x0000_0100;
    /// Found in an HTML meta refresh.
    pub const URIF_META_REFRESH: i64 = 0x0000_0200;
    /// A start URI (feed).
    pub const URIF_STARTURI_FEED: i64 = 0x0000_0400;
    /// Rescheduled by the adaptive refresh mode.
    pub const URIF_RESCHEDULED: i64 = 0x0000_1000;
    /// Not checked against the crawl rules.
    pub const URIF_UNSCREENED: i64 = 0x0000_2000;
    /// The document has a meta NoIndex.
    pub const URIF_META_NOINDEX: i64 = 0x0000_4000;
    /// The document has a meta NoFollow.
    pub const URIF_META_NOFOLLOW: i64 = 0x0000_8000;
    /// Marks the crawling of a site's queued documents; never queued itself.
    pub const URIF_SITEURI: i64 = 0x0001_0000;
    /// Must not be crawled (only with URIF_UPDATE_CARGO).
    pub const URIF_NO_CRAWL: i64 = 0x0004_0000;
    /// Found through a 300 response.
    pub const URIF_REDIRECT_300: i64 = 0x0008_0000;
    /// Found through a 300 response with multiple choices.
    pub const URIF_MULTIPLECHOICE: i64 = 0x0010_0000;
    /// Submit with high priority for indexing.
    pub const URIF_FEED_HIGHPRI: i64 = 0x0020_0000;
    /// Points to an RSS channel.
    pub const URIF_RSS: i64 = 0x0040_0000;
    /// Queued by a clean crawl site operation.
    pub const URIF_CLEANSITE: i64 = 0x0080_0000;
    /// Links from this URI must not be followed.
    pub const URIF_NOFOLLOW: i64 = 0x0100_0000;
    /// Use the existing hop count from the start URIs.
    pub const URIF_LOADLEVEL: i64 = 0x0200_0000;
    /// Bypass all crawl rules.
    pub const URIF_IGNORE_RULES: i64 = 0x0400_0000;
    /// Extracted from an RSS channel.
    pub const URIF_RSS_CHILD: i64 = 0x0800_0000;
    /// Points to a site map.
    pub const URIF_SITEMAP: i64 = 0x1000_0000;
    /// Bypass all host name crawl rules.
    pub const URIF_IGNORE_NETLOC: i64 = 0x2000_0000;
    /// The entry carries updated RSS or site map data.
    pub const URIF_UPDATE_CARGO: i64 = 0x4000_0000;
}

/// MS-FSCMT 2.2.2.2.2 frame flag values.
pub mod frame_flags {
    /// The document contains a frameset.
    pub const URI_STATE_FRAME_PARENT: i64 = 1;
    /// The document is a frame of a frameset.
    pub const URI_STATE_FRAME_CHILD: i64 = 2;
}

/// MS-FSCMT 2.2.2.2.3 queue flag values (bitmask).
pub mod queue_flags {
    /// Enqueue at the front of the crawl queue.
    pub const QF_PREPEND: i64 = 0x01;
    /// Bypass the wqfilter, smfilter and mufilter filters.
    pub const QF_FORCE: i64 = 0x02;
    /// Crawl as soon as possible.
    pub const QF_URGENT: i64 = 0x04;
}

/// MS-FSCMT 2.2.3.21 collection states (CMD_UM_CONF_STATE, CMD_ADM_CONF_SUSPEND).
pub mod conf_state {
    /// Active; can queue new URIs.
    pub const ACTIVE: i64 = 1;
    /// Temporarily blocked from queuing new URIs.
    pub const BLOCKED: i64 = 2;
    /// Being removed.
    pub const REMOVING: i64 = 3;
    /// Suspended by the user.
    pub const SUSPENDED_USER: i64 = 4;
    /// Suspended because the disk is almost full.
    pub const SUSPENDED_DISK: i64 = 5;
    /// Nightly compaction initiated.
    pub const COMPACTION_INITIATED: i64 = 6;
    /// Compacting.
    pub const COMPACTING: i64 = 7;
    /// Suspended by the variable delay option.
    pub const SUSPENDED_VARIABLE_DELAY: i64 = 8;
}

/// MS-FSCMT 2.2.3.10 CMD_ADM_CONF_REFRESH bitmask options.
pub mod refresh_options {
    /// Load the collection configuration from disk.
    pub const RELOAD_CONFIG: i64 = 0x1;
    /// Refresh the entire crawl collection.
    pub const REFRESH_COLLECTION: i64 = 0x2;
    /// Refresh the subcollection.
    pub const REFRESH_SUBCOLLECTION: i64 = 0x4;
    /// Requeue only the start URIs.
    pub const START_URIS_ONLY: i64 = 0x8;
    /// Truncate the work queues and restart the crawl. The spec writes this bit as "0x16",
    /// which is not a single bit (it would include 0x2 and 0x4); it follows 0x1, 0x2, 0x4, 0x8
    /// as the fifth bit, 16 = 0x10, and that is what crawlfleet reads and sends.
    pub const TRUNCATE_AND_RESTART: i64 = 0x10;
}

/// One entry of an addrinfo list (MS-FSCMT 2.2.2.1): a `getaddrinfo` result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrInfo<'a> {
    /// Socket family (2 = AF_INET, 10 = AF_INET6 on Linux).
    pub family: i64,
    /// Socket type (1 = SOCK_STREAM).
    pub socktype: i64,
    /// Protocol (6 = TCP).
    pub protocol: i64,
    /// Canonical name.
    pub canonname: Bytes<'a>,
    /// IP address as text.
    pub address: Bytes<'a>,
    /// Port; the spec requires 0.
    pub port: i64,
}

impl<'a> AddrInfo<'a> {
    const NAME: &'static str = "addrinfo 5-tuple";

    pub(crate) fn from_value(key: Key, v: &Value<'a>) -> Result<Self, MessageError> {
        let t = items(key, Self::NAME, v, Some(5))?;
        let addr = items(key, "addrinfo address 2-tuple", &t[4], Some(2))?;
        Ok(AddrInfo {
            family: elem_int(key, Self::NAME, t, 0)?,
            socktype: elem_int(key, Self::NAME, t, 1)?,
            protocol: elem_int(key, Self::NAME, t, 2)?,
            canonname: elem_bytes(key, Self::NAME, t, 3)?,
            address: elem_bytes(key, "addrinfo address 2-tuple", addr, 0)?,
            port: elem_int(key, "addrinfo address 2-tuple", addr, 1)?,
        })
    }

    pub(crate) fn to_value(&self) -> Value<'_> {
        Value::Tuple(vec![
            Value::int(self.family),
            Value::int(self.socktype),
            Value::int(self.protocol),
            Value::bytes(&self.canonname),
            Value::Tuple(vec![Value::bytes(&self.address), Value::int(self.port)]),
        ])
    }

    /// A copy owning its bytes.
    pub fn into_owned(self) -> AddrInfo<'static> {
        AddrInfo {
            family: self.family,
            socktype: self.socktype,
            protocol: self.protocol,
            canonname: Cow::Owned(self.canonname.into_owned()),
            address: Cow::Owned(self.address.into_owned()),
            port: self.port,
        }
    }
}

/// An addrinfo list or None (lookup failed, or the collection crawls through a proxy).
pub(crate) fn addrinfo_list_from<'a>(
    key: Key,
    v: &Value<'a>,
) -> Result<Option<Vec<AddrInfo<'a>>>, MessageError> {
    match v {
        Value::None => Ok(None),
        // A single 5-tuple is accepted too: the spec's prose says "an addrinfo structure".
        Value::Tuple(t) if t.len() == 5 && !matches!(t[0], Value::Tuple(_)) => {
            Ok(Some(vec![AddrInfo::from_value(key, v)?]))
        }
        Value::List(list) | Value::Tuple(list) => list
            .iter()
            .map(|a| AddrInfo::from_value(key, a))
            .collect::<Result<_, _>>()
            .map(Some),
        other => Err(MessageError::WrongType {
            key,
            expected: "addrinfo list or None",
            found: other.type_name(),
        }),
    }
}

pub(crate) fn addrinfo_list_to<'s>(list: &'s Option<Vec<AddrInfo<'_>>>) -> Value<'s> {
    match list {
        None => Value::None,
        Some(l) => Value::List(l.iter().map(AddrInfo::to_value).collect()),
    }
}

/// The URI structure (MS-FSCMT 2.2.2.2.4): a 14-tuple.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct UriStructure<'a> {
    /// 0: the URI.
    pub uri: Bytes<'a>,
    /// 1: scheme.
    pub scheme: Bytes<'a>,
    /// 2: network location.
    pub netloc: Bytes<'a>,
    /// 3: host name.
    pub host: Bytes<'a>,
    /// 4: port; None when the URI is not parsed.
    pub port: Option<i64>,
    /// 5: path.
    pub path: Bytes<'a>,
    /// 6: query.
    pub query: Bytes<'a>,
    /// 7: parameters.
    pub params: Bytes<'a>,
    /// 8: fragments.
    pub fragment: Bytes<'a>,
    /// 9: credentials.
    pub credentials: Bytes<'a>,
    /// 10: default scheme.
    pub default_scheme: Bytes<'a>,
    /// 11: skip the fragments part.
    pub skip_fragments: bool,
    /// 12: entries 1-9 hold the parsed parts.
    pub parsed: bool,
    /// 13: IDNA-encoded host name.
    pub host_idna: Bytes<'a>,
}

impl<'a> UriStructure<'a> {
    const NAME: &'static str = "URI structure 14-tuple";

    /// An unparsed structure for `uri` (entry 12 = 0, entries 1-3 and 5-9 empty, port None),
    /// with default scheme "http" and fragments skipped; the referrer form of an empty URI.
    pub fn unparsed(uri: Bytes<'a>) -> Self {
        UriStructure {
            uri,
            default_scheme: Cow::Borrowed(b"http"),
            skip_fragments: true,
            ..Default::default()
        }
    }

    pub(crate) fn from_value(key: Key, v: &Value<'a>) -> Result<Self, MessageError> {
        let t = items(key, Self::NAME, v, Some(14))?;
        let b = |i| elem_bytes(key, Self::NAME, t, i);
        Ok(UriStructure {
            uri: b(0)?,
            scheme: b(1)?,
            netloc: b(2)?,
            host: b(3)?,
            port: elem_opt_int(key, Self::NAME, t, 4)?,
            path: b(5)?,
            query: b(6)?,
            params: b(7)?,
            fragment: b(8)?,
            credentials: b(9)?,
            default_scheme: b(10)?,
            skip_fragments: elem_bool(key, Self::NAME, t, 11)?,
            parsed: elem_bool(key, Self::NAME, t, 12)?,
            host_idna: b(13)?,
        })
    }

    pub(crate) fn to_value(&self) -> Value<'_> {
        Value::Tuple(vec![
            Value::bytes(&self.uri),
            Value::bytes(&self.scheme),
            Value::bytes(&self.netloc),
            Value::bytes(&self.host),
            self.port.map_or(Value::None, Value::int),
            Value::bytes(&self.path),
            Value::bytes(&self.query),
            Value::bytes(&self.params),
            Value::bytes(&self.fragment),
            Value::bytes(&self.credentials),
            Value::bytes(&self.default_scheme),
            Value::int(self.skip_fragments.into()),
            Value::int(self.parsed.into()),
            Value::bytes(&self.host_idna),
        ])
    }

    /// A copy owning its bytes.
    pub fn into_owned(self) -> UriStructure<'static> {
        let o = |b: Bytes<'a>| -> Bytes<'static> { Cow::Owned(b.into_owned()) };
        UriStructure {
            uri: o(self.uri),
            scheme: o(self.scheme),
            netloc: o(self.netloc),
            host: o(self.host),
            port: self.port,
            path: o(self.path),
            query: o(self.query),
            params: o(self.params),
            fragment: o(self.fragment),
            credentials: o(self.credentials),
            default_scheme: o(self.default_scheme),
            skip_fragments: self.skip_fragments,
            parsed: self.parsed,
            host_idna: o(self.host_idna),
        }
    }
}

/// One step of a redirect trail: the URI that redirected, and how (a URIF_REDIRECT_* or
/// URIF_META_REFRESH flag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect<'a> {
    /// The URI that redirected to this one.
    pub from: Bytes<'a>,
    /// The redirect type flag.
    pub kind: i64,
}

/// The crawl queue entry (MS-FSCMT 2.2.2.2): a 9-tuple starting with "WQE".
#[derive(Clone, Debug, PartialEq)]
pub struct CrawlQueueEntry<'a> {
    /// 1: the URI to crawl.
    pub uri: UriStructure<'a>,
    /// 2: the referring URI (an unparsed empty URI when there is none).
    pub referrer: UriStructure<'a>,
    /// 3: URI flags ([`uri_flags`]).
    pub uri_flags: i64,
    /// 4: frame flags ([`frame_flags`]).
    pub frame_flags: i64,
    /// 5: the redirections that led to this URI.
    pub redirects: Vec<Redirect<'a>>,
    /// 6: queue flags ([`queue_flags`]).
    pub queue_flags: i64,
    /// 7: the crawl refresh cycle in which the URI was last crawled.
    pub refresh_cycle: i64,
    /// 8: extra string metadata (RSS, site maps), pairs in wire order.
    pub extra: Dict<'a>,
}

impl<'a> CrawlQueueEntry<'a> {
    const NAME: &'static str = "crawl queue entry 9-tuple";
    /// Entry 0 of every crawl queue entry.
    pub const IDENTIFIER: &'static [u8] = b"WQE";

    /// An entry for `uri` with no referrer, no flags and no redirects.
    pub fn new(uri: UriStructure<'a>) -> Self {
        CrawlQueueEntry {
            uri,
            referrer: UriStructure::unparsed(Cow::Borrowed(b"")),
            uri_flags: uri_flags::URIF_NOFLAGS,
            frame_flags: 0,
            redirects: Vec::new(),
            queue_flags: 0,
            refresh_cycle: -1,
            extra: Vec::new(),
        }
    }

    /// Reads an entry from its marshal value; `key` names the message key it came in.
    pub fn from_value(key: Key, v: &Value<'a>) -> Result<Self, MessageError> {
        let t = items(key, Self::NAME, v, Some(9))?;
        if t[0].as_bytes() != Some(Self::IDENTIFIER) {
            return Err(MessageError::BadElement {
                key,
                structure: Self::NAME,
                index: 0,
                expected: "the string \"WQE\"",
            });
        }
        let trail = match &t[5] {
            Value::List(l) | Value::Tuple(l) => l,
            _ => {
                return Err(MessageError::BadElement {
                    key,
                    structure: Self::NAME,
                    index: 5,
                    expected: "a list of (URI, flag) redirects",
                })
            }
        };
        let redirects = trail
            .iter()
            .map(|r| {
                let p = items(key, "redirect 2-tuple", r, Some(2))?;
                Ok(Redirect {
                    from: elem_bytes(key, "redirect 2-tuple", p, 0)?,
                    kind: elem_int(key, "redirect 2-tuple", p, 1)?,
                })
            })
            .collect::<Result<_, MessageError>>()?;
        let extra = match &t[8] {
            Value::Dict(d) => d.clone(),
            Value::None => Vec::new(),
            _ => {
                return Err(MessageError::BadElement {
                    key,
                    structure: Self::NAME,
                    index: 8,
                    expected: "a dict",
                })
            }
        };
        Ok(CrawlQueueEntry {
            uri: UriStructure::from_value(key, &t[1])?,
            referrer: UriStructure::from_value(key, &t[2])?,
            uri_flags: elem_int(key, Self::NAME, t, 3)?,
            frame_flags: elem_int(key, Self::NAME, t, 4)?,
            redirects,
            queue_flags: elem_int(key, Self::NAME, t, 6)?,
            refresh_cycle: elem_int(key, Self::NAME, t, 7)?,
            extra,
        })
    }

    /// The marshal value of the entry.
    pub fn to_value(&self) -> Value<'_> {
        Value::Tuple(vec![
            Value::bytes(Self::IDENTIFIER),
            self.uri.to_value(),
            self.referrer.to_value(),
            Value::int(self.uri_flags),
            Value::int(self.frame_flags),
            Value::List(
                self.redirects
                    .iter()
                    .map(|r| Value::Tuple(vec![Value::bytes(&r.from), Value::int(r.kind)]))
                    .collect(),
            ),
            Value::int(self.queue_flags),
            Value::int(self.refresh_cycle),
            Value::Dict(
                self.extra
                    .iter()
                    .map(|(k, v)| (borrow_value(k), borrow_value(v)))
                    .collect(),
            ),
        ])
    }

    /// A copy owning its bytes.
    pub fn into_owned(self) -> CrawlQueueEntry<'static> {
        CrawlQueueEntry {
            uri: self.uri.into_owned(),
            referrer: self.referrer.into_owned(),
            uri_flags: self.uri_flags,
            frame_flags: self.frame_flags,
            redirects: self
                .redirects
                .into_iter()
                .map(|r| Redirect {
                    from: Cow::Owned(r.from.into_owned()),
                    kind: r.kind,
                })
                .collect(),
            queue_flags: self.queue_flags,
            refresh_cycle: self.refresh_cycle,
            extra: self
                .extra
                .into_iter()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        }
    }
}

/// A view of `v` borrowing its bytes (for encoding fields held by a message).
pub(crate) fn borrow_value<'s>(v: &'s Value<'_>) -> Value<'s> {
    match v {
        Value::Bytes(b, f) => Value::Bytes(Cow::Borrowed(b), *f),
        Value::FloatText(t) => Value::FloatText(Cow::Borrowed(t)),
        Value::Tuple(items) => Value::Tuple(items.iter().map(borrow_value).collect()),
        Value::List(items) => Value::List(items.iter().map(borrow_value).collect()),
        Value::Set(items) => Value::Set(items.iter().map(borrow_value).collect()),
        Value::FrozenSet(items) => Value::FrozenSet(items.iter().map(borrow_value).collect()),
        Value::Dict(pairs) => Value::Dict(
            pairs
                .iter()
                .map(|(k, v)| (borrow_value(k), borrow_value(v)))
                .collect(),
        ),
        Value::None => Value::None,
        Value::Bool(b) => Value::Bool(*b),
        Value::Int(i, f) => Value::Int(*i, *f),
        Value::BigInt(b) => Value::BigInt(b.clone()),
        Value::Float(f) => Value::Float(*f),
    }
}
