//! The collections a scheduler knows, persisted (MS-FSCADM 3.3: configuration and state survive a
//! restart). Each collection has a directory `<root>/<file name>/` holding `meta` (a marshalled
//! dict: name, configuration, state and whatever else the role keeps) and its crawl queues. `meta`
//! is replaced atomically (temporary file, fdatasync, rename, directory fsync).

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use log::warn;

use super::file_name;
use crate::marshal::{self, Limits, Value};

/// A collection directory could not be read or written.
#[derive(Debug)]
pub struct StoreError {
    /// The file or directory.
    pub path: PathBuf,
    /// What failed.
    pub error: String,
    /// The file system had no room ([`crate::diskfull::is_full`]): the write can succeed later.
    pub disk_full: bool,
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.error)
    }
}

impl std::error::Error for StoreError {}

/// Maps an I/O error on `path` to a [`StoreError`].
pub(super) fn io_err(path: &Path) -> impl Fn(io::Error) -> StoreError + '_ {
    move |e| StoreError {
        path: path.to_path_buf(),
        disk_full: crate::diskfull::is_full(&e),
        error: e.to_string(),
    }
}

/// The root of the collection directories.
pub struct CollectionDirs {
    root: PathBuf,
}

impl CollectionDirs {
    /// Opens (creating) `root`.
    pub fn open(root: &Path) -> Result<Self, StoreError> {
        fs::create_dir_all(root).map_err(io_err(root))?;
        Ok(CollectionDirs {
            root: root.to_path_buf(),
        })
    }

    /// The directory of collection `name` (created).
    pub fn dir(&self, name: &[u8]) -> Result<PathBuf, StoreError> {
        let d = self.root.join(file_name(name));
        fs::create_dir_all(&d).map_err(io_err(&d))?;
        Ok(d)
    }

    /// Writes the meta dict of `name`.
    pub fn save(&self, name: &[u8], meta: &Value<'_>) -> Result<(), StoreError> {
        let d = self.dir(name)?;
        let tmp = d.join("meta.tmp");
        let path = d.join("meta");
        let bytes = marshal::to_bytes(meta);
        let mut f = File::create(&tmp).map_err(io_err(&tmp))?;
        f.write_all(&bytes).map_err(io_err(&tmp))?;
        f.sync_data().map_err(io_err(&tmp))?;
        fs::rename(&tmp, &path).map_err(io_err(&path))?;
        File::open(&d)
            .and_then(|f| f.sync_all())
            .map_err(io_err(&d))?;
        Ok(())
    }

    /// Every saved meta dict; unreadable ones are logged and skipped.
    pub fn load_all(&self) -> Result<Vec<Value<'static>>, StoreError> {
        let mut out = Vec::new();
        let mut dirs: Vec<_> = fs::read_dir(&self.root)
            .map_err(io_err(&self.root))?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .collect();
        dirs.sort();
        for d in dirs {
            let path = d.join("meta");
            let Ok(bytes) = fs::read(&path) else {
                continue;
            };
            match marshal::from_bytes(&bytes, &Limits::default()) {
                Ok(v) if v.as_dict().is_some() => out.push(v.into_owned()),
                Ok(_) => warn!("{}: not a dict; skipped", path.display()),
                Err(e) => warn!("{}: unreadable ({e}); skipped", path.display()),
            }
        }
        Ok(out)
    }

    /// Deletes the directory of `name` with everything in it.
    pub fn remove(&self, name: &[u8]) -> Result<(), StoreError> {
        let d = self.root.join(file_name(name));
        match fs::remove_dir_all(&d) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(io_err(&d)(e)),
        }
    }
}

/// Builds a meta dict from (key, value) pairs.
pub fn meta(pairs: Vec<(&str, Value<'static>)>) -> Value<'static> {
    Value::Dict(
        pairs
            .into_iter()
            .map(|(k, v)| (Value::owned_bytes(k.as_bytes().to_vec()), v))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_remove() {
        let root = tempfile::TempDir::with_prefix("crawlfleet-colls-").unwrap();
        let c = CollectionDirs::open(root.path()).unwrap();
        let m = meta(vec![
            ("name", Value::owned_bytes(b"a/b".to_vec())),
            ("state", Value::int(4)),
        ]);
        c.save(b"a/b", &m).unwrap();
        c.save(b"plain", &meta(vec![("state", Value::int(1))]))
            .unwrap();
        let all = c.load_all().unwrap();
        assert_eq!(all.len(), 2);
        assert!(all.contains(&m));
        assert!(root.path().join("x-612f62").is_dir());
        c.remove(b"a/b").unwrap();
        assert_eq!(c.load_all().unwrap().len(), 1);
        // A broken meta file is skipped, not fatal.
        fs::write(root.path().join("plain").join("meta"), b"\xff\xff").unwrap();
        assert_eq!(c.load_all().unwrap().len(), 0);
    }
}
