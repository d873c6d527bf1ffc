//! `crawlfleet index --data-dir DIR [--data-dir DIR2 ...] COLLECTION [--json] [--uri URI]`:
//! the live documents of a content collection's index (`core::distributor::index`), merged
//! over several distributors' data directories by document id (the latest version wins, a
//! newer remove hides a document). Reads the logs without the distributors' locks, while they
//! run: each log up to its last intact record.

use std::process::ExitCode;

use crawlfleet_core::distributor::index::reader::{self, Doc};
use serde_json::{json, Value as Json};

use crate::cli::IndexArgs;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn doc_json(d: &Doc, args: &IndexArgs) -> Json {
    let mut j = json!({
        "uri": d.doc, "op": d.kind.name(), "time": d.version.0, "seq": d.version.1,
        "checksum": hex(&d.checksum), "status": d.status, "size": d.size,
        "data_dir": args.data_dirs[d.source].display().to_string(),
    });
    if args.uri.is_some() {
        j["headers"] = d
            .headers
            .iter()
            .map(|(k, v)| json!([k, String::from_utf8_lossy(v)]))
            .collect();
    }
    j
}

/// Runs the command.
pub fn run(args: &IndexArgs) -> Result<ExitCode, String> {
    let mut sets = Vec::new();
    for (i, dir) in args.data_dirs.iter().enumerate() {
        if !dir.is_dir() {
            return Err(format!("{}: not a directory", dir.display()));
        }
        let (docs, _) = reader::read_dir(dir, &args.collection, args.uri.as_deref(), i)
            .map_err(|e| e.to_string())?;
        sets.push(docs);
    }
    let merged = reader::merge(sets);
    if let Some(uri) = &args.uri {
        let d = merged.get(uri).filter(|d| d.live());
        if args.json {
            println!("{}", d.map_or(Json::Null, |d| doc_json(d, args)));
        } else if let Some(d) = d {
            println!("uri\t{}", d.doc);
            println!("time\t{}\nseq\t{}", d.version.0, d.version.1);
            println!(
                "checksum\t{}\nstatus\t{}\nsize\t{}",
                hex(&d.checksum),
                d.status,
                d.size
            );
            println!("data_dir\t{}", args.data_dirs[d.source].display());
            for (k, v) in &d.headers {
                println!("header\t{k}: {}", String::from_utf8_lossy(v));
            }
        }
        return Ok(if d.is_some() {
            ExitCode::SUCCESS
        } else {
            eprintln!("crawlfleet: {uri}: not in the index of {}", args.collection);
            ExitCode::FAILURE
        });
    }
    let live = merged.values().filter(|d| d.live());
    if args.json {
        let list: Vec<Json> = live.map(|d| doc_json(d, args)).collect();
        println!("{}", Json::Array(list));
    } else {
        for d in live {
            println!(
                "{}\t{}\t{}\t{}\t{}\t{}",
                d.doc,
                d.version.0,
                d.version.1,
                hex(&d.checksum),
                d.status,
                d.size
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
