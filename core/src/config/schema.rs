//! The schema of a collection configuration: every setting crawlfleet knows, where it may stand
//! and what values it takes, as one table, [`SETTINGS`]. [`check_dict`] walks a parameter dict
//! (FSCMT 2.2.2.3) against it and reports every unknown name, with the closest known one as a
//! suggestion, every value of the wrong type and every value out of its range.
//!
//! A new setting is one line of [`SETTINGS`] (and its line in `docs/collection-config.md`); a
//! test checks that every name of [`super::KNOWN_ATTRIBS`] is in the table.

use crate::marshal::Value;

/// Where a setting stands: the dicts of a DomainSpecification (and of its Node elements, whose
/// parameters replace the collection's), of a SubDomain, or of a Login (FSCMT 2.2.2.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// A DomainSpecification or a Node element.
    Collection,
    /// A SubDomain element.
    SubDomain,
    /// A Login element.
    Login,
}

/// What value a setting takes.
#[derive(Clone, Copy, Debug)]
pub enum Expect {
    /// `boolean` (the integer 1 or 0 in the dict).
    Bool,
    /// `integer` from `min` to `max`.
    Int(i64, i64),
    /// `real` (an `integer` is accepted) from `min` to `max`.
    Real(f64, f64),
    /// `string`.
    Str,
    /// `string`, one of these words (any case).
    OneOf(&'static [&'static str]),
    /// `list-string`.
    Strings,
    /// `list-string` of absolute http or https URIs.
    Uris,
    /// `list-string` of `host:port`.
    HostPorts,
    /// `list-string` whose members are each one of these words.
    Words(&'static [&'static str]),
    /// Include/exclude rules: a `list-string`, or a `section` of rule kinds (checked when the
    /// rules are built).
    Rules,
    /// A `section` whose settings are in this table under the setting's name.
    Section,
    /// A `section` whose names are free (checked by the reader of the setting, if at all).
    FreeSection,
    /// The dict of SubDomain, Login or Node elements, each member in this scope.
    Group(Scope),
    /// Any value this function accepts; `Err` says why not.
    Check(fn(&Value<'_>) -> Result<(), String>),
}

/// One setting of the schema.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// Where it stands.
    pub scope: Scope,
    /// Its dotted name inside its scope's dict (`crawlmode.mode`).
    pub path: &'static str,
    /// What it takes.
    pub expect: Expect,
}

const fn c(path: &'static str, expect: Expect) -> Setting {
    Setting {
        scope: Scope::Collection,
        path,
        expect,
    }
}

const fn sub(path: &'static str, expect: Expect) -> Setting {
    Setting {
        scope: Scope::SubDomain,
        path,
        expect,
    }
}

const fn login(path: &'static str, expect: Expect) -> Setting {
    Setting {
        scope: Scope::Login,
        path,
        expect,
    }
}

const MAX: i64 = i64::MAX;
const DAY: f64 = 86_400.0;

/// Every setting crawlfleet knows (docs/collection-config.md describes each). One line per
/// setting: its scope ([`c`] collection, [`sub`] SubDomain, [`login`] Login), its dotted name
/// and the value it takes. A section's settings follow the section's own line.
pub const SETTINGS: &[Setting] = &[
    c("start_uris", Expect::Uris),
    c("start_uri_files", Expect::Strings),
    c("include_domains", Expect::Rules),
    c("exclude_domains", Expect::Rules),
    c("include_uris", Expect::Rules),
    c("exclude_uris", Expect::Rules),
    c("exclude_exts", Expect::Strings),
    c("exclude_headers", Expect::Rules),
    c("delay", Expect::Real(0.0, DAY)),
    c("variable_delay", Expect::FreeSection),
    c("refresh", Expect::Real(0.0, 1e9)),
    c("refresh_mode", Expect::Check(refresh_mode)),
    c("dbswitch", Expect::Int(0, 1_000_000)),
    c("max_doc_size", Expect::Int(1, 1 << 40)),
    c("limits", Expect::Section),
    c("limits.max_doc", Expect::Int(0, MAX)),
    c("limits.disk_free", Expect::Int(0, 100)),
    c("refresh_only", Expect::Bool),
    c("robots", Expect::Bool),
    c("check_meta_robots", Expect::Bool),
    c("obey_robots_delay", Expect::Bool),
    c("allowed_schemes", Expect::Strings),
    c("allowed_types", Expect::Strings),
    c("crawlmode", Expect::Section),
    c("crawlmode.mode", Expect::Check(crawl_mode)),
    c("crawlmode.fwdlinks", Expect::Bool),
    c("crawlmode.fwdredirects", Expect::Bool),
    c("crawlmode.reset_level", Expect::Bool),
    c("max_uri_recursion", Expect::Int(0, 1000)),
    c("max_redirects", Expect::Int(0, 100)),
    c("link_extraction", Expect::FreeSection),
    c("ppdup", Expect::Section),
    c("ppdup.dupservers", Expect::HostPorts),
    c("ppdup.replicas", Expect::HostPorts),
    c("ppdup.compact", Expect::Bool),
    c("linkstore", Expect::Section),
    c(
        "linkstore.applications",
        Expect::Words(&["webanalyzer", "sharepoint"]),
    ),
    c("sitemaps", Expect::Bool),
    c("warc", Expect::Section),
    c("warc.enabled", Expect::Bool),
    c("warc.dir", Expect::Str),
    c("warc.max_size", Expect::Int(1, MAX)),
    c("warc.prefix", Expect::Str),
    c("rup", Expect::Section),
    c("rup.robot_email", Expect::Check(email)),
    c("rup.latency", Expect::Check(rup_latency)),
    c("rup.enabled", Expect::Bool),
    c("max_sites", Expect::Int(1, 1_000_000)),
    c("max_pending", Expect::Int(1, 1000)),
    c("max_ip_connections", Expect::Int(0, 10_000)),
    c("max_inter_docs", Expect::Int(0, MAX)),
    c("user_agent", Expect::Check(header_value)),
    c("use_http_1_1", Expect::Bool),
    c("fetch_timeout", Expect::Real(0.001, DAY)),
    c("headers", Expect::Check(header_lines)),
    c("subdomains", Expect::Group(Scope::SubDomain)),
    c("logins", Expect::Group(Scope::Login)),
    c("nodes", Expect::Group(Scope::Collection)),
    sub("include_domains", Expect::Rules),
    sub("exclude_domains", Expect::Rules),
    sub("include_uris", Expect::Rules),
    sub("exclude_uris", Expect::Rules),
    sub("start_uris", Expect::Uris),
    sub("start_uri_files", Expect::Strings),
    sub("delay", Expect::Real(0.0, DAY)),
    sub("refresh", Expect::Real(0.0, 1e9)),
    sub("crawlmode", Expect::Section),
    sub("crawlmode.mode", Expect::Check(crawl_mode)),
    login("preload", Expect::Check(page_uri)),
    login("scheme", Expect::OneOf(&["http", "https"])),
    login("site", Expect::Check(login_site)),
    login("form", Expect::Check(form_path)),
    login("action", Expect::OneOf(&["POST", "GET"])),
    login("parameters", Expect::FreeSection),
    login("sites", Expect::Strings),
    login("ttl", Expect::Real(0.0, 1e9)),
    login("html_form", Expect::Check(page_uri)),
    login("autofill", Expect::Bool),
    login("relogin_if_failed", Expect::Bool),
];

/// One thing wrong with a configuration: the dotted path of the parameter (`delay`,
/// `subdomains.docs.delay`; empty for the whole document) and what is wrong.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The dotted path, as [`super::ConfigError`]'s `attrib` names parameters.
    pub path: String,
    /// What is wrong, a sentence without the path.
    pub message: String,
}

/// The setting of `scope` at `path`.
pub fn setting(scope: Scope, path: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.scope == scope && s.path == path)
}

/// Checks a collection's parameter dict against [`SETTINGS`]: every problem, in dict order.
pub fn check_dict(dict: &Value<'_>) -> Vec<Problem> {
    let mut out = Vec::new();
    walk(Scope::Collection, "", "", dict, &mut out);
    out
}

/// The closest of `names` to `name` when it is close enough to be a typing slip.
pub fn did_you_mean<'a>(name: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    names
        .into_iter()
        .map(|n| (strsim::jaro_winkler(name, n), n))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

/// `prefix` names the dict's place in its scope (`crawlmode`, empty at the top); `shown` its
/// place in the whole configuration (`subdomains.docs.crawlmode`).
fn walk(scope: Scope, prefix: &str, shown: &str, dict: &Value<'_>, out: &mut Vec<Problem>) {
    let Some(pairs) = dict.as_dict() else {
        return;
    };
    let join = |a: &str, b: &str| match a {
        "" => b.to_string(),
        _ => format!("{a}.{b}"),
    };
    for (k, v) in pairs {
        let Some(name) = k.as_bytes().map(String::from_utf8_lossy) else {
            continue;
        };
        let path = join(prefix, &name);
        let at = join(shown, &name);
        let Some(s) = setting(scope, &path) else {
            let siblings = SETTINGS
                .iter()
                .filter(|s| s.scope == scope)
                .filter_map(|s| {
                    let (parent, last) = s.path.rsplit_once('.').unwrap_or(("", s.path));
                    (parent == prefix).then_some(last)
                });
            let mut message = match prefix {
                "" => format!("unknown setting {name:?}"),
                p => format!("unknown setting {name:?} in section {p:?}"),
            };
            if let Some(m) = did_you_mean(&name, siblings) {
                message.push_str(&format!("; did you mean {m:?}?"));
            }
            out.push(Problem { path: at, message });
            continue;
        };
        let problem = |message: String| Problem {
            path: at.clone(),
            message,
        };
        match s.expect {
            Expect::Section => match v {
                Value::Dict(_) => walk(scope, &path, &at, v, out),
                _ => out.push(problem(wrong("a section", v))),
            },
            Expect::Group(member) => match v.as_dict() {
                Some(members) => {
                    for (mk, mv) in members {
                        let mname = mk.as_bytes().map(String::from_utf8_lossy);
                        let mname = mname.unwrap_or_default();
                        walk(member, "", &join(&at, &mname), mv, out);
                    }
                }
                None => out.push(problem(wrong("elements", v))),
            },
            _ => {
                if let Err(m) = value(s.expect, v) {
                    out.push(problem(m));
                }
            }
        }
    }
}

/// Checks a value that is not a section.
fn value(expect: Expect, v: &Value<'_>) -> Result<(), String> {
    let (text, strings) = (text_of, strings_of);
    match expect {
        Expect::Bool => match v {
            Value::Int(0 | 1, _) | Value::Bool(_) => Ok(()),
            _ => Err(wrong("a boolean", v)),
        },
        Expect::Int(min, max) => match v.as_i64() {
            Some(i) if matches!(v, Value::Int(..)) && (min..=max).contains(&i) => Ok(()),
            Some(i) if matches!(v, Value::Int(..)) => Err(range(i, min, max)),
            _ => Err(wrong("an integer", v)),
        },
        Expect::Real(min, max) => {
            let f = match v {
                Value::Int(i, _) => *i as f64,
                Value::Float(_) | Value::FloatText(_) => v.as_f64().unwrap_or(f64::NAN),
                _ => return Err(wrong("a real", v)),
            };
            match f.is_finite() && f >= min && f <= max {
                true => Ok(()),
                false => Err(range(f, min, max)),
            }
        }
        Expect::Str => text(v).map(drop).ok_or_else(|| wrong("a string", v)),
        Expect::OneOf(words) => {
            let t = text(v).ok_or_else(|| wrong("a string", v))?;
            one_of(t.trim(), words)
        }
        Expect::Strings => strings(v).map(drop),
        Expect::Words(words) => strings(v)?.iter().try_for_each(|w| one_of(w.trim(), words)),
        Expect::Uris => strings(v)?.iter().try_for_each(|u| start_uri(u.trim())),
        Expect::HostPorts => strings(v)?.iter().try_for_each(|h| host_port(h.trim())),
        Expect::Rules => match v {
            Value::Dict(_) => Ok(()),
            _ => strings(v).map(drop),
        },
        Expect::FreeSection => match v {
            Value::Dict(_) => Ok(()),
            _ => Err(wrong("a section", v)),
        },
        Expect::Check(f) => f(v),
        Expect::Section | Expect::Group(_) => Ok(()),
    }
}

fn wrong(expected: &str, v: &Value<'_>) -> String {
    let found = match v {
        Value::Int(..) | Value::Bool(_) => "an integer or boolean",
        Value::Float(_) | Value::FloatText(_) => "a real",
        Value::Bytes(..) => "a string",
        Value::List(_) | Value::Tuple(_) => "a list-string",
        Value::Dict(_) => "a section",
        _ => "another type",
    };
    format!("expected {expected}, found {found}")
}

fn range<T: std::fmt::Display + PartialEq>(v: T, min: T, max: T) -> String {
    format!("{v} is out of range: allowed {min} to {max}")
}

fn one_of(word: &str, words: &[&str]) -> Result<(), String> {
    if words.iter().any(|w| w.eq_ignore_ascii_case(word)) {
        return Ok(());
    }
    let mut m = format!("{word:?} is not one of {}", words.join(", "));
    if let Some(s) = did_you_mean(word, words.iter().copied()) {
        m.push_str(&format!("; did you mean {s:?}?"));
    }
    Err(m)
}

/// A start URI is an absolute http or https URI with a host.
pub fn start_uri(uri: &str) -> Result<(), String> {
    match url::Url::parse(uri) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        Ok(u) => Err(format!(
            "{uri:?} is not a start URI: the scheme must be http or https with a host, not {:?}",
            u.scheme()
        )),
        Err(e) => Err(format!(
            "{uri:?} is not a start URI ({e}): write it whole, as http://host/path"
        )),
    }
}

/// A value sent as a request header's (`user_agent`): on one line.
fn header_value(v: &Value<'_>) -> Result<(), String> {
    let t = text_of(v).ok_or_else(|| wrong("a string", v))?;
    match one_line(&t) {
        true => Ok(()),
        false => Err(format!(
            "{t:?} is not a header value: it must be on one line"
        )),
    }
}

/// `headers`: request header lines, each `Name: value` with a token for its name (RFC 9110
/// 5.1) and no line break in its value.
fn header_lines(v: &Value<'_>) -> Result<(), String> {
    for line in strings_of(v)? {
        let token = |n: &str| {
            !n.is_empty()
                && n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
        };
        // The fetcher frames each request itself (RFC 9112 6.3).
        let framing = |n: &str| {
            ["content-length", "transfer-encoding"]
                .iter()
                .any(|f| n.trim().eq_ignore_ascii_case(f))
        };
        match line.split_once(':') {
            Some((name, value)) if token(name.trim()) && !framing(name) && one_line(value) => {}
            _ => {
                return Err(format!(
                    "{line:?} is not a header line: write it as Name: value, on one line"
                ))
            }
        }
    }
    Ok(())
}

/// True when `t` has no line break (nor NUL): it can go in a request header.
fn one_line(t: &str) -> bool {
    !t.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0)
}

/// A string setting's text.
fn text_of(v: &Value<'_>) -> Option<String> {
    v.as_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
}

/// A list-string setting's members.
fn strings_of(v: &Value<'_>) -> Result<Vec<String>, String> {
    let items = match v {
        Value::List(items) | Value::Tuple(items) => items,
        _ => return Err(wrong("a list-string", v)),
    };
    items
        .iter()
        .map(|m| text_of(m).ok_or_else(|| wrong("a list-string", v)))
        .collect()
}

/// A Login's `preload` or `html_form`: an absolute http or https URI with a host.
fn page_uri(v: &Value<'_>) -> Result<(), String> {
    let t = text_of(v).ok_or_else(|| wrong("a string", v))?;
    match url::Url::parse(t.trim()) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => Ok(()),
        _ => Err(format!("{t:?} is not an absolute http or https URI")),
    }
}

/// A Login's `site`: the host and port of its form, as a URI writes them.
fn login_site(v: &Value<'_>) -> Result<(), String> {
    let t = text_of(v).ok_or_else(|| wrong("a string", v))?;
    let t = t.trim();
    let whole = !t.is_empty() && !t.contains(['/', '?', '#', '@']);
    match url::Url::parse(&format!("http://{t}/")) {
        Ok(u) if whole && u.host().is_some() => Ok(()),
        _ => Err(format!("{t:?} is not a host or host:port")),
    }
}

/// A Login's `form`: the path (and query) of its form on `site`.
fn form_path(v: &Value<'_>) -> Result<(), String> {
    let t = text_of(v).ok_or_else(|| wrong("a string", v))?;
    match t.trim().starts_with('/') {
        true => Ok(()),
        false => Err(format!(
            "{t:?} is not a path: write it from the site's root, as /login"
        )),
    }
}

fn host_port(hp: &str) -> Result<(), String> {
    match hp.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {
            Ok(())
        }
        _ => Err(format!("{hp:?} is not host:port")),
    }
}

fn refresh_mode(v: &Value<'_>) -> Result<(), String> {
    match v {
        Value::Int(i, _) => match super::RefreshMode::from_code(*i) {
            Some(_) => Ok(()),
            None => Err(format!("{i} is not a refresh mode code: 1, 2, 4, 8 or 32")),
        },
        _ => value(
            Expect::OneOf(&["append", "prepend", "scratch", "soft", "adaptive"]),
            v,
        ),
    }
}

fn email(v: &Value<'_>) -> Result<(), String> {
    let Some(t) = v.as_bytes().map(String::from_utf8_lossy) else {
        return Err(wrong("a string", v));
    };
    match crate::rup::valid_email(t.trim()) {
        true => Ok(()),
        false => Err(format!("{t:?} is not an e-mail address")),
    }
}

fn rup_latency(v: &Value<'_>) -> Result<(), String> {
    let Some(t) = v.as_bytes().map(String::from_utf8_lossy) else {
        return Err(wrong("a string", v));
    };
    crate::rup::Span::parse(t.trim(), true)
        .map(|_| ())
        .map_err(|e| format!("{t:?}: {e}: INTEGER-UNIT (2-day) or a unit (day)"))
}

fn crawl_mode(v: &Value<'_>) -> Result<(), String> {
    let Some(t) = v.as_bytes().map(String::from_utf8_lossy) else {
        return Err(wrong("a string", v));
    };
    let t = t.trim();
    let depth = t
        .split_once(':')
        .filter(|(k, _)| k.eq_ignore_ascii_case("depth"))
        .is_some_and(|(_, n)| n.trim().parse::<u32>().is_ok());
    match t.eq_ignore_ascii_case("full") || depth {
        true => Ok(()),
        false => Err(format!("{t:?} is not a crawl mode: FULL or DEPTH:n")),
    }
}
