//! The modification update report (draft-cosmo 3.2) and the robots' path filters (3.1.2).
//!
//! ```text
//! SequenceNumber: integer NL
//! URLBase: URL NL
//! NL
//! [ New[date]: filepath[, filepath]* NL |
//!   Change[date]: filepath[, filepath]* NL |
//!   Delete[date]: filepath[, filepath]* NL ]*
//! ```
//!
//! The brackets hold the date of the change ([`super::format_date`], to the second, UTC): they
//! are part of the line's keyword, not the draft's "optional" braces. Changes of one kind at the
//! same second that follow each other in the log share a line (up to [`MAX_LINE`] bytes); lines are in the order of the
//! log, so a robot that applies them in order ends where the tree is. A file path is relative
//! to URLBase, percent-encoded (every byte but `A-Z a-z 0-9 - . _ ~ /`), so that neither ", "
//! nor a line break can appear inside one.

use regex::Regex;

use super::format_date;

/// What happened to a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// The file appeared.
    New,
    /// Its content or size changed (its modification time or size, as the server sees it).
    Change,
    /// It disappeared.
    Delete,
}

impl ChangeKind {
    /// The line's keyword.
    pub const fn name(self) -> &'static str {
        match self {
            ChangeKind::New => "New",
            ChangeKind::Change => "Change",
            ChangeKind::Delete => "Delete",
        }
    }
}

/// One entry of the modification log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Its place in the log: strictly increasing, never reused.
    pub seq: u64,
    /// What happened.
    pub kind: ChangeKind,
    /// When the server saw it (Unix seconds).
    pub date: i64,
    /// The path relative to the root, percent-encoded ([`encode_path`]).
    pub path: String,
}

/// Percent-encodes a path relative to the root (its bytes, '/'-separated): every byte but
/// `A-Z a-z 0-9 - . _ ~ /` becomes `%XX`.
pub fn encode_path(raw: &[u8]) -> String {
    let mut out = String::with_capacity(raw.len());
    for &b in raw {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A robot's choice of paths (3.1.2): all, all but those matching an Exclude pattern, or only
/// those matching an IncludeOnly pattern. A pattern matches a path when the regular expression
/// finds a match anywhere in the percent-encoded path relative to URLBase (anchor it with `^`
/// and `$` to match it whole).
#[derive(Clone, Debug)]
pub enum Filter {
    /// Every path.
    All,
    /// Every path that no pattern matches.
    Exclude(Vec<Regex>),
    /// Only the paths some pattern matches.
    IncludeOnly(Vec<Regex>),
}

impl Filter {
    /// Whether the robot hears of `path`.
    pub fn admits(&self, path: &str) -> bool {
        match self {
            Filter::All => true,
            Filter::Exclude(p) => !p.iter().any(|r| r.is_match(path)),
            Filter::IncludeOnly(p) => p.iter().any(|r| r.is_match(path)),
        }
    }
}

/// A line holding more paths than fit in this many bytes goes on in a new line of the same
/// kind and date, so that mail lines stay under RFC 5322's 998 (a single longer path, which
/// the file system allows, makes a longer line; the mail then goes quoted-printable).
pub const MAX_LINE: usize = 900;

/// Writes a report: the two header lines, a blank line, then the change lines of `changes`
/// that `filter` admits; `nl` ends every line ("\r\n" in mail, 3.2's "MIME compliant").
pub fn render<'a>(
    seq: u64,
    url_base: &str,
    changes: impl IntoIterator<Item = &'a Change>,
    filter: &Filter,
    nl: &str,
) -> String {
    let mut out = format!("SequenceNumber: {seq}{nl}URLBase: {url_base}{nl}{nl}");
    let mut line: Option<(ChangeKind, i64)> = None;
    let mut line_start = 0;
    for c in changes.into_iter().filter(|c| filter.admits(&c.path)) {
        let fits = out.len() - line_start + 2 + c.path.len() <= MAX_LINE;
        if line == Some((c.kind, c.date)) && fits {
            out.push_str(", ");
        } else {
            if line.is_some() {
                out.push_str(nl);
            }
            line_start = out.len();
            out.push_str(&format!("{}[{}]: ", c.kind.name(), format_date(c.date)));
            line = Some((c.kind, c.date));
        }
        out.push_str(&c.path);
    }
    if line.is_some() {
        out.push_str(nl);
    }
    out
}

/// A report as a robot reads it (3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// Its sequence number (0 for a GetIndex answer, 3.3.4).
    pub seq: u64,
    /// The URL its paths are relative to.
    pub url_base: String,
    /// The change lines, in order: what happened, the bracket's date as written, the paths.
    pub lines: Vec<(ChangeKind, String, Vec<String>)>,
}

impl Report {
    /// The absolute URL of a path of the report (relative to URLBase; a path starting with
    /// '/' is taken from the URLBase's root).
    pub fn url(&self, path: &str) -> String {
        let base = self.url_base.trim_end_matches('/');
        format!("{base}/{}", path.trim_start_matches('/'))
    }
}

/// Why a report was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReportError {
    /// No `SequenceNumber: <integer>` line before the blank line.
    NoSequenceNumber,
    /// No `URLBase:` line before the blank line.
    NoUrlBase,
    /// A change line that is not `New[date]: `, `Change[date]: ` or `Delete[date]: ` with
    /// paths: its line number (from 1).
    BadLine(usize),
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReportError::NoSequenceNumber => f.write_str("no SequenceNumber line"),
            ReportError::NoUrlBase => f.write_str("no URLBase line"),
            ReportError::BadLine(n) => write!(f, "line {n} is not a change line"),
        }
    }
}

impl std::error::Error for ReportError {}

/// Reads a report (3.2), as [`render`] writes it and as a robot receives it: LF or CRLF line
/// ends, the header lines up to the first blank line (others there skipped), then change
/// lines; the date brackets are optional (the draft's "{[date]}"); blank lines among the
/// change lines are skipped.
pub fn parse(text: &str) -> Result<Report, ReportError> {
    let mut lines = text.lines().enumerate();
    let (mut seq, mut url_base) = (None, None);
    for (_, line) in lines.by_ref() {
        if line.trim().is_empty() {
            if seq.is_some() || url_base.is_some() {
                break;
            }
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        match k.trim() {
            "SequenceNumber" => seq = v.trim().parse::<u64>().ok(),
            "URLBase" => url_base = Some(v.trim().to_owned()),
            _ => {}
        }
    }
    let seq = seq.ok_or(ReportError::NoSequenceNumber)?;
    let url_base = url_base
        .filter(|u| !u.is_empty())
        .ok_or(ReportError::NoUrlBase)?;
    let mut out = Vec::new();
    for (i, line) in lines {
        if line.trim().is_empty() {
            continue;
        }
        let bad = || ReportError::BadLine(i + 1);
        // The keyword ends at '[' or ':'; the date (if any) is inside the brackets, and may
        // hold ':' itself.
        let kw_end = line.find(['[', ':']).ok_or_else(bad)?;
        let kind = match line[..kw_end].trim() {
            "New" => ChangeKind::New,
            "Change" => ChangeKind::Change,
            "Delete" => ChangeKind::Delete,
            _ => return Err(bad()),
        };
        let rest = &line[kw_end..];
        let (date, rest) = match rest.strip_prefix('[') {
            Some(r) => {
                let (d, r) = r.split_once(']').ok_or_else(bad)?;
                (d.to_owned(), r)
            }
            None => (String::new(), rest),
        };
        let paths = rest.strip_prefix(':').ok_or_else(bad)?;
        let paths: Vec<String> = paths
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect();
        out.push((kind, date, paths));
    }
    Ok(Report {
        seq,
        url_base,
        lines: out,
    })
}
