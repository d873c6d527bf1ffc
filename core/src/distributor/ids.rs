//! The session ids a master hands out (MS-FSCDFT 3.6 forwards create with an id the master
//! chose; the spec leaves how to choose it to us).
//!
//! An id must stay unique across the cluster and across failovers, when another distributor
//! becomes master with its own data directory. So an id carries the node id of the master
//! that handed it out in its low 16 bits, and a counter of that master's above them:
//! `id = counter * 65536 + node_id`. Two masters never share a node id, and each keeps its
//! counter's high-water mark on disk, reserved a block at a time before any id of the block
//! is handed out: after a crash the counter resumes past the block, never inside it.

use std::fs::File;
use std::io::{self, BufReader};
use std::path::{Path, PathBuf};

use crate::recordlog::{self, Cur};

/// The file in the data directory that keeps the high-water mark.
pub const SESSION_IDS_FILE: &str = "session-ids";

/// Counter values reserved on disk at a time.
pub const BLOCK: u64 = 1024;

/// Largest node id: the low 16 bits of a session id.
pub const MAX_NODE_ID: i64 = 0xFFFF;

/// Largest counter: ids stay below 2^63.
const MAX_COUNTER: u64 = (i64::MAX as u64) >> 16;

/// Why no id could be handed out.
#[derive(Debug)]
pub enum IdError {
    /// The high-water mark could not be made durable.
    Io(io::Error),
    /// Every counter value is used (2^47 sessions).
    Exhausted,
}

impl std::fmt::Display for IdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IdError::Io(e) => write!(f, "cannot keep the session id high-water mark: {e}"),
            IdError::Exhausted => f.write_str("every session id of this node is used"),
        }
    }
}

/// The session id allocator of one node.
#[derive(Debug)]
pub struct SessionIds {
    node_id: u16,
    next: u64,
    reserved: u64,
    file: Option<PathBuf>,
}

impl SessionIds {
    /// An allocator keeping nothing on disk (tests).
    pub fn in_memory(node_id: u16) -> SessionIds {
        SessionIds {
            node_id,
            next: 1,
            reserved: u64::MAX,
            file: None,
        }
    }

    /// The allocator whose mark is kept in `dir`; the caller holds the directory's lock. A
    /// damaged mark file is an error: handing out ids from a guess could repeat one.
    pub fn open(dir: &Path, node_id: u16) -> io::Result<SessionIds> {
        let path = dir.join(SESSION_IDS_FILE);
        let mut ids = SessionIds {
            node_id,
            next: 1,
            reserved: 1,
            file: Some(path.clone()),
        };
        match File::open(&path) {
            Ok(f) => {
                let len = f.metadata()?.len();
                let mut payload = Vec::new();
                let mut r = BufReader::new(f);
                let mark = match recordlog::read_next(&mut r, len, 8, &mut payload)? {
                    recordlog::Next::Record => Cur(&payload).u64(),
                    _ => None,
                };
                let Some(mark) = mark else {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} is damaged", path.display()),
                    ));
                };
                ids.next = mark.max(1);
                ids.reserved = ids.next;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(ids)
    }

    /// The next id, its block reserved on disk first when it is the first of a block.
    pub fn next_id(&mut self) -> Result<i64, IdError> {
        if self.next > MAX_COUNTER {
            return Err(IdError::Exhausted);
        }
        if self.next >= self.reserved {
            let mark = self.next.saturating_add(BLOCK).min(MAX_COUNTER + 1);
            if let Some(path) = &self.file {
                let mut out = Vec::new();
                let start = recordlog::begin(&mut out);
                out.extend_from_slice(&mark.to_le_bytes());
                recordlog::seal(&mut out, start);
                recordlog::write_atomic(path, &out).map_err(IdError::Io)?;
            }
            self.reserved = mark;
        }
        let counter = self.next;
        self.next += 1;
        Ok(((counter << 16) | u64::from(self.node_id)) as i64)
    }
}
