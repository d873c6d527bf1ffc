//! The CGI actions at the RUP-CGI URL (draft-cosmo 3.1.2, 3.3.1-3.3.4), read from
//! form-urlencoded key/value pairs (a POST body or a GET query: 3.1.1 prefers POST and says GET
//! should be honoured too), checked against what the server offers, and answered with an HTML
//! document holding the answer's line.
//!
//! Refusals ([`Refusal`]): 400 for a missing, repeated or malformed item, an invalid address,
//! a wrong key or address, Exclude with IncludeOnly, an unknown Action, a Span beyond
//! MaxQuerySpan; 501 for a latency unit or a pattern the server does not offer (or a Span in a
//! unit it does not know).

use std::collections::HashMap;

use regex::Regex;

use super::info::RupInfo;
use super::modlog::ModLog;
use super::registry::{Patterns, Registry, Robot};
use super::report::{self, Filter};
use super::{valid_email, Refusal, Span, SpanError};

/// What the server offers, with the offered patterns compiled.
#[derive(Clone, Debug)]
pub struct Offer {
    /// The rupinfo.txt content.
    pub info: RupInfo,
    /// The URL the reports' paths are relative to.
    pub url_base: String,
    regexes: HashMap<String, Regex>,
}

impl Offer {
    /// Compiles the offered patterns; an error names the pattern that is not a valid regular
    /// expression or cannot be listed in rupinfo.txt.
    pub fn new(info: RupInfo, url_base: String) -> Result<Offer, String> {
        if let Some(p) = info.unlistable_pattern() {
            return Err(format!(
                "pattern {p:?} cannot be listed (empty, or holds a comma or white space)"
            ));
        }
        let mut regexes = HashMap::new();
        for p in info.exclude.iter().chain(&info.include_only) {
            let r = Regex::new(p).map_err(|e| format!("pattern {p:?}: {e}"))?;
            regexes.insert(p.clone(), r);
        }
        Ok(Offer {
            info,
            url_base,
            regexes,
        })
    }

    /// The filter of a robot's patterns (patterns not offered, which [`Action::parse`] refuses,
    /// match nothing).
    pub fn filter(&self, p: &Patterns) -> Filter {
        let compile = |list: &[String]| {
            list.iter()
                .filter_map(|p| self.regexes.get(p).cloned())
                .collect()
        };
        match p {
            Patterns::None => Filter::All,
            Patterns::Exclude(l) => Filter::Exclude(compile(l)),
            Patterns::IncludeOnly(l) => Filter::IncludeOnly(compile(l)),
        }
    }
}

/// A CGI request, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// 3.1.2.
    Register {
        /// RobotEmail.
        email: String,
        /// Latency (default: one of the first offered unit).
        latency: Option<Span>,
        /// Exclude or IncludeOnly.
        patterns: Option<Patterns>,
    },
    /// 3.3.1.
    Unregister {
        /// RegistrationKey.
        key: String,
        /// RegisteredRobotEmail.
        email: String,
    },
    /// 3.3.2: only the items given change.
    ModifyPreferences {
        /// RegistrationKey.
        key: String,
        /// RegisteredRobotEmail.
        email: String,
        /// RobotEmail: a new address.
        new_email: Option<String>,
        /// Latency.
        latency: Option<Span>,
        /// Exclude or IncludeOnly (either replaces the robot's patterns, whichever they were).
        patterns: Option<Patterns>,
    },
    /// 3.3.3.
    GetSequenceNumber {
        /// RegistrationKey.
        key: String,
        /// RegisteredRobotEmail.
        email: String,
    },
    /// 3.3.4.
    GetIndex {
        /// Span.
        span: Span,
    },
}

/// Reads form-urlencoded key/value pairs (`application/x-www-form-urlencoded`).
pub fn parse_form(bytes: &[u8]) -> Vec<(String, String)> {
    form_urlencoded::parse(bytes).into_owned().collect()
}

/// The items of one request, each at most once.
struct Items(HashMap<String, String>);

impl Items {
    fn new(pairs: Vec<(String, String)>) -> Result<Items, Refusal> {
        let mut m = HashMap::new();
        for (k, v) in pairs {
            if m.contains_key(&k) {
                return Err(Refusal::bad(format!("{k} given more than once")));
            }
            m.insert(k, v);
        }
        Ok(Items(m))
    }

    fn opt(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    fn req(&self, k: &str) -> Result<&str, Refusal> {
        match self.opt(k) {
            Some(v) if !v.is_empty() => Ok(v),
            _ => Err(Refusal::bad(format!("{k} is required"))),
        }
    }

    fn email(&self, k: &str) -> Result<Option<String>, Refusal> {
        match self.opt(k) {
            None => Ok(None),
            Some(v) if valid_email(v) => Ok(Some(v.to_owned())),
            Some(v) => Err(Refusal::bad(format!(
                "{k}: {v:?} is not a valid e-mail address"
            ))),
        }
    }

    fn latency(&self, offer: &Offer) -> Result<Option<Span>, Refusal> {
        let Some(v) = self.opt("Latency") else {
            return Ok(None);
        };
        let span = Span::parse(v, true).map_err(|e| match e {
            SpanError::Malformed(_) => Refusal::bad(format!("Latency: {e}")),
            SpanError::UnknownUnit(_) => Refusal::not_offered(format!("Latency: {e}")),
        })?;
        if !offer.info.latencies.contains(&span.unit) {
            return Err(Refusal::not_offered(format!(
                "Latency: unit {} is not offered",
                span.unit
            )));
        }
        Ok(Some(span))
    }

    fn patterns(&self, offer: &Offer) -> Result<Option<Patterns>, Refusal> {
        let list = |k: &str, offered: &[String]| -> Result<Vec<String>, Refusal> {
            let v = self.opt(k).unwrap_or_default();
            let items: Vec<String> = v.split_whitespace().map(str::to_owned).collect();
            if items.is_empty() {
                return Err(Refusal::bad(format!("{k} is empty")));
            }
            if let Some(p) = items.iter().find(|p| !offered.contains(p)) {
                return Err(Refusal::not_offered(format!(
                    "{k}: pattern {p:?} is not offered"
                )));
            }
            Ok(items)
        };
        match (self.opt("Exclude"), self.opt("IncludeOnly")) {
            (Some(_), Some(_)) => Err(Refusal::bad("Exclude and IncludeOnly given together")),
            (Some(_), None) => Ok(Some(Patterns::Exclude(list(
                "Exclude",
                &offer.info.exclude,
            )?))),
            (None, Some(_)) => Ok(Some(Patterns::IncludeOnly(list(
                "IncludeOnly",
                &offer.info.include_only,
            )?))),
            (None, None) => Ok(None),
        }
    }

    fn key(&self) -> Result<(String, String), Refusal> {
        let key = self.req("RegistrationKey")?.to_owned();
        let email = self.req("RegisteredRobotEmail")?.to_owned();
        Ok((key, email))
    }
}

impl Action {
    /// Reads and checks a request's items against `offer`. Items of no action are ignored.
    pub fn parse(pairs: Vec<(String, String)>, offer: &Offer) -> Result<Action, Refusal> {
        let it = Items::new(pairs)?;
        match it.req("Action")? {
            "Register" => Ok(Action::Register {
                email: it
                    .email("RobotEmail")?
                    .ok_or_else(|| Refusal::bad("RobotEmail is required"))?,
                latency: it.latency(offer)?,
                patterns: it.patterns(offer)?,
            }),
            "Unregister" => {
                let (key, email) = it.key()?;
                Ok(Action::Unregister { key, email })
            }
            "ModifyPreferences" => {
                let (key, email) = it.key()?;
                Ok(Action::ModifyPreferences {
                    key,
                    email,
                    new_email: it.email("RobotEmail")?,
                    latency: it.latency(offer)?,
                    patterns: it.patterns(offer)?,
                })
            }
            "GetSequenceNumber" => {
                let (key, email) = it.key()?;
                Ok(Action::GetSequenceNumber { key, email })
            }
            "GetIndex" => {
                let v = it.req("Span")?;
                let span: Span = v.parse().map_err(|e| match e {
                    SpanError::Malformed(_) => Refusal::bad(format!("Span: {e}")),
                    SpanError::UnknownUnit(_) => Refusal::not_offered(format!("Span: {e}")),
                })?;
                // 3.1.1: MaxQuerySpan is how far back the server keeps the log; 3.3.3: a
                // request further back is one the server cannot satisfy.
                if span.seconds() > offer.info.max_query_span.seconds() {
                    return Err(Refusal::bad(format!(
                        "Span {span} is beyond MaxQuerySpan {}",
                        offer.info.max_query_span
                    )));
                }
                Ok(Action::GetIndex { span })
            }
            other => Err(Refusal::bad(format!("unknown Action {other:?}"))),
        }
    }
}

/// An HTML document whose body holds `text` as preformatted lines (3.1.2, 3.3.3, 3.3.4: "an
/// HTML document containing the line").
pub fn html(text: &str) -> String {
    let mut esc = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => esc.push_str("&lt;"),
            '>' => esc.push_str("&gt;"),
            '&' => esc.push_str("&amp;"),
            c => esc.push(c),
        }
    }
    format!(
        "<!DOCTYPE html>\n<html><head><title>RUP</title></head><body><pre>\n{esc}</pre></body></html>\n"
    )
}

/// A refusal of a store failure (the answer is not given before the state is durable).
fn store_failed(e: impl std::fmt::Display) -> Refusal {
    Refusal {
        status: 503,
        reason: format!("the registry could not be written: {e}"),
    }
}

/// Carries out `action` at `now`, answering the HTML document of its line; `new_key` gives a
/// fresh registration key for Register. Dispatches to one `on_<action>` per action.
pub fn answer(
    action: Action,
    offer: &Offer,
    registry: &mut Registry,
    modlog: &ModLog,
    now: i64,
    new_key: impl FnOnce() -> String,
) -> Result<String, Refusal> {
    match action {
        Action::Register {
            email,
            latency,
            patterns,
        } => on_register(
            offer,
            registry,
            modlog,
            now,
            new_key(),
            email,
            latency,
            patterns,
        ),
        Action::Unregister { key, email } => on_unregister(registry, &key, &email),
        Action::ModifyPreferences {
            key,
            email,
            new_email,
            latency,
            patterns,
        } => on_modify_preferences(registry, now, &key, &email, new_email, latency, patterns),
        Action::GetSequenceNumber { key, email } => on_get_sequence_number(registry, &key, &email),
        Action::GetIndex { span } => Ok(on_get_index(offer, modlog, now, span)),
    }
}

fn wrong() -> Refusal {
    Refusal::bad("wrong RegistrationKey or RegisteredRobotEmail")
}

/// Action=Register (3.1.2): a new robot with `key`, hearing of the changes logged from now
/// on, its first report one latency period away; a registration of the same address is
/// voided.
#[allow(clippy::too_many_arguments)]
pub fn on_register(
    offer: &Offer,
    registry: &mut Registry,
    modlog: &ModLog,
    now: i64,
    key: String,
    email: String,
    latency: Option<Span>,
    patterns: Option<Patterns>,
) -> Result<String, Refusal> {
    let latency = latency.unwrap_or(Span {
        count: 1,
        unit: offer
            .info
            .latencies
            .first()
            .copied()
            .unwrap_or(super::Unit::Day),
    });
    registry
        .register(Robot {
            key: key.clone(),
            email,
            latency,
            patterns: patterns.unwrap_or_default(),
            seq: 0,
            sent_upto: modlog.head(),
            next_due: now.saturating_add(latency.seconds() as i64),
        })
        .map_err(store_failed)?;
    Ok(html(&format!("RegistrationKey: {key}\n")))
}

/// Action=Unregister (3.3.1): the robot is erased and hears no more.
pub fn on_unregister(registry: &mut Registry, key: &str, email: &str) -> Result<String, Refusal> {
    registry.find(key, email).ok_or_else(wrong)?;
    registry.unregister(key).map_err(store_failed)?;
    Ok(html("Unregistered\n"))
}

/// Action=ModifyPreferences (3.3.2): the items given change, the others stay.
pub fn on_modify_preferences(
    registry: &mut Registry,
    now: i64,
    key: &str,
    email: &str,
    new_email: Option<String>,
    latency: Option<Span>,
    patterns: Option<Patterns>,
) -> Result<String, Refusal> {
    let mut r = registry.find(key, email).ok_or_else(wrong)?.clone();
    if let Some(e) = new_email {
        if registry
            .robots()
            .any(|o| o.key != key && o.email.eq_ignore_ascii_case(&e))
        {
            return Err(Refusal::bad(format!(
                "RobotEmail: {e} is registered already"
            )));
        }
        r.email = e;
    }
    if let Some(l) = latency {
        // The next report comes one new period after the last one was due.
        let last = r.next_due - r.latency.seconds() as i64;
        r.next_due = last.max(now - l.seconds() as i64) + l.seconds() as i64;
        r.latency = l;
    }
    if let Some(p) = patterns {
        r.patterns = p;
    }
    registry.update(r).map_err(store_failed)?;
    Ok(html("PreferencesModified\n"))
}

/// Action=GetSequenceNumber (3.3.3): the number of the last report sent (0 before the first).
pub fn on_get_sequence_number(
    registry: &Registry,
    key: &str,
    email: &str,
) -> Result<String, Refusal> {
    let r = registry.find(key, email).ok_or_else(wrong)?;
    Ok(html(&format!("SequenceNumber={}\n", r.seq)))
}

/// Action=GetIndex (3.3.4): the changes of the last `span` (checked against MaxQuerySpan by
/// [`Action::parse`]) in the report format of 3.2, unfiltered; it is no robot's report, so
/// its sequence number is 0 (a robot's reports are numbered from 1).
pub fn on_get_index(offer: &Offer, modlog: &ModLog, now: i64, span: Span) -> String {
    let from = now.saturating_sub(span.seconds() as i64);
    let text = report::render(
        0,
        &offer.url_base,
        modlog.dated_from(from),
        &Filter::All,
        "\n",
    );
    html(&text)
}

/// The text of a CGI answer as a robot reads it: what the first `<pre>` holds (the whole
/// document when there is none), with the entities [`html`] writes, and `&quot;`, undone.
pub fn answer_text(doc: &str) -> String {
    let inner = match doc.find("<pre>") {
        Some(i) => {
            let rest = &doc[i + 5..];
            &rest[..rest.find("</pre>").unwrap_or(rest.len())]
        }
        None => doc,
    };
    inner
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}
