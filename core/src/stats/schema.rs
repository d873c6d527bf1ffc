//! One schema instance (FSCADM 2.2.4.7): named attributes of the five aggregation types.

use std::collections::BTreeMap;

use crate::marshal::Value;

/// `__schemaname__` of the global schema (2.2.4.8).
pub const GLOBAL: &str = "globalschema";
/// `__schemaname__` of the crawl site schema (2.2.4.9).
pub const SITE: &str = "siteschema";
/// `__schemaname__` of the crawl collection schema (2.2.4.10).
pub const COLLECTION: &str = "collectionschema";

/// The aggregation type of an attribute (2.2.4.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A counter that accumulates (2.2.4.6.1).
    Continuous,
    /// A sampled value (2.2.4.6.2).
    Discrete,
    /// A sum of discrete values of several nodes (2.2.4.6.2).
    MultiDiscrete,
    /// Occurrences per value (2.2.4.6.3).
    Histogram,
    /// Rows of values (2.2.4.6.4).
    MultiDimension,
}

impl Kind {
    /// The aggregation type the FSCADM 2.2.4.8-2.2.4.10 tables give `attr`; attributes they do
    /// not name are continuous.
    pub fn of(attr: &str) -> Kind {
        match attr {
            "Uptime" | "LastUri" | "QueueLength" | "CrawlStarted" | "CrawlEnded" | "Epoch"
            | "LastRefresh" | "ActiveSites" | "Feeding" | "Status" | "CrawlMode"
            | "DNSRateLimit" | "PPChecksums" => Kind::Discrete,
            "SumActiveSites" | "SumPPChecksums" => Kind::MultiDiscrete,
            "HTTPResponse" | "URISkip" | "DocSkip" | "MimeType" | "DNSResponse" => Kind::Histogram,
            "StartUriStatus" | "FeedingDestinations" => Kind::MultiDimension,
            _ => Kind::Continuous,
        }
    }

    fn key(self) -> &'static str {
        match self {
            Kind::Continuous => "continuous",
            Kind::Discrete => "discrete",
            Kind::MultiDiscrete => "multidiscrete",
            Kind::Histogram => "histogram",
            Kind::MultiDimension => "multidimension",
        }
    }

    const ALL: [Kind; 5] = [
        Kind::Continuous,
        Kind::Discrete,
        Kind::MultiDiscrete,
        Kind::Histogram,
        Kind::MultiDimension,
    ];
}

/// One attribute's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Stat {
    /// Continuous, discrete or multidiscrete: (current, min, max, updates).
    Num {
        /// The aggregation type.
        kind: Kind,
        /// Current value (a continuous value's sum).
        cur: f64,
        /// Smallest update.
        min: f64,
        /// Largest update.
        max: f64,
        /// Updates.
        n: u64,
    },
    /// A discrete string (LastUri, CrawlMode).
    Text {
        /// The value.
        cur: String,
        /// Updates.
        n: u64,
    },
    /// A histogram: occurrences per value, and updates.
    Hist(BTreeMap<String, f64>, u64),
    /// A multidimension value: rows, and updates.
    Rows(BTreeMap<String, Vec<Value<'static>>>, u64),
}

/// A number as the marshal format carries it: an integer when it is one.
pub fn number(v: f64) -> Value<'static> {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::int(v as i64)
    } else {
        Value::Float(v)
    }
}

/// A number of either marshal form.
fn num_of(v: &Value<'_>) -> Option<f64> {
    v.as_f64().or_else(|| v.as_i64().map(|i| i as f64))
}

fn none() -> Value<'static> {
    Value::bytes(b"None")
}

impl Stat {
    fn to_value(&self) -> Value<'static> {
        match self {
            Stat::Num {
                cur, min, max, n, ..
            } => Value::list(vec![
                number(*cur),
                number(*min),
                number(*max),
                number(*n as f64),
            ]),
            Stat::Text { cur, n } => {
                let s = Value::owned_bytes(cur.as_bytes().to_vec());
                Value::list(vec![s.clone(), s.clone(), s, number(*n as f64)])
            }
            Stat::Hist(b, n) => {
                let d = b
                    .iter()
                    .map(|(k, v)| (Value::owned_bytes(k.as_bytes().to_vec()), number(*v)))
                    .collect();
                Value::list(vec![Value::Dict(d), none(), none(), number(*n as f64)])
            }
            Stat::Rows(r, n) => {
                let d = r
                    .iter()
                    .map(|(k, v)| {
                        (
                            Value::owned_bytes(k.as_bytes().to_vec()),
                            Value::list(v.clone()),
                        )
                    })
                    .collect();
                Value::list(vec![Value::Dict(d), none(), none(), number(*n as f64)])
            }
        }
    }

    fn from_value(kind: Kind, v: &Value<'_>) -> Option<Stat> {
        let l = v.as_list().or_else(|| v.as_tuple())?;
        let n = num_of(l.get(3)?)? as u64;
        let first = l.first()?;
        Some(match kind {
            Kind::Histogram => {
                let mut b = BTreeMap::new();
                for (k, c) in first.as_dict()? {
                    b.insert(
                        String::from_utf8_lossy(k.as_bytes()?).into_owned(),
                        num_of(c)?,
                    );
                }
                Stat::Hist(b, n)
            }
            Kind::MultiDimension => {
                let mut r = BTreeMap::new();
                for (k, row) in first.as_dict()? {
                    let items = row.as_list().or_else(|| row.as_tuple())?;
                    let items = items.iter().map(|i| i.clone().into_owned()).collect();
                    r.insert(String::from_utf8_lossy(k.as_bytes()?).into_owned(), items);
                }
                Stat::Rows(r, n)
            }
            _ => match first.as_bytes() {
                Some(s) => Stat::Text {
                    cur: String::from_utf8_lossy(s).into_owned(),
                    n,
                },
                None => Stat::Num {
                    kind,
                    cur: num_of(first)?,
                    min: num_of(l.get(1)?)?,
                    max: num_of(l.get(2)?)?,
                    n,
                },
            },
        })
    }

    fn kind(&self) -> Kind {
        match self {
            Stat::Num { kind, .. } => *kind,
            Stat::Text { .. } => Kind::Discrete,
            Stat::Hist(..) => Kind::Histogram,
            Stat::Rows(..) => Kind::MultiDimension,
        }
    }

    /// Merges a delta's value into this one (2.2.4.4).
    fn merge(&mut self, d: &Stat) {
        match (self, d) {
            (
                Stat::Num {
                    kind,
                    cur,
                    min,
                    max,
                    n,
                },
                Stat::Num {
                    cur: dc,
                    min: dmin,
                    max: dmax,
                    n: dn,
                    ..
                },
            ) => {
                if *dn == 0 {
                    return;
                }
                if *kind == Kind::Continuous {
                    *cur += dc;
                } else {
                    *cur = *dc;
                }
                *min = if *n == 0 { *dmin } else { min.min(*dmin) };
                *max = if *n == 0 { *dmax } else { max.max(*dmax) };
                *n += dn;
            }
            (Stat::Text { cur, n }, Stat::Text { cur: dc, n: dn }) if *dn > 0 => {
                cur.clone_from(dc);
                *n += dn;
            }
            (Stat::Hist(b, n), Stat::Hist(db, dn)) => {
                for (k, v) in db {
                    *b.entry(k.clone()).or_insert(0.0) += v;
                }
                *n += dn;
            }
            (Stat::Rows(r, n), Stat::Rows(dr, dn)) if *dn > 0 => {
                r.clone_from(dr);
                *n += dn;
            }
            (s, d) if d.kind() != s.kind() => *s = d.clone(),
            _ => {}
        }
    }
}

/// One schema instance (2.2.4.7).
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    /// `__schemaname__`.
    pub schema: &'static str,
    /// `name`: "global", the collection or the site.
    pub name: String,
    /// `__startts__`.
    pub start: i64,
    /// `__stoptts__` (0: still gathering).
    pub stop: i64,
    /// The attributes.
    pub attrs: BTreeMap<String, Stat>,
}

impl Schema {
    /// An empty instance.
    pub fn new(schema: &'static str, name: &str, now: i64) -> Schema {
        Schema {
            schema,
            name: name.to_string(),
            start: now,
            stop: 0,
            attrs: BTreeMap::new(),
        }
    }

    /// Adds `v` to a continuous attribute.
    pub fn add(&mut self, key: &str, v: f64) {
        self.update(key, v, Kind::Continuous);
    }

    /// Adds `n` samples of a continuous attribute at once: their sum, smallest and largest
    /// (DocSize per document, DLTime per download: the updates count the samples, so an
    /// average is the sum over the updates and the maximum is the largest sample).
    pub fn add_samples(&mut self, key: &str, sum: f64, n: u64, min: f64, max: f64) {
        if n == 0 {
            return;
        }
        let s = self.attrs.entry(key.to_string()).or_insert(Stat::Num {
            kind: Kind::Continuous,
            cur: 0.0,
            min,
            max,
            n: 0,
        });
        match s {
            Stat::Num {
                cur,
                min: lo,
                max: hi,
                n: count,
                ..
            } => {
                *cur += sum;
                *lo = if *count == 0 { min } else { lo.min(min) };
                *hi = if *count == 0 { max } else { hi.max(max) };
                *count += n;
            }
            other => {
                *other = Stat::Num {
                    kind: Kind::Continuous,
                    cur: sum,
                    min,
                    max,
                    n,
                }
            }
        }
    }

    /// Sets a discrete attribute (its aggregation type from [`Kind::of`]).
    pub fn set(&mut self, key: &str, v: f64) {
        let kind = match Kind::of(key) {
            Kind::MultiDiscrete => Kind::MultiDiscrete,
            _ => Kind::Discrete,
        };
        self.update(key, v, kind);
    }

    fn update(&mut self, key: &str, v: f64, kind: Kind) {
        let s = self.attrs.entry(key.to_string()).or_insert(Stat::Num {
            kind,
            cur: 0.0,
            min: v,
            max: v,
            n: 0,
        });
        match s {
            Stat::Num {
                kind: k,
                cur,
                min,
                max,
                n,
            } => {
                if *k == Kind::Continuous {
                    *cur += v;
                } else {
                    *cur = v;
                }
                *min = min.min(v);
                *max = max.max(v);
                *n += 1;
            }
            other => {
                *other = Stat::Num {
                    kind,
                    cur: v,
                    min: v,
                    max: v,
                    n: 1,
                }
            }
        }
    }

    /// Sets a discrete string attribute.
    pub fn set_str(&mut self, key: &str, v: &str) {
        let n = match self.attrs.get(key) {
            Some(Stat::Text { n, .. }) => *n + 1,
            _ => 1,
        };
        self.attrs.insert(
            key.to_string(),
            Stat::Text {
                cur: v.to_string(),
                n,
            },
        );
    }

    /// Counts `n` in a histogram bucket.
    pub fn hist(&mut self, key: &str, bucket: &str, n: f64) {
        let s = self
            .attrs
            .entry(key.to_string())
            .or_insert_with(|| Stat::Hist(BTreeMap::new(), 0));
        if !matches!(s, Stat::Hist(..)) {
            *s = Stat::Hist(BTreeMap::new(), 0);
        }
        if let Stat::Hist(b, c) = s {
            *b.entry(bucket.to_string()).or_insert(0.0) += n;
            *c += 1;
        }
    }

    /// Sets one row of a multidimension attribute.
    pub fn set_row(&mut self, key: &str, row: &str, values: Vec<Value<'static>>) {
        let s = self
            .attrs
            .entry(key.to_string())
            .or_insert_with(|| Stat::Rows(BTreeMap::new(), 0));
        if !matches!(s, Stat::Rows(..)) {
            *s = Stat::Rows(BTreeMap::new(), 0);
        }
        if let Stat::Rows(r, c) = s {
            r.insert(row.to_string(), values);
            *c += 1;
        }
    }

    /// The current value of a numeric attribute (0 when absent).
    pub fn num(&self, key: &str) -> f64 {
        match self.attrs.get(key) {
            Some(Stat::Num { cur, .. }) => *cur,
            _ => 0.0,
        }
    }

    /// The largest update of a numeric attribute (0 when absent).
    pub fn max(&self, key: &str) -> f64 {
        match self.attrs.get(key) {
            Some(Stat::Num { max, .. }) => *max,
            _ => 0.0,
        }
    }

    /// The smallest update of a numeric attribute (0 when absent).
    pub fn min(&self, key: &str) -> f64 {
        match self.attrs.get(key) {
            Some(Stat::Num { min, .. }) => *min,
            _ => 0.0,
        }
    }

    /// The updates of an attribute.
    pub fn count(&self, key: &str) -> u64 {
        match self.attrs.get(key) {
            Some(
                Stat::Num { n, .. } | Stat::Text { n, .. } | Stat::Hist(_, n) | Stat::Rows(_, n),
            ) => *n,
            None => 0,
        }
    }

    /// A discrete string attribute.
    pub fn text(&self, key: &str) -> Option<&str> {
        match self.attrs.get(key) {
            Some(Stat::Text { cur, .. }) => Some(cur),
            _ => None,
        }
    }

    /// A histogram's buckets.
    pub fn histogram(&self, key: &str) -> Option<&BTreeMap<String, f64>> {
        match self.attrs.get(key) {
            Some(Stat::Hist(b, _)) => Some(b),
            _ => None,
        }
    }

    /// Merges a delta into this instance.
    pub fn merge(&mut self, d: &Schema) {
        for (k, v) in &d.attrs {
            match self.attrs.get_mut(k) {
                Some(s) => s.merge(v),
                None => {
                    self.attrs.insert(k.clone(), v.clone());
                }
            }
        }
        self.stop = self.stop.max(d.stop);
    }

    /// Takes the discrete values of `prev` (a new cycle starts where the last one stood).
    pub fn carry_discrete(&mut self, prev: &Schema) {
        for (k, v) in &prev.attrs {
            if v.kind() != Kind::Continuous && v.kind() != Kind::Histogram {
                self.attrs.insert(k.clone(), v.clone());
            }
        }
    }

    /// Empties the instance to gather again from `now` (2.2.4.4).
    pub fn reset(&mut self, now: i64) {
        self.attrs.clear();
        self.start = now;
        self.stop = 0;
    }

    /// The marshal structure of 2.2.4.7: the mandatory `__schemaname__` and `name`, the
    /// timestamps, and per aggregation type a list of (attribute, value) pairs.
    pub fn to_value(&self) -> Value<'static> {
        let mut d = vec![
            (
                Value::bytes(b"__schemaname__"),
                Value::owned_bytes(self.schema.as_bytes().to_vec()),
            ),
            (
                Value::bytes(b"name"),
                Value::owned_bytes(self.name.as_bytes().to_vec()),
            ),
            (Value::bytes(b"__startts__"), Value::int(self.start)),
        ];
        if self.stop != 0 {
            d.push((Value::bytes(b"__stoptts__"), Value::int(self.stop)));
        }
        for kind in Kind::ALL {
            let items: Vec<Value<'static>> = self
                .attrs
                .iter()
                .filter(|(_, s)| s.kind() == kind)
                .map(|(k, s)| {
                    Value::tuple(vec![
                        Value::owned_bytes(k.as_bytes().to_vec()),
                        s.to_value(),
                    ])
                })
                .collect();
            if !items.is_empty() {
                d.push((
                    Value::owned_bytes(kind.key().as_bytes().to_vec()),
                    Value::list(items),
                ));
            }
        }
        Value::Dict(d)
    }

    /// Reads what [`Self::to_value`] wrote.
    pub fn from_value(v: &Value<'_>, schema: &'static str) -> Option<Schema> {
        let mut s = Schema::new(
            schema,
            &String::from_utf8_lossy(v.get(b"name")?.as_bytes()?),
            v.get(b"__startts__")?.as_i64()?,
        );
        s.stop = v.get(b"__stoptts__").and_then(Value::as_i64).unwrap_or(0);
        for kind in Kind::ALL {
            let Some(items) = v.get(kind.key().as_bytes()) else {
                continue;
            };
            for item in items.as_list()? {
                let pair = item.as_tuple().or_else(|| item.as_list())?;
                let name = String::from_utf8_lossy(pair.first()?.as_bytes()?).into_owned();
                let stat = Stat::from_value(kind, pair.get(1)?)?;
                s.attrs.insert(name, stat);
            }
        }
        Some(s)
    }
}
