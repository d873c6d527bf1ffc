//! Watching the root for the modification log: a file watcher (notify: inotify on Linux)
//! reports paths as they change, and a periodic rescan of the whole tree, compared with what
//! the log last saw of every file (modification time and size), catches what the watcher
//! missed: changes while the server was down, an overflowed event queue, a file system without
//! notifications.
//!
//! Only regular files count; symbolic links are not followed (the static side refuses those
//! that leave the root). A path is logged percent-encoded, relative to the root.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crawlfleet_core::rup::modlog::{FileStat, ModLog};
use crawlfleet_core::rup::report::encode_path;
use crossbeam_channel::Sender;
use notify::{RecursiveMode, Watcher};

/// Directories deeper than this are not walked.
const MAX_DEPTH: usize = 64;

/// What the log needs of a file's metadata.
fn stat_of(meta: &std::fs::Metadata) -> FileStat {
    FileStat {
        mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
        size: meta.len(),
    }
}

/// `path` relative to `root`, percent-encoded; `None` outside it or for the root itself.
fn rel(root: &Path, path: &Path) -> Option<String> {
    let r = path.strip_prefix(root).ok()?;
    let bytes = r.as_os_str().as_bytes();
    (!bytes.is_empty()).then(|| encode_path(bytes))
}

/// Walks `dir` (at `depth` below the root), recording the regular files it holds in `seen`.
fn walk(
    root: &Path,
    dir: &Path,
    depth: usize,
    log: &mut ModLog,
    now: i64,
    seen: &mut HashSet<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(root, &path, depth + 1, log, now, seen);
        } else if meta.is_file() {
            if let Some(r) = rel(root, &path) {
                log.observe(&r, Some(stat_of(&meta)), now);
                seen.insert(r);
            }
        }
    }
}

/// Compares the tree under `under` (the root, or a directory in it) with the log: new and
/// changed files, and the log's files under it that are gone. The caller commits.
pub fn rescan(root: &Path, under: &Path, log: &mut ModLog, now: i64) {
    let mut seen = HashSet::new();
    let prefix = rel(root, under).map(|p| format!("{p}/"));
    if std::fs::symlink_metadata(under).is_ok_and(|m| m.is_dir()) {
        let depth = under
            .strip_prefix(root)
            .map_or(0, |r| r.components().count());
        walk(root, under, depth, log, now, &mut seen);
    }
    let gone: Vec<String> = log
        .files()
        .keys()
        .filter(|p| {
            prefix
                .as_ref()
                .is_none_or(|pre| p.starts_with(pre.as_str()))
        })
        .filter(|p| !seen.contains(*p))
        .cloned()
        .collect();
    for p in gone {
        log.observe(&p, None, now);
    }
}

/// Looks at one path the watcher named: a file is compared, a directory rescanned, a path
/// that is gone deleted with everything the log held under it.
pub fn look_at(root: &Path, path: &Path, log: &mut ModLog, now: i64) {
    let Some(r) = rel(root, path) else {
        return;
    };
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_file() => {
            log.observe(&r, Some(stat_of(&m)), now);
        }
        Ok(m) if m.is_dir() => rescan(root, path, log, now),
        Ok(_) => {
            log.observe(&r, None, now);
        }
        Err(_) => {
            log.observe(&r, None, now);
            rescan(root, path, log, now);
        }
    }
}

/// Starts watching `root`; the paths of each event go to `tx`. `None` (logged) when the
/// system refuses a watcher: the periodic rescan still catches every change.
pub fn watch(root: &Path, tx: Sender<Vec<PathBuf>>) -> Option<notify::RecommendedWatcher> {
    let handler = move |res: notify::Result<notify::Event>| match res {
        // Opening and reading (inotify's IN_OPEN, IN_ACCESS, IN_CLOSE_NOWRITE) change nothing,
        // and the rescan's own opening of directories would otherwise call for another rescan
        // without end.
        Ok(ev) if matches!(ev.kind, notify::EventKind::Access(_)) => {}
        Ok(ev) => {
            let _ = tx.send(ev.paths);
        }
        Err(e) => crawlfleet_core::warn_limited!("rup-watch", "file watcher: {e}"),
    };
    let mut w = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            log::warn!("no file watcher ({e}): changes are found by the periodic rescan only");
            return None;
        }
    };
    if let Err(e) = w.watch(root, RecursiveMode::Recursive) {
        log::warn!(
            "cannot watch {} ({e}): changes are found by the periodic rescan only",
            root.display()
        );
        return None;
    }
    Some(w)
}
