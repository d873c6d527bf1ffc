//! `/rupinfo.txt` (draft-cosmo 3.1.1): what the server offers.
//!
//! ```text
//! RUP-CGI: cgiurl NL
//! {Authentifier: authmethod NL}
//! {Latency: latvalue[, latvalue]* NL}
//! {Exclude: urlpatvalue[, urlpatvalue]* NL}
//! {IncludeOnly: urlpatvalue[, urlpatvalue]* NL}
//! {MaxQuerySpan: integer-latvalue NL}
//! ```
//!
//! The draft's NL is "system dependent"; ours is LF. A list whose items are none is left out.

use super::{Span, Unit};

/// What the server offers robots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RupInfo {
    /// The URL of the CGI (the `RUP-CGI` line).
    pub cgi_url: String,
    /// The latency units a robot may ask for.
    pub latencies: Vec<Unit>,
    /// The patterns a robot may put in its Exclude list.
    pub exclude: Vec<String>,
    /// The patterns a robot may put in its IncludeOnly list.
    pub include_only: Vec<String>,
    /// How far back the modification log goes.
    pub max_query_span: Span,
}

impl RupInfo {
    /// The offered patterns that cannot be listed: one holding ", " (the list separator of
    /// 3.1.1), a line break, or a space (the separator of the robots' lists in 3.1.2).
    pub fn unlistable_pattern(&self) -> Option<&str> {
        self.exclude
            .iter()
            .chain(&self.include_only)
            .map(String::as_str)
            .find(|p| p.is_empty() || p.contains([',', ' ', '\t', '\r', '\n']))
    }

    /// The file's text. `Authentifier: none` is the only value 3.1.1 allows.
    pub fn render(&self) -> String {
        let mut out = format!("RUP-CGI: {}\nAuthentifier: none\n", self.cgi_url);
        let mut list = |key: &str, items: Vec<&str>| {
            if !items.is_empty() {
                out.push_str(&format!("{key}: {}\n", items.join(", ")));
            }
        };
        list("Latency", self.latencies.iter().map(|u| u.name()).collect());
        list("Exclude", self.exclude.iter().map(String::as_str).collect());
        list(
            "IncludeOnly",
            self.include_only.iter().map(String::as_str).collect(),
        );
        out.push_str(&format!("MaxQuerySpan: {}\n", self.max_query_span));
        out
    }
}

/// What a robot reads in a server's rupinfo.txt: the offer, and the `Authentifier` line the
/// server's own [`RupInfo`] always writes `none`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offered {
    /// The URL of the CGI (the one required line).
    pub cgi_url: String,
    /// The `Authentifier` line's value, if any (3.1.1: `none` is the only value defined).
    pub authentifier: Option<String>,
    /// The latency units offered, in the file's order; units this crate does not know are
    /// left out.
    pub latencies: Vec<Unit>,
    /// The Exclude patterns offered.
    pub exclude: Vec<String>,
    /// The IncludeOnly patterns offered.
    pub include_only: Vec<String>,
    /// How far back GetIndex reaches, when the file says (and says it well).
    pub max_query_span: Option<Span>,
}

impl Offered {
    /// Whether a robot may register: 3.1.1 defines `none` alone; a robot that does not know
    /// the method cannot authenticate (a missing line counts as `none`).
    pub fn open_to_robots(&self) -> bool {
        self.authentifier
            .as_deref()
            .is_none_or(|a| a.eq_ignore_ascii_case("none"))
    }
}

/// Why a rupinfo.txt was not read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InfoError {
    /// No `RUP-CGI` line (3.1.1: the one line required).
    NoCgi,
    /// The file is not text.
    NotText,
}

impl std::fmt::Display for InfoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InfoError::NoCgi => f.write_str("no RUP-CGI line"),
            InfoError::NotText => f.write_str("not UTF-8 text"),
        }
    }
}

impl std::error::Error for InfoError {}

/// Reads a rupinfo.txt (3.1.1) as a robot does: lines `Key: value` (LF or CRLF), list items
/// separated by ", " (a bare "," too), keys compared without regard to ASCII case, unknown
/// keys and unknown units skipped; the last of a repeated line counts.
pub fn parse(body: &[u8]) -> Result<Offered, InfoError> {
    let text = std::str::from_utf8(body).map_err(|_| InfoError::NotText)?;
    let mut o = Offered {
        cgi_url: String::new(),
        authentifier: None,
        latencies: Vec::new(),
        exclude: Vec::new(),
        include_only: Vec::new(),
        max_query_span: None,
    };
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim().to_ascii_lowercase().as_str() {
            "rup-cgi" => o.cgi_url = value.to_owned(),
            "authentifier" => o.authentifier = Some(value.to_owned()),
            "latency" => {
                o.latencies = list(value)
                    .iter()
                    .filter_map(|u| Span::parse(u, true).ok().map(|s| s.unit))
                    .collect();
            }
            "exclude" => o.exclude = list(value),
            "includeonly" => o.include_only = list(value),
            "maxqueryspan" => o.max_query_span = Span::parse(value, false).ok(),
            _ => {}
        }
    }
    if o.cgi_url.is_empty() {
        return Err(InfoError::NoCgi);
    }
    Ok(o)
}
