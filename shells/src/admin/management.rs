//! The web crawler management methods of FSCADM 2.2.8 over a [`Role`], one function each.

use crawlfleet_core::xmlrpc::Value;
use log::{info, warn};

use super::methods::{Outcome, R};
use super::roles::Role;
use super::{level_of, log_level, mask_of, Admin, Responder};

/// GetLogLevel (MS-FSCADM 2.2.8.1): the mask SetLogLevel set, or the startup level's.
pub fn get_log_level(admin: &Admin) -> Value {
    Value::Int(match admin.state.log_level {
        0 => mask_of(log::max_level()),
        l => l,
    })
}

/// GetNodeSchedulerXmlRpcPorts (MS-FSCADM 2.2.8.2): the nodes' XML-RPC addresses, on a
/// multinode scheduler with nodes.
pub fn get_node_scheduler_xml_rpc_ports(role: &dyn Role) -> R {
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

/// GetSiteManagerNum (MS-FSCADM 2.2.8.3): one crawl engine on a node, none on a multinode
/// scheduler.
pub fn get_site_manager_num(role: &dyn Role) -> Value {
    Value::Int(if role.is_multinode() { 0 } else { 1 })
}

/// SetLogLevel (MS-FSCADM 2.2.8.6; the levels of 2.2.3.5): set here, persisted, and on a
/// multinode scheduler forwarded to every node before the answer.
pub fn set_log_level(admin: &mut Admin, role: &dyn Role, level: i64) -> Outcome {
    if level <= 0 || level & !log_level::ALL != 0 {
        // 2.2.8.6: "MUST return 1 if the method succeeds, 0 otherwise" (not a fault); the
        // level stays as it was.
        warn!("SetLogLevel({level:#x}): not a mask of the FSCADM 2.2.3.5 levels; unchanged");
        return Outcome::Done(Ok(Value::Int(0)));
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
    Outcome::Done(Ok(Value::Int(1)))
}

/// Forwards SetLogLevel to every node on a thread of its own, then answers (2.2.8.6: before
/// the method returns). A node that cannot be reached makes the answer a fault naming it. The
/// calls carry `token`, the scheduler's own admin token (the nodes of a cluster share it).
pub fn forward_log_level(
    nodes: Vec<(String, i64)>,
    level: i64,
    reply: Responder,
    token: Option<String>,
) {
    let spawned = std::thread::Builder::new()
        .name("admin-forward".into())
        .spawn(move || {
            let mut failed = Vec::new();
            for (host, port) in nodes {
                let addr = format!("{host}:{port}");
                let level = [Value::Int(level)];
                let r = super::client::call_with(&addr, "SetLogLevel", &level, token.as_deref());
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

/// Sends one call to a node scheduler on a thread of its own and answers with what the node
/// answered: its value, or its fault's text; a node that cannot be reached makes the answer a
/// fault naming it.
pub fn relay(
    node: String,
    method: &'static str,
    params: Vec<Value>,
    reply: Responder,
    token: Option<String>,
) {
    let spawned = std::thread::Builder::new()
        .name("admin-relay".into())
        .spawn(move || {
            let r = match super::client::call_with(&node, method, &params, token.as_deref()) {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(f)) => Err(f.message),
                Err(e) => {
                    warn!("{method} not relayed to node scheduler {node}: {e}");
                    Err(format!("node scheduler {node} did not answer: {e}"))
                }
            };
            reply.send(r);
        });
    if let Err(e) = spawned {
        warn!("cannot start a thread to relay {method}: {e}");
    }
}
