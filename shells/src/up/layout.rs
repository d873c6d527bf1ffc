//! The data directory `up` owns: where it is by default (a per-user state directory), its lock
//! (a directory in use by a running cluster is refused with that cluster's pid), the ports of
//! every role (kept in `up.ports`, so a second `up` on the same directory resumes the same
//! cluster on the same addresses), `admin.addr` for the admin CLI, and `--fresh`.
//!
//! ```text
//! DATA/LOCK            held while up runs (its pid inside)
//! DATA/up.ports        role name -> address, one per line
//! DATA/admin.addr      the multinode scheduler's administrative address
//! DATA/summary.json    the statistics of the runs so far (up's summary adds them up)
//! DATA/<role>/         one directory per role: dupserver, dupreplica, multinode, node1...,
//!                      linkstore, nameserver, distributor1...
//! DATA/config*-N.xml   the collections as up gave them to the multinode scheduler
//! ```

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use crawlfleet_core::datadir::DirLock;

/// The file of the ports.
const PORTS: &str = "up.ports";
/// The file of the administrative address.
pub const ADMIN_ADDR: &str = "admin.addr";
/// The administrative token (a copy of `--admin-token-file`'s, readable by its owner only),
/// beside [`ADMIN_ADDR`], for `crawlfleet admin --data-dir`.
pub const ADMIN_TOKEN: &str = "admin.token";

/// `up`'s hold on its data directory.
pub struct Layout {
    /// The directory.
    pub dir: PathBuf,
    /// True when the directory held a cluster before (its ports are reused).
    pub resumed: bool,
    ports: BTreeMap<String, SocketAddr>,
    _lock: DirLock,
}

/// The default data directory: `$XDG_STATE_HOME/crawlfleet/up`, else
/// `~/.local/state/crawlfleet/up`, else (no home) under the temporary directory.
pub fn default_dir() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        });
    match state {
        Some(s) => s.join("crawlfleet").join("up"),
        None => std::env::temp_dir().join("crawlfleet-up"),
    }
}

/// The administrative address a cluster in `dir` wrote, for `crawlfleet admin --data-dir`.
pub fn admin_addr(dir: &Path) -> Result<SocketAddr, String> {
    let path = dir.join(ADMIN_ADDR);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "cannot read {} ({e}): is `crawlfleet up --data-dir {}` running?",
            path.display(),
            dir.display()
        )
    })?;
    text.trim().parse().map_err(|e| {
        format!(
            "{}: {:?} is not an address: {e}",
            path.display(),
            text.trim()
        )
    })
}

impl Layout {
    /// Takes `dir` (created if missing) for a cluster: refuses it while another `up` holds it,
    /// and with `fresh` removes what a cluster left in it first.
    pub fn open(dir: &Path, fresh: bool) -> Result<Layout, String> {
        let lock = DirLock::acquire(dir).map_err(|e| e.to_string())?;
        if fresh {
            clear(dir)?;
        }
        let text = std::fs::read_to_string(dir.join(PORTS)).unwrap_or_default();
        let ports: BTreeMap<String, SocketAddr> = text
            .lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(' ')?;
                Some((k.to_string(), v.trim().parse().ok()?))
            })
            .collect();
        Ok(Layout {
            dir: dir.to_path_buf(),
            resumed: !ports.is_empty(),
            ports,
            _lock: lock,
        })
    }

    /// The address of role `key`: the one it had before when it is free (held for the role in
    /// [`crawlfleet_net::reserve`] from here on), else a new one (`pick`), remembered for the
    /// next run once [`Layout::save`] writes them.
    pub fn addr(
        &mut self,
        key: &str,
        pick: impl FnOnce() -> Result<SocketAddr, String>,
    ) -> Result<SocketAddr, String> {
        if let Some(a) = self.ports.get(key) {
            if crawlfleet_net::reserve::bind_and_hold(*a).is_ok() {
                return Ok(*a);
            }
            log::warn!("{key}: {a} is taken now; a new address replaces it");
        }
        let a = pick()?;
        self.ports.insert(key.to_string(), a);
        Ok(a)
    }

    /// Remembers the address of role `key` (one given on the command line).
    pub fn set(&mut self, key: &str, addr: SocketAddr) {
        self.ports.insert(key.to_string(), addr);
    }

    /// Writes the ports (synced: a resumed cluster must find them).
    pub fn save(&self) -> Result<(), String> {
        let text: String = self
            .ports
            .iter()
            .map(|(k, v)| format!("{k} {v}\n"))
            .collect();
        write_synced(&self.dir.join(PORTS), text.as_bytes())
    }

    /// Writes `admin.addr`.
    pub fn write_admin_addr(&self, addr: SocketAddr) -> Result<(), String> {
        write_synced(&self.dir.join(ADMIN_ADDR), format!("{addr}\n").as_bytes())
    }

    /// Writes the administrative token beside the address (mode 0600), or removes an earlier
    /// run's when the ports have none now.
    pub fn write_admin_token(&self, token_file: Option<&Path>) -> Result<(), String> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.dir.join(ADMIN_TOKEN);
        let Some(from) = token_file else {
            return match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("cannot remove {}: {e}", path.display()))
                }
                _ => Ok(()),
            };
        };
        let token = std::fs::read_to_string(from)
            .map_err(|e| format!("--admin-token-file {}: {e}", from.display()))?;
        let tmp = path.with_extension("tmp");
        let _ = std::fs::remove_file(&tmp);
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(format!("{}\n", token.trim()).as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| format!("cannot write {}: {e}", path.display()))
    }
}

/// Writes `path` through a temporary file renamed over it.
pub fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), String> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f =
        std::fs::File::create(&tmp).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Whether `name` is something `up` keeps in its directory (`--fresh` removes only those).
fn ours(name: &str) -> bool {
    let numbered = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    matches!(
        name,
        "dupserver"
            | "dupreplica"
            | "multinode"
            | "linkstore"
            | "nameserver"
            | PORTS
            | ADMIN_ADDR
            | ADMIN_TOKEN
            | "summary.json"
    ) || numbered("node")
        || numbered("distributor")
        || (name.ends_with(".xml") && (name.starts_with("config") || name.starts_with("synthetic")))
}

fn clear(dir: &Path) -> Result<(), String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !ours(&name) {
            continue;
        }
        let path = e.path();
        let r = match path.is_dir() {
            true => std::fs::remove_dir_all(&path),
            false => std::fs::remove_file(&path),
        };
        r.map_err(|e| format!("--fresh: cannot remove {}: {e}", path.display()))?;
    }
    Ok(())
}
