//! XML-RPC bodies (the transport of MS-FSCADM 2.1, the [XML-RPC] specification): values,
//! `methodCall` parsing, `methodResponse` and fault encoding, and the conversion to and from the
//! marshal [`crate::marshal::Value`] the schedulers keep their state in.
//!
//! Only the standard types are read and written: `int`/`i4` (and `i8` on input), `boolean`,
//! `string` (also an untyped `<value>`), `double`, `dateTime.iso8601`, `base64`, `array` and
//! `struct`. `nil` is refused on input and never written: Python's `xmlrpc.client` without
//! `allow_none` refuses it. Integers outside the 32-bit range are written as `double`, as
//! FSCADM 2.2.4.6 says large statistics values travel.
//!
//! Bodies are refused before parsing when larger than [`Limits::max_body`]; nesting deeper than
//! [`Limits::max_depth`] elements is refused while reading, so nothing recurses without bound.
//!
//! ```
//! use crawlfleet_core::xmlrpc::{self, Limits, Value};
//!
//! let body = b"<?xml version='1.0'?><methodCall><methodName>AddURIs</methodName><params>\
//!   <param><value><string>web</string></value></param><param><value><int>0</int></value></param>\
//!   </params></methodCall>";
//! let call = xmlrpc::parse_call(body, &Limits::default()).unwrap();
//! assert_eq!(call.method, "AddURIs");
//! assert_eq!(call.params, [Value::String("web".into()), Value::Int(0)]);
//! let reply = xmlrpc::encode_response(&Value::Array(vec![Value::Int(1), "ok".into()]));
//! let back = xmlrpc::parse_response(&reply, &Limits::default()).unwrap();
//! assert_eq!(back, Ok(Value::Array(vec![Value::Int(1), "ok".into()])));
//! ```

mod convert;
mod parse;
#[cfg(test)]
mod tests;

use std::fmt;

pub use convert::{from_marshal, to_marshal};
pub use parse::{parse_call, parse_response};

/// One XML-RPC value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `int` / `i4` (`i8` accepted on input). Written as `double` outside the 32-bit range.
    Int(i64),
    /// `boolean`.
    Bool(bool),
    /// `string`.
    String(String),
    /// `double`.
    Double(f64),
    /// `dateTime.iso8601`, kept as its text (`19980717T14:08:55`).
    DateTime(String),
    /// `base64`.
    Base64(Vec<u8>),
    /// `array`.
    Array(Vec<Value>),
    /// `struct`, members in document order.
    Struct(Vec<(String, Value)>),
}

impl Value {
    /// The XML-RPC type name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Int(_) => "int",
            Value::Bool(_) => "boolean",
            Value::String(_) => "string",
            Value::Double(_) => "double",
            Value::DateTime(_) => "dateTime.iso8601",
            Value::Base64(_) => "base64",
            Value::Array(_) => "array",
            Value::Struct(_) => "struct",
        }
    }

    /// The member `name` of a struct.
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self {
            Value::Struct(m) => m.iter().find(|(k, _)| k == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The integer of an `int` (or a `boolean`, as Python sends `True` for 1).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Bool(b) => Some(i64::from(*b)),
            _ => None,
        }
    }

    /// The number of an `int` or `double`.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(i) => Some(*i as f64),
            Value::Double(d) => Some(*d),
            _ => None,
        }
    }

    /// The text of a `string`.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The items of an `array`.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

/// A `methodCall`.
#[derive(Clone, Debug, PartialEq)]
pub struct MethodCall {
    /// `methodName`.
    pub method: String,
    /// The `param` values in order.
    pub params: Vec<Value>,
}

/// A fault response (FSCADM 2.2.7: faultCode 1 and a faultString).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// `faultCode`.
    pub code: i64,
    /// `faultString`.
    pub message: String,
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fault {}: {}", self.code, self.message)
    }
}

/// The fault code every FSCADM fault carries (2.2.7).
pub const FAULT_CODE: i64 = 1;

/// Bounds on what a body may make the parser do.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The largest body accepted, in bytes.
    pub max_body: usize,
    /// The deepest element nesting accepted (a value in an array in a struct ... counts each
    /// element: `value`, `array`, `data`, ...).
    pub max_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body: 16 << 20,
            max_depth: 64,
        }
    }
}

/// Why a body was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum XmlRpcError {
    /// The body is larger than [`Limits::max_body`].
    TooLarge {
        /// The body's length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// Elements nest deeper than [`Limits::max_depth`].
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// The body is not UTF-8.
    NotUtf8,
    /// The XML is not well formed.
    Syntax(String),
    /// An element where another was expected.
    Unexpected {
        /// What was found (an element name, or "text", or "end of document").
        found: String,
        /// What the grammar allows there.
        expected: &'static str,
    },
    /// A scalar whose text is not of its type.
    BadScalar {
        /// The type element.
        ty: &'static str,
        /// The text found.
        text: String,
    },
    /// A type element XML-RPC does not have, or that this server refuses (`nil`).
    UnknownType(String),
}

impl fmt::Display for XmlRpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XmlRpcError::TooLarge { len, limit } => {
                write!(
                    f,
                    "request body of {len} bytes exceeds the limit of {limit}"
                )
            }
            XmlRpcError::TooDeep { limit } => {
                write!(f, "XML nests deeper than {limit} elements")
            }
            XmlRpcError::NotUtf8 => f.write_str("request body is not UTF-8"),
            XmlRpcError::Syntax(m) => write!(f, "malformed XML: {m}"),
            XmlRpcError::Unexpected { found, expected } => {
                write!(f, "malformed XML-RPC: found {found}, expected {expected}")
            }
            XmlRpcError::BadScalar { ty, text } => {
                let shown: String = text.chars().take(64).collect();
                write!(f, "malformed XML-RPC: {shown:?} is not a valid {ty}")
            }
            XmlRpcError::UnknownType(t) => {
                write!(f, "malformed XML-RPC: unsupported value type <{t}>")
            }
        }
    }
}

impl std::error::Error for XmlRpcError {}

const HEADER: &str = "<?xml version='1.0'?>\n";

/// A `methodResponse` carrying `v`.
pub fn encode_response(v: &Value) -> Vec<u8> {
    let mut out = String::with_capacity(256);
    out.push_str(HEADER);
    out.push_str("<methodResponse>\n<params>\n<param>\n");
    write_value(v, &mut out);
    out.push_str("\n</param>\n</params>\n</methodResponse>\n");
    out.into_bytes()
}

/// A fault `methodResponse` (FSCADM 2.2.7).
pub fn encode_fault(code: i64, message: &str) -> Vec<u8> {
    let f = Value::Struct(vec![
        ("faultCode".into(), Value::Int(code)),
        ("faultString".into(), Value::String(message.into())),
    ]);
    let mut out = String::with_capacity(256);
    out.push_str(HEADER);
    out.push_str("<methodResponse>\n<fault>\n");
    write_value(&f, &mut out);
    out.push_str("\n</fault>\n</methodResponse>\n");
    out.into_bytes()
}

/// A `methodCall` (what the `crawlfleet admin` client sends).
pub fn encode_call(method: &str, params: &[Value]) -> Vec<u8> {
    let mut out = String::with_capacity(256);
    out.push_str(HEADER);
    out.push_str("<methodCall>\n<methodName>");
    escape(method, &mut out);
    out.push_str("</methodName>\n<params>\n");
    for p in params {
        out.push_str("<param>\n");
        write_value(p, &mut out);
        out.push_str("\n</param>\n");
    }
    out.push_str("</params>\n</methodCall>\n");
    out.into_bytes()
}

fn write_value(v: &Value, out: &mut String) {
    out.push_str("<value>");
    match v {
        Value::Int(i) => match i32::try_from(*i) {
            Ok(i) => out.push_str(&format!("<int>{i}</int>")),
            // Outside XML-RPC's int: a double (FSCADM 2.2.4.6).
            Err(_) => write_double(*i as f64, out),
        },
        Value::Bool(b) => out.push_str(if *b {
            "<boolean>1</boolean>"
        } else {
            "<boolean>0</boolean>"
        }),
        Value::String(s) => {
            out.push_str("<string>");
            escape(s, out);
            out.push_str("</string>");
        }
        Value::Double(d) => write_double(*d, out),
        Value::DateTime(s) => {
            out.push_str("<dateTime.iso8601>");
            escape(s, out);
            out.push_str("</dateTime.iso8601>");
        }
        Value::Base64(b) => {
            use base64::Engine;
            out.push_str("<base64>");
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(b));
            out.push_str("</base64>");
        }
        Value::Array(items) => {
            out.push_str("<array><data>\n");
            for i in items {
                write_value(i, out);
                out.push('\n');
            }
            out.push_str("</data></array>");
        }
        Value::Struct(members) => {
            out.push_str("<struct>\n");
            for (k, v) in members {
                out.push_str("<member>\n<name>");
                escape(k, out);
                out.push_str("</name>\n");
                write_value(v, out);
                out.push_str("\n</member>\n");
            }
            out.push_str("</struct>");
        }
    }
    out.push_str("</value>");
}

fn write_double(d: f64, out: &mut String) {
    // XML-RPC doubles have no exponent, NaN or infinity: those become 0.0 (statistics never
    // produce them; a log line would be noise here).
    // `{:?}` gives the shortest digits that read back to `d`, with an exponent beyond 1e16 and
    // below 1e-4; `{}` gives the same digits written out in full, never with an exponent.
    let d = if d.is_finite() { d } else { 0.0 };
    let mut s = format!("{d:?}");
    if s.contains('e') {
        s = format!("{d}");
        if !s.contains('.') {
            s.push_str(".0");
        }
    }
    out.push_str("<double>");
    out.push_str(&s);
    out.push_str("</double>");
}

/// Escapes text for element content. Characters XML 1.0 cannot carry (most C0 controls) are
/// written as U+FFFD so that the document stays well formed.
fn escape(s: &str, out: &mut String) {
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\r' => out.push_str("&#13;"),
            '\t' | '\n' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
}
