//! The methods of FSCADM 2.2.8, 2.2.9 and 2.2.10 over a [`Role`]. Parameters were checked
//! against [`super::METHODS`] before a call gets here; an `Err` is the fault string (2.2.7).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crawlfleet_core::config::{self, CollectionConfig};
use crawlfleet_core::marshal::{self, Value as M};
use crawlfleet_core::msg::types::{conf_state, refresh_options, uri_flags};
use crawlfleet_core::msg::{
    CollectionOnly, ConfRefresh, ConfSuspend, DeleteSite, DeleteUris, FeedingSuspend, Message,
    PreemptSite, Quarantine, ReprocessSite,
};
use crawlfleet_core::routing::crawl_site;
use crawlfleet_core::sched::start_uri_entry;
use crawlfleet_core::stats::{flatten_collection, flatten_global, Live};
use crawlfleet_core::xmlrpc::{from_marshal, Value};
use log::{info, warn};

use super::roles::{is_suspended, status_string, status_word, Role};
use super::{level_of, log_level, mask_of, Admin, Responder};

/// What a call comes to.
pub enum Outcome {
    /// The answer.
    Done(Result<Value, String>),
    /// SetLogLevel on a multinode scheduler: forward to the nodes, then answer (2.2.8.6).
    Forward {
        /// The nodes' XML-RPC addresses.
        nodes: Vec<(String, i64)>,
        /// The level mask.
        level: i64,
    },
}

type R = Result<Value, String>;

/// A cresult (2.2.2.1).
fn cresult(ok: bool, text: impl Into<String>) -> Value {
    Value::Array(vec![Value::Int(i64::from(ok)), Value::String(text.into())])
}

fn p_str(params: &[Value], i: usize) -> &str {
    params.get(i).and_then(Value::as_str).unwrap_or("")
}

fn p_int(params: &[Value], i: usize) -> i64 {
    params.get(i).and_then(Value::as_i64).unwrap_or(0)
}

fn p_strings(params: &[Value], i: usize) -> Vec<&str> {
    params
        .get(i)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn flag(params: &[Value], i: usize, what: &str) -> Result<bool, String> {
    match p_int(params, i) {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("{what} must be 0 or 1, not {v}")),
    }
}

fn b(s: &str) -> Cow<'static, [u8]> {
    Cow::Owned(s.as_bytes().to_vec())
}

/// The state of an existing collection, or the fault for an unknown one.
fn state_of(role: &dyn Role, name: &str) -> Result<i64, String> {
    role.collections()
        .into_iter()
        .find(|(n, _)| n == name.as_bytes())
        .map(|(_, s)| s)
        .ok_or_else(|| format!("no such collection: {name:?}"))
}

/// An existing collection that is not being deleted.
fn live_collection(role: &dyn Role, name: &str) -> Result<i64, String> {
    let s = state_of(role, name)?;
    if s == conf_state::REMOVING {
        return Err(format!("collection {name:?} is being deleted"));
    }
    Ok(s)
}

/// The lines of a URI file on this host (2.2.9.2: UTF-8, one URI a line).
fn read_uri_file(path: &str) -> Result<Vec<String>, String> {
    if !std::path::Path::new(path).is_absolute() {
        return Err(format!("{path:?} is not an absolute path"));
    }
    let text = std::fs::read(path).map_err(|e| format!("cannot read {path:?}: {e}"))?;
    let text = String::from_utf8(text).map_err(|_| format!("{path:?} is not UTF-8"))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// Runs one method.
pub fn call(
    admin: &mut Admin,
    role: &mut dyn Role,
    method: &str,
    p: &[Value],
    now: i64,
) -> Outcome {
    if method == "SetLogLevel" {
        let level = p_int(p, 0);
        if level <= 0 || level & !log_level::ALL != 0 {
            return Outcome::Done(Err(format!(
                "log level {level:#x} is not a mask of the FSCADM 2.2.3.5 levels"
            )));
        }
        admin.state.log_level = level;
        log::set_max_level(level_of(level));
        if let Err(e) = admin.save_state() {
            return Outcome::Done(Err(e));
        }
        info!("log level set to {level:#x}");
        if role.is_multinode() {
            return Outcome::Forward {
                nodes: role.node_ports(),
                level,
            };
        }
        return Outcome::Done(Ok(Value::Int(1)));
    }
    Outcome::Done(run(admin, role, method, p, now))
}

fn run(admin: &mut Admin, role: &mut dyn Role, method: &str, p: &[Value], now: i64) -> R {
    let coll = p_str(p, 0);
    let cb = coll.as_bytes();
    match method {
        // ---- 2.2.8 ---------------------------------------------------------------------------
        "GetLogLevel" => Ok(Value::Int(match admin.state.log_level {
            0 => mask_of(log::max_level()),
            l => l,
        })),
        "GetNodeSchedulerXmlRpcPorts" => {
            if !role.is_multinode() {
                return Err("not a multinode scheduler".into());
            }
            let ports = role.node_ports();
            if ports.is_empty() {
                return Err("no node scheduler is registered".into());
            }
            Ok(Value::Array(
                ports
                    .into_iter()
                    .map(|(h, p)| Value::Array(vec![h.into(), Value::Int(p)]))
                    .collect(),
            ))
        }
        "GetSiteManagerNum" => Ok(Value::Int(if role.is_multinode() { 0 } else { 1 })),
        "IsDistributed" => Ok(Value::Int(i64::from(role.is_distributed()))),
        "IsMultiNodeScheduler" => Ok(Value::Int(i64::from(role.is_multinode()))),
        // ---- 2.2.9 ---------------------------------------------------------------------------
        "AddURIs" | "AddURIFile" => {
            live_collection(role, coll)?;
            let urgent = flag(p, 1, "Urgent")?;
            let uris: Vec<String> = if method == "AddURIs" {
                p_strings(p, 2).into_iter().map(str::to_string).collect()
            } else {
                read_uri_file(p_str(p, 2))?
            };
            let mut queued = 0;
            let mut bad = Vec::new();
            for u in &uris {
                if crawl_site(u.as_bytes()).is_none() {
                    bad.push(u.as_str());
                    continue;
                }
                let mut e = start_uri_entry(u.as_bytes());
                e.uri_flags = uri_flags::URIF_NOFLAGS;
                if role.add_uri(cb, &e, urgent)? {
                    queued += 1;
                }
            }
            let mut text = format!("Queued collection {coll} with {queued} URIs");
            if !bad.is_empty() {
                text.push_str(&format!(
                    "; {} not absolute URIs skipped: {:?}",
                    bad.len(),
                    bad
                ));
            }
            Ok(cresult(queued > 0 || uris.is_empty(), text))
        }
        "CollectionAdd" => collection_add(admin, role, p, now),
        "CollectionDelete" => {
            let force = flag(p, 1, "Force")?;
            if !role.is_multinode() && role.is_distributed() && !force {
                return Err(
                    "this node scheduler is part of a multinode setup: delete the collection at \
                     the multinode scheduler, or pass Force=1"
                        .into(),
                );
            }
            live_collection(role, coll)?;
            role.delete_collection(cb, now)?;
            admin.state.feeding_suspended.remove(cb);
            admin.save_state()?;
            admin.sync_collections(role, now);
            let gone = state_of(role, coll).is_err();
            Ok(cresult(
                true,
                if gone {
                    format!("Collection {coll} deleted")
                } else {
                    format!("Collection {coll} is being deleted (zombie)")
                },
            ))
        }
        "CollectionDeleteSite" => {
            live_collection(role, coll)?;
            let site = p_str(p, 1);
            role.apply(
                Message::CmdUmDeleteSite(DeleteSite {
                    collection: b(coll),
                    site: b(site),
                }),
                now,
            )?;
            Ok(cresult(true, format!("Deleting site {site} from {coll}")))
        }
        "CollectionDeleteURIs" | "CollectionDeleteURIFile" => {
            live_collection(role, coll)?;
            let uris: Vec<String> = if method == "CollectionDeleteURIs" {
                p_strings(p, 1).into_iter().map(str::to_string).collect()
            } else {
                read_uri_file(p_str(p, 1))?
            };
            let mut by_site: BTreeMap<String, Vec<Cow<'static, [u8]>>> = BTreeMap::new();
            let mut bad = 0;
            for u in &uris {
                match crawl_site(u.as_bytes()) {
                    Some(site) => by_site.entry(site).or_default().push(b(u)),
                    None => bad += 1,
                }
            }
            let n = uris.len() - bad;
            if n > 0 {
                role.apply(
                    Message::CmdUmDeleteUris(DeleteUris {
                        collection: b(coll),
                        uris: by_site.into_iter().map(|(s, l)| (b(&s), l)).collect(),
                        info: vec![(M::bytes(b"errcode"), M::bytes(b"USR"))],
                    }),
                    now,
                )?;
            }
            let mut text = format!("Deleting {n} URIs from {coll}");
            if bad > 0 {
                text.push_str(&format!("; {bad} not absolute URIs skipped"));
            }
            Ok(cresult(n > 0 || uris.is_empty(), text))
        }
        "CollectionGetConfigurationXML" => {
            state_of(role, coll)?;
            let dict = role.config(cb).unwrap_or(M::Dict(Vec::new()));
            config::to_xml(coll, &dict)
                .map(Value::String)
                .map_err(|e| format!("configuration of {coll:?} cannot be written as XML: {e}"))
        }
        "CollectionGetList" => Ok(Value::Array(
            role.collections()
                .into_iter()
                .map(|(n, _)| Value::String(String::from_utf8_lossy(&n).into_owned()))
                .collect(),
        )),
        "CollectionGetSiteRoutingAddress" => {
            state_of(role, coll)?;
            let site = p_str(p, 1);
            Ok(match role.route(cb, site) {
                Some((_, Some((host, port)))) => Value::Array(vec![
                    Value::Int(1),
                    Value::Array(vec![host.into(), Value::Int(port)]),
                ]),
                Some((node, None)) => cresult(
                    false,
                    format!(
                        "site {site} is routed to node {}, whose address is not known here",
                        String::from_utf8_lossy(&node)
                    ),
                ),
                None => cresult(false, format!("site {site} is not routed yet")),
            })
        }
        "CollectionPreemptSite" => {
            live_collection(role, coll)?;
            let site = p_str(p, 1);
            // 2.2.9.11: crawling resumes later: the site goes back to the front of the queue.
            role.apply(
                Message::CmdAdmPreemptSite(PreemptSite {
                    collection: b(coll),
                    site: b(site),
                    requeue: true,
                }),
                now,
            )?;
            Ok(cresult(true, format!("Preempting site {site} in {coll}")))
        }
        "CollectionQuarantineSite" => {
            live_collection(role, coll)?;
            let (site, secs) = (p_str(p, 1), p_int(p, 2));
            if secs < 0 {
                return Err(format!("Time must not be negative, not {secs}"));
            }
            role.apply(
                Message::CmdUmQuarantineSite(Quarantine {
                    collection: b(coll),
                    site: b(site),
                    seconds: secs,
                }),
                now,
            )?;
            Ok(cresult(
                true,
                format!("Quarantined site {site} in {coll} for {secs} s"),
            ))
        }
        "CollectionRefetch" => {
            live_collection(role, coll)?;
            let sub = p_str(p, 1);
            if !sub.is_empty() {
                let dict = role.config(cb).unwrap_or(M::Dict(Vec::new()));
                if dict
                    .get(b"subdomains")
                    .and_then(|s| s.get(sub.as_bytes()))
                    .is_none()
                {
                    return Err(format!("collection {coll:?} has no subcollection {sub:?}"));
                }
            }
            let (subcollection, options) = if sub.is_empty() {
                (None, refresh_options::REFRESH_COLLECTION)
            } else {
                (Some(b(sub)), refresh_options::REFRESH_SUBCOLLECTION)
            };
            role.apply(
                Message::CmdAdmConfRefresh(ConfRefresh {
                    collection: b(coll),
                    subcollection,
                    options,
                }),
                now,
            )?;
            Ok(cresult(true, format!("Refetch of {coll} scheduled")))
        }
        "CollectionRefetchURI" => {
            live_collection(role, coll)?;
            let uri = p_str(p, 1);
            let refeed = flag(p, 2, "Refeed")?;
            let site = flag(p, 3, "Site")?;
            let urgent = flag(p, 4, "Immediately")?;
            if crawl_site(uri.as_bytes()).is_none() {
                return Err(format!("{uri:?} is not an absolute URI"));
            }
            let mut e = start_uri_entry(uri.as_bytes());
            e.uri_flags = uri_flags::URIF_FORCE;
            if refeed {
                e.uri_flags |= uri_flags::URIF_FORCE_REFEED;
            }
            if site {
                e.uri_flags |= uri_flags::URIF_FORCESITE;
            }
            role.add_uri(cb, &e, urgent)?;
            Ok(cresult(true, format!("Refetch of {uri} scheduled")))
        }
        "CollectionReprocessSite" | "CollectionReprocessSitePrefix" | "CollectionReprocessURI" => {
            live_collection(role, coll)?;
            let jobs: Vec<(String, String, String, bool)> = match method {
                "CollectionReprocessSite" => {
                    vec![(p_str(p, 2).into(), String::new(), p_str(p, 1).into(), false)]
                }
                "CollectionReprocessSitePrefix" => vec![(
                    p_str(p, 1).into(),
                    p_str(p, 2).into(),
                    p_str(p, 3).into(),
                    false,
                )],
                _ => p_strings(p, 2)
                    .into_iter()
                    // 2.2.9.17: invalid URIs are skipped, the rest processed.
                    .filter_map(|u| {
                        crawl_site(u.as_bytes())
                            .map(|s| (s, u.to_string(), p_str(p, 1).to_string(), true))
                    })
                    .collect(),
            };
            let n = jobs.len();
            for (site, prefix, dest, exact) in jobs {
                role.apply(
                    Message::CmdUmReprocessSite(ReprocessSite {
                        collection: b(coll),
                        site: b(&site),
                        prefix: b(&prefix),
                        destination: (!dest.is_empty()).then(|| b(&dest)),
                        exact,
                    }),
                    now,
                )?;
            }
            Ok(cresult(true, format!("Reprocessing {n} item(s) of {coll}")))
        }
        "CollectionSuspend" | "CollectionResume" => {
            let state = live_collection(role, coll)?;
            let suspend = method == "CollectionSuspend";
            // 2.2.9.18 / 2.2.9.20: a fault when already in that state.
            if suspend && is_suspended(state) {
                return Err(format!("collection {coll:?} is already suspended"));
            }
            if !suspend && !is_suspended(state) {
                return Err(format!("collection {coll:?} is not suspended"));
            }
            let m = if suspend {
                Message::CmdAdmConfSuspend(ConfSuspend {
                    collection: b(coll),
                    state: conf_state::SUSPENDED_USER,
                })
            } else {
                Message::CmdAdmConfResume(CollectionOnly {
                    collection: b(coll),
                })
            };
            role.apply(m, now)?;
            Ok(cresult(
                true,
                format!(
                    "Collection {coll} {}",
                    if suspend { "suspended" } else { "resumed" }
                ),
            ))
        }
        "CollectionSuspendFeeding" | "CollectionResumeFeeding" => {
            live_collection(role, coll)?;
            let dest = p_str(p, 1);
            let suspend = method == "CollectionSuspendFeeding";
            let suspended = admin.feeding_suspended(role, cb, dest.as_bytes());
            if suspend == suspended {
                return Err(format!(
                    "feeding of {coll:?}{} is {}",
                    if dest.is_empty() {
                        String::new()
                    } else {
                        format!(" to {dest:?}")
                    },
                    if suspend {
                        "already suspended"
                    } else {
                        "not suspended"
                    }
                ));
            }
            role.apply(
                Message::CmdAdmConfFeedingSuspend(FeedingSuspend {
                    collection: b(coll),
                    suspend,
                    destinations: (!dest.is_empty()).then(|| vec![b(dest)]),
                }),
                now,
            )?;
            let set = admin
                .state
                .feeding_suspended
                .entry(cb.to_vec())
                .or_default();
            if suspend {
                set.insert(dest.as_bytes().to_vec());
            } else if dest.is_empty() {
                set.clear();
            } else {
                set.remove(dest.as_bytes());
            }
            admin.save_state()?;
            Ok(cresult(
                true,
                format!(
                    "Feeding of {coll} {}",
                    if suspend { "suspended" } else { "resumed" }
                ),
            ))
        }
        // ---- 2.2.10 --------------------------------------------------------------------------
        "CollectionDisableRefreshOnly" | "CollectionEnableRefreshOnly" => {
            live_collection(role, coll)?;
            let on = method == "CollectionEnableRefreshOnly";
            // The collection's `refresh_only` attribute: persisted with its configuration and
            // carried to the nodes by CMD_ADM_CONF_UPDATE, which enforce it (2.2.10.2: nothing
            // outside the crawl store is downloaded).
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
        "CollectionGetStatus" => Ok(Value::String(status_string(state_of(role, coll)?).into())),
        "CollectionGetSiteStatistics" => {
            state_of(role, coll)?;
            let site = p_str(p, 1);
            let d = admin
                .stats
                .site_dict(cb, site)
                .ok_or_else(|| format!("no statistics for site {site:?} in {coll:?}"))?;
            // 2.2.10.4: serialized in the pyfastmarshal format.
            Ok(Value::Base64(marshal::to_bytes(&d)))
        }
        "CollectionGetStatistics" => {
            if !coll.is_empty() {
                state_of(role, coll)?;
            }
            let only = (!coll.is_empty()).then_some(cb);
            let d = admin.stats.statistics_dict(only, |n| dspec_of(role, n));
            // 2.2.10.5: marshalled in the pyfastmarshal format.
            Ok(Value::Base64(marshal::to_bytes(&d)))
        }
        "CollectionGetStatistics2" => {
            let state = state_of(role, coll)?;
            let Some(c) = admin.stats.collection(cb) else {
                return Ok(Value::Array(vec![Value::Int(0), "no statistics".into()]));
            };
            let live = admin.live(role, cb, state, now);
            let mut d = vec![(
                "cur".to_string(),
                from_marshal(&flatten_collection(&c.current(), &live, now)),
            )];
            if let Some(prev) = c.table.previous() {
                d.push((
                    "prev".into(),
                    from_marshal(&flatten_collection(prev, &live, now)),
                ));
            }
            d.push((
                "complete".into(),
                from_marshal(&flatten_collection(&c.table.lifetime(), &live, now)),
            ));
            Ok(Value::Array(vec![Value::Int(1), Value::Struct(d)]))
        }
        "GetGlobalStatistics" => {
            let g = &admin.stats.global;
            Ok(Value::Array(vec![
                Value::Int(1),
                Value::Struct(vec![
                    ("delta".into(), from_marshal(&flatten_global(&g.delta, now))),
                    (
                        "complete".into(),
                        from_marshal(&flatten_global(&g.lifetime(), now)),
                    ),
                ]),
            ]))
        }
        other => Err(format!("unknown method {other:?}")),
    }
}

/// (refresh minutes, refresh mode code) of a collection, for the "dspec" dictionary (2.2.4.2).
fn dspec_of(role: &dyn Role, name: &[u8]) -> (i64, i64) {
    let dict = role.config(name).unwrap_or(M::Dict(Vec::new()));
    match CollectionConfig::from_dict(&String::from_utf8_lossy(name), &dict) {
        Ok(c) => (c.refresh.round() as i64, c.refresh_mode.code()),
        Err(_) => (0, 0),
    }
}

/// CollectionAdd (2.2.9.3, 3.3.5).
fn collection_add(admin: &mut Admin, role: &mut dyn Role, p: &[Value], now: i64) -> R {
    let force = flag(p, 1, "Force")?;
    if !role.is_multinode() && role.is_distributed() && !force {
        return Err(
            "this node scheduler is part of a multinode setup: add the collection at \
                    the multinode scheduler, or pass Force=1"
                .into(),
        );
    }
    let specs = config::parse_xml(p_str(p, 0)).map_err(|e| format!("ConfigData: {e}"))?;
    if specs.is_empty() {
        return Err("ConfigData holds no DomainSpecification".into());
    }
    let mut done = Vec::new();
    for (name, partial) in specs {
        let existing = role
            .collections()
            .into_iter()
            .find(|(n, _)| *n == name.as_bytes());
        if existing
            .as_ref()
            .is_some_and(|(_, s)| *s == conf_state::REMOVING)
        {
            return Err(format!(
                "collection {name:?} is being deleted; add it again once removal completes"
            ));
        }
        let base = match &existing {
            Some(_) => role.config(name.as_bytes()).unwrap_or(M::Dict(Vec::new())),
            None => config::default_dict(),
        };
        let merged = config::merge(&base, &partial);
        CollectionConfig::from_dict(&name, &merged)
            .map_err(|e| format!("collection {name:?}: {e}"))?;
        role.put_collection(name.as_bytes(), merged, existing.is_none())?;
        done.push(format!(
            "{name} {}",
            if existing.is_some() {
                "updated"
            } else {
                "added"
            }
        ));
    }
    admin.sync_collections(role, now);
    admin.save_stats();
    Ok(cresult(true, format!("Collection {}", done.join(", "))))
}

/// Forwards SetLogLevel to every node on a thread of its own, then answers (2.2.8.6: before
/// the method returns). A node that cannot be reached makes the answer a fault naming it.
pub fn forward_log_level(nodes: Vec<(String, i64)>, level: i64, reply: Responder) {
    let spawned = std::thread::Builder::new()
        .name("admin-forward".into())
        .spawn(move || {
            let mut failed = Vec::new();
            for (host, port) in nodes {
                let addr = format!("{host}:{port}");
                let r = super::client::call(&addr, "SetLogLevel", &[Value::Int(level)]);
                match r {
                    Ok(Ok(Value::Int(1))) => {}
                    Ok(Ok(v)) => failed.push(format!("{addr} answered {v:?}")),
                    Ok(Err(f)) => failed.push(format!("{addr}: {}", f.message)),
                    Err(e) => failed.push(format!("{addr}: {e}")),
                }
            }
            if failed.is_empty() {
                reply.send(Ok(Value::Int(1)));
            } else {
                warn!("SetLogLevel not forwarded: {}", failed.join("; "));
                reply.send(Err(format!(
                    "log level set here, but not on: {}",
                    failed.join("; ")
                )));
            }
        });
    if let Err(e) = spawned {
        warn!("cannot start a thread to forward SetLogLevel: {e}");
    }
}

impl Admin {
    fn feeding_suspended(&self, role: &dyn Role, name: &[u8], dest: &[u8]) -> bool {
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
            self.cycles.remove(&g);
        }
    }

    /// Folds what the core counted since the last look into the statistics.
    pub fn absorb(&mut self, role: &dyn Role, now: i64) {
        self.sync_collections(role, now);
        for (name, state) in role.collections() {
            let cycle = role.refresh_cycle(&name);
            if self.cycles.get(&name).is_some_and(|&c| c < cycle) {
                self.stats.start_cycle(&name, cycle, now);
                self.stats.set(&name, "CrawlStarted", now as f64);
            }
            self.cycles.insert(name.clone(), cycle);
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
    }

    fn live(&self, role: &dyn Role, name: &[u8], state: i64, now: i64) -> Live {
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
            epoch: role.refresh_cycle(name),
            last_refresh: cycle_start,
            uptime: c.map_or(now, |c| c.added),
        }
    }
}
