//! Between XML-RPC values and the marshal values the schedulers keep (configurations, statistics).

use std::borrow::Cow;

use super::Value;
use crate::marshal::{self, StrForm};

/// An XML-RPC value for a marshal value. Strings that are UTF-8 become `string`, other byte
/// strings `base64`; tuples, lists and sets become `array`s; dict keys become member names
/// (byte strings as text, other keys as Python's `repr`); `None` becomes the string "None"
/// (XML-RPC has no standard null; FSCADM 2.2.4.6.3 writes the histogram's unused slots as that
/// string); integers outside `i64` become doubles.
pub fn from_marshal(v: &marshal::Value<'_>) -> Value {
    use marshal::Value as M;
    match v {
        M::None => Value::String("None".into()),
        M::Bool(b) => Value::Bool(*b),
        M::Int(i, _) => Value::Int(*i),
        M::BigInt(_) | M::FloatText(_) => Value::Double(v.as_f64().unwrap_or_else(|| {
            // A big integer: its decimal text always parses as a (rounded) f64.
            v.py_repr().trim_end_matches('L').parse().unwrap_or(0.0)
        })),
        M::Float(f) => Value::Double(*f),
        M::Bytes(b, _) => match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => Value::Base64(b.to_vec()),
        },
        M::Tuple(items) | M::List(items) | M::Set(items) | M::FrozenSet(items) => {
            Value::Array(items.iter().map(from_marshal).collect())
        }
        M::Dict(pairs) => Value::Struct(
            pairs
                .iter()
                .map(|(k, v)| (member_name(k), from_marshal(v)))
                .collect(),
        ),
    }
}

fn member_name(k: &marshal::Value<'_>) -> String {
    match k {
        marshal::Value::Bytes(b, _) => String::from_utf8_lossy(b).into_owned(),
        marshal::Value::Int(i, _) => i.to_string(),
        other => other.py_repr(),
    }
}

/// A marshal value for an XML-RPC value: `string`, `dateTime.iso8601` and `base64` become byte
/// strings, `array` a list, `struct` a dict with byte-string keys.
pub fn to_marshal(v: &Value) -> marshal::Value<'static> {
    use marshal::Value as M;
    let bytes = |b: &[u8]| M::Bytes(Cow::Owned(b.to_vec()), StrForm::Plain);
    match v {
        Value::Int(i) => M::int(*i),
        Value::Bool(b) => M::Bool(*b),
        Value::String(s) | Value::DateTime(s) => bytes(s.as_bytes()),
        Value::Double(d) => M::Float(*d),
        Value::Base64(b) => bytes(b),
        Value::Array(items) => M::List(items.iter().map(to_marshal).collect()),
        Value::Struct(members) => M::Dict(
            members
                .iter()
                .map(|(k, v)| (bytes(k.as_bytes()), to_marshal(v)))
                .collect(),
        ),
    }
}
