//! The server side of RUP, the Remote Update Protocol of draft-cosmo ("Distributed Robots"):
//! pure state, no sockets and no threads. The `crawlfleet rup-server` shell wires it to HTTP,
//! a file watcher and an SMTP client.
//!
//! - this module: the latency units, `integer-unit` spans, the report date format and the
//!   one-line errors the CGI answers with;
//! - [`info`]: `/rupinfo.txt` (3.1.1);
//! - [`report`]: the update report format (3.2) and the robots' path filters;
//! - [`cgi`]: the CGI actions (3.1.2, 3.3.1-3.3.4) read from form-urlencoded key/value pairs;
//! - [`registry`]: the registered robots, persisted on the record log;
//! - [`modlog`]: the modification log of the served tree, persisted on the record log;
//! - [`robot`]: the robot side, a node scheduler's registrations and what a report's
//!   sequence number or a silence means (3.3.3).
//!
//! ```
//! use crawlfleet_core::rup::{Span, Unit};
//! let s: Span = "2-week".parse().unwrap();
//! assert_eq!(s, Span { count: 2, unit: Unit::Week });
//! assert_eq!(s.seconds(), 14 * 86_400);
//! assert_eq!(s.to_string(), "2-week");
//! ```

pub mod cgi;
pub mod info;
pub mod modlog;
pub mod registry;
pub mod report;
pub mod robot;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_robot;

use std::fmt;
use std::str::FromStr;

/// A latency unit (3.1.1 `latvalue`). The draft names day, week and month as "common values";
/// second, minute and hour are ours, for tests and busy sites. A month is 30 days.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    /// 1 second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3,600 seconds.
    Hour,
    /// 86,400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days.
    Month,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 6] = [
        Unit::Second,
        Unit::Minute,
        Unit::Hour,
        Unit::Day,
        Unit::Week,
        Unit::Month,
    ];

    /// The unit's length in seconds.
    pub const fn seconds(self) -> u64 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
        }
    }

    /// The unit's name as the draft writes it.
    pub const fn name(self) -> &'static str {
        match self {
            Unit::Second => "second",
            Unit::Minute => "minute",
            Unit::Hour => "hour",
            Unit::Day => "day",
            Unit::Week => "week",
            Unit::Month => "month",
        }
    }

    /// The unit named `s` (exactly, in lower case), if any.
    pub fn from_name(s: &str) -> Option<Unit> {
        Unit::ALL.into_iter().find(|u| u.name() == s)
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The largest count a span or latency may have: beyond it the seconds would not be a date.
pub const MAX_COUNT: u64 = 1_000_000;

/// `integer-latvalue` (3.1.1 MaxQuerySpan, 3.3.4 Span) or `{integer-}latvalue` (3.1.2 Latency,
/// where a bare unit counts one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    /// How many units (at least 1, at most [`MAX_COUNT`]).
    pub count: u64,
    /// The unit.
    pub unit: Unit,
}

/// Why a span did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpanError {
    /// Not `integer-unit` (or a bare unit where one is allowed), or a count of 0 or over
    /// [`MAX_COUNT`].
    Malformed(String),
    /// Well formed, but the unit is not one of ours.
    UnknownUnit(String),
}

impl fmt::Display for SpanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpanError::Malformed(s) => write!(f, "malformed span {s:?} (integer-unit)"),
            SpanError::UnknownUnit(s) => write!(f, "unknown unit {s:?}"),
        }
    }
}

impl std::error::Error for SpanError {}

impl Span {
    /// The span's length in seconds.
    pub const fn seconds(self) -> u64 {
        self.count * self.unit.seconds()
    }

    /// Reads `integer-unit`, or also a bare `unit` (count 1) when `bare` is true.
    pub fn parse(s: &str, bare: bool) -> Result<Span, SpanError> {
        let malformed = || SpanError::Malformed(s.to_owned());
        let (count, unit) = match s.split_once('-') {
            Some((n, u)) => {
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(malformed());
                }
                let n: u64 = n.parse().map_err(|_| malformed())?;
                (n, u)
            }
            None if bare => (1, s),
            None => return Err(malformed()),
        };
        if count == 0 || count > MAX_COUNT {
            return Err(malformed());
        }
        if unit.is_empty() || !unit.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(malformed());
        }
        let unit = Unit::from_name(unit).ok_or_else(|| SpanError::UnknownUnit(unit.to_owned()))?;
        Ok(Span { count, unit })
    }
}

impl FromStr for Span {
    type Err = SpanError;
    fn from_str(s: &str) -> Result<Span, SpanError> {
        Span::parse(s, false)
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.count, self.unit)
    }
}

/// A CGI request refused: the HTTP status (400 or 501, 3.1.2 "typically 400 (Bad Request) or
/// 501 (Not implemented)") and a one-line reason for the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// 400: a missing or malformed item, a bad address, a wrong key, both filters, an unknown
    /// action, a span beyond MaxQuerySpan; 501: a unit or pattern the server does not offer.
    pub status: u16,
    /// One line, no line break.
    pub reason: String,
}

impl Refusal {
    /// 400 Bad Request with `reason`.
    pub fn bad(reason: impl Into<String>) -> Refusal {
        Refusal {
            status: 400,
            reason: one_line(reason.into()),
        }
    }

    /// 501 Not Implemented with `reason`.
    pub fn not_offered(reason: impl Into<String>) -> Refusal {
        Refusal {
            status: 501,
            reason: one_line(reason.into()),
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.status, self.reason)
    }
}

fn one_line(mut s: String) -> String {
    s.retain(|c| c != '\r' && c != '\n');
    s
}

/// Formats a Unix time (seconds, UTC) as a report date: `2026-11-25T10:00:00Z` (RFC 3339 in
/// UTC, to the second). The draft leaves the date format open; this one sorts as text.
pub fn format_date(unix: i64) -> String {
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (H. Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Whether `s` is a valid e-mail address (RFC 5322 addr-spec, as the `email_address` crate
/// reads it; no display name, no angle brackets).
pub fn valid_email(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 254
        && !s.contains(['<', '>', ' ', ','])
        && email_address::EmailAddress::from_str(s).is_ok()
}
