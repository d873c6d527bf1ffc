//! The robot side of RUP (draft-cosmo): a node scheduler's registrations with the RUP servers
//! of the sites it crawls, persisted on the record log, and what a report or a silence means
//! for one of them (3.3.3). Pure state: the node's `rup` thread makes the HTTP calls.
//!
//! A registration is one (collection, site) pair: the site is known by its URL base
//! (`http://host:port/`, the reports' URLBase), and holds the key the server answered
//! Register with, the latency asked for, the sequence number of the last report applied and
//! when it was applied. Every change is committed (fdatasync) before the caller goes on, so a
//! node that restarts neither registers again nor applies a report twice.

use std::collections::BTreeMap;
use std::path::Path;

use super::{Span, Unit};
use crate::recordlog::{put_bytes, Cur, Format, LogError, LogWriter, Options};

/// The file in the node's data directory.
pub const FILE: &str = "rup-robot.log";

const FORMAT: Format = Format {
    magic: b"CFRUPBOT1\n",
    name: "RUP robot",
    max_record: 1 << 20,
};

const PUT: u8 = 1;
const REMOVE: u8 = 2;

/// Seconds beyond two latency periods a registration may go without a report before the
/// robot asks what it missed (3.3.3 "a robot expects a report each period").
pub const SILENCE_MARGIN: i64 = 10;

/// One registration with a site's RUP server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The collection that crawls the site.
    pub collection: Vec<u8>,
    /// The site's URL base (`scheme://host[:port]/`): what the reports' URLBase names.
    pub url_base: String,
    /// The RUP-CGI URL of its rupinfo.txt.
    pub cgi_url: String,
    /// The address registered (RobotEmail).
    pub email: String,
    /// The RegistrationKey the server answered.
    pub key: String,
    /// The latency registered.
    pub latency: Span,
    /// MaxQuerySpan of its rupinfo.txt, when it said.
    pub max_query_span: Option<Span>,
    /// The sequence number of the last report applied (0: none yet).
    pub seq: u64,
    /// When the last report was applied, or the registration made, or the last recovery done
    /// (Unix seconds): what a GetIndex after a loss must reach back to.
    pub heard_at: i64,
}

impl Registration {
    /// Whether `uri` belongs to the site.
    pub fn covers(&self, uri: &[u8]) -> bool {
        uri.starts_with(self.url_base.as_bytes())
    }

    /// No report for two latency periods and [`SILENCE_MARGIN`] (3.3.3): time to ask
    /// GetSequenceNumber.
    pub fn overdue(&self, now: i64) -> bool {
        let period = self.latency.seconds() as i64;
        now > self.heard_at + 2 * period + SILENCE_MARGIN
    }

    /// The GetIndex span that covers what may have been missed at `now`: back to the last
    /// report applied, plus one latency period (a report may be sent a little after the
    /// changes it holds were seen), rounded up to whole units of the latency's unit (3.3.3:
    /// the overlap with what was applied is harmless, applying is idempotent). `None` when that
    /// reaches past the site's MaxQuerySpan: too far back for GetIndex.
    pub fn recovery_span(&self, now: i64) -> Option<Span> {
        let back = (now - self.heard_at).max(0) as u64 + self.latency.seconds();
        let unit = self.latency.unit;
        let count = back.div_ceil(unit.seconds()).max(1);
        let span = Span { count, unit };
        if count > super::MAX_COUNT {
            return None;
        }
        match self.max_query_span {
            Some(max) if span.seconds() > max.seconds() => None,
            _ => Some(span),
        }
    }
}

/// What a report's sequence number means to a registration (3.2, 3.3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Intake {
    /// Applied already (a report sent twice, or older than a recovery): dropped.
    Stale,
    /// The next one: applied.
    Next,
    /// Reports between the last applied and this one were lost: applied, then the gap is
    /// asked for with GetSequenceNumber and GetIndex.
    Gap,
}

/// How report `seq` stands against the last one applied, `last`.
pub fn intake(last: u64, seq: u64) -> Intake {
    if seq <= last {
        Intake::Stale
    } else if seq == last + 1 {
        Intake::Next
    } else {
        Intake::Gap
    }
}

/// The latency to ask a site for: `wanted` when its unit is offered, else the shortest unit
/// offered (3.1.2: a unit the server does not offer is refused); `None` when none is offered
/// (Register then leaves Latency out and the server picks).
pub fn pick_latency(offered: &[Unit], wanted: Option<Span>) -> Option<Span> {
    if let Some(w) = wanted {
        if offered.contains(&w.unit) {
            return Some(w);
        }
    }
    offered.iter().min().map(|&unit| Span { count: 1, unit })
}

/// The registrations, by (collection, URL base), with their log.
#[derive(Debug)]
pub struct Book {
    regs: BTreeMap<(Vec<u8>, String), Registration>,
    log: LogWriter,
}

fn encode(r: &Registration, out: &mut Vec<u8>) {
    out.push(PUT);
    put_bytes(out, &r.collection);
    put_bytes(out, r.url_base.as_bytes());
    put_bytes(out, r.cgi_url.as_bytes());
    put_bytes(out, r.email.as_bytes());
    put_bytes(out, r.key.as_bytes());
    put_span(out, Some(r.latency));
    put_span(out, r.max_query_span);
    out.extend_from_slice(&r.seq.to_le_bytes());
    out.extend_from_slice(&r.heard_at.to_le_bytes());
}

fn put_span(out: &mut Vec<u8>, s: Option<Span>) {
    match s {
        Some(s) => {
            out.push(1 + Unit::ALL.iter().position(|u| *u == s.unit).unwrap_or(0) as u8);
            out.extend_from_slice(&s.count.to_le_bytes());
        }
        None => out.push(0),
    }
}

fn span(c: &mut Cur<'_>) -> Option<Option<Span>> {
    match c.u8()? {
        0 => Some(None),
        u => {
            let unit = *Unit::ALL.get(usize::from(u) - 1)?;
            Some(Some(Span {
                count: c.u64()?,
                unit,
            }))
        }
    }
}

fn string(c: &mut Cur<'_>) -> Option<String> {
    String::from_utf8(c.bytes()?.to_vec()).ok()
}

fn decode_put(c: &mut Cur<'_>) -> Option<Registration> {
    Some(Registration {
        collection: c.bytes()?.to_vec(),
        url_base: string(c)?,
        cgi_url: string(c)?,
        email: string(c)?,
        key: string(c)?,
        latency: span(c)??,
        max_query_span: span(c)?,
        seq: c.u64()?,
        heard_at: c.u64()? as i64,
    })
}

fn encode_remove(collection: &[u8], url_base: &str, out: &mut Vec<u8>) {
    out.push(REMOVE);
    put_bytes(out, collection);
    put_bytes(out, url_base.as_bytes());
}

impl Book {
    /// Opens (creating) the book in `dir` and compacts its log.
    pub fn open(dir: &Path) -> Result<Book, LogError> {
        let mut regs = BTreeMap::new();
        let (log, _) = LogWriter::open(&dir.join(FILE), Options::new(FORMAT), |p| {
            let mut c = Cur(p);
            match c.u8() {
                Some(PUT) => match decode_put(&mut c) {
                    Some(r) if c.is_empty() => {
                        regs.insert((r.collection.clone(), r.url_base.clone()), r);
                        true
                    }
                    _ => false,
                },
                Some(REMOVE) => match (c.bytes(), c.bytes()) {
                    (Some(n), Some(b)) if c.is_empty() => {
                        regs.remove(&(n.to_vec(), String::from_utf8_lossy(b).into_owned()));
                        true
                    }
                    _ => false,
                },
                _ => false,
            }
        })?;
        let mut book = Book { regs, log };
        let regs = &book.regs;
        book.log.compact(|c| {
            for r in regs.values() {
                c.record(|out| encode(r, out))?;
            }
            Ok(())
        })?;
        Ok(book)
    }

    /// The registration of `collection` with the site at `url_base`.
    pub fn get(&self, collection: &[u8], url_base: &str) -> Option<&Registration> {
        self.regs.get(&(collection.to_vec(), url_base.to_owned()))
    }

    /// Every registration, by collection then URL base.
    pub fn all(&self) -> impl Iterator<Item = &Registration> {
        self.regs.values()
    }

    /// The registrations a report with URLBase `url_base` is for (one per collection that
    /// registered with the site).
    pub fn for_url_base(&self, url_base: &str) -> Vec<Registration> {
        self.regs
            .values()
            .filter(|r| r.url_base == url_base)
            .cloned()
            .collect()
    }

    /// Writes `r` durably (its collection and URL base name it).
    pub fn put(&mut self, r: Registration) -> Result<(), LogError> {
        self.log.append_with(|out| encode(&r, out));
        self.commit()?;
        self.regs
            .insert((r.collection.clone(), r.url_base.clone()), r);
        Ok(())
    }

    /// Takes `r` at once (what [`Book::for_url_base`] and [`Book::get`] answer) and appends
    /// it to the log without a commit: durable with the next [`Book::commit_staged`] (or any
    /// [`Book::put`] / [`Book::remove`]). Lets a batch of reports cost one fdatasync.
    pub fn stage(&mut self, r: Registration) {
        self.log.append_with(|out| encode(&r, out));
        self.regs
            .insert((r.collection.clone(), r.url_base.clone()), r);
    }

    /// Makes what [`Book::stage`] took durable (nothing to do: no write).
    pub fn commit_staged(&mut self) -> Result<(), LogError> {
        self.commit()
    }

    /// Removes a registration durably.
    pub fn remove(&mut self, collection: &[u8], url_base: &str) -> Result<(), LogError> {
        self.log
            .append_with(|out| encode_remove(collection, url_base, out));
        self.commit()?;
        self.regs
            .remove(&(collection.to_vec(), url_base.to_owned()));
        Ok(())
    }

    fn commit(&mut self) -> Result<(), LogError> {
        let r = self.log.commit();
        if r.is_err() {
            // Not durable: not done; the state stays as it was.
            self.log.discard_pending();
        }
        r
    }
}
