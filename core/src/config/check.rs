//! `crawlfleet config check` and every path that takes a configuration (`up`, `node`,
//! `multinode`, CollectionAdd): the XML read by [`super::parse_xml`], each collection's dict
//! checked against the schema ([`super::schema::SETTINGS`]) and then read as a
//! [`CollectionConfig`], every finding placed at its line and column.
//!
//! ```
//! use crawlfleet_core::config::check_xml;
//!
//! let xml = r#"<CrawlerConfig><DomainSpecification name="web">
//!   <attrib name="dealy" type="real">0.5</attrib>
//! </DomainSpecification></CrawlerConfig>"#;
//! let findings = check_xml(xml).unwrap_err();
//! assert_eq!(
//!     findings[0].to_string(),
//!     "line 2, column 3: collection \"web\": unknown setting \"dealy\"; did you mean \"delay\"?"
//! );
//! ```

use std::collections::HashMap;
use std::fmt;

use quick_xml::events::Event;
use quick_xml::Reader;

use super::schema::{check_dict, did_you_mean};
use super::{parse_xml, CollectionConfig, ConfigError, Position};
use crate::marshal::Value;

/// One thing wrong with a configuration document.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// Where in the document, when known.
    pub pos: Option<Position>,
    /// The collection (DomainSpecification) it is in, when it is in one.
    pub collection: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(p) = self.pos {
            write!(f, "{p}: ")?;
        }
        if let Some(c) = &self.collection {
            write!(f, "collection {c:?}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// The collections of a configuration document, (name, dict) as [`parse_xml`] gives them,
/// when the document is well-formed, every name in it known and every value of its type and in
/// its range; otherwise every finding (a document that is not well-formed gives one).
#[allow(clippy::type_complexity)]
pub fn check_xml(xml: &str) -> Result<Vec<(String, Value<'static>)>, Vec<Finding>> {
    let specs = match parse_xml(xml) {
        Ok(s) => s,
        Err(e) => return Err(vec![syntax_finding(&e)]),
    };
    let places = Places::of(xml);
    let mut findings = places.stray.clone();
    for (name, dict) in &specs {
        let problems = check_dict(dict);
        for p in &problems {
            findings.push(Finding {
                pos: places.find(name, &p.path),
                collection: Some(name.clone()),
                message: match p.path.as_str() {
                    "" => p.message.clone(),
                    _ if p.message.starts_with("unknown") => p.message.clone(),
                    path => format!("setting {path:?}: {}", p.message),
                },
            });
        }
        if problems.is_empty() {
            if let Err(e) = CollectionConfig::from_dict(name, dict) {
                let path = match &e {
                    ConfigError::WrongType { attrib, .. }
                    | ConfigError::BadSetting { attrib, .. } => attrib.as_str(),
                    _ => "",
                };
                findings.push(Finding {
                    pos: places.find(name, path),
                    collection: Some(name.clone()),
                    message: e.to_string(),
                });
            }
        }
    }
    match findings.is_empty() {
        true => Ok(specs),
        false => Err(findings),
    }
}

/// The elements each element may hold (the root's under "").
const CHILDREN: &[(&str, &[&str])] = &[
    ("", &["CrawlerConfig", "DomainSpecification"]),
    ("CrawlerConfig", &["DomainSpecification"]),
    (
        "DomainSpecification",
        &["attrib", "section", "SubDomain", "Login", "Node"],
    ),
    ("section", &["attrib", "section"]),
    ("SubDomain", &["attrib", "section"]),
    ("Login", &["attrib", "section"]),
    ("Node", &["attrib", "section"]),
    ("attrib", &["member"]),
];

/// The XML attributes each element may carry.
const XML_ATTRIBUTES: &[(&str, &[&str])] = &[
    ("CrawlerConfig", &[]),
    ("DomainSpecification", &["name"]),
    ("attrib", &["name", "type"]),
    ("section", &["name"]),
    ("SubDomain", &["name"]),
    ("Login", &["name"]),
    ("Node", &["name"]),
    ("member", &[]),
];

fn syntax_finding(e: &ConfigError) -> Finding {
    let mut message = match e.position() {
        Some(_) => {
            let full = e.to_string();
            // The position goes in front of the finding; the error's own text repeats it.
            full.split_once(": ")
                .map_or(full.clone(), |(_, rest)| rest.to_string())
        }
        None => e.to_string(),
    };
    if let ConfigError::UnexpectedElement {
        element, parent, ..
    } = e
    {
        let allowed = CHILDREN
            .iter()
            .find(|(p, _)| p == parent)
            .map_or(&[][..], |(_, c)| *c);
        if let Some(m) = did_you_mean(element, allowed.iter().copied()) {
            message.push_str(&format!("; did you mean <{m}>?"));
        } else if !allowed.is_empty() {
            message.push_str(&format!(" (allowed: {})", allowed.join(", ")));
        }
    }
    Finding {
        pos: e.position(),
        collection: None,
        message,
    }
}

/// Where each parameter of each collection stands in the document, by dotted path, and the
/// XML attributes no element takes.
struct Places {
    at: HashMap<(String, String), Position>,
    stray: Vec<Finding>,
}

impl Places {
    /// Walks a document [`parse_xml`] accepted.
    fn of(xml: &str) -> Places {
        let mut places = Places {
            at: HashMap::new(),
            stray: Vec::new(),
        };
        let mut reader = Reader::from_str(xml);
        let mut collection = String::new();
        // The path's segments, and how many each open element added.
        let mut path: Vec<String> = Vec::new();
        let mut added: Vec<usize> = Vec::new();
        loop {
            let at = reader.buffer_position() as usize;
            let (e, empty) = match reader.read_event() {
                Ok(Event::Start(e)) => (e, false),
                Ok(Event::Empty(e)) => (e, true),
                Ok(Event::End(_)) => {
                    let n = added.pop().unwrap_or(0);
                    path.truncate(path.len().saturating_sub(n));
                    continue;
                }
                Ok(Event::Eof) | Err(_) => return places,
                Ok(_) => continue,
            };
            let tag = e.name().as_ref().to_string();
            let pos = Position::of_offset(xml, at);
            let mut name = None;
            let allowed = XML_ATTRIBUTES
                .iter()
                .find(|(t, _)| *t == tag)
                .map_or(&[][..], |(_, a)| *a);
            for a in e.attributes().flatten() {
                let key = a.key.as_ref().to_string();
                if key == "name" {
                    name = a
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .ok()
                        .map(|v| v.into_owned());
                }
                if !allowed.contains(&key.as_str()) && !key.starts_with("xmlns") {
                    let mut message = format!("<{tag}> has no XML attribute {key:?}");
                    if let Some(m) = did_you_mean(&key, allowed.iter().copied()) {
                        message.push_str(&format!("; did you mean {m:?}?"));
                    }
                    places.stray.push(Finding {
                        pos: Some(pos),
                        collection: (!collection.is_empty()).then(|| collection.clone()),
                        message,
                    });
                }
            }
            let name = name.unwrap_or_default();
            let segments: Vec<String> = match tag.as_str() {
                "DomainSpecification" => {
                    collection = name;
                    path.clear();
                    Vec::new()
                }
                "attrib" | "section" => vec![name],
                "SubDomain" => vec!["subdomains".into(), name],
                "Login" => vec!["logins".into(), name],
                "Node" => vec!["nodes".into(), name],
                _ => Vec::new(),
            };
            let n = segments.len();
            path.extend(segments);
            if n > 0 {
                places
                    .at
                    .entry((collection.clone(), path.join(".")))
                    .or_insert(pos);
            }
            if empty {
                path.truncate(path.len() - n);
            } else {
                added.push(n);
            }
        }
    }

    /// The position of `path` in `collection`, or of the nearest enclosing element found.
    fn find(&self, collection: &str, path: &str) -> Option<Position> {
        let mut p = path;
        loop {
            if let Some(pos) = self.at.get(&(collection.to_string(), p.to_string())) {
                return Some(*pos);
            }
            p = p.rsplit_once('.')?.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::schema::{setting, Scope, SETTINGS};
    use super::super::KNOWN_ATTRIBS;
    use super::*;

    fn findings(body: &str) -> Vec<String> {
        let xml = format!("<CrawlerConfig><DomainSpecification name=\"web\">\n{body}\n</DomainSpecification></CrawlerConfig>");
        match check_xml(&xml) {
            Ok(_) => Vec::new(),
            Err(f) => f.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn every_known_attrib_is_in_the_schema() {
        for k in KNOWN_ATTRIBS {
            assert!(
                setting(Scope::Collection, k).is_some(),
                "{k} is not in SETTINGS"
            );
        }
        for s in SETTINGS {
            if let Some((parent, _)) = s.path.rsplit_once('.') {
                assert!(
                    setting(s.scope, parent).is_some(),
                    "{}: no section line",
                    s.path
                );
            }
        }
    }

    #[test]
    fn unknown_names_get_a_suggestion_and_their_place() {
        let f = findings(
            "  <attrib name=\"dealy\" type=\"real\">1</attrib>\n  <section name=\"crawlmode\">\n    <attrib name=\"mdoe\" type=\"string\">FULL</attrib>\n  </section>\n  <SubDomain name=\"d\"><attrib name=\"refrsh\" type=\"real\">1</attrib></SubDomain>",
        );
        assert_eq!(
            f,
            [
                "line 2, column 3: collection \"web\": unknown setting \"dealy\"; did you mean \"delay\"?",
                "line 4, column 5: collection \"web\": unknown setting \"mdoe\" in section \"crawlmode\"; did you mean \"mode\"?",
                "line 6, column 23: collection \"web\": unknown setting \"refrsh\"; did you mean \"refresh\"?",
            ]
        );
        let f = findings("  <atrib name=\"delay\" type=\"real\">1</atrib>");
        assert_eq!(
            f,
            ["line 2, column 3: unexpected element <atrib> in <DomainSpecification>; did you mean <attrib>?"]
        );
        let f = findings("  <attrib name=\"delay\" tpye=\"real\" type=\"real\">1</attrib>");
        assert_eq!(
            f,
            ["line 2, column 3: collection \"web\": <attrib> has no XML attribute \"tpye\"; did you mean \"type\"?"]
        );
    }

    #[test]
    fn values_out_of_range_name_the_range() {
        let f = findings("  <attrib name=\"max_pending\" type=\"integer\">0</attrib>\n  <attrib name=\"delay\" type=\"real\">-1</attrib>\n  <attrib name=\"refresh_mode\" type=\"string\">scrach</attrib>");
        assert_eq!(
            f,
            [
                "line 2, column 3: collection \"web\": setting \"max_pending\": 0 is out of range: allowed 1 to 1000",
                "line 3, column 3: collection \"web\": setting \"delay\": -1 is out of range: allowed 0 to 86400",
                "line 4, column 3: collection \"web\": setting \"refresh_mode\": \"scrach\" is not one of append, prepend, scratch, soft, adaptive; did you mean \"scratch\"?",
            ]
        );
        let f = findings("  <attrib name=\"robots\" type=\"string\">maybe</attrib>");
        assert_eq!(
            f,
            ["line 2, column 3: collection \"web\": setting \"robots\": expected a boolean, found a string"]
        );
    }

    #[test]
    fn a_bad_start_uri_is_an_error() {
        let f = findings("  <attrib name=\"start_uris\" type=\"list-string\"><member>not a url</member></attrib>");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].starts_with("line 2, column 3: collection \"web\": setting \"start_uris\": \"not a url\" is not a start URI"), "{f:?}");
        assert!(findings(
            "  <attrib name=\"start_uris\" type=\"list-string\"><member>ftp://h/</member></attrib>"
        )[0]
        .contains("http or https"));
        assert!(findings("  <attrib name=\"start_uris\" type=\"list-string\"><member> http://h:8/x </member></attrib>").is_empty());
    }

    /// A collection's `headers` are request header lines: a line that is not one (a break in
    /// its value, no name) is refused here, not by the fetcher at every request.
    #[test]
    fn headers_are_single_header_lines() {
        let h = |m: &str| {
            findings(&format!(
                r#"  <attrib name="headers" type="list-string"><member>{m}</member></attrib>"#
            ))
        };
        assert!(h("X-Crawler: crawlfleet (ops@example.com)").is_empty());
        for bad in [
            "X-A: 1&#13;&#10;X-Injected: 2",
            "no colon",
            ": no name",
            "Bad Name: 1",
            "Content-Length: 3",
        ] {
            let f = h(bad);
            assert_eq!(f.len(), 1, "{bad}: {f:?}");
            assert!(f[0].contains("is not a header line"), "{f:?}");
        }
        let ua = findings(r#"  <attrib name="user_agent" type="string">a&#13;&#10;X: 2</attrib>"#);
        assert_eq!(ua.len(), 1, "{ua:?}");
        assert!(ua[0].contains("is not a header value"), "{ua:?}");
    }

    /// docs/collection-config.md "Login": where the login goes must be a place a request can go.
    #[test]
    fn a_logins_site_form_and_pages_are_checked() {
        let login = |attribs: &str| findings(&format!("  <Login name=\"l\">{attribs}</Login>"));
        let good = r#"<attrib name="site" type="string">wiki.example.com:8080</attrib><attrib name="form" type="string">/login?next=/</attrib><attrib name="preload" type="string">https://wiki.example.com/</attrib><attrib name="html_form" type="string">http://[::1]:8/f</attrib>"#;
        assert!(login(good).is_empty(), "{:?}", login(good));
        for (attrib, value, says) in [
            (
                "site",
                "http://wiki.example.com",
                "is not a host or host:port",
            ),
            (
                "site",
                "wiki.example.com/login",
                "is not a host or host:port",
            ),
            ("site", "", "is not a host or host:port"),
            ("form", "login", "is not a path"),
            (
                "preload",
                "/welcome",
                "is not an absolute http or https URI",
            ),
            (
                "html_form",
                "ftp://h/f",
                "is not an absolute http or https URI",
            ),
        ] {
            let f = login(&format!(
                r#"<attrib name="{attrib}" type="string">{value}</attrib>"#
            ));
            assert_eq!(f.len(), 1, "{attrib} {value:?}: {f:?}");
            assert!(
                f[0].contains(&format!("setting \"logins.l.{attrib}\"")),
                "{f:?}"
            );
            assert!(f[0].contains(says), "{f:?}");
        }
    }

    #[test]
    fn what_the_reader_refuses_is_placed_too() {
        let f = findings("\n  <attrib name=\"exclude_uris\" type=\"list-string\"><member>regexp:(</member></attrib>");
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("line 3, column 3: collection \"web\": parameter \"exclude_uris\""),
            "{f:?}"
        );
    }

    #[test]
    fn the_example_and_partial_configurations_pass() {
        let example = include_str!("../../../examples/collection.xml");
        assert_eq!(check_xml(example).map(|s| s.len()), Ok(1));
        let full = include_str!("../../../tests/data/collection-full.xml");
        assert_eq!(check_xml(full).map(|s| s.len()), Ok(1));
        assert!(findings("").is_empty());
        assert!(findings(
            "  <Node name=\"n\"><attrib name=\"max_sites\" type=\"integer\">4</attrib></Node>"
        )
        .is_empty());
    }
}
