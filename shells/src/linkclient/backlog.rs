//! The on-disk backlog of messages the link store did not acknowledge (MS-FSWASDR 3.1.5: "keeps
//! the message for later submission").
//!
//! One file per message, `<seq>-<lines>.msg` (sequence number, link lines inside), written to a
//! temporary name, synced and renamed, so a crash leaves whole messages only. The backlog is
//! bounded in bytes: when a new message would pass the bound, the oldest are dropped, each
//! with a log line.

use std::collections::VecDeque;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// One backlogged message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Order of arrival.
    pub seq: u64,
    /// Link lines inside.
    pub lines: u64,
    /// Bytes.
    pub bytes: u64,
}

/// The backlog directory and what it holds, oldest first.
#[derive(Debug)]
pub struct Backlog {
    dir: PathBuf,
    max_bytes: u64,
    entries: VecDeque<Entry>,
    bytes: u64,
    next_seq: u64,
    dropped: u64,
}

fn parse_name(name: &str) -> Option<(u64, u64)> {
    let (seq, lines) = name.strip_suffix(".msg")?.split_once('-')?;
    Some((seq.parse().ok()?, lines.parse().ok()?))
}

impl Backlog {
    /// Opens (creating if needed) the backlog in `dir`, keeping what an earlier run left.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Backlog> {
        fs::create_dir_all(dir)?;
        let mut entries = Vec::new();
        for e in fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".tmp") {
                // A message whose write did not finish: it was never counted as kept.
                let _ = fs::remove_file(e.path());
            } else if let Some((seq, lines)) = parse_name(&name) {
                entries.push(Entry {
                    seq,
                    lines,
                    bytes: e.metadata()?.len(),
                });
            }
        }
        entries.sort_by_key(|e| e.seq);
        let bytes = entries.iter().map(|e| e.bytes).sum();
        let next_seq = entries.last().map_or(0, |e| e.seq + 1);
        if !entries.is_empty() {
            log::info!(
                "link backlog {}: {} message(s), {bytes} bytes to resend",
                dir.display(),
                entries.len()
            );
        }
        Ok(Backlog {
            dir: dir.to_owned(),
            max_bytes,
            entries: entries.into(),
            bytes,
            next_seq,
            dropped: 0,
        })
    }

    fn path(&self, e: &Entry) -> PathBuf {
        self.dir.join(format!("{:016}-{}.msg", e.seq, e.lines))
    }

    /// Keeps `wire` (a whole message with its terminator) for later, dropping the oldest
    /// messages when the bound would be passed.
    pub fn push(&mut self, wire: &[u8], lines: u64) -> io::Result<()> {
        let e = Entry {
            seq: self.next_seq,
            lines,
            bytes: wire.len() as u64,
        };
        while self.bytes + e.bytes > self.max_bytes {
            let Some(old) = self.entries.front().copied() else {
                break;
            };
            log::warn!(
                "link backlog {} over its bound of {} bytes: dropping the oldest message ({} lines, {} bytes)",
                self.dir.display(),
                self.max_bytes,
                old.lines,
                old.bytes
            );
            self.remove_oldest()?;
            self.dropped += 1;
        }
        if e.bytes > self.max_bytes {
            log::warn!(
                "link backlog {}: a message of {} bytes exceeds the bound of {} bytes; dropped",
                self.dir.display(),
                e.bytes,
                self.max_bytes
            );
            self.dropped += 1;
            return Ok(());
        }
        let path = self.path(&e);
        let tmp = path.with_extension("tmp");
        let mut f = fs::File::create(&tmp)?;
        f.write_all(wire)?;
        f.sync_data()?;
        fs::rename(&tmp, &path)?;
        crawlfleet_core::checksum::wal::sync_parent(&path)?;
        self.next_seq += 1;
        self.bytes += e.bytes;
        self.entries.push_back(e);
        Ok(())
    }

    /// The oldest message and its bytes.
    pub fn oldest(&self) -> io::Result<Option<(Entry, Vec<u8>)>> {
        let Some(e) = self.entries.front().copied() else {
            return Ok(None);
        };
        Ok(Some((e, fs::read(self.path(&e))?)))
    }

    /// Forgets the oldest message (sent, or dropped).
    pub fn remove_oldest(&mut self) -> io::Result<()> {
        if let Some(e) = self.entries.pop_front() {
            self.bytes -= e.bytes;
            match fs::remove_file(self.path(&e)) {
                Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(err),
                _ => {}
            }
        }
        Ok(())
    }

    /// Messages kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Messages dropped over the bound since opening.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_messages_in_order_across_reopening_and_drops_the_oldest_over_the_bound() {
        let dir = std::env::temp_dir().join(format!("crawlfleet-backlog-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut b = Backlog::open(&dir, 25).unwrap();
        b.push(b"0123456789", 1).unwrap();
        b.push(b"abcdefghij", 2).unwrap();
        assert_eq!((b.len(), b.bytes(), b.dropped()), (2, 20, 0));
        drop(b);
        fs::write(dir.join("0000000000000009-1.tmp"), b"torn").unwrap();
        let mut b = Backlog::open(&dir, 25).unwrap();
        assert_eq!(b.len(), 2);
        assert!(!dir.join("0000000000000009-1.tmp").exists());
        b.push(b"ABCDEFGHIJ", 3).unwrap(); // 30 > 25: the oldest goes
        assert_eq!((b.len(), b.bytes(), b.dropped()), (2, 20, 1));
        let (e, bytes) = b.oldest().unwrap().unwrap();
        assert_eq!((e.lines, &bytes[..]), (2, &b"abcdefghij"[..]));
        b.remove_oldest().unwrap();
        assert_eq!(b.oldest().unwrap().unwrap().1, b"ABCDEFGHIJ");
        b.push(&[0u8; 40], 1).unwrap(); // larger than the bound itself
        assert_eq!((b.len(), b.dropped()), (0, 3));
        let _ = fs::remove_dir_all(&dir);
    }
}
