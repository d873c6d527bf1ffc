//! Reading `methodCall` and `methodResponse` bodies: quick-xml's pull parser builds a small
//! element tree (bounded in depth; its size is bounded by the body's), which is then read
//! against the XML-RPC grammar.

use base64::Engine;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::Event;
use quick_xml::Reader;

use super::{Fault, Limits, MethodCall, Value, XmlRpcError};

/// An element: its name, child elements and character data (concatenated, unescaped).
#[derive(Debug, Default)]
struct El {
    name: String,
    children: Vec<El>,
    text: String,
}

fn syntax(e: impl ToString) -> XmlRpcError {
    XmlRpcError::Syntax(e.to_string())
}

/// The root element of `body`.
fn tree(body: &[u8], limits: &Limits) -> Result<El, XmlRpcError> {
    if body.len() > limits.max_body {
        return Err(XmlRpcError::TooLarge {
            len: body.len(),
            limit: limits.max_body,
        });
    }
    let text = std::str::from_utf8(body).map_err(|_| XmlRpcError::NotUtf8)?;
    let mut reader = Reader::from_str(text);
    let c = reader.config_mut();
    c.trim_text(false);
    c.check_end_names = true;
    c.expand_empty_elements = true;
    let mut stack: Vec<El> = Vec::new();
    let mut root: Option<El> = None;
    loop {
        let ev = reader.read_event().map_err(syntax)?;
        match ev {
            Event::Start(e) => {
                if root.is_some() {
                    return Err(syntax("content after the root element"));
                }
                if stack.len() >= limits.max_depth {
                    return Err(XmlRpcError::TooDeep {
                        limit: limits.max_depth,
                    });
                }
                let name = e.name().as_ref().to_string();
                stack.push(El {
                    name,
                    ..El::default()
                });
            }
            Event::End(_) => {
                // check_end_names makes quick-xml refuse a mismatched end tag.
                let Some(done) = stack.pop() else {
                    return Err(syntax("end tag without a start tag"));
                };
                match stack.last_mut() {
                    Some(parent) => parent.children.push(done),
                    None => root = Some(done),
                }
            }
            Event::Text(t) => {
                let s = t.xml10_content();
                xml_chars(&s)?;
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&s),
                    None if s.trim().is_empty() => {}
                    None => return Err(syntax("text outside the root element")),
                }
            }
            Event::CData(t) => {
                let s = t.xml10_content();
                xml_chars(&s)?;
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&s),
                    None => return Err(syntax("CDATA outside the root element")),
                }
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref().map_err(syntax)? {
                    Some(c) => c.to_string(),
                    None => resolve_predefined_entity(r.as_ref())
                        .ok_or_else(|| syntax(format!("unknown entity &{};", r.as_ref())))?
                        .to_string(),
                };
                xml_chars(&resolved)?;
                match stack.last_mut() {
                    Some(top) => top.text.push_str(&resolved),
                    None => return Err(syntax("reference outside the root element")),
                }
            }
            Event::Eof => break,
            // Declaration, comments, processing instructions, DOCTYPE: nothing to read.
            _ => {}
        }
    }
    if !stack.is_empty() {
        return Err(syntax("the document ends inside an element"));
    }
    root.ok_or(XmlRpcError::Unexpected {
        found: "an empty document".into(),
        expected: "<methodCall>",
    })
}

/// Refuses text holding a character XML 1.0 does not allow (2.2 `Char`: C0 controls other than
/// tab, line feed and carriage return; U+FFFE and U+FFFF), raw or as a character reference, as
/// an XML parser such as Python's expat does. Such text could not be written back: the encoder
/// puts U+FFFD in its place.
fn xml_chars(s: &str) -> Result<(), XmlRpcError> {
    let refused = |c: &char| {
        matches!(c, '\0'..='\x08' | '\x0B' | '\x0C' | '\x0E'..='\x1F')
            || matches!(c, '\u{FFFE}' | '\u{FFFF}')
    };
    match s.chars().find(refused) {
        Some(c) => Err(syntax(format!(
            "character U+{:04X} is not allowed in XML 1.0",
            u32::from(c)
        ))),
        None => Ok(()),
    }
}

fn unexpected(found: &El, expected: &'static str) -> XmlRpcError {
    XmlRpcError::Unexpected {
        found: format!("<{}>", found.name),
        expected,
    }
}

/// The text of an element that holds only text.
fn no_children(e: &El, expected: &'static str) -> Result<(), XmlRpcError> {
    match e.children.first() {
        Some(c) => Err(unexpected(c, expected)),
        None => Ok(()),
    }
}

/// The only child element named `name` (text around it must be white space).
fn only_child<'e>(e: &'e El, name: &'static str) -> Result<&'e El, XmlRpcError> {
    match e.children.as_slice() {
        [c] if c.name == name => Ok(c),
        [c, ..] => Err(unexpected(c, name)),
        [] => Err(XmlRpcError::Unexpected {
            found: format!("an empty <{}>", e.name),
            expected: name,
        }),
    }
}

fn bad(ty: &'static str, text: &str) -> XmlRpcError {
    XmlRpcError::BadScalar {
        ty,
        text: text.to_string(),
    }
}

/// A `<value>` element.
fn value(e: &El) -> Result<Value, XmlRpcError> {
    let t = match e.children.as_slice() {
        // No type element: a string (the [XML-RPC] default), white space kept.
        [] => return Ok(Value::String(e.text.clone())),
        [t] => t,
        [_, second, ..] => return Err(unexpected(second, "one type element in <value>")),
    };
    if !e.text.trim().is_empty() {
        return Err(XmlRpcError::Unexpected {
            found: "text beside a type element".into(),
            expected: "one type element in <value>",
        });
    }
    let s = t.text.trim();
    Ok(match t.name.as_str() {
        "int" | "i4" | "i8" => {
            no_children(t, "an integer")?;
            let i: i64 = s.parse().map_err(|_| bad("int", s))?;
            if t.name != "i8" && i32::try_from(i).is_err() {
                return Err(bad("int", s));
            }
            Value::Int(i)
        }
        "boolean" => {
            no_children(t, "0 or 1")?;
            match s {
                "0" => Value::Bool(false),
                "1" => Value::Bool(true),
                _ => return Err(bad("boolean", s)),
            }
        }
        "string" => {
            no_children(t, "text")?;
            Value::String(t.text.clone())
        }
        "double" => {
            no_children(t, "a number")?;
            let d: f64 = s.parse().map_err(|_| bad("double", s))?;
            if !d.is_finite() {
                return Err(bad("double", s));
            }
            Value::Double(d)
        }
        "dateTime.iso8601" => {
            no_children(t, "a date")?;
            if s.len() < 17 || !s.is_ascii() {
                return Err(bad("dateTime.iso8601", s));
            }
            Value::DateTime(s.to_string())
        }
        "base64" => {
            no_children(t, "base64 text")?;
            let compact: String = s.chars().filter(|c| !c.is_ascii_whitespace()).collect();
            let b = base64::engine::general_purpose::STANDARD
                .decode(compact.as_bytes())
                .map_err(|_| bad("base64", s))?;
            Value::Base64(b)
        }
        "array" => {
            let data = only_child(t, "data")?;
            let mut items = Vec::with_capacity(data.children.len());
            for v in &data.children {
                if v.name != "value" {
                    return Err(unexpected(v, "<value>"));
                }
                items.push(value(v)?);
            }
            Value::Array(items)
        }
        "struct" => {
            let mut members = Vec::with_capacity(t.children.len());
            for m in &t.children {
                if m.name != "member" {
                    return Err(unexpected(m, "<member>"));
                }
                let (name, v) = match m.children.as_slice() {
                    [n, v] if n.name == "name" && v.name == "value" => (n, v),
                    [n, v] => {
                        let wrong = if n.name != "name" { n } else { v };
                        return Err(unexpected(wrong, "<name> then <value>"));
                    }
                    _ => {
                        return Err(XmlRpcError::Unexpected {
                            found: format!("<member> with {} elements", m.children.len()),
                            expected: "<name> then <value>",
                        })
                    }
                };
                no_children(name, "the member name")?;
                members.push((name.text.clone(), value(v)?));
            }
            Value::Struct(members)
        }
        other => return Err(XmlRpcError::UnknownType(other.to_string())),
    })
}

/// `<params>`: each `<param><value>`.
fn params(e: &El) -> Result<Vec<Value>, XmlRpcError> {
    let mut out = Vec::with_capacity(e.children.len());
    for p in &e.children {
        if p.name != "param" {
            return Err(unexpected(p, "<param>"));
        }
        out.push(value(only_child(p, "value")?)?);
    }
    Ok(out)
}

/// Reads a `methodCall` body.
pub fn parse_call(body: &[u8], limits: &Limits) -> Result<MethodCall, XmlRpcError> {
    let root = tree(body, limits)?;
    if root.name != "methodCall" {
        return Err(unexpected(&root, "<methodCall>"));
    }
    let mut method = None;
    let mut ps = Vec::new();
    for c in &root.children {
        match c.name.as_str() {
            "methodName" if method.is_none() => {
                no_children(c, "the method name")?;
                method = Some(c.text.trim().to_string());
            }
            "params" => ps = params(c)?,
            _ => return Err(unexpected(c, "<methodName> then <params>")),
        }
    }
    let method = method.ok_or(XmlRpcError::Unexpected {
        found: "no <methodName>".into(),
        expected: "<methodName>",
    })?;
    if method.is_empty() {
        return Err(XmlRpcError::Unexpected {
            found: "an empty <methodName>".into(),
            expected: "a method name",
        });
    }
    Ok(MethodCall { method, params: ps })
}

/// Reads a `methodResponse` body: the value, or the fault.
pub fn parse_response(body: &[u8], limits: &Limits) -> Result<Result<Value, Fault>, XmlRpcError> {
    let root = tree(body, limits)?;
    if root.name != "methodResponse" {
        return Err(unexpected(&root, "<methodResponse>"));
    }
    let Some(c) = root.children.first() else {
        return Err(XmlRpcError::Unexpected {
            found: "an empty <methodResponse>".into(),
            expected: "<params> or <fault>",
        });
    };
    match c.name.as_str() {
        "params" => {
            let mut ps = params(c)?;
            if ps.len() != 1 {
                return Err(XmlRpcError::Unexpected {
                    found: format!("{} params", ps.len()),
                    expected: "one param in a response",
                });
            }
            Ok(Ok(ps.remove(0)))
        }
        "fault" => {
            let f = value(only_child(c, "value")?)?;
            let code = f.get("faultCode").and_then(Value::as_i64);
            let message = f.get("faultString").and_then(Value::as_str);
            match (code, message) {
                (Some(code), Some(m)) => Ok(Err(Fault {
                    code,
                    message: m.to_string(),
                })),
                _ => Err(XmlRpcError::Unexpected {
                    found: "a fault without faultCode and faultString".into(),
                    expected: "a fault struct",
                }),
            }
        }
        _ => Err(unexpected(c, "<params> or <fault>")),
    }
}
