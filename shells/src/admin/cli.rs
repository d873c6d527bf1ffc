//! `crawlfleet admin --server HOST:PORT <method> [args] [--json]`: one FSCADM method call.
//!
//! The method is named as in the spec (`CollectionGetList`) or in kebab case
//! (`collection-get-list`). Arguments follow the method's parameters: ints as numbers, strings
//! as they are (`@path` reads a local file, for CollectionAdd's ConfigData), and an array of
//! URIs as every remaining argument. Output is a readable table or summary, or with `--json`
//! the result as JSON (marshalled statistics decoded). A fault, a failed cresult or a transport
//! error prints its text on stderr and exits non-zero.

use std::process::ExitCode;

use crawlfleet_core::marshal::{self, Limits};
use crawlfleet_core::xmlrpc::{from_marshal, Value};
use serde_json::json;

use super::{client, Ty, METHODS};
use crate::cli::AdminArgs;

fn norm(s: &str) -> String {
    s.chars()
        .filter(|c| *c != '-' && *c != '_')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The FSCADM (or introspection) method a command names.
pub fn method_of(command: &str) -> Option<(&'static str, &'static [Ty])> {
    let n = norm(command);
    METHODS
        .iter()
        .chain(super::introspect::SYSTEM_METHODS.iter())
        .find(|(m, _)| norm(m) == n)
        .copied()
}

/// The address `crawlfleet admin` calls: --server, else the admin.addr of --data-dir, else
/// that of `up`'s default data directory when a cluster runs there, else the scheduler's
/// default administrative address.
fn server_of(args: &AdminArgs) -> Result<String, String> {
    if let Some(s) = &args.server {
        return Ok(s.clone());
    }
    if let Some(d) = &args.data_dir {
        return crate::up::layout::admin_addr(d).map(|a| a.to_string());
    }
    // The default data directory's cluster, when something answers at its address.
    let default = crate::up::layout::default_dir();
    let running = |a: &std::net::SocketAddr| {
        std::net::TcpStream::connect_timeout(a, std::time::Duration::from_millis(500)).is_ok()
    };
    match crate::up::layout::admin_addr(&default) {
        Ok(a) if running(&a) => Ok(a.to_string()),
        _ => Ok("127.0.0.1:14101".into()),
    }
}

/// The token `crawlfleet admin` sends: --token-file, else the admin.token beside the
/// admin.addr of --data-dir (or of `up`'s default data directory when --server is not given),
/// else none.
fn token_of(args: &AdminArgs) -> Result<Option<String>, String> {
    let read = |p: &std::path::Path| std::fs::read_to_string(p).map(|t| t.trim().to_string());
    if let Some(f) = &args.token_file {
        return read(f)
            .map(Some)
            .map_err(|e| format!("--token-file {}: {e}", f.display()));
    }
    let dir = match (&args.data_dir, &args.server) {
        (Some(d), _) => d.clone(),
        (None, None) => crate::up::layout::default_dir(),
        (None, Some(_)) => return Ok(None),
    };
    let path = dir.join(crate::up::layout::ADMIN_TOKEN);
    match read(&path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The parameters for `sig` from command-line words.
pub fn params_of(method: &str, sig: &[Ty], args: &[String]) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let mut rest = args.iter();
    for (i, ty) in sig.iter().enumerate() {
        let v = match ty {
            Ty::Strings => Value::Array(rest.by_ref().map(|s| Value::String(s.clone())).collect()),
            _ => {
                let Some(a) = rest.next() else {
                    let names: Vec<&str> = sig
                        .iter()
                        .map(|t| match t {
                            Ty::Int => "INT",
                            Ty::Str => "STRING",
                            Ty::Strings => "URI...",
                        })
                        .collect();
                    return Err(format!(
                        "{method} takes {} argument(s): {}",
                        sig.len(),
                        names.join(" ")
                    ));
                };
                match ty {
                    Ty::Int => Value::Int(a.parse().map_err(|_| {
                        format!("{method}: argument {} must be an integer, not {a:?}", i + 1)
                    })?),
                    _ => match a.strip_prefix('@') {
                        Some(path) => Value::String(
                            std::fs::read_to_string(path)
                                .map_err(|e| format!("cannot read {path}: {e}"))?,
                        ),
                        None => Value::String(a.clone()),
                    },
                }
            }
        };
        out.push(v);
    }
    if rest.next().is_some() {
        return Err(format!("{method} takes {} argument(s)", sig.len()));
    }
    Ok(out)
}

/// JSON for an XML-RPC value (base64 as a string of its bytes, in base64).
pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Int(i) => json!(i),
        Value::Bool(b) => json!(b),
        Value::String(s) | Value::DateTime(s) => json!(s),
        Value::Double(d) => json!(d),
        Value::Base64(b) => {
            use base64::Engine;
            json!(base64::engine::general_purpose::STANDARD.encode(b))
        }
        Value::Array(a) => serde_json::Value::Array(a.iter().map(to_json).collect()),
        Value::Struct(m) => {
            serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

/// Runs `crawlfleet admin`.
pub fn run(args: &AdminArgs) -> Result<ExitCode, String> {
    let Some((method, sig)) = method_of(&args.command) else {
        let all: Vec<&str> = METHODS.iter().map(|(m, _)| *m).collect();
        let close =
            crawlfleet_core::config::schema::did_you_mean(&args.command, all.iter().copied())
                .map(|m| format!(" (did you mean {m}?)"))
                .unwrap_or_default();
        return Err(format!(
            "unknown command {:?}{close}; the methods are: {}",
            args.command,
            all.join(", ")
        ));
    };
    let params = params_of(method, sig, &args.args)?;
    let server = server_of(args)?;
    let token = token_of(args)?;
    let tls = args
        .tls_ca
        .as_deref()
        .map(client::tls_trusting)
        .transpose()?;
    let result = client::call_over(&server, method, &params, token.as_deref(), tls.as_ref())
        .map_err(|e| e.to_string())?;
    let v = match result {
        Ok(v) => v,
        Err(f) => {
            eprintln!("{method}: {}", f.message);
            return Ok(ExitCode::FAILURE);
        }
    };
    // Marshalled statistics (2.2.10.4, 2.2.10.5) are decoded for display.
    let shown = match &v {
        Value::Base64(bytes) => {
            let limits = Limits {
                max_depth: 32,
                max_size: bytes.len(),
            };
            marshal::from_bytes(bytes, &limits)
                .map(|m| from_marshal(&m))
                .map_err(|e| format!("{method}: statistics are not marshal data: {e}"))?
        }
        other => other.clone(),
    };
    let failed = matches!(shown.as_array(), Some([Value::Int(r), ..]) if *r < 1);
    if args.json {
        println!("{}", to_json(&shown));
    } else {
        print!("{}", human(method, &shown));
    }
    if failed {
        if let Some([_, Value::String(why)]) = shown.as_array() {
            eprintln!("{method}: {why}");
        }
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) | Value::DateTime(s) => s.clone(),
        Value::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => format!("{d:.0}"),
        Value::Double(d) => format!("{d:.3}"),
        Value::Base64(b) => format!("<{} bytes>", b.len()),
        Value::Array(a) => a.iter().map(scalar).collect::<Vec<_>>().join(" "),
        Value::Struct(m) => m
            .iter()
            .map(|(k, v)| format!("{k}={}", scalar(v)))
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// The attributes a person looks at first in a flattened collection structure.
const SUMMARY: [&str; 14] = [
    "Status",
    "Feeding",
    "CrawlMode",
    "ActiveSites",
    "Processed",
    "Downloaded",
    "Stored",
    "Modified",
    "Deleted",
    "DocumentStore",
    "DocRate",
    "DataRateIn",
    "HTTPResponse",
    "Progress",
];

/// A readable rendering of a result.
pub fn human(method: &str, v: &Value) -> String {
    let mut out = String::new();
    match (method, v) {
        ("CollectionGetStatistics2", Value::Array(r))
            if matches!(r.get(1), Some(Value::Struct(_))) =>
        {
            let cycles = match &r[1] {
                Value::Struct(m) => m.clone(),
                _ => Vec::new(),
            };
            out.push_str(&format!("{:<16}", "attribute"));
            for (name, _) in &cycles {
                out.push_str(&format!(" {name:>24}"));
            }
            out.push('\n');
            for attr in SUMMARY {
                out.push_str(&format!("{attr:<16}"));
                for (_, c) in &cycles {
                    let cell = c.get(attr).map(scalar).unwrap_or_default();
                    out.push_str(&format!(" {cell:>24}"));
                }
                out.push('\n');
            }
        }
        ("GetGlobalStatistics", Value::Array(r)) if matches!(r.get(1), Some(Value::Struct(_))) => {
            if let Value::Struct(m) = &r[1] {
                for (part, d) in m {
                    out.push_str(&format!("{part}:\n"));
                    if let Value::Struct(attrs) = d {
                        for (k, v) in attrs {
                            out.push_str(&format!("  {k:<16} {}\n", scalar(v)));
                        }
                    }
                }
            }
        }
        ("CollectionGetStatistics" | "CollectionGetSiteStatistics", Value::Struct(m)) => {
            for (name, t) in m {
                if name == "dspec" {
                    continue;
                }
                // (delta, cycles): show the complete cycle's numbers.
                let Some(cycles) = t.as_array().and_then(|t| t.get(1)) else {
                    continue;
                };
                let n = match cycles {
                    Value::Struct(c) => c.len().saturating_sub(1),
                    _ => 0,
                };
                out.push_str(&format!("{name}: {n} cycle(s) retained\n"));
                let Some(complete) = cycles.get(crawlfleet_core::stats::COMPLETE) else {
                    continue;
                };
                for kind in ["continuous", "discrete", "multidiscrete", "histogram"] {
                    for item in complete.get(kind).and_then(Value::as_array).unwrap_or(&[]) {
                        if let Some([Value::String(attr), val]) = item.as_array() {
                            let cur = val.as_array().and_then(|a| a.first()).map(scalar);
                            out.push_str(&format!("  {attr:<18} {}\n", cur.unwrap_or_default()));
                        }
                    }
                }
            }
        }
        ("GetNodeSchedulerXmlRpcPorts", Value::Array(nodes)) => {
            out.push_str(&format!("{:<40} {:>6}\n", "host", "port"));
            for n in nodes {
                if let Some([h, p]) = n.as_array() {
                    out.push_str(&format!("{:<40} {:>6}\n", scalar(h), scalar(p)));
                }
            }
        }
        (_, Value::Array(r)) if matches!(r.as_slice(), [Value::Int(_), _]) => {
            // A cresult: its text (or the routing address).
            out.push_str(&format!("{}\n", scalar(&r[1])));
        }
        (_, Value::Array(items)) => {
            for i in items {
                out.push_str(&format!("{}\n", scalar(i)));
            }
        }
        (_, Value::String(s)) => {
            out.push_str(s);
            if !s.ends_with('\n') {
                out.push('\n');
            }
        }
        (_, other) => out.push_str(&format!("{}\n", scalar(other))),
    }
    out
}
