//! `crawlfleet distributor add-collection`: calls a distributor's `add_collection`
//! (docs/distributor.md), found by its address or by its node id through the name server.

use std::time::Duration;

use crawlfleet_core::distributor::{dispatcher_node_name, DISPATCHER_NODE, NODE_ALIAS};
use crawlfleet_core::marshal::Value;
use crawlfleet_core::nameserver::Triple;

use crate::cli::DistributorCommand;
use crate::nsclient::NsClient;

/// Runs a client command.
pub(crate) fn run(cmd: &DistributorCommand) -> Result<(), String> {
    let DistributorCommand::AddCollection {
        distributor,
        nameserver,
        node_id,
        timeout,
        name,
    } = cmd;
    let timeout = Duration::from_secs_f64(timeout.max(0.1));
    let (addr, object) = match (distributor, nameserver, node_id) {
        (Some(addr), _, _) => (*addr, NODE_ALIAS.to_owned()),
        (None, Some(ns), Some(node)) => {
            let mut c = NsClient::connect(*ns, timeout).map_err(|e| format!("{ns}: {e}"))?;
            let aor = c
                .resolve(Triple {
                    name: dispatcher_node_name(*node),
                    interface_type: DISPATCHER_NODE.0.to_owned(),
                    interface_version: DISPATCHER_NODE.1.to_owned(),
                })
                .map_err(|e| format!("{ns}: distributor {node}: {e}"))?;
            let addr = std::net::ToSocketAddrs::to_socket_addrs(&(aor.host.as_str(), aor.port))
                .ok()
                .and_then(|mut a| a.next())
                .ok_or_else(|| format!("{}:{} has no address", aor.host, aor.port))?;
            (addr, aor.object_id)
        }
        _ => return Err("add-collection: --distributor, or --nameserver and --node-id".into()),
    };
    let mut c = NsClient::connect(addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    let args = Value::Dict(vec![(
        Value::bytes(b"collection"),
        Value::owned_bytes(name.as_bytes().to_vec()),
    )]);
    c.call_method(&object, "add_collection", args)
        .map_err(|e| format!("{addr}: add_collection {name:?}: {e}"))?;
    println!("{addr}: holds content collection {name}");
    Ok(())
}
