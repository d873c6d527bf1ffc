//! `crawlfleet search`: full-text search over the documents fed to one or more content
//! distributors (their `<data dir>/search/<collection>/`, see
//! `crawlfleet_core::distributor::fulltext`). Each directory's index is opened read-only, as of
//! its last commit, so this works on the directories of running distributors without their
//! lock. The hits of every directory are merged by score and each URI is kept once, with its
//! best score (distributors share the documents of a collection between them).
//!
//! Text: one line per hit, `score  URI  title`, then the snippet indented. With `--json`, an
//! array of `{uri, score, title, snippet, data_dir}`.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use crawlfleet_core::distributor::fulltext::{self, Hit, Searcher};
use serde_json::json;

use crate::cli::SearchArgs;

/// One merged hit, with the data directory it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Found {
    /// The hit.
    pub hit: Hit,
    /// The distributor data directory whose index answered it.
    pub data_dir: PathBuf,
}

/// Searches `collection` in each of `data_dirs` for `query`: the best `limit` hits, best first,
/// each URI once. A directory without an index of the collection is skipped with a warning
/// (to stderr); none at all is an error.
pub fn search(
    data_dirs: &[PathBuf],
    collection: &str,
    query: &str,
    limit: usize,
) -> Result<Vec<Found>, String> {
    let mut all = Vec::new();
    let mut opened = 0;
    let mut why = Vec::new();
    for d in data_dirs {
        let dir = fulltext::dir(d, collection);
        let searcher = match Searcher::open(&dir) {
            Ok(s) => s,
            Err(e) => {
                why.push(format!("{}: {e}", d.display()));
                continue;
            }
        };
        opened += 1;
        let hits = searcher
            .search(query, limit)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        all.extend(hits.into_iter().map(|hit| Found {
            hit,
            data_dir: d.clone(),
        }));
    }
    if opened == 0 {
        return Err(format!(
            "no full-text index of collection {collection:?}: {}",
            why.join("; ")
        ));
    }
    for w in &why {
        eprintln!("crawlfleet search: skipped {w}");
    }
    Ok(merge(all, limit))
}

/// The best `limit` of `all`, best first, each URI once with its best score (ties: the order
/// of the directories, then each index's own order).
pub fn merge(all: Vec<Found>, limit: usize) -> Vec<Found> {
    let mut best: HashMap<String, usize> = HashMap::new();
    let mut out: Vec<Found> = Vec::new();
    for f in all {
        match best.get(&f.hit.uri) {
            Some(&i) if out[i].hit.score >= f.hit.score => {}
            Some(&i) => out[i] = f,
            None => {
                best.insert(f.hit.uri.clone(), out.len());
                out.push(f);
            }
        }
    }
    // A stable sort keeps the ties in the order they came.
    out.sort_by(|a, b| b.hit.score.total_cmp(&a.hit.score));
    out.truncate(limit);
    out
}

/// The JSON of the hits: an array of `{uri, score, title, snippet, data_dir}`.
pub fn to_json(found: &[Found]) -> serde_json::Value {
    found
        .iter()
        .map(|f| {
            json!({
                "uri": f.hit.uri,
                "score": f.hit.score,
                "title": f.hit.title,
                "snippet": f.hit.snippet,
                "data_dir": f.data_dir.display().to_string(),
            })
        })
        .collect()
}

fn print(found: &[Found], json: bool, out: &mut dyn Write) -> io::Result<()> {
    if json {
        serde_json::to_writer_pretty(&mut *out, &to_json(found))?;
        return writeln!(out);
    }
    for f in found {
        writeln!(out, "{:.3}  {}  {}", f.hit.score, f.hit.uri, f.hit.title)?;
        if !f.hit.snippet.is_empty() {
            writeln!(out, "    {}", f.hit.snippet)?;
        }
    }
    Ok(())
}

/// `crawlfleet search`: exits 0 with the hits (none is not an error), 1 when no directory has
/// an index of the collection.
pub fn run(args: &SearchArgs) -> Result<ExitCode, String> {
    let limit = args.limit.clamp(1, fulltext::MAX_LIMIT);
    let found = search(&args.data_dirs, &args.collection, &args.query, limit)?;
    let mut out = io::stdout().lock();
    print(&found, args.json, &mut out).map_err(|e| format!("writing the hits: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn f(uri: &str, score: f32, dir: &str) -> Found {
        Found {
            hit: Hit {
                uri: uri.into(),
                score,
                title: String::new(),
                snippet: String::new(),
            },
            data_dir: dir.into(),
        }
    }

    #[test]
    fn merge_ranks_by_score_and_keeps_each_uri_once() {
        let all = vec![
            f("a", 1.0, "d1"),
            f("b", 3.0, "d1"),
            f("a", 2.0, "d2"),
            f("c", 0.5, "d2"),
            f("b", 1.0, "d2"),
        ];
        let m = merge(all.clone(), 10);
        let got: Vec<_> = m
            .iter()
            .map(|x| (x.hit.uri.as_str(), x.hit.score))
            .collect();
        assert_eq!(got, [("b", 3.0), ("a", 2.0), ("c", 0.5)]);
        assert_eq!(m[1].data_dir, Path::new("d2"));
        assert_eq!(merge(all, 2).len(), 2);
    }
}
