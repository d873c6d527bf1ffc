//! The routing database (MS-FSCMT 3.1.1, 3.2.1): for every collection, which node scheduler crawls
//! the sites of each crawl routing attribute, persisted in an append-only log.
//!
//! The crawl routing attribute is "the part of the host name that is used for the crawl routing
//! decision" (2.2.3.8); crawlfleet uses the registrable domain (public suffix list + one label), so
//! `www.example.co.uk` and `news.example.co.uk` are crawled by the same node, and the host itself
//! for IP addresses and names without a public suffix (`localhost`, `127.0.0.2`).
//!
//! The log is a [`crate::recordlog`] log without magic: checked records (`[u32 length][u32 check]
//! [payload]`), the payload an operation byte and length-prefixed fields. Recovery stops at the
//! first torn or corrupt record and cuts the file there. [`RoutingDb::sync`] makes every change so far durable; the schedulers call it on their
//! sync timer and before acting on a new route where it matters.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::recordlog::{Format, LogError, LogWriter, Options};

/// The routing database could not be read or written.
#[derive(Debug)]
pub struct RoutingError {
    /// The file.
    pub path: PathBuf,
    /// What failed.
    pub error: io::Error,
}

impl fmt::Display for RoutingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "routing database {}: {}",
            self.path.display(),
            self.error
        )
    }
}

impl std::error::Error for RoutingError {}

impl From<LogError> for RoutingError {
    /// The file and the failure, with what was being done (the failure's kind kept).
    fn from(e: LogError) -> Self {
        RoutingError {
            path: e.path,
            error: io::Error::new(e.error.kind(), format!("{}: {}", e.action, e.error)),
        }
    }
}

const OP_SET: u8 = 1;
const OP_DROP: u8 = 2;
/// Rewrite the log on open when it holds this many more records than live routes.
const COMPACT_SLACK: u64 = 100_000;
/// The log's records: no magic, payloads up to 1 MiB.
const FORMAT: Format = Format::plain("routing database", 1 << 20);

/// One collection's routes: routing attribute -> node. Looked up for every routed entry, so
/// hashed with foldhash (seeded per map) rather than SipHash.
type Routes = HashMap<Vec<u8>, Vec<u8>, foldhash::fast::RandomState>;

/// Routes of all collections: collection -> routing attribute -> node id.
pub struct RoutingDb {
    log: LogWriter,
    /// Collection -> routing attribute -> node (looked up for every routed entry: hashed).
    routes: HashMap<Vec<u8>, Routes, foldhash::fast::RandomState>,
    /// Routes per node over all collections, for balancing.
    load: HashMap<Vec<u8>, u64>,
}

impl RoutingDb {
    /// Opens (or creates) the database at `path`, replaying its log.
    pub fn open(path: &Path) -> Result<RoutingDb, RoutingError> {
        let mut routes: HashMap<Vec<u8>, Routes, foldhash::fast::RandomState> = HashMap::default();
        let (log, found) = LogWriter::open(path, Options::new(FORMAT), |payload| {
            match Op::parse(payload) {
                Some(Op::Set(c, a, n)) => {
                    routes
                        .entry(c.to_vec())
                        .or_default()
                        .insert(a.to_vec(), n.to_vec());
                }
                Some(Op::Drop(c)) => {
                    routes.remove(c);
                }
                None => return false,
            }
            true
        })?;
        let mut db = RoutingDb {
            log,
            routes,
            load: HashMap::new(),
        };
        db.recount();
        let live: u64 = db.routes.values().map(|m| m.len() as u64).sum();
        if found.records > live + COMPACT_SLACK {
            db.compact()?;
        }
        Ok(db)
    }

    fn recount(&mut self) {
        self.load.clear();
        for m in self.routes.values() {
            for n in m.values() {
                *self.load.entry(n.clone()).or_default() += 1;
            }
        }
    }

    /// Rewrites the log with only the live routes (through a temporary file and a rename).
    pub fn compact(&mut self) -> Result<(), RoutingError> {
        let routes = &self.routes;
        self.log.compact(|c| {
            for (coll, m) in routes {
                for (a, n) in m {
                    c.record(|out| payload(out, Op::Set(coll, a, n)))?;
                }
            }
            Ok(())
        })?;
        Ok(())
    }

    /// The node that crawls `attr` in `collection`.
    pub fn get(&self, collection: &[u8], attr: &[u8]) -> Option<&[u8]> {
        self.routes
            .get(collection)
            .and_then(|m| m.get(attr))
            .map(Vec::as_slice)
    }

    /// Records that `node` crawls `attr` in `collection`; false if it already did.
    pub fn set(&mut self, collection: &[u8], attr: &[u8], node: &[u8]) -> bool {
        let m = self.routes.entry(collection.to_vec()).or_default();
        match m.get(attr) {
            Some(n) if n == node => return false,
            Some(old) => {
                if let Some(l) = self.load.get_mut(old) {
                    *l = l.saturating_sub(1);
                }
            }
            None => {}
        }
        m.insert(attr.to_vec(), node.to_vec());
        *self.load.entry(node.to_vec()).or_default() += 1;
        self.log
            .append_with(|out| payload(out, Op::Set(collection, attr, node)));
        true
    }

    /// Forgets every route of `collection`.
    pub fn drop_collection(&mut self, collection: &[u8]) {
        if self.routes.remove(collection).is_some() {
            self.recount();
            self.log
                .append_with(|out| payload(out, Op::Drop(collection)));
        }
    }

    /// Every route of `collection`, (attribute, node), in attribute order.
    pub fn routes(&self, collection: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut v: Vec<(&[u8], &[u8])> = self
            .routes
            .get(collection)
            .into_iter()
            .flat_map(|m| m.iter().map(|(a, n)| (a.as_slice(), n.as_slice())))
            .collect();
        v.sort_unstable();
        v.into_iter()
    }

    /// How many routes `collection` has.
    pub fn count(&self, collection: &[u8]) -> usize {
        self.routes.get(collection).map_or(0, Routes::len)
    }

    /// How many routes (over all collections) point at `node`.
    pub fn load(&self, node: &[u8]) -> u64 {
        self.load.get(node).copied().unwrap_or(0)
    }

    /// Writes pending changes and makes them durable. A failed write (a full disk) is cut back
    /// off the file and the changes stay queued for the next sync: nothing half-written is
    /// followed by later records.
    pub fn sync(&mut self) -> Result<(), RoutingError> {
        self.log.commit()?;
        Ok(())
    }
}

enum Op<'a> {
    Set(&'a [u8], &'a [u8], &'a [u8]),
    Drop(&'a [u8]),
}

fn field<'a>(p: &mut &'a [u8]) -> Option<&'a [u8]> {
    if p.len() < 2 {
        return None;
    }
    let n = u16::from_le_bytes([p[0], p[1]]) as usize;
    let rest = &p[2..];
    if rest.len() < n {
        return None;
    }
    let (f, r) = rest.split_at(n);
    *p = r;
    Some(f)
}

impl<'a> Op<'a> {
    fn parse(payload: &'a [u8]) -> Option<Op<'a>> {
        let (&op, mut p) = payload.split_first()?;
        let op = match op {
            OP_SET => Op::Set(field(&mut p)?, field(&mut p)?, field(&mut p)?),
            OP_DROP => Op::Drop(field(&mut p)?),
            _ => return None,
        };
        p.is_empty().then_some(op)
    }
}

/// Appends the payload of `op` (operation byte, u16-length-prefixed fields) to `out`.
fn payload(out: &mut Vec<u8>, op: Op<'_>) {
    let put = |out: &mut Vec<u8>, f: &[u8]| {
        // Names longer than 64 KiB are refused before they get here (site names are hosts).
        let n = f.len().min(u16::MAX as usize);
        out.extend_from_slice(&(n as u16).to_le_bytes());
        out.extend_from_slice(&f[..n]);
    };
    match op {
        Op::Set(c, a, n) => {
            out.push(OP_SET);
            put(out, c);
            put(out, a);
            put(out, n);
        }
        Op::Drop(c) => {
            out.push(OP_DROP);
            put(out, c);
        }
    }
}

/// The crawl site of a URI: its lower-cased host, with `:port` when the port is not the scheme's
/// default. None when the URI has no host.
///
/// Plain `http://` and `https://` URIs with an ASCII host are read directly (the routing hot
/// path); anything else (user info, IPv6 literals, percent-escapes, IDNA, other schemes) goes
/// through the `url` crate's WHATWG parser.
pub fn crawl_site(uri: &[u8]) -> Option<String> {
    crawl_site_ref(uri).map(Cow::into_owned)
}

/// [`crawl_site_ref`] of a URI already known to be text: the site is a slice of it, without
/// the UTF-8 check of the bytes (125 instructions of a link's 770 when the engine asked with
/// bytes).
pub fn crawl_site_of(uri: &str) -> Option<Cow<'_, str>> {
    // The span's ends are at ASCII bytes (or the end), so at character boundaries; `get`
    // declines anything else rather than panic.
    match simple_span(uri.as_bytes()).and_then(|(r, upper)| Some((uri.get(r)?, upper))) {
        Some((site, false)) => Some(Cow::Borrowed(site)),
        Some((site, true)) => Some(Cow::Owned(site.to_ascii_lowercase())),
        None => crawl_site_ref(uri.as_bytes()),
    }
}

/// The links of one page, each asked whether it is on the page's crawl site: a link written
/// with the page's own scheme and authority is (a crawl site is a function of those two alone)
/// and is answered by comparing bytes; any other link by [`crawl_site_of`]. A page's links are
/// mostly on its own site, where [`crawl_site_of`] reads the authority byte by byte each time.
pub struct SameSite<'a> {
    site: &'a str,
    /// `scheme://authority` of the page's URL, when the page's URL is on `site`.
    prefix: Option<&'a [u8]>,
}

impl<'a> SameSite<'a> {
    /// For the page at `page_url`, fetched as part of crawl site `site`.
    pub fn new(page_url: &'a str, site: &'a str) -> SameSite<'a> {
        let b = page_url.as_bytes();
        let prefix = b
            .windows(3)
            .position(|w| w == b"://")
            .map(|i| i + 3)
            .map(|from| {
                let end = b[from..]
                    .iter()
                    .position(|&c| matches!(c, b'/' | b'?' | b'#'))
                    .map_or(b.len(), |n| from + n);
                (from, end)
            })
            // Only a plain authority (a lower-case host, a port): the URL parser reads the
            // same bytes the same way wherever they are followed by the end of the authority.
            .filter(|&(from, end)| {
                end > from
                    && b[from..end]
                        .iter()
                        .all(|&c| matches!(c, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b':'))
            })
            .map(|(_, end)| &b[..end])
            .filter(|_| crawl_site_of(page_url).as_deref() == Some(site));
        SameSite { site, prefix }
    }

    /// True when `url` is written with the page's scheme and authority (checked only for a
    /// page whose authority is plain; false for any other page): then anything that depends
    /// on those two alone, its crawl site or its host, is the page's.
    pub fn shares_authority(&self, url: &str) -> bool {
        let b = url.as_bytes();
        self.prefix.is_some_and(|p| {
            b.starts_with(p) && matches!(b.get(p.len()), None | Some(b'/' | b'?' | b'#'))
        })
    }

    /// True when `url`'s crawl site is the page's.
    pub fn is_same(&self, url: &str) -> bool {
        self.shares_authority(url) || crawl_site_of(url).as_deref() == Some(self.site)
    }
}

/// [`crawl_site`], borrowed from `uri` when it already holds the site as it is written (a
/// lower-case host, a port only when it is not the scheme's).
pub fn crawl_site_ref(uri: &[u8]) -> Option<Cow<'_, str>> {
    if let Some(site) = simple_site(uri) {
        return Some(site);
    }
    let s = std::str::from_utf8(uri).ok()?;
    let u = url::Url::parse(s).ok()?;
    let host = u.host_str()?.to_ascii_lowercase();
    Some(Cow::Owned(match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host,
    }))
}

/// How [`simple_site`] reads a byte of an authority.
#[derive(Clone, Copy, PartialEq, Eq)]
enum HostByte {
    Other,
    /// A lower-case letter, a digit or `-`.
    Label,
    /// An upper-case letter (the site is written in lower case).
    Upper,
    Dot,
    /// `:`, `/`, `?` or `#`: the host ends.
    End,
}

const HOST_BYTES: [HostByte; 256] = {
    let mut t = [HostByte::Other; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = match b as u8 {
            b'a'..=b'z' | b'0'..=b'9' | b'-' => HostByte::Label,
            b'A'..=b'Z' => HostByte::Upper,
            b'.' => HostByte::Dot,
            b':' | b'/' | b'?' | b'#' => HostByte::End,
            _ => HostByte::Other,
        };
        b += 1;
    }
    t
};

/// The crawl site of an `http` or `https` URI whose host is a plain name or a dotted IPv4
/// address, read in one pass; `None` leaves anything else to the URL parser.
fn simple_site(uri: &[u8]) -> Option<Cow<'_, str>> {
    let (r, upper) = simple_span(uri)?;
    // ASCII throughout (checked by `simple_span` for the host, by the parse for the port).
    let site = std::str::from_utf8(&uri[r]).ok()?;
    if upper {
        Some(Cow::Owned(site.to_ascii_lowercase()))
    } else {
        Some(Cow::Borrowed(site))
    }
}

/// Where [`simple_site`]'s site is written in `uri` (all ASCII), and whether its host has
/// upper-case letters.
fn simple_span(uri: &[u8]) -> Option<(std::ops::Range<usize>, bool)> {
    let (skip, default_port) = if uri.len() > 7 && uri[..7].eq_ignore_ascii_case(b"http://") {
        (7, &b"80"[..])
    } else if uri.len() > 8 && uri[..8].eq_ignore_ascii_case(b"https://") {
        (8, &b"443"[..])
    } else {
        return None;
    };
    let rest = &uri[skip..];
    // The host: letters, digits, `-` and `.`, with no empty label (so no `.` first, last or
    // twice in a row). A host whose last label is a number is an IPv4 address to the URL
    // parser (WHATWG URL "ends in a number"), which rewrites or refuses anything but a plain
    // dotted quad: four decimal octets without leading zeros. The labels are checked as octets
    // on the way (`quad` stays true while every label so far is one).
    let mut upper = false;
    let mut after_dot = true;
    let mut labels = 1usize;
    let mut quad = true;
    // The current label: its start, and its value while it is all digits (`None` after a
    // byte that is not one, or past three digits).
    let mut start = 0;
    let mut value: Option<u32> = Some(0);
    let octet = |len: usize, value: Option<u32>, first: u8| {
        (1..=3).contains(&len) && (len == 1 || first != b'0') && value.is_some_and(|v| v <= 255)
    };
    let mut i = 0;
    while let Some(&b) = rest.get(i) {
        match HOST_BYTES[b as usize] {
            HostByte::Label => {
                value = match value {
                    Some(v) if b.is_ascii_digit() && i - start < 3 => {
                        Some(v * 10 + u32::from(b - b'0'))
                    }
                    _ => None,
                };
            }
            HostByte::Upper => {
                upper = true;
                value = None;
            }
            HostByte::Dot => {
                if after_dot {
                    return None;
                }
                quad &= octet(i - start, value, rest[start]);
                labels += 1;
                start = i + 1;
                value = Some(0);
            }
            HostByte::End => break,
            HostByte::Other => return None,
        }
        after_dot = b == b'.';
        i += 1;
    }
    let host = &rest[..i];
    if after_dot || host.len() > 253 {
        return None;
    }
    let last = &host[start..];
    let ends_in_number = last.iter().all(u8::is_ascii_digit)
        || last.len() >= 2 && last[..2].eq_ignore_ascii_case(b"0x");
    if ends_in_number && !(labels == 4 && quad && octet(last.len(), value, last[0])) {
        return None;
    }
    // The site is `host` or `host:port`, both a prefix of `rest`; it is borrowed unless the
    // host has upper-case letters.
    let site_len = if rest.get(i) == Some(&b':') {
        let p = &rest[i + 1..];
        let p = &p[..p
            .iter()
            .position(|&b| matches!(b, b'/' | b'?' | b'#'))
            .unwrap_or(p.len())];
        if p.is_empty() || p == default_port {
            i
        } else {
            // Leading zeros or a sign: let the URL parser normalise.
            if p.len() > 5 || (p.len() > 1 && p[0] == b'0') || decimal(p)? > u32::from(u16::MAX) {
                return None;
            }
            i + 1 + p.len()
        }
    } else {
        i
    };
    Some((skip..skip + site_len, upper))
}

/// The value of a run of at most 9 ASCII digits (`None` for anything else).
fn decimal(p: &[u8]) -> Option<u32> {
    if p.is_empty() || p.len() > 9 {
        return None;
    }
    p.iter().try_fold(0u32, |v, &b| {
        b.is_ascii_digit().then(|| v * 10 + u32::from(b - b'0'))
    })
}

/// The host of a crawl site: without its `:port`, and an IPv6 literal without its brackets.
pub fn site_host(site: &str) -> &str {
    let host = match site.rsplit_once(':') {
        // "[::1]:8080" and "host:80"; a bare IPv6 literal keeps its colons.
        Some((h, p)) if p.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':') => h,
        _ => site,
    };
    host.trim_start_matches('[').trim_end_matches(']')
}

/// [`routing_attribute`] of the last [`AttrMemo::SITES`] sites asked for, kept: the links of
/// a page mostly go to a few sites, in turn (keeping only the last site, the bench web's links
/// to five hosts missed one time in two), and each miss asks for the attribute again (a public
/// suffix lookup and a String).
#[derive(Debug, Default)]
pub struct AttrMemo {
    /// (site, attribute), most recently added last; at most [`AttrMemo::SITES`].
    kept: Vec<(String, String)>,
    /// Where the next site goes once full (the oldest added).
    next: usize,
}

impl AttrMemo {
    /// Sites kept.
    pub const SITES: usize = 8;

    /// The routing attribute of `site`.
    pub fn get(&mut self, site: &str) -> &str {
        let i = match self.kept.iter().position(|(s, _)| s == site) {
            Some(i) => i,
            None => {
                let entry = (site.to_string(), routing_attribute(site));
                if self.kept.len() < Self::SITES {
                    self.kept.push(entry);
                    self.kept.len() - 1
                } else {
                    let i = self.next;
                    self.kept[i] = entry;
                    self.next = (i + 1) % Self::SITES;
                    i
                }
            }
        };
        &self.kept[i].1
    }
}

/// The crawl routing attribute of a crawl site: the registrable domain of its host, or the host
/// itself for IP addresses and names without a known public suffix.
pub fn routing_attribute(site: &str) -> String {
    let host = site_host(site);
    if host.parse::<std::net::IpAddr>().is_ok() {
        return host.to_string();
    }
    match psl::domain(host.as_bytes()) {
        Some(d) if d.suffix().is_known() => String::from_utf8_lossy(d.as_bytes()).into_owned(),
        _ => host.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_memo_answers_as_routing_attribute() {
        // More sites than the memo keeps, asked in turns and at random.
        let sites: Vec<String> = (0..3 * AttrMemo::SITES)
            .map(|i| match i % 4 {
                0 => format!("h{i}.example.com"),
                1 => format!("10.0.0.{i}:8080"),
                2 => format!("w{i}.example.co.uk"),
                _ => format!("[::{i}]:80"),
            })
            .collect();
        let mut m = AttrMemo::default();
        let mut rng = fastrand::Rng::with_seed(5);
        for round in 0..400 {
            let site = match round % 3 {
                0 => &sites[round % (AttrMemo::SITES + 2)],
                1 => &sites[round % 3],
                _ => &sites[rng.usize(..sites.len())],
            };
            assert_eq!(m.get(site), routing_attribute(site), "{site}");
        }
        assert!(m.kept.len() <= AttrMemo::SITES);
        for site in [
            "",
            "a.example.com",
            "b.example.com",
            "b.example.com",
            "example.co.uk:8080",
            "10.0.0.1",
            "[::1]:8080",
            "a.example.com",
            "",
            "localhost",
        ] {
            assert_eq!(m.get(site), routing_attribute(site), "{site}");
        }
    }
    use std::fs::OpenOptions;
    use std::io::Write;
    use tempfile::TempDir;

    /// A scratch directory (removed when the guard drops) and the database's path in it.
    fn tmp(name: &str) -> (TempDir, PathBuf) {
        let d = TempDir::with_prefix(format!("crawlfleet-routing-{name}-")).unwrap();
        let p = d.path().join("routes");
        (d, p)
    }

    #[test]
    fn routes_survive_reopen_and_torn_tail_is_cut() {
        let (_dir, p) = tmp("reopen");
        let mut db = RoutingDb::open(&p).unwrap();
        assert!(db.set(b"c", b"example.com", b"n1"));
        assert!(!db.set(b"c", b"example.com", b"n1"));
        assert!(db.set(b"c", b"example.org", b"n2"));
        assert!(db.set(b"d", b"example.org", b"n1"));
        db.sync().unwrap();
        drop(db);
        // A torn record at the end (a crash in the middle of a write) is cut on open.
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&[9, 0, 0, 0, 1, 2]).unwrap();
        drop(f);
        let mut db = RoutingDb::open(&p).unwrap();
        assert_eq!(db.get(b"c", b"example.com"), Some(&b"n1"[..]));
        assert_eq!(db.get(b"c", b"example.org"), Some(&b"n2"[..]));
        assert_eq!(db.load(b"n1"), 2);
        assert_eq!(db.count(b"c"), 2);
        db.drop_collection(b"c");
        assert!(db.set(b"d", b"x.org", b"n2"));
        db.sync().unwrap();
        drop(db);
        let db = RoutingDb::open(&p).unwrap();
        assert_eq!(db.count(b"c"), 0);
        let d: Vec<_> = db.routes(b"d").collect();
        assert_eq!(
            d,
            vec![
                (&b"example.org"[..], &b"n1"[..]),
                (&b"x.org"[..], &b"n2"[..])
            ]
        );
        assert_eq!(db.load(b"n1"), 1);
    }

    #[test]
    fn compaction_keeps_live_routes() {
        let (_dir, p) = tmp("compact");
        let mut db = RoutingDb::open(&p).unwrap();
        for i in 0..50 {
            db.set(b"c", b"a.com", format!("n{i}").as_bytes());
        }
        db.sync().unwrap();
        db.compact().unwrap();
        db.set(b"c", b"b.com", b"n1");
        db.sync().unwrap();
        let db = RoutingDb::open(&p).unwrap();
        assert_eq!(db.get(b"c", b"a.com"), Some(&b"n49"[..]));
        assert_eq!(db.get(b"c", b"b.com"), Some(&b"n1"[..]));
    }

    /// The site as the URL parser reads it.
    fn parsed_site(u: &str) -> Option<String> {
        url::Url::parse(u).ok().and_then(|x| {
            x.host_str().map(|h| match x.port() {
                Some(p) => format!("{}:{p}", h.to_ascii_lowercase()),
                None => h.to_ascii_lowercase(),
            })
        })
    }

    #[test]
    fn the_one_pass_reading_agrees_with_the_url_parser() {
        // Every authority of up to four bytes over an alphabet of the bytes the one-pass reading
        // tells apart, under both schemes and with a path after it: whenever it answers, it
        // answers what the URL parser reads.
        let alphabet = b"aZ0.-:/?#@%_8x";
        let mut answered = 0;
        let mut auth = Vec::new();
        for len in 1..=4u32 {
            for mut n in 0..alphabet.len().pow(len) {
                auth.clear();
                for _ in 0..len {
                    auth.push(alphabet[n % alphabet.len()]);
                    n /= alphabet.len();
                }
                for scheme in ["http://", "HTTPS://"] {
                    for tail in ["", "/p", "x.y.z:80/", ".1.2:443"] {
                        let mut u = scheme.as_bytes().to_vec();
                        u.extend_from_slice(&auth);
                        u.extend_from_slice(tail.as_bytes());
                        let text = std::str::from_utf8(&u).unwrap();
                        assert_eq!(crawl_site_of(text), crawl_site_ref(&u), "{text}");
                        let Some(site) = simple_site(&u) else {
                            continue;
                        };
                        answered += 1;
                        assert_eq!(Some(site.into_owned()), parsed_site(text), "{text}");
                    }
                }
            }
        }
        assert!(answered > 10_000, "{answered}");
    }

    #[test]
    fn dotted_hosts_are_read_as_the_url_parser_reads_them() {
        // Hosts of digits, dots and a few letters, up to 16 bytes (the four-byte authorities
        // above never make a dotted quad): whenever the one-pass reading answers, it answers
        // what the URL parser reads; and it answers for every plain dotted quad.
        let alphabet = b"0123456789..aX";
        let mut rng = fastrand::Rng::with_seed(28);
        let mut quads = 0;
        for _ in 0..60_000 {
            let host: String = if rng.bool() {
                (0..4)
                    .map(|_| match rng.u8(..4) {
                        0 => rng.u32(..1000).to_string(),
                        1 => format!("0{}", rng.u32(..100)),
                        _ => rng.u32(..256).to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(".")
            } else {
                (0..rng.usize(1..=16))
                    .map(|_| char::from(alphabet[rng.usize(..alphabet.len())]))
                    .collect()
            };
            let port = [":8080", "", ":80", ":0443"][rng.usize(..4)];
            let u = format!("http://{host}{port}/p.html");
            let plain_quad = host.split('.').count() == 4
                && host.split('.').all(|l| {
                    l.parse::<u32>().is_ok_and(|v| v <= 255)
                        && (l.len() == 1 || !l.starts_with('0'))
                });
            assert_eq!(crawl_site_of(&u), crawl_site_ref(u.as_bytes()), "{u}");
            match simple_site(u.as_bytes()) {
                Some(site) => assert_eq!(Some(site.into_owned()), parsed_site(&u), "{u}"),
                None => assert!(!plain_quad || port == ":0443", "{u} not read in one pass"),
            }
            quads += usize::from(plain_quad);
        }
        assert!(quads > 2_000, "{quads}");
    }

    #[test]
    fn a_site_read_from_text_is_the_site_read_from_its_bytes() {
        for u in [
            "http://a.example/é",
            "http://é.example/",
            "http://A.Example:8080/x?é#é",
            "https://b.example:443",
            "http://127.0.0.1:80/p",
            "http://ß.de/",
            "http://a.example:é/",
            "HTTP://X.test",
            "ftp://a.example/",
            "",
        ] {
            assert_eq!(crawl_site_of(u), crawl_site_ref(u.as_bytes()), "{u}");
        }
    }

    #[test]
    fn sites_and_routing_attributes() {
        assert_eq!(
            crawl_site(b"http://WWW.Example.com/a").as_deref(),
            Some("www.example.com")
        );
        assert_eq!(
            crawl_site(b"http://example.com:80/").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            crawl_site(b"http://127.0.0.2:8080/x").as_deref(),
            Some("127.0.0.2:8080")
        );
        assert_eq!(crawl_site(b"mailto:a@b.c"), None);
        // The direct path and the URL parser agree.
        for u in [
            "http://a.com",
            "HTTPS://A.Com:443/x",
            "http://a.com:8080?q",
            "http://a-b.c.d#f",
            "http://user@a.com/",
            "http://[::1]:80/",
            "http://10.0.0.1:0080/",
            "http://1.2.3/",
            "http://b\u{e4}r.de/",
            "http://a..b/",
            "http://1.2.3.4:65535/",
            "http://1.2.3.4:65536/",
            "http://a.com:+80/",
            "http://a.com.:80/",
            "http://.a.com/",
            "http://a.b:/",
            "http://a.1.2/",
            "http://01.2.3.4/",
            "http://1.2.3.256/",
            "http://a.0x1f/",
            "http://0x7f.0.0.1/",
            "http://255.255.255.255:8080/",
            "http://a.com:0/",
            "http://a.com:00/",
            "http://a.com:123456/",
            "http://a.com:99999/",
            "http://1.2.3.4:8080/x",
            "http://1.2.3.04/",
        ] {
            assert_eq!(crawl_site(u.as_bytes()), parsed_site(u), "{u}");
        }
        assert_eq!(crawl_site(b"not a uri"), None);
        assert_eq!(routing_attribute("www.example.co.uk"), "example.co.uk");
        assert_eq!(routing_attribute("news.example.com:8080"), "example.com");
        assert_eq!(routing_attribute("127.0.0.2:8080"), "127.0.0.2");
        assert_eq!(routing_attribute("[::1]:8080"), "::1");
        assert_eq!(routing_attribute("localhost"), "localhost");
    }

    #[test]
    fn same_site_answers_what_comparing_crawl_sites_answers() {
        // Pages and links drawn from the same small set of schemes, authorities and tails:
        // many links share the page's prefix, many differ from it only by case, port, scheme
        // or userinfo. SameSite must answer exactly as comparing crawl_site_of with the page's
        // site does, for the page's real site and for a site the page is not on.
        let schemes = ["http://", "https://", "HTTP://"];
        let auths = [
            "a.com",
            "A.com",
            "a.com:80",
            "a.com:443",
            "a.com:8080",
            "b.a.com",
            "a.comx",
            "u@a.com",
            "1.2.3.4",
            "1.2.3.4:80",
            "1.2.3.04",
            "[::1]:8080",
            "a.com.",
            "",
        ];
        let tails = ["", "/", "/p?q", "?q", "#f", "/x/../y", ":", "@b.com/"];
        let urls: Vec<String> = schemes
            .iter()
            .flat_map(|s| auths.iter().map(move |a| format!("{s}{a}")))
            .flat_map(|p| tails.iter().map(move |t| format!("{p}{t}")))
            .chain(["a.com/p".to_string(), "mailto:x@a.com".to_string()])
            .collect();
        let mut same = 0;
        for page in &urls {
            let real = crawl_site_of(page).map(Cow::into_owned);
            for site in [real.as_deref().unwrap_or(""), "a.com", "other"] {
                let ss = SameSite::new(page, site);
                for link in &urls {
                    let want = crawl_site_of(link).as_deref() == Some(site);
                    assert_eq!(
                        ss.is_same(link),
                        want,
                        "page {page} site {site} link {link}"
                    );
                    same += usize::from(want);
                }
            }
        }
        assert!(same > 10_000, "{same}");
    }
}
