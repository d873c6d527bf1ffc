//! `crawlfleet bench dupstore`: the duplicate server's checksum store at scale: resident memory
//! per entry, add rate with durable group commits, snapshot time and restart (recovery) time.

use std::path::Path;
use std::time::Instant;

use crawlfleet_core::checksum::durable::DupStores;
use crawlfleet_core::msg::Checksum;
use serde_json::json;

use crate::cli::BenchDupstoreArgs;
use crate::{resident_bytes, BenchError};

/// A synthetic document checksum: the MD5-like 16 bytes of entry `i`.
fn checksum(i: u64) -> Checksum {
    let a = xorshift(i.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let b = xorshift(a ^ 0xD1B5_4A32_D192_ED03);
    let mut c = [0u8; 16];
    c[..8].copy_from_slice(&a.to_le_bytes());
    c[8..].copy_from_slice(&b.to_le_bytes());
    Checksum(c)
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Runs the benchmark and prints its figures.
pub fn run(args: &BenchDupstoreArgs) -> Result<(), BenchError> {
    let dir = &args.data_dir;
    if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(BenchError(format!(
            "{} is not empty: give a new directory (the benchmark writes its own store there)",
            dir.display()
        )));
    }
    let err = |e: &dyn std::fmt::Display| BenchError(format!("{}: {e}", dir.display()));
    let rss_before = resident_bytes().unwrap_or(0);
    let (mut stores, _) = DupStores::open(dir, args.shards).map_err(|e| err(&e))?;
    stores.set_collection(b"bench", b"{0".to_vec());
    let mut uri = Vec::with_capacity(128);
    let mut uri_bytes: u64 = 0;
    let started = Instant::now();
    for i in 0..args.entries {
        uri.clear();
        uri.extend_from_slice(
            format!("http://www{}.example.com/section/page-{i}.html", i % 1000).as_bytes(),
        );
        uri_bytes += uri.len() as u64;
        stores
            .add(b"bench", checksum(i), &uri, b"node-1")
            .map_err(|e| err(&e))?;
        if (i + 1) % args.batch == 0 {
            stores.commit().map_err(|e| err(&e))?;
        }
    }
    stores.commit().map_err(|e| err(&e))?;
    let add_secs = started.elapsed().as_secs_f64();
    let rss_after = resident_bytes().unwrap_or(0);
    let per_entry = (rss_after.saturating_sub(rss_before) as f64 - uri_bytes as f64)
        / args.entries.max(1) as f64;

    let snap_started = Instant::now();
    stores.snapshot_now().map_err(|e| err(&e))?;
    let snapshot_secs = snap_started.elapsed().as_secs_f64();
    drop(stores);

    let (stores, recovery) = DupStores::open(dir, args.shards).map_err(|e| err(&e))?;
    if stores.entries() as u64 != args.entries {
        return Err(BenchError(format!(
            "recovered {} entries, expected {}",
            stores.entries(),
            args.entries
        )));
    }
    let disk = dir_size(dir);
    drop(stores);
    let out = json!({
        "entries": args.entries,
        "shards": args.shards,
        "group_commit_batch": args.batch,
        "add_rate": args.entries as f64 / add_secs,
        "resident_bytes": rss_after.saturating_sub(rss_before),
        "uri_bytes": uri_bytes,
        "bytes_per_entry_beyond_uri": per_entry,
        "snapshot_secs": snapshot_secs,
        "restart_secs": recovery.elapsed.as_secs_f64(),
        "disk_bytes": disk,
    });
    if args.json {
        println!("{out}");
    } else {
        println!(
            "checksum store, {} entries in {} shards",
            args.entries, args.shards
        );
        println!(
            "  durable adds        {:>12.0} /s (fdatasync every {} adds)",
            out["add_rate"].as_f64().unwrap_or(0.0),
            args.batch
        );
        println!(
            "  resident            {:>12} MiB ({} MiB of URI bytes)",
            rss_after.saturating_sub(rss_before) >> 20,
            uri_bytes >> 20
        );
        println!(
            "  per entry           {:>12.1} bytes beyond the URI",
            per_entry
        );
        println!("  snapshot            {:>12.2} s", snapshot_secs);
        println!(
            "  restart (recovery)  {:>12.2} s",
            recovery.elapsed.as_secs_f64()
        );
        println!("  on disk             {:>12} MiB", disk >> 20);
    }
    Ok(())
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}
