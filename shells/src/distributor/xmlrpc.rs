//! The distributor's administrative interface (`--admin HOST:PORT`): XML-RPC over HTTP/1.1
//! `POST /RPC2`, served by the schedulers' server ([`crate::admin::server`], with its port
//! limits) with the distributor's own methods:
//!
//! - `search(string collection, string query, int limit)` -> array of
//!   `struct {uri: string, score: double, title: string, snippet: string}`, best first: the
//!   full-text index of a content collection this distributor holds (as of its last commit;
//!   `crawlfleet search` answers the same from the data directory). `limit` is 1-1000. A
//!   collection the distributor does not hold is a fault `unknown_collection: ...`; one
//!   with nothing fed yet answers an empty array.
//!
//! Any other method, or arguments of other types, is a fault (faultCode 1).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crawlfleet_core::distributor::fulltext::{self, Hit, Reader, Searcher, MAX_LIMIT};
use crawlfleet_core::xmlrpc::{Limits, Value};
use log::info;

use super::Shared;
use crate::admin::server::{self, AdminMsg};

/// The full-text indexes the distributor writes, by collection, for searches to share their
/// readers (they see each commit at once). A collection not here is searched from its
/// directory.
pub type Readers = Arc<RwLock<HashMap<String, Reader>>>;

/// A call of the distributor's administrative interface.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `search(collection, query, limit)`.
    Search {
        /// The content collection.
        collection: String,
        /// The query (see `fulltext::FullText::search`).
        query: String,
        /// Most hits, 1-[`MAX_LIMIT`].
        limit: usize,
    },
}

/// Reads an XML-RPC call into a [`Call`]; `Err` is the fault's text.
pub fn parse(method: &str, params: &[Value]) -> Result<Call, String> {
    match (method, params) {
        ("search", [Value::String(c), Value::String(q), Value::Int(n)]) => {
            let limit = usize::try_from(*n)
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| format!("search: limit {n} is not 1-{MAX_LIMIT}"))?;
            Ok(Call::Search {
                collection: c.clone(),
                query: q.clone(),
                limit,
            })
        }
        ("search", _) => Err("search(string collection, string query, int limit)".into()),
        (m, _) => Err(format!(
            "unknown method {m:?}: the distributor serves search"
        )),
    }
}

/// The XML-RPC value of a hit.
fn hit_value(h: Hit) -> Value {
    Value::Struct(vec![
        ("uri".into(), Value::String(h.uri)),
        ("score".into(), Value::Double(f64::from(h.score))),
        ("title".into(), Value::String(h.title)),
        ("snippet".into(), Value::String(h.snippet)),
    ])
}

/// What answering needs.
struct Ctx {
    shared: Arc<Mutex<Shared>>,
    readers: Readers,
    data_dir: PathBuf,
}

impl Ctx {
    fn call(&self, call: Call) -> Result<Value, String> {
        let Call::Search {
            collection,
            query,
            limit,
        } = call;
        let held = {
            let sh = self.shared.lock().map_err(|_| "the distributor stopped")?;
            let held = sh.node.collections().any(|c| c == collection);
            held
        };
        if !held {
            return Err(format!(
                "unknown_collection: this distributor does not hold {collection:?}"
            ));
        }
        let shared = self
            .readers
            .read()
            .ok()
            .and_then(|r| r.get(&collection).map(|r| r.search(&query, limit)));
        let hits = match shared {
            Some(r) => r,
            None => {
                let dir = fulltext::dir(&self.data_dir, &collection);
                if !dir.join("meta.json").exists() {
                    return Ok(Value::Array(Vec::new()));
                }
                Searcher::open(&dir).and_then(|s| s.search(&query, limit))
            }
        };
        let hits = hits.map_err(|e| format!("search: {e}"))?;
        Ok(Value::Array(hits.into_iter().map(hit_value).collect()))
    }
}

/// Starts the administrative interface on `addr` with its own thread answering calls; the
/// address it listens on.
pub(crate) fn start(
    addr: SocketAddr,
    max_body: usize,
    shared: Arc<Mutex<Shared>>,
    readers: Readers,
    data_dir: PathBuf,
    auth: crate::admin::auth::AdminAuth,
) -> Result<SocketAddr, String> {
    let limits = Limits {
        max_body,
        ..Limits::default()
    };
    // No statistics to merge: the tick is only the server's.
    let tick = Duration::from_secs(3600);
    let metrics = {
        let shared = Arc::clone(&shared);
        crate::metrics::MetricsRoute::new(move |m| {
            if let Ok(s) = shared.lock() {
                crate::metrics::roles::distributor(&s.node, s.role, m);
            }
        })
    };
    auth.check_listen(addr)?;
    let srv = server::spawn_with_route(addr, tick, limits, parse, Arc::new(metrics), auth)
        .map_err(|e| format!("cannot listen on {addr} for the administrative interface: {e}"))?;
    let ctx = Ctx {
        shared,
        readers,
        data_dir,
    };
    let calls = srv.calls;
    std::thread::Builder::new()
        .name("distributor-admin".into())
        .spawn(move || {
            for msg in calls {
                if let AdminMsg::Call { call, reply } = msg {
                    let r = ctx.call(call);
                    if let Err(e) = &r {
                        info!("admin: fault: {e}");
                    }
                    reply.send(r);
                }
            }
        })
        .map_err(|e| format!("cannot start the administrative thread: {e}"))?;
    Ok(srv.addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_checks_the_arguments() {
        let s = |x: &str| Value::String(x.into());
        assert_eq!(
            parse("search", &[s("web"), s("q"), Value::Int(5)]),
            Ok(Call::Search {
                collection: "web".into(),
                query: "q".into(),
                limit: 5
            })
        );
        for bad in [0, -1, MAX_LIMIT as i64 + 1] {
            assert!(parse("search", &[s("web"), s("q"), Value::Int(bad)]).is_err());
        }
        assert!(parse("search", &[s("web"), s("q")]).is_err());
        assert!(parse("search", &[s("web"), Value::Int(1), Value::Int(1)]).is_err());
        assert!(parse("CollectionGetList", &[]).is_err());
    }
}
