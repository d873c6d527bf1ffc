//! A role's hold on its data directory: an exclusive advisory lock (`flock`) on `LOCK` inside
//! it, held while the role runs, so two processes (or two roles of one `crawlfleet up`) never
//! write one directory at once (DESIGN.md "Durable state"). The holder writes its process id
//! into the file; a second opener is refused with that id in the message.
//!
//! The lock goes with the process: a role killed with SIGKILL leaves the file, not the lock.

use std::fmt;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name inside a data directory.
pub const LOCK_FILE: &str = "LOCK";

/// A held lock on a data directory; released when dropped.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
    dir: PathBuf,
}

impl DirLock {
    /// Creates `dir` if needed and takes its lock, refusing when another holder has it.
    pub fn acquire(dir: &Path) -> Result<DirLock, LockError> {
        let io = |source| LockError::Io {
            dir: dir.to_path_buf(),
            source,
        };
        if dir.exists() && !dir.is_dir() {
            return Err(io(io::Error::other("not a directory")));
        }
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(dir.join(LOCK_FILE))
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Held {
                    dir: dir.to_path_buf(),
                    pid: text.trim().parse().ok(),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .map_err(io)?;
        Ok(DirLock {
            _file: file,
            dir: dir.to_path_buf(),
        })
    }

    /// The locked directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Why a data directory could not be locked.
#[derive(Debug)]
pub enum LockError {
    /// Another process (or another role of this one) holds it.
    Held {
        /// The directory.
        dir: PathBuf,
        /// The holder's process id, as it wrote it.
        pid: Option<u32>,
    },
    /// The directory or its lock file could not be created or opened.
    Io {
        /// The directory.
        dir: PathBuf,
        /// The failure.
        source: io::Error,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Held { dir, pid: Some(pid) } => write!(
                f,
                "data dir {} is in use by process {pid} (it holds {}); stop it or give another --data-dir",
                dir.display(),
                dir.join(LOCK_FILE).display()
            ),
            LockError::Held { dir, pid: None } => write!(
                f,
                "data dir {} is in use by another process (it holds {})",
                dir.display(),
                dir.join(LOCK_FILE).display()
            ),
            LockError::Io { dir, source } => {
                write!(f, "data dir {} is unusable: {source}", dir.display())
            }
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LockError::Io { source, .. } => Some(source),
            LockError::Held { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid_until_it_lets_go() {
        let dir = TempDir::new().unwrap();
        let data = dir.path().join("role");
        let first = DirLock::acquire(&data).unwrap();
        assert_eq!(first.dir(), data);
        match DirLock::acquire(&data) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("a second lock of a held directory: {other:?}"),
        }
        let msg = DirLock::acquire(&data).unwrap_err().to_string();
        assert!(msg.contains(&std::process::id().to_string()), "{msg}");
        drop(first);
        DirLock::acquire(&data).expect("free again once the holder lets go");
    }

    #[test]
    fn a_file_where_the_directory_should_be_is_refused() {
        let dir = TempDir::new().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(DirLock::acquire(&file), Err(LockError::Io { .. })));
    }
}
