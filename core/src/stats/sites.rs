//! Per-site statistics of a node scheduler (FSCADM 2.2.4.9, the crawl site schema, answered by
//! CollectionGetSiteStatistics, 2.2.10.4), kept compact: a crawl of tens of thousands of hosts
//! holds one [`SiteRecord`] per site, about 600 bytes with a typical mix of attributes (601
//! measured for 10,000 sites, key and hash slot included; a test checks it), some 300 more for
//! a site crawled in more than one refresh cycle (its lifetime is then kept apart from the
//! current cycle); up to [`MAX_SITES`] sites per collection, beyond which a new site
//! counts for its collection only ([`SiteStats::dropped`]).
//!
//! The crawl engine's side tallies what happened to each site ([`SiteDelta`], gathered by
//! `crawl::site_tally`); [`SiteStats::absorb`] folds the deltas into the records every few
//! hundred milliseconds. A record keeps two spans: the collection's current refresh cycle and
//! the site's whole lifetime ("cOmPIEtE", 2.2.4.5; one span while they are the same), each a
//! short list of the continuous
//! attributes it has ([`Cell`]: sum, updates, smallest and largest update) and histogram
//! buckets of 8 bytes; and the discrete values: when a crawl of the site began (CrawlStarted,
//! LastRefresh) and ended (CrawlEnded, 0 while the site is being crawled), how many crawls
//! began (Epoch), and the last URI requested (LastUri).
//!
//! QueueLength is not given per site: the crawl queue is not counted by site.

use std::collections::HashMap;
use std::path::Path;

use super::schema::{self, Kind, Schema, Stat};
use super::COMPLETE;
use crate::marshal::{self, Limits, Value};

/// Sites with statistics kept per collection; beyond it, a site's updates count for its
/// collection only.
pub const MAX_SITES: usize = 100_000;

/// The continuous attributes of the site schema (2.2.4.9) kept per site; a [`Cell`] names its
/// attribute by its index here.
pub const CONTINUOUS: [&str; 16] = [
    "Processed",
    "Downloaded",
    "Stored",
    "Modified",
    "Unchanged",
    "Deleted",
    "ReadNet",
    "WriteNet",
    "HasLastMod",
    "HasETag",
    "DLTime",
    "DocSize",
    "Retries",
    "HasSitemap",
    "LocalFwd",
    "Local",
];

/// The histograms of the site schema kept per site; a [`Bucket`] names its attribute by its
/// index here.
pub const HISTOGRAMS: [&str; 4] = ["HTTPResponse", "URISkip", "DocSkip", "MimeType"];

/// DLTime is kept in microseconds.
const DLTIME: usize = 10;
/// MimeType buckets are indexes in a table of the MIME types met; beyond this many, a new one
/// counts for its collection only.
const MAX_MIME_TYPES: usize = 1024;
/// The longest LastUri kept, in bytes.
const MAX_LAST_URI: usize = 512;

/// The index of a continuous attribute in [`CONTINUOUS`].
pub fn continuous_index(name: &str) -> Option<u8> {
    CONTINUOUS.iter().position(|n| *n == name).map(|i| i as u8)
}

/// The index of a histogram in [`HISTOGRAMS`].
pub fn histogram_index(name: &str) -> Option<u8> {
    HISTOGRAMS.iter().position(|n| *n == name).map(|i| i as u8)
}

/// One continuous attribute over a span (2.2.4.6.1): the sum of its updates, how many there
/// were, the smallest and the largest. 24 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    /// The sum (DLTime in microseconds).
    pub sum: u64,
    /// Updates.
    pub n: u32,
    /// The smallest update (saturated at u32::MAX).
    pub min: u32,
    /// The largest update.
    pub max: u32,
    /// Index in [`CONTINUOUS`].
    pub attr: u8,
}

impl Cell {
    /// The cell of one update of `v` to attribute `attr`.
    fn one(attr: u8, v: u64) -> Cell {
        let small = u32::try_from(v).unwrap_or(u32::MAX);
        Cell {
            sum: v,
            n: 1,
            min: small,
            max: small,
            attr,
        }
    }

    fn fold(&mut self, o: &Cell) {
        if o.n == 0 {
            return;
        }
        self.min = if self.n == 0 {
            o.min
        } else {
            self.min.min(o.min)
        };
        self.max = self.max.max(o.max);
        self.sum = self.sum.saturating_add(o.sum);
        self.n = self.n.saturating_add(o.n);
    }
}

/// Adds one update of `v` to attribute `attr` of `cells` (kept sorted by attribute).
pub fn add_cell(cells: &mut Vec<Cell>, attr: u8, v: u64) {
    fold_cell(cells, &Cell::one(attr, v));
}

/// [`add_cell`] for each (attribute, update) of `updates`, given in ascending attribute order:
/// one pass along `cells` instead of a search for each.
pub fn add_cells(cells: &mut Vec<Cell>, updates: impl IntoIterator<Item = (u8, u64)>) {
    let mut i = 0;
    for (attr, v) in updates {
        while cells.get(i).is_some_and(|c| c.attr < attr) {
            i += 1;
        }
        let one = Cell::one(attr, v);
        match cells.get_mut(i) {
            Some(c) if c.attr == attr => c.fold(&one),
            _ => cells.insert(i, one),
        }
        i += 1;
    }
}

fn fold_cell(cells: &mut Vec<Cell>, c: &Cell) {
    match cells.binary_search_by_key(&c.attr, |x| x.attr) {
        Ok(i) => cells[i].fold(c),
        Err(i) => cells.insert(i, *c),
    }
}

/// One histogram bucket of a span: 8 bytes. The key is the HTTP status, the two ASCII bytes
/// of a skip code (2.2.3.1, 2.2.3.2), or the index of a MIME type in the table of
/// [`SiteStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    n: u32,
    key: u16,
    attr: u8,
}

/// What the crawl engine's side tallied for one site since the last [`SiteStats::absorb`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteDelta {
    /// Continuous updates, sorted by attribute.
    pub cells: Vec<Cell>,
    /// Histogram counts: (index in [`HISTOGRAMS`], bucket, count).
    pub hist: Vec<(u8, String, u32)>,
    /// Crawls of the site that began, and when the last began.
    pub starts: u32,
    /// When the last crawl began (unix seconds), if one did.
    pub started: Option<i64>,
    /// When the last crawl ended, if one did after the last start.
    pub ended: Option<i64>,
    /// The last URI requested.
    pub last_uri: Option<String>,
    /// When the site was last touched (unix seconds).
    pub at: i64,
}

/// One span of a site (its current refresh cycle, or its lifetime).
#[derive(Clone, Debug, Default, PartialEq)]
struct Span {
    /// When it began (`__startts__`).
    start: i64,
    /// When it was last updated (`__stoptts__`): the site's last fetch.
    stop: i64,
    cells: Vec<Cell>,
    hist: Vec<Bucket>,
}

impl Span {
    fn new(now: i64) -> Span {
        Span {
            start: now,
            ..Span::default()
        }
    }

    fn count(&mut self, attr: u8, key: u16, n: u32) {
        match self
            .hist
            .iter_mut()
            .find(|b| b.attr == attr && b.key == key)
        {
            Some(b) => b.n = b.n.saturating_add(n),
            None => self.hist.push(Bucket { n, key, attr }),
        }
    }

    fn heap_bytes(&self) -> usize {
        self.cells.capacity() * std::mem::size_of::<Cell>()
            + self.hist.capacity() * std::mem::size_of::<Bucket>()
    }
}

/// The statistics of one crawl site.
#[derive(Clone, Debug, PartialEq)]
pub struct SiteRecord {
    /// The refresh cycle of the collection that `cur` covers.
    cycle: i64,
    cur: Span,
    /// The lifetime, when the site was crawled before `cycle` (otherwise `cur` is its whole
    /// life, kept once).
    life: Option<Box<Span>>,
    /// Crawls of the site that began (Epoch).
    epoch: u32,
    /// Crawls that ended.
    ends: u32,
    first_started: i64,
    /// When the last crawl began (CrawlStarted, LastRefresh; 0: never).
    started: i64,
    first_ended: i64,
    /// When the last crawl ended (0: never).
    ended: i64,
    /// A crawl of the site is going on.
    active: bool,
    last_uri: Option<Box<str>>,
}

impl SiteRecord {
    fn new(cycle: i64, now: i64) -> SiteRecord {
        SiteRecord {
            cycle,
            cur: Span::new(now),
            life: None,
            epoch: 0,
            ends: 0,
            first_started: 0,
            started: 0,
            first_ended: 0,
            ended: 0,
            active: false,
            last_uri: None,
        }
    }

    /// The site's lifetime span.
    fn all(&self) -> &Span {
        self.life.as_deref().unwrap_or(&self.cur)
    }

    /// A crawl of the site is going on.
    pub fn active(&self) -> bool {
        self.active
    }

    /// Bytes this record holds, on the stack and the heap (not the map's key and slot).
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<SiteRecord>()
            + self.cur.heap_bytes()
            + self
                .life
                .as_ref()
                .map_or(0, |b| std::mem::size_of::<Span>() + b.heap_bytes())
            + self.last_uri.as_ref().map_or(0, |u| u.len())
    }
}

/// Every site's statistics, per collection.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiteStats {
    collections: HashMap<Vec<u8>, HashMap<Box<str>, SiteRecord>>,
    /// The MIME types met, indexed by their MimeType bucket keys.
    mimes: Vec<Box<str>>,
    mime_index: HashMap<Box<str>, u16>,
    /// Sites not recorded because their collection had [`MAX_SITES`].
    pub dropped: u64,
    dirty: bool,
}

fn skip_key(code: &str) -> Option<u16> {
    match code.as_bytes() {
        [a, b] => Some(u16::from_be_bytes([*a, *b])),
        _ => None,
    }
}

impl SiteStats {
    /// No statistics.
    pub fn new() -> SiteStats {
        SiteStats::default()
    }

    fn mime_key(&mut self, mime: &str) -> Option<u16> {
        if let Some(k) = self.mime_index.get(mime) {
            return Some(*k);
        }
        if self.mimes.len() >= MAX_MIME_TYPES {
            return None;
        }
        let k = self.mimes.len() as u16;
        self.mimes.push(mime.into());
        self.mime_index.insert(mime.into(), k);
        Some(k)
    }

    fn bucket_key(&mut self, attr: u8, bucket: &str) -> Option<u16> {
        match *HISTOGRAMS.get(usize::from(attr))? {
            "HTTPResponse" => bucket.parse().ok(),
            "MimeType" => self.mime_key(bucket),
            _ => skip_key(bucket),
        }
    }

    fn bucket_name(&self, attr: u8, key: u16) -> String {
        match HISTOGRAMS.get(usize::from(attr)) {
            Some(&"HTTPResponse") => key.to_string(),
            Some(&"MimeType") => self
                .mimes
                .get(usize::from(key))
                .map_or_else(String::new, |m| m.to_string()),
            _ => String::from_utf8_lossy(&key.to_be_bytes()).into_owned(),
        }
    }

    /// Folds what the crawl engine tallied into the records. `cycle_of` gives a collection's
    /// current refresh cycle: a site first touched in a new cycle starts its `cur` span anew.
    pub fn absorb(
        &mut self,
        deltas: Vec<((Vec<u8>, String), SiteDelta)>,
        cycle_of: impl Fn(&[u8]) -> i64,
    ) {
        for ((coll, site), d) in deltas {
            let cycle = cycle_of(&coll);
            let keys: Vec<(u8, Option<u16>, u32)> = d
                .hist
                .iter()
                .map(|(a, b, n)| (*a, self.bucket_key(*a, b), *n))
                .collect();
            let sites = self.collections.entry(coll).or_default();
            if !sites.contains_key(site.as_str()) && sites.len() >= MAX_SITES {
                self.dropped += 1;
                continue;
            }
            let r = sites
                .entry(site.into_boxed_str())
                .or_insert_with(|| SiteRecord::new(cycle, d.at));
            if r.cycle != cycle {
                r.cycle = cycle;
                let old = std::mem::replace(&mut r.cur, Span::new(d.at));
                r.life.get_or_insert_with(|| Box::new(old));
            }
            for span in std::iter::once(&mut r.cur).chain(r.life.as_deref_mut()) {
                for c in &d.cells {
                    fold_cell(&mut span.cells, c);
                }
                for (a, k, n) in &keys {
                    if let Some(k) = k {
                        span.count(*a, *k, *n);
                    }
                }
                span.stop = span.stop.max(d.at);
                // Exact sizes: a new attribute or bucket is rare once a site is crawled.
                span.cells.shrink_to_fit();
                span.hist.shrink_to_fit();
            }
            if let Some(t) = d.started {
                if r.epoch == 0 {
                    r.first_started = t;
                }
                r.epoch = r.epoch.saturating_add(d.starts.max(1));
                r.started = t;
                r.active = true;
            }
            if let Some(t) = d.ended {
                if r.ends == 0 {
                    r.first_ended = t;
                }
                r.ends = r.ends.saturating_add(1);
                r.ended = t;
                r.active = false;
            }
            if let Some(u) = d.last_uri {
                let mut end = u.len().min(MAX_LAST_URI);
                while !u.is_char_boundary(end) {
                    end -= 1;
                }
                r.last_uri = Some(u[..end].into());
            }
            self.dirty = true;
        }
    }

    /// Keeps the collections `keep` names (a removed collection's sites go with it).
    pub fn retain_collections(&mut self, keep: &[Vec<u8>]) {
        let before = self.collections.len();
        self.collections.retain(|c, _| keep.contains(c));
        self.dirty |= self.collections.len() != before;
    }

    /// The record of a site.
    pub fn site(&self, collection: &[u8], site: &str) -> Option<&SiteRecord> {
        self.collections.get(collection)?.get(site)
    }

    /// The sites of a collection with statistics.
    pub fn site_count(&self, collection: &[u8]) -> usize {
        self.collections.get(collection).map_or(0, HashMap::len)
    }

    /// The record of a site named as an administrator may (a hostport, 2.2.2.2): as the crawl
    /// site is written (a lower-case host, its port unless the scheme's default), or with the
    /// default port 80 or 443 written out.
    pub fn lookup(&self, collection: &[u8], site: &str) -> Option<(&str, &SiteRecord)> {
        let sites = self.collections.get(collection)?;
        let lower = site.to_ascii_lowercase();
        if let Some((k, r)) = sites.get_key_value(lower.as_str()) {
            return Some((&**k, r));
        }
        let bare = lower
            .strip_suffix(":80")
            .or_else(|| lower.strip_suffix(":443"))?;
        sites.get_key_value(bare).map(|(k, r)| (&**k, r))
    }

    fn span_schema(&self, name: &str, r: &SiteRecord, s: &Span) -> Schema {
        let mut out = Schema::new(schema::SITE, name, s.start);
        out.stop = s.stop;
        for c in &s.cells {
            let Some(attr) = CONTINUOUS.get(usize::from(c.attr)) else {
                continue;
            };
            let scale = if usize::from(c.attr) == DLTIME {
                1e-6
            } else {
                1.0
            };
            out.attrs.insert(
                (*attr).to_string(),
                Stat::Num {
                    kind: Kind::Continuous,
                    cur: c.sum as f64 * scale,
                    min: f64::from(c.min) * scale,
                    max: f64::from(c.max) * scale,
                    n: u64::from(c.n),
                },
            );
        }
        for b in &s.hist {
            let Some(attr) = HISTOGRAMS.get(usize::from(b.attr)) else {
                continue;
            };
            out.hist(attr, &self.bucket_name(b.attr, b.key), f64::from(b.n));
        }
        let discrete = |cur: i64, min: i64, max: i64, n: u32| Stat::Num {
            kind: Kind::Discrete,
            cur: cur as f64,
            min: min as f64,
            max: max as f64,
            n: u64::from(n),
        };
        if r.epoch > 0 {
            let started = discrete(r.started, r.first_started, r.started, r.epoch);
            out.attrs.insert("CrawlStarted".into(), started.clone());
            out.attrs.insert("LastRefresh".into(), started);
            out.attrs.insert(
                "Epoch".into(),
                discrete(i64::from(r.epoch), 1, i64::from(r.epoch), r.epoch),
            );
        }
        if r.ends > 0 || r.active {
            // 0 while the site is being crawled: it has not stopped.
            let now = if r.active { 0 } else { r.ended };
            let ended = discrete(now, r.first_ended, r.ended, r.ends);
            out.attrs.insert("CrawlEnded".into(), ended);
        }
        if let Some(u) = &r.last_uri {
            let n = r
                .all()
                .cells
                .first()
                .filter(|c| c.attr == 0)
                .map_or(1, |c| c.n);
            out.attrs.insert(
                "LastUri".into(),
                Stat::Text {
                    cur: u.to_string(),
                    n: u64::from(n),
                },
            );
        }
        out
    }

    /// The structure CollectionGetSiteStatistics answers (2.2.10.4, 2.2.4 with the crawl site
    /// in place of the collection and no "global"): {"dspec": {collection: {"refresh",
    /// "refresh_mode"}}, site: (delta, {cycle: siteschema, "cOmPIEtE": siteschema})}. The delta
    /// is empty: what the crawl engine tallies is folded in within a second. None when the
    /// site has no statistics.
    pub fn site_dict(
        &self,
        collection: &[u8],
        site: &str,
        dspec: (i64, i64),
        now: i64,
    ) -> Option<Value<'static>> {
        let (name, r) = self.lookup(collection, site)?;
        let delta = Schema::new(schema::SITE, name, now);
        let cycles = Value::Dict(vec![
            (
                Value::int(r.cycle),
                self.span_schema(name, r, &r.cur).to_value(),
            ),
            (
                Value::owned_bytes(COMPLETE.as_bytes().to_vec()),
                self.span_schema(name, r, r.all()).to_value(),
            ),
        ]);
        let (refresh, mode) = dspec;
        Some(Value::Dict(vec![
            (
                Value::bytes(b"dspec"),
                Value::Dict(vec![(
                    Value::owned_bytes(collection.to_vec()),
                    Value::Dict(vec![
                        (Value::bytes(b"refresh"), Value::int(refresh)),
                        (Value::bytes(b"refresh_mode"), Value::int(mode)),
                    ]),
                )]),
            ),
            (
                Value::owned_bytes(name.as_bytes().to_vec()),
                Value::tuple(vec![delta.to_value(), cycles]),
            ),
        ]))
    }
}

#[path = "sites_file.rs"]
mod file;

#[cfg(test)]
#[path = "sites_tests.rs"]
mod tests;

impl SiteStats {
    /// Writes the file if anything changed since the last write: a temporary file, fsync,
    /// rename.
    pub fn save(&mut self, path: &Path) -> std::io::Result<()> {
        if !self.dirty {
            return Ok(());
        }
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&marshal::to_bytes(&self.to_value()))?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        self.dirty = false;
        Ok(())
    }

    /// Reads the file [`Self::save`] wrote; a missing file gives no statistics, an unreadable
    /// one an error naming why. A crawl that was going on when the file was written ended at
    /// the site's last update (CrawlStarted is set anew when the crawl begins again).
    pub fn load(path: &Path) -> Result<SiteStats, String> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SiteStats::new()),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let limits = Limits {
            max_depth: 16,
            max_size: 1 << 30,
        };
        let v =
            marshal::from_bytes(&bytes, &limits).map_err(|e| format!("{}: {e}", path.display()))?;
        SiteStats::from_value(&v)
            .ok_or_else(|| format!("{}: not a site statistics file", path.display()))
    }
}
