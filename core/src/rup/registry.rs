//! The registered robots (draft-cosmo 3.1.2, 3.3.1, 3.3.2), persisted on the record log.
//!
//! Every change writes the robot's whole record (or its removal) and is committed (fdatasync)
//! before the caller answers, so an answered Register, ModifyPreferences or Unregister, and a
//! report counted as sent, survive a crash. Opening replays the log and rewrites it with the
//! live records only.
//!
//! One robot per address: a Register of an address already registered replaces it, with a new
//! key; the old key no longer works (3.1.2 says a lost key needs human intervention; this is
//! ours, so that a robot that lost its key can start over, and a stranger registering the same
//! address does no more than the robot itself could).

use std::collections::HashMap;
use std::path::Path;

use super::{Span, Unit};
use crate::recordlog::{put_bytes, Cur, Format, LogError, LogWriter, Options};

/// The registry's file in the data directory.
pub const FILE: &str = "rup-robots.log";

const FORMAT: Format = Format {
    magic: b"CFRUPREG1\n",
    name: "RUP registry",
    max_record: 1 << 20,
};

const PUT: u8 = 1;
const REMOVE: u8 = 2;

/// A robot's patterns: none, an Exclude list or an IncludeOnly list (never both, 3.1.2).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Patterns {
    /// Every path.
    #[default]
    None,
    /// Every path but those matching one of these.
    Exclude(Vec<String>),
    /// Only the paths matching one of these.
    IncludeOnly(Vec<String>),
}

/// One registered robot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Robot {
    /// Its registration key (random, from the shell).
    pub key: String,
    /// Where its reports go.
    pub email: String,
    /// Time between two reports.
    pub latency: Span,
    /// Which paths it hears of.
    pub patterns: Patterns,
    /// The sequence number of the last report sent (0: none yet; the first is 1).
    pub seq: u64,
    /// The last modification log entry the reports sent so far covered.
    pub sent_upto: u64,
    /// When its next report is due (Unix seconds).
    pub next_due: i64,
}

/// The robots, by key, with their log.
#[derive(Debug)]
pub struct Registry {
    robots: HashMap<String, Robot>,
    log: LogWriter,
}

fn encode(r: &Robot, out: &mut Vec<u8>) {
    out.push(PUT);
    put_bytes(out, r.key.as_bytes());
    put_bytes(out, r.email.as_bytes());
    out.extend_from_slice(&r.latency.count.to_le_bytes());
    out.push(
        Unit::ALL
            .iter()
            .position(|u| *u == r.latency.unit)
            .unwrap_or(0) as u8,
    );
    let (tag, list): (u8, &[String]) = match &r.patterns {
        Patterns::None => (0, &[]),
        Patterns::Exclude(p) => (1, p),
        Patterns::IncludeOnly(p) => (2, p),
    };
    out.push(tag);
    out.extend_from_slice(&(list.len() as u32).to_le_bytes());
    for p in list {
        put_bytes(out, p.as_bytes());
    }
    out.extend_from_slice(&r.seq.to_le_bytes());
    out.extend_from_slice(&r.sent_upto.to_le_bytes());
    out.extend_from_slice(&r.next_due.to_le_bytes());
}

fn string(c: &mut Cur<'_>) -> Option<String> {
    String::from_utf8(c.bytes()?.to_vec()).ok()
}

fn decode_put(c: &mut Cur<'_>) -> Option<Robot> {
    let key = string(c)?;
    let email = string(c)?;
    let count = c.u64()?;
    let unit = *Unit::ALL.get(c.u8()? as usize)?;
    let tag = c.u8()?;
    let n = c.u32()? as usize;
    let mut list = Vec::new();
    for _ in 0..n {
        list.push(string(c)?);
    }
    let patterns = match tag {
        0 => Patterns::None,
        1 => Patterns::Exclude(list),
        2 => Patterns::IncludeOnly(list),
        _ => return None,
    };
    Some(Robot {
        key,
        email,
        latency: Span { count, unit },
        patterns,
        seq: c.u64()?,
        sent_upto: c.u64()?,
        next_due: c.u64()? as i64,
    })
}

impl Registry {
    /// Opens (creating) the registry in `dir` and compacts its log.
    pub fn open(dir: &Path) -> Result<Registry, LogError> {
        let mut robots: HashMap<String, Robot> = HashMap::new();
        let (log, _) = LogWriter::open(&dir.join(FILE), Options::new(FORMAT), |p| {
            let mut c = Cur(p);
            match c.u8() {
                Some(PUT) => match decode_put(&mut c) {
                    Some(r) if c.is_empty() => {
                        robots.insert(r.key.clone(), r);
                        true
                    }
                    _ => false,
                },
                Some(REMOVE) => match c.bytes() {
                    Some(k) if c.is_empty() => {
                        robots.remove(String::from_utf8_lossy(k).as_ref());
                        true
                    }
                    _ => false,
                },
                _ => false,
            }
        })?;
        let mut reg = Registry { robots, log };
        reg.compact()?;
        Ok(reg)
    }

    fn compact(&mut self) -> Result<(), LogError> {
        let robots = &self.robots;
        self.log.compact(|c| {
            for r in robots.values() {
                c.record(|out| encode(r, out))?;
            }
            Ok(())
        })?;
        Ok(())
    }

    /// The robot holding `key`, if `email` is its address (ASCII case aside): 3.3.1-3.3.3 act
    /// only when both match.
    pub fn find(&self, key: &str, email: &str) -> Option<&Robot> {
        self.robots
            .get(key)
            .filter(|r| r.email.eq_ignore_ascii_case(email))
    }

    /// The robot holding `key`.
    pub fn get(&self, key: &str) -> Option<&Robot> {
        self.robots.get(key)
    }

    /// Every robot, in no order.
    pub fn robots(&self) -> impl Iterator<Item = &Robot> {
        self.robots.values()
    }

    /// How many robots are registered.
    pub fn len(&self) -> usize {
        self.robots.len()
    }

    /// True when none is.
    pub fn is_empty(&self) -> bool {
        self.robots.is_empty()
    }

    /// Registers `robot` durably, voiding any registration of the same address (its key
    /// stops working). Returns the voided keys.
    pub fn register(&mut self, robot: Robot) -> Result<Vec<String>, LogError> {
        let voided: Vec<String> = self
            .robots
            .values()
            .filter(|r| r.email.eq_ignore_ascii_case(&robot.email) || r.key == robot.key)
            .map(|r| r.key.clone())
            .collect();
        for k in &voided {
            self.log.append_with(|out| {
                out.push(REMOVE);
                put_bytes(out, k.as_bytes());
            });
        }
        self.log.append_with(|out| encode(&robot, out));
        self.commit()?;
        for k in &voided {
            self.robots.remove(k);
        }
        self.robots.insert(robot.key.clone(), robot);
        Ok(voided)
    }

    /// Writes `robot`'s new state durably (its key names it).
    pub fn update(&mut self, robot: Robot) -> Result<(), LogError> {
        self.log.append_with(|out| encode(&robot, out));
        self.commit()?;
        self.robots.insert(robot.key.clone(), robot);
        Ok(())
    }

    /// Removes the robot holding `key` durably.
    pub fn unregister(&mut self, key: &str) -> Result<(), LogError> {
        self.log.append_with(|out| {
            out.push(REMOVE);
            put_bytes(out, key.as_bytes());
        });
        self.commit()?;
        self.robots.remove(key);
        Ok(())
    }

    fn commit(&mut self) -> Result<(), LogError> {
        let r = self.log.commit();
        if r.is_err() {
            // Not durable: not done. The caller answers an error and the state stays as it was.
            self.log.discard_pending();
        }
        r
    }

    /// The keys of the robots whose report is due at `now`.
    pub fn due(&self, now: i64) -> Vec<String> {
        self.robots
            .values()
            .filter(|r| r.next_due <= now)
            .map(|r| r.key.clone())
            .collect()
    }
}
