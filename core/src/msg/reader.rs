//! The reader every message type decodes from (see [`super::codec::Codec`]): typed access to
//! the keys of a message dict and to the elements of its tuples, each failure a [`MessageError`]
//! naming the key (and the structure and element) at fault.
//!
//! An FSCMT message is a dict (MS-FSCMT 2.2.1.1), so its [`Reader`] looks keys up rather than
//! walking a cursor; the cursor over the frame's bytes is the fast decoder's (`flat.rs`). The
//! marshal decoder below has already checked every length against the bytes and the limits.

use std::borrow::Cow;

use super::{Key, MessageError};
use crate::marshal::{dict_get, Value};

/// A byte string of a message: borrowed from the frame when decoded, owned when built.
pub type Bytes<'a> = Cow<'a, [u8]>;

/// A reader over the pairs of one message dict; the strings it gives borrow from the frame.
///
/// The accessors here and on [`Tuple`] are `#[inline]` so that each shape's `read` compiles to
/// straight-line lookups whichever codegen unit it lands in: without it, `Message::from_dict`
/// over the golden vectors took 1,228 instructions a message (cachegrind) against 1,190 for
/// the single match it replaced; with it, 1,125.
pub(crate) struct Reader<'d, 'a> {
    pairs: &'d [(Value<'a>, Value<'a>)],
}

impl<'d, 'a> Reader<'d, 'a> {
    pub(crate) fn new(pairs: &'d [(Value<'a>, Value<'a>)]) -> Self {
        Reader { pairs }
    }

    #[inline]
    pub(crate) fn get(&self, key: Key) -> Option<&'d Value<'a>> {
        dict_get(self.pairs, key.wire().as_bytes())
    }

    #[inline]
    pub(crate) fn req(&self, key: Key) -> Result<&'d Value<'a>, MessageError> {
        self.get(key).ok_or(MessageError::MissingKey(key))
    }

    #[inline]
    pub(crate) fn bytes(&self, key: Key) -> Result<Bytes<'a>, MessageError> {
        as_bytes(key, self.req(key)?)
    }

    #[inline]
    pub(crate) fn opt_bytes(&self, key: Key) -> Result<Option<Bytes<'a>>, MessageError> {
        match self.get(key) {
            None | Some(Value::None) => Ok(None),
            Some(v) => as_bytes(key, v).map(Some),
        }
    }

    #[inline]
    pub(crate) fn int(&self, key: Key) -> Result<i64, MessageError> {
        as_int(key, self.req(key)?)
    }

    #[inline]
    pub(crate) fn opt_int(&self, key: Key) -> Result<Option<i64>, MessageError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => as_int(key, v).map(Some),
        }
    }

    /// The dict under `key`.
    pub(crate) fn dict(&self, key: Key) -> Result<Value<'a>, MessageError> {
        match self.req(key)? {
            v @ Value::Dict(_) => Ok(v.clone()),
            other => Err(MessageError::WrongType {
                key,
                expected: "dict",
                found: other.type_name(),
            }),
        }
    }

    /// The elements of the tuple `structure` under `key`, which must have `len` of them when
    /// given.
    pub(crate) fn tuple(
        &self,
        key: Key,
        structure: &'static str,
        len: Option<usize>,
    ) -> Result<Tuple<'d, 'a>, MessageError> {
        Tuple::of(key, structure, self.req(key)?, len)
    }
}

/// The elements of a tuple under a key, read by index; a failure names the key, the structure
/// and the index.
pub(crate) struct Tuple<'d, 'a> {
    key: Key,
    structure: &'static str,
    items: &'d [Value<'a>],
}

impl<'d, 'a> Tuple<'d, 'a> {
    /// The tuple `structure` that `v` (under `key`, or nested in it) must be, with `len`
    /// elements when given; a list is accepted in its place.
    #[inline]
    pub(crate) fn of(
        key: Key,
        structure: &'static str,
        v: &'d Value<'a>,
        len: Option<usize>,
    ) -> Result<Self, MessageError> {
        Ok(Tuple {
            key,
            structure,
            items: items(key, structure, v, len)?,
        })
    }

    /// How many elements there are.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Element `i` as it is, for a nested structure.
    #[inline]
    pub(crate) fn value(&self, i: usize) -> Result<&'d Value<'a>, MessageError> {
        self.items
            .get(i)
            .ok_or_else(|| bad(self.key, self.structure, i, "present"))
    }

    #[inline]
    pub(crate) fn bytes(&self, i: usize) -> Result<Bytes<'a>, MessageError> {
        elem_bytes(self.key, self.structure, self.items, i)
    }

    #[inline]
    pub(crate) fn opt_bytes(&self, i: usize) -> Result<Option<Bytes<'a>>, MessageError> {
        elem_opt_bytes(self.key, self.structure, self.items, i)
    }

    #[inline]
    pub(crate) fn int(&self, i: usize) -> Result<i64, MessageError> {
        elem_int(self.key, self.structure, self.items, i)
    }

    #[inline]
    pub(crate) fn bool(&self, i: usize) -> Result<bool, MessageError> {
        elem_bool(self.key, self.structure, self.items, i)
    }
}

fn as_bytes<'a>(key: Key, v: &Value<'a>) -> Result<Bytes<'a>, MessageError> {
    match v {
        Value::Bytes(b, _) => Ok(b.clone()),
        other => Err(MessageError::WrongType {
            key,
            expected: "string",
            found: other.type_name(),
        }),
    }
}

fn as_int(key: Key, v: &Value<'_>) -> Result<i64, MessageError> {
    match v {
        Value::Int(i, _) => Ok(*i),
        Value::Bool(b) => Ok((*b).into()),
        other => Err(MessageError::WrongType {
            key,
            expected: "integer",
            found: other.type_name(),
        }),
    }
}

/// The items of a tuple (a list is accepted in its place), checked for length.
pub(crate) fn items<'d, 'a>(
    key: Key,
    structure: &'static str,
    v: &'d Value<'a>,
    len: Option<usize>,
) -> Result<&'d [Value<'a>], MessageError> {
    match v {
        Value::Tuple(t) | Value::List(t) if len.is_none_or(|n| n == t.len()) => Ok(t),
        Value::Tuple(t) | Value::List(t) => Err(MessageError::BadLength {
            key,
            structure,
            expected: len.unwrap_or_default(),
            found: t.len(),
        }),
        other => Err(MessageError::WrongType {
            key,
            expected: structure,
            found: other.type_name(),
        }),
    }
}

fn bad(key: Key, structure: &'static str, index: usize, expected: &'static str) -> MessageError {
    MessageError::BadElement {
        key,
        structure,
        index,
        expected,
    }
}

pub(crate) fn elem_bytes<'a>(
    key: Key,
    structure: &'static str,
    t: &[Value<'a>],
    i: usize,
) -> Result<Bytes<'a>, MessageError> {
    match t.get(i) {
        Some(Value::Bytes(b, _)) => Ok(b.clone()),
        _ => Err(bad(key, structure, i, "a string")),
    }
}

pub(crate) fn elem_opt_bytes<'a>(
    key: Key,
    structure: &'static str,
    t: &[Value<'a>],
    i: usize,
) -> Result<Option<Bytes<'a>>, MessageError> {
    match t.get(i) {
        Some(Value::None) => Ok(None),
        Some(Value::Bytes(b, _)) => Ok(Some(b.clone())),
        _ => Err(bad(key, structure, i, "a string or None")),
    }
}

pub(crate) fn elem_int(
    key: Key,
    structure: &'static str,
    t: &[Value<'_>],
    i: usize,
) -> Result<i64, MessageError> {
    match t.get(i) {
        Some(Value::Int(v, _)) => Ok(*v),
        Some(Value::Bool(b)) => Ok((*b).into()),
        _ => Err(bad(key, structure, i, "an integer")),
    }
}

pub(crate) fn elem_opt_int(
    key: Key,
    structure: &'static str,
    t: &[Value<'_>],
    i: usize,
) -> Result<Option<i64>, MessageError> {
    match t.get(i) {
        Some(Value::None) => Ok(None),
        Some(Value::Int(v, _)) => Ok(Some(*v)),
        _ => Err(bad(key, structure, i, "an integer or None")),
    }
}

pub(crate) fn elem_bool(
    key: Key,
    structure: &'static str,
    t: &[Value<'_>],
    i: usize,
) -> Result<bool, MessageError> {
    elem_int(key, structure, t, i).map(|v| v != 0)
}

/// A list of strings (a tuple is accepted in its place).
pub(crate) fn string_list<'a>(
    key: Key,
    structure: &'static str,
    v: &Value<'a>,
) -> Result<Vec<Bytes<'a>>, MessageError> {
    let t = items(key, structure, v, None)?;
    (0..t.len())
        .map(|i| elem_bytes(key, structure, t, i))
        .collect()
}

/// A marshal list of byte strings borrowed from `list`.
pub(crate) fn string_list_value<'s>(list: &'s [Bytes<'_>]) -> Value<'s> {
    Value::List(list.iter().map(|b| Value::bytes(b)).collect())
}

/// `None` or a borrowed byte string.
pub(crate) fn opt_bytes_value<'s>(b: &'s Option<Bytes<'_>>) -> Value<'s> {
    b.as_deref().map_or(Value::None, Value::bytes)
}
