//! `crawlfleet distributors --nameserver HOST:PORT [--json]`: the master (who is bound as
//! session_factory, MS-FSCDFT 3.3.3), the dispatcher nodes registered with it (its
//! `list_dispatchers`, 3.1.1), and per distributor bound at the name server its role,
//! collections, sessions and load (its `get_status`).

use std::process::ExitCode;
use std::time::Duration;

use crawlfleet_core::distributor::{
    DISPATCHER_NAME, DISPATCHER_NODE, MASTER_DISPATCHER, SESSION_FACTORY,
};
use crawlfleet_core::marshal::{dict_get, Value};
use crawlfleet_core::nameserver::Aor;
use serde_json::{json, Value as Json};

use super::worker::Net;
use crate::cli::DistributorsArgs;
use crate::nsclient::{ClientError, NsClient};

/// Runs the command.
pub fn run(args: &DistributorsArgs) -> Result<ExitCode, String> {
    let addr = args.conn.nameserver;
    let timeout = Duration::from_secs_f64(args.conn.timeout.max(0.1));
    let mut ns = NsClient::connect(addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    let failed = |e: ClientError| format!("{addr}: {e}");
    let bindings = ns.list().map_err(failed)?;
    let bound = |t: (&str, &str)| {
        bindings.iter().find(|a| {
            a.name == DISPATCHER_NAME && a.interface_type == t.0 && a.interface_version == t.1
        })
    };
    let factory = bound(SESSION_FACTORY).cloned();
    let mut net = Net::for_status(addr, timeout);
    let registered: Option<Vec<Json>> = bound(MASTER_DISPATCHER).and_then(|md| {
        net.call(md, "list_dispatchers", Value::Dict(Vec::new()))
            .ok()
            .map(|v| json_of(&v))
            .and_then(|j| j.as_array().cloned())
    });
    let prefix = format!("{DISPATCHER_NAME}/");
    let mut distributors = Vec::new();
    for a in bindings
        .iter()
        .filter(|a| a.name.starts_with(&prefix) && a.interface_type == DISPATCHER_NODE.0)
    {
        let node_id: Option<i64> = a.name[prefix.len()..].parse().ok();
        let mut entry = json!({
            "node_id": node_id, "object_id": a.object_id, "host": a.host, "port": a.port,
        });
        match net.call(a, "get_status", Value::Dict(Vec::new())) {
            Ok(v) => {
                for k in ["role", "collections", "sessions", "load", "indexed"] {
                    if let Value::Dict(d) = &v {
                        entry[k] = dict_get(d, k.as_bytes()).map_or(Json::Null, json_of);
                    }
                }
            }
            Err(e) => entry["error"] = json!(e.to_string()),
        }
        distributors.push(entry);
    }
    let master = factory.as_ref().map(aor_json);
    let out = json!({
        "master": master,
        "registered": registered,
        "distributors": distributors,
    });
    if args.json {
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    match &factory {
        Some(f) => println!("master\t{}\t{}:{}", f.object_id, f.host, f.port),
        None => println!("master\tnone bound"),
    }
    match &registered {
        Some(r) => {
            let ids: Vec<String> = r.iter().map(|d| d["node_id"].to_string()).collect();
            println!("registered\t{}", ids.join(" "));
        }
        None => println!("registered\tunknown (master_dispatcher does not answer)"),
    }
    for d in &distributors {
        match d.get("error") {
            Some(e) => println!(
                "node {}\t{}:{}\tunreachable: {e}",
                d["node_id"], d["host"], d["port"]
            ),
            None => println!(
                "node {}\t{}\tload {}\t{} session(s)\tcollections {}",
                d["node_id"],
                d["role"].as_str().unwrap_or("?"),
                d["load"],
                d["sessions"].as_array().map_or(0, Vec::len),
                d["collections"]
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn aor_json(a: &Aor) -> Json {
    json!({
        "name": a.name, "object_id": a.object_id, "host": a.host, "port": a.port,
        "interface_type": a.interface_type, "interface_version": a.interface_version,
    })
}

/// A marshal value as JSON (strings as text).
fn json_of(v: &Value<'_>) -> Json {
    match v {
        Value::None => Json::Null,
        Value::Bool(b) => json!(b),
        Value::Int(i, _) => json!(i),
        Value::Float(f) => json!(f),
        Value::Bytes(b, _) => json!(String::from_utf8_lossy(b)),
        Value::List(items) | Value::Tuple(items) => {
            Json::Array(items.iter().map(json_of).collect())
        }
        Value::Dict(d) => Json::Object(
            d.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Value::Bytes(b, _) => String::from_utf8_lossy(b).into_owned(),
                        other => format!("{other:?}"),
                    };
                    (key, json_of(v))
                })
                .collect(),
        ),
        other => json!(format!("{other:?}")),
    }
}
