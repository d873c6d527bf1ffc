//! The RUP robot's mail spool: `rup-spool/` in the node's data directory, where the node's
//! SMTP receiver and `crawlfleet rup-deliver` leave each report they take, durably (written,
//! synced, renamed in, the directory synced) before they say they took it. The robot thread
//! reads the spool in name order and removes a mail once it is applied; a mail applied again
//! after a crash is dropped by its sequence number (draft-cosmo 3.2).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The spool directory of data directory `data_dir`.
pub fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("rup-spool")
}

/// Largest mail taken, in bytes: a report of 100,000 paths fits with room to spare.
pub const MAX_MAIL: usize = 16 << 20;

/// Tells mails of one process apart within one nanosecond.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Puts `mail` in the spool of `data_dir`, durably.
pub fn put(data_dir: &Path, mail: &[u8]) -> io::Result<PathBuf> {
    let dir = dir(data_dir);
    fs::create_dir_all(&dir)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!(
        "{nanos:024}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = dir.join(format!(".tmp-{name}"));
    let dst = dir.join(format!("mail-{name}.eml"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(mail)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, &dst)?;
    fs::File::open(&dir)?.sync_all()?;
    Ok(dst)
}

/// The mails waiting in the spool of `data_dir`, oldest first.
pub fn waiting(data_dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = fs::read_dir(dir(data_dir)) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("mail-") && n.ends_with(".eml"))
        })
        .collect();
    v.sort();
    v
}

/// `crawlfleet rup-deliver --data-dir DIR`: one mail from standard input into the spool of
/// the node whose data directory is DIR (for a mail server's delivery to a pipe). Exits 0
/// only once the mail is durable there.
pub fn deliver(data_dir: &Path) -> Result<(), String> {
    if !data_dir.is_dir() {
        return Err(format!("{} is not a directory", data_dir.display()));
    }
    let mut mail = Vec::new();
    io::stdin()
        .take(MAX_MAIL as u64 + 1)
        .read_to_end(&mut mail)
        .map_err(|e| format!("standard input: {e}"))?;
    if mail.len() > MAX_MAIL {
        return Err(format!("the mail is over {MAX_MAIL} bytes"));
    }
    if mail.is_empty() {
        return Err("no mail on standard input".into());
    }
    put(data_dir, &mail).map_err(|e| format!("{}: {e}", dir(data_dir).display()))?;
    Ok(())
}
