//! The session holder on disk (MS-FSCDFT 3.5.1), so that a distributor restarted on its data
//! directory still holds its sessions, each with its collection and port, and `recreate` after
//! the restart finds them (3.5.4.3). A record log through [`LogWriter`]: one record per
//! session kept or dropped, committed before the answer; compacted to the held sessions when
//! the dropped ones outweigh them.
//!
//! Payload: `u8` 1 (kept), `u64` id, `u16` port offset from the base port (390 or 391),
//! collection; or `u8` 2 (dropped), `u64` id. The offset, not the port, is kept: a distributor
//! restarted on another base port serves its sessions there.

use std::collections::BTreeMap;
use std::path::Path;

use crate::recordlog::{put_bytes, Cur, Format, LogError, LogWriter, Options};

use super::Session;

/// The file in the data directory that keeps the session holder.
pub const SESSIONS_FILE: &str = "sessions";

const FORMAT: Format = Format {
    magic: b"CFSESS1\n",
    name: "session holder",
    max_record: 4096,
};

/// The session holder's log.
#[derive(Debug)]
pub struct SessionLog {
    writer: LogWriter,
    records: usize,
    base_port: u16,
}

fn kept(out: &mut Vec<u8>, s: &Session, base_port: u16) {
    out.push(1);
    out.extend_from_slice(&(s.id as u64).to_le_bytes());
    out.extend_from_slice(&s.port.wrapping_sub(base_port).to_le_bytes());
    put_bytes(out, s.collection.as_bytes());
}

impl SessionLog {
    /// Opens the log in `dir` and returns the sessions it holds, served from `base_port`.
    pub fn open(
        dir: &Path,
        base_port: u16,
    ) -> Result<(SessionLog, BTreeMap<i64, Session>), LogError> {
        let mut held = BTreeMap::new();
        let mut records = 0;
        let path = dir.join(SESSIONS_FILE);
        let (writer, _) = LogWriter::open(&path, Options::new(FORMAT), |p| {
            let mut c = Cur(p);
            let ok = (|| {
                match c.u8()? {
                    1 => {
                        let id = c.u64()? as i64;
                        let port = base_port.wrapping_add(c.u16()?);
                        let collection = String::from_utf8(c.bytes()?.to_vec()).ok()?;
                        held.insert(
                            id,
                            Session {
                                id,
                                collection,
                                port,
                                callback: None,
                            },
                        );
                    }
                    2 => {
                        held.remove(&(c.u64()? as i64));
                    }
                    _ => return None,
                }
                c.is_empty().then_some(())
            })();
            records += 1;
            ok.is_some()
        })?;
        let log = SessionLog {
            writer,
            records,
            base_port,
        };
        Ok((log, held))
    }

    /// Keeps `s`, durably.
    pub fn keep(&mut self, s: &Session) -> Result<(), LogError> {
        let base = self.base_port;
        self.writer.append_with(|out| kept(out, s, base));
        self.commit()
    }

    /// Drops the sessions `ids`, durably; compacts to `held` (the sessions left) when the log
    /// holds many more records than sessions.
    pub fn drop_ids(&mut self, ids: &[i64], held: &BTreeMap<i64, Session>) -> Result<(), LogError> {
        for id in ids {
            self.writer.append_with(|out| {
                out.push(2);
                out.extend_from_slice(&(*id as u64).to_le_bytes());
            });
        }
        self.commit()?;
        if self.records > 2 * held.len() + 1024 {
            let base = self.base_port;
            self.writer.compact(|c| {
                for s in held.values() {
                    c.record(|out| kept(out, s, base))?;
                }
                Ok(())
            })?;
            self.records = held.len();
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), LogError> {
        let n = self.writer.pending_records();
        let r = self.writer.commit();
        if r.is_err() {
            // Refused: the caller undoes the change, so the records must not be written later.
            self.writer.discard_pending();
        } else {
            self.records += n;
        }
        r
    }
}
