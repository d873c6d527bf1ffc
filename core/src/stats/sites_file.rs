//! The site statistics file: {"version": 1, "collections": {collection: {site: record}}},
//! each record a tuple (cycle, epoch, ends, first started, started, first ended, ended,
//! last URI or None, current span, lifetime span), each span (start, stop, [(attribute,
//! sum, updates, min, max)], [(histogram, bucket, count)]) with attributes and buckets by
//! name, so the file does not depend on the order of the tables.

use super::{fold_cell, Cell, SiteRecord, SiteStats, Span, CONTINUOUS, HISTOGRAMS, MAX_LAST_URI};
use crate::marshal::Value;

fn text(s: &str) -> Value<'static> {
    Value::owned_bytes(s.as_bytes().to_vec())
}

fn int(v: impl Into<i64>) -> Value<'static> {
    Value::int(v.into())
}

fn u32_of(v: &Value<'_>) -> Option<u32> {
    u32::try_from(v.as_i64()?).ok()
}

impl SiteStats {
    fn span_value(&self, s: &Span) -> Value<'static> {
        let cells = s
            .cells
            .iter()
            .filter_map(|c| {
                let name = CONTINUOUS.get(usize::from(c.attr))?;
                let sum = i64::try_from(c.sum).unwrap_or(i64::MAX);
                Some(Value::tuple(vec![
                    text(name),
                    int(sum),
                    int(c.n),
                    int(c.min),
                    int(c.max),
                ]))
            })
            .collect();
        let hist = s
            .hist
            .iter()
            .filter_map(|b| {
                let name = HISTOGRAMS.get(usize::from(b.attr))?;
                Some(Value::tuple(vec![
                    text(name),
                    text(&self.bucket_name(b.attr, b.key)),
                    int(b.n),
                ]))
            })
            .collect();
        Value::tuple(vec![
            int(s.start),
            int(s.stop),
            Value::list(cells),
            Value::list(hist),
        ])
    }

    fn span_from(&mut self, v: &Value<'_>) -> Option<Span> {
        let t = v.as_tuple()?;
        let mut s = Span {
            start: t.first()?.as_i64()?,
            stop: t.get(1)?.as_i64()?,
            ..Span::default()
        };
        for c in t.get(2)?.as_list()? {
            let c = c.as_tuple()?;
            let name = std::str::from_utf8(c.first()?.as_bytes()?).ok()?;
            // An attribute this version does not keep is left out.
            let Some(attr) = super::continuous_index(name) else {
                continue;
            };
            let cell = Cell {
                sum: u64::try_from(c.get(1)?.as_i64()?).ok()?,
                n: u32_of(c.get(2)?)?,
                min: u32_of(c.get(3)?)?,
                max: u32_of(c.get(4)?)?,
                attr,
            };
            fold_cell(&mut s.cells, &cell);
        }
        for b in t.get(3)?.as_list()? {
            let b = b.as_tuple()?;
            let name = std::str::from_utf8(b.first()?.as_bytes()?).ok()?;
            let Some(attr) = super::histogram_index(name) else {
                continue;
            };
            let bucket = std::str::from_utf8(b.get(1)?.as_bytes()?).ok()?;
            if let Some(key) = self.bucket_key(attr, bucket) {
                s.count(attr, key, u32_of(b.get(2)?)?);
            }
        }
        Some(s)
    }

    /// Everything, for the file.
    pub fn to_value(&self) -> Value<'static> {
        let mut colls: Vec<(&Vec<u8>, _)> = self.collections.iter().collect();
        colls.sort_by(|a, b| a.0.cmp(b.0));
        let colls = colls
            .into_iter()
            .map(|(c, sites)| {
                let sites = sites
                    .iter()
                    .map(|(s, r)| {
                        let rec = Value::tuple(vec![
                            int(r.cycle),
                            int(r.epoch),
                            int(r.ends),
                            int(r.first_started),
                            int(r.started),
                            int(r.first_ended),
                            int(r.ended),
                            r.last_uri.as_deref().map_or(Value::None, text),
                            self.span_value(&r.cur),
                            self.span_value(r.all()),
                        ]);
                        (text(s), rec)
                    })
                    .collect();
                (Value::owned_bytes(c.clone()), Value::Dict(sites))
            })
            .collect();
        Value::Dict(vec![
            (Value::bytes(b"version"), int(1)),
            (Value::bytes(b"collections"), Value::Dict(colls)),
        ])
    }

    /// Reads what [`Self::to_value`] wrote; None when it is not that shape. A crawl going on
    /// when it was written ended at the site's last update.
    pub fn from_value(v: &Value<'_>) -> Option<SiteStats> {
        if v.get(b"version")?.as_i64()? != 1 {
            return None;
        }
        let mut out = SiteStats::new();
        for (c, sites) in v.get(b"collections")?.as_dict()? {
            let c = c.as_bytes()?.to_vec();
            for (s, r) in sites.as_dict()? {
                let site = std::str::from_utf8(s.as_bytes()?).ok()?;
                let t = r.as_tuple()?;
                let last_uri = match t.get(7)? {
                    Value::None => None,
                    u => {
                        let u = String::from_utf8_lossy(u.as_bytes()?);
                        Some(u.chars().take(MAX_LAST_URI).collect::<String>().into())
                    }
                };
                let cur = out.span_from(t.get(8)?)?;
                let all = out.span_from(t.get(9)?)?;
                let life = (all != cur).then(|| Box::new(all));
                let mut rec = SiteRecord {
                    cycle: t.first()?.as_i64()?,
                    epoch: u32_of(t.get(1)?)?,
                    ends: u32_of(t.get(2)?)?,
                    first_started: t.get(3)?.as_i64()?,
                    started: t.get(4)?.as_i64()?,
                    first_ended: t.get(5)?.as_i64()?,
                    ended: t.get(6)?.as_i64()?,
                    active: false,
                    last_uri,
                    cur,
                    life,
                };
                if rec.started > rec.ended && rec.epoch > 0 {
                    rec.ended = rec.all().stop.max(rec.started);
                    if rec.ends == 0 {
                        rec.first_ended = rec.ended;
                    }
                    rec.ends = rec.ends.saturating_add(1);
                }
                out.collections
                    .entry(c.clone())
                    .or_default()
                    .insert(site.into(), rec);
            }
        }
        Some(out)
    }
}
