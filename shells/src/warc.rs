//! A node's WARC archives (docs/warc.md): one `core::warc::WarcWriter` per archived collection,
//! each on a thread of its own behind a bounded channel, so compression and file writes stay
//! off the node's loop; a full channel blocks the crawl loop (the crawl slows down) rather
//! than dropping records.
//!
//! The collection setting is the `warc` section of its configuration: `enabled`, `dir`,
//! `max_size`, `prefix`. Files go to `DIR/COLLECTION/NODE` (`dir` given) or to
//! `DATA_DIR/warc/COLLECTION` (the node's data directory).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crawlfleet_core::marshal::Value;
use crawlfleet_core::warc::{Exchange, WarcOptions, WarcWriter};
use crawlfleet_core::warn_limited;
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender};

/// Exchanges queued for a writer thread before the crawl loop waits for it.
const QUEUE: usize = 256;
/// A writer syncs what it wrote at least this often (an exchange newer than this may be lost
/// to a crash, never a whole file).
const SYNC_EVERY: Duration = Duration::from_secs(1);
/// How long [`close_all`] waits for each writer.
const CLOSE_WAIT: Duration = Duration::from_secs(30);

/// A collection's `warc` section, when `enabled`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setting {
    /// `dir`: where the files go; the node's data directory when absent.
    pub dir: Option<PathBuf>,
    /// `max_size`: bytes after which a file is closed and the next one opened (default 1 GB).
    pub max_size: u64,
    /// `prefix`: the file names' prefix (default `crawlfleet-COLLECTION`).
    pub prefix: Option<String>,
}

/// The `warc` section of a collection's configuration dict: `None` when absent or not
/// `enabled` (a true boolean, or an integer other than 0).
pub fn setting(dict: &Value<'_>) -> Option<Setting> {
    let s = dict.get(b"warc")?;
    let on = match s.get(b"enabled") {
        Some(Value::Bool(b)) => *b,
        Some(v) => number(v).is_some_and(|n| n != 0.0),
        None => true,
    };
    if !on {
        return None;
    }
    let text = |k: &[u8]| {
        s.get(k)
            .and_then(Value::as_bytes)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .filter(|t| !t.is_empty())
    };
    Some(Setting {
        dir: text(b"dir").map(PathBuf::from),
        max_size: s
            .get(b"max_size")
            .and_then(number)
            .filter(|n| *n >= 1.0)
            .map_or(1_000_000_000, |n| n as u64),
        prefix: text(b"prefix"),
    })
}

/// An integer or float setting.
fn number(v: &Value<'_>) -> Option<f64> {
    v.as_i64().map(|n| n as f64).or_else(|| v.as_f64())
}

/// The `warc` section `up --warc DIR` gives every collection.
pub fn up_section(dir: &Path) -> Value<'static> {
    let b = |s: &str| Value::owned_bytes(s.as_bytes().to_vec());
    Value::Dict(vec![
        (b("enabled"), Value::Bool(true)),
        (b("dir"), b(&dir.display().to_string())),
    ])
}

/// What a collection's writer has written (for statistics and status).
#[derive(Debug, Default)]
pub struct Counters {
    /// Records written.
    pub records: AtomicU64,
    /// Compressed bytes written.
    pub bytes: AtomicU64,
    /// Files closed.
    pub files: AtomicU64,
    /// Exchanges that could not be written.
    pub errors: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WarcCounts {
    /// Records written.
    pub records: u64,
    /// Compressed bytes written.
    pub bytes: u64,
    /// Files closed.
    pub files: u64,
    /// Exchanges that could not be written.
    pub errors: u64,
}

impl Counters {
    fn snapshot(&self) -> WarcCounts {
        // Relaxed: statistics; no other memory is published through them.
        WarcCounts {
            records: self.records.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            files: self.files.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

enum Msg {
    Write(Box<Exchange>),
    /// Close the open file and answer.
    Close(Sender<()>),
    /// Close the open file and end the thread (the registry holds a sender too, so the
    /// channel never closes by itself).
    Stop,
}

/// One collection's writer thread.
struct Archive {
    setting: Setting,
    tx: Sender<Msg>,
    counters: Arc<Counters>,
    thread: Option<JoinHandle<()>>,
    /// The counts last given to the statistics.
    fed: WarcCounts,
}

impl Drop for Archive {
    fn drop(&mut self) {
        // The thread ends after it closed its file (and has ended already if this fails).
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                log::error!("WARC: a writer thread panicked");
            }
        }
    }
}

/// Every writer thread's channel, for [`close_all`].
fn registry() -> &'static Mutex<Vec<Sender<Msg>>> {
    static R: Mutex<Vec<Sender<Msg>>> = Mutex::new(Vec::new());
    &R
}

/// Closes the open file of every writer in the process (its index written, renamed from
/// `.open`), waiting for each in turn: a clean stop leaves nothing to recover. Writing goes on
/// in new files if the crawl does.
pub fn close_all() {
    let mut waits = Vec::new();
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|s| {
            let (ack, done) = bounded(1);
            // A writer that stopped has dropped its receiver: forgotten here.
            let open = s.send(Msg::Close(ack)).is_ok();
            if open {
                waits.push(done);
            }
            open
        });
    for done in waits {
        if done.recv_timeout(CLOSE_WAIT).is_err() {
            log::warn!("WARC: a writer did not close its file within {CLOSE_WAIT:?}");
        }
    }
}

/// The WARC writers of one node scheduler, by collection.
pub struct Archiver {
    data_dir: PathBuf,
    node: String,
    hostname: String,
    archives: HashMap<Vec<u8>, Archive>,
}

impl Archiver {
    /// No collection archived yet; `node` names the node's sub-directory under a `dir`.
    pub fn new(data_dir: &Path, node: &str) -> Archiver {
        Archiver {
            data_dir: data_dir.to_path_buf(),
            node: file_safe(node),
            hostname: file_safe(&hostname()),
            archives: HashMap::new(),
        }
    }

    /// Starts, restarts or stops a collection's writer after its configuration (`None`:
    /// the collection is gone).
    pub fn configure(&mut self, name: &[u8], dict: Option<&Value<'_>>) {
        let want = dict.and_then(setting);
        if self.archives.get(name).map(|a| &a.setting) == want.as_ref() {
            return;
        }
        // Joins the old writer (its file closed) before a new one takes the directory.
        self.archives.remove(name);
        let Some(setting) = want else {
            return;
        };
        let collection = file_safe(&String::from_utf8_lossy(name));
        let dir = match &setting.dir {
            Some(d) => d.join(&collection).join(&self.node),
            None => self.data_dir.join("warc").join(&collection),
        };
        let mut opts = WarcOptions::new(
            &dir,
            setting
                .prefix
                .as_deref()
                .unwrap_or(&format!("crawlfleet-{collection}")),
            &self.hostname,
        );
        opts.max_size = setting.max_size;
        opts.info.push(("isPartOf".into(), collection.clone()));
        opts.info.push(("robots".into(), "obey".into()));
        match start(opts) {
            Ok((tx, counters, thread)) => {
                registry()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(tx.clone());
                log::info!("collection {collection}: WARC files in {}", dir.display());
                self.archives.insert(
                    name.to_vec(),
                    Archive {
                        setting,
                        tx,
                        counters,
                        thread: Some(thread),
                        fed: WarcCounts::default(),
                    },
                );
            }
            Err(e) => log::error!(
                "collection {collection}: cannot write WARC files in {}: {e}",
                dir.display()
            ),
        }
    }

    /// Whether any collection is archived (the fetcher keeps the wire bytes then).
    pub fn any(&self) -> bool {
        !self.archives.is_empty()
    }

    /// Whether `collection` is archived.
    pub fn archives(&self, collection: &[u8]) -> bool {
        self.archives.contains_key(collection)
    }

    /// Hands an exchange to the collection's writer, waiting while its queue is full.
    pub fn archive(&self, collection: &[u8], ex: Exchange) {
        if let Some(a) = self.archives.get(collection) {
            if a.tx.send(Msg::Write(Box::new(ex))).is_err() {
                a.counters.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// What the collection's writer has written.
    pub fn counts(&self, collection: &[u8]) -> Option<WarcCounts> {
        self.archives.get(collection).map(|a| a.counters.snapshot())
    }

    /// The records and bytes written since the last call, per collection.
    pub fn take_deltas(&mut self) -> Vec<(Vec<u8>, WarcCounts)> {
        let mut out = Vec::new();
        for (name, a) in &mut self.archives {
            let now = a.counters.snapshot();
            let d = WarcCounts {
                records: now.records - a.fed.records,
                bytes: now.bytes - a.fed.bytes,
                files: now.files - a.fed.files,
                errors: now.errors - a.fed.errors,
            };
            a.fed = now;
            out.push((name.clone(), d));
        }
        out
    }
}

type Started = (Sender<Msg>, Arc<Counters>, JoinHandle<()>);

/// Opens the writer (recovering what a crash left) and starts its thread.
fn start(opts: WarcOptions) -> std::io::Result<Started> {
    let writer = WarcWriter::open(opts)?;
    let (tx, rx) = bounded(QUEUE);
    let counters = Arc::new(Counters::default());
    let c = counters.clone();
    let thread = std::thread::Builder::new()
        .name("warc".into())
        .spawn(move || run(writer, &rx, &c))?;
    Ok((tx, counters, thread))
}

/// The writer thread: writes what comes, syncs every second while there is new data, closes
/// the file when asked and when the channel closes.
fn run(mut w: WarcWriter, rx: &Receiver<Msg>, c: &Counters) {
    let mut dirty = false;
    let publish = |w: &WarcWriter| {
        let s = w.stats();
        // Relaxed: statistics.
        c.records.store(s.records, Ordering::Relaxed);
        c.bytes.store(s.bytes, Ordering::Relaxed);
        c.files.store(s.files, Ordering::Relaxed);
    };
    loop {
        match rx.recv_timeout(SYNC_EVERY) {
            Ok(Msg::Write(ex)) => {
                if let Err(e) = w.write(&ex) {
                    c.errors.fetch_add(1, Ordering::Relaxed);
                    warn_limited!("warc-write", "WARC: {} not archived: {e}", ex.uri);
                }
                dirty = true;
            }
            Ok(Msg::Close(ack)) => {
                if let Err(e) = w.close() {
                    warn_limited!("warc-close", "WARC: closing a file failed: {e}");
                }
                dirty = false;
                let _ = ack.send(());
            }
            Err(RecvTimeoutError::Timeout) if dirty => {
                if let Err(e) = w.sync() {
                    warn_limited!("warc-sync", "WARC: sync failed: {e}");
                }
                dirty = false;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
        }
        publish(&w);
    }
    if let Err(e) = w.close() {
        log::warn!("WARC: closing a file failed: {e}");
    }
    publish(&w);
}

/// The machine's host name (for file names and warcinfo).
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// `s` with every character but ASCII letters, digits, `.`, `_` and `-` replaced by `_`.
fn file_safe(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    if t.is_empty() || t.starts_with('.') {
        format!("_{t}")
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(pairs: Vec<(&str, Value<'static>)>) -> Value<'static> {
        let b = |s: &str| Value::owned_bytes(s.as_bytes().to_vec());
        Value::Dict(pairs.into_iter().map(|(k, v)| (b(k), v)).collect())
    }

    #[test]
    fn the_warc_section_as_the_xml_gives_it() {
        let b = |s: &str| Value::owned_bytes(s.as_bytes().to_vec());
        // XML booleans arrive as integers 1 / 0 (docs/collection-config.md).
        let on = dict(vec![(
            "warc",
            dict(vec![
                ("enabled", Value::int(1)),
                ("dir", b("/srv/warc")),
                ("max_size", Value::int(5000)),
                ("prefix", b("p")),
            ]),
        )]);
        assert_eq!(
            setting(&on),
            Some(Setting {
                dir: Some(PathBuf::from("/srv/warc")),
                max_size: 5000,
                prefix: Some("p".into()),
            })
        );
        let off = dict(vec![("warc", dict(vec![("enabled", Value::int(0))]))]);
        assert_eq!(setting(&off), None);
        assert_eq!(setting(&dict(vec![])), None);
        let up = dict(vec![("warc", up_section(Path::new("/w")))]);
        assert_eq!(setting(&up).unwrap().max_size, 1_000_000_000);
        assert_eq!(file_safe("a/b c"), "a_b_c");
    }
}
