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
