//! The RUP robot's mail spool: `rup-spool/` in the node's data directory, where the node's
//! SMTP receiver and `crawlfleet rup-deliver` leave each report they take, durably (written,
//! synced, renamed in, the directory synced) before they say they took it. The robot thread
//! reads the spool in name order and removes a mail once it is applied; a mail applied again
//! after a crash is dropped by its sequence number (draft-cosmo 3.2).
//!
//! A mail is a file `mail-NAME.eml`, or one of several in `mail-NAME.batch`: the SMTP
//! receiver's sessions spool together ([`Spooler`]), so that a burst of reports (every site's
//! at the same second) costs one file and its two syncs per group of sessions waiting at once,
//! not per report. A batch holds each mail as its length (4 bytes, big-endian) and its bytes;
//! names start with the time they were written, so name order is arrival order for both kinds
//! (several batches may be written at once, but a session sends its next mail only once the
//! one before is answered, so its mails are in name order).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

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
    write_durably(data_dir, "eml", mail)
}

/// Writes `bytes` as a new spool file with extension `ext`: a temporary file written and
/// synced, renamed in, the directory synced.
fn write_durably(data_dir: &Path, ext: &str, bytes: &[u8]) -> io::Result<PathBuf> {
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
    let dst = dir.join(format!("mail-{name}.{ext}"));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    fs::rename(&tmp, &dst)?;
    fs::File::open(&dir)?.sync_all()?;
    Ok(dst)
}

/// Puts the mails of concurrent callers in the spool of one data directory together: a caller
/// that finds fewer than [`WRITERS`] batches under way writes every mail waiting then as one
/// batch file, the others wait for the batch that holds theirs (group commit).
///
/// Several batches are written at once because a durable write is mostly waiting for the
/// disk's journal: on a busy disk one takes 5-40 ms, and a burst of reports (every site's at
/// the same second) came in as three or four batches one after another, each mail waiting for
/// the batch before its own. Syncs issued together share the journal's commits, so a mail
/// arriving while a batch is being synced starts its own at once. Each mail is still answered
/// only once its own batch is synced and renamed in, and the directory synced.
pub struct Spooler {
    data_dir: PathBuf,
    state: Mutex<Group>,
    done: Condvar,
}

/// Batches written at once.
pub const WRITERS: usize = 4;

/// What a caller waits for: its mail's batch written (`Ok`) or failed (why).
type Outcome = Arc<OnceLock<Result<(), String>>>;

#[derive(Default)]
struct Group {
    /// Mails waiting for the next batch, each with its caller's outcome.
    waiting: Vec<(Vec<u8>, Outcome)>,
    /// Batches under way.
    writing: usize,
}

impl Spooler {
    /// The spooler of data directory `data_dir`.
    pub fn new(data_dir: &Path) -> Spooler {
        Spooler {
            data_dir: data_dir.to_path_buf(),
            state: Mutex::new(Group::default()),
            done: Condvar::new(),
        }
    }

    /// Puts `mail` in the spool, durably, with the mails of whoever else is putting one.
    pub fn put(&self, mail: Vec<u8>) -> io::Result<()> {
        let mine = Outcome::default();
        let mut g = self.state.lock();
        g.waiting.push((mail, mine.clone()));
        loop {
            if let Some(r) = mine.get() {
                return r.clone().map_err(io::Error::other);
            }
            // A caller writes only a batch holding its own mail, so that its answer never
            // waits for a batch of others' mails after its own is written.
            let waiting = g.waiting.iter().any(|(_, o)| Arc::ptr_eq(o, &mine));
            if g.writing >= WRITERS || !waiting {
                self.done.wait(&mut g);
                continue;
            }
            g.writing += 1;
            let batch = std::mem::take(&mut g.waiting);
            drop(g);
            let (mails, outcomes): (Vec<Vec<u8>>, Vec<Outcome>) = batch.into_iter().unzip();
            let r = self.write_batch(&mails).map_err(|e| e.to_string());
            for o in outcomes {
                let _ = o.set(r.clone());
            }
            g = self.state.lock();
            g.writing -= 1;
            self.done.notify_all();
        }
    }

    fn write_batch(&self, batch: &[Vec<u8>]) -> io::Result<()> {
        if let [one] = batch {
            return put(&self.data_dir, one).map(|_| ());
        }
        let mut bytes = Vec::with_capacity(batch.iter().map(|m| m.len() + 4).sum());
        for m in batch {
            let len = u32::try_from(m.len()).map_err(|_| io::Error::other("mail too large"))?;
            bytes.extend_from_slice(&len.to_be_bytes());
            bytes.extend_from_slice(m);
        }
        write_durably(&self.data_dir, "batch", &bytes).map(|_| ())
    }
}

/// The mails of a spool file: the file itself (`.eml`), or the mails of a batch (`.batch`);
/// a batch cut short or damaged gives the whole mails before the damage.
pub fn mails_of(path: &Path, raw: Vec<u8>) -> Vec<Vec<u8>> {
    if path.extension().and_then(|e| e.to_str()) != Some("batch") {
        return vec![raw];
    }
    let mut out = Vec::new();
    let mut rest = &raw[..];
    while let Some((len, tail)) = rest.split_first_chunk::<4>() {
        let len = u32::from_be_bytes(*len) as usize;
        let Some(mail) = tail.get(..len) else { break };
        out.push(mail.to_vec());
        rest = &tail[len..];
    }
    out
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
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("mail-") && (n.ends_with(".eml") || n.ends_with(".batch"))
            })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Mails put at once by many sessions are each in the spool once, in a batch or alone,
    /// and a batch cut short gives the whole mails before the cut.
    #[test]
    fn concurrent_puts_share_batches_and_every_mail_is_spooled_once() {
        let dir = tempfile::tempdir().unwrap();
        let spool = std::sync::Arc::new(Spooler::new(dir.path()));
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let s = spool.clone();
                std::thread::spawn(move || {
                    for i in 0..8 {
                        s.put(format!("mail {t}-{i}").into_bytes()).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let files = waiting(dir.path());
        let mut mails: Vec<String> = files
            .iter()
            .flat_map(|p| mails_of(p, fs::read(p).unwrap()))
            .map(|m| String::from_utf8(m).unwrap())
            .collect();
        assert!(files.len() <= 128);
        mails.sort();
        let mut want: Vec<String> = (0..16)
            .flat_map(|t| (0..8).map(move |i| format!("mail {t}-{i}")))
            .collect();
        want.sort();
        assert_eq!(mails, want);
        // Each session's mails are in the spool in the order it put them.
        let order: Vec<String> = files
            .iter()
            .flat_map(|p| mails_of(p, fs::read(p).unwrap()))
            .map(|m| String::from_utf8(m).unwrap())
            .filter(|m| m.starts_with("mail 3-"))
            .collect();
        assert_eq!(
            order,
            (0..8).map(|i| format!("mail 3-{i}")).collect::<Vec<_>>()
        );

        let mut cut = Vec::new();
        for m in [&b"first"[..], b"second"] {
            cut.extend_from_slice(&(m.len() as u32).to_be_bytes());
            cut.extend_from_slice(m);
        }
        cut.truncate(cut.len() - 2);
        let p = Path::new("mail-x.batch");
        assert_eq!(mails_of(p, cut.clone()), vec![b"first".to_vec()]);
        assert_eq!(mails_of(Path::new("mail-x.eml"), cut.clone()), vec![cut]);
    }
}
