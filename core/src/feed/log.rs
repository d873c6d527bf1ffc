//! The durable document log of a collection: append-only, checksummed, in segments.
//!
//! A directory holds segments `00000001.log`, `00000002.log`, ... Each starts with a 16-byte
//! header — the magic `CFDOCS01` and the sequence number of its first record (u64 LE) — followed
//! by checked records (`recordlog` framing) whose payloads are [`FeedDoc`] records numbered
//! one after the other. The segments are written through [`LogWriter`]: its group commit, its
//! segment rotation (a segment is committed before the next one is created, so only the newest
//! can have a torn tail; opening the log cuts it there, with a warning, and numbering goes on
//! from the last intact record) and its handling of a full disk (a failed write or sync is cut
//! back and its records stay queued for the next sync).

use std::fs::{self, File};
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use log::warn;

use super::{io_err, FeedDoc, FeedError, FeedSink, MAX_RECORD};
use crate::recordlog::{
    read_next, sync_dir, Commit, Format, LogError, LogWriter, Next, Options, HEADER,
};

const MAGIC: &[u8; 8] = b"CFDOCS01";
/// Bytes of a segment header.
const SEGMENT_HEADER: u64 = 16;
/// Queued bytes written to the file (without waiting for the disk) at once.
const WRITE_CHUNK: usize = 1 << 20;

/// How a document log is cut into segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DocLogOptions {
    /// A new segment starts when a record would take the current one past this size (a
    /// segment holds at least one record, however large).
    pub segment_bytes: u64,
}

impl Default for DocLogOptions {
    fn default() -> Self {
        DocLogOptions {
            segment_bytes: 64 << 20,
        }
    }
}

/// The file name of segment `n`.
fn segment_name(n: u32) -> String {
    format!("{n:08}.log")
}

/// The segments of `dir`, by number. A missing directory is an error.
fn segments(dir: &Path) -> Result<Vec<(u32, PathBuf)>, FeedError> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).map_err(io_err(dir))? {
        let e = e.map_err(io_err(dir))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(num) = name.strip_suffix(".log") else {
            continue;
        };
        if num.len() == 8 && num.bytes().all(|b| b.is_ascii_digit()) {
            if let Ok(n) = num.parse() {
                out.push((n, e.path()));
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The first sequence number in a segment header; `Ok(None)` when the file is shorter than a
/// header (a segment torn at its creation).
fn read_header(path: &Path) -> Result<Option<u64>, FeedError> {
    let mut f = File::open(path).map_err(io_err(path))?;
    let mut h = [0u8; SEGMENT_HEADER as usize];
    let mut got = 0;
    while got < h.len() {
        match f.read(&mut h[got..]).map_err(io_err(path))? {
            0 => return Ok(None),
            n => got += n,
        }
    }
    if &h[..8] != MAGIC {
        return Err(FeedError::Corrupt {
            path: path.to_path_buf(),
            offset: 0,
            what: "not a document log segment (bad magic)",
        });
    }
    let mut first = [0u8; 8];
    first.copy_from_slice(&h[8..]);
    Ok(Some(u64::from_le_bytes(first)))
}

/// Reads the records of one segment in order, checking their numbering.
struct SegmentReader {
    path: PathBuf,
    r: BufReader<File>,
    /// Bytes of the file not read yet.
    remaining: u64,
    /// Offset of the next record.
    offset: u64,
    /// Sequence number the next record must carry.
    expect: u64,
}

/// What a segment's next record is.
enum Step {
    Doc(u64, FeedDoc),
    End,
    /// A torn or damaged record at `offset`.
    Torn(u64, &'static str),
}

impl SegmentReader {
    /// Opens a segment whose header says it starts at `first`.
    fn open(path: &Path, first: u64) -> Result<SegmentReader, FeedError> {
        let f = File::open(path).map_err(io_err(path))?;
        let len = f.metadata().map_err(io_err(path))?.len();
        let mut r = BufReader::with_capacity(1 << 20, f);
        let mut skip = [0u8; SEGMENT_HEADER as usize];
        r.read_exact(&mut skip).map_err(io_err(path))?;
        Ok(SegmentReader {
            path: path.to_path_buf(),
            r,
            remaining: len - SEGMENT_HEADER,
            offset: SEGMENT_HEADER,
            expect: first,
        })
    }

    fn next(&mut self, payload: &mut Vec<u8>) -> Result<Step, FeedError> {
        match read_next(&mut self.r, self.remaining, MAX_RECORD, payload)
            .map_err(io_err(&self.path))?
        {
            Next::End => return Ok(Step::End),
            Next::Torn(why) => return Ok(Step::Torn(self.offset, why)),
            Next::Record => {}
        }
        let Some((seq, doc)) = FeedDoc::decode(payload) else {
            return Ok(Step::Torn(self.offset, "malformed document record"));
        };
        if seq != self.expect {
            return Ok(Step::Torn(self.offset, "out-of-order sequence number"));
        }
        let used = (HEADER + payload.len()) as u64;
        self.remaining -= used;
        self.offset += used;
        self.expect += 1;
        Ok(Step::Doc(seq, doc))
    }
}

/// The durable document log of a collection; see the module documentation.
pub struct DocLog {
    dir: PathBuf,
    opts: DocLogOptions,
    /// The current segment's number.
    segment: u32,
    /// The current segment, written through the record log: its records are queued, written
    /// a chunk at a time and committed by [`FeedSink::sync`].
    w: LogWriter,
    first_seq: u64,
    next_seq: u64,
    /// Every document numbered below this is durable (the log's next sequence number after
    /// the last successful sync, or when it was opened).
    durable_seq: u64,
}

/// How a segment is written: its magic (the sequence number that follows is the rest of the
/// head [`LogWriter::create`] writes), records up to [`MAX_RECORD`], synced pages further than
/// [`FOLLOW_TAIL`] behind the end dropped from the page cache.
const WRITER: Options = Options::new(Format {
    magic: MAGIC,
    name: "document log segment",
    max_record: MAX_RECORD,
})
.cache_tail(FOLLOW_TAIL);

/// Bytes at a segment's end kept in the page cache after a sync: a feed that follows the log
/// (the node's session sink reads each document once it is durable, a batch of up to 4 MiB at
/// a time for each destination) finds them there; what lies further back is read again only by
/// a feed that fell behind, or at the next opening. A quarter of a segment
/// ([`DocLogOptions::segment_bytes`]), whose last tail stays cached once the log moves on.
const FOLLOW_TAIL: u64 = 16 << 20;

/// The head of a segment whose first record is `first_seq`.
fn segment_head(first_seq: u64) -> [u8; SEGMENT_HEADER as usize] {
    let mut h = [0u8; SEGMENT_HEADER as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..].copy_from_slice(&first_seq.to_le_bytes());
    h
}

fn log_err(e: LogError) -> FeedError {
    FeedError::Io {
        path: e.path,
        error: e.error,
    }
}

impl DocLog {
    /// Opens (creating) the log in `dir` with the default [`DocLogOptions`].
    pub fn open(dir: &Path) -> Result<DocLog, FeedError> {
        DocLog::open_with(dir, DocLogOptions::default())
    }

    /// Opens (creating) the log in `dir`: cuts a torn tail of the newest segment and goes on
    /// numbering after its last intact record. The directory and its first segment are durable
    /// when this returns.
    pub fn open_with(dir: &Path, opts: DocLogOptions) -> Result<DocLog, FeedError> {
        let created = !dir.exists();
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        if created {
            if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent).map_err(io_err(parent))?;
            }
        }
        let mut segs = segments(dir)?;
        let first_seq = match segs.first() {
            Some((_, p)) => read_header(p)?.unwrap_or(1),
            None => 1,
        };
        // The newest segment with a complete header, and where numbering goes on.
        let mut current = None;
        while let Some((n, path)) = segs.pop() {
            match read_header(&path)? {
                Some(first) => {
                    current = Some((n, path, first));
                    break;
                }
                None => {
                    warn!("{}: segment torn at its creation, removed", path.display());
                    fs::remove_file(&path).map_err(io_err(&path))?;
                    sync_dir(dir).map_err(io_err(dir))?;
                }
            }
        }
        let (segment, w, next_seq) = match current {
            Some((n, path, first)) => {
                let mut r = SegmentReader::open(&path, first)?;
                let mut payload = Vec::new();
                loop {
                    match r.next(&mut payload)? {
                        Step::Doc(..) => {}
                        Step::End => break,
                        Step::Torn(at, why) => {
                            warn!("{}: {why} at offset {at}: tail cut", path.display());
                            break;
                        }
                    }
                }
                // Cuts what follows the last intact record, durably.
                let w = LogWriter::open_at(&path, r.offset, WRITER).map_err(log_err)?;
                (n, w, r.expect)
            }
            None => {
                let path = dir.join(segment_name(1));
                let w =
                    LogWriter::create(&path, &segment_head(first_seq), WRITER).map_err(log_err)?;
                (1, w, first_seq)
            }
        };
        Ok(DocLog {
            dir: dir.to_path_buf(),
            opts,
            segment,
            w,
            first_seq,
            next_seq,
            durable_seq: next_seq,
        })
    }

    /// The sequence number the next document gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Every document numbered below this is durable: what a reader may hand on to a peer
    /// that must not see a document vanish (a document read before its sync can be lost in a
    /// crash, and its sequence number given to another one).
    pub fn durable_seq(&self) -> u64 {
        self.durable_seq
    }

    /// The sequence number of the oldest document the log holds (or would hold).
    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    /// Documents in the log.
    pub fn len(&self) -> u64 {
        self.next_seq - self.first_seq
    }

    /// True when the log holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Commits the current segment and goes on in the next one, which starts at the next
    /// sequence number. On an error the log goes on in the current segment; a next segment
    /// that may have been created is removed, so that no segment starts at a number the
    /// current one goes on to hold.
    fn roll_over(&mut self) -> Result<(), FeedError> {
        let segment = self.segment + 1;
        let path = self.dir.join(segment_name(segment));
        match self.w.rotate_to(&path, &segment_head(self.next_seq)) {
            Ok(()) => {
                self.segment = segment;
                Ok(())
            }
            Err(e) => {
                if self.w.path() != path {
                    let _ = fs::remove_file(&path);
                }
                Err(log_err(e))
            }
        }
    }
}

impl FeedSink for DocLog {
    /// Appends the document; returns its sequence number. Refuses one over the limits
    /// ([`FeedDoc::validate`]) without changing the log.
    fn feed(&mut self, doc: &FeedDoc) -> Result<u64, FeedError> {
        doc.validate()?;
        let seq = self.next_seq;
        let seg_len = self.w.len() + self.w.pending_bytes() as u64;
        if seg_len > SEGMENT_HEADER
            && seg_len + (HEADER + doc.encoded_len()) as u64 > self.opts.segment_bytes
        {
            match self.roll_over() {
                // A full disk: the document stays in the current segment, queued (which then
                // grows past its size); the next document tries the new segment again.
                Err(e) if e.is_disk_full() => {}
                r => r?,
            }
        }
        // Encoded straight into the writer's queue: the body is copied once here.
        self.w.append_with(|out| doc.encode(seq, out));
        self.next_seq += 1;
        // A full disk leaves the records queued: fed all the same, the next sync reports it.
        self.w.write_over(WRITE_CHUNK).map_err(log_err)?;
        Ok(seq)
    }

    /// Writes and fdatasyncs every document fed so far. A failure leaves them queued, to be
    /// written again by the next sync.
    fn sync(&mut self) -> Result<(), FeedError> {
        let mut c = self.sync_begin()?;
        c.commit.iter_mut().for_each(Commit::run);
        self.sync_end(c)
    }
}

/// A sync of a document log begun ([`DocLog::sync_begin`]): the commit to run, and the
/// sequence number below which its documents are durable once it has.
#[derive(Debug)]
pub struct DocCommit {
    commit: Option<Commit>,
    seq: u64,
}

impl DocCommit {
    /// The commit to run ([`crate::recordlog::run_commits`]), if anything was unsynced.
    pub fn commit_mut(&mut self) -> Option<&mut Commit> {
        self.commit.as_mut()
    }
}

impl DocLog {
    /// [`FeedSink::sync`] in two halves: writes every document fed so far and returns the
    /// commit to run, settled by [`DocLog::sync_end`].
    pub fn sync_begin(&mut self) -> Result<DocCommit, FeedError> {
        Ok(DocCommit {
            commit: self.w.commit_begin().map_err(log_err)?,
            seq: self.next_seq,
        })
    }

    /// Settles the sync of [`DocLog::sync_begin`]: its documents are durable, or, when the
    /// sync failed, queued to be written again by the next sync.
    pub fn sync_end(&mut self, c: DocCommit) -> Result<(), FeedError> {
        if let Some(commit) = c.commit {
            self.w.commit_end(commit).map_err(log_err)?;
        }
        self.durable_seq = c.seq;
        Ok(())
    }
}

impl Drop for DocLog {
    /// A clean close makes everything durable; a failure is logged.
    fn drop(&mut self) {
        if let Err(e) = FeedSink::sync(self) {
            warn!("closing the document log: {e}");
        }
    }
}

/// Reads a document log in order, one record at a time (nothing else is held in memory). It
/// reads the segments that existed when it was opened; a torn or half-written record at the end
/// of the newest is the end, anywhere else it is [`FeedError::Corrupt`].
pub struct DocLogReader {
    dir: PathBuf,
    segments: Vec<(u64, PathBuf)>,
    /// Index of the segment after the current one.
    next_segment: usize,
    cur: Option<SegmentReader>,
    /// The number the next segment must start at (after the first segment read).
    expect: Option<u64>,
    from: u64,
    payload: Vec<u8>,
    done: bool,
}

impl DocLogReader {
    /// Reads the log in `dir` from its first document.
    pub fn open(dir: &Path) -> Result<DocLogReader, FeedError> {
        DocLogReader::open_from(dir, 0)
    }

    /// Reads the log in `dir` from sequence number `from` (documents before it are skipped;
    /// whole segments before it are not read).
    pub fn open_from(dir: &Path, from: u64) -> Result<DocLogReader, FeedError> {
        let mut segs = Vec::new();
        for (_, path) in segments(dir)? {
            if let Some(first) = read_header(&path)? {
                segs.push((first, path));
            }
        }
        // Start at the newest segment whose first document is not after `from`.
        let start = segs
            .iter()
            .rposition(|(first, _)| *first <= from)
            .unwrap_or(0);
        Ok(DocLogReader {
            dir: dir.to_path_buf(),
            segments: segs,
            next_segment: start,
            cur: None,
            expect: None,
            from,
            payload: Vec::new(),
            done: false,
        })
    }

    /// Goes on reading what the log's writer added since the reader came to its end: the
    /// newest segment's records written since, and the segments created since. A record the
    /// reader found half-written is read again from its start. For a reader that follows a
    /// live log (the session sink), which reads only records it knows are complete.
    pub fn follow(&mut self) -> Result<(), FeedError> {
        let Some(cur) = &mut self.cur else {
            // Nothing read yet: start again, seeing the segments there are now.
            *self = DocLogReader::open_from(&self.dir, self.from)?;
            return Ok(());
        };
        let mut segs = Vec::new();
        for (_, path) in segments(&self.dir)? {
            if let Some(first) = read_header(&path)? {
                segs.push((first, path));
            }
        }
        let len = fs::metadata(&cur.path).map_err(io_err(&cur.path))?.len();
        cur.r
            .seek(SeekFrom::Start(cur.offset))
            .map_err(io_err(&cur.path))?;
        // A writer cutting a failed write back can leave the file shorter for a moment.
        cur.remaining = len.saturating_sub(cur.offset);
        if let Some(i) = segs.iter().position(|(_, p)| *p == cur.path) {
            self.next_segment = i + 1;
            self.segments = segs;
        }
        self.done = false;
        Ok(())
    }

    fn step(&mut self) -> Result<Option<(u64, FeedDoc)>, FeedError> {
        loop {
            let Some(cur) = &mut self.cur else {
                let Some((first, path)) = self.segments.get(self.next_segment) else {
                    return Ok(None);
                };
                if self.expect.is_some_and(|e| e != *first) {
                    return Err(FeedError::Corrupt {
                        path: path.clone(),
                        offset: 8,
                        what: "segment does not start where the previous one ended",
                    });
                }
                self.cur = Some(SegmentReader::open(path, *first)?);
                self.next_segment += 1;
                continue;
            };
            let newest = self.next_segment == self.segments.len();
            match cur.next(&mut self.payload)? {
                Step::Doc(seq, _) if seq < self.from => {}
                Step::Doc(seq, doc) => return Ok(Some((seq, doc))),
                Step::End if newest => return Ok(None),
                Step::End => {
                    self.expect = Some(cur.expect);
                    self.cur = None;
                }
                Step::Torn(..) if newest => return Ok(None),
                Step::Torn(offset, what) => {
                    return Err(FeedError::Corrupt {
                        path: cur.path.clone(),
                        offset,
                        what,
                    })
                }
            }
        }
    }
}

impl Iterator for DocLogReader {
    type Item = Result<(u64, FeedDoc), FeedError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.step().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}
