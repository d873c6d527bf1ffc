//! [`call`], which runs an [`AdminCall`], and the methods of FSCADM 2.2.9 over a [`Role`], one
//! function each (those of 2.2.8 are in [`super::management`], those of 2.2.10 in
//! [`super::status`]). An `Err` is the fault string (2.2.7).

use std::borrow::Cow;
use std::collections::BTreeMap;

use crawlfleet_core::config::{self, CollectionConfig};
use crawlfleet_core::marshal::Value as M;
use crawlfleet_core::msg::types::{conf_state, refresh_options, uri_flags};
use crawlfleet_core::msg::{
    CollectionOnly, ConfRefresh, ConfSuspend, DeleteSite, DeleteUris, FeedingSuspend, Message,
    PreemptSite, Quarantine, ReprocessSite,
};
use crawlfleet_core::routing::crawl_site;
use crawlfleet_core::sched::start_uri_entry;
use crawlfleet_core::xmlrpc::Value;

use super::call::AdminCall;
use super::roles::{is_suspended, Role};
use super::Admin;
use super::{management, status};

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
    /// A call the node scheduler that crawls the site answers (CollectionGetSiteStatistics on
    /// a multinode scheduler): sent to it, its answer or fault relayed.
    Relay {
        /// The node's XML-RPC address, "host:port".
        node: String,
        /// The method.
        method: &'static str,
        /// Its arguments.
        params: Vec<Value>,
    },
}

pub(super) type R = Result<Value, String>;

/// A cresult (2.2.2.1).
pub(super) fn cresult(ok: bool, text: impl Into<String>) -> Value {
    Value::Array(vec![Value::Int(i64::from(ok)), Value::String(text.into())])
}

/// An int argument that MUST be 0 or 1.
fn flag(v: i64, what: &str) -> Result<bool, String> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("{what} must be 0 or 1, not {v}")),
    }
}

fn b(s: &str) -> Cow<'static, [u8]> {
    Cow::Owned(s.as_bytes().to_vec())
}

/// The state of an existing collection, or the fault for an unknown one.
pub(super) fn state_of(role: &dyn Role, name: &str) -> Result<i64, String> {
    role.collections()
        .into_iter()
        .find(|(n, _)| n == name.as_bytes())
        .map(|(_, s)| s)
        .ok_or_else(|| format!("no such collection: {name:?}"))
}

/// An existing collection that is not being deleted.
pub(super) fn live_collection(role: &dyn Role, name: &str) -> Result<i64, String> {
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
pub fn call(admin: &mut Admin, role: &mut dyn Role, call: AdminCall, now: i64) -> Outcome {
    use AdminCall::*;
    Outcome::Done(match call {
        // ---- 2.2.8 ---------------------------------------------------------------------------
        GetLogLevel => Ok(management::get_log_level(admin)),
        GetNodeSchedulerXmlRpcPorts => management::get_node_scheduler_xml_rpc_ports(role),
        GetSiteManagerNum => Ok(management::get_site_manager_num(role)),
        IsDistributed => Ok(Value::Int(i64::from(role.is_distributed()))),
        IsMultiNodeScheduler => Ok(Value::Int(i64::from(role.is_multinode()))),
        SetLogLevel { level } => return management::set_log_level(admin, role, level),
        // ---- 2.2.9 ---------------------------------------------------------------------------
        AddUris {
            collection,
            urgent,
            uris,
        } => add_uris(role, &collection, urgent, uris),
        AddUriFile {
            collection,
            urgent,
            file,
        } => add_uri_file(role, &collection, urgent, &file),
        CollectionAdd { config_data, force } => {
            collection_add(admin, role, &config_data, force, now)
        }
        CollectionDelete { collection, force } => {
            collection_delete(admin, role, &collection, force, now)
        }
        CollectionDeleteSite { collection, site } => {
            collection_delete_site(role, &collection, &site, now)
        }
        CollectionDeleteUris { collection, uris } => {
            collection_delete_uris(role, &collection, uris, now)
        }
        CollectionDeleteUriFile { collection, file } => {
            collection_delete_uri_file(role, &collection, &file, now)
        }
        CollectionGetConfigurationXml { collection } => {
            collection_get_configuration_xml(role, &collection)
        }
        CollectionGetList => Ok(collection_get_list(role)),
        CollectionGetSiteRoutingAddress { collection, site } => {
            collection_get_site_routing_address(role, &collection, &site)
        }
        CollectionPreemptSite { collection, site } => {
            collection_preempt_site(role, &collection, &site, now)
        }
        CollectionQuarantineSite {
            collection,
            site,
            time,
        } => collection_quarantine_site(role, &collection, &site, time, now),
        CollectionRefetch {
            collection,
            subcollection,
        } => collection_refetch(role, &collection, &subcollection, now),
        CollectionRefetchUri {
            collection,
            uri,
            refeed,
            site,
            immediately,
        } => collection_refetch_uri(role, &collection, &uri, [refeed, site, immediately]),
        CollectionReprocessSite {
            collection,
            destination,
            site,
        } => collection_reprocess_site(role, &collection, &destination, &site, now),
        CollectionReprocessSitePrefix {
            collection,
            site,
            prefix,
            destination,
        } => collection_reprocess_site_prefix(role, &collection, &site, &prefix, &destination, now),
        CollectionReprocessUri {
            collection,
            destination,
            uris,
        } => collection_reprocess_uri(role, &collection, &destination, &uris, now),
        CollectionResume { collection } => collection_resume(role, &collection, now),
        CollectionResumeFeeding {
            collection,
            destination,
        } => collection_resume_feeding(admin, role, &collection, &destination, now),
        CollectionSuspend { collection } => collection_suspend(role, &collection, now),
        CollectionSuspendFeeding {
            collection,
            destination,
        } => collection_suspend_feeding(admin, role, &collection, &destination, now),
        // ---- 2.2.10 --------------------------------------------------------------------------
        CollectionDisableRefreshOnly { collection } => {
            status::collection_disable_refresh_only(admin, role, &collection)
        }
        CollectionEnableRefreshOnly { collection } => {
            status::collection_enable_refresh_only(admin, role, &collection)
        }
        CollectionGetStatus { collection } => status::collection_get_status(role, &collection),
        CollectionGetSiteStatistics { collection, site } => {
            return status::collection_get_site_statistics(admin, role, &collection, &site, now)
        }
        CollectionGetStatistics { collection } => {
            status::collection_get_statistics(admin, role, &collection)
        }
        CollectionGetStatistics2 { collection } => {
            status::collection_get_statistics2(admin, role, &collection, now)
        }
        GetGlobalStatistics => Ok(status::get_global_statistics(admin, now)),
    })
}

// ---- 2.2.9 Crawl collection management ----------------------------------------------------

/// AddURIs (MS-FSCADM 2.2.9.1): queues absolute URIs, urgent ones at the front; the others
/// are skipped and named in the cresult.
pub fn add_uris(role: &mut dyn Role, coll: &str, urgent: i64, uris: Vec<String>) -> R {
    live_collection(role, coll)?;
    let urgent = flag(urgent, "Urgent")?;
    queue_uris(role, coll, urgent, &uris)
}

/// AddURIFile (MS-FSCADM 2.2.9.2): AddURIs with the lines of a UTF-8 file on this host.
pub fn add_uri_file(role: &mut dyn Role, coll: &str, urgent: i64, file: &str) -> R {
    live_collection(role, coll)?;
    let urgent = flag(urgent, "Urgent")?;
    let uris = read_uri_file(file)?;
    queue_uris(role, coll, urgent, &uris)
}

fn queue_uris(role: &mut dyn Role, coll: &str, urgent: bool, uris: &[String]) -> R {
    let mut queued = 0;
    let mut bad = Vec::new();
    for u in uris {
        if crawl_site(u.as_bytes()).is_none() {
            bad.push(u.as_str());
            continue;
        }
        let mut e = start_uri_entry(u.as_bytes());
        e.uri_flags = uri_flags::URIF_NOFLAGS;
        if role.add_uri(coll.as_bytes(), &e, urgent)? {
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

/// A node scheduler of a multinode setup changes its collections only with Force=1: they are
/// the multinode scheduler's to `verb`.
fn at_the_multinode_or_forced(role: &dyn Role, force: i64, verb: &str) -> Result<(), String> {
    let force = flag(force, "Force")?;
    if !role.is_multinode() && role.is_distributed() && !force {
        return Err(format!(
            "this node scheduler is part of a multinode setup: {verb} the collection at the \
             multinode scheduler, or pass Force=1"
        ));
    }
    Ok(())
}

/// CollectionAdd (MS-FSCADM 2.2.9.3, 3.3.5): adds or updates every collection of the
/// configuration XML, each merged over its current (or the default) configuration and
/// validated before anything is stored.
pub fn collection_add(
    admin: &mut Admin,
    role: &mut dyn Role,
    config_data: &str,
    force: i64,
    now: i64,
) -> R {
    at_the_multinode_or_forced(role, force, "add")?;
    // The same check as `crawlfleet config check` (unknown names, types, ranges, start URIs).
    let specs = config::check_xml(config_data).map_err(|f| {
        let lines: Vec<String> = f.iter().map(|f| format!("ConfigData: {f}")).collect();
        lines.join("\n")
    })?;
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

/// CollectionDelete (MS-FSCADM 2.2.9.4): on a node of a multinode setup only with Force=1.
pub fn collection_delete(
    admin: &mut Admin,
    role: &mut dyn Role,
    coll: &str,
    force: i64,
    now: i64,
) -> R {
    at_the_multinode_or_forced(role, force, "delete")?;
    live_collection(role, coll)?;
    let cb = coll.as_bytes();
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

/// CollectionDeleteSite (MS-FSCADM 2.2.9.5): CMD_UM_DELETE_SITE.
pub fn collection_delete_site(role: &mut dyn Role, coll: &str, site: &str, now: i64) -> R {
    live_collection(role, coll)?;
    role.apply(
        Message::CmdUmDeleteSite(DeleteSite {
            collection: b(coll),
            site: b(site),
        }),
        now,
    )?;
    Ok(cresult(true, format!("Deleting site {site} from {coll}")))
}

/// CollectionDeleteURIs (MS-FSCADM 2.2.9.6): CMD_UM_DELETE_URIS, the URIs grouped by site;
/// URIs that are not absolute are skipped.
pub fn collection_delete_uris(role: &mut dyn Role, coll: &str, uris: Vec<String>, now: i64) -> R {
    live_collection(role, coll)?;
    delete_uris(role, coll, &uris, now)
}

/// CollectionDeleteURIFile (MS-FSCADM 2.2.9.7): CollectionDeleteURIs with the lines of a UTF-8
/// file on this host.
pub fn collection_delete_uri_file(role: &mut dyn Role, coll: &str, file: &str, now: i64) -> R {
    live_collection(role, coll)?;
    let uris = read_uri_file(file)?;
    delete_uris(role, coll, &uris, now)
}

fn delete_uris(role: &mut dyn Role, coll: &str, uris: &[String], now: i64) -> R {
    let mut by_site: BTreeMap<String, Vec<Cow<'static, [u8]>>> = BTreeMap::new();
    let mut bad = 0;
    for u in uris {
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

/// CollectionGetConfigurationXML (MS-FSCADM 2.2.9.8): the configuration as CrawlerConfig XML.
pub fn collection_get_configuration_xml(role: &dyn Role, coll: &str) -> R {
    state_of(role, coll)?;
    let dict = role.config(coll.as_bytes()).unwrap_or(M::Dict(Vec::new()));
    config::to_xml(coll, &dict)
        .map(Value::String)
        .map_err(|e| format!("configuration of {coll:?} cannot be written as XML: {e}"))
}

/// CollectionGetList (MS-FSCADM 2.2.9.9): every collection's name.
pub fn collection_get_list(role: &dyn Role) -> Value {
    Value::Array(
        role.collections()
            .into_iter()
            .map(|(n, _)| Value::String(String::from_utf8_lossy(&n).into_owned()))
            .collect(),
    )
}

/// CollectionGetSiteRoutingAddress (MS-FSCADM 2.2.9.10): the node a site is routed to.
pub fn collection_get_site_routing_address(role: &dyn Role, coll: &str, site: &str) -> R {
    state_of(role, coll)?;
    Ok(match role.route(coll.as_bytes(), site) {
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

/// CollectionPreemptSite (MS-FSCADM 2.2.9.11): CMD_ADM_PREEMPT_SITE; crawling resumes later,
/// so the site goes back to the front of the queue.
pub fn collection_preempt_site(role: &mut dyn Role, coll: &str, site: &str, now: i64) -> R {
    live_collection(role, coll)?;
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

/// CollectionQuarantineSite (MS-FSCADM 2.2.9.12): CMD_UM_QUARANTINE_SITE for `time` seconds.
pub fn collection_quarantine_site(
    role: &mut dyn Role,
    coll: &str,
    site: &str,
    time: i64,
    now: i64,
) -> R {
    live_collection(role, coll)?;
    if time < 0 {
        return Err(format!("Time must not be negative, not {time}"));
    }
    role.apply(
        Message::CmdUmQuarantineSite(Quarantine {
            collection: b(coll),
            site: b(site),
            seconds: time,
        }),
        now,
    )?;
    Ok(cresult(
        true,
        format!("Quarantined site {site} in {coll} for {time} s"),
    ))
}

/// CollectionRefetch (MS-FSCADM 2.2.9.13): CMD_ADM_CONF_REFRESH of the collection, or of one
/// subcollection it has.
pub fn collection_refetch(role: &mut dyn Role, coll: &str, sub: &str, now: i64) -> R {
    live_collection(role, coll)?;
    if !sub.is_empty() {
        let dict = role.config(coll.as_bytes()).unwrap_or(M::Dict(Vec::new()));
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

/// CollectionRefetchURI (MS-FSCADM 2.2.9.14): queues the URI forced, with the refeed and site
/// flags, urgent when Immediately; `flags` are Refeed, Site and Immediately (each 0 or 1).
pub fn collection_refetch_uri(role: &mut dyn Role, coll: &str, uri: &str, flags: [i64; 3]) -> R {
    live_collection(role, coll)?;
    let refeed = flag(flags[0], "Refeed")?;
    let site = flag(flags[1], "Site")?;
    let urgent = flag(flags[2], "Immediately")?;
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
    role.add_uri(coll.as_bytes(), &e, urgent)?;
    Ok(cresult(true, format!("Refetch of {uri} scheduled")))
}

/// One CMD_UM_REPROCESS_SITE: site, URI prefix (or exact URI), destination.
struct Reprocess<'a> {
    site: Cow<'a, str>,
    prefix: &'a str,
    destination: &'a str,
    exact: bool,
}

/// CollectionReprocessSite (MS-FSCADM 2.2.9.15): CMD_UM_REPROCESS_SITE of the whole site.
pub fn collection_reprocess_site(
    role: &mut dyn Role,
    coll: &str,
    destination: &str,
    site: &str,
    now: i64,
) -> R {
    live_collection(role, coll)?;
    let job = Reprocess {
        site: site.into(),
        prefix: "",
        destination,
        exact: false,
    };
    reprocess(role, coll, vec![job], now)
}

/// CollectionReprocessSitePrefix (MS-FSCADM 2.2.9.16): CMD_UM_REPROCESS_SITE of the URIs of
/// the site under a prefix.
pub fn collection_reprocess_site_prefix(
    role: &mut dyn Role,
    coll: &str,
    site: &str,
    prefix: &str,
    destination: &str,
    now: i64,
) -> R {
    live_collection(role, coll)?;
    let job = Reprocess {
        site: site.into(),
        prefix,
        destination,
        exact: false,
    };
    reprocess(role, coll, vec![job], now)
}

/// CollectionReprocessURI (MS-FSCADM 2.2.9.17): CMD_UM_REPROCESS_SITE of each URI; URIs that
/// are not absolute are skipped, the rest processed.
pub fn collection_reprocess_uri(
    role: &mut dyn Role,
    coll: &str,
    destination: &str,
    uris: &[String],
    now: i64,
) -> R {
    live_collection(role, coll)?;
    let jobs = uris
        .iter()
        .filter_map(|u| {
            crawl_site(u.as_bytes()).map(|site| Reprocess {
                site: site.into(),
                prefix: u,
                destination,
                exact: true,
            })
        })
        .collect();
    reprocess(role, coll, jobs, now)
}

fn reprocess(role: &mut dyn Role, coll: &str, jobs: Vec<Reprocess<'_>>, now: i64) -> R {
    let n = jobs.len();
    for job in jobs {
        role.apply(
            Message::CmdUmReprocessSite(ReprocessSite {
                collection: b(coll),
                site: b(&job.site),
                prefix: b(job.prefix),
                destination: (!job.destination.is_empty()).then(|| b(job.destination)),
                exact: job.exact,
            }),
            now,
        )?;
    }
    Ok(cresult(true, format!("Reprocessing {n} item(s) of {coll}")))
}

/// CollectionResume (MS-FSCADM 2.2.9.18): CMD_ADM_CONF_RESUME; a fault when not suspended.
pub fn collection_resume(role: &mut dyn Role, coll: &str, now: i64) -> R {
    suspend_or_resume(role, coll, false, now)
}

/// CollectionSuspend (MS-FSCADM 2.2.9.20): CMD_ADM_CONF_SUSPEND; a fault when suspended
/// already.
pub fn collection_suspend(role: &mut dyn Role, coll: &str, now: i64) -> R {
    suspend_or_resume(role, coll, true, now)
}

fn suspend_or_resume(role: &mut dyn Role, coll: &str, suspend: bool, now: i64) -> R {
    let state = live_collection(role, coll)?;
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

/// CollectionResumeFeeding (MS-FSCADM 2.2.9.19): CMD_ADM_CONF_FEEDING_SUSPEND off, for one
/// destination or ("") all; a fault when not suspended.
pub fn collection_resume_feeding(
    admin: &mut Admin,
    role: &mut dyn Role,
    coll: &str,
    dest: &str,
    now: i64,
) -> R {
    feeding(admin, role, coll, dest, false, now)
}

/// CollectionSuspendFeeding (MS-FSCADM 2.2.9.21): CMD_ADM_CONF_FEEDING_SUSPEND on, for one
/// destination or ("") all; a fault when suspended already.
pub fn collection_suspend_feeding(
    admin: &mut Admin,
    role: &mut dyn Role,
    coll: &str,
    dest: &str,
    now: i64,
) -> R {
    feeding(admin, role, coll, dest, true, now)
}

fn feeding(
    admin: &mut Admin,
    role: &mut dyn Role,
    coll: &str,
    dest: &str,
    suspend: bool,
    now: i64,
) -> R {
    live_collection(role, coll)?;
    let cb = coll.as_bytes();
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
