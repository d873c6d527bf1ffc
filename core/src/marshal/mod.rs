//! The marshal format: the serialization the specs call MS-FSWCU ("pyfastmarshal"), which is
//! CPython 2's `marshal` module, format versions 0 to 2.
//!
//! [`Value`] is one decoded object. Byte strings borrow from the input buffer ([`Cow::Borrowed`]),
//! so decoding a frame copies no string data. Each variant also remembers the wire form it was
//! read in (`'i'` or `'I'` or `'l'`, `'s'` or `'t'` or `'u'` or `'R'`, `'f'` or `'g'`), so that
//! re-encoding a decoded value gives back the exact input bytes. Values built in code use the
//! canonical forms, which are the ones CPython's `marshal.dumps(value, 2)` writes: `'i'` for
//! integers inside `i32`, `'l'` beyond, `'g'` for floats, `'s'` for byte strings.
//!
//! ```
//! use crawlfleet_core::marshal::{self, Limits, Value};
//!
//! let bytes = marshal::to_bytes(&Value::tuple(vec![Value::bytes(b"WQE"), Value::int(7)]));
//! assert_eq!(bytes, b"(\x02\x00\x00\x00s\x03\x00\x00\x00WQEi\x07\x00\x00\x00");
//! let back = marshal::from_bytes(&bytes, &Limits::default()).unwrap();
//! assert_eq!(back.as_tuple().unwrap()[1].as_i64(), Some(7));
//! ```

mod bigint;
mod decode;
mod encode;
pub mod json;
mod repr;

use std::borrow::Cow;

pub use bigint::BigInt;
pub use decode::{from_bytes, scan, DecodeError, DecodeErrorKind, Decoder, Limits};
pub use encode::{encode_into, to_bytes};

/// The wire type codes of the marshal format (CPython 2 `Python/marshal.c`).
pub mod tag {
    /// `N`: None.
    pub const NONE: u8 = b'N';
    /// `T`: True.
    pub const TRUE: u8 = b'T';
    /// `F`: False.
    pub const FALSE: u8 = b'F';
    /// `i`: 32-bit signed little-endian integer.
    pub const INT: u8 = b'i';
    /// `I`: 64-bit signed little-endian integer (CPython 2 `int` beyond 32 bits).
    pub const INT64: u8 = b'I';
    /// `l`: arbitrary precision integer in 15-bit digits.
    pub const LONG: u8 = b'l';
    /// `f`: float as decimal text with a one-byte length (format versions 0 and 1).
    pub const FLOAT: u8 = b'f';
    /// `g`: float as IEEE 754 binary64, little-endian (format version 2).
    pub const BINARY_FLOAT: u8 = b'g';
    /// `s`: byte string.
    pub const STRING: u8 = b's';
    /// `t`: interned byte string; appended to the reference table.
    pub const INTERNED: u8 = b't';
    /// `R`: reference to the n-th interned string.
    pub const STRINGREF: u8 = b'R';
    /// `u`: unicode string, UTF-8 encoded.
    pub const UNICODE: u8 = b'u';
    /// `(`: tuple.
    pub const TUPLE: u8 = b'(';
    /// `[`: list.
    pub const LIST: u8 = b'[';
    /// `{`: dict, pairs until [`NULL`].
    pub const DICT: u8 = b'{';
    /// `0`: the end of a dict.
    pub const NULL: u8 = b'0';
    /// `<`: set.
    pub const SET: u8 = b'<';
    /// `>`: frozenset.
    pub const FROZENSET: u8 = b'>';
}

/// How an integer is written on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum IntForm {
    /// `'i'` when the value fits in `i32`, `'l'` otherwise: what `marshal.dumps` writes.
    #[default]
    Auto,
    /// Always `'I'` (a CPython 2 `int` wider than 32 bits on a 64-bit host).
    Int64,
    /// Always `'l'` (a CPython 2 `long`, even a small one such as `5L`).
    Long,
}

/// How a byte string is written on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StrForm {
    /// `'s'`.
    #[default]
    Plain,
    /// `'t'`: interned; the decoder appends it to the reference table.
    Interned,
    /// `'R'` with this index into the reference table of interned strings.
    Ref(u32),
    /// `'u'`: a unicode string, UTF-8 encoded.
    Unicode,
}

/// The pairs of a marshal dict, in wire order (duplicates kept as they came).
pub type Dict<'a> = Vec<(Value<'a>, Value<'a>)>;

/// One decoded marshal object.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    /// `N`.
    None,
    /// `T` / `F`.
    Bool(bool),
    /// An integer that fits in `i64` (`'i'`, `'I'` or `'l'`).
    Int(i64, IntForm),
    /// An `'l'` integer outside the `i64` range.
    BigInt(Box<BigInt>),
    /// A `'g'` float.
    Float(f64),
    /// An `'f'` float, kept as the decimal text it arrived in (at most 255 bytes).
    FloatText(Cow<'a, [u8]>),
    /// A byte string (`'s'`, `'t'`, `'R'` or `'u'`).
    Bytes(Cow<'a, [u8]>, StrForm),
    /// `(`.
    Tuple(Vec<Value<'a>>),
    /// `[`.
    List(Vec<Value<'a>>),
    /// `{`.
    Dict(Dict<'a>),
    /// `<`.
    Set(Vec<Value<'a>>),
    /// `>`.
    FrozenSet(Vec<Value<'a>>),
}

impl<'a> Value<'a> {
    /// A canonical integer.
    pub fn int(v: i64) -> Self {
        Value::Int(v, IntForm::Auto)
    }

    /// A plain (`'s'`) byte string borrowed from `b`.
    pub fn bytes(b: &'a [u8]) -> Self {
        Value::Bytes(Cow::Borrowed(b), StrForm::Plain)
    }

    /// A plain (`'s'`) byte string that owns its bytes.
    pub fn owned_bytes(b: Vec<u8>) -> Self {
        Value::Bytes(Cow::Owned(b), StrForm::Plain)
    }

    /// A tuple.
    pub fn tuple(items: Vec<Value<'a>>) -> Self {
        Value::Tuple(items)
    }

    /// A list.
    pub fn list(items: Vec<Value<'a>>) -> Self {
        Value::List(items)
    }

    /// The integer, when this is an integer inside `i64` (booleans are not integers here).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(v, _) => Some(*v),
            _ => None,
        }
    }

    /// The float value of a `'g'` or `'f'` float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(f) => Some(*f),
            Value::FloatText(t) => decode::parse_float_text(t),
            _ => None,
        }
    }

    /// The bytes of any string form.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Bytes(b, _) => Some(b),
            _ => None,
        }
    }

    /// The items of a tuple.
    pub fn as_tuple(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::Tuple(items) => Some(items),
            _ => None,
        }
    }

    /// The items of a list.
    pub fn as_list(&self) -> Option<&[Value<'a>]> {
        match self {
            Value::List(items) => Some(items),
            _ => None,
        }
    }

    /// The pairs of a dict.
    pub fn as_dict(&self) -> Option<&[(Value<'a>, Value<'a>)]> {
        match self {
            Value::Dict(pairs) => Some(pairs),
            _ => None,
        }
    }

    /// True for `None`.
    pub fn is_none(&self) -> bool {
        matches!(self, Value::None)
    }

    /// The value of the first pair whose key is the byte string `key` (any string form).
    pub fn get(&self, key: &[u8]) -> Option<&Value<'a>> {
        dict_get(self.as_dict()?, key)
    }

    /// A copy that owns all its bytes, so it can outlive the input buffer.
    pub fn into_owned(self) -> Value<'static> {
        fn all(items: Vec<Value<'_>>) -> Vec<Value<'static>> {
            items.into_iter().map(Value::into_owned).collect()
        }
        match self {
            Value::None => Value::None,
            Value::Bool(b) => Value::Bool(b),
            Value::Int(v, f) => Value::Int(v, f),
            Value::BigInt(b) => Value::BigInt(b),
            Value::Float(f) => Value::Float(f),
            Value::FloatText(t) => Value::FloatText(Cow::Owned(t.into_owned())),
            Value::Bytes(b, f) => Value::Bytes(Cow::Owned(b.into_owned()), f),
            Value::Tuple(v) => Value::Tuple(all(v)),
            Value::List(v) => Value::List(all(v)),
            Value::Set(v) => Value::Set(all(v)),
            Value::FrozenSet(v) => Value::FrozenSet(all(v)),
            Value::Dict(pairs) => Value::Dict(
                pairs
                    .into_iter()
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect(),
            ),
        }
    }

    /// A short name of the variant, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(..) | Value::BigInt(_) => "int",
            Value::Float(_) | Value::FloatText(_) => "float",
            Value::Bytes(..) => "string",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Dict(_) => "dict",
            Value::Set(_) => "set",
            Value::FrozenSet(_) => "frozenset",
        }
    }

    /// The value written as Python's `repr()` would write it (strings as `b'...'`, unicode
    /// strings as `'...'`), as in the third column of the golden wire vectors.
    pub fn py_repr(&self) -> String {
        let mut out = String::new();
        repr::write_repr(self, &mut out);
        out
    }
}

/// The value of the first pair of `pairs` whose key is the byte string `key`.
pub fn dict_get<'v, 'a>(pairs: &'v [(Value<'a>, Value<'a>)], key: &[u8]) -> Option<&'v Value<'a>> {
    pairs
        .iter()
        .find(|(k, _)| k.as_bytes() == Some(key))
        .map(|(_, v)| v)
}
