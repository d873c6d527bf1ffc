//! The WARC writer of one directory: files opened with a warcinfo record, exchanges written as
//! response (or revisit) and request records, rotation at a size, the CDXJ index at close, and
//! the recovery of a file a crash left open.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use super::cdxj::{status_text, CdxEntry};
use super::record::{gzip_member, parse_response, record_bytes};
use super::{
    record_id, sha1_base32, timestamp14, timestamp17, warc_date, Exchange, PROFILE_IDENTICAL,
    PROFILE_NOT_MODIFIED,
};

/// Suffix of a file being written.
const OPEN: &str = ".open";
/// Suffix of a closed WARC file.
const WARC_GZ: &str = ".warc.gz";
/// Most decompressed bytes of a member read to index it on recovery (the WARC and HTTP heads).
const INDEX_PEEK: u64 = 64 << 10;

/// Settings of a [`WarcWriter`].
#[derive(Clone, Debug)]
pub struct WarcOptions {
    /// The directory, owned by this writer alone (it recovers the `.open` files it finds).
    pub dir: PathBuf,
    /// The file names' prefix.
    pub prefix: String,
    /// A file is closed and the next one opened once it reaches this size. Default 1 GB.
    pub max_size: u64,
    /// The host name in file names and the warcinfo record.
    pub hostname: String,
    /// More `name: value` fields of the warcinfo record (`isPartOf`, `operator`...).
    pub info: Vec<(String, String)>,
    /// Most payload digests and most URIs remembered for revisit records. Default 1 Mi each.
    pub memory: usize,
}

impl WarcOptions {
    /// The defaults for `dir`, `prefix` and `hostname`.
    pub fn new(dir: impl Into<PathBuf>, prefix: &str, hostname: &str) -> WarcOptions {
        WarcOptions {
            dir: dir.into(),
            prefix: prefix.to_string(),
            max_size: 1_000_000_000,
            hostname: hostname.to_string(),
            info: Vec::new(),
            memory: 1 << 20,
        }
    }
}

/// What a writer has written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WarcStats {
    /// Records written (warcinfo, request, response, revisit).
    pub records: u64,
    /// Compressed bytes written.
    pub bytes: u64,
    /// Revisit records among them.
    pub revisits: u64,
    /// Files closed.
    pub files: u64,
}

/// An earlier capture a revisit refers to (WARC 1.1 5.11, 5.12, 5.13).
#[derive(Clone, Debug)]
struct Capture {
    uri: String,
    date: String,
    id: String,
    digest: String,
}

/// The file being written.
#[derive(Debug)]
struct Current {
    file: File,
    path: PathBuf,
    name: String,
    size: u64,
    info_id: String,
    index: Vec<CdxEntry>,
}

/// Writes the WARC files of one directory. See the module documentation.
#[derive(Debug)]
pub struct WarcWriter {
    opts: WarcOptions,
    current: Option<Current>,
    serial: u64,
    by_digest: HashMap<String, Capture>,
    by_uri: HashMap<String, Capture>,
    stats: WarcStats,
}

impl WarcWriter {
    /// Creates the directory if needed and recovers the files a crash left open in it
    /// ([`recover`]); the next file's serial follows the highest one there.
    pub fn open(opts: WarcOptions) -> io::Result<WarcWriter> {
        fs::create_dir_all(&opts.dir)?;
        let mut serial = 0;
        for e in fs::read_dir(&opts.dir)? {
            let name = e?.file_name().to_string_lossy().into_owned();
            if name.ends_with(&format!("{WARC_GZ}{OPEN}")) {
                recover(&opts.dir.join(&name))?;
            }
            if let Some(s) = serial_of(&name, &opts.prefix) {
                serial = serial.max(s + 1);
            }
        }
        Ok(WarcWriter {
            opts,
            current: None,
            serial,
            by_digest: HashMap::new(),
            by_uri: HashMap::new(),
            stats: WarcStats::default(),
        })
    }

    /// What was written so far.
    pub fn stats(&self) -> WarcStats {
        self.stats
    }

    /// Writes an exchange: its response (or revisit) record and its request record, in one
    /// write to the current file, opening a new file first when the current one reached the
    /// size limit. A failed write is cut back off the file.
    pub fn write(&mut self, ex: &Exchange) -> io::Result<()> {
        if self
            .current
            .as_ref()
            .is_some_and(|c| c.size >= self.opts.max_size)
        {
            self.close()?;
        }
        if self.current.is_none() {
            self.start_file(ex.date_ms)?;
        }
        let (bytes, entry, capture, revisit) = self.members(ex);
        let Some(cur) = &mut self.current else {
            return Err(io::Error::other("no WARC file open"));
        };
        if let Err(e) = cur.file.write_all(&bytes) {
            // Leave only whole members behind: a reader would stop at a torn one.
            let _ = cur.file.set_len(cur.size);
            return Err(e);
        }
        let mut entry = entry;
        entry.offset = cur.size;
        cur.size += bytes.len() as u64;
        cur.index.push(entry);
        self.stats.records += 2;
        self.stats.revisits += u64::from(revisit);
        self.stats.bytes += bytes.len() as u64;
        if let Some(c) = capture {
            let full = self.by_uri.len() >= self.opts.memory;
            if !full || self.by_uri.contains_key(&c.uri) {
                self.by_uri.insert(c.uri.clone(), c.clone());
            }
            if self.by_digest.len() < self.opts.memory {
                self.by_digest.entry(c.digest.clone()).or_insert(c);
            }
        }
        Ok(())
    }

    /// Makes what was written durable (fdatasync of the open file).
    pub fn sync(&mut self) -> io::Result<()> {
        match &self.current {
            Some(c) => c.file.sync_data(),
            None => Ok(()),
        }
    }

    /// Closes the open file, if any: syncs it, writes and syncs its CDXJ index, then renames it
    /// to its final name. The next write opens a new file.
    pub fn close(&mut self) -> io::Result<()> {
        let Some(cur) = self.current.take() else {
            return Ok(());
        };
        cur.file.sync_all()?;
        let mut index = cur.index;
        index.sort_by(|a, b| {
            (&a.surt, &a.timestamp, a.offset).cmp(&(&b.surt, &b.timestamp, b.offset))
        });
        write_index(&self.opts.dir, &cur.name, &index)?;
        fs::rename(&cur.path, self.opts.dir.join(&cur.name))?;
        sync_dir(&self.opts.dir)?;
        self.stats.files += 1;
        Ok(())
    }

    /// Opens the next file and writes its warcinfo record (WARC 1.1 6.2).
    fn start_file(&mut self, date_ms: i64) -> io::Result<()> {
        let name = format!(
            "{}-{}-{:05}-{}{WARC_GZ}",
            self.opts.prefix,
            timestamp17(date_ms),
            self.serial,
            self.opts.hostname
        );
        self.serial += 1;
        let path = self.opts.dir.join(format!("{name}{OPEN}"));
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)?;
        let mut fields = format!(
            "software: crawlfleet/{}\r\nformat: WARC File Format 1.1\r\n\
             conformsTo: http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\n\
             hostname: {}\r\n",
            env!("CARGO_PKG_VERSION"),
            self.opts.hostname
        );
        for (k, v) in &self.opts.info {
            fields.push_str(&format!("{k}: {v}\r\n"));
        }
        let info_id = record_id();
        let block = fields.as_bytes();
        let digest = sha1_base32(&[block]);
        let date = warc_date(date_ms);
        let rec = record_bytes(
            &[
                ("WARC-Type", "warcinfo"),
                ("WARC-Record-ID", &info_id),
                ("WARC-Date", &date),
                ("WARC-Filename", &name),
                ("WARC-Block-Digest", &digest),
                ("Content-Type", "application/warc-fields"),
            ],
            &[block],
        );
        let member = gzip_member(&rec);
        if let Err(e) = file.write_all(&member) {
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        self.stats.records += 1;
        self.stats.bytes += member.len() as u64;
        self.current = Some(Current {
            file,
            path,
            name,
            size: member.len() as u64,
            info_id,
            index: Vec::new(),
        });
        Ok(())
    }

    /// The gzip members of an exchange (response or revisit, then request), its index entry
    /// (offset still 0), the capture to remember, and whether it is a revisit.
    fn members(&self, ex: &Exchange) -> (Vec<u8>, CdxEntry, Option<Capture>, bool) {
        let info_id = self.current.as_ref().map_or("", |c| c.info_id.as_str());
        let http = parse_response(&ex.response);
        let response = &ex.response[http.start..];
        let head = &ex.response[http.start..http.body];
        let payload = &ex.response[http.body..];
        let id = record_id();
        let date = warc_date(ex.date_ms);
        let ip = ex.ip.map(|a| a.to_string());
        let payload_digest = sha1_base32(&[payload]);
        let earlier = if http.status == 304 {
            // WARC 1.1 6.7.2: the earlier capture of the same URI, when this writer made it.
            Some(self.by_uri.get(&ex.uri))
        } else if !payload.is_empty() && !ex.truncated && http.status != 0 {
            self.by_digest.get(&payload_digest).map(Some)
        } else {
            None
        };
        let mut f: Vec<(&str, &str)> = vec![
            (
                "WARC-Type",
                if earlier.is_some() {
                    "revisit"
                } else {
                    "response"
                },
            ),
            ("WARC-Record-ID", &id),
            ("WARC-Date", &date),
            ("WARC-Target-URI", &ex.uri),
        ];
        if let Some(ip) = &ip {
            f.push(("WARC-IP-Address", ip));
        }
        if !info_id.is_empty() {
            f.push(("WARC-Warcinfo-ID", info_id));
        }
        let block: &[u8];
        let digest_field;
        match earlier {
            Some(known) => {
                let profile = if http.status == 304 {
                    block = response;
                    PROFILE_NOT_MODIFIED
                } else {
                    // WARC 1.1 6.7.1: the payload is left out; the block is the HTTP head.
                    block = head;
                    PROFILE_IDENTICAL
                };
                f.push(("WARC-Profile", profile));
                if let Some(k) = known {
                    f.push(("WARC-Refers-To", &k.id));
                    f.push(("WARC-Refers-To-Target-URI", &k.uri));
                    f.push(("WARC-Refers-To-Date", &k.date));
                }
                // The payload digest a revisit names is the earlier capture's (6.7); a 304
                // whose earlier capture is unknown names none.
                digest_field = known.map(|k| k.digest.clone());
            }
            None => {
                block = response;
                if ex.truncated {
                    f.push(("WARC-Truncated", "length"));
                }
                digest_field = Some(payload_digest.clone());
            }
        }
        if let Some(d) = &digest_field {
            f.push(("WARC-Payload-Digest", d));
        }
        let block_digest = sha1_base32(&[block]);
        f.push(("WARC-Block-Digest", &block_digest));
        f.push(("Content-Type", "application/http;msgtype=response"));
        let mut bytes = gzip_member(&record_bytes(&f, &[block]));
        let length = bytes.len() as u64;

        let req_id = record_id();
        let req_digest = sha1_base32(&[&ex.request]);
        let mut r: Vec<(&str, &str)> = vec![
            ("WARC-Type", "request"),
            ("WARC-Record-ID", &req_id),
            ("WARC-Date", &date),
            ("WARC-Target-URI", &ex.uri),
        ];
        if let Some(ip) = &ip {
            r.push(("WARC-IP-Address", ip));
        }
        r.push(("WARC-Concurrent-To", &id));
        if !info_id.is_empty() {
            r.push(("WARC-Warcinfo-ID", info_id));
        }
        r.push(("WARC-Block-Digest", &req_digest));
        r.push(("Content-Type", "application/http;msgtype=request"));
        bytes.extend_from_slice(&gzip_member(&record_bytes(&r, &[&ex.request])));

        let revisit = earlier.is_some();
        let entry = CdxEntry {
            surt: super::surt(&ex.uri),
            timestamp: timestamp14(ex.date_ms),
            url: ex.uri.clone(),
            mime: if revisit {
                "warc/revisit".into()
            } else {
                http.mime
            },
            status: status_text(http.status),
            digest: digest_field
                .as_deref()
                .map_or("-", |d| d.strip_prefix("sha1:").unwrap_or(d))
                .to_string(),
            length,
            offset: 0,
            filename: self
                .current
                .as_ref()
                .map_or(String::new(), |c| c.name.clone()),
        };
        // Only a full response is an earlier capture later revisits refer to.
        let capture = (!revisit && (200..300).contains(&http.status)).then(|| Capture {
            uri: ex.uri.clone(),
            date,
            id,
            digest: payload_digest,
        });
        (bytes, entry, capture, revisit)
    }
}

impl Drop for WarcWriter {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            log::warn!("WARC: closing {} failed: {e}", self.opts.dir.display());
        }
    }
}

/// The serial of a file name of this prefix (`PREFIX-TIMESTAMP-SERIAL-HOST.warc.gz[.open]`).
fn serial_of(name: &str, prefix: &str) -> Option<u64> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let mut parts = rest.splitn(3, '-');
    let ts = parts.next()?;
    let serial = parts.next()?;
    (ts.len() == 17 && ts.bytes().all(|b| b.is_ascii_digit()))
        .then(|| serial.parse().ok())
        .flatten()
}

/// Writes `NAME.cdxj` (NAME without `.warc.gz`) through a temporary file, synced.
fn write_index(dir: &Path, warc_name: &str, index: &[CdxEntry]) -> io::Result<()> {
    let stem = warc_name.strip_suffix(WARC_GZ).unwrap_or(warc_name);
    let tmp = dir.join(format!("{stem}.cdxj.tmp"));
    let mut out = String::new();
    for e in index {
        out.push_str(&e.line());
        out.push('\n');
    }
    let mut f = File::create(&tmp)?;
    f.write_all(out.as_bytes())?;
    f.sync_all()?;
    fs::rename(&tmp, dir.join(format!("{stem}.cdxj")))
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// A `BufRead` that counts the bytes consumed from it.
struct Counting<R> {
    inner: R,
    pos: u64,
}

impl<R: BufRead> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, n: usize) {
        self.pos += n as u64;
        self.inner.consume(n);
    }
}

/// Recovers a WARC file a crash left `.open`: keeps its whole gzip members and cuts off a torn
/// last one, writes the CDXJ index of what is left, and renames it to its final name (or
/// removes it when not one member is whole). Returns the number of members kept.
pub fn recover(open_path: &Path) -> io::Result<u64> {
    let dir = open_path.parent().unwrap_or(Path::new("."));
    let file_name = open_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let name = file_name
        .as_deref()
        .and_then(|n| n.strip_suffix(OPEN))
        .ok_or_else(|| io::Error::other("not a .open WARC file"))?
        .to_string();
    let mut input = Counting {
        inner: BufReader::new(File::open(open_path)?),
        pos: 0,
    };
    let (mut good, mut members, mut index) = (0u64, 0u64, Vec::new());
    loop {
        if input.fill_buf()?.is_empty() {
            break;
        }
        let start = input.pos;
        let mut head = Vec::new();
        let mut d = flate2::bufread::GzDecoder::new(&mut input);
        let whole = (&mut d).take(INDEX_PEEK).read_to_end(&mut head).is_ok()
            && io::copy(&mut d, &mut io::sink()).is_ok();
        drop(d);
        if !whole || head.is_empty() {
            break;
        }
        good = input.pos;
        members += 1;
        if let Some(e) = CdxEntry::from_record(&head, start, good - start, &name) {
            index.push(e);
        }
    }
    if members == 0 {
        fs::remove_file(open_path)?;
        return sync_dir(dir).map(|()| 0);
    }
    let f = OpenOptions::new().write(true).open(open_path)?;
    f.set_len(good)?;
    f.sync_all()?;
    index.sort_by(|a, b| (&a.surt, &a.timestamp, a.offset).cmp(&(&b.surt, &b.timestamp, b.offset)));
    write_index(dir, &name, &index)?;
    fs::rename(open_path, dir.join(&name))?;
    sync_dir(dir)?;
    Ok(members)
}
