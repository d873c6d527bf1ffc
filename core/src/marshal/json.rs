//! A lossless, readable JSON form of marshal values, used by `crawlfleet inspect`.
//!
//! | marshal                          | JSON                                             |
//! |----------------------------------|--------------------------------------------------|
//! | `N`, `T`, `F`                    | `null`, `true`, `false`                          |
//! | `i`, or `l` beyond `i32`         | a number: `7`                                    |
//! | `I`                              | `{"$I": 7}`                                      |
//! | `l` inside `i32`                 | `{"$l": 7}`                                      |
//! | `l` beyond `i64`                 | `{"$l": "123456789012345678901234567890"}`        |
//! | `g`                              | a number with a point or exponent: `0.5`, `1e16` |
//! | `g` not finite                   | `{"$g": "inf"}`, `"-inf"`, `"nan"`, or `"0x7ff8000000000001"` (bits) |
//! | `f`                              | `{"$f": "0.10000000000000001"}` (the text as sent) |
//! | `s` (UTF-8)                      | a string: `"example"`                            |
//! | `s` (other bytes)                | `{"$hex": "a9ebcb8f"}`                           |
//! | `t`, `u`                         | `{"$t": S}`, `{"$u": S}`, where S is a string or `{"$hex": ...}` |
//! | `R`                              | `{"$R": 3}`                                      |
//! | `(`                              | an array: `["WQE", 1]`                           |
//! | `[`, `<`, `>`                    | `{"$list": [..]}`, `{"$set": [..]}`, `{"$frozenset": [..]}` |
//! | `{` with string keys             | an object, keys in wire order (see below)        |
//! | `{` otherwise                    | `{"$dict": [[key, value], ...]}`                 |
//!
//! Object keys: a UTF-8 `s` key is written as is, with a leading `$` doubled (`"$$x"` is the key
//! `$x`); a `t` key is `"$t:name"`, a `u` key `"$u:name"`, an `R` key `"$R:3"`. Wrappers are the
//! single-key objects above, whose keys never collide with an escaped dict key. A dict with
//! repeated or non-string keys uses the `$dict` form, so every value round-trips byte for byte.

use std::borrow::Cow;
use std::fmt;

use serde_json::{Map, Number, Value as Json};

use super::{BigInt, IntForm, StrForm, Value};

/// A JSON document that does not describe a marshal value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// What was wrong, with the offending fragment.
    pub message: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonError {}

fn bad(what: &str, j: &Json) -> JsonError {
    let mut shown = j.to_string();
    if shown.len() > 80 {
        let mut cut = 77;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push_str("...");
    }
    JsonError {
        message: format!("{what}: {shown}"),
    }
}

fn wrap(key: &str, inner: Json) -> Json {
    let mut m = Map::with_capacity(1);
    m.insert(key.to_owned(), inner);
    Json::Object(m)
}

fn text_or_hex(b: &[u8]) -> Json {
    match std::str::from_utf8(b) {
        Ok(s) => Json::String(s.to_owned()),
        Err(_) => wrap("$hex", Json::String(hex_encode(b))),
    }
}

/// Lower-case hex of `b`.
pub fn hex_encode(b: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &c in b {
        s.push(DIGITS[(c >> 4) as usize] as char);
        s.push(DIGITS[(c & 15) as usize] as char);
    }
    s
}

/// Bytes from hex text (either case); `None` when the text is not whole hex bytes.
pub fn hex_decode(s: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks_exact(2)
        .map(|p| Some(nibble(p[0])? << 4 | nibble(p[1])?))
        .collect()
}

/// The object key for a dict key, when it has one.
fn object_key(k: &Value<'_>) -> Option<String> {
    let Value::Bytes(b, form) = k else {
        return None;
    };
    let s = std::str::from_utf8(b).ok()?;
    Some(match form {
        StrForm::Plain if s.starts_with('$') => format!("${s}"),
        StrForm::Plain => s.to_owned(),
        StrForm::Interned => format!("$t:{s}"),
        StrForm::Unicode => format!("$u:{s}"),
        StrForm::Ref(i) => format!("$R:{i}"),
    })
}

/// The JSON form of `v`.
pub fn to_json(v: &Value<'_>) -> Json {
    let seq = |items: &[Value<'_>]| Json::Array(items.iter().map(to_json).collect());
    match v {
        Value::None => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i, IntForm::Auto) => Json::Number((*i).into()),
        Value::Int(i, IntForm::Int64) => wrap("$I", Json::Number((*i).into())),
        Value::Int(i, IntForm::Long) => wrap("$l", Json::Number((*i).into())),
        Value::BigInt(b) => wrap("$l", Json::String(b.to_string())),
        Value::Float(f) => match Number::from_f64(*f) {
            Some(n) => Json::Number(n),
            None => wrap("$g", Json::String(non_finite_name(*f))),
        },
        Value::FloatText(t) => wrap("$f", Json::String(String::from_utf8_lossy(t).into_owned())),
        Value::Bytes(b, StrForm::Plain) => text_or_hex(b),
        Value::Bytes(b, StrForm::Interned) => wrap("$t", text_or_hex(b)),
        Value::Bytes(b, StrForm::Unicode) => wrap("$u", text_or_hex(b)),
        Value::Bytes(_, StrForm::Ref(i)) => wrap("$R", Json::Number((*i).into())),
        Value::Tuple(items) => seq(items),
        Value::List(items) => wrap("$list", seq(items)),
        Value::Set(items) => wrap("$set", seq(items)),
        Value::FrozenSet(items) => wrap("$frozenset", seq(items)),
        Value::Dict(pairs) => {
            let mut m = Map::with_capacity(pairs.len());
            for (k, v) in pairs {
                match object_key(k) {
                    Some(key) if !m.contains_key(&key) => {
                        m.insert(key, to_json(v));
                    }
                    _ => {
                        let list = pairs
                            .iter()
                            .map(|(k, v)| Json::Array(vec![to_json(k), to_json(v)]))
                            .collect();
                        return wrap("$dict", Json::Array(list));
                    }
                }
            }
            Json::Object(m)
        }
    }
}

fn non_finite_name(f: f64) -> String {
    if f == f64::INFINITY {
        "inf".into()
    } else if f == f64::NEG_INFINITY {
        "-inf".into()
    } else if f.to_bits() == f64::NAN.to_bits() {
        "nan".into()
    } else {
        format!("0x{:016x}", f.to_bits())
    }
}

fn parse_non_finite(s: &str) -> Option<f64> {
    match s {
        "inf" => Some(f64::INFINITY),
        "-inf" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => u64::from_str_radix(s.strip_prefix("0x")?, 16)
            .ok()
            .map(f64::from_bits),
    }
}

fn string_of(j: &Json, what: &str) -> Result<Vec<u8>, JsonError> {
    match j {
        Json::String(s) => Ok(s.as_bytes().to_vec()),
        Json::Object(m) if m.len() == 1 => match m.get("$hex") {
            Some(Json::String(h)) => hex_decode(h).ok_or_else(|| bad("bad $hex", j)),
            _ => Err(bad(what, j)),
        },
        _ => Err(bad(what, j)),
    }
}

fn number_of(j: &Json) -> Result<Value<'static>, JsonError> {
    let Json::Number(n) = j else {
        return Err(bad("expected a number", j));
    };
    if let Some(i) = n.as_i64() {
        return Ok(Value::Int(i, IntForm::Auto));
    }
    if n.is_u64() {
        let b = BigInt::parse_decimal(&n.to_string()).ok_or_else(|| bad("bad integer", j))?;
        return Ok(Value::BigInt(Box::new(b)));
    }
    n.as_f64()
        .map(Value::Float)
        .ok_or_else(|| bad("bad number", j))
}

fn key_from(key: &str) -> Result<Value<'static>, JsonError> {
    let owned = |s: &str| Cow::Owned(s.as_bytes().to_vec());
    if let Some(rest) = key.strip_prefix("$$") {
        return Ok(Value::Bytes(
            Cow::Owned(format!("${rest}").into_bytes()),
            StrForm::Plain,
        ));
    }
    if let Some(rest) = key.strip_prefix("$t:") {
        return Ok(Value::Bytes(owned(rest), StrForm::Interned));
    }
    if let Some(rest) = key.strip_prefix("$u:") {
        return Ok(Value::Bytes(owned(rest), StrForm::Unicode));
    }
    if let Some(rest) = key.strip_prefix("$R:") {
        let i = rest.parse::<u32>().map_err(|_| JsonError {
            message: format!("bad reference key {key:?}"),
        })?;
        return Ok(Value::Bytes(Cow::Owned(Vec::new()), StrForm::Ref(i)));
    }
    if key.starts_with('$') {
        return Err(JsonError {
            message: format!("dict key {key:?}: a leading '$' must be doubled"),
        });
    }
    Ok(Value::Bytes(owned(key), StrForm::Plain))
}

fn items_of(j: &Json) -> Result<Vec<Value<'static>>, JsonError> {
    match j {
        Json::Array(items) => items.iter().map(from_json).collect(),
        _ => Err(bad("expected an array", j)),
    }
}

/// The marshal value a JSON document describes.
///
/// `R` references carry no text in JSON; the value built has empty bytes in their place, which
/// does not change the encoding (an `R` is written as its index).
pub fn from_json(j: &Json) -> Result<Value<'static>, JsonError> {
    match j {
        Json::Null => Ok(Value::None),
        Json::Bool(b) => Ok(Value::Bool(*b)),
        Json::Number(_) => number_of(j),
        Json::String(s) => Ok(Value::Bytes(
            Cow::Owned(s.as_bytes().to_vec()),
            StrForm::Plain,
        )),
        Json::Array(_) => Ok(Value::Tuple(items_of(j)?)),
        Json::Object(m) => {
            if m.len() == 1 {
                let (k, inner) = m.iter().next().expect("one entry");
                if let Some(v) = from_wrapper(k, inner, j)? {
                    return Ok(v);
                }
            }
            let mut pairs = Vec::with_capacity(m.len());
            for (k, v) in m {
                pairs.push((key_from(k)?, from_json(v)?));
            }
            Ok(Value::Dict(pairs))
        }
    }
}

fn from_wrapper(k: &str, inner: &Json, whole: &Json) -> Result<Option<Value<'static>>, JsonError> {
    let v = match k {
        "$I" => match inner.as_i64() {
            Some(i) => Value::Int(i, IntForm::Int64),
            None => return Err(bad("$I needs an integer", whole)),
        },
        "$l" => match inner {
            Json::Number(n) if n.as_i64().is_some() => {
                Value::Int(n.as_i64().unwrap_or_default(), IntForm::Long)
            }
            Json::String(s) => {
                let b = BigInt::parse_decimal(s).ok_or_else(|| bad("bad $l", whole))?;
                long_value(b)
            }
            _ => return Err(bad("$l needs an integer", whole)),
        },
        "$g" => match inner {
            Json::String(s) => {
                Value::Float(parse_non_finite(s).ok_or_else(|| bad("bad $g", whole))?)
            }
            Json::Number(n) => Value::Float(n.as_f64().ok_or_else(|| bad("bad $g", whole))?),
            _ => return Err(bad("$g needs a string", whole)),
        },
        "$f" => match inner {
            Json::String(s) if s.len() <= 255 && s.trim().parse::<f64>().is_ok() => {
                Value::FloatText(Cow::Owned(s.as_bytes().to_vec()))
            }
            _ => return Err(bad("$f needs float text of at most 255 bytes", whole)),
        },
        "$hex" => Value::Bytes(Cow::Owned(string_of(whole, "bad $hex")?), StrForm::Plain),
        "$t" => Value::Bytes(Cow::Owned(string_of(inner, "bad $t")?), StrForm::Interned),
        "$u" => Value::Bytes(Cow::Owned(string_of(inner, "bad $u")?), StrForm::Unicode),
        "$R" => match inner.as_u64().and_then(|i| u32::try_from(i).ok()) {
            Some(i) => Value::Bytes(Cow::Owned(Vec::new()), StrForm::Ref(i)),
            None => return Err(bad("$R needs an index", whole)),
        },
        "$list" => Value::List(items_of(inner)?),
        "$set" => Value::Set(items_of(inner)?),
        "$frozenset" => Value::FrozenSet(items_of(inner)?),
        "$dict" => {
            let Json::Array(pairs) = inner else {
                return Err(bad("$dict needs an array of pairs", whole));
            };
            let mut out = Vec::with_capacity(pairs.len());
            for p in pairs {
                match p {
                    Json::Array(kv) if kv.len() == 2 => {
                        out.push((from_json(&kv[0])?, from_json(&kv[1])?))
                    }
                    _ => return Err(bad("$dict pair is not [key, value]", p)),
                }
            }
            Value::Dict(out)
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

/// A `BigInt` parsed from `$l` text, as an `Int` with the `Long` form when it fits in `i64`.
fn long_value(b: BigInt) -> Value<'static> {
    let s = b.to_string();
    match s.parse::<i64>() {
        Ok(i) => Value::Int(i, IntForm::Long),
        Err(_) => Value::BigInt(Box::new(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::marshal::{from_bytes, to_bytes, Limits};

    fn round_trip(bytes: &[u8]) {
        let v = from_bytes(bytes, &Limits::default()).unwrap();
        let j = to_json(&v);
        let text = j.to_string();
        let back: Json = serde_json::from_str(&text).unwrap();
        let v2 = from_json(&back).unwrap();
        assert_eq!(to_bytes(&v2), bytes, "via {text}");
    }

    #[test]
    fn every_form_round_trips() {
        round_trip(b"N");
        round_trip(b"i\x07\x00\x00\x00");
        round_trip(b"I\x07\x00\x00\x00\x00\x00\x00\x00");
        round_trip(b"l\x01\x00\x00\x00\x05\x00"); // 5L
        round_trip(b"l\xfd\xff\xff\xff\x00\x00\x00\x00\x01\x00"); // -(2^30)
        round_trip(b"l\x05\x00\x00\x00\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00");
        round_trip(b"g\x00\x00\x00\x00\x00\x00\xf0\x7f"); // inf
        round_trip(b"g\x01\x00\x00\x00\x00\x00\xf8\x7f"); // a NaN with a payload
        round_trip(b"g\x00\x00\x00\x00\x00\x00\x00\x80"); // -0.0
        round_trip(b"g\x00\x00\x00\x00\x00\x00\xb0\x43"); // 2^60
        round_trip(b"f\x030.1");
        round_trip(b"s\x02\x00\x00\x00\xff\x00");
        round_trip(b"(\x03\x00\x00\x00t\x02\x00\x00\x00cmR\x00\x00\x00\x00u\x01\x00\x00\x00x");
        round_trip(b"{t\x02\x00\x00\x00cmi\x01\x00\x00\x00R\x00\x00\x00\x00N0");
        round_trip(b"{s\x02\x00\x00\x00$xNs\x03\x00\x00\x00$$yN0");
        round_trip(b"{i\x01\x00\x00\x00N0");
        round_trip(b"{s\x01\x00\x00\x00aNs\x01\x00\x00\x00aT0"); // repeated key
        round_trip(b"[\x02\x00\x00\x00<\x00\x00\x00\x00>\x01\x00\x00\x00T");
        round_trip(b"{s\x04\x00\x00\x00$hexN0");
    }

    #[test]
    fn wrappers_are_refused_when_malformed() {
        for text in [
            r#"{"$I": "x"}"#,
            r#"{"$hex": "abc"}"#,
            r#"{"$dict": [[1]]}"#,
            r#"{"$bad": 1, "x": 2}"#,
        ] {
            let j: Json = serde_json::from_str(text).unwrap();
            assert!(from_json(&j).is_err(), "{text}");
        }
    }
}
