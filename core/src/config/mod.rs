//! Crawl collection configuration: the `<CrawlerConfig>` XML format, the parameter dict of
//! MS-FSCMT 2.2.2.3 that node schedulers receive as PKT_DSPEC, and the typed
//! [`CollectionConfig`] the schedulers and the crawler read, with every default filled in.
//!
//! The XML maps to the dict exactly as FSCMT 2.2.2.3.1 - 2.2.2.3.3 says: `attrib` elements become
//! values of their `type` (2.2.2.3.2; `boolean` is the integer 1 or 0, `list-string` a list of the
//! `member` strings), `section` elements nested dicts, all `SubDomain` / `Login` / `Node` elements
//! the dicts `"subdomains"` / `"logins"` / `"nodes"` keyed by their names, and the attrib names of
//! the `link_extraction` section the integer keys of 2.2.2.3.3. Strings are byte strings, as
//! Python 2 marshal carries `str`. `docs/collection-config.md` lists every attrib crawlfleet
//! understands, with its type and default.
//!
//! ```
//! use crawlfleet_core::config::{self, CollectionConfig};
//!
//! let xml = r#"<CrawlerConfig><DomainSpecification name="web">
//!   <attrib name="start_uris" type="list-string"><member>http://127.0.0.1:8080/</member></attrib>
//!   <attrib name="delay" type="real">0.5</attrib>
//! </DomainSpecification></CrawlerConfig>"#;
//! let specs = config::parse_xml(xml).unwrap();
//! let (name, dict) = &specs[0];
//! let c = CollectionConfig::from_dict(name, dict).unwrap();
//! assert_eq!(c.start_uris, ["http://127.0.0.1:8080/"]);
//! assert_eq!(c.delay, 0.5);
//! assert!(c.robots); // not in the XML: the default
//! assert_eq!(config::parse_xml(&config::to_xml(name, dict).unwrap()).unwrap(), specs);
//! ```

mod check;
mod collection;
mod params;
mod parts;
mod rules;
pub mod schema;
mod xml;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_typed;

use std::fmt;

use crate::marshal::Value;

pub use check::{check_xml, Finding};
pub use collection::{
    default_dict, CollectionConfig, Node, RefreshMode, Refusal, RupRobot, KNOWN_ATTRIBS,
};
pub use parts::{Login, SubDomain, VariableDelay};
pub use rules::{RuleError, RuleKind, RuleSet, RuleTarget};
pub use xml::{parse_xml, to_xml};

/// A collection's configuration parsed once, to be shared (behind an `Arc`) by everything that
/// reads it: the scheduler's refresh policy, the crawler, the administrative status. A dict
/// that does not parse gives the defaults, with a warning naming the error.
pub fn parsed(name: &[u8], dict: &Value<'_>) -> std::sync::Arc<CollectionConfig> {
    let label = String::from_utf8_lossy(name);
    let config = CollectionConfig::from_dict(&label, dict).unwrap_or_else(|e| {
        log::warn!("collection {label}: configuration not usable, defaults apply: {e}");
        CollectionConfig::defaults(&label)
    });
    std::sync::Arc::new(config)
}

/// The `link_extraction` attrib names and their dictionary keys (FSCMT 2.2.2.3.3), as bits of
/// [`CollectionConfig::link_extraction`].
pub const LINK_EXTRACTION: [(&str, u32); 17] = [
    ("a", 0x1),
    ("action", 0x2),
    ("area", 0x4),
    ("card", 0x40_0000),
    ("comment", 0x10),
    ("embed", 0x10_0000),
    ("frame", 0x20),
    ("go", 0x40),
    ("img", 0x80),
    ("layer", 0x100),
    ("link", 0x200),
    ("meta", 0x400),
    ("meta_refresh", 0x8000),
    ("object", 0x4000),
    ("script", 0x800),
    ("script_java", 0x1000),
    ("style", 0x2000),
];

/// The FSCMT 2.2.2.3.3 key of a `link_extraction` attrib name.
pub fn link_extraction_key(name: &str) -> Option<u32> {
    LINK_EXTRACTION
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, k)| *k)
}

/// The `link_extraction` attrib name of an FSCMT 2.2.2.3.3 key.
pub fn link_extraction_name(key: i64) -> Option<&'static str> {
    LINK_EXTRACTION
        .iter()
        .find(|(_, k)| i64::from(*k) == key)
        .map(|(n, _)| *n)
}

/// A place in an XML document: 1-based line, 1-based column counted in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    /// Line, from 1.
    pub line: usize,
    /// Column, from 1, in characters (not bytes).
    pub column: usize,
}

impl Position {
    /// The position of byte `offset` of `text` (clamped to the text's length and to a character
    /// boundary).
    pub fn of_offset(text: &str, offset: usize) -> Position {
        let mut end = offset.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let before = &text[..end];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Position {
            line: before.bytes().filter(|&b| b == b'\n').count() + 1,
            column: before[line_start..].chars().count() + 1,
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// Why a configuration was refused.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    /// The document is not well-formed XML (as the XML parser reports it).
    Syntax {
        /// Where the parser stopped.
        pos: Position,
        /// The parser's message.
        message: String,
    },
    /// An element that has no place where it stands.
    UnexpectedElement {
        /// Where the element starts.
        pos: Position,
        /// The element's name.
        element: String,
        /// The element it stands in (empty at the document root).
        parent: String,
    },
    /// Character data where only elements may stand (outside `member` in a `list-string`, or
    /// between the elements of a section).
    UnexpectedText {
        /// Where the text starts.
        pos: Position,
        /// The element it stands in (empty outside the root element).
        parent: String,
    },
    /// An element without an XML attribute it needs (`name`, or `type` on `attrib`).
    MissingAttribute {
        /// Where the element starts.
        pos: Position,
        /// The element's name.
        element: String,
        /// The missing XML attribute.
        attribute: &'static str,
    },
    /// An `attrib` whose `type` is none of FSCMT 2.2.2.3.2's.
    UnknownType {
        /// Where the `attrib` element starts.
        pos: Position,
        /// The type given.
        type_name: String,
    },
    /// An `attrib` whose text is not a value of its type.
    BadValue {
        /// Where the value starts (the element, when it is empty).
        pos: Position,
        /// The attrib's name.
        attrib: String,
        /// Its declared type.
        type_name: &'static str,
        /// The text found.
        value: String,
    },
    /// A `link_extraction` attrib name that is not in FSCMT 2.2.2.3.3's table.
    UnknownLinkTag {
        /// Where the `attrib` element starts.
        pos: Position,
        /// The name given.
        name: String,
    },
    /// A `section` or `attrib` named like the dicts FSCMT 2.2.2.3.1 reserves (`subdomains`,
    /// `logins`, `nodes`) at the top of a DomainSpecification, where it would collide with them.
    ReservedName {
        /// Where the element starts.
        pos: Position,
        /// The name.
        name: String,
    },
    /// [`to_xml`]: a dict value the XML format cannot express.
    NotRepresentable {
        /// The dotted key path of the value (`crawlmode.mode`).
        key: String,
        /// Why.
        why: &'static str,
    },
    /// [`CollectionConfig::from_dict`]: a parameter of the wrong marshal type.
    WrongType {
        /// The dotted key path (`subdomains.news.delay`).
        attrib: String,
        /// The type the parameter needs.
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// [`CollectionConfig::from_dict`]: a parameter of the right type with a value that means
    /// nothing (an unknown refresh mode, a regular expression that does not compile, ...).
    BadSetting {
        /// The dotted key path.
        attrib: String,
        /// The value, as text.
        value: String,
        /// Why it was refused.
        why: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Syntax { pos, message } => write!(f, "{pos}: XML syntax: {message}"),
            ConfigError::UnexpectedElement {
                pos,
                element,
                parent,
            } if parent.is_empty() => {
                write!(f, "{pos}: unexpected root element <{element}>")
            }
            ConfigError::UnexpectedElement {
                pos,
                element,
                parent,
            } => write!(f, "{pos}: unexpected element <{element}> in <{parent}>"),
            ConfigError::UnexpectedText { pos, parent } if parent.is_empty() => {
                write!(f, "{pos}: unexpected text outside the root element")
            }
            ConfigError::UnexpectedText { pos, parent } => {
                write!(f, "{pos}: unexpected text in <{parent}>")
            }
            ConfigError::MissingAttribute {
                pos,
                element,
                attribute,
            } => write!(f, "{pos}: <{element}> has no {attribute:?} attribute"),
            ConfigError::UnknownType { pos, type_name } => {
                write!(f, "{pos}: unknown attrib type {type_name:?}")
            }
            ConfigError::BadValue {
                pos,
                attrib,
                type_name,
                value,
            } => write!(
                f,
                "{pos}: attrib {attrib:?}: {value:?} is not a {type_name}"
            ),
            ConfigError::UnknownLinkTag { pos, name } => {
                write!(f, "{pos}: unknown link_extraction name {name:?}")
            }
            ConfigError::ReservedName { pos, name } => write!(
                f,
                "{pos}: section name {name:?} is reserved for SubDomain/Login/Node elements"
            ),
            ConfigError::NotRepresentable { key, why } => {
                write!(f, "parameter {key:?} has no XML form: {why}")
            }
            ConfigError::WrongType {
                attrib,
                expected,
                found,
            } => write!(
                f,
                "parameter {attrib:?}: expected {expected}, found {found}"
            ),
            ConfigError::BadSetting { attrib, value, why } => {
                write!(f, "parameter {attrib:?}: {value:?}: {why}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    /// Where in the XML document the error is, for the errors that come from one.
    pub fn position(&self) -> Option<Position> {
        match self {
            ConfigError::Syntax { pos, .. }
            | ConfigError::UnexpectedElement { pos, .. }
            | ConfigError::UnexpectedText { pos, .. }
            | ConfigError::MissingAttribute { pos, .. }
            | ConfigError::UnknownType { pos, .. }
            | ConfigError::BadValue { pos, .. }
            | ConfigError::UnknownLinkTag { pos, .. }
            | ConfigError::ReservedName { pos, .. } => Some(*pos),
            _ => None,
        }
    }
}

/// Two dict keys are the same key: byte strings compare by their bytes whatever their wire form
/// (`'s'`, `'t'`, `'u'`), everything else by value.
pub(crate) fn same_key(a: &Value<'_>, b: &Value<'_>) -> bool {
    match (a.as_bytes(), b.as_bytes()) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Merges a partial configuration into a full one, as FSCADM 2.2.9.3 (CollectionAdd) and
/// CollectionUpdate merge partial configurations: every key of `partial` replaces the same key of
/// `base` (keeping `base`'s order; new keys are appended), except that where both values are
/// dicts (sections, `subdomains`, `link_extraction`, ...) they merge recursively. When either
/// side is not a dict, the result is `partial`.
pub fn merge(base: &Value<'_>, partial: &Value<'_>) -> Value<'static> {
    let (Some(b), Some(p)) = (base.as_dict(), partial.as_dict()) else {
        return partial.clone().into_owned();
    };
    let mut out: Vec<(Value<'static>, Value<'static>)> = b
        .iter()
        .map(|(k, v)| (k.clone().into_owned(), v.clone().into_owned()))
        .collect();
    for (k, v) in p {
        match out.iter_mut().find(|(ok, _)| same_key(ok, k)) {
            Some((_, ov)) => *ov = merge(ov, v),
            None => out.push((k.clone().into_owned(), v.clone().into_owned())),
        }
    }
    Value::Dict(out)
}
