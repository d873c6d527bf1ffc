//! The status methods of FSCADM 2.2.10 over a [`Role`], one function each, and what the
//! administrative interface derives from the scheduler core for them: statistics folded in
//! from the core's counters ([`Admin::absorb`]) and the live values of 2.2.4.2.

use crawlfleet_core::config::{self, CollectionConfig};
use crawlfleet_core::marshal::{self, Value as M};
use crawlfleet_core::stats::{flatten_collection, flatten_global, flatten_report, Live, Schema};
use crawlfleet_core::xmlrpc::{from_marshal, Value};

use super::methods::{cresult, live_collection, state_of, Outcome, R};
use super::roles::{status_string, status_word, Role};
use super::Admin;

/// CollectionDisableRefreshOnly (MS-FSCADM 2.2.10.1).
pub fn collection_disable_refresh_only(admin: &mut Admin, role: &mut dyn Role, coll: &str) -> R {
    refresh_only(admin, role, coll, false)
}

/// CollectionEnableRefreshOnly (MS-FSCADM 2.2.10.2): nothing outside the crawl store is
/// downloaded.
pub fn collection_enable_refresh_only(admin: &mut Admin, role: &mut dyn Role, coll: &str) -> R {
    refresh_only(admin, role, coll, true)
}

fn refresh_only(admin: &mut Admin, role: &mut dyn Role, coll: &str, on: bool) -> R {
    live_collection(role, coll)?;
    let cb = coll.as_bytes();
    // The collection's `refresh_only` attribute: persisted with its configuration and carried
    // to the nodes by CMD_ADM_CONF_UPDATE, which enforce it (2.2.10.2: nothing outside the
    // crawl store is downloaded).
    let mut pairs = role
        .config(cb)
        .and_then(|d| d.as_dict().map(<[_]>::to_vec))
        .unwrap_or_default();
    pairs.retain(|(k, _)| k.as_bytes() != Some(b"refresh_only"));
    pairs.push((
        M::bytes(b"refresh_only").into_owned(),
        M::int(i64::from(on)),
    ));
    role.put_collection(cb, M::Dict(pairs), false)?;
    admin.stats.set_str(cb, "CrawlMode", &role.crawl_mode(cb));
    Ok(cresult(
        true,
        format!(
            "Refresh-only {} for {coll}",
            if on { "enabled" } else { "disabled" }
        ),
    ))
}

/// CollectionGetStatus (MS-FSCADM 2.2.10.3): the status string of the collection's state.
pub fn collection_get_status(role: &dyn Role, coll: &str) -> R {
    Ok(Value::String(status_string(state_of(role, coll)?).into()))
}

/// CollectionGetSiteStatistics (MS-FSCADM 2.2.10.4): a site's statistics (the site schema of
/// 2.2.4.9 in the structure of 2.2.4, without "global"), serialized in the pyfastmarshal
/// format. A node scheduler answers from its own records; a multinode scheduler asks the node
/// scheduler the site is routed to, the one that crawls it, and relays its answer.
pub fn collection_get_site_statistics(
    admin: &Admin,
    role: &dyn Role,
    coll: &str,
    site: &str,
    now: i64,
) -> Outcome {
    let answer = || -> R {
        state_of(role, coll)?;
        if role.is_multinode() {
            return Err(match role.route(coll.as_bytes(), site) {
                None => format!("no statistics for site {site:?} in {coll:?}: it has no route"),
                Some((node, _)) => format!(
                    "no statistics for site {site:?} in {coll:?}: node scheduler {} has no known XML-RPC address",
                    String::from_utf8_lossy(&node)
                ),
            });
        }
        let d = admin
            .sites
            .site_dict(coll.as_bytes(), site, dspec_of(role, coll.as_bytes()), now)
            .ok_or_else(|| format!("no statistics for site {site:?} in {coll:?}"))?;
        Ok(Value::Base64(marshal::to_bytes(&d)))
    };
    if role.is_multinode() && state_of(role, coll).is_ok() {
        if let Some((_, Some((host, port)))) = role.route(coll.as_bytes(), site) {
            return Outcome::Relay {
                node: format!("{host}:{port}"),
                method: "CollectionGetSiteStatistics",
                params: vec![coll.into(), site.into()],
            };
        }
    }
    Outcome::Done(answer())
}

/// CollectionGetStatistics (MS-FSCADM 2.2.10.5): the statistics of one collection or ("")
/// all, marshalled in the pyfastmarshal format.
pub fn collection_get_statistics(admin: &Admin, role: &dyn Role, coll: &str) -> R {
    if !coll.is_empty() {
        state_of(role, coll)?;
    }
    let only = (!coll.is_empty()).then_some(coll.as_bytes());
    let d = admin.stats.statistics_dict(only, |n| dspec_of(role, n));
    Ok(Value::Base64(marshal::to_bytes(&d)))
}

/// CollectionGetStatistics2 (MS-FSCADM 2.2.10.6): the current, previous and lifetime
/// statistics of a collection as XML-RPC structs.
pub fn collection_get_statistics2(admin: &Admin, role: &dyn Role, coll: &str, now: i64) -> R {
    let state = state_of(role, coll)?;
    let cb = coll.as_bytes();
    let Some(c) = admin.stats.collection(cb) else {
        return Ok(Value::Array(vec![Value::Int(0), "no statistics".into()]));
    };
    let live = admin.live(role, cb, state, now);
    let mut d = vec![(
        "cur".to_string(),
        from_marshal(&flatten_collection(&c.current(), &live, now)),
    )];
    // "prev": the cycle that ended, as it ended (its Epoch, when it began and ended).
    if let Some((cycle, prev)) = c.previous() {
        let end = prev.stop.max(prev.start);
        let live = ended(&live, cycle, prev, end);
        d.push((
            "prev".into(),
            from_marshal(&flatten_collection(prev, &live, end)),
        ));
    }
    d.push((
        "complete".into(),
        from_marshal(&flatten_collection(&c.table.lifetime(), &live, now)),
    ));
    Ok(Value::Array(vec![Value::Int(1), Value::Struct(d)]))
}

/// The live values as they stood when refresh cycle `cycle` (gathered in `s`) ended at `end`.
fn ended(live: &Live, cycle: i64, s: &Schema, end: i64) -> Live {
    Live {
        epoch: cycle,
        last_refresh: s.start,
        progress: (100, format!("refresh cycle {cycle} ended at {end}")),
        ..live.clone()
    }
}

/// GetGlobalStatistics (MS-FSCADM 2.2.10.7): the delta and lifetime global statistics.
pub fn get_global_statistics(admin: &Admin, now: i64) -> Value {
    let g = &admin.stats.global;
    Value::Array(vec![
        Value::Int(1),
        Value::Struct(vec![
            ("delta".into(), from_marshal(&flatten_global(&g.delta, now))),
            (
                "complete".into(),
                from_marshal(&flatten_global(&g.lifetime(), now)),
            ),
        ]),
    ])
}

/// (refresh minutes, refresh mode code) of a collection, for the "dspec" dictionary (2.2.4.2).
fn dspec_of(role: &dyn Role, name: &[u8]) -> (i64, i64) {
    let dict = role.config(name).unwrap_or(M::Dict(Vec::new()));
    match CollectionConfig::from_dict(&String::from_utf8_lossy(name), &dict) {
        Ok(c) => (c.refresh.round() as i64, c.refresh_mode.code()),
        Err(_) => (0, 0),
    }
}

impl Admin {
    pub(super) fn feeding_suspended(&self, role: &dyn Role, name: &[u8], dest: &[u8]) -> bool {
        if let Some((all, dests)) = role.feeding(name) {
            return if dest.is_empty() {
                all
            } else {
                all || dests.iter().any(|d| d == dest)
            };
        }
        self.state
            .feeding_suspended
            .get(name)
            .is_some_and(|s| s.contains(&b""[..]) || s.contains(dest))
    }

    /// Statistics for new collections, none for removed ones.
    pub fn sync_collections(&mut self, role: &dyn Role, now: i64) {
        let names: Vec<Vec<u8>> = role.collections().into_iter().map(|(n, _)| n).collect();
        for n in &names {
            self.stats.add_collection(n, now);
        }
        let gone: Vec<Vec<u8>> = self
            .stats
            .collections
            .keys()
            .filter(|k| !names.contains(k))
            .cloned()
            .collect();
        for g in gone {
            self.stats.remove_collection(&g);
            self.seen.remove(&g);
        }
    }

    /// Starts in the statistics the refresh cycles the core began (a node scheduler's: the
    /// multinode scheduler's follow its nodes' CMD_UM_STAT, [`Admin::apply_reports`]). What
    /// was counted before goes with the cycle that ends: feed it first.
    pub fn follow_cycles(&mut self, role: &dyn Role, now: i64) {
        if role.is_multinode() {
            return;
        }
        self.sync_collections(role, now);
        for (name, _) in role.collections() {
            let cycle = role.refresh_cycle(&name);
            let behind = self
                .stats
                .collection(&name)
                .is_some_and(|c| c.table.cycle < cycle);
            if behind {
                self.stats.start_cycle(&name, cycle, now);
                self.stats.set(&name, "CrawlStarted", now as f64);
            }
        }
    }

    /// Adds the CMD_UM_STAT structures the multinode scheduler received (MS-FSCMT 3.2.5.6)
    /// to the refresh cycles their Epochs name.
    pub fn apply_reports(&mut self, reports: Vec<(Vec<u8>, M<'static>)>, now: i64) {
        for (name, r) in reports {
            if self.stats.collection(&name).is_none() {
                self.stats.add_collection(&name, now);
            }
            self.stats.apply_report(&name, &r, now);
        }
    }

    /// The CMD_UM_STAT structures of a node scheduler (MS-FSCMT 3.1.6, 2.2.4.6: MS-FSCADM
    /// 2.2.5): per collection, one for each refresh cycle that ended since the last call, then
    /// the current cycle's.
    pub fn stat_reports(&mut self, role: &dyn Role, now: i64) -> Vec<(Vec<u8>, M<'static>)> {
        self.absorb(role, now);
        let mut out = Vec::new();
        for (name, state) in role.collections() {
            let live = self.live(role, &name, state, now);
            for (cycle, r) in self.stats.take_reports(&name, now) {
                let live = if cycle == live.epoch {
                    live.clone()
                } else {
                    let start = self
                        .stats
                        .collection(&name)
                        .and_then(|c| c.table.cycles.get(&cycle).map(|s| s.start));
                    Live {
                        epoch: cycle,
                        last_refresh: start.unwrap_or(r.start),
                        progress: (100, format!("refresh cycle {cycle} ended")),
                        ..live.clone()
                    }
                };
                out.push((name.clone(), flatten_report(&r, &live, now)));
            }
        }
        out
    }

    /// Folds what the core counted since the last look into the statistics.
    pub fn absorb(&mut self, role: &dyn Role, now: i64) {
        self.sync_collections(role, now);
        for (name, state) in role.collections() {
            let cycle = self.stats.collection(&name).map_or(0, |c| c.table.cycle);
            let seen = self.seen.entry(name.clone()).or_default();
            for (k, total) in role.counters(&name) {
                let last = seen.insert(k.clone(), total).unwrap_or(0.0);
                if total > last {
                    self.stats.add(&name, &k, total - last);
                }
            }
            for (k, b, total) in role.histograms(&name) {
                let last = seen.insert(format!("{k}\0{b}"), total).unwrap_or(0.0);
                if total > last {
                    self.stats.hist(&name, &k, &b, total - last);
                }
            }
            for (k, v) in role.node_sums(&name) {
                self.stats.set(&name, k, v);
            }
            self.stats
                .set(&name, "QueueLength", role.queued(&name) as f64);
            self.stats
                .set(&name, "ActiveSites", role.active_sites(&name) as f64);
            self.stats.set(&name, "Status", state as f64);
            self.stats.set(&name, "Epoch", cycle as f64);
            let feeding = !self.feeding_suspended(role, &name, b"");
            self.stats
                .set(&name, "Feeding", if feeding { 1.0 } else { 0.0 });
        }
        // Counted so far goes with the cycle it was counted in; then the new cycles start.
        self.follow_cycles(role, now);
    }

    pub(super) fn live(&self, role: &dyn Role, name: &[u8], state: i64, now: i64) -> Live {
        let c = self.stats.collection(name);
        let cycle_start = c
            .and_then(|c| c.table.cycles.get(&c.table.cycle))
            .map_or(now, |s| s.start);
        let (refresh_min, mode) = dspec_of(role, name);
        let period = (refresh_min * 60).max(1);
        let elapsed = (now - cycle_start).max(0);
        let left = (period - elapsed).max(0);
        let mode_name = config::RefreshMode::from_code(mode).map_or("", |m| m.name());
        Live {
            active_sites: role.active_sites(name),
            feeding: !self.feeding_suspended(role, name, b""),
            status: status_word(state),
            crawl_mode: role.crawl_mode(name),
            progress: (
                (elapsed * 100 / period).min(100),
                format!(
                    "{} days {}h {}m {}s until {mode_name} refresh",
                    left / 86400,
                    left % 86400 / 3600,
                    left % 3600 / 60,
                    left % 60
                ),
            ),
            // The cycle the statistics are in (a node's follows its core; the multinode
            // scheduler's, its nodes' reports).
            epoch: c.map_or(0, |c| c.table.cycle),
            last_refresh: cycle_start,
            uptime: c.map_or(now, |c| c.added),
        }
    }
}
