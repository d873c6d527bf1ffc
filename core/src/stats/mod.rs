//! Crawl statistics as FSCADM 2.2.4 structures them: per schema (global, collection, site) a
//! *delta* that gathers updates and is merged every minute or two into the current *cycle*
//! (one per crawl refresh cycle, the last few retained) and into the "cOmPIEtE" cycle that
//! covers the whole lifetime; persisted to one file and read back on restart (FSCADM 3.3.1).
//!
//! The hook the crawl engine feeds (all values are numbers of the FSCADM 2.2.4.10 attribute
//! names; the per-site statistics of 2.2.4.9 are kept apart, in [`sites`]):
//!
//! ```
//! use crawlfleet_core::stats::Stats;
//!
//! let mut s = Stats::new(3, 1_000);
//! s.add_collection(b"web", 1_000);
//! s.add(b"web", "Downloaded", 1.0);                 // continuous: +1
//! s.add(b"web", "DocSize", 4071.0);
//! s.hist(b"web", "HTTPResponse", "200", 1.0);      // histogram bucket +1
//! s.set(b"web", "QueueLength", 12.0);              // discrete: the current value
//! s.set_str(b"web", "LastUri", "http://www.example.com/");
//! s.merge(1_060);                                  // the delta goes into the cycle
//! let cur = s.collection(b"web").unwrap().current();
//! assert_eq!(cur.num("Downloaded"), 1.0);
//! assert_eq!(cur.num("DocSize"), 4071.0);
//! ```
//!
//! Aggregation (2.2.4.6): a continuous value's delta sums the increments and keeps the
//! smallest and largest increment and how many there were; merged into a cycle the sums add.
//! A discrete value keeps the last value set, its minimum, maximum and update count.

mod flat;
mod report;
mod schema;
pub mod sites;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

pub use flat::{flatten_collection, flatten_global, flatten_report, Live};
pub use report::{aggregate_report, schema_of_report};
pub use schema::{Kind, Schema, Stat};

use crate::marshal::{self, Limits, Value};

/// The key of the cycle that covers all cycles (FSCADM 2.2.4.5).
pub const COMPLETE: &str = "cOmPIEtE";

/// Reports of ended cycles kept for the next CMD_UM_STAT.
const MAX_ENDED_REPORTS: usize = 16;

/// The statistics of one schema instance: delta, retained cycles and the complete cycle.
#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// Updates not merged yet (2.2.4.4).
    pub delta: Schema,
    /// Retained cycles by number (2.2.4.5).
    pub cycles: BTreeMap<i64, Schema>,
    /// The current cycle number.
    pub cycle: i64,
    /// Every cycle merged.
    pub complete: Schema,
}

impl Table {
    fn new(schema: &'static str, name: &str, now: i64) -> Table {
        let mut cycles = BTreeMap::new();
        cycles.insert(0, Schema::new(schema, name, now));
        Table {
            delta: Schema::new(schema, name, now),
            cycles,
            cycle: 0,
            complete: Schema::new(schema, name, now),
        }
    }

    /// The current cycle with the delta merged in: what "cur" reports.
    pub fn current(&self) -> Schema {
        let mut s =
            self.cycles.get(&self.cycle).cloned().unwrap_or_else(|| {
                Schema::new(self.delta.schema, &self.delta.name, self.delta.start)
            });
        s.merge(&self.delta);
        s
    }

    /// The previous cycle, when retained.
    pub fn previous(&self) -> Option<&Schema> {
        self.cycles.range(..self.cycle).next_back().map(|(_, s)| s)
    }

    /// The complete cycle with the delta merged in.
    pub fn lifetime(&self) -> Schema {
        let mut s = self.complete.clone();
        s.merge(&self.delta);
        s
    }

    fn merge(&mut self, now: i64) {
        self.delta.stop = now;
        let schema = self.delta.schema;
        let name = self.delta.name.clone();
        let cur = self
            .cycles
            .entry(self.cycle)
            .or_insert_with(|| Schema::new(schema, &name, now));
        cur.merge(&self.delta);
        self.complete.merge(&self.delta);
        // 2.2.4.4: merged values are re-initialised; discrete values carry over as they are.
        self.delta.reset(now);
    }

    fn start_cycle(&mut self, cycle: i64, retain: usize, now: i64) {
        self.merge(now);
        if cycle > self.cycle {
            self.cycle = cycle;
            let schema = self.delta.schema;
            let mut fresh = Schema::new(schema, &self.delta.name, now);
            // Discrete values (status, queue length, ...) stay what they were.
            if let Some(prev) = self.cycles.values().next_back() {
                fresh.carry_discrete(prev);
            }
            // 2.2.4.9 Epoch: the cycle's own number.
            fresh.set("Epoch", cycle as f64);
            self.cycles.insert(cycle, fresh);
        }
        while self.cycles.len() > retain.max(1) {
            let first = *self.cycles.keys().next().unwrap_or(&self.cycle);
            self.cycles.remove(&first);
        }
    }

    /// The statistics tuple (2.2.4.3): (delta, cycles with "cOmPIEtE").
    pub fn to_value(&self) -> Value<'static> {
        let mut cycles: Vec<(Value<'static>, Value<'static>)> = self
            .cycles
            .iter()
            .map(|(n, s)| (Value::int(*n), s.to_value()))
            .collect();
        cycles.push((
            Value::owned_bytes(COMPLETE.as_bytes().to_vec()),
            self.complete.to_value(),
        ));
        Value::tuple(vec![self.delta.to_value(), Value::Dict(cycles)])
    }

    fn from_value(v: &Value<'_>, schema: &'static str) -> Option<Table> {
        let t = v.as_tuple()?;
        let delta = Schema::from_value(t.first()?, schema)?;
        let mut cycles = BTreeMap::new();
        let mut complete = None;
        for (k, s) in t.get(1)?.as_dict()? {
            let s = Schema::from_value(s, schema)?;
            match k.as_i64() {
                Some(n) => {
                    cycles.insert(n, s);
                }
                None => complete = Some(s),
            }
        }
        let cycle = cycles.keys().next_back().copied().unwrap_or(0);
        Some(Table {
            delta,
            cycles,
            cycle,
            complete: complete?,
        })
    }
}

/// A collection's statistics.
#[derive(Clone, Debug)]
pub struct CollectionStats {
    /// The collection schema (2.2.4.10).
    pub table: Table,
    /// When the collection was added (its Uptime).
    pub added: i64,
    /// What was gathered since the last CMD_UM_STAT (MS-FSCMT 3.1.6 Statistics Timeout: "the
    /// delta of statistics since the previous"), in the current cycle. Not persisted.
    pub report: Schema,
    /// Reports of cycles that ended since the last CMD_UM_STAT: (cycle, what it gathered).
    pub ended: Vec<(i64, Schema)>,
}

/// Equal when what is persisted is (the reports for the next CMD_UM_STAT are not).
impl PartialEq for CollectionStats {
    fn eq(&self, o: &CollectionStats) -> bool {
        self.table == o.table && self.added == o.added
    }
}

impl CollectionStats {
    fn new(table: Table, added: i64) -> CollectionStats {
        let report = Schema::new(schema::COLLECTION, &table.delta.name, table.delta.start);
        CollectionStats {
            table,
            added,
            report,
            ended: Vec::new(),
        }
    }

    /// See [`Table::current`].
    pub fn current(&self) -> Schema {
        self.table.current()
    }

    /// The previous cycle and its number, when retained.
    pub fn previous(&self) -> Option<(i64, &Schema)> {
        let t = &self.table;
        t.cycles.range(..t.cycle).next_back().map(|(n, s)| (*n, s))
    }
}

/// Every statistic of a scheduler.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// The global schema (2.2.4.8).
    pub global: Table,
    /// Per collection.
    pub collections: BTreeMap<Vec<u8>, CollectionStats>,
    /// Cycles retained (k of 2.2.4.3, at least 1).
    pub retain: usize,
    /// When recording began (the global Uptime).
    pub started: i64,
}

fn name_of(c: &[u8]) -> String {
    String::from_utf8_lossy(c).into_owned()
}

impl Stats {
    /// Empty statistics keeping `retain` cycles, recording from `now`.
    pub fn new(retain: usize, now: i64) -> Stats {
        let mut global = Table::new(schema::GLOBAL, "global", now);
        global.delta.set("Uptime", now as f64);
        Stats {
            global,
            collections: BTreeMap::new(),
            retain: retain.max(1),
            started: now,
        }
    }

    /// Starts statistics for a collection (CollectionAdd, FSCADM 3.3.5: an empty structure);
    /// kept when it exists.
    pub fn add_collection(&mut self, name: &[u8], now: i64) {
        self.collections.entry(name.to_vec()).or_insert_with(|| {
            let mut table = Table::new(schema::COLLECTION, &name_of(name), now);
            table.delta.set("Uptime", now as f64);
            CollectionStats::new(table, now)
        });
    }

    /// Forgets a collection (its removal completed).
    pub fn remove_collection(&mut self, name: &[u8]) {
        self.collections.remove(name);
    }

    /// A collection's statistics.
    pub fn collection(&self, name: &[u8]) -> Option<&CollectionStats> {
        self.collections.get(name)
    }

    /// Adds `v` to a continuous attribute of a collection. Unknown collections are ignored.
    pub fn add(&mut self, collection: &[u8], key: &str, v: f64) {
        if let Some(c) = self.collections.get_mut(collection) {
            c.table.delta.add(key, v);
            c.report.add(key, v);
        }
    }

    /// Adds `n` samples of a continuous attribute of a collection: their sum, smallest and
    /// largest (DocSize per document, DLTime per download; see [`Schema::add_samples`]).
    pub fn add_samples(
        &mut self,
        collection: &[u8],
        key: &str,
        sum: f64,
        n: u64,
        min: f64,
        max: f64,
    ) {
        if let Some(c) = self.collections.get_mut(collection) {
            c.table.delta.add_samples(key, sum, n, min, max);
            c.report.add_samples(key, sum, n, min, max);
        }
    }

    /// Sets a discrete attribute of a collection.
    pub fn set(&mut self, collection: &[u8], key: &str, v: f64) {
        if let Some(c) = self.collections.get_mut(collection) {
            c.table.delta.set(key, v);
            c.report.set(key, v);
        }
    }

    /// Sets a discrete string attribute of a collection (LastUri, CrawlMode).
    pub fn set_str(&mut self, collection: &[u8], key: &str, v: &str) {
        if let Some(c) = self.collections.get_mut(collection) {
            c.table.delta.set_str(key, v);
            c.report.set_str(key, v);
        }
    }

    /// Counts `n` in a histogram bucket of a collection (HTTPResponse "200", MimeType, URISkip
    /// "ro", DocSkip "cs").
    pub fn hist(&mut self, collection: &[u8], key: &str, bucket: &str, n: f64) {
        if let Some(c) = self.collections.get_mut(collection) {
            c.table.delta.hist(key, bucket, n);
            c.report.hist(key, bucket, n);
        }
    }

    /// Sets a row of a multidimension attribute (StartUriStatus, FeedingDestinations).
    pub fn set_row(
        &mut self,
        collection: &[u8],
        key: &str,
        row: &str,
        values: Vec<Value<'static>>,
    ) {
        if let Some(c) = self.collections.get_mut(collection) {
            c.table.delta.set_row(key, row, values);
        }
    }

    /// Adds `v` to a continuous global attribute (DNSRequests, DNSRead, ...).
    pub fn global_add(&mut self, key: &str, v: f64) {
        self.global.delta.add(key, v);
    }

    /// Sets a discrete global attribute (DNSRateLimit).
    pub fn global_set(&mut self, key: &str, v: f64) {
        self.global.delta.set(key, v);
    }

    /// Counts a global histogram bucket (DNSResponse by RCODE).
    pub fn global_hist(&mut self, key: &str, bucket: &str, n: f64) {
        self.global.delta.hist(key, bucket, n);
    }

    /// What a collection gathered since the last call, for a CMD_UM_STAT (MS-FSCMT 3.1.6):
    /// (cycle, gathered) for each cycle that ended since, then the current cycle's (its
    /// `start` is when the last call was, its `stop` now).
    pub fn take_reports(&mut self, collection: &[u8], now: i64) -> Vec<(i64, Schema)> {
        let Some(c) = self.collections.get_mut(collection) else {
            return Vec::new();
        };
        let mut out = std::mem::take(&mut c.ended);
        let fresh = Schema::new(schema::COLLECTION, &c.report.name, now);
        let mut cur = std::mem::replace(&mut c.report, fresh);
        cur.stop = now;
        out.push((c.table.cycle, cur));
        out
    }

    /// Adds a 2.2.5 structure a node scheduler reported (CMD_UM_STAT, MS-FSCMT 3.2.5.6) to
    /// the cycle its Epoch names: a later cycle starts it, the current one gathers it in its
    /// delta, an earlier one still retained gets it directly (and so does the complete cycle).
    /// Returns the cycle it went to.
    pub fn apply_report(&mut self, collection: &[u8], report: &Value<'_>, now: i64) -> Option<i64> {
        let cur = self.collections.get(collection)?.table.cycle;
        let epoch = report
            .get(b"Epoch")
            .and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)))
            .filter(|e| *e >= 0)
            .unwrap_or(cur);
        if epoch > cur {
            self.start_cycle(collection, epoch, now);
        }
        let c = self.collections.get_mut(collection)?;
        let d = schema_of_report(report, &c.report.name, now);
        if epoch >= c.table.cycle {
            c.table.delta.merge(&d);
        } else {
            if let Some(s) = c.table.cycles.get_mut(&epoch) {
                s.merge(&d);
            }
            c.table.complete.merge(&d);
        }
        Some(epoch)
    }

    /// Merges every delta into its current cycle (every 1-2 minutes, 2.2.4.4).
    pub fn merge(&mut self, now: i64) {
        self.global.merge(now);
        for c in self.collections.values_mut() {
            c.table.merge(now);
        }
    }

    /// A collection begins refresh cycle `cycle` (2.2.4.5: cycle numbers start at 0): what was
    /// gathered so far stays with the cycle that ends (the current report goes to `ended`).
    pub fn start_cycle(&mut self, collection: &[u8], cycle: i64, now: i64) {
        let retain = self.retain;
        if let Some(c) = self.collections.get_mut(collection) {
            // Clocks read rounded up and down: a cycle begins no earlier than the last one.
            let t = &c.table;
            let now = t.cycles.get(&t.cycle).map_or(now, |s| now.max(s.start));
            if cycle > c.table.cycle {
                let fresh = Schema::new(schema::COLLECTION, &c.report.name, now);
                let done = std::mem::replace(&mut c.report, fresh);
                c.ended.push((c.table.cycle, done));
                // Not read for a long while (no CMD_UM_STAT sent): the oldest go.
                if c.ended.len() > MAX_ENDED_REPORTS {
                    c.ended.remove(0);
                }
            }
            c.table.start_cycle(cycle, retain, now);
        }
    }

    /// The statistics dictionary of CollectionGetStatistics (2.2.4.1): "dspec" with the
    /// collections' refresh settings, "global", and the collection named (all when `None`).
    /// `dspec_of` gives (refresh minutes, refresh mode code) of a collection.
    pub fn statistics_dict(
        &self,
        only: Option<&[u8]>,
        dspec_of: impl Fn(&[u8]) -> (i64, i64),
    ) -> Value<'static> {
        let mut dspec = Vec::new();
        let mut out = Vec::new();
        for (name, c) in &self.collections {
            if only.is_some_and(|o| o != name.as_slice()) {
                continue;
            }
            let (refresh, mode) = dspec_of(name);
            dspec.push((
                Value::owned_bytes(name.clone()),
                Value::Dict(vec![
                    (Value::bytes(b"refresh"), Value::int(refresh)),
                    (Value::bytes(b"refresh_mode"), Value::int(mode)),
                ]),
            ));
            out.push((Value::owned_bytes(name.clone()), c.table.to_value()));
        }
        let mut d = vec![
            (Value::bytes(b"dspec"), Value::Dict(dspec)),
            (Value::bytes(b"global"), self.global.to_value()),
        ];
        d.extend(out);
        Value::Dict(d)
    }

    /// Everything, for the statistics file.
    pub fn to_value(&self) -> Value<'static> {
        let colls = self
            .collections
            .iter()
            .map(|(n, c)| {
                let v = Value::Dict(vec![
                    (Value::bytes(b"added"), Value::int(c.added)),
                    (Value::bytes(b"table"), c.table.to_value()),
                ]);
                (Value::owned_bytes(n.clone()), v)
            })
            .collect();
        Value::Dict(vec![
            (Value::bytes(b"started"), Value::int(self.started)),
            (Value::bytes(b"retain"), Value::int(self.retain as i64)),
            (Value::bytes(b"global"), self.global.to_value()),
            (Value::bytes(b"collections"), Value::Dict(colls)),
        ])
    }

    /// Reads what [`Self::to_value`] wrote; None when it is not that shape.
    pub fn from_value(v: &Value<'_>) -> Option<Stats> {
        let mut collections = BTreeMap::new();
        for (n, c) in v.get(b"collections")?.as_dict()? {
            let table = Table::from_value(c.get(b"table")?, schema::COLLECTION)?;
            let cs = CollectionStats::new(table, c.get(b"added")?.as_i64()?);
            collections.insert(n.as_bytes()?.to_vec(), cs);
        }
        Some(Stats {
            global: Table::from_value(v.get(b"global")?, schema::GLOBAL)?,
            collections,
            retain: usize::try_from(v.get(b"retain")?.as_i64()?).ok()?.max(1),
            started: v.get(b"started")?.as_i64()?,
        })
    }

    /// Writes the statistics file: a temporary file, fsync, rename.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        use std::io::Write;
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&marshal::to_bytes(&self.to_value()))?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    }

    /// Reads the statistics file; a missing file gives empty statistics, an unreadable one an
    /// error naming why.
    pub fn load(path: &Path, retain: usize, now: i64) -> Result<Stats, String> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Stats::new(retain, now))
            }
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let limits = Limits {
            max_depth: 32,
            max_size: 1 << 30,
        };
        let v =
            marshal::from_bytes(&bytes, &limits).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut s = Stats::from_value(&v)
            .ok_or_else(|| format!("{}: not a statistics file", path.display()))?;
        s.retain = retain.max(1);
        Ok(s)
    }
}
