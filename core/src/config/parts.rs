//! The parts of a collection's configuration with a shape of their own: `variable_delay`
//! periods, SubDomains and Logins (FSCMT 2.2.2.3.1), and the host of a URI for domain rules.

use super::collection::crawl_mode;
use super::params::Params;
use super::rules::RuleTarget;
use super::{ConfigError, RuleSet};
use crate::marshal::Value;

/// One entry of the `variable_delay` section: from `from_hour` to `to_hour` on the days
/// `first_day..=last_day` (0 = Monday; a range may wrap past Sunday), the delay between requests
/// to a site is `delay`, or crawling is suspended when `delay` is `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct VariableDelay {
    /// First day, 0 = Monday .. 6 = Sunday.
    pub first_day: u8,
    /// Last day, inclusive.
    pub last_day: u8,
    /// First hour, 0..=23.
    pub from_hour: u8,
    /// The hour the period ends (exclusive), 1..=24.
    pub to_hour: u8,
    /// The delay in seconds; `None` suspends crawling (FSCADM 2.2.3.3 status 8).
    pub delay: Option<f64>,
}

impl VariableDelay {
    /// True when the period covers `hour` (0..=23) of `weekday` (0 = Monday).
    pub fn covers(&self, weekday: u8, hour: u8) -> bool {
        let day = if self.first_day <= self.last_day {
            (self.first_day..=self.last_day).contains(&weekday)
        } else {
            weekday >= self.first_day || weekday <= self.last_day
        };
        day && (self.from_hour..self.to_hour).contains(&hour)
    }

    /// Parses a period name `Day[-Day]:HH-HH` (`Mon-Fri:08-16`, `sunday:0-24`).
    fn parse_period(name: &str) -> Option<(u8, u8, u8, u8)> {
        const DAYS: [&str; 7] = [
            "monday",
            "tuesday",
            "wednesday",
            "thursday",
            "friday",
            "saturday",
            "sunday",
        ];
        let day = |s: &str| {
            let s = s.trim().to_ascii_lowercase();
            let n = DAYS
                .iter()
                .position(|d| s.len() >= 3 && d.starts_with(s.as_str()))?;
            u8::try_from(n).ok()
        };
        let (days, hours) = name.split_once(':')?;
        let (d1, d2) = match days.split_once('-') {
            Some((a, b)) => (day(a)?, day(b)?),
            None => (day(days)?, day(days)?),
        };
        let (h1, h2) = hours.split_once('-')?;
        let (h1, h2): (u8, u8) = (h1.trim().parse().ok()?, h2.trim().parse().ok()?);
        (h1 < h2 && h2 <= 24).then_some((d1, d2, h1, h2))
    }
}

/// A SubDomain (FSCMT 2.2.2.3.1 `"subdomains"`): a part of the collection, chosen by its own
/// include/exclude rules, with its own start URIs and overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct SubDomain {
    /// The SubDomain's name.
    pub name: String,
    /// Host names in the SubDomain.
    pub include_domains: RuleSet,
    /// Host names not in it.
    pub exclude_domains: RuleSet,
    /// URIs in the SubDomain.
    pub include_uris: RuleSet,
    /// URIs not in it.
    pub exclude_uris: RuleSet,
    /// Start URIs of the SubDomain.
    pub start_uris: Vec<String>,
    /// Files of start URIs.
    pub start_uri_files: Vec<String>,
    /// `delay` override, seconds.
    pub delay: Option<f64>,
    /// `refresh` override, minutes.
    pub refresh: Option<f64>,
    /// `crawlmode.mode` override: `Some(None)` is unlimited depth.
    pub max_depth: Option<Option<u32>>,
}

impl SubDomain {
    /// True when `uri` belongs to this SubDomain: it has include rules, one of them matches
    /// (host rules against the URI's host), and no exclude rule does.
    pub fn contains(&self, uri: &str) -> bool {
        let host = host_of(uri);
        if self.include_domains.is_empty() && self.include_uris.is_empty() {
            return false;
        }
        let included = (self.include_domains.is_empty() || self.include_domains.matches(host))
            && (self.include_uris.is_empty() || self.include_uris.matches(uri));
        included && !self.exclude_domains.matches(host) && !self.exclude_uris.matches(uri)
    }
}

/// A Login (FSCMT 2.2.2.3.1 `"logins"`): an HTML form login the crawler performs before
/// crawling the sites it names.
#[derive(Clone, Debug, PartialEq)]
pub struct Login {
    /// The Login's name.
    pub name: String,
    /// A URI fetched before the form (to pick up cookies), if any.
    pub preload: Option<String>,
    /// Scheme of the form URI (`http`).
    pub scheme: String,
    /// Host (and port) of the form URI.
    pub site: String,
    /// Path of the form URI.
    pub form: String,
    /// HTTP method of the form: `POST` or `GET`.
    pub action: String,
    /// Form fields, in order.
    pub parameters: Vec<(String, String)>,
    /// Host names whose crawl needs this login.
    pub sites: Vec<String>,
    /// Seconds before logging in again.
    pub ttl: f64,
    /// URI of the page holding the HTML form, when the fields should be read from it.
    pub html_form: Option<String>,
    /// Fill fields the form has but `parameters` lacks with the form's values.
    pub autofill: bool,
    /// Log in again when a fetch shows the session was lost.
    pub relogin_if_failed: bool,
}

pub(crate) fn variable_delay(vd: &Params<'_, '_>) -> Result<Vec<VariableDelay>, ConfigError> {
    let mut out = Vec::new();
    for (k, v) in vd.pairs {
        let key = String::from_utf8_lossy(k.as_bytes().unwrap_or_default()).into_owned();
        let Some((first_day, last_day, from_hour, to_hour)) = VariableDelay::parse_period(&key)
        else {
            return Err(vd.bad(&key, &key, "periods are written Day[-Day]:HH-HH"));
        };
        let delay = match v {
            Value::Bytes(b, _) if b.trim_ascii().eq_ignore_ascii_case(b"suspend") => None,
            Value::Bytes(b, _) => match std::str::from_utf8(b).ok().map(|s| s.trim().parse()) {
                Some(Ok(f)) if f64::is_finite(f) && f >= 0.0 => Some(f),
                _ => {
                    let shown = String::from_utf8_lossy(b);
                    return Err(vd.bad(&key, shown, "a delay in seconds or \"suspend\""));
                }
            },
            _ => vd.real(&key)?,
        };
        out.push(VariableDelay {
            first_day,
            last_day,
            from_hour,
            to_hour,
            delay,
        });
    }
    Ok(out)
}

pub(crate) fn subdomain(p: &Params<'_, '_>, name: String) -> Result<SubDomain, ConfigError> {
    let max_depth = match p.section("crawlmode")? {
        Some(m) => crawl_mode(&m)?,
        None => None,
    };
    Ok(SubDomain {
        name,
        include_domains: p.rules("include_domains", RuleTarget::Domain)?,
        exclude_domains: p.rules("exclude_domains", RuleTarget::Domain)?,
        include_uris: p.rules("include_uris", RuleTarget::Uri)?,
        exclude_uris: p.rules("exclude_uris", RuleTarget::Uri)?,
        start_uris: p.strings("start_uris")?.unwrap_or_default(),
        start_uri_files: p.strings("start_uri_files")?.unwrap_or_default(),
        delay: p.real("delay")?,
        refresh: p.real("refresh")?,
        max_depth,
    })
}

pub(crate) fn login(p: &Params<'_, '_>, name: String) -> Result<Login, ConfigError> {
    let mut parameters = Vec::new();
    if let Some(sec) = p.section("parameters")? {
        for (k, v) in sec.pairs {
            let key = String::from_utf8_lossy(k.as_bytes().unwrap_or_default()).into_owned();
            let value = match v {
                Value::Int(i, _) => i.to_string(),
                _ => sec.string(&key)?.unwrap_or_default(),
            };
            parameters.push((key, value));
        }
    }
    // White space around a word or an address is not part of it (the schema's checks trim).
    let trimmed = |key: &str| -> Result<Option<String>, ConfigError> {
        Ok(p.string(key)?.map(|v| v.trim().to_string()))
    };
    let site = trimmed("site")?.unwrap_or_default();
    if site.is_empty() {
        return Err(p.bad(
            "site",
            "",
            "a Login needs its site: the host (and port) of its form",
        ));
    }
    Ok(Login {
        name,
        preload: trimmed("preload")?,
        scheme: trimmed("scheme")?.unwrap_or_else(|| "http".into()),
        site,
        form: trimmed("form")?.unwrap_or_else(|| "/".into()),
        action: trimmed("action")?.unwrap_or_else(|| "POST".into()),
        parameters,
        sites: p
            .strings("sites")?
            .unwrap_or_default()
            .into_iter()
            .map(|s| s.trim().to_string())
            .collect(),
        ttl: p.real("ttl")?.unwrap_or(7200.0),
        html_form: trimmed("html_form")?,
        autofill: p.boolean("autofill")?.unwrap_or(false),
        relogin_if_failed: p.boolean("relogin_if_failed")?.unwrap_or(true),
    })
}

/// The host of an absolute URI (`scheme://[user@]host[:port]/...`), without port or brackets;
/// empty when there is none. Read byte by byte (every link of every page goes through here):
/// the authority follows the first `://` and ends at `/`, `?` or `#`; the host follows its last
/// `@`, and ends at the first `:` (or is what stands between `[` and `]`).
pub(crate) fn host_of(uri: &str) -> &str {
    let b = uri.as_bytes();
    // The first `://`: at one of the `:`s (mostly the first).
    let mut from = 0;
    let rest = loop {
        let Some(i) = memchr::memchr(b':', &b[from..]).map(|i| from + i) else {
            return "";
        };
        if b[i + 1..].starts_with(b"//") {
            break i + 3;
        }
        from = i + 1;
    };
    // One pass over the authority: the host starts after the last `@` and ends at the first
    // `:` after it.
    let (mut start, mut colon) = (rest, None);
    let mut end = b.len();
    for (i, &c) in b.iter().enumerate().skip(rest) {
        match c {
            b'/' | b'?' | b'#' => {
                end = i;
                break;
            }
            b'@' => {
                start = i + 1;
                colon = None;
            }
            b':' if colon.is_none() => colon = Some(i),
            _ => {}
        }
    }
    let hostport = &uri[start..end];
    if let Some(v6) = hostport.strip_prefix('[') {
        return &v6[..v6.find(']').unwrap_or(v6.len())];
    }
    &uri[start..colon.unwrap_or(end)]
}
