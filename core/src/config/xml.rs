//! `<CrawlerConfig>` XML to and from the parameter dicts of FSCMT 2.2.2.3.
//!
//! The document is read with quick-xml's pull parser; every element's start offset is kept so
//! that each refusal names the line and column it is about. Values are trimmed of the white space
//! around them that FAST configurations put inside `<attrib>` and `<member>` (`<attrib ...> yes
//! </attrib>`); white space written as a character reference (`&#32;`) is kept, which is how
//! [`to_xml`] writes strings that begin or end with white space.

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};

use super::{link_extraction_key, link_extraction_name, ConfigError, Position};
use crate::marshal::{Dict, Value};

/// How deep `section` elements may nest inside a DomainSpecification (the marshal decoder bounds
/// nesting at 64 containers; a configuration needs a handful).
pub const MAX_SECTION_DEPTH: usize = 16;

/// The dicts FSCMT 2.2.2.3.1 gathers the SubDomain, Login and Node elements into.
const GROUPS: [(&str, &str); 3] = [
    ("SubDomain", "subdomains"),
    ("Login", "logins"),
    ("Node", "nodes"),
];

/// All DomainSpecification elements of one XML document, in document order: (collection name,
/// the collection's parameter dict as FSCMT 2.2.2.3 maps it — a marshal `Value::Dict` with
/// string keys, `"subdomains"`/`"logins"`/`"nodes"` dicts, `link_extraction` keys as integers).
///
/// The root element is `<CrawlerConfig>` holding any number of `<DomainSpecification>`s, or a
/// single `<DomainSpecification>`. Within one dict a repeated name replaces the earlier value in
/// its place, as a Python dict would.
pub fn parse_xml(xml: &str) -> Result<Vec<(String, Value<'static>)>, ConfigError> {
    let mut p = Parser::new(xml);
    let mut out = Vec::new();
    let mut seen_root = false;
    loop {
        let (at, ev) = p.next()?;
        let (e, empty) = match ev {
            Event::Start(e) => (e, false),
            Event::Empty(e) => (e, true),
            Event::Eof if seen_root => return Ok(out),
            Event::Eof => {
                return Err(ConfigError::Syntax {
                    pos: p.pos(at),
                    message: "the document has no root element".into(),
                })
            }
            // Declarations, comments, processing instructions, DOCTYPE, white space; an
            // unmatched end tag is a syntax error raised by the reader.
            ev => {
                p.between_elements(at, ev, "")?;
                continue;
            }
        };
        if seen_root {
            return Err(p.unexpected(at, &e, ""));
        }
        seen_root = true;
        match (e.name().as_ref(), empty) {
            ("CrawlerConfig", false) => p.crawler_config(&mut out)?,
            ("CrawlerConfig", true) => {}
            ("DomainSpecification", _) => out.push(p.domain_spec(at, &e, empty)?),
            _ => return Err(p.unexpected(at, &e, "")),
        }
    }
}

/// Where a group of parameters stands, which decides the child elements it may hold.
#[derive(Clone, Copy, PartialEq)]
enum Ctx {
    /// Directly in a DomainSpecification: SubDomain, Login and Node allowed.
    Top,
    /// In a section, SubDomain, Login or Node; `link` in a `link_extraction` section.
    Inner { link: bool, depth: usize },
}

struct Parser<'a> {
    text: &'a str,
    reader: Reader<&'a [u8]>,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        let mut reader = Reader::from_str(text);
        let c = reader.config_mut();
        c.trim_text(false);
        c.check_end_names = true;
        c.expand_empty_elements = false;
        Parser { text, reader }
    }

    fn pos(&self, offset: usize) -> Position {
        Position::of_offset(self.text, offset)
    }

    /// The next event and the byte offset where it starts.
    fn next(&mut self) -> Result<(usize, Event<'a>), ConfigError> {
        let at = self.reader.buffer_position() as usize;
        match self.reader.read_event() {
            Ok(ev) => Ok((at, ev)),
            Err(e) => Err(ConfigError::Syntax {
                pos: self.pos(self.reader.error_position() as usize),
                message: e.to_string(),
            }),
        }
    }

    fn unexpected(&self, at: usize, e: &BytesStart<'_>, parent: &str) -> ConfigError {
        ConfigError::UnexpectedElement {
            pos: self.pos(at),
            element: e.name().as_ref().to_string(),
            parent: parent.to_string(),
        }
    }

    /// The value of XML attribute `key` of `e`, if present.
    fn xml_attr(
        &self,
        at: usize,
        e: &BytesStart<'_>,
        key: &str,
    ) -> Result<Option<String>, ConfigError> {
        for a in e.attributes() {
            let a = a.map_err(|err| ConfigError::Syntax {
                pos: self.pos(at),
                message: err.to_string(),
            })?;
            if a.key.as_ref() == key {
                let v = a.normalized_value(XmlVersion::Implicit1_0).map_err(|err| {
                    ConfigError::Syntax {
                        pos: self.pos(at),
                        message: err.to_string(),
                    }
                })?;
                self.xml_chars(at, &v)?;
                return Ok(Some(v.into_owned()));
            }
        }
        Ok(None)
    }

    /// Refuses text holding a character XML 1.0 does not allow (2.2 `Char`: C0 controls other
    /// than tab, line feed and carriage return; U+FFFE, U+FFFF), raw or as a character
    /// reference, as a conforming XML parser does: [`to_xml`] could not write it back.
    fn xml_chars(&self, at: usize, s: &str) -> Result<(), ConfigError> {
        let refused = |c: &char| {
            matches!(c, '\0'..='\x08' | '\x0B' | '\x0C' | '\x0E'..='\x1F')
                || matches!(c, '\u{FFFE}' | '\u{FFFF}')
        };
        match s.chars().find(refused) {
            Some(c) => Err(ConfigError::Syntax {
                pos: self.pos(at),
                message: format!("character U+{:04X} is not allowed in XML 1.0", u32::from(c)),
            }),
            None => Ok(()),
        }
    }

    fn required_attr(
        &self,
        at: usize,
        e: &BytesStart<'_>,
        key: &'static str,
    ) -> Result<String, ConfigError> {
        self.xml_attr(at, e, key)?
            .ok_or_else(|| ConfigError::MissingAttribute {
                pos: self.pos(at),
                element: e.name().as_ref().to_string(),
                attribute: key,
            })
    }

    fn crawler_config(
        &mut self,
        out: &mut Vec<(String, Value<'static>)>,
    ) -> Result<(), ConfigError> {
        loop {
            let (at, ev) = self.next()?;
            let (e, empty) = match ev {
                Event::Start(e) => (e, false),
                Event::Empty(e) => (e, true),
                Event::End(_) => return Ok(()),
                ev => {
                    self.between_elements(at, ev, "CrawlerConfig")?;
                    continue;
                }
            };
            if e.name().as_ref() != "DomainSpecification" {
                return Err(self.unexpected(at, &e, "CrawlerConfig"));
            }
            out.push(self.domain_spec(at, &e, empty)?);
        }
    }

    /// Accepts what may stand between elements: white space, comments, processing instructions.
    fn between_elements(&self, at: usize, ev: Event<'_>, parent: &str) -> Result<(), ConfigError> {
        match ev {
            Event::Text(t) if is_blank(t.as_ref()) => Ok(()),
            Event::Text(_) | Event::CData(_) | Event::GeneralRef(_) => {
                Err(ConfigError::UnexpectedText {
                    pos: self.pos(at),
                    parent: parent.to_string(),
                })
            }
            Event::Eof => Err(self.eof_in(at, parent)),
            _ => Ok(()),
        }
    }

    fn eof_in(&self, at: usize, parent: &str) -> ConfigError {
        ConfigError::Syntax {
            pos: self.pos(at),
            message: format!("the document ends inside <{parent}>"),
        }
    }

    fn domain_spec(
        &mut self,
        at: usize,
        e: &BytesStart<'_>,
        empty: bool,
    ) -> Result<(String, Value<'static>), ConfigError> {
        let name = self.required_attr(at, e, "name")?;
        let dict = if empty {
            Vec::new()
        } else {
            self.params(Ctx::Top, "DomainSpecification")?
        };
        Ok((name, Value::Dict(dict)))
    }

    /// The children of a DomainSpecification, section, SubDomain, Login or Node, up to its end.
    fn params(&mut self, ctx: Ctx, element: &str) -> Result<Dict<'static>, ConfigError> {
        let mut dict = Dict::new();
        loop {
            let (at, ev) = self.next()?;
            let (e, empty) = match ev {
                Event::Start(e) => (e, false),
                Event::Empty(e) => (e, true),
                Event::End(_) => return Ok(dict),
                ev => {
                    self.between_elements(at, ev, element)?;
                    continue;
                }
            };
            let tag = e.name().as_ref().to_string();
            let name = match tag.as_str() {
                // FSCMT 2.2.2.3.3 maps the link_extraction section's attribs only.
                "section" if matches!(ctx, Ctx::Inner { link: true, .. }) => {
                    return Err(self.unexpected(at, &e, element))
                }
                "attrib" | "section" => self.required_attr(at, &e, "name")?,
                "SubDomain" | "Login" | "Node" if ctx == Ctx::Top => {
                    self.required_attr(at, &e, "name")?
                }
                _ => return Err(self.unexpected(at, &e, element)),
            };
            // FSCMT 2.2.2.3.1 reserves the group names at the top for SubDomain, Login and Node
            // elements: an attrib or section of that name would collide with them.
            let plain = matches!(tag.as_str(), "attrib" | "section");
            if ctx == Ctx::Top && plain && GROUPS.iter().any(|(_, g)| *g == name) {
                return Err(ConfigError::ReservedName {
                    pos: self.pos(at),
                    name,
                });
            }
            match tag.as_str() {
                "attrib" => {
                    let key = match ctx {
                        Ctx::Inner { link: true, .. } => match link_extraction_key(&name) {
                            Some(k) => Value::int(i64::from(k)),
                            None => {
                                return Err(ConfigError::UnknownLinkTag {
                                    pos: self.pos(at),
                                    name,
                                })
                            }
                        },
                        _ => Value::owned_bytes(name.clone().into_bytes()),
                    };
                    let value = self.attrib(at, &e, &name, empty)?;
                    insert(&mut dict, key, value);
                }
                "section" => {
                    let depth = match ctx {
                        Ctx::Top => 1,
                        Ctx::Inner { depth, .. } => depth + 1,
                    };
                    if depth > MAX_SECTION_DEPTH {
                        return Err(ConfigError::Syntax {
                            pos: self.pos(at),
                            message: format!(
                                "sections nested deeper than {MAX_SECTION_DEPTH} levels"
                            ),
                        });
                    }
                    let inner = if empty {
                        Dict::new()
                    } else {
                        let link = name == "link_extraction";
                        self.params(Ctx::Inner { link, depth }, "section")?
                    };
                    insert(
                        &mut dict,
                        Value::owned_bytes(name.into_bytes()),
                        Value::Dict(inner),
                    );
                }
                _ => {
                    // SubDomain / Login / Node (FSCMT 2.2.2.3.1): into the group dict, created
                    // where the first element of its kind stands.
                    let group = GROUPS
                        .iter()
                        .find(|(t, _)| *t == tag)
                        .map_or("", |(_, g)| *g);
                    let inner = if empty {
                        Dict::new()
                    } else {
                        self.params(
                            Ctx::Inner {
                                link: false,
                                depth: 1,
                            },
                            &tag,
                        )?
                    };
                    let gkey = Value::owned_bytes(group.as_bytes().to_vec());
                    let entry = (Value::owned_bytes(name.into_bytes()), Value::Dict(inner));
                    match dict.iter_mut().find(|(k, _)| super::same_key(k, &gkey)) {
                        Some((_, Value::Dict(members))) => {
                            insert(members, entry.0, entry.1);
                        }
                        // A group key always holds a dict: sections of these names are refused
                        // at the top level, where groups live.
                        _ => dict.push((gkey, Value::Dict(vec![entry]))),
                    }
                }
            }
        }
    }

    /// The value of one `attrib` element (FSCMT 2.2.2.3.2), its start tag already read.
    fn attrib(
        &mut self,
        at: usize,
        e: &BytesStart<'_>,
        name: &str,
        empty: bool,
    ) -> Result<Value<'static>, ConfigError> {
        let ty = self.required_attr(at, e, "type")?;
        let ty = match ty.as_str() {
            "integer" => "integer",
            "string" => "string",
            "list-string" => "list-string",
            "boolean" => "boolean",
            "real" => "real",
            _ => {
                return Err(ConfigError::UnknownType {
                    pos: self.pos(at),
                    type_name: ty,
                })
            }
        };
        if ty == "list-string" {
            let members = if empty { Vec::new() } else { self.members()? };
            return Ok(Value::list(members));
        }
        let (text, text_at) = if empty {
            (String::new(), None)
        } else {
            self.text_content("attrib")?
        };
        let bad = |p: &Self| ConfigError::BadValue {
            pos: p.pos(text_at.unwrap_or(at)),
            attrib: name.to_string(),
            type_name: ty,
            value: text.clone(),
        };
        Ok(match ty {
            "integer" => Value::int(text.parse::<i64>().map_err(|_| bad(self))?),
            "real" => match text.parse::<f64>() {
                Ok(f) if f.is_finite() => Value::Float(f),
                _ => return Err(bad(self)),
            },
            "boolean" => Value::int(match parse_bool(&text) {
                Some(b) => i64::from(b),
                None => return Err(bad(self)),
            }),
            _ => Value::owned_bytes(text.into_bytes()),
        })
    }

    /// The `member` elements of a `list-string` attrib, up to its end.
    fn members(&mut self) -> Result<Vec<Value<'static>>, ConfigError> {
        let mut out = Vec::new();
        loop {
            let (at, ev) = self.next()?;
            match ev {
                Event::Start(e) if e.name().as_ref() == "member" => {
                    let (text, _) = self.text_content("member")?;
                    out.push(Value::owned_bytes(text.into_bytes()));
                }
                Event::Empty(e) if e.name().as_ref() == "member" => {
                    out.push(Value::owned_bytes(Vec::new()))
                }
                Event::Start(e) | Event::Empty(e) => return Err(self.unexpected(at, &e, "attrib")),
                Event::End(_) => return Ok(out),
                ev => self.between_elements(at, ev, "attrib")?,
            }
        }
    }

    /// The character data of an element up to its end tag, trimmed as the module doc says, and
    /// the offset of its first character that is not literal white space.
    fn text_content(&mut self, element: &str) -> Result<(String, Option<usize>), ConfigError> {
        let mut t = TextBuf::default();
        loop {
            let (at, ev) = self.next()?;
            match ev {
                Event::Text(x) => {
                    let raw_start = x.as_ref().find(|c| !is_xml_space(c));
                    let text = x.xml10_content();
                    self.xml_chars(at, &text)?;
                    t.literal(&text, raw_start.map(|i| at + i));
                }
                Event::CData(x) => {
                    let text = x.xml10_content();
                    self.xml_chars(at, &text)?;
                    t.kept(&text, at)
                }
                Event::GeneralRef(r) => {
                    let resolved = match r.resolve_char_ref() {
                        Ok(Some(c)) => c.to_string(),
                        Ok(None) => match resolve_predefined_entity(r.as_ref()) {
                            Some(s) => s.to_string(),
                            None => {
                                return Err(ConfigError::Syntax {
                                    pos: self.pos(at),
                                    message: format!("unknown entity &{};", r.as_ref()),
                                })
                            }
                        },
                        Err(err) => {
                            return Err(ConfigError::Syntax {
                                pos: self.pos(at),
                                message: err.to_string(),
                            })
                        }
                    };
                    self.xml_chars(at, &resolved)?;
                    t.kept(&resolved, at);
                }
                Event::Start(e) | Event::Empty(e) => return Err(self.unexpected(at, &e, element)),
                Event::End(_) => return Ok(t.finish()),
                Event::Eof => return Err(self.eof_in(at, element)),
                _ => {}
            }
        }
    }
}

/// Character data being gathered: literal white space at either end is trimmed, white space
/// from references and CDATA is kept.
#[derive(Default)]
struct TextBuf {
    s: String,
    /// Byte index in `s` of the first kept character.
    kept_from: Option<usize>,
    /// Byte index in `s` just after the last kept character.
    kept_to: usize,
    /// Document offset of the first character that is not literal white space.
    first: Option<usize>,
}

impl TextBuf {
    fn literal(&mut self, s: &str, first_solid: Option<usize>) {
        if self.first.is_none() {
            self.first = first_solid;
        }
        self.s.push_str(s);
    }

    fn kept(&mut self, s: &str, at: usize) {
        if self.first.is_none() {
            self.first = Some(at);
        }
        if s.is_empty() {
            return;
        }
        self.kept_from.get_or_insert(self.s.len());
        self.s.push_str(s);
        self.kept_to = self.s.len();
    }

    fn finish(self) -> (String, Option<usize>) {
        let lead = self.s.len() - self.s.trim_start_matches(is_xml_space).len();
        let start = lead.min(self.kept_from.unwrap_or(usize::MAX));
        let end = self
            .s
            .trim_end_matches(is_xml_space)
            .len()
            .max(self.kept_to);
        let text = if start >= end {
            String::new()
        } else {
            self.s[start..end].to_string()
        };
        (text, self.first)
    }
}

fn is_xml_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

fn is_blank(s: &str) -> bool {
    s.chars().all(is_xml_space)
}

/// FAST configurations write booleans as `yes`/`no`; `true`/`false`, `on`/`off` and `1`/`0` are
/// accepted too, in any case.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "yes" | "true" | "on" | "1" => Some(true),
        "no" | "false" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Sets `key` in `dict`: in place when present (as a Python dict would), appended otherwise.
fn insert(dict: &mut Dict<'static>, key: Value<'static>, value: Value<'static>) {
    match dict.iter_mut().find(|(k, _)| super::same_key(k, &key)) {
        Some((_, v)) => *v = value,
        None => dict.push((key, value)),
    }
}

/// The XML for one collection's dict (the inverse of [`parse_xml`], so that
/// CollectionGetConfigurationXML can answer): `parse_xml(&to_xml(name, &dict)?)` gives back
/// `[(name, dict)]` for every dict [`parse_xml`] produces.
///
/// Integers are written as `integer` (booleans were mapped to 1/0 and stay integers), marshal
/// booleans as `boolean`, floats as `real` (in the shortest form that reads back to the same
/// float), byte strings as `string` (they must be UTF-8), lists of byte strings as
/// `list-string`, dicts as `section` — except `subdomains`/`logins`/`nodes` at the top, which
/// become SubDomain/Login/Node elements, and `link_extraction`, whose integer keys become their
/// FSCMT 2.2.2.3.3 names. Anything else (None, non-finite floats, nested lists, other integer
/// keys, ...) is [`ConfigError::NotRepresentable`].
pub fn to_xml(name: &str, dict: &Value<'_>) -> Result<String, ConfigError> {
    let pairs = dict.as_dict().ok_or(ConfigError::NotRepresentable {
        key: String::new(),
        why: "a collection configuration is a dict",
    })?;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<CrawlerConfig>\n");
    out.push_str("  <DomainSpecification name=\"");
    escape_into(name, true, &mut out).map_err(|why| ConfigError::NotRepresentable {
        key: String::new(),
        why,
    })?;
    out.push_str("\">\n");
    write_params(pairs, Ctx::Top, "", 2, &mut out)?;
    out.push_str("  </DomainSpecification>\n</CrawlerConfig>\n");
    Ok(out)
}

fn write_params(
    pairs: &[(Value<'_>, Value<'_>)],
    ctx: Ctx,
    path: &str,
    indent: usize,
    out: &mut String,
) -> Result<(), ConfigError> {
    let pad = "  ".repeat(indent);
    let link = matches!(ctx, Ctx::Inner { link: true, .. });
    for (k, v) in pairs {
        let key: &str = if link {
            k.as_i64().and_then(link_extraction_name).ok_or_else(|| {
                ConfigError::NotRepresentable {
                    key: join(path, &k.py_repr()),
                    why: "link_extraction keys are the integers of FSCMT 2.2.2.3.3",
                }
            })?
        } else {
            k.as_bytes()
                .and_then(|b| std::str::from_utf8(b).ok())
                .ok_or_else(|| ConfigError::NotRepresentable {
                    key: join(path, &k.py_repr()),
                    why: "keys are UTF-8 strings",
                })?
        };
        let here = join(path, key);
        let nr = |why| ConfigError::NotRepresentable {
            key: here.clone(),
            why,
        };
        let group = GROUPS.iter().find(|(_, g)| *g == key).map(|(t, _)| *t);
        match (v, group) {
            (Value::Dict(members), Some(tag)) if ctx == Ctx::Top => {
                for (mk, mv) in members {
                    let mname = mk
                        .as_bytes()
                        .and_then(|b| std::str::from_utf8(b).ok())
                        .ok_or_else(|| nr("member names are UTF-8 strings"))?;
                    let inner = mv
                        .as_dict()
                        .ok_or_else(|| nr("each member is a dict of parameters"))?;
                    open_named(&pad, tag, mname, out).map_err(nr)?;
                    out.push_str(">\n");
                    let sub = Ctx::Inner {
                        link: false,
                        depth: 1,
                    };
                    write_params(inner, sub, &join(&here, mname), indent + 1, out)?;
                    out.push_str(&format!("{pad}</{tag}>\n"));
                }
            }
            (_, Some(_)) if ctx == Ctx::Top => return Err(nr("this key holds a dict of dicts")),
            (Value::Dict(inner), _) if !link => {
                let depth = match ctx {
                    Ctx::Top => 1,
                    Ctx::Inner { depth, .. } => depth + 1,
                };
                if depth > MAX_SECTION_DEPTH {
                    return Err(nr("sections nested too deep"));
                }
                open_named(&pad, "section", key, out).map_err(nr)?;
                out.push_str(">\n");
                let sub = Ctx::Inner {
                    link: key == "link_extraction",
                    depth,
                };
                write_params(inner, sub, &here, indent + 1, out)?;
                out.push_str(&format!("{pad}</section>\n"));
            }
            _ => write_attrib(key, v, &pad, out).map_err(nr)?,
        }
    }
    Ok(())
}

fn write_attrib(key: &str, v: &Value<'_>, pad: &str, out: &mut String) -> Result<(), &'static str> {
    open_named(pad, "attrib", key, out)?;
    let (ty, text) = match v {
        Value::Int(i, _) => ("integer", i.to_string()),
        Value::Bool(b) => ("boolean", if *b { "yes" } else { "no" }.to_string()),
        Value::Float(_) | Value::FloatText(_) => match v.as_f64() {
            // `{:?}` is the shortest text that reads back to the same f64.
            Some(f) if f.is_finite() => ("real", format!("{f:?}")),
            _ => return Err("the XML format has no non-finite reals"),
        },
        Value::Bytes(b, _) => {
            let s = std::str::from_utf8(b).map_err(|_| "strings are UTF-8")?;
            let mut t = String::new();
            escape_into(s, false, &mut t)?;
            ("string", t)
        }
        Value::List(items) | Value::Tuple(items) => {
            out.push_str(" type=\"list-string\">\n");
            for item in items {
                let s = item
                    .as_bytes()
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .ok_or("list members are UTF-8 strings")?;
                out.push_str(pad);
                out.push_str("  <member>");
                escape_into(s, false, out)?;
                out.push_str("</member>\n");
            }
            out.push_str(pad);
            out.push_str("</attrib>\n");
            return Ok(());
        }
        Value::BigInt(_) => return Err("integers are 64-bit"),
        _ => return Err("no attrib type holds this value"),
    };
    out.push_str(&format!(" type=\"{ty}\">{text}</attrib>\n"));
    Ok(())
}

/// Writes `{pad}<{tag} name="{name}"` (no closing `>`).
fn open_named(pad: &str, tag: &str, name: &str, out: &mut String) -> Result<(), &'static str> {
    out.push_str(pad);
    out.push('<');
    out.push_str(tag);
    out.push_str(" name=\"");
    escape_into(name, true, out)?;
    out.push('"');
    Ok(())
}

/// Escapes `s` for character data (or an attribute value) so that [`parse_xml`] reads back
/// exactly `s`: markup characters as entities; `\r` (which XML line-end handling would turn
/// into `\n`), white space at either end (which parsing trims) and, in attribute values, tabs
/// and newlines (which attribute normalization turns into spaces) as character references.
fn escape_into(s: &str, attribute: bool, out: &mut String) -> Result<(), &'static str> {
    let lead = s.len() - s.trim_start_matches(is_xml_space).len();
    let trail = s.trim_end_matches(is_xml_space).len();
    for (i, c) in s.char_indices() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\r' => out.push_str("&#13;"),
            ' ' if !attribute && (i < lead || i >= trail) => out.push_str("&#32;"),
            '\t' | '\n' if attribute || i < lead || i >= trail => {
                out.push_str(&format!("&#{};", c as u32))
            }
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => {
                return Err("the text has characters XML 1.0 cannot carry")
            }
            c => out.push(c),
        }
    }
    Ok(())
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}
