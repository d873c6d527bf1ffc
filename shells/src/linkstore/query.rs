//! `crawlfleet links`: reads the link store's data back, by CIDHASH.
//!
//! The command builds a [`LinkIndex`] from the logs under the data directory (every
//! collection, or the one `--collection` names) and answers one query: the in-links of a URL
//! (documents linking to it, with their anchor texts), its anchor texts counted, its out-links,
//! or its equivalence class. It reads the logs while a store may be appending to them: a
//! record still being written is simply not seen.

use std::io::Write;

use crawlfleet_core::links::{cidhash, stored_logs, Application, LinkIndex};
use serde_json::{json, Value as Json};

use crate::cli::{LinksArgs, LinksQuery};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn opt_text(b: Option<&[u8]>) -> Json {
    b.map_or(Json::Null, |b| Json::String(text(b)))
}

/// Builds the index of the logs `args` select.
pub fn build_index(args: &LinksArgs) -> Result<LinkIndex, String> {
    let logs = stored_logs(&args.data_dir).map_err(|e| e.to_string())?;
    let mut b = LinkIndex::builder();
    let mut used = 0;
    for (app, coll, path) in logs {
        if args
            .collection
            .as_deref()
            .is_some_and(|c| c.as_bytes() != coll)
        {
            continue;
        }
        log::debug!("reading {} ({app})", path.display());
        b.add_log(&path).map_err(|e| e.to_string())?;
        used += 1;
    }
    if used == 0 {
        log::warn!(
            "no link data under {}{}",
            args.data_dir.display(),
            args.collection
                .as_deref()
                .map(|c| format!(" for collection {c:?}"))
                .unwrap_or_default()
        );
    }
    let ix = b.finish();
    let (bad_messages, bad_lines) = ix.bad();
    if bad_messages + bad_lines > 0 {
        log::warn!("skipped {bad_messages} stored message(s) and {bad_lines} malformed line(s)");
    }
    Ok(ix)
}

/// The answer to `query` as JSON.
pub fn answer(ix: &LinkIndex, query: &LinksQuery) -> Json {
    let url = query.url().as_bytes();
    let mut out = json!({"url": text(url), "cidhash": cidhash(url).as_str()});
    let body = match query {
        LinksQuery::Inlinks { .. } => json!(ix
            .inlinks(url)
            .iter()
            .map(|l| json!({
                "from": l.from.as_str(),
                "from_url": opt_text(l.from_url),
                "intra": l.intra,
                "timestamp": l.ts,
                "anchor": text(l.anchor),
            }))
            .collect::<Vec<_>>()),
        LinksQuery::Anchors { .. } => json!(ix
            .anchors(url)
            .iter()
            .map(|a| json!({"text": text(a.text), "count": a.count}))
            .collect::<Vec<_>>()),
        LinksQuery::Outlinks { .. } => json!(ix
            .outlinks(url)
            .iter()
            .map(|l| json!({
                "to": l.to.as_str(),
                "to_url": opt_text(l.to_url),
                "intra": l.intra,
                "timestamp": l.ts,
                "anchor": text(l.anchor),
            }))
            .collect::<Vec<_>>()),
        LinksQuery::Equivalents { .. } => {
            let class = ix.equivalents(url).map_or(Json::Null, |e| {
                json!({
                    "doc": e.doc.as_str(),
                    "doc_url": opt_text(e.doc_url),
                    "timestamp": e.ts,
                    "members": e.members.iter().map(|(h, u)| json!({
                        "cidhash": h.as_str(), "url": opt_text(*u)
                    })).collect::<Vec<_>>(),
                    "eqrepr": e.repr.iter().map(|u| text(u)).collect::<Vec<_>>(),
                })
            });
            let sprel = ix.sprel(url).map_or(Json::Null, |s| {
                json!({
                    "application": Application::SharePoint.name(),
                    "timestamp": s.ts,
                    "operation": s.op.map(|o| text(o.name())),
                    "duplicates": s.duplicates.iter().map(|d| text(d)).collect::<Vec<_>>(),
                })
            });
            json!({"class": class, "sprel": sprel})
        }
    };
    out[query.name()] = body;
    out
}

/// One line per result, tab-separated, for people.
fn print_text(out: &mut impl Write, query: &LinksQuery, a: &Json) -> std::io::Result<()> {
    let s = |v: &Json| match v {
        Json::String(s) => s.clone(),
        Json::Null => "-".into(),
        other => other.to_string(),
    };
    match query {
        LinksQuery::Inlinks { .. } | LinksQuery::Outlinks { .. } => {
            let (hash, url) = match query {
                LinksQuery::Inlinks { .. } => ("from", "from_url"),
                _ => ("to", "to_url"),
            };
            for l in a[query.name()].as_array().into_iter().flatten() {
                let who = if l[url].is_null() { &l[hash] } else { &l[url] };
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}",
                    s(who),
                    if l["intra"] == true { "intra" } else { "inter" },
                    s(&l["timestamp"]),
                    s(&l["anchor"])
                )?;
            }
        }
        LinksQuery::Anchors { .. } => {
            for x in a["anchors"].as_array().into_iter().flatten() {
                writeln!(out, "{}\t{}", s(&x["count"]), s(&x["text"]))?;
            }
        }
        LinksQuery::Equivalents { .. } => {
            let c = &a["equivalents"]["class"];
            if !c.is_null() {
                writeln!(
                    out,
                    "document\t{}",
                    s(if c["doc_url"].is_null() {
                        &c["doc"]
                    } else {
                        &c["doc_url"]
                    })
                )?;
                for m in c["members"].as_array().into_iter().flatten() {
                    let who = if m["url"].is_null() {
                        &m["cidhash"]
                    } else {
                        &m["url"]
                    };
                    writeln!(out, "member\t{}", s(who))?;
                }
            }
            let p = &a["equivalents"]["sprel"];
            if !p.is_null() {
                for d in p["duplicates"].as_array().into_iter().flatten() {
                    writeln!(out, "sprel-duplicate\t{}", s(d))?;
                }
            }
        }
    }
    Ok(())
}

/// Runs `crawlfleet links`.
pub fn run(args: &LinksArgs) -> Result<(), String> {
    let ix = build_index(args)?;
    let a = answer(&ix, &args.query);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let written = if args.json {
        writeln!(out, "{a}")
    } else {
        print_text(&mut out, &args.query, &a)
    };
    written.map_err(|e| format!("writing the answer: {e}"))
}
